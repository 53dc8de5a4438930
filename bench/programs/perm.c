#define N 100
/* perm: all the permutations of a list, as linked lists. The 40320
   permutations of 1 .. 8 are made by inserting 1 at every place of each
   permutation of 2 .. 8, recursively; the permutations share their tails.
   Each is read as a decimal number, and the numbers are hashed in the
   order they were made. Repeated N times.
   Allocation: the lists share tails, so no cell has one owner; the cells
   of a round come from an arena (a bump pointer into one malloc'ed block),
   released all at once at the end of the round, as a C programmer would
   manage them. No malloc or free per cell. */
#include <stdio.h>
#include <stdlib.h>

#define K 8

typedef struct List List;           /* a list of numbers, or of lists */
struct List { long head; const List *first; const List *tail; };

static List *arena;
static long arena_used, arena_size;

static const List *cons(long head, const List *first, const List *tail) {
    if (arena_used == arena_size) {
        fprintf(stderr, "arena full\n");
        exit(1);
    }
    List *cell = &arena[arena_used++];
    cell->head = head; cell->first = first; cell->tail = tail;
    return cell;
}

static const List *range(long a, long b) {
    const List *list = NULL;
    for (long x = b; x >= a; x--) list = cons(x, NULL, list);
    return list;
}

/* The reverse of a, then b. */
static const List *append_rev(const List *a, const List *b) {
    for (; a; a = a->tail) b = cons(a->head, NULL, b);
    return b;
}

/* x inserted at every place of p, from the first place to the last, each
   list consed onto acc. */
static const List *inserts(long x, const List *p, const List *acc) {
    const List *prefix = NULL;                 /* reversed */
    for (;;) {
        acc = cons(0, append_rev(prefix, cons(x, NULL, p)), acc);
        if (!p) return acc;
        prefix = cons(p->head, NULL, prefix);
        p = p->tail;
    }
}

static const List *perms(const List *list) {
    if (!list) return cons(0, NULL, NULL);      /* the list of the empty list */
    const List *acc = NULL;
    for (const List *ps = perms(list->tail); ps; ps = ps->tail) acc = inserts(list->head, ps->first, acc);
    return acc;
}

static long hash(const List *ps, long h) {
    for (; ps; ps = ps->tail) {
        long v = 0;
        for (const List *p = ps->first; p; p = p->tail) v = v * 10 + p->head;
        h = (h * 31 + v) % 1000003;
    }
    return h;
}

static long round_(long i) {
    arena_used = 0;
    return hash(perms(range(1, K)), i);
}

int main(void) {
    arena_size = 1 << 20;
    arena = malloc(arena_size * sizeof *arena);
    long total = 0;
    for (long i = 0; i < N; i++) total = (total + round_(i)) % 1000003;
    printf("%ld %ld\n", round_(0), total);
    free(arena);
    return 0;
}
