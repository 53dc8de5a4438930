#define N 40
/* fib: the naive doubly recursive Fibonacci function. No allocation. */
#include <stdio.h>

static long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(void) {
    printf("%ld\n", fib(N));
    return 0;
}
