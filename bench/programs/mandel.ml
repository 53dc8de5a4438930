let n = 1000
(* mandel: the Mandelbrot set in fixed-point arithmetic. An n x n grid over
   the square -2 .. 0.5, -1.25 .. 1.25 of the complex plane; every point c
   is iterated z -> z^2 + c, at most 64 times, while |z|^2 <= 4. Numbers
   are integers scaled by 2^16, and a product is divided back by 2^16,
   truncating toward zero. Prints how many points stayed (are in the set)
   and the iterations done in all. Written with references and loops. *)
let scale = 65536
let most = 64

let () =
  let inside = ref 0 and iterations = ref 0 in
  for row = 0 to n - 1 do
    let ci = row * 5 * scale / (2 * n) - 5 * scale / 4 in
    for column = 0 to n - 1 do
      let cr = column * 5 * scale / (2 * n) - 2 * scale in
      let x = ref 0 and y = ref 0 and xx = ref 0 and yy = ref 0 and i = ref 0 in
      while !i < most && !xx + !yy <= 4 * scale do
        y := 2 * !x * !y / scale + ci;
        x := !xx - !yy + cr;
        xx := !x * !x / scale;
        yy := !y * !y / scale;
        incr i
      done;
      if !i = most then incr inside;
      iterations := !iterations + !i
    done
  done;
  Printf.printf "%d %d\n" !inside !iterations
