let n = 5500000
(* raiseparse: a parser of arithmetic expressions that raises on bad input.
   n inputs are generated from a seeded random sequence: expressions of
   digits, +, -, * and parentheses, as lists of character codes (as in the L
   version), in which about one digit in 12 is a '?'. The parser (expression,
   term, factor, by recursive descent) evaluates each input modulo 10007 or
   raises Bad (c + 1) at the first unexpected character c (Bad 0 at an early
   end); the caller counts the good inputs and the bad. *)
exception Bad of int

let next s = s * 48271 mod 2147483647

let rec gen d s rest =
  let s1 = next s in
  if d = 0 || s1 mod 3 = 0 then (s1, (if s1 mod 12 = 0 then 63 else 48 + s1 / 3 mod 10) :: rest)
  else if s1 mod 4 = 1 then
    let (s2, inner) = gen (d - 1) s1 (41 :: rest) in
    (s2, 40 :: inner)
  else
    let (s2, right) = gen (d - 1) s1 rest in
    gen (d - 1) s2 ((if s1 mod 5 < 2 then 43 else if s1 mod 5 < 4 then 42 else 45) :: right)

let bad = function
  | c :: _ -> raise (Bad (c + 1))
  | [] -> raise (Bad 0)

let rec factor s = match s with
  | c :: rest ->
    if c >= 48 && c <= 57 then (c - 48, rest)
    else if c = 40 then
      let (v, r) = expr rest in
      (match r with
       | 41 :: r2 -> (v, r2)
       | _ -> bad r)
    else bad s
  | [] -> bad s

and term s =
  let (v, r) = factor s in
  term_rest v r

and term_rest v s = match s with
  | 42 :: rest ->
    let (w, r) = factor rest in
    term_rest (v * w mod 10007) r
  | _ -> (v, s)

and expr s =
  let (v, r) = term s in
  expr_rest v r

and expr_rest v s = match s with
  | 43 :: rest ->
    let (w, r) = term rest in
    expr_rest ((v + w) mod 10007) r
  | 45 :: rest ->
    let (w, r) = term rest in
    expr_rest ((v - w + 10007) mod 10007) r
  | _ -> (v, s)

let parse s =
  let (v, r) = expr s in
  match r with
  | [] -> v
  | _ -> bad r

(* The good inputs' values are at least 0, the bad ones' outcomes below 0. *)
let outcome input = try parse input with Bad c -> -1 - c

let rec run i s good nbad sum =
  if i = n then Printf.printf "%d %d %d\n" good nbad sum
  else
    let (s2, input) = gen 6 s [] in
    let v = outcome input in
    if v >= 0 then run (i + 1) s2 (good + 1) nbad ((sum + v) mod 1000003)
    else run (i + 1) s2 good (nbad + 1) ((sum - v - 1) mod 1000003)

let () = run 0 1 0 0 0
