let n = 4000
(* takl: the Takeuchi function with lists as counters: a number k is a
   list of length k, shorter compares two of them, cdr subtracts one. Each
   of n rounds builds the lists of 18, 12 and 6 and computes mas(18, 12, 6),
   a list of length 7; the lengths are added up. *)
let rec listn k = if k = 0 then [] else k :: listn (k - 1)

let rec shorter x y = match x, y with
  | _, [] -> false
  | [], _ -> true
  | _ :: x, _ :: y -> shorter x y

let cdr = function _ :: rest -> rest | [] -> []

let rec mas x y z =
  if not (shorter y x) then z else mas (mas (cdr x) y z) (mas (cdr y) z x) (mas (cdr z) x y)

let rec length x k = match x with _ :: rest -> length rest (k + 1) | [] -> k

let rec rounds r total =
  if r = 0 then total else rounds (r - 1) (total + length (mas (listn 18) (listn 12) (listn 6)) 0)

let () = Printf.printf "%d\n" (rounds n 0)
