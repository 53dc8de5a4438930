"""Lexing and parsing speed of lcompiler.syntax on generated L programs (issue: chapter 4a).

    python bench/parse_speed.py [--lines 100000] [--repeat 3]

Generates programs of 12,500 … 100,000 lines (doubling), made of a repeated
mix of every kind of construct — data declarations, multi-clause functions,
blocks with var/while, matches, method chains, long argument lists — with
fresh names in each repetition. Prints, for each size, the best time of
several runs for tokenize and for parse (which includes tokenize), the lines
per second, and the ratio of each time to the previous size's: linear growth
means a ratio near 2.
"""

import argparse
import gc
import time

from lcompiler.errors import Source
from lcompiler.syntax import parse, tokenize

UNIT = """\
data Tree{i}<a> {{
  Leaf{i}
  Node{i}(Tree{i}<a>, a, Tree{i}<a>)
}}
def insert{i} = {{
  Leaf{i}, x -> Node{i}(Leaf{i}, x, Leaf{i})
  Node{i}(l, v, r), x -> if (x < v) Node{i}(insert{i}(l, x), v, r) else Node{i}(l, v, insert{i}(r, x))
}}
def sum{i}(n) = {{
  var i := 0
  var s := 0
  while (i <= n) {{ s := s + i * {i} % 7; i := i + 1 }}
  s
}}
def describe{i}(x) = match (x % 3, x > {i}) {{
  (0, true) -> "fizz"
  (1, _) -> "buzz"
  _ -> "other"
}}
def chain{i}(t) = t
  .insert{i}(3)
  .insert{i}(-1)
print(sum{i}(10), describe{i}({i}), chain{i}(Leaf{i}).{{ Leaf{i} -> 0; Node{i}(_, v, _) -> v }},
      {{ a, b -> a - (b - 1) }}(1, 2) && !(1 >= 2) || false)
"""
LINES_PER_UNIT = UNIT.count("\n")


def program(lines: int) -> Source:
    units = max(1, lines // LINES_PER_UNIT)
    return Source("generated.l", "".join(UNIT.format(i=i) for i in range(units)))


def best(repeat: int, action) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--lines", type=int, default=100_000, help="the largest program, in lines")
    options.add_argument("--repeat", type=int, default=3, help="runs per size (the best is kept)")
    args = options.parse_args()
    sizes = [args.lines // 8, args.lines // 4, args.lines // 2, args.lines]
    print(f"{'lines':>8} {'tokens':>9} {'lex s':>7} {'parse s':>8} {'lines/s':>9} {'parse ratio':>12}")
    previous = None
    per_line = []
    for lines in sizes:
        source = program(lines)
        real_lines = source.text.count("\n")
        tokens = len(tokenize(source))
        lex = best(args.repeat, lambda: tokenize(source))
        whole = best(args.repeat, lambda: parse(source))
        ratio = f"{whole / previous:.2f}" if previous else "-"
        print(f"{real_lines:>8} {tokens:>9} {lex:>7.2f} {whole:>8.2f} {real_lines / whole:>9.0f} {ratio:>12}")
        previous = whole
        per_line.append(whole / real_lines)
    print(f"time per line, largest program / smallest: {per_line[-1] / per_line[0]:.2f} "
          "(1.00 is perfectly linear)")


if __name__ == "__main__":
    main()
