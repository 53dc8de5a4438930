"""What chapter 5b's checker costs: the stage `mono` runs it on every compilation.

    python bench/mono_check.py [--lines 10000] [--repeat 7] [--json bench/mono_check.json]

Generates the program of bench/compile_speed.py (blocks of ten lines: a data type, a match, a
closure, a `while` loop, calls between blocks) at LINES lines, and times, in alternation, REPEAT
times each: the whole compilation as `lc` runs it (every stage of the pipeline, the checker inside
the stage `mono`, then machine code, as compile_speed does), monomorphisation alone, and the
checker alone on the monomorphised program. Prints the medians and the checker's share of the
whole compilation; with --json, records them with the machine (CPU model, cores), which chapter
5b prints.

Long runs compete with other work: run with `nice -n 10`.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compile_speed import program, stages  # noqa: E402
from machine import describe  # noqa: E402  (bench/machine.py: the machine a measurement ran on)

from lcompiler import mono  # noqa: E402
from lcompiler.errors import Source  # noqa: E402
from lcompiler.support import collector_paused, target_machine  # noqa: E402
from lcompiler.types import check_types  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", type=Path, default=None, help="record the medians and the machine here")
    args = ap.parse_args(argv)
    described = describe()                       # as the measurement starts
    target_machine()                             # initialise LLVM outside the timings
    sys.setrecursionlimit(100_000)
    text = program(args.lines)
    typed, _ = check_types(Source("generated.l", text))
    clock, runs = time.perf_counter, []
    for _ in range(args.repeat):
        whole, _, _ = stages(text, None)
        with collector_paused():                 # as lc runs every stage
            start = clock()
            result = mono.monomorphise(typed)
            middle = clock()
            mono.check(result)
            end = clock()
        runs.append({"compile": sum(whole.values()), "mono stage": whole["mono"],
                     "monomorphise": middle - start, "check": end - middle})
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    lines = text.count("\n")
    print(f"{lines} lines, medians of {args.repeat} runs, in alternation:")
    for k, v in median.items():
        print(f"  {k:14} {v:8.3f} s")
    share = median["check"] / median["compile"]
    print(f"the checker: {100 * share:.1f} % of the whole compilation, "
          f"{median['check'] / median['monomorphise']:.2f} times monomorphisation alone")
    if args.json is not None:
        record = {"command": "python bench/mono_check.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "lines": lines, "repeat": args.repeat, "seconds": median, "runs": runs,
                  "machine": described}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
