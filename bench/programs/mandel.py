N = 1000
# mandel: the Mandelbrot set in fixed-point arithmetic. An N x N grid over
# the square -2 .. 0.5, -1.25 .. 1.25 of the complex plane; every point c
# is iterated z -> z^2 + c, at most 64 times, while |z|^2 <= 4. Numbers are
# integers scaled by 2^16, and a product is divided back by 2^16,
# truncating toward zero (Python's // rounds down: quot truncates, as C).
# Prints how many points stayed (are in the set) and the iterations done.
SCALE = 65536
MOST = 64


def quot(a, b):
    q = abs(a) // b
    return -q if a < 0 else q


def mandel(n):
    inside = iterations = 0
    for row in range(n):
        ci = row * 5 * SCALE // (2 * n) - 5 * SCALE // 4
        for column in range(n):
            cr = column * 5 * SCALE // (2 * n) - 2 * SCALE
            x = y = xx = yy = i = 0
            while i < MOST and xx + yy <= 4 * SCALE:
                y = quot(2 * x * y, SCALE) + ci
                x = xx - yy + cr
                xx = x * x // SCALE
                yy = y * y // SCALE
                i += 1
            if i == MOST:
                inside += 1
            iterations += i
    print(inside, iterations)


mandel(N)
