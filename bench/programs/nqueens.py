N = 13
# nqueens: count the solutions of the n-queens problem. A partial board is a
# linked list of the columns of the queens placed so far, the latest row
# first: a pair (head, tail), or None for the empty list.


def safe(c, queens, d):
    while queens is not None:
        q, queens = queens
        if q == c or q == c - d or q == c + d:
            return False
        d += 1
    return True


def solutions(n, row, queens):
    if row == n:
        return 1
    count = 0
    for c in range(n):
        if safe(c, queens, 1):
            count += solutions(n, row + 1, (c, queens))
    return count


def queens(n):
    return solutions(n, 0, None)


print(queens(6), queens(8), queens(N))
