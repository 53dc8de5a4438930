N = 60000
# primes: the sieve of Eratosthenes on linked lists, written like the L
# program: a list is a pair (head, tail), or None for the empty list.
import sys

sys.setrecursionlimit(1_000_000)


def range_list(a, b):
    return None if a > b else (a, range_list(a + 1, b))


def filter_list(lst, keep):
    while lst is not None:
        x, lst = lst
        if keep(x):
            return (x, filter_list(lst, keep))
    return None


def sieve(lst):
    """The primes of lst, last first. (A loop, not a recursion as in L: in
    Python, the frames of the recursion would keep every list alive.)"""
    primes = None
    while lst is not None:
        p, rest = lst
        primes = (p, primes)
        lst = filter_list(rest, lambda x, p=p: x % p != 0)
    return primes


count = total = 0
lst = sieve(range_list(2, N))
while lst is not None:
    x, lst = lst
    count += 1
    total += x
print(count, total)
