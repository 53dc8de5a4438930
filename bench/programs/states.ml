let n = 50000000
(* states: a state machine written as three mutually recursive functions,
   every call a tail call. It reads n symbols 0, 1, 2 made by the linear
   congruential generator x -> (25173 x + 13849) mod 65536 (the symbol is
   (x / 256) mod 3) and counts the occurrences of the word 0 1 2. *)
let next x = (x * 25173 + 13849) mod 65536

(* s0: nothing of the word seen yet; s1: "0" seen; s2: "0 1" seen. *)
let rec s0 i x count =
  if i = n then count
  else
    let y = next x in
    if y / 256 mod 3 = 0 then s1 (i + 1) y count else s0 (i + 1) y count

and s1 i x count =
  if i = n then count
  else
    let y = next x in
    let c = y / 256 mod 3 in
    if c = 0 then s1 (i + 1) y count else if c = 1 then s2 (i + 1) y count else s0 (i + 1) y count

and s2 i x count =
  if i = n then count
  else
    let y = next x in
    let c = y / 256 mod 3 in
    if c = 0 then s1 (i + 1) y count else if c = 1 then s0 (i + 1) y count else s0 (i + 1) y (count + 1)

let () = Printf.printf "%d\n" (s0 0 1 0)
