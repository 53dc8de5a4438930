#define N 500000
/* live: a large structure stays alive while the program allocates. A
   balanced binary search tree maps the keys 0 ... N - 1 to numbers; it is
   updated 4N times without mutation (each update copies the path from the
   root to the key), at keys drawn by the Park-Miller generator. As in L, an
   update builds new nodes; the nodes it replaces are garbage, and the
   update frees them. Allocation: one malloc per new node, one free per
   replaced node. */
#include <stdio.h>
#include <stdlib.h>

typedef struct Tree Tree;
struct Tree { Tree *left; long key, value; Tree *right; };

static Tree *node(Tree *left, long key, long value, Tree *right) {
    Tree *t = malloc(sizeof *t);
    t->left = left; t->key = key; t->value = value; t->right = right;
    return t;
}

static Tree *build(long lo, long hi) {
    if (lo > hi) return NULL;
    long mid = (lo + hi) / 2;
    Tree *left = build(lo, mid - 1);
    return node(left, mid, 0, build(mid + 1, hi));
}

/* The tree t with delta added to the value at key k; frees the old path. */
static Tree *update(Tree *t, long k, long delta) {
    if (!t) return NULL;
    Tree *result;
    if (k < t->key) result = node(update(t->left, k, delta), t->key, t->value, t->right);
    else if (k > t->key) result = node(t->left, t->key, t->value, update(t->right, k, delta));
    else result = node(t->left, t->key, t->value + delta, t->right);
    free(t);
    return result;
}

static long checksum(const Tree *t, long sum) {
    for (; t; t = t->right) sum = (checksum(t->left, sum) + t->key * t->value) % 1000003;
    return sum;
}

int main(void) {
    Tree *t = build(0, N - 1);
    long x = 1;
    for (long i = 4 * N; i > 0; i--) {
        x = x * 16807 % 2147483647;
        t = update(t, x % N, x % 7 + 1);
    }
    printf("%ld\n", checksum(t, 0));
    return 0;
}
