let n = 11
(* ack: the Ackermann function, ack(3, n) = 2^(n + 3) - 3. *)
let rec ack m n =
  if m = 0 then n + 1
  else if n = 0 then ack (m - 1) 1
  else ack (m - 1) (ack m (n - 1))

let () = Printf.printf "%d %d\n" (ack 2 n) (ack 3 n)
