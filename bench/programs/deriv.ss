(import (chezscheme)) (define n 200)
;; deriv: symbolic differentiation. The product (x + 1)(x + 2)...(x + 12)
;; is differentiated three times by rules that simplify as they build
;; (0 + e = e, 1 * e = e, 0 * e = 0, constants folded), and each derivative
;; is evaluated at x = 1 ... 10, modulo 1000003. Repeated n times, with the
;; constants shifted by the round. An expression is a number, the symbol x,
;; or a record.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define-record-type add-node (fields a b))
(define-record-type mul-node (fields a b))

(define p 1000003)

(define (add a b)
  (cond [(eqv? a 0) b]
        [(eqv? b 0) a]
        [(and (number? a) (number? b)) (remainder (+ a b) p)]
        [else (make-add-node a b)]))

(define (mul a b)
  (cond [(eqv? a 0) 0]
        [(eqv? b 0) 0]
        [(eqv? a 1) b]
        [(eqv? b 1) a]
        [(and (number? a) (number? b)) (remainder (* a b) p)]
        [else (make-mul-node a b)]))

(define (d e)
  (cond [(number? e) 0]
        [(eq? e 'x) 1]
        [(add-node? e) (let ([da (d (add-node-a e))]) (add da (d (add-node-b e))))]
        [else (let* ([a (mul-node-a e)] [b (mul-node-b e)] [left (mul (d a) b)])
                (add left (mul a (d b))))]))

(define (eval* e x)
  (cond [(number? e) e]
        [(eq? e 'x) x]
        [(add-node? e) (let ([va (eval* (add-node-a e) x)]) (remainder (+ va (eval* (add-node-b e) x)) p))]
        [else (let ([va (eval* (mul-node-a e) x)]) (remainder (* va (eval* (mul-node-b e) x)) p))]))

;; (x + r + 1)(x + r + 2)...(x + r + k)
(define (product r i k)
  (if (= i k)
      (add 'x (+ r i))
      (let ([f (add 'x (+ r i))]) (mul f (product r (+ i 1) k)))))

(define (values* e x sum) (if (> x 10) sum (values* e (+ x 1) (remainder (+ sum (eval* e x)) p))))

(define (round* r)
  (let* ([e1 (d (product r 1 12))] [e2 (d e1)] [e3 (d e2)])
    (remainder (+ (values* e1 1 0) (values* e2 1 0) (values* e3 1 0)) p)))

(define (rounds r total) (if (= r n) total (rounds (+ r 1) (remainder (+ total (round* r)) p))))

(let ([first (round* 0)]) (print first (rounds 0 0)))
