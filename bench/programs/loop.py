N = 2000000
# loop: Collatz sequences. For every start i from 1 to N, count the steps of
# x -> x / 2 (x even), x -> 3x + 1 (x odd) until x reaches 1; print the
# total number of steps, and the start with the longest sequence with its
# length.


def collatz(n):
    total, best, best_steps = 0, 1, 0
    for i in range(1, n + 1):
        x, steps = i, 0
        while x != 1:
            if x % 2 == 0:
                x = x // 2
            else:
                x = 3 * x + 1
            steps += 1
        total += steps
        if steps > best_steps:
            best, best_steps = i, steps
    print(total, best, best_steps)


collatz(N)
