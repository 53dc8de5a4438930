N = 100
# msort: merge sort on lists. Each of N rounds makes a list of 10,000
# pseudo-random numbers (the Park-Miller generator x -> 16807 x mod
# (2^31 - 1), from the seed round + 1), sorts it by splitting it in two
# (alternate elements), sorting the halves and merging them, and folds the
# sorted list into a checksum that depends on the order. A list is a pair
# (head, tail), or None; the loops are the tail calls of the L version.
import sys

sys.setrecursionlimit(100_000)


def random_list(k, x):
    lst = None
    for _ in range(k):
        x = x * 16807 % 2147483647
        lst = (x % 100000, lst)
    return lst


def split(lst):
    a = b = None
    while lst is not None:
        x, lst = lst
        a, b = (x, b), a
    return a, b


def merge(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if a[0] <= b[0]:
        return (a[0], merge(a[1], b))
    return (b[0], merge(a, b[1]))


def sort(lst):
    if lst is None or lst[1] is None:
        return lst
    a, b = split(lst)
    return merge(sort(a), sort(b))


def checksum(lst):
    total, i = 0, 1
    while lst is not None:
        x, lst = lst
        total = (total + i * x) % 1000003
        i += 1
    return total


total = 0
for r in range(N):
    total = (total + checksum(sort(random_list(10000, r + 1)))) % 1000003
print(checksum(sort(random_list(10000, 1))), total)
