N = 20000
# divrec: recursive division by two on lists, after the r7rs benchmark of
# that name. A list of 1000 numbers is halved (every other element kept)
# by a recursion that builds the result as it returns; the halving is
# repeated N times, and each result is summed. A list is a chain of pairs
# (head, tail), the empty list None, as a Lisp list.


def create(k):
    acc = None
    for x in range(k, 0, -1):
        acc = (x, acc)
    return acc


def div2(lst):
    if lst is not None and lst[1] is not None:
        return (lst[0], div2(lst[1][1]))
    return None


def total_of(lst, acc):
    while lst is not None:
        acc += lst[0]
        lst = lst[1]
    return acc


xs = create(1000)
total = 0
for i in range(N):
    total += total_of(div2(xs), i)
print(total_of(div2(xs), 0), total)
