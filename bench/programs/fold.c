#define N 10000
/* fold: higher-order functions on a list of 1000 numbers, N rounds. Each
   round maps a composition of closures over the list, then folds it with a
   curried function, which makes a new closure for every element. A closure
   is a struct: a code pointer and the captured variables. Every closure and
   list is freed when it is no longer needed. Allocation: one malloc per
   closure and per list cell, and a free for each. */
#include <stdio.h>
#include <stdlib.h>

typedef struct List List;
struct List { long head; List *tail; };

typedef struct Fn Fn;   /* a closure from long to long */
struct Fn { long (*code)(Fn *self, long x); long a, b; Fn *f, *g; };

typedef struct Fn2 Fn2; /* a curried closure: from long to Fn */
struct Fn2 { Fn *(*code)(Fn2 *self, long x); long a; };

static List *cons(long head, List *tail) {
    List *cell = malloc(sizeof *cell);
    cell->head = head; cell->tail = tail;
    return cell;
}

static void free_list(List *list) {
    while (list) { List *tail = list->tail; free(list); list = tail; }
}

static List *range(long a, long b) {
    List *list = NULL;
    for (long x = b; x >= a; x--) list = cons(x, list);
    return list;
}

static List *map(const List *list, Fn *f) {
    List *result = NULL, **end = &result;
    for (; list; list = list->tail) {
        *end = cons(f->code(f, list->head), NULL);
        end = &(*end)->tail;
    }
    return result;
}

static long fold(const List *list, long acc, Fn2 *f) {
    for (; list; list = list->tail) {
        Fn *g = f->code(f, acc);
        acc = g->code(g, list->head);
        free(g);
    }
    return acc;
}

static Fn *closure(long (*code)(Fn *, long), long a, long b, Fn *f, Fn *g) {
    Fn *c = malloc(sizeof *c);
    c->code = code; c->a = a; c->b = b; c->f = f; c->g = g;
    return c;
}

static long compose_code(Fn *self, long x) { return self->f->code(self->f, self->g->code(self->g, x)); }
static Fn *compose(Fn *f, Fn *g) { return closure(compose_code, 0, 0, f, g); }

static long adder_code(Fn *self, long x) { return x + self->a; }
static Fn *adder(long k) { return closure(adder_code, k, 0, NULL, NULL); }

static long scaler_code(Fn *self, long x) { return x * self->a; }
static Fn *scaler(long k) { return closure(scaler_code, k, 0, NULL, NULL); }

/* hash = { acc -> x -> (acc * 31 + x + i) % 1000003 } */
static long hash_inner(Fn *self, long x) { return (self->a * 31 + x + self->b) % 1000003; }
static Fn *hash_outer(Fn2 *self, long acc) { return closure(hash_inner, acc, self->a, NULL, NULL); }

static List *xs;

static long round_(long i) {
    Fn *add = adder(i), *scale = scaler(i % 7 + 1), *f = compose(add, scale);
    Fn2 *hash = malloc(sizeof *hash);
    hash->code = hash_outer; hash->a = i;
    List *mapped = map(xs, f);
    long result = fold(mapped, i, hash);
    free_list(mapped); free(hash); free(f); free(scale); free(add);
    return result;
}

int main(void) {
    xs = range(1, 1000);
    long total = 0;
    for (long i = 0; i < N; i++) total = (total + round_(i)) % 1000003;
    printf("%ld %ld %ld\n", round_(0), round_(1), total);
    return 0;
}
