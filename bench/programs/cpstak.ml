let n = 200
(* cpstak: tak(18, 12, 6) written in continuation-passing style, repeated
   n times. Every call is a tail call, and each one allocates a closure. *)
let rec tak x y z k =
  if not (y < x) then k z
  else tak (x - 1) y z (fun v1 ->
    tak (y - 1) z x (fun v2 ->
      tak (z - 1) x y (fun v3 -> tak v1 v2 v3 k)))

let cpstak x y z = tak x y z (fun a -> a)

let rec repeat i total = if i = n then total else repeat (i + 1) (total + cpstak 18 12 6)

let () = Printf.printf "%d %d\n" (cpstak 18 12 6) (repeat 0 0)
