let n = 13
(* nqueens: count the ways to put n queens on an n-by-n board so that no
   two attack each other. A partial board is the list of the columns of the
   queens placed so far, the latest row first. *)
let rec safe c queens d = match queens with
  | q :: rest -> q <> c && q <> c - d && q <> c + d && safe c rest (d + 1)
  | [] -> true

let rec solutions n row queens =
  if row = n then 1 else columns n row queens 0 0

and columns n row queens c count =
  if c = n then count
  else
    let here = if safe c queens 1 then solutions n (row + 1) (c :: queens) else 0 in
    columns n row queens (c + 1) (count + here)

let queens n = solutions n 0 []

let () = Printf.printf "%d %d %d\n" (queens 6) (queens 8) (queens n)
