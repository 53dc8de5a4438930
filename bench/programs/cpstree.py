N = 100
# cpstree: a walk of a complete binary tree of depth 16 in
# continuation-passing style, N times; the value of the walk is a hash of
# the leaves in order. A tree is a pair (left, right) or a leaf's number.
# Python has no tail calls: the stack grows with every call of one walk.
import sys

sys.setrecursionlimit(1_000_000)


def make(d, i):
    return i if d == 0 else (make(d - 1, 2 * i), make(d - 1, 2 * i + 1))


def walk(t, r, k):
    if not isinstance(t, tuple):
        return k(t)
    left, right = t
    return walk(left, r, lambda a: walk(right, r, lambda b: k((a * 31 + b + r) % 1000003)))


tree = make(16, 0)
total = 0
for r in range(N):
    total = (total + walk(tree, r, lambda h: h)) % 1000003
print(walk(tree, 0, lambda h: h), total)
