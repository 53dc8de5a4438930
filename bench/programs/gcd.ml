let n = 2000
(* gcd: greatest common divisors by Euclid's algorithm: the sum of gcd(i, j)
   over 1 <= i, j <= n, and the number of pairs with gcd 1. Nested loops of
   integer division, written with references and loops; nothing allocated. *)
let gcd a b =
  let x = ref a and y = ref b in
  while !y <> 0 do
    let r = !x mod !y in
    x := !y;
    y := r
  done;
  !x

let () =
  let sum = ref 0 and coprime = ref 0 in
  for i = 1 to n do
    for j = 1 to n do
      let g = gcd i j in
      sum := !sum + g;
      if g = 1 then incr coprime
    done
  done;
  Printf.printf "%d %d\n" !sum !coprime
