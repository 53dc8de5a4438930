(import (chezscheme)) (define n 1000)
;; mandel: the Mandelbrot set in fixed-point arithmetic. An n x n grid over
;; the square -2 .. 0.5, -1.25 .. 1.25 of the complex plane; every point c
;; is iterated z -> z^2 + c, at most 64 times, while |z|^2 <= 4. Numbers
;; are integers scaled by 2^16, and a product is divided back by 2^16,
;; truncating toward zero (quotient). Prints how many points stayed (are in
;; the set) and the iterations done in all. Loops are named lets.
(define (print . xs)
  (let loop ([xs xs] [sep ""])
    (unless (null? xs) (display sep) (display (car xs)) (loop (cdr xs) " ")))
  (newline))

(define scale 65536)
(define most 64)

(define (point cr ci)
  (let loop ([x 0] [y 0] [xx 0] [yy 0] [i 0])
    (if (and (< i most) (<= (+ xx yy) (* 4 scale)))
        (let* ([y (+ (quotient (* 2 x y) scale) ci)]
               [x (+ (- xx yy) cr)])
          (loop x y (quotient (* x x) scale) (quotient (* y y) scale) (+ i 1)))
        i)))

(define (mandel n)
  (let rows ([row 0] [inside 0] [iterations 0])
    (if (= row n)
        (print inside iterations)
        (let ([ci (- (quotient (* row 5 scale) (* 2 n)) (quotient (* 5 scale) 4))])
          (let columns ([column 0] [inside inside] [iterations iterations])
            (if (= column n)
                (rows (+ row 1) inside iterations)
                (let* ([cr (- (quotient (* column 5 scale) (* 2 n)) (* 2 scale))]
                       [i (point cr ci)])
                  (columns (+ column 1) (if (= i most) (+ inside 1) inside) (+ iterations i)))))))))

(mandel n)
