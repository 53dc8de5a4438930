(import (chezscheme)) (define n 100)
;; cpstree: a walk of a complete binary tree of depth 16 in
;; continuation-passing style, n times. Every call is a tail call, and each
;; inner node allocates two continuations (closures); the value of the walk
;; is a hash of the leaves in order. A tree is a record.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define-record-type node (fields left right))
(define-record-type leaf (fields value))

(define (make d i)
  (if (= d 0) (make-leaf i) (make-node (make (- d 1) (* 2 i)) (make (- d 1) (+ (* 2 i) 1)))))

(define (walk t r k)
  (if (leaf? t)
      (k (leaf-value t))
      (walk (node-left t) r
            (lambda (a)
              (walk (node-right t) r
                    (lambda (b) (k (remainder (+ (* a 31) b r) 1000003))))))))

(define tree (make 16 0))

(define (rounds r total)
  (if (= r n) total (rounds (+ r 1) (remainder (+ total (walk tree r (lambda (h) h))) 1000003))))

(let ([first (walk tree 0 (lambda (h) h))]) (print first (rounds 0 0)))
