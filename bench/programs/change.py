N = 400
# change: the number of ways to change an amount into coins of 50, 25, 10,
# 5 and 1 (Abelson and Sussman's count-change), by the tree recursion that
# either uses the first coin of the list once more or drops it. For the
# amounts N - 4 .. N. The coins are a chain of pairs (head, tail), as a Lisp
# list. The recursion is as deep as the amount: the limit is raised.
import sys

sys.setrecursionlimit(100_000)


def ways(amount, coins):
    if coins is None:
        return 0
    if amount == 0:
        return 1
    if amount < 0:
        return 0
    return ways(amount, coins[1]) + ways(amount - coins[0], coins)


COINS = (50, (25, (10, (5, (1, None)))))
print(ways(N, COINS), sum(ways(amount, COINS) for amount in range(N - 4, N + 1)))
