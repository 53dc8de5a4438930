#define N 60000
/* primes: the sieve of Eratosthenes on linked lists. Build the list 2, 3,
   ..., N; its first number is a prime: strike its multiples out of the rest
   (into a new list), and sieve what is left. Each list is freed as soon as
   the next one is built. Allocation: one malloc per list cell, one free per
   cell of a list no longer needed. */
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

static List *range(long a, long b) {
    List *list = NULL;
    for (long x = b; x >= a; x--) list = cons(x, list);
    return list;
}

/* A new list of the numbers of `list` that p does not divide. */
static List *strike_multiples(const List *list, long p) {
    List *result = NULL, **end = &result;
    for (; list; list = list->tail)
        if (list->head % p != 0) {
            *end = cons(list->head, NULL);
            end = &(*end)->tail;
        }
    return result;
}

/* The primes of `list`, last first; frees `list`. */
static List *sieve(List *list) {
    List *primes = NULL;
    while (list) {
        long p = list->head;
        primes = cons(p, primes);
        List *rest = strike_multiples(list->tail, p);
        free_list(list);
        list = rest;
    }
    return primes;
}

int main(void) {
    long count = 0, sum = 0;
    List *primes = sieve(range(2, N));
    for (List *l = primes; l; l = l->tail) { count++; sum += l->head; }
    printf("%ld %ld\n", count, sum);
    free_list(primes);
    return 0;
}
