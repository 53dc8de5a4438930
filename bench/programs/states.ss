(import (chezscheme)) (define n 50000000)
;; states: a state machine written as three mutually recursive procedures,
;; every call a tail call. It reads n symbols 0, 1, 2 made by the linear
;; congruential generator x -> (25173 x + 13849) mod 65536 (the symbol is
;; (x / 256) mod 3) and counts the occurrences of the word 0 1 2.
(define (next x) (modulo (+ (* x 25173) 13849) 65536))
(define (symbol x) (remainder (quotient x 256) 3))

;; s0: nothing of the word seen yet; s1: "0" seen; s2: "0 1" seen.
(define (s0 i x count)
  (if (= i n)
      count
      (let ([y (next x)])
        (if (= (symbol y) 0) (s1 (+ i 1) y count) (s0 (+ i 1) y count)))))

(define (s1 i x count)
  (if (= i n)
      count
      (let* ([y (next x)] [c (symbol y)])
        (cond [(= c 0) (s1 (+ i 1) y count)]
              [(= c 1) (s2 (+ i 1) y count)]
              [else (s0 (+ i 1) y count)]))))

(define (s2 i x count)
  (if (= i n)
      count
      (let* ([y (next x)] [c (symbol y)])
        (cond [(= c 0) (s1 (+ i 1) y count)]
              [(= c 1) (s0 (+ i 1) y count)]
              [else (s0 (+ i 1) y (+ count 1))]))))

(display (s0 0 1 0))
(newline)
