let n = 11
(* tak: the Takeuchi function, called as tak(3n, 2n, n). *)
let rec tak x y z = if y < x then tak (tak (x - 1) y z) (tak (y - 1) z x) (tak (z - 1) x y) else z

let () = Printf.printf "%d\n" (tak (3 * n) (2 * n) n)
