let n = 100
(* cpstree: a walk of a complete binary tree of depth 16 in
   continuation-passing style, n times. Every call is a tail call, and each
   inner node allocates two continuations (closures); the value of the walk
   is a hash of the leaves in order. *)
type tree = Node of tree * tree | Leaf of int

let rec make d i = if d = 0 then Leaf i else Node (make (d - 1) (2 * i), make (d - 1) (2 * i + 1))

let rec walk t r k = match t with
  | Leaf v -> k v
  | Node (left, right) -> walk left r (fun a -> walk right r (fun b -> k ((a * 31 + b + r) mod 1000003)))

let tree = make 16 0

let rec rounds r total =
  if r = n then total else rounds (r + 1) ((total + walk tree r (fun h -> h)) mod 1000003)

let () =
  let first = walk tree 0 (fun h -> h) in
  Printf.printf "%d %d\n" first (rounds 0 0)
