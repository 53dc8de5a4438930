#define N 200
/* deriv: symbolic differentiation. The product (x + 1)(x + 2)...(x + 12) is
   differentiated three times by rules that simplify as they build (0 + e =
   e, 1 * e = e, 0 * e = 0, constants folded), and each derivative is
   evaluated at x = 1 ... 10, modulo 1000003. Repeated N times, with the
   constants shifted by the round. The derivatives share subexpressions, so
   the nodes of a round are taken from an arena, freed all at once at the
   end of the round: the usual C way with graphs of unclear ownership.
   Allocation: the arena is one malloc'ed block and a bump pointer; no
   malloc or free per node. */
#include <stdio.h>
#include <stdlib.h>

#define P 1000003

typedef enum { NUM, X, ADD, MUL } Kind;
typedef struct Expr Expr;
struct Expr { Kind kind; long num; const Expr *a, *b; };

static Expr *arena;
static long arena_used, arena_size;

static const Expr *node(Kind kind, long num, const Expr *a, const Expr *b) {
    if (arena_used == arena_size) {
        fprintf(stderr, "arena full\n");
        exit(1);
    }
    Expr *e = &arena[arena_used++];
    e->kind = kind; e->num = num; e->a = a; e->b = b;
    return e;
}

static const Expr *num(long c) { return node(NUM, c, NULL, NULL); }
static int is(const Expr *e, long c) { return e->kind == NUM && e->num == c; }

static const Expr *add(const Expr *a, const Expr *b) {
    if (is(a, 0)) return b;
    if (is(b, 0)) return a;
    if (a->kind == NUM && b->kind == NUM) return num((a->num + b->num) % P);
    return node(ADD, 0, a, b);
}

static const Expr *mul(const Expr *a, const Expr *b) {
    if (is(a, 0) || is(b, 0)) return num(0);
    if (is(a, 1)) return b;
    if (is(b, 1)) return a;
    if (a->kind == NUM && b->kind == NUM) return num(a->num * b->num % P);
    return node(MUL, 0, a, b);
}

static const Expr *d(const Expr *e) {
    switch (e->kind) {
    case NUM: return num(0);
    case X: return num(1);
    case ADD: { const Expr *da = d(e->a); return add(da, d(e->b)); }
    default: { const Expr *left = mul(d(e->a), e->b); return add(left, mul(e->a, d(e->b))); }
    }
}

static long eval(const Expr *e, long x) {
    switch (e->kind) {
    case NUM: return e->num;
    case X: return x;
    case ADD: return (eval(e->a, x) + eval(e->b, x)) % P;
    default: return eval(e->a, x) * eval(e->b, x) % P;
    }
}

/* (x + r + 1)(x + r + 2)...(x + r + k) */
static const Expr *product(long r, long i, long k) {
    const Expr *f = add(node(X, 0, NULL, NULL), num(r + i));
    return i == k ? f : mul(f, product(r, i + 1, k));
}

static long values(const Expr *e) {
    long sum = 0;
    for (long x = 1; x <= 10; x++) sum = (sum + eval(e, x)) % P;
    return sum;
}

static long round_(long r) {
    arena_used = 0;
    const Expr *e1 = d(product(r, 1, 12)), *e2 = d(e1), *e3 = d(e2);
    return (values(e1) + values(e2) + values(e3)) % P;
}

int main(void) {
    arena_size = 1 << 20;
    arena = malloc(arena_size * sizeof *arena);
    long total = 0;
    for (long r = 0; r < N; r++) total = (total + round_(r)) % P;
    printf("%ld %ld\n", round_(0), total);
    return 0;
}
