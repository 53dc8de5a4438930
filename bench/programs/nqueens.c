#define N 13
/* nqueens: count the solutions of the n-queens problem. A partial board is
   a linked list of the columns of the queens placed so far, the latest row
   first; its cells live on the C stack, in the frames of solutions().
   Allocation: none on the heap (no malloc). */
#include <stdio.h>

typedef struct List List;
struct List { long head; const List *tail; };

static int safe(long c, const List *queens) {
    long d = 1;
    for (; queens; queens = queens->tail, d++) {
        long q = queens->head;
        if (q == c || q == c - d || q == c + d) return 0;
    }
    return 1;
}

static long solutions(long n, long row, const List *queens) {
    if (row == n) return 1;
    long count = 0;
    for (long c = 0; c < n; c++)
        if (safe(c, queens)) {
            List board = {c, queens};
            count += solutions(n, row + 1, &board);
        }
    return count;
}

static long queens(long n) { return solutions(n, 0, NULL); }

int main(void) {
    printf("%ld %ld %ld\n", queens(6), queens(8), queens(N));
    return 0;
}
