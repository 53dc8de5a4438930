(import (chezscheme)) (define n 2000000)
;; loop: Collatz sequences. For every start i from 1 to n, count the steps
;; of x -> x / 2 (x even), x -> 3x + 1 (x odd) until x reaches 1; print the
;; total number of steps, and the start with the longest sequence with its
;; length. Scheme's loops are named lets.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (collatz n)
  (let loop ([i 1] [total 0] [best 1] [best-steps 0])
    (if (> i n)
        (print total best best-steps)
        (let steps ([x i] [s 0])
          (if (= x 1)
              (if (> s best-steps)
                  (loop (+ i 1) (+ total s) i s)
                  (loop (+ i 1) (+ total s) best best-steps))
              (steps (if (even? x) (quotient x 2) (+ (* 3 x) 1)) (+ s 1)))))))

(collatz n)
