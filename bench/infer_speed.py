"""Type inference time on generated programs of 10^3 … 10^5 definitions (chapter 5).

    python bench/infer_speed.py [--largest 100000] [--repeat 2]

Each generated definition is one line that calls the previous definition
(a dependency chain, so components are typed in order) and uses the
polymorphic helpers id, map, length and pair at several types. Parsing,
desugaring and name resolution are timed apart from inference. Prints, for
each size, the best time of several runs and the ratio to the previous
size: linear growth is a ratio near 2 for each doubling.
"""

import argparse
import gc
import time

from lcompiler.errors import Source
from lcompiler.interp import check
from lcompiler.types import infer_program

PRELUDE = """\
data List<t> { Cons(t, List<t>); Nil }
def id(x) = x
def pair(a, b) = (a, b)
def length = { Cons(_, t) -> 1 + length(t); Nil -> 0 }
def map(f, l) = l.{ Cons(x, r) -> Cons(f(x), map(f, r)); Nil -> Nil }
def f0(n) = n
"""
LINE = ("def f{i}(n) = if (n == 0) id({i}) else "
        "f{p}(n - 1) + length(map({{ x -> pair(x, id(true)) }}, Cons(id(n), Nil)))\n")


def program(definitions: int) -> Source:
    return Source("generated.l", PRELUDE + "".join(LINE.format(i=i, p=i - 1) for i in range(1, definitions + 1)))


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--largest", type=int, default=100_000, help="definitions in the largest program")
    options.add_argument("--repeat", type=int, default=2, help="runs per size (the best is kept)")
    args = options.parse_args()
    sizes = [args.largest // 2**k for k in range(6, -1, -1)]
    print(f"{'definitions':>11} {'front end s':>12} {'inference s':>12} {'µs per def':>11} {'ratio':>6}")
    previous = first = None
    for n in sizes:
        source = program(n)
        front, infer = float("inf"), float("inf")
        for _ in range(args.repeat):
            gc.collect()
            start = time.perf_counter()
            core = check(source)
            middle = time.perf_counter()
            infer_program(core)
            end = time.perf_counter()
            front, infer = min(front, middle - start), min(infer, end - middle)
        ratio = f"{infer / previous:.2f}" if previous else "-"
        print(f"{n:>11} {front:>12.2f} {infer:>12.2f} {infer / n * 1e6:>11.1f} {ratio:>6}")
        previous = infer
        first = first or infer / n
    print(f"time per definition, largest program / smallest: {infer / n / first:.2f} (1.00 is linear)")


if __name__ == "__main__":
    main()
