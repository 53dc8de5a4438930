#define N 2000000
/* loop: Collatz sequences. For every start i from 1 to N, count the steps
   of x -> x / 2 (x even), x -> 3x + 1 (x odd) until x reaches 1; print the
   total number of steps, and the start with the longest sequence with its
   length. */
#include <stdio.h>

int main(void) {
    long total = 0, best = 1, best_steps = 0;
    for (long i = 1; i <= N; i++) {
        long x = i, steps = 0;
        while (x != 1) {
            if (x % 2 == 0) x = x / 2; else x = 3 * x + 1;
            steps++;
        }
        total += steps;
        if (steps > best_steps) { best = i; best_steps = steps; }
    }
    printf("%ld %ld %ld\n", total, best, best_steps);
    return 0;
}
