N = 16
# binarytrees: allocation of binary trees, as in the Computer Language
# Benchmarks Game. A tree of depth N + 1 is made and checked (its nodes
# counted); a tree of depth N is made and kept alive to the end; then, for
# every even depth d from 4 to N, 2^(N - d + 4) trees of depth d are made
# and checked, each garbage as soon as it has been. A node is a pair, a
# leaf None.


def make(d):
    return None if d == 0 else (make(d - 1), make(d - 1))


def check(t):
    return 1 if t is None else 1 + check(t[0]) + check(t[1])


print(N + 1, check(make(N + 1)))
long_lived = make(N)
for d in range(4, N + 1, 2):
    iterations = 2 ** (N - d + 4)
    print(iterations, d, sum(check(make(d)) for _ in range(iterations)))
print(N, check(long_lived))
