N = 10000
# fold: higher-order functions on a list of 1000 numbers, N rounds. Each
# round maps a composition of closures over the list, then folds it with a
# curried function, which makes a new closure for every element. A list is
# a pair (head, tail), or None for the empty list.
import sys

sys.setrecursionlimit(100_000)


def range_list(a, b):
    return None if a > b else (a, range_list(a + 1, b))


def map_list(lst, f):
    if lst is None:
        return None
    x, rest = lst
    return (f(x), map_list(rest, f))


def fold(lst, acc, f):
    """fold with a curried function: f(acc)(x)."""
    while lst is not None:
        x, lst = lst
        acc = f(acc)(x)
    return acc


def compose(f, g):
    return lambda x: f(g(x))


def adder(k):
    return lambda x: x + k


def scaler(k):
    return lambda x: x * k


xs = range_list(1, 1000)


def round_(i):
    f = compose(adder(i), scaler(i % 7 + 1))
    hash_ = lambda acc: lambda x: (acc * 31 + x + i) % 1000003
    return fold(map_list(xs, f), i, hash_)


total = 0
for i in range(N):
    total = (total + round_(i)) % 1000003
print(round_(0), round_(1), total)
