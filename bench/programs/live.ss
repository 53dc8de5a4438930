(import (chezscheme)) (define n 500000)
;; live: a large structure stays alive while the program allocates. A
;; balanced binary search tree maps the keys 0 ... n - 1 to numbers; it is
;; updated 4n times without mutation (each update copies the path from the
;; root to the key), at keys drawn by the Park-Miller generator. A node is a
;; record, a leaf the empty list.
(define-record-type node (fields left key value right))

(define (build lo hi)
  (if (> lo hi)
      '()
      (let* ([mid (quotient (+ lo hi) 2)] [left (build lo (- mid 1))])
        (make-node left mid 0 (build (+ mid 1) hi)))))

(define (update t k delta)
  (if (null? t)
      t
      (let ([key (node-key t)])
        (cond [(< k key) (make-node (update (node-left t) k delta) key (node-value t) (node-right t))]
              [(> k key) (make-node (node-left t) key (node-value t) (update (node-right t) k delta))]
              [else (make-node (node-left t) key (+ (node-value t) delta) (node-right t))]))))

(define (updates t i x)
  (if (= i 0)
      t
      (let ([y (remainder (* x 16807) 2147483647)])
        (updates (update t (remainder y n) (+ (remainder y 7) 1)) (- i 1) y))))

(define (checksum t sum)
  (if (null? t)
      sum
      (checksum (node-right t)
                (checksum (node-left t) (remainder (+ sum (* (node-key t) (node-value t))) 1000003)))))

(display (checksum (updates (build 0 (- n 1)) (* 4 n) 1) 0))
(newline)
