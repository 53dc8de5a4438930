N = 200
# deriv: symbolic differentiation. The product (x + 1)(x + 2)...(x + 12)
# is differentiated three times by rules that simplify as they build
# (0 + e = e, 1 * e = e, 0 * e = 0, constants folded), and each derivative
# is evaluated at x = 1 ... 10, modulo 1000003. Repeated N times, with the
# constants shifted by the round. An expression is an int, the string "x",
# or a tuple ("+", a, b) or ("*", a, b).
P = 1000003


def add(a, b):
    if a == 0:
        return b
    if b == 0:
        return a
    if type(a) is int and type(b) is int:
        return (a + b) % P
    return ("+", a, b)


def mul(a, b):
    if a == 0 or b == 0:
        return 0
    if a == 1:
        return b
    if b == 1:
        return a
    if type(a) is int and type(b) is int:
        return a * b % P
    return ("*", a, b)


def d(e):
    if type(e) is int:
        return 0
    if e == "x":
        return 1
    op, a, b = e
    if op == "+":
        return add(d(a), d(b))
    return add(mul(d(a), b), mul(a, d(b)))


def evaluate(e, x):
    if type(e) is int:
        return e
    if e == "x":
        return x
    op, a, b = e
    if op == "+":
        return (evaluate(a, x) + evaluate(b, x)) % P
    return evaluate(a, x) * evaluate(b, x) % P


def product(r, i, k):
    """(x + r + 1)(x + r + 2)...(x + r + k)"""
    f = add("x", r + i)
    return f if i == k else mul(f, product(r, i + 1, k))


def values(e):
    return sum(evaluate(e, x) for x in range(1, 11)) % P


def round_(r):
    e1 = d(product(r, 1, 12))
    e2 = d(e1)
    e3 = d(e2)
    return (values(e1) + values(e2) + values(e3)) % P


total = 0
for r in range(N):
    total = (total + round_(r)) % P
print(round_(0), total)
