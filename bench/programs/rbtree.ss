(import (chezscheme)) (define n 200000)
;; rbtree: a balanced search tree, Sedgewick's left-leaning red-black tree.
;; n pseudo-random keys (the Lehmer generator x -> 48271 x mod 2^31 - 1)
;; are inserted, each with its index as value; then the same n keys and n
;; keys that are mostly absent (each plus one) are looked up. Prints the
;; keys found, the sum of their values modulo 1000003, and the tree's
;; height. The tree is persistent: a node is an immutable record, an empty
;; tree #f, and an insertion copies the path it walks.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define-record-type node (fields red? left key value right))

(define m 2147483647)

(define (next x) (remainder (* 48271 x) m))

(define (red? t) (and t (node-red? t)))

;; The three repairs of a node, in Sedgewick's order: lean left, split a
;; double red on the left, and flip the colours of a 4-node.
(define (lean t)
  (let ([r (node-right t)])
    (if (and (red? r) (not (red? (node-left t))))
        (make-node (node-red? t) (make-node #t (node-left t) (node-key t) (node-value t) (node-left r))
                   (node-key r) (node-value r) (node-right r))
        t)))

(define (split t)
  (let ([l (node-left t)])
    (if (and (red? l) (red? (node-left l)))
        (make-node (node-red? t) (node-left l) (node-key l) (node-value l)
                   (make-node #t (node-right l) (node-key t) (node-value t) (node-right t)))
        t)))

(define (flip t)
  (let ([l (node-left t)] [r (node-right t)])
    (if (and (red? l) (red? r))
        (make-node #t (make-node #f (node-left l) (node-key l) (node-value l) (node-right l))
                   (node-key t) (node-value t)
                   (make-node #f (node-left r) (node-key r) (node-value r) (node-right r)))
        t)))

(define (insert t key value)
  (if (not t)
      (make-node #t #f key value #f)
      (let ([k (node-key t)])
        (flip (split (lean
          (cond [(< key k) (make-node (node-red? t) (insert (node-left t) key value) k (node-value t) (node-right t))]
                [(> key k) (make-node (node-red? t) (node-left t) k (node-value t) (insert (node-right t) key value))]
                [else (make-node (node-red? t) (node-left t) k value (node-right t))])))))))

(define (blacken t) (make-node #f (node-left t) (node-key t) (node-value t) (node-right t)))

;; The value of key, or -1.
(define (lookup t key)
  (cond [(not t) -1]
        [(< key (node-key t)) (lookup (node-left t) key)]
        [(> key (node-key t)) (lookup (node-right t) key)]
        [else (node-value t)]))

(define (height t) (if t (+ 1 (max (height (node-left t)) (height (node-right t)))) 0))

(define (build i x t) (if (= i n) t (build (+ i 1) (next x) (blacken (insert t x i)))))

;; Look up the keys x + delta, x the generator's first n numbers.
(define (look t i x delta found sum)
  (if (= i n)
      (values found sum)
      (let ([v (lookup t (+ x delta))])
        (if (>= v 0)
            (look t (+ i 1) (next x) delta (+ found 1) (remainder (+ sum v) 1000003))
            (look t (+ i 1) (next x) delta found sum)))))

(let ([t (build 0 42 #f)])
  (let*-values ([(found sum) (look t 0 42 0 0 0)] [(found sum) (look t 0 42 1 found sum)])
    (print found sum (height t))))
