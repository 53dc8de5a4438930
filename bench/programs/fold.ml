let n = 10000
(* fold: higher-order functions on a list of 1000 numbers, n rounds. Each
   round maps a composition of closures over the list, then folds it with a
   curried function. (OCaml applies a curried function to its two arguments
   at once: it does not make the closure for every element that L makes.) *)
let rec range a b = if a > b then [] else a :: range (a + 1) b

let rec map list f = match list with
  | x :: rest -> let y = f x in y :: map rest f
  | [] -> []

(* fold with a curried function: f acc x. *)
let rec fold list acc f = match list with
  | x :: rest -> fold rest (f acc x) f
  | [] -> acc

let compose f g = fun x -> f (g x)
let adder k = fun x -> x + k
let scaler k = fun x -> x * k

let xs = range 1 1000

let round i =
  let f = compose (adder i) (scaler (i mod 7 + 1)) in
  let hash = fun acc -> fun x -> (acc * 31 + x + i) mod 1000003 in
  fold (map xs f) i hash

let rec rounds i total = if i = n then total else rounds (i + 1) ((total + round i) mod 1000003)

let () =
  let r0 = round 0 in
  let r1 = round 1 in
  Printf.printf "%d %d %d\n" r0 r1 (rounds 0 0)
