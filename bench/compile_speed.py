"""How long lc takes to compile a program, stage by stage, as the program grows.

    python bench/compile_speed.py [--lines 1250 2500 5000 10000] [--repeat 3] [--parts N] [--gcc]

Generates L programs of the given numbers of lines (blocks of ten lines, each
with a data type, a match, a closure, a `while` loop, and calls between blocks)
and times each stage of the compiler on them, as `lc` runs them (Python's
cycle collector paused, machine code included: the command never collects), then
collects outside the timings: the stages of the pipeline (chapter 4a) up to
the back end — tokens, syntax tree, core, types, monomorphisation, CPS, the
optimiser of chapter 9 (`--O0`: without it), closure conversion, the
back end (CPS to llvmlite's IR) — and machine code: the module printed as LLVM text (split into
parts when it is big), then verified, optimised at O2 and compiled to object
files, the parts in parallel (chapter 11's `machine_code`). Prints seconds per
stage, the total, microseconds per line (linear growth keeps that column
flat), the number of parts, and the number of nodes of the program in CPS;
`--parts 1` compiles every module whole.
With `--gcc`, also times `gcc -O2 -c` on the same programs written in C.
"""
import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lcompiler import cps, driver, pipeline
from lcompiler.errors import Source
from lcompiler.support import collector_paused, target_machine

BLOCK = """data Shape{i} {{ Circle{i}(Int); Rect{i}(Int, Int) }}
def area{i}(s) = match (s) {{ Circle{i}(r) -> 3 * r * r; Rect{i}(w, h) -> w * h }}
def step{i}(x, y) = {{
  var acc := x
  var k := 0
  while (k < y) {{ acc := acc + area{i}(Rect{i}(k, {i})); k := k + 1 }}
  let add = {{ z -> z + acc }}
  if (acc % 2 == 0) add(prev{i}(acc)) else add(area{i}(Circle{i}(y)))
}}
def prev{i}(n) = if (n < 1000) step{j}(n, 3) else n / 2
"""


C_BLOCK = """typedef struct {{ long tag, a, b; }} Shape{i};
static long area{i}(Shape{i} *s) {{ switch (s->tag) {{ case 0: return 3 * s->a * s->a; default: return s->a * s->b; }} }}
long prev{i}(long n);
typedef struct add{i} {{ long (*code)(struct add{i} *, long); long *acc; }} Add{i};
static long add{i}_code(Add{i} *env, long z) {{ return z + *env->acc; }}
long step{i}(long x, long y) {{
  long *acc = malloc(sizeof *acc), k = 0;
  *acc = x;
  while (k < y) {{ Shape{i} *r = malloc(sizeof *r); r->tag = 1; r->a = k; r->b = {i}; *acc += area{i}(r); k++; }}
  Add{i} *add = malloc(sizeof *add); add->code = add{i}_code; add->acc = acc;
  if (*acc % 2 == 0) return add->code(add, prev{i}(*acc));
  Shape{i} *c = malloc(sizeof *c); c->tag = 0; c->a = y; return add->code(add, area{i}(c));
}}
long prev{i}(long n) {{ return n < 1000 ? step{j}(n, 3) : n / 2; }}
"""


def c_program(lines: int) -> str:
    """The same program in C, block for block, for a C compiler to compile."""
    blocks = max(1, lines // 10)
    text = "#include <stdio.h>\n#include <stdlib.h>\nlong step0(long x, long y) { return x + y; }\n"
    text += "".join(C_BLOCK.format(i=i, j=i - 1) for i in range(1, blocks + 1))
    return text + f"int main(void) {{ printf(\"%ld\\n\", step{blocks}(1, 5)); return 0; }}\n"


def gcc_seconds(text: str) -> float:
    """Seconds `gcc -O2 -c` takes on a C program."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "p.c").write_text(text)
        start = time.perf_counter()
        subprocess.run(["gcc", "-O2", "-c", "p.c", "-o", "p.o"], cwd=tmp, check=True)
        return time.perf_counter() - start


def program(lines: int) -> str:
    blocks = max(1, lines // 10)
    text = "def step0(x, y) = x + y\n"
    text += "".join(BLOCK.format(i=i, j=i - 1) for i in range(1, blocks + 1))
    return text + f"print(step{blocks}(1, 5))\n"


def stages(text: str, parts: int | None, optimiser: bool = True) -> tuple[dict, int, int]:
    """Seconds per stage of compiling text to object files, the number of parts, and the number of
    nodes of the program in CPS (chapter 6's `size`, counted outside the timings): the stages of
    the pipeline up to `llvm`, as `lc` runs them, then machine code."""
    times, clock, nodes = {}, time.perf_counter, 0
    source = Source("generated.l", text)
    unit, value = pipeline.Unit(source, optimiser), source
    with collector_paused():
        for s in pipeline.load():
            if optimiser or s.name not in pipeline.OPTIMISATIONS:
                start = clock()
                value = s.run(value, unit)
                times[s.name] = clock() - start
            if s.name == "cps":
                nodes = cps.size(value)
            if s.name == "llvm":
                break
        parts = parts or driver.parts_for(value)
        start = clock()
        driver.machine_code(value, 2, True, parts)
        times["machine code"] = clock() - start
    del value, unit
    gc.collect()                        # what lc, the command, never does (appendix B): outside the timings
    return times, parts, nodes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[1250, 2500, 5000, 10000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parts", type=int, default=None, help="compile in this many parts (default: by size)")
    ap.add_argument("--gcc", action="store_true", help="also time gcc -O2 on the same programs written in C")
    ap.add_argument("--O0", action="store_true", help="without the optimiser of chapter 9 (as lc -O0)")
    ap.add_argument("--json", type=Path, default=None,
                    help="also record the medians in this file (chapter 12 reads bench/compile_speed.json)")
    args = ap.parse_args(argv)
    from machine import describe        # bench/machine.py
    described = describe()              # as the measurement starts
    target_machine()                             # initialise LLVM outside the timings
    sys.setrecursionlimit(100_000)
    rows = []
    for lines in args.lines:
        text = program(lines)
        real_lines = text.count("\n")
        runs = [stages(text, args.parts, not args.O0) for _ in range(args.repeat)]
        median = {k: statistics.median(r[k] for r, _, _ in runs) for k in runs[0][0]}
        rows.append((real_lines, median, runs[0][1], runs[0][2]))
    names = list(rows[0][1])
    print("lines  " + "  ".join(f"{n:>12}" for n in names) + "      total  µs/line  parts  CPS nodes")
    for lines, m, parts, nodes in rows:
        total = sum(m.values())
        print(f"{lines:5}  " + "  ".join(f"{m[n]:12.3f}" for n in names)
              + f"  {total:9.2f}  {1e6 * total / lines:7.0f}  {parts:5}  {nodes:9}")
    first, last = rows[0], rows[-1]
    ratio = (sum(last[1].values()) / last[0]) / (sum(first[1].values()) / first[0])
    print(f"time per line, largest / smallest program: {ratio:.2f} (1.00 is linear)")
    command = "python bench/compile_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {"command": command.strip(), "repeat": args.repeat, "optimiser": not args.O0, "cores": driver.cores(),
              "rows": [{"lines": lines, "parts": parts, "nodes": nodes, "seconds": m} for lines, m, parts, nodes in rows]}
    if args.gcc:
        print("\nthe same programs in C, gcc -O2 -c (seconds):")
        record["gcc"] = []
        for lines in args.lines:
            text = c_program(lines)
            seconds = statistics.median(gcc_seconds(text) for _ in range(args.repeat))
            record["gcc"].append({"lines": text.count("\n"), "seconds": seconds})
            print(f"{text.count(chr(10)):5} lines of C  {seconds:6.2f}")
    if args.json is not None:
        record["machine"] = described
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
