(import (chezscheme)) (define n 20000)
;; divrec: recursive division by two on lists, after the r7rs benchmark of
;; that name. A list of 1000 numbers is halved (every other element kept)
;; by a recursion that builds the result as it returns; the halving is
;; repeated n times, and each result is summed. Allocation-heavy: each round
;; makes a list of 500 cells that is garbage at once.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (create k acc) (if (= k 0) acc (create (- k 1) (cons k acc))))

(define (div2 l)
  (if (and (pair? l) (pair? (cdr l)))
      (cons (car l) (div2 (cddr l)))
      '()))

(define (sum l acc) (if (null? l) acc (sum (cdr l) (+ acc (car l)))))

(define xs (create 1000 '()))

(define (rounds i total) (if (= i n) total (rounds (+ i 1) (+ total (sum (div2 xs) i)))))

(let ([first (sum (div2 xs) 0)]) (print first (rounds 0 0)))
