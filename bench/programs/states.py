N = 50000000
# states: a state machine. It reads N symbols 0, 1, 2 made by the linear
# congruential generator x -> (25173 x + 13849) mod 65536 (the symbol is
# (x / 256) % 3) and counts the occurrences of the word 0 1 2. Python has
# no tail calls: the machine is a loop, its state a variable.


def machine(n):
    state, x, count = 0, 1, 0   # state 0: nothing seen, 1: "0" seen, 2: "0 1" seen
    for _ in range(n):
        x = (x * 25173 + 13849) % 65536
        c = x // 256 % 3
        if state == 0:
            state = 1 if c == 0 else 0
        elif state == 1:
            state = 1 if c == 0 else 2 if c == 1 else 0
        else:
            if c == 2:
                count += 1
            state = 1 if c == 0 else 0
    return count


print(machine(N))
