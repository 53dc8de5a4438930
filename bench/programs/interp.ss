(import (chezscheme)) (define n 100000)
;; interp: an interpreter for a small imperative language, whose
;; expressions (ten kinds) and statements (five) are lists tagged by a
;; symbol, dispatched with case, run on a program of that language that
;; counts and sums the primes below n by trial division. The interpreted
;; program's six variables are numbered; its environment is a vector of six
;; numbers, updated in place. Dominated by the dispatch on the tags and the
;; recursion of eval.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (eval* e env)
  (case (car e)
    [(lit) (cadr e)]
    [(var) (vector-ref env (cadr e))]
    [(add) (let ([x (eval* (cadr e) env)]) (+ x (eval* (caddr e) env)))]
    [(sub) (let ([x (eval* (cadr e) env)]) (- x (eval* (caddr e) env)))]
    [(mul) (let ([x (eval* (cadr e) env)]) (* x (eval* (caddr e) env)))]
    [(mod) (let ([x (eval* (cadr e) env)]) (remainder x (eval* (caddr e) env)))]
    [(less) (let ([x (eval* (cadr e) env)]) (if (< x (eval* (caddr e) env)) 1 0))]
    [(equal) (let ([x (eval* (cadr e) env)]) (if (= x (eval* (caddr e) env)) 1 0))]
    [(and) (if (= (eval* (cadr e) env) 0) 0 (eval* (caddr e) env))]
    [(not) (if (= (eval* (cadr e) env) 0) 1 0)]))

(define (exec s env)
  (case (car s)
    [(assign) (vector-set! env (cadr s) (eval* (caddr s) env))]
    [(seq) (exec (cadr s) env) (exec (caddr s) env)]
    [(if) (if (not (= (eval* (cadr s) env) 0)) (exec (caddr s) env) (exec (cadddr s) env))]
    [(while) (when (not (= (eval* (cadr s) env) 0)) (exec (caddr s) env) (exec s env))]
    [(skip) (void)]))

;; The variables of the interpreted program.
(define limit 0) (define i 1) (define j 2) (define prime 3) (define count 4) (define sum 5)

;; count := 0; sum := 0; i := 2
;; while (i < limit) {
;;   j := 2; prime := 1
;;   while (prime && !(i < j * j)) { if (i % j == 0) prime := 0; j := j + 1 }
;;   if (prime) { count := count + 1; sum := sum + i }
;;   i := i + 1
;; }
(define program
  `(seq (assign ,count (lit 0)) (seq (assign ,sum (lit 0)) (seq (assign ,i (lit 2))
     (while (less (var ,i) (var ,limit))
       (seq (assign ,j (lit 2)) (seq (assign ,prime (lit 1))
       (seq (while (and (var ,prime) (not (less (var ,i) (mul (var ,j) (var ,j)))))
              (seq (if (equal (mod (var ,i) (var ,j)) (lit 0)) (assign ,prime (lit 0)) (skip))
                   (assign ,j (add (var ,j) (lit 1)))))
       (seq (if (var ,prime) (seq (assign ,count (add (var ,count) (lit 1))) (assign ,sum (add (var ,sum) (var ,i)))) (skip))
            (assign ,i (add (var ,i) (lit 1))))))))))))

(let ([env (vector n 0 0 0 0 0)])
  (exec program env)
  (print (vector-ref env count) (vector-ref env sum)))
