(import (chezscheme)) (define n 13)
;; nqueens: count the ways to put n queens on an n-by-n board so that no
;; two attack each other. A partial board is the list of the columns of the
;; queens placed so far, the latest row first.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (safe? c queens d)
  (or (null? queens)
      (let ([q (car queens)])
        (and (not (= q c)) (not (= q (- c d))) (not (= q (+ c d)))
             (safe? c (cdr queens) (+ d 1))))))

(define (solutions n row queens)
  (if (= row n) 1 (columns n row queens 0 0)))

(define (columns n row queens c count)
  (if (= c n)
      count
      (let ([here (if (safe? c queens 1) (solutions n (+ row 1) (cons c queens)) 0)])
        (columns n row queens (+ c 1) (+ count here)))))

(define (queens n) (solutions n 0 '()))

(let* ([a (queens 6)] [b (queens 8)]) (print a b (queens n)))
