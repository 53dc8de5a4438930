N = 11
# tak: the Takeuchi function, called as tak(3n, 2n, n).


def tak(x, y, z):
    if y < x:
        return tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y))
    return z


print(tak(3 * N, 2 * N, N))
