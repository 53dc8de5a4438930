N = 40
# fib: the naive doubly recursive Fibonacci function.


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


print(fib(N))
