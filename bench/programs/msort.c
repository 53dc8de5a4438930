#define N 100
/* msort: merge sort on lists. Each of N rounds makes a list of 10,000
   pseudo-random numbers (the Park-Miller generator x -> 16807 x mod (2^31 -
   1), from the seed round + 1), sorts it by splitting it in two (alternate
   elements), sorting the halves and merging them, and folds the sorted list
   into a checksum that depends on the order. As in L, split and merge build
   new lists; each list is freed once the next is built. Allocation: one
   malloc per list cell, one free per cell of a list no longer needed. */
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

static List *random_list(long k, long x) {
    List *list = NULL;
    for (; k > 0; k--) {
        x = x * 16807 % 2147483647;
        list = cons(x % 100000, list);
    }
    return list;
}

static void split(const List *list, List **a, List **b) {
    for (; list; list = list->tail) {
        List *t = cons(list->head, *b);
        *b = *a; *a = t;
    }
}

/* A new list: the merge of a and b. */
static List *merge(const List *a, const List *b) {
    List *result = NULL, **end = &result;
    while (a && b) {
        if (a->head <= b->head) { *end = cons(a->head, NULL); a = a->tail; }
        else { *end = cons(b->head, NULL); b = b->tail; }
        end = &(*end)->tail;
    }
    for (const List *rest = a ? a : b; rest; rest = rest->tail) {
        *end = cons(rest->head, NULL);
        end = &(*end)->tail;
    }
    return result;
}

/* A new sorted list; frees list. */
static List *sort(List *list) {
    if (!list || !list->tail) return list;
    List *a = NULL, *b = NULL;
    split(list, &a, &b);
    free_list(list);
    List *sa = sort(a), *sb = sort(b);
    List *result = merge(sa, sb);
    free_list(sa); free_list(sb);
    return result;
}

static long checksum(List *list) {   /* frees list */
    long sum = 0, i = 1;
    for (const List *l = list; l; l = l->tail, i++) sum = (sum + i * l->head) % 1000003;
    free_list(list);
    return sum;
}

int main(void) {
    long total = 0;
    for (long r = 0; r < N; r++) total = (total + checksum(sort(random_list(10000, r + 1)))) % 1000003;
    printf("%ld %ld\n", checksum(sort(random_list(10000, 1))), total);
    return 0;
}
