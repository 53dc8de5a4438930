"""Lexing and parsing speed of lcompiler.syntax on generated L programs (issue: chapter 4a).

    python bench/parse_speed.py [--lines 100000] [--repeat 3]

Generates programs of 12,500 … 100,000 lines (doubling), made of a repeated
mix of every kind of construct — data declarations, multi-clause functions,
blocks with var/while, matches, method chains, long argument lists — with
fresh names in each repetition. Prints, for each size, the best time of
several runs for tokenize and for parse (which includes tokenize), the lines
per second, and the ratio of each time to the previous size's: linear growth
means a ratio near 2. Last, the time of parse with Python's cyclic garbage
collector left running, which parse pauses. Every figure printed is also written to bench/parse_speed.json
(--json), which chapter 4a reads.
"""

import argparse
import contextlib
import gc
import json
import sys
import time
from pathlib import Path

from lcompiler import syntax
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


def best(repeat: int, action, clock=time.perf_counter) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = clock()
        action()
        times.append(clock() - start)
    return min(times)


def parse_collecting(source: Source) -> None:
    """parse, with the cyclic garbage collector left as it is (running) instead of paused."""
    paused = syntax.collector_paused
    syntax.collector_paused = contextlib.nullcontext
    try:
        parse(source)
    finally:
        syntax.collector_paused = paused


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--lines", type=int, default=100_000, help="the largest program, in lines")
    options.add_argument("--repeat", type=int, default=3, help="runs per size (the best is kept)")
    options.add_argument("--clock", choices=("wall", "process"), default="wall",
                         help="time.perf_counter, or time.process_time (this process's CPU time only: "
                              "steadier on a loaded machine)")
    options.add_argument("--json", default=str(Path(__file__).with_name("parse_speed.json")),
                         help="where to write the figures (chapter 4a reads bench/parse_speed.json); "
                              "'' for nowhere")
    args = options.parse_args()
    from machine import describe        # bench/machine.py
    described = describe()              # as the measurement starts
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    sizes = [args.lines // 8, args.lines // 4, args.lines // 2, args.lines]
    print(f"{'lines':>8} {'tokens':>9} {'lex s':>7} {'parse s':>8} {'lines/s':>9} {'parse ratio':>12} "
          f"{'collecting s':>13}")
    previous = None
    per_line, rows = [], []
    for lines in sizes:
        source = program(lines)
        real_lines = source.text.count("\n")
        tokens = len(tokenize(source))
        lex = best(args.repeat, lambda: tokenize(source), clock)
        whole = best(args.repeat, lambda: parse(source), clock)
        collecting = best(args.repeat, lambda: parse_collecting(source), clock)
        rows.append({"lines": real_lines, "tokens": tokens, "lex s": lex, "parse s": whole,
                     "parse s, collector running": collecting})
        ratio = f"{whole / previous:.2f}" if previous else "-"
        print(f"{real_lines:>8} {tokens:>9} {lex:>7.2f} {whole:>8.2f} {real_lines / whole:>9.0f} {ratio:>12} "
              f"{collecting:>13.2f}")
        previous = whole
        per_line.append(whole / real_lines)
    print(f"time per line, largest program / smallest: {per_line[-1] / per_line[0]:.2f} "
          "(1.00 is perfectly linear)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"command": " ".join(["python bench/parse_speed.py"] + sys.argv[1:]),
             "settings": {"repeat": args.repeat, "clock": args.clock}, "sizes": rows, "machine": described},
            indent=1) + "\n")
        print("written to", args.json)


if __name__ == "__main__":
    main()
