#define N 100
/* cpstree: a walk of a complete binary tree of depth 16 in continuation-
   passing style, N times; the value of the walk is a hash of the leaves in
   order. A continuation is a struct: a function pointer and the captured
   variables; each is called exactly once, and frees itself when it is.
   Every call is a tail call, which gcc -O2 compiles as a jump. Allocation:
   one malloc per continuation, freed by the continuation itself. */
#include <stdio.h>
#include <stdlib.h>

typedef struct Tree Tree;
struct Tree { Tree *left, *right; long value; };   /* a leaf has no children */

static Tree *make(long d, long i) {
    Tree *t = malloc(sizeof *t);
    if (d == 0) { t->left = t->right = NULL; t->value = i; }
    else { t->left = make(d - 1, 2 * i); t->right = make(d - 1, 2 * i + 1); }
    return t;
}

typedef struct K K;
struct K {
    long (*fn)(K *self, long v);
    K *k;            /* the continuation captured */
    const Tree *t;   /* the node whose right subtree is still to walk */
    long r, a;
};

static K *closure(long (*fn)(K *, long), K *k, const Tree *t, long r, long a) {
    K *c = malloc(sizeof *c);
    c->fn = fn; c->k = k; c->t = t; c->r = r; c->a = a;
    return c;
}

static long walk(const Tree *t, long r, K *k);

static long k2(K *self, long b) {   /* { b -> k((a * 31 + b + r) % 1000003) } */
    K c = *self; free(self);
    return c.k->fn(c.k, (c.a * 31 + b + c.r) % 1000003);
}

static long k1(K *self, long a) {   /* { a -> walk(right, r, k2) } */
    K c = *self; free(self);
    return walk(c.t->right, c.r, closure(k2, c.k, NULL, c.r, a));
}

static long walk(const Tree *t, long r, K *k) {
    if (!t->left) return k->fn(k, t->value);
    return walk(t->left, r, closure(k1, k, t, r, 0));
}

static long identity(K *self, long h) { (void)self; return h; }

int main(void) {
    Tree *tree = make(16, 0);
    K id = {identity, 0, 0, 0, 0};
    long total = 0;
    for (long r = 0; r < N; r++) total = (total + walk(tree, r, &id)) % 1000003;
    printf("%ld %ld\n", walk(tree, 0, &id), total);
    return 0;
}
