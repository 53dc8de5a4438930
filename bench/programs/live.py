N = 500000
# live: a large structure stays alive while the program allocates. A
# balanced binary search tree maps the keys 0 ... N - 1 to numbers; it is
# updated 4N times without mutation (each update copies the path from the
# root to the key), at keys drawn by the Park-Miller generator. A node is
# a tuple (left, key, value, right), a leaf None.


def build(lo, hi):
    if lo > hi:
        return None
    mid = (lo + hi) // 2
    return (build(lo, mid - 1), mid, 0, build(mid + 1, hi))


def update(t, k, delta):
    if t is None:
        return None
    left, key, value, right = t
    if k < key:
        return (update(left, k, delta), key, value, right)
    if k > key:
        return (left, key, value, update(right, k, delta))
    return (left, key, value + delta, right)


def checksum(t, total):
    while t is not None:
        left, key, value, t = t
        total = checksum(left, (total + key * value) % 1000003)
    return total


tree = build(0, N - 1)
x = 1
for _ in range(4 * N):
    x = x * 16807 % 2147483647
    tree = update(tree, x % N, x % 7 + 1)
print(checksum(tree, 0))
