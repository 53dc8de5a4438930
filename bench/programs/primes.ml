let n = 60000
(* primes: the sieve of Eratosthenes on lists. Build the list 2, 3, ..., n;
   its first number is a prime: strike its multiples out of the rest, and
   sieve what is left. Every filter builds a new list. (range and filter
   are written out, not taken from List, so that they do what L's do.) *)
let rec range a b = if a > b then [] else a :: range (a + 1) b

let rec filter list keep = match list with
  | x :: rest -> if keep x then x :: filter rest keep else filter rest keep
  | [] -> []

let rec sieve = function
  | p :: rest -> p :: sieve (filter rest (fun x -> x mod p <> 0))
  | [] -> []

let rec count_and_sum list count sum = match list with
  | x :: rest -> count_and_sum rest (count + 1) (sum + x)
  | [] -> (count, sum)

let () =
  let count, sum = count_and_sum (sieve (range 2 n)) 0 0 in
  Printf.printf "%d %d\n" count sum
