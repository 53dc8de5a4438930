let n = 100
(* msort: merge sort on lists. Each of n rounds makes a list of 10,000
   pseudo-random numbers (the Park-Miller generator x -> 16807 x mod
   (2^31 - 1), from the seed round + 1), sorts it by splitting it in two
   (alternate elements), sorting the halves and merging them, and folds the
   sorted list into a checksum that depends on the order. *)
let rec random_list k x list =
  if k = 0 then list
  else
    let y = x * 16807 mod 2147483647 in
    random_list (k - 1) y ((y mod 100000) :: list)

let rec split list a b = match list with
  | x :: rest -> split rest (x :: b) a
  | [] -> (a, b)

let rec merge a b = match a, b with
  | x :: xs, y :: ys -> if x <= y then x :: merge xs b else y :: merge a ys
  | [], _ -> b
  | _, [] -> a

let rec sort list = match list with
  | _ :: _ :: _ ->
    let a, b = split list [] [] in
    merge (sort a) (sort b)
  | _ -> list

let rec checksum list i sum = match list with
  | x :: rest -> checksum rest (i + 1) ((sum + i * x) mod 1000003)
  | [] -> sum

let rec rounds r total =
  if r = n then total
  else rounds (r + 1) ((total + checksum (sort (random_list 10000 (r + 1) [])) 1 0) mod 1000003)

let () =
  let first = checksum (sort (random_list 10000 1 [])) 1 0 in
  Printf.printf "%d %d\n" first (rounds 0 0)
