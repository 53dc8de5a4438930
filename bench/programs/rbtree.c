#define N 200000
/* rbtree: a balanced search tree, Sedgewick's left-leaning red-black tree.
   N pseudo-random keys (the Lehmer generator x -> 48271 x mod 2^31 - 1)
   are inserted, each with its index as value; then the same N keys and N
   keys that are mostly absent (each plus one) are looked up. Prints the
   keys found, the sum of their values modulo 1000003, and the tree's
   height. As a C programmer writes it, the tree is updated in place: an
   insertion mallocs one node and rotates the nodes of its path by
   changing their pointers; the tree is freed at the end. */
#include <stdio.h>
#include <stdlib.h>

#define M 2147483647L

typedef struct Node Node;
struct Node { int red; Node *left, *right; long key, value; };

static long next(long x) { return 48271 * x % M; }

static int is_red(const Node *t) { return t && t->red; }

static Node *rotate_left(Node *h) {
    Node *x = h->right;
    h->right = x->left; x->left = h;
    x->red = h->red; h->red = 1;
    return x;
}

static Node *rotate_right(Node *h) {
    Node *x = h->left;
    h->left = x->right; x->right = h;
    x->red = h->red; h->red = 1;
    return x;
}

static Node *insert(Node *h, long key, long value) {
    if (!h) {
        Node *t = malloc(sizeof *t);
        t->red = 1; t->left = t->right = NULL; t->key = key; t->value = value;
        return t;
    }
    if (key < h->key) h->left = insert(h->left, key, value);
    else if (key > h->key) h->right = insert(h->right, key, value);
    else h->value = value;
    if (is_red(h->right) && !is_red(h->left)) h = rotate_left(h);
    if (is_red(h->left) && is_red(h->left->left)) h = rotate_right(h);
    if (is_red(h->left) && is_red(h->right)) { h->red = 1; h->left->red = 0; h->right->red = 0; }
    return h;
}

/* The value of key, or -1. */
static long find(const Node *t, long key) {
    while (t) {
        if (key < t->key) t = t->left;
        else if (key > t->key) t = t->right;
        else return t->value;
    }
    return -1;
}

static long height(const Node *t) {
    if (!t) return 0;
    long hl = height(t->left), hr = height(t->right);
    return 1 + (hl > hr ? hl : hr);
}

static void free_tree(Node *t) {
    if (t) { free_tree(t->left); free_tree(t->right); free(t); }
}

int main(void) {
    Node *root = NULL;
    long x = 42;
    for (long i = 0; i < N; i++, x = next(x)) {
        root = insert(root, x, i);
        root->red = 0;
    }
    long found = 0, sum = 0;
    for (long delta = 0; delta <= 1; delta++) {
        x = 42;
        for (long i = 0; i < N; i++, x = next(x)) {
            long v = find(root, x + delta);
            if (v >= 0) { found++; sum = (sum + v) % 1000003; }
        }
    }
    printf("%ld %ld %ld\n", found, sum, height(root));
    free_tree(root);
    return 0;
}
