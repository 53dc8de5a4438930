(import (chezscheme)) (define n 60000)
;; primes: the sieve of Eratosthenes on lists. Build the list 2, 3, ..., n;
;; its first number is a prime: strike its multiples out of the rest, and
;; sieve what is left. Every filter builds a new list. (range and filter
;; are written out, so that they do what L's do.)
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (range a b) (if (> a b) '() (cons a (range (+ a 1) b))))

(define (filter* list keep?)
  (cond [(null? list) '()]
        [(keep? (car list)) (cons (car list) (filter* (cdr list) keep?))]
        [else (filter* (cdr list) keep?)]))

(define (sieve list)
  (if (null? list)
      '()
      (let ([p (car list)])
        (cons p (sieve (filter* (cdr list) (lambda (x) (not (= (remainder x p) 0)))))))))

(define (count-and-sum list count sum)
  (if (null? list)
      (print count sum)
      (count-and-sum (cdr list) (+ count 1) (+ sum (car list)))))

(count-and-sum (sieve (range 2 n)) 0 0)
