N = 4000
# takl: the Takeuchi function with lists as counters: a number k is a list
# of length k, shorter compares two of them, cdr subtracts one. Each of N
# rounds builds the lists of 18, 12 and 6 and computes mas(18, 12, 6), a
# list of length 7; the lengths are added up. A list is a pair (head,
# tail), or None; the loops are the tail calls of the L version.


def listn(k):
    lst = None
    for i in range(1, k + 1):
        lst = (i, lst)
    return lst


def shorter(x, y):
    while y is not None:
        if x is None:
            return True
        x, y = x[1], y[1]
    return False


def cdr(lst):
    return lst[1] if lst is not None else None


def mas(x, y, z):
    if not shorter(y, x):
        return z
    return mas(mas(cdr(x), y, z), mas(cdr(y), z, x), mas(cdr(z), x, y))


def length(lst):
    k = 0
    while lst is not None:
        k, lst = k + 1, lst[1]
    return k


total = 0
for _ in range(N):
    total += length(mas(listn(18), listn(12), listn(6)))
print(total)
