"""How long lc takes to compile a program, stage by stage, as the program grows.

    python bench/compile_speed.py [--lines 1250 2500 5000 10000] [--repeat 3]

Generates L programs of the given numbers of lines (blocks of ten lines, each
with a data type, a match, a closure, a `while` loop, and calls between blocks)
and times each stage of the compiler on them: the front end (parse, names,
types), monomorphisation, CPS conversion, closure conversion, the back end
(CPS to LLVM IR), LLVM's verifier and O2 pipeline, and the machine code
(an object file). Prints seconds per stage, the total, and microseconds per
line: linear growth keeps the last column flat.
"""
import argparse
import statistics
import sys
import time

import llvmlite.binding as llvm

from lcompiler import addlang, closure, cps_convert, llvm_backend, types
from lcompiler.errors import Source
from lcompiler.mono import monomorphise

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


def program(lines: int) -> str:
    blocks = max(1, lines // 10)
    text = "def step0(x, y) = x + y\n"
    text += "".join(BLOCK.format(i=i, j=i - 1) for i in range(1, blocks + 1))
    return text + f"print(step{blocks}(1, 5))\n"


def stages(text: str) -> dict:
    """Seconds per stage of compiling text to an object file."""
    times, clock = {}, time.perf_counter

    def timed(name, f, *args):
        start = clock()
        result = f(*args)
        times[name] = clock() - start
        return result

    source = Source("generated.l", text)
    core, _ = timed("front end", types.check_types, source)
    datas = llvm_backend.data_declarations(core)
    mono = timed("monomorphise", monomorphise, core)
    cps = timed("to CPS", cps_convert.convert, mono)
    timed("closures", closure.closure_convert, cps)
    module = timed("to LLVM", lambda: llvm_backend.Backend(cps, datas, source.name).compile())
    ref = timed("LLVM O2", llvm_backend.optimise, module)
    machine = llvm.Target.from_default_triple().create_target_machine(reloc="pic", codemodel="small", opt=2)
    timed("machine code", machine.emit_object, ref)
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[1250, 2500, 5000, 10000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    addlang.target_machine()                     # initialise LLVM outside the timings
    sys.setrecursionlimit(100_000)
    rows = []
    for lines in args.lines:
        text = program(lines)
        real_lines = text.count("\n")
        runs = [stages(text) for _ in range(args.repeat)]
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        rows.append((real_lines, median))
    names = list(rows[0][1])
    print("lines  " + "  ".join(f"{n:>12}" for n in names) + "      total  µs/line")
    for lines, m in rows:
        total = sum(m.values())
        print(f"{lines:5}  " + "  ".join(f"{m[n]:12.3f}" for n in names) + f"  {total:9.2f}  {1e6 * total / lines:7.0f}")
    first, last = rows[0], rows[-1]
    ratio = (sum(last[1].values()) / last[0]) / (sum(first[1].values()) / first[0])
    print(f"time per line, largest / smallest program: {ratio:.2f} (1.00 is linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
