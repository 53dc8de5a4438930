#define N 16
/* binarytrees: allocation of binary trees, as in the Computer Language
   Benchmarks Game. A tree of depth N + 1 is made and checked (its nodes
   counted); a tree of depth N is made and kept alive to the end; then, for
   every even depth d from 4 to N, 2^(N - d + 4) trees of depth d are made
   and checked, each freed as soon as it has been. A leaf is NULL.
   Allocation: one malloc per node, and free_tree frees a tree as soon as it
   has been checked: glibc's malloc and free do the work a collector does in
   the other versions (the fastest C programs of the Benchmarks Game use a
   memory pool instead). */
#include <stdio.h>
#include <stdlib.h>

typedef struct Tree Tree;
struct Tree { Tree *left, *right; };

static Tree *make(long d) {
    if (d == 0) return NULL;
    Tree *t = malloc(sizeof *t);
    t->left = make(d - 1);
    t->right = make(d - 1);
    return t;
}

static long check(const Tree *t) { return t ? 1 + check(t->left) + check(t->right) : 1; }

static void free_tree(Tree *t) {
    if (t) { free_tree(t->left); free_tree(t->right); free(t); }
}

int main(void) {
    Tree *stretch = make(N + 1);
    printf("%d %ld\n", N + 1, check(stretch));
    free_tree(stretch);
    Tree *long_lived = make(N);
    for (long d = 4; d <= N; d += 2) {
        long iterations = 1L << (N - d + 4), sum = 0;
        for (long i = 0; i < iterations; i++) {
            Tree *t = make(d);
            sum += check(t);
            free_tree(t);
        }
        printf("%ld %ld %ld\n", iterations, d, sum);
    }
    printf("%d %ld\n", N, check(long_lived));
    free_tree(long_lived);
    return 0;
}
