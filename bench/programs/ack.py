N = 11
# ack: the Ackermann function, ack(3, n) = 2^(n + 3) - 3.
import sys

sys.setrecursionlimit(1_000_000)


def ack(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))


print(ack(2, N), ack(3, N))
