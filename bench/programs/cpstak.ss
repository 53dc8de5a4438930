(import (chezscheme)) (define n 200)
;; cpstak: tak(18, 12, 6) written in continuation-passing style, repeated
;; n times. Every call is a tail call, and each one allocates a closure.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (tak x y z k)
  (if (not (< y x))
      (k z)
      (tak (- x 1) y z
           (lambda (v1)
             (tak (- y 1) z x
                  (lambda (v2)
                    (tak (- z 1) x y
                         (lambda (v3) (tak v1 v2 v3 k)))))))))

(define (cpstak x y z) (tak x y z (lambda (a) a)))

(define (repeat i total) (if (= i n) total (repeat (+ i 1) (+ total (cpstak 18 12 6)))))

(let ([first (cpstak 18 12 6)]) (print first (repeat 0 0)))
