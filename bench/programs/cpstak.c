#define N 200
/* cpstak: tak(18, 12, 6) in continuation-passing style, repeated N times. A
   closure is a struct: a function pointer and the captured variables. Each
   continuation is called exactly once, so it frees itself when it is
   called. Every call is a tail call; gcc -O2 compiles them as jumps
   (sibling calls), without which the stack would overflow. Allocation: one
   malloc per continuation, freed by the continuation itself. */
#include <stdio.h>
#include <stdlib.h>

typedef struct K K;
struct K {
    long (*fn)(K *self, long v);
    K *k;               /* the continuation captured */
    long x, y, z, v1;   /* the numbers captured (not all are used) */
};

static K *closure(long (*fn)(K *, long), K *k, long x, long y, long z, long v1) {
    K *c = malloc(sizeof *c);
    c->fn = fn; c->k = k; c->x = x; c->y = y; c->z = z; c->v1 = v1;
    return c;
}

static long tak(long x, long y, long z, K *k);

static long k3(K *self, long v3) {   /* { v3 -> tak(v1, v2, v3, k) } */
    K c = *self; free(self);
    return tak(c.x, c.y, v3, c.k);   /* x = v1, y = v2 */
}

static long k2(K *self, long v2) {   /* { v2 -> tak(z - 1, x, y, k3) } */
    K c = *self; free(self);
    return tak(c.z - 1, c.x, c.y, closure(k3, c.k, c.v1, v2, 0, 0));
}

static long k1(K *self, long v1) {   /* { v1 -> tak(y - 1, z, x, k2) } */
    K c = *self; free(self);
    return tak(c.y - 1, c.z, c.x, closure(k2, c.k, c.x, c.y, c.z, v1));
}

static long tak(long x, long y, long z, K *k) {
    if (!(y < x)) return k->fn(k, z);
    return tak(x - 1, y, z, closure(k1, k, x, y, z, 0));
}

static long identity(K *self, long a) { (void)self; return a; }

static long cpstak(long x, long y, long z) {
    K id = {identity, 0, 0, 0, 0, 0};
    return tak(x, y, z, &id);
}

int main(void) {
    long total = 0;
    for (long i = 0; i < N; i++) total += cpstak(18, 12, 6);
    printf("%ld %ld\n", cpstak(18, 12, 6), total);
    return 0;
}
