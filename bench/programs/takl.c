#define N 4000
/* takl: the Takeuchi function with lists as counters: a number k is a
   list of length k, shorter compares two of them, the tail subtracts one.
   Each of N rounds builds the lists of 18, 12 and 6 and computes
   mas(18, 12, 6), a list of length 7; the lengths are added up. As in L,
   the lists are built anew in each round (and freed after it). */
#include <stdio.h>
#include <stdlib.h>

typedef struct List List;
struct List { long head; List *tail; };

static List *listn(long k) {
    List *list = NULL;
    for (long i = 1; i <= k; i++) {
        List *cell = malloc(sizeof *cell);
        cell->head = i; cell->tail = list;
        list = cell;
    }
    return list;
}

static void free_list(List *list) {
    while (list) { List *tail = list->tail; free(list); list = tail; }
}

static int shorter(const List *x, const List *y) {
    for (; y != NULL; x = x->tail, y = y->tail)
        if (x == NULL) return 1;
    return 0;
}

static const List *cdr(const List *list) { return list ? list->tail : NULL; }

static const List *mas(const List *x, const List *y, const List *z) {
    if (!shorter(y, x)) return z;
    return mas(mas(cdr(x), y, z), mas(cdr(y), z, x), mas(cdr(z), x, y));
}

static long length(const List *list) {
    long k = 0;
    for (; list != NULL; list = list->tail) k++;
    return k;
}

int main(void) {
    long total = 0;
    for (long r = 0; r < N; r++) {
        List *x = listn(18), *y = listn(12), *z = listn(6);
        total += length(mas(x, y, z));
        free_list(x); free_list(y); free_list(z);
    }
    printf("%ld\n", total);
    return 0;
}
