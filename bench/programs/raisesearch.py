N = 240
# raisesearch: backtracking by exceptions. Find the first placement of k
# queens on a k-by-k board, for k from 8 to 20 in turn, n times over. A
# partial board is a linked list of the columns of the queens placed so far,
# the latest row first: a pair (head, tail), or None. A row in which no
# column is safe raises Dead; the caller that placed the queen above catches
# it and tries its next column.


class Dead(Exception):
    pass


def safe(c, queens):
    d = 1
    while queens is not None:
        q, queens = queens
        if q == c or q == c - d or q == c + d:
            return False
        d += 1
    return True


def solve(k, row, queens):
    if row == k:
        return queens
    for c in range(k):
        if safe(c, queens):
            try:
                return solve(k, row + 1, (c, queens))
            except Dead:
                pass
    raise Dead


def checksum(queens):
    h = 0
    while queens is not None:
        q, queens = queens
        h = (h * 31 + q) % 1000003
    return h


total = 0
for i in range(N):
    total = (total + checksum(solve(8 + i % 13, 0, None))) % 1000003
print(total)
