(import (chezscheme)) (define n 10000)
;; fold: higher-order functions on a list of 1000 numbers, n rounds. Each
;; round maps a composition of closures over the list, then folds it with a
;; curried function, which makes a new closure for every element.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (range a b) (if (> a b) '() (cons a (range (+ a 1) b))))

(define (map* list f)
  (if (null? list) '() (let ([y (f (car list))]) (cons y (map* (cdr list) f)))))

;; fold with a curried function: ((f acc) x).
(define (fold list acc f)
  (if (null? list) acc (fold (cdr list) ((f acc) (car list)) f)))

(define (compose f g) (lambda (x) (f (g x))))
(define (adder k) (lambda (x) (+ x k)))
(define (scaler k) (lambda (x) (* x k)))

(define xs (range 1 1000))

(define (round* i)
  (let ([f (compose (adder i) (scaler (+ (remainder i 7) 1)))]
        [hash (lambda (acc) (lambda (x) (remainder (+ (* acc 31) x i) 1000003)))])
    (fold (map* xs f) i hash)))

(define (rounds i total)
  (if (= i n) total (rounds (+ i 1) (remainder (+ total (round* i)) 1000003))))

(let* ([a (round* 0)] [b (round* 1)]) (print a b (rounds 0 0)))
