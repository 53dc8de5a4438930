let n = 400
(* change: the number of ways to change an amount into coins of 50, 25,
   10, 5 and 1 (Abelson and Sussman's count-change), by the tree recursion
   that either uses the first coin of the list once more or drops it. For
   the amounts n - 4 .. n. Nothing is allocated. *)
let rec ways amount coins = match coins with
  | coin :: rest ->
    if amount = 0 then 1
    else if amount < 0 then 0
    else ways amount rest + ways (amount - coin) coins
  | [] -> 0

let coins = [50; 25; 10; 5; 1]

let rec total amount sum = if amount > n then sum else total (amount + 1) (sum + ways amount coins)

let () =
  let first = ways n coins in
  Printf.printf "%d %d\n" first (total (n - 4) 0)
