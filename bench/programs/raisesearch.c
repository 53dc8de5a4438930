#define N 240
/* raisesearch: backtracking. Find the first placement of k queens on a
   k-by-k board, for k from 8 to 20 in turn, n times over. A partial board
   is a linked list of the columns of the queens placed so far, the latest
   row first; its cells live on the C stack, in the frames of solve().
   The other versions raise an exception at a dead end; C has none, and a C
   programmer writes this search with an error code, not setjmp/longjmp:
   solve() returns 0 at a dead end and the caller tries its next column.
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

static long checksum(const List *queens) {
    long h = 0;
    for (; queens; queens = queens->tail) h = (h * 31 + queens->head) % 1000003;
    return h;
}

/* The checksum of the first way to complete the board, plus one; 0 at a dead end. */
static long solve(long k, long row, const List *queens) {
    if (row == k) return checksum(queens) + 1;
    for (long c = 0; c < k; c++)
        if (safe(c, queens)) {
            List board = {c, queens};
            long found = solve(k, row + 1, &board);
            if (found) return found;
        }
    return 0;
}

int main(void) {
    long total = 0;
    for (long i = 0; i < N; i++)
        total = (total + solve(8 + i % 13, 0, NULL) - 1) % 1000003;
    printf("%ld\n", total);
    return 0;
}
