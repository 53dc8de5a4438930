let n = 200000
(* rbtree: a balanced search tree, Sedgewick's left-leaning red-black tree.
   n pseudo-random keys (the Lehmer generator x -> 48271 x mod 2^31 - 1)
   are inserted, each with its index as value; then the same n keys and n
   keys that are mostly absent (each plus one) are looked up. Prints the
   keys found, the sum of their values modulo 1000003, and the tree's
   height. The tree is persistent, as an OCaml programmer writes it: an
   insertion copies the path it walks, and matching on nested constructors
   does the rotations. *)
type color = Red | Black
type tree = Leaf | Node of color * tree * int * int * tree

let m = 2147483647

let next x = 48271 * x mod m

let is_red = function Node (Red, _, _, _, _) -> true | _ -> false

(* The three repairs of a node, in Sedgewick's order: lean left, split a
   double red on the left, and flip the colours of a 4-node. *)
let lean t = match t with
  | Node (c, l, k, v, Node (Red, rl, rk, rv, rr)) ->
    if is_red l then t else Node (c, Node (Red, l, k, v, rl), rk, rv, rr)
  | _ -> t

let split t = match t with
  | Node (c, Node (Red, (Node (Red, _, _, _, _) as a), lk, lv, lr), k, v, r) ->
    Node (c, a, lk, lv, Node (Red, lr, k, v, r))
  | _ -> t

let flip t = match t with
  | Node (_, Node (Red, a, lk, lv, b), k, v, Node (Red, c, rk, rv, d)) ->
    Node (Red, Node (Black, a, lk, lv, b), k, v, Node (Black, c, rk, rv, d))
  | _ -> t

let rec insert t key value = match t with
  | Leaf -> Node (Red, Leaf, key, value, Leaf)
  | Node (c, l, k, v, r) ->
    flip (split (lean (
      if key < k then Node (c, insert l key value, k, v, r)
      else if key > k then Node (c, l, k, v, insert r key value)
      else Node (c, l, k, value, r))))

let blacken = function
  | Node (_, l, k, v, r) -> Node (Black, l, k, v, r)
  | Leaf -> Leaf

(* The value of key, or -1. *)
let rec find t key = match t with
  | Leaf -> -1
  | Node (_, l, k, v, r) -> if key < k then find l key else if key > k then find r key else v

let rec height = function
  | Leaf -> 0
  | Node (_, l, _, _, r) -> 1 + max (height l) (height r)

let rec build i x t = if i = n then t else build (i + 1) (next x) (blacken (insert t x i))

(* Look up the keys x + delta, x the generator's first n numbers. *)
let rec look t i x delta found sum =
  if i = n then (found, sum)
  else
    let v = find t (x + delta) in
    if v >= 0 then look t (i + 1) (next x) delta (found + 1) ((sum + v) mod 1000003)
    else look t (i + 1) (next x) delta found sum

let () =
  let t = build 0 42 Leaf in
  let found, sum = look t 0 42 0 0 0 in
  let found, sum = look t 0 42 1 found sum in
  Printf.printf "%d %d %d\n" found sum (height t)
