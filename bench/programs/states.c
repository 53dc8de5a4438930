#define N 50000000
/* states: a state machine. It reads N symbols 0, 1, 2 made by the linear
   congruential generator x -> (25173 x + 13849) mod 65536 (the symbol is (x
   / 256) % 3) and counts the occurrences of the word 0 1 2. In C a state
   machine is a loop around a switch on the state. No allocation. */
#include <stdio.h>

int main(void) {
    enum { S0, S1, S2 } state = S0;   /* nothing seen, "0" seen, "0 1" seen */
    long x = 1, count = 0;
    for (long i = 0; i < N; i++) {
        x = (x * 25173 + 13849) % 65536;
        long c = x / 256 % 3;
        switch (state) {
        case S0: state = c == 0 ? S1 : S0; break;
        case S1: state = c == 0 ? S1 : c == 1 ? S2 : S0; break;
        case S2:
            if (c == 2) count++;
            state = c == 0 ? S1 : S0;
            break;
        }
    }
    printf("%ld\n", count);
    return 0;
}
