(import (chezscheme)) (define n 5500000)
;; raiseparse: a parser of arithmetic expressions that raises on bad input.
;; n inputs are generated from a seeded random sequence: expressions of
;; digits, +, -, * and parentheses, as lists of character codes (as in the L
;; version), in which about one digit in 12 is a '?'. The parser
;; (expression, term, factor, by recursive descent) evaluates each input
;; modulo 10007 or raises a bad condition carrying c + 1 (R6RS raise,
;; caught by guard) at the first unexpected character c (0 at an early end);
;; the caller counts the good inputs and the bad.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define-record-type bad-input (fields code))

(define (next s) (modulo (* s 48271) 2147483647))

;; (values seed the-characters-of-an-expression-then-rest)
(define (gen d s rest)
  (let ([s1 (next s)])
    (cond
      [(or (= d 0) (= (modulo s1 3) 0))
       (values s1 (cons (if (= (modulo s1 12) 0) 63 (+ 48 (modulo (quotient s1 3) 10))) rest))]
      [(= (modulo s1 4) 1)
       (let-values ([(s2 inner) (gen (- d 1) s1 (cons 41 rest))])
         (values s2 (cons 40 inner)))]
      [else
       (let-values ([(s2 right) (gen (- d 1) s1 rest)])
         (gen (- d 1) s2 (cons (let ([m (modulo s1 5)]) (cond [(< m 2) 43] [(< m 4) 42] [else 45])) right)))])))

(define (bad s)
  (raise (make-bad-input (if (null? s) 0 (+ (car s) 1)))))

(define (factor s)
  (if (null? s)
      (bad s)
      (let ([c (car s)])
        (cond
          [(and (>= c 48) (<= c 57)) (values (- c 48) (cdr s))]
          [(= c 40)
           (let-values ([(v r) (expr (cdr s))])
             (if (and (pair? r) (= (car r) 41)) (values v (cdr r)) (bad r)))]
          [else (bad s)]))))

(define (term s)
  (let-values ([(v r) (factor s)]) (term-rest v r)))

(define (term-rest v s)
  (if (and (pair? s) (= (car s) 42))
      (let-values ([(w r) (factor (cdr s))]) (term-rest (modulo (* v w) 10007) r))
      (values v s)))

(define (expr s)
  (let-values ([(v r) (term s)]) (expr-rest v r)))

(define (expr-rest v s)
  (cond
    [(and (pair? s) (= (car s) 43))
     (let-values ([(w r) (term (cdr s))]) (expr-rest (modulo (+ v w) 10007) r))]
    [(and (pair? s) (= (car s) 45))
     (let-values ([(w r) (term (cdr s))]) (expr-rest (modulo (+ (- v w) 10007) 10007) r))]
    [else (values v s)]))

(define (parse s)
  (let-values ([(v r) (expr s)]) (if (null? r) v (bad r))))

;; The good inputs' values are at least 0, the bad ones' outcomes below 0.
(define (outcome input)
  (guard (e [(bad-input? e) (- -1 (bad-input-code e))]) (parse input)))

(define (run i s good nbad sum)
  (if (= i n)
      (print good nbad sum)
      (let-values ([(s2 input) (gen 6 s '())])
        (let ([v (outcome input)])
          (if (>= v 0)
              (run (+ i 1) s2 (+ good 1) nbad (modulo (+ sum v) 1000003))
              (run (+ i 1) s2 good (+ nbad 1) (modulo (- sum v 1) 1000003)))))))

(run 0 1 0 0 0)
