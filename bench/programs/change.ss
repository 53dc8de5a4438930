(import (chezscheme)) (define n 400)
;; change: the number of ways to change an amount into coins of 50, 25,
;; 10, 5 and 1 (Abelson and Sussman's count-change), by the tree recursion
;; that either uses the first coin of the list once more or drops it. For
;; the amounts n - 4 .. n. Nothing is allocated.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (ways amount coins)
  (cond [(null? coins) 0]
        [(= amount 0) 1]
        [(< amount 0) 0]
        [else (+ (ways amount (cdr coins)) (ways (- amount (car coins)) coins))]))

(define coins '(50 25 10 5 1))

(define (total amount sum) (if (> amount n) sum (total (+ amount 1) (+ sum (ways amount coins)))))

(let ([first (ways n coins)]) (print first (total (- n 4) 0)))
