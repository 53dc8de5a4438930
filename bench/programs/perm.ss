(import (chezscheme)) (define n 100)
;; perm: all the permutations of a list, as lists. The 40320 permutations
;; of 1 .. 8 are made by inserting 1 at every place of each permutation of
;; 2 .. 8, recursively; the permutations share their tails. Each is read as
;; a decimal number, and the numbers are hashed in the order they were
;; made. Repeated n times: allocation-heavy, with lists that live for a
;; round.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define k 8)

(define (range a b) (if (> a b) '() (cons a (range (+ a 1) b))))

;; The reverse of a, then b.
(define (append-rev a b) (if (null? a) b (append-rev (cdr a) (cons (car a) b))))

;; x inserted at every place of (append (reverse prefix) suffix), from the
;; first place to the last, each list consed onto acc.
(define (inserts x prefix suffix acc)
  (let ([here (cons (append-rev prefix (cons x suffix)) acc)])
    (if (null? suffix)
        here
        (inserts x (cons (car suffix) prefix) (cdr suffix) here))))

(define (insert-all x ps acc)
  (if (null? ps) acc (insert-all x (cdr ps) (inserts x '() (car ps) acc))))

(define (perms l) (if (null? l) '(()) (insert-all (car l) (perms (cdr l)) '())))

(define (number p v) (if (null? p) v (number (cdr p) (+ (* v 10) (car p)))))

(define (hash ps h) (if (null? ps) h (hash (cdr ps) (remainder (+ (* h 31) (number (car ps) 0)) 1000003))))

(define (rounds i total)
  (if (= i n) total (rounds (+ i 1) (remainder (+ total (hash (perms (range 1 k)) i)) 1000003))))

(let ([first (hash (perms (range 1 k)) 0)]) (print first (rounds 0 0)))
