(import (chezscheme)) (define n 2000)
;; gcd: greatest common divisors by Euclid's algorithm: the sum of gcd(i, j)
;; over 1 <= i, j <= n, and the number of pairs with gcd 1. Nested loops
;; of integer division, written as named lets; nothing allocated.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (euclid x y) (if (= y 0) x (euclid y (remainder x y))))

(let rows ([i 1] [sum 0] [coprime 0])
  (if (> i n)
      (print sum coprime)
      (let columns ([j 1] [sum sum] [coprime coprime])
        (if (> j n)
            (rows (+ i 1) sum coprime)
            (let ([g (euclid i j)])
              (columns (+ j 1) (+ sum g) (if (= g 1) (+ coprime 1) coprime)))))))
