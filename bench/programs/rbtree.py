N = 200000
# rbtree: a balanced search tree, Sedgewick's left-leaning red-black tree.
# N pseudo-random keys (the Lehmer generator x -> 48271 x mod 2^31 - 1) are
# inserted, each with its index as value; then the same N keys and N keys
# that are mostly absent (each plus one) are looked up. Prints the keys
# found, the sum of their values modulo 1000003, and the tree's height. As
# a Python programmer writes it, the nodes are objects updated in place.
M = 2147483647


class Node:
    __slots__ = ("red", "left", "right", "key", "value")

    def __init__(self, key, value):
        self.red, self.left, self.right, self.key, self.value = True, None, None, key, value


def is_red(t):
    return t is not None and t.red


def rotate_left(h):
    x = h.right
    h.right, x.left = x.left, h
    x.red, h.red = h.red, True
    return x


def rotate_right(h):
    x = h.left
    h.left, x.right = x.right, h
    x.red, h.red = h.red, True
    return x


def insert(h, key, value):
    if h is None:
        return Node(key, value)
    if key < h.key:
        h.left = insert(h.left, key, value)
    elif key > h.key:
        h.right = insert(h.right, key, value)
    else:
        h.value = value
    if is_red(h.right) and not is_red(h.left):
        h = rotate_left(h)
    if is_red(h.left) and is_red(h.left.left):
        h = rotate_right(h)
    if is_red(h.left) and is_red(h.right):
        h.red, h.left.red, h.right.red = True, False, False
    return h


def find(t, key):
    """The value of key, or -1."""
    while t is not None:
        if key < t.key:
            t = t.left
        elif key > t.key:
            t = t.right
        else:
            return t.value
    return -1


def height(t):
    return 0 if t is None else 1 + max(height(t.left), height(t.right))


root, x = None, 42
for i in range(N):
    root = insert(root, x, i)
    root.red = False
    x = 48271 * x % M
found = total = 0
for delta in (0, 1):
    x = 42
    for _ in range(N):
        v = find(root, x + delta)
        if v >= 0:
            found, total = found + 1, (total + v) % 1000003
        x = 48271 * x % M
print(found, total, height(root))
