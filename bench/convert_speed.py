"""L → CPS conversion and closure conversion on generated programs of 10^3 … 10^5 source nodes
(chapters 7 and 8).

    python bench/convert_speed.py [--largest 100000] [--repeat 3]

Each generated definition uses every kind of construct the conversion
handles: a `var` loop, a `match` with constructor and integer patterns, an
`if` in and out of tail position, a closure capturing a parameter, calls in
and out of tail position. The source size is the number of core expression
nodes (chapter 4b's core, counted after desugaring); the CPS size is
`cps.size` (terms, primitives and definitions). Prints, per size, the best
time of several runs, the time and the CPS size per source node, and the
ratio of the largest program's time per node to the smallest's: 1.00 is
linear. Every figure printed is also written to bench/convert_speed.json (--json), which
chapters 7 and 8 read.
"""

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from lcompiler import cps
from lcompiler.closure import closure_convert
from lcompiler.cps_convert import _children, convert
from lcompiler.errors import Source
from lcompiler.types import check_types

PRELUDE = """\
data List<t> { Cons(t, List<t>); Nil }
def length = { Cons(_, t) -> 1 + length(t); Nil -> 0 }
def f0(n) = n
"""
DEFINITION = """\
def f{i}(n) = {{
  var i := 0
  var acc := 0
  while (i < n) {{ acc := acc + (if (i % 2 == 0) i else 1); i := i + 1 }}
  let add = {{ x -> x + acc }}
  let l = Cons(add(n), Cons(f{p}(n), Nil))
  match (l) {{
    Cons(0, _) -> length(l)
    Cons(x, Cons(y, Nil)) -> if (x > y) x - y else f{p}(y)
    _ -> 0
  }}
}}
"""


def program(definitions: int) -> Source:
    text = PRELUDE + "".join(DEFINITION.format(i=i, p=i - 1) for i in range(1, definitions + 1))
    return Source("generated.l", text + f"print(f{definitions}(3))\n")


def source_nodes(core) -> int:
    stack = [item.value if hasattr(item, "value") and hasattr(item, "is_function") else item
             for item in core.items if not hasattr(item, "constructors")]
    n = 0
    while stack:
        e = stack.pop()
        n += 1
        stack.extend(_children(e))
    return n


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--largest", type=int, default=100_000, help="source nodes in the largest program")
    options.add_argument("--repeat", type=int, default=3, help="runs per size (the best is kept)")
    options.add_argument("--clock", choices=("wall", "process"), default="wall",
                         help="time.perf_counter, or time.process_time (this process's CPU time only: "
                              "steadier on a loaded machine)")
    options.add_argument("--json", default=str(Path(__file__).with_name("convert_speed.json")),
                         help="where to write the figures (chapters 7 and 8 read bench/convert_speed.json); "
                              "'' for nowhere")
    args = options.parse_args()
    from machine import describe        # bench/machine.py
    described = describe()              # as the measurement starts
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    per_definition = source_nodes(check_types(program(1))[0]) - source_nodes(check_types(program(0))[0])
    targets = [args.largest // 100, args.largest * 3 // 100, args.largest // 10, args.largest * 3 // 10,
               args.largest]
    counts = [max(1, t // per_definition) for t in targets]
    print(f"{'source nodes':>12} {'CPS nodes':>10} {'CPS/src':>8} {'convert s':>10} {'µs/node':>8} "
          f"{'closure s':>10} {'µs/node':>8}")
    rows = []
    for n in counts:
        core, _ = check_types(program(n))
        size = source_nodes(core)
        best_convert = best_closure = float("inf")
        for _ in range(args.repeat):
            gc.collect()
            start = clock()
            p = convert(core)
            middle = clock()
            closure_convert(p)
            end = clock()
            best_convert, best_closure = min(best_convert, middle - start), min(best_closure, end - middle)
        cps_size = cps.size(p)
        rows.append({"source nodes": size, "cps nodes": cps_size, "convert s": best_convert,
                     "closure s": best_closure})
        print(f"{size:>12} {cps_size:>10} {cps_size / size:>8.2f} {best_convert:>10.3f} "
              f"{best_convert / size * 1e6:>8.2f} {best_closure:>10.3f} {best_closure / size * 1e6:>8.2f}")
    first, last = rows[0], rows[-1]
    ratio = {kind: (last[kind] / last["source nodes"]) / (first[kind] / first["source nodes"])
             for kind in ("convert s", "closure s")}
    print(f"time per source node, largest / smallest: conversion {ratio['convert s']:.2f}, "
          f"closure conversion {ratio['closure s']:.2f} (1.00 is linear)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"command": " ".join(["python bench/convert_speed.py"] + sys.argv[1:]), "settings": {"repeat": args.repeat, "clock": args.clock},
             "sizes": rows, "machine": described}, indent=1) + "\n")
        print("written to", args.json)


if __name__ == "__main__":
    main()
