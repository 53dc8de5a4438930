let n = 16
(* binarytrees: allocation of binary trees, as in the Computer Language
   Benchmarks Game. A tree of depth n + 1 is made and checked (its nodes
   counted); a tree of depth n is made and kept alive to the end; then, for
   every even depth d from 4 to n, 2^(n - d + 4) trees of depth d are made
   and checked, each garbage as soon as it has been. *)
type tree = Node of tree * tree | Leaf

let rec make d = if d = 0 then Leaf else let left = make (d - 1) in Node (left, make (d - 1))

let rec check = function
  | Node (left, right) -> let l = check left in 1 + l + check right
  | Leaf -> 1

let rec many i d sum = if i = 0 then sum else many (i - 1) d (sum + check (make d))

let () =
  Printf.printf "%d %d\n" (n + 1) (check (make (n + 1)));
  let long_lived = make n in
  let d = ref 4 in
  while !d <= n do
    let iterations = 1 lsl (n - !d + 4) in
    Printf.printf "%d %d %d\n" iterations !d (many iterations !d 0);
    d := !d + 2
  done;
  Printf.printf "%d %d\n" n (check long_lived)
