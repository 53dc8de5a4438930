let n = 2000000
(* loop: Collatz sequences. For every start i from 1 to n, count the steps
   of x -> x / 2 (x even), x -> 3x + 1 (x odd) until x reaches 1; print the
   total number of steps, and the start with the longest sequence with its
   length. Written with references and loops, as OCaml writes mutation. *)
let () =
  let total = ref 0 and best = ref 1 and best_steps = ref 0 in
  for i = 1 to n do
    let x = ref i and steps = ref 0 in
    while !x <> 1 do
      if !x mod 2 = 0 then x := !x / 2 else x := 3 * !x + 1;
      incr steps
    done;
    total := !total + !steps;
    if !steps > !best_steps then begin best := i; best_steps := !steps end
  done;
  Printf.printf "%d %d %d\n" !total !best !best_steps
