(import (chezscheme)) (define n 11)
;; ack: the Ackermann function, ack(3, n) = 2^(n + 3) - 3.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (ack m n)
  (cond [(= m 0) (+ n 1)]
        [(= n 0) (ack (- m 1) 1)]
        [else (ack (- m 1) (ack m (- n 1)))]))

(print (ack 2 n) (ack 3 n))
