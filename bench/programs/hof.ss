(import (chezscheme)) (define n 2000)
;; hof: closure calls through higher-order functions. Each round makes
;; five closures that capture the round's numbers (an adder, a scaler, a
;; polynomial, a composition of two closures, and one that applies a
;; closure twice), then folds over the numbers 1 .. 1000 with a function
;; that applies every closure of a list to each number. Nearly every call
;; is an unknown call through a closure; little is allocated.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define p 1000003)

(define (fold-range a b acc f) (if (> a b) acc (fold-range (+ a 1) b (f acc a) f)))

(define (apply-all fs x acc)
  (if (null? fs) acc (apply-all (cdr fs) x (remainder (+ acc ((car fs) x)) p))))

(define (compose f g) (lambda (x) (f (g x))))
(define (adder k) (lambda (x) (+ x k)))
(define (scaler k) (lambda (x) (* x k)))
(define (poly a b) (lambda (x) (remainder (+ (* x x) (* a x) b) p)))
(define (twice f) (lambda (x) (f (f x))))

(define (round* i)
  (let ([fs (list (adder i) (scaler (+ (remainder i 7) 1)) (poly (remainder i 5) (remainder i 3))
                  (compose (adder 1) (scaler 3)) (twice (adder (remainder i 11))))])
    (fold-range 1 1000 i (lambda (acc x) (remainder (+ (* acc 31) (apply-all fs x 0)) p)))))

(define (rounds i total) (if (= i n) total (rounds (+ i 1) (remainder (+ total (round* i)) p))))

(let* ([r0 (round* 0)] [r1 (round* 1)]) (print r0 r1 (rounds 0 0)))
