(import (chezscheme)) (define n 11)
;; tak: the Takeuchi function, called as tak(3n, 2n, n).
(define (tak x y z)
  (if (< y x) (tak (tak (- x 1) y z) (tak (- y 1) z x) (tak (- z 1) x y)) z))

(display (tak (* 3 n) (* 2 n) n))
(newline)
