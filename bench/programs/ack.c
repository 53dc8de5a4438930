#define N 11
/* ack: the Ackermann function, ack(3, n) = 2^(n + 3) - 3. No allocation. */
#include <stdio.h>

static long ack(long m, long n) {
    if (m == 0) return n + 1;
    if (n == 0) return ack(m - 1, 1);
    return ack(m - 1, ack(m, n - 1));
}

int main(void) {
    printf("%ld %ld\n", ack(2, N), ack(3, N));
    return 0;
}
