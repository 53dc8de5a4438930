#define N 400
/* change: the number of ways to change an amount into coins of 50, 25,
   10, 5 and 1 (Abelson and Sussman's count-change), by the tree recursion
   that either uses the first coin of the list once more or drops it. For
   the amounts N - 4 .. N. The coins are a linked list, built once
   (statically); nothing is allocated. */
#include <stdio.h>

typedef struct List List;
struct List { long head; const List *tail; };

static long ways(long amount, const List *coins) {
    if (!coins) return 0;
    if (amount == 0) return 1;
    if (amount < 0) return 0;
    return ways(amount, coins->tail) + ways(amount - coins->head, coins);
}

static const List one = {1, NULL}, five = {5, &one}, ten = {10, &five}, quarter = {25, &ten},
                  half = {50, &quarter};

int main(void) {
    const List *coins = &half;
    long sum = 0;
    for (long amount = N - 4; amount <= N; amount++) sum += ways(amount, coins);
    printf("%ld %ld\n", ways(N, coins), sum);
    return 0;
}
