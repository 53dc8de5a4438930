N = 200
# cpstak: tak(18, 12, 6) in continuation-passing style, repeated N times.
# Python has no tail calls: the stack grows with every call of one cpstak.
import sys

sys.setrecursionlimit(1_000_000)


def tak(x, y, z, k):
    if not y < x:
        return k(z)
    return tak(x - 1, y, z, lambda v1:
               tak(y - 1, z, x, lambda v2:
                   tak(z - 1, x, y, lambda v3: tak(v1, v2, v3, k))))


def cpstak(x, y, z):
    return tak(x, y, z, lambda a: a)


total = 0
for _ in range(N):
    total += cpstak(18, 12, 6)
print(cpstak(18, 12, 6), total)
