N = 2000
# hof: closure calls through higher-order functions. Each round makes five
# closures that capture the round's numbers (an adder, a scaler, a
# polynomial, a composition of two closures, and one that applies a closure
# twice), then folds over the numbers 1 .. 1000 with a function that
# applies every closure of a list to each number. Nearly every call is a
# call of a closure; little is allocated.
P = 1000003


def fold_range(a, b, acc, f):
    for x in range(a, b + 1):
        acc = f(acc, x)
    return acc


def apply_all(fs, x, acc):
    for f in fs:
        acc = (acc + f(x)) % P
    return acc


def compose(f, g):
    return lambda x: f(g(x))


def adder(k):
    return lambda x: x + k


def scaler(k):
    return lambda x: x * k


def poly(a, b):
    return lambda x: (x * x + a * x + b) % P


def twice(f):
    return lambda x: f(f(x))


def round_(i):
    fs = [adder(i), scaler(i % 7 + 1), poly(i % 5, i % 3), compose(adder(1), scaler(3)), twice(adder(i % 11))]
    return fold_range(1, 1000, i, lambda acc, x: (acc * 31 + apply_all(fs, x, 0)) % P)


total = 0
for i in range(N):
    total = (total + round_(i)) % P
print(round_(0), round_(1), total)
