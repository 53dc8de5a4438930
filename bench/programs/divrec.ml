let n = 20000
(* divrec: recursive division by two on lists, after the r7rs benchmark of
   that name. A list of 1000 numbers is halved (every other element kept)
   by a recursion that builds the result as it returns; the halving is
   repeated n times, and each result is summed. Allocation-heavy: each round
   makes a list of 500 cells that is garbage at once. *)
let rec create k acc = if k = 0 then acc else create (k - 1) (k :: acc)

let rec div2 = function
  | x :: _ :: rest -> x :: div2 rest
  | _ -> []

let rec sum list acc = match list with
  | x :: rest -> sum rest (acc + x)
  | [] -> acc

let xs = create 1000 []

let rec rounds i total = if i = n then total else rounds (i + 1) (total + sum (div2 xs) i)

let () =
  let first = sum (div2 xs) 0 in
  Printf.printf "%d %d\n" first (rounds 0 0)
