N = 100
# perm: all the permutations of a list, as lists. The 40320 permutations of
# 1 .. 8 are made by inserting 1 at every place of each permutation of
# 2 .. 8, recursively; the permutations share their tails. Each is read as
# a decimal number, and the numbers are hashed in the order they were made.
# Repeated N times. A list is a chain of pairs (head, tail), the empty list
# None, as a Lisp list; loops stand for the other versions' tail calls.
K = 8


def make_range(a, b):
    acc = None
    for x in range(b, a - 1, -1):
        acc = (x, acc)
    return acc


def append_rev(a, b):
    """The reverse of a, then b."""
    while a is not None:
        b = (a[0], b)
        a = a[1]
    return b


def inserts(x, p, acc):
    """x inserted at every place of p, from the first place to the last, each list consed onto acc."""
    prefix = None
    while True:
        acc = (append_rev(prefix, (x, p)), acc)
        if p is None:
            return acc
        prefix = (p[0], prefix)
        p = p[1]


def perms(lst):
    if lst is None:
        return (None, None)
    acc = None
    ps = perms(lst[1])
    while ps is not None:
        acc = inserts(lst[0], ps[0], acc)
        ps = ps[1]
    return acc


def hash_of(ps, h):
    while ps is not None:
        v, p = 0, ps[0]
        while p is not None:
            v = v * 10 + p[0]
            p = p[1]
        h = (h * 31 + v) % 1000003
        ps = ps[1]
    return h


total = 0
for i in range(N):
    total = (total + hash_of(perms(make_range(1, K)), i)) % 1000003
print(hash_of(perms(make_range(1, K)), 0), total)
