#define N 1000
/* mandel: the Mandelbrot set in fixed-point arithmetic. An N x N grid over
   the square -2 .. 0.5, -1.25 .. 1.25 of the complex plane; every point c
   is iterated z -> z^2 + c, at most 64 times, while |z|^2 <= 4. Numbers
   are integers scaled by 2^16, and a product is divided back by 2^16,
   truncating toward zero. Prints how many points stayed (are in the set)
   and the iterations done in all. No allocation. */
#include <stdio.h>

#define SCALE 65536L
#define MOST 64

int main(void) {
    long inside = 0, iterations = 0;
    for (long row = 0; row < N; row++) {
        long ci = row * 5 * SCALE / (2 * N) - 5 * SCALE / 4;
        for (long column = 0; column < N; column++) {
            long cr = column * 5 * SCALE / (2 * N) - 2 * SCALE;
            long x = 0, y = 0, xx = 0, yy = 0, i = 0;
            while (i < MOST && xx + yy <= 4 * SCALE) {
                y = 2 * x * y / SCALE + ci;
                x = xx - yy + cr;
                xx = x * x / SCALE;
                yy = y * y / SCALE;
                i++;
            }
            if (i == MOST) inside++;
            iterations += i;
        }
    }
    printf("%ld %ld\n", inside, iterations);
    return 0;
}
