#define N 11
/* tak: the Takeuchi function, called as tak(3n, 2n, n). No allocation. */
#include <stdio.h>

static long tak(long x, long y, long z) {
    return y < x ? tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y)) : z;
}

int main(void) {
    printf("%ld\n", tak(3 * N, 2 * N, N));
    return 0;
}
