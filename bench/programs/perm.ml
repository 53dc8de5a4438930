let n = 100
(* perm: all the permutations of a list, as lists. The 40320 permutations
   of 1 .. 8 are made by inserting 1 at every place of each permutation of
   2 .. 8, recursively; the permutations share their tails. Each is read as
   a decimal number, and the numbers are hashed in the order they were
   made. Repeated n times: allocation-heavy, with lists that live for a
   round. *)
let k = 8

let rec range a b = if a > b then [] else a :: range (a + 1) b

(* The reverse of a, then b. *)
let rec append_rev a b = match a with
  | x :: rest -> append_rev rest (x :: b)
  | [] -> b

(* x inserted at every place of reverse(prefix) @ suffix, from the first
   place to the last, each list consed onto acc. *)
let rec inserts x prefix suffix acc =
  let here = append_rev prefix (x :: suffix) :: acc in
  match suffix with
  | y :: rest -> inserts x (y :: prefix) rest here
  | [] -> here

let rec insert_all x ps acc = match ps with
  | p :: rest -> insert_all x rest (inserts x [] p acc)
  | [] -> acc

let rec perms = function
  | x :: rest -> insert_all x (perms rest) []
  | [] -> [[]]

let rec number p v = match p with
  | x :: rest -> number rest (v * 10 + x)
  | [] -> v

let rec hash ps h = match ps with
  | p :: rest -> hash rest ((h * 31 + number p 0) mod 1000003)
  | [] -> h

let rec rounds i total = if i = n then total else rounds (i + 1) ((total + hash (perms (range 1 k)) i) mod 1000003)

let () =
  let first = hash (perms (range 1 k)) 0 in
  Printf.printf "%d %d\n" first (rounds 0 0)
