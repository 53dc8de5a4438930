let n = 100000
(* interp: an interpreter for a small imperative language, whose
   expressions (ten constructors) and statements (five) are variant types,
   run on a program of that language that counts and sums the primes below
   n by trial division. The interpreted program's six variables are
   numbered. This is bench/programs/interp.ml written as L must write it
   (bench/same_program.py): L has no arrays, so the environment is a record
   of six numbers, replaced by a new one at every assignment, and a
   variable is read by matching on its number, as in interp.l.
   Dominated by matching on the constructors and the recursion of eval. *)
type expr =
  | Lit of int
  | Var of int
  | Add of expr * expr
  | Sub of expr * expr
  | Mul of expr * expr
  | Mod of expr * expr
  | Less of expr * expr
  | Equal of expr * expr
  | And of expr * expr
  | Not of expr

type stmt =
  | Assign of int * expr
  | Seq of stmt * stmt
  | If of expr * stmt * stmt
  | While of expr * stmt
  | Skip

type env = Env of int * int * int * int * int * int

let get env k = match env with Env (a, b, c, d, e, f) ->
  (match k with 0 -> a | 1 -> b | 2 -> c | 3 -> d | 4 -> e | _ -> f)

let set env k v = match env with Env (a, b, c, d, e, f) ->
  (match k with 0 -> Env (v, b, c, d, e, f) | 1 -> Env (a, v, c, d, e, f) | 2 -> Env (a, b, v, d, e, f)
   | 3 -> Env (a, b, c, v, e, f) | 4 -> Env (a, b, c, d, v, f) | _ -> Env (a, b, c, d, e, v))

let rec eval e env = match e with
  | Lit v -> v
  | Var k -> get env k
  | Add (a, b) -> let x = eval a env in x + eval b env
  | Sub (a, b) -> let x = eval a env in x - eval b env
  | Mul (a, b) -> let x = eval a env in x * eval b env
  | Mod (a, b) -> let x = eval a env in x mod eval b env
  | Less (a, b) -> let x = eval a env in if x < eval b env then 1 else 0
  | Equal (a, b) -> let x = eval a env in if x = eval b env then 1 else 0
  | And (a, b) -> if eval a env = 0 then 0 else eval b env
  | Not a -> if eval a env = 0 then 1 else 0

let rec exec s env = match s with
  | Assign (k, e) -> set env k (eval e env)
  | Seq (a, b) -> exec b (exec a env)
  | If (c, a, b) -> if eval c env <> 0 then exec a env else exec b env
  | While (c, body) -> if eval c env <> 0 then exec s (exec body env) else env
  | Skip -> env

(* The variables of the interpreted program. *)
let limit = 0 and i = 1 and j = 2 and prime = 3 and count = 4 and sum = 5

(* count := 0; sum := 0; i := 2
   while (i < limit) {
     j := 2; prime := 1
     while (prime && !(i < j * j)) { if (i % j == 0) prime := 0; j := j + 1 }
     if (prime) { count := count + 1; sum := sum + i }
     i := i + 1
   } *)
let program =
  Seq (Assign (count, Lit 0), Seq (Assign (sum, Lit 0), Seq (Assign (i, Lit 2),
    While (Less (Var i, Var limit),
      Seq (Assign (j, Lit 2), Seq (Assign (prime, Lit 1),
      Seq (While (And (Var prime, Not (Less (Var i, Mul (Var j, Var j)))),
             Seq (If (Equal (Mod (Var i, Var j), Lit 0), Assign (prime, Lit 0), Skip),
                  Assign (j, Add (Var j, Lit 1)))),
      Seq (If (Var prime, Seq (Assign (count, Add (Var count, Lit 1)), Assign (sum, Add (Var sum, Var i))), Skip),
           Assign (i, Add (Var i, Lit 1))))))))))

let () =
  let env = exec program (Env (n, 0, 0, 0, 0, 0)) in
  Printf.printf "%d %d\n" (get env count) (get env sum)
