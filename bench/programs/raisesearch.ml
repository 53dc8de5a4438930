let n = 240
(* raisesearch: backtracking by exceptions. Find the first placement of k
   queens on a k-by-k board, for k from 8 to 20 in turn, n times over. A
   partial board is the list of the columns of the queens placed so far,
   the latest row first. A row in which no column is safe raises Dead; the
   caller that placed the queen above catches it and tries its next column. *)
exception Dead

let rec safe c queens d = match queens with
  | q :: rest -> q <> c && q <> c - d && q <> c + d && safe c rest (d + 1)
  | [] -> true

let rec solve k row queens = if row = k then queens else place k row queens 0

and place k row queens c =
  if c = k then raise Dead
  else if safe c queens 1 then
    (try solve k (row + 1) (c :: queens) with Dead -> place k row queens (c + 1))
  else place k row queens (c + 1)

let rec checksum queens h = match queens with
  | q :: rest -> checksum rest ((h * 31 + q) mod 1000003)
  | [] -> h

let rec run i total =
  if i = n then total
  else run (i + 1) ((total + checksum (solve (8 + i mod 13) 0 []) 0) mod 1000003)

let () = Printf.printf "%d\n" (run 0 0)
