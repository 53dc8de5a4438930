#define N 2000
/* gcd: greatest common divisors by Euclid's algorithm: the sum of gcd(i, j)
   over 1 <= i, j <= N, and the number of pairs with gcd 1. Nested loops of
   integer division; nothing allocated. */
#include <stdio.h>

static long gcd(long x, long y) {
    while (y != 0) {
        long r = x % y;
        x = y;
        y = r;
    }
    return x;
}

int main(void) {
    long sum = 0, coprime = 0;
    for (long i = 1; i <= N; i++)
        for (long j = 1; j <= N; j++) {
            long g = gcd(i, j);
            sum += g;
            if (g == 1) coprime++;
        }
    printf("%ld %ld\n", sum, coprime);
    return 0;
}
