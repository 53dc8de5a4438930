(import (chezscheme)) (define n 40)
;; fib: the naive doubly recursive Fibonacci function.
(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))

(display (fib n))
(newline)
