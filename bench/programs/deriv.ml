let n = 200
(* deriv: symbolic differentiation. The product (x + 1)(x + 2)...(x + 12)
   is differentiated three times by rules that simplify as they build
   (0 + e = e, 1 * e = e, 0 * e = 0, constants folded), and each derivative
   is evaluated at x = 1 ... 10, modulo 1000003. Repeated n times, with the
   constants shifted by the round. *)
type expr = Num of int | X | Add of expr * expr | Mul of expr * expr

let p = 1000003

let add a b = match a, b with
  | Num 0, _ -> b
  | _, Num 0 -> a
  | Num x, Num y -> Num ((x + y) mod p)
  | _ -> Add (a, b)

let mul a b = match a, b with
  | Num 0, _ -> Num 0
  | _, Num 0 -> Num 0
  | Num 1, _ -> b
  | _, Num 1 -> a
  | Num x, Num y -> Num (x * y mod p)
  | _ -> Mul (a, b)

let rec d = function
  | Num _ -> Num 0
  | X -> Num 1
  | Add (a, b) -> let da = d a in add da (d b)
  | Mul (a, b) -> let da = d a in let left = mul da b in add left (mul a (d b))

let rec eval e x = match e with
  | Num c -> c
  | X -> x
  | Add (a, b) -> let va = eval a x in (va + eval b x) mod p
  | Mul (a, b) -> let va = eval a x in va * eval b x mod p

(* (x + r + 1)(x + r + 2)...(x + r + k) *)
let rec product r i k =
  if i = k then add X (Num (r + i)) else let f = add X (Num (r + i)) in mul f (product r (i + 1) k)

let rec values e x sum = if x > 10 then sum else values e (x + 1) ((sum + eval e x) mod p)

let round r =
  let e1 = d (product r 1 12) in
  let e2 = d e1 in
  let e3 = d e2 in
  (values e1 1 0 + values e2 1 0 + values e3 1 0) mod p

let rec rounds r total = if r = n then total else rounds (r + 1) ((total + round r) mod p)

let () =
  let first = round 0 in
  Printf.printf "%d %d\n" first (rounds 0 0)
