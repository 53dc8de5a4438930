let n = 500000
(* live: a large structure stays alive while the program allocates. A
   balanced binary search tree maps the keys 0 ... n - 1 to numbers; it is
   updated 4n times without mutation (each update copies the path from the
   root to the key), at keys drawn by the Park-Miller generator. *)
type tree = Node of tree * int * int * tree | Leaf

let rec build lo hi =
  if lo > hi then Leaf
  else
    let mid = (lo + hi) / 2 in
    let left = build lo (mid - 1) in
    Node (left, mid, 0, build (mid + 1) hi)

let rec update t k delta = match t with
  | Node (left, key, value, right) ->
    if k < key then Node (update left k delta, key, value, right)
    else if k > key then Node (left, key, value, update right k delta)
    else Node (left, key, value + delta, right)
  | Leaf -> Leaf

let rec updates t i x =
  if i = 0 then t
  else
    let y = x * 16807 mod 2147483647 in
    updates (update t (y mod n) (y mod 7 + 1)) (i - 1) y

let rec checksum t sum = match t with
  | Node (left, key, value, right) -> checksum right (checksum left ((sum + key * value) mod 1000003))
  | Leaf -> sum

let () = Printf.printf "%d\n" (checksum (updates (build 0 (n - 1)) (4 * n) 1) 0)
