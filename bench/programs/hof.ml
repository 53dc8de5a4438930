let n = 2000
(* hof: closure calls through higher-order functions. Each round makes
   five closures that capture the round's numbers (an adder, a scaler, a
   polynomial, a composition of two closures, and one that applies a
   closure twice), then folds over the numbers 1 .. 1000 with a function
   that applies every closure of a list to each number. Nearly every call
   is an unknown call through a closure; little is allocated. *)
let p = 1000003

let rec fold_range a b acc f = if a > b then acc else fold_range (a + 1) b (f acc a) f

let rec apply_all fs x acc = match fs with
  | f :: rest -> apply_all rest x ((acc + f x) mod p)
  | [] -> acc

let compose f g = fun x -> f (g x)
let adder k = fun x -> x + k
let scaler k = fun x -> x * k
let poly a b = fun x -> (x * x + a * x + b) mod p
let twice f = fun x -> f (f x)

let round i =
  let fs = [adder i; scaler (i mod 7 + 1); poly (i mod 5) (i mod 3);
            compose (adder 1) (scaler 3); twice (adder (i mod 11))] in
  fold_range 1 1000 i (fun acc x -> (acc * 31 + apply_all fs x 0) mod p)

let rec rounds i total = if i = n then total else rounds (i + 1) ((total + round i) mod p)

let () =
  let r0 = round 0 in
  let r1 = round 1 in
  Printf.printf "%d %d %d\n" r0 r1 (rounds 0 0)
