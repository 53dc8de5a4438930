(import (chezscheme)) (define n 4000)
;; takl: the Takeuchi function with lists as counters, as in the r7rs
;; benchmarks: a number k is a list of length k, shorter? compares two of
;; them, cdr subtracts one. Each of n rounds builds the lists of 18, 12 and
;; 6 and computes mas(18, 12, 6), a list of length 7; the lengths are added
;; up.
(define (listn k) (if (= k 0) '() (cons k (listn (- k 1)))))

(define (shorter? x y)
  (and (not (null? y)) (or (null? x) (shorter? (cdr x) (cdr y)))))

(define (mas x y z)
  (if (not (shorter? y x))
      z
      (mas (mas (cdr x) y z) (mas (cdr y) z x) (mas (cdr z) x y))))

(define (rounds r total)
  (if (= r 0)
      total
      (rounds (- r 1) (+ total (length (mas (listn 18) (listn 12) (listn 6)))))))

(display (rounds n 0))
(newline)
