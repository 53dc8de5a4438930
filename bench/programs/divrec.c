#define N 20000
/* divrec: recursive division by two on lists, after the r7rs benchmark of
   that name. A list of 1000 numbers is halved (every other element kept)
   by a recursion that builds the result as it returns; the halving is
   repeated N times, and each result is summed.
   Allocation: every cell is malloc'ed, and each round's list of 500 cells
   is freed (free) as soon as it has been summed, as a C programmer writes
   a list whose owner is plain. */
#include <stdio.h>
#include <stdlib.h>

typedef struct List List;
struct List { long head; List *tail; };

static List *cons(long head, List *tail) {
    List *cell = malloc(sizeof *cell);
    cell->head = head; cell->tail = tail;
    return cell;
}

static void free_list(List *list) {
    while (list) { List *tail = list->tail; free(list); list = tail; }
}

static List *create(long k) {
    List *list = NULL;
    for (; k > 0; k--) list = cons(k, list);
    return list;
}

static List *div2(const List *list) {
    if (list && list->tail) return cons(list->head, div2(list->tail->tail));
    return NULL;
}

static long sum(const List *list, long acc) {
    for (; list; list = list->tail) acc += list->head;
    return acc;
}

static long halved_sum(const List *xs, long acc) {
    List *half = div2(xs);
    long s = sum(half, acc);
    free_list(half);
    return s;
}

int main(void) {
    List *xs = create(1000);
    long total = 0;
    for (long i = 0; i < N; i++) total += halved_sum(xs, i);
    printf("%ld %ld\n", halved_sum(xs, 0), total);
    free_list(xs);
    return 0;
}
