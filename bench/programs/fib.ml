let n = 40
(* fib: the naive doubly recursive Fibonacci function. *)
let rec fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)

let () = Printf.printf "%d\n" (fib n)
