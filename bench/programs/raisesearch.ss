(import (chezscheme)) (define n 240)
;; raisesearch: backtracking by exceptions. Find the first placement of k
;; queens on a k-by-k board, for k from 8 to 20 in turn, n times over. A
;; partial board is the list of the columns of the queens placed so far, the
;; latest row first. A row in which no column is safe raises Dead (R6RS
;; raise, caught by guard); the caller that placed the queen above catches
;; it and tries its next column.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define dead (list 'dead))

(define (safe? c queens d)
  (or (null? queens)
      (let ([q (car queens)])
        (and (not (= q c)) (not (= q (- c d))) (not (= q (+ c d)))
             (safe? c (cdr queens) (+ d 1))))))

(define (solve k row queens)
  (if (= row k) queens (place k row queens 0)))

(define (place k row queens c)
  (cond
    [(= c k) (raise dead)]
    [(safe? c queens 1)
     (let ([found (guard (e [(eq? e dead) #f]) (solve k (+ row 1) (cons c queens)))])
       (or found (place k row queens (+ c 1))))]
    [else (place k row queens (+ c 1))]))

(define (checksum queens h)
  (if (null? queens) h (checksum (cdr queens) (modulo (+ (* h 31) (car queens)) 1000003))))

(define (run i total)
  (if (= i n)
      total
      (run (+ i 1) (modulo (+ total (checksum (solve (+ 8 (modulo i 13)) 0 '()) 0)) 1000003))))

(print (run 0 0))
