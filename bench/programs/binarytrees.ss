(import (chezscheme)) (define n 16)
;; binarytrees: allocation of binary trees, as in the Computer Language
;; Benchmarks Game. A tree of depth n + 1 is made and checked (its nodes
;; counted); a tree of depth n is made and kept alive to the end; then, for
;; every even depth d from 4 to n, 2^(n - d + 4) trees of depth d are made
;; and checked, each garbage as soon as it has been. A node is a pair, a
;; leaf the empty list.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (make d) (if (= d 0) '() (let ([left (make (- d 1))]) (cons left (make (- d 1))))))

(define (check t) (if (null? t) 1 (let ([l (check (car t))]) (+ 1 l (check (cdr t))))))

(define (many i d sum) (if (= i 0) sum (many (- i 1) d (+ sum (check (make d))))))

(print (+ n 1) (check (make (+ n 1))))
(let ([long-lived (make n)])
  (let loop ([d 4])
    (when (<= d n)
      (let ([iterations (expt 2 (+ (- n d) 4))])
        (print iterations d (many iterations d 0))
        (loop (+ d 2)))))
  (print n (check long-lived)))
