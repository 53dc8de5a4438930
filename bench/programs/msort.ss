(import (chezscheme)) (define n 100)
;; msort: merge sort on lists. Each of n rounds makes a list of 10,000
;; pseudo-random numbers (the Park-Miller generator x -> 16807 x mod
;; (2^31 - 1), from the seed round + 1), sorts it by splitting it in two
;; (alternate elements), sorting the halves and merging them, and folds the
;; sorted list into a checksum that depends on the order.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define (random-list k x list)
  (if (= k 0)
      list
      (let ([y (remainder (* x 16807) 2147483647)])
        (random-list (- k 1) y (cons (remainder y 100000) list)))))

(define (split list a b)
  (if (null? list) (values a b) (split (cdr list) (cons (car list) b) a)))

(define (merge* a b)
  (cond [(null? a) b]
        [(null? b) a]
        [(<= (car a) (car b)) (cons (car a) (merge* (cdr a) b))]
        [else (cons (car b) (merge* a (cdr b)))]))

(define (sort* list)
  (if (and (pair? list) (pair? (cdr list)))
      (let-values ([(a b) (split list '() '())])
        (merge* (sort* a) (sort* b)))
      list))

(define (checksum list i sum)
  (if (null? list) sum (checksum (cdr list) (+ i 1) (remainder (+ sum (* i (car list))) 1000003))))

(define (rounds r total)
  (if (= r n)
      total
      (rounds (+ r 1) (remainder (+ total (checksum (sort* (random-list 10000 (+ r 1) '())) 1 0)) 1000003))))

(let ([first (checksum (sort* (random-list 10000 1 '())) 1 0)]) (print first (rounds 0 0)))
