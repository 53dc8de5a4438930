N = 2000
# gcd: greatest common divisors by Euclid's algorithm: the sum of gcd(i, j)
# over 1 <= i, j <= N, and the number of pairs with gcd 1. Nested loops of
# integer division (written out, not math.gcd, to do what the others do).


def gcd(x, y):
    while y != 0:
        x, y = y, x % y
    return x


total = coprime = 0
for i in range(1, N + 1):
    for j in range(1, N + 1):
        g = gcd(i, j)
        total += g
        if g == 1:
            coprime += 1
print(total, coprime)
