"""Integer code against gcc, with C's integers made to wrap as L's do (chapter 12).

    python bench/wrapv.py [--repeat 5] [--json bench/wrapv.json]

L's `Int` wraps around on overflow (the language reference); C's signed
integers do not: an overflow is undefined behaviour, so gcc may assume that
none happens -- that `x * x` is never negative, that `2 * x * y / 65536` is
`x * y / 32768`. `gcc -fwrapv` makes C's signed integers wrap, as L's do, and
takes those assumptions away. This script times the integer benchmarks of
bench/programs on which gcc -O2 is L's peer (the ones without lists or
closures) in L, in C built by gcc -O2, and in C built by gcc -O2 -fwrapv, in
alternation as bench/run.py times them (L, C, L, C -fwrapv, ...), at
bench/run.py's sizes, and prints the median ratios L/C and L/C-fwrapv with
their 95 % bootstrap intervals. If a ratio moves from above 1 to below when
C's integers wrap, what L trailed was C's freedom to ignore overflow, not
its code generator.
"""
import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

import run                                   # bench/run.py: building, alternation, intervals
from builds import start_record             # bench/builds.py: the machine and the command, recorded

PROGRAMS = ("fib", "ack", "loop", "mandel", "gcd", "change")


class Wrapping(run.C):
    """C built by gcc -O2 -fwrapv: signed integers that wrap around."""

    def build(self, src, tmp):
        exe = tmp / f"{src.stem}-wrapv"
        run.check_build(run.subprocess.run([self.compiler, self.level, "-fwrapv", src, "-o", exe],
                                           capture_output=True, text=True), "gcc -O2 -fwrapv")
        return [str(exe)]

    def flags(self):
        return f"{self.compiler} {self.level} -fwrapv"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args(argv)
    languages = {"L": run.LANGUAGES["L"], "C": run.LANGUAGES["C"], "C-fwrapv": Wrapping("C-fwrapv", "gcc", "-O2")}
    results = start_record("wrapv.py", argv, args.repeat)
    print(f"{'benchmark':10} {'L/C':>20} {'L/C-fwrapv':>20}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in PROGRAMS:
            size = run.SIZES[name][0]
            cmds = {lang: language.build(language.source(name, size, tmp) if lang != "C-fwrapv"
                                         else tmp / f"{name}.c", tmp)
                    for lang, language in languages.items()}
            outputs = set()

            def check(lang, out):
                outputs.add(out)
                return None if len(outputs) == 1 else f"printed {out!r}, not what the others printed"
            times, _, paired, problem = run.alternate(cmds, ["C", "C-fwrapv"], args.repeat, check)
            if problem:
                print(f"{name}: {problem}")
                return 1
            record = {"size": size, "date": datetime.datetime.now().isoformat(timespec="seconds"),
                      "times": times, **{f"L/{p}": run.pair_record(paired[p], times[p]) for p in ("C", "C-fwrapv")}}
            results["benchmarks"][name] = record
            print(f"{name:10} " + " ".join(f"{record[k]['ratio']:6.2f} [{record[k]['ci'][0]:.2f}, {record[k]['ci'][1]:.2f}]"
                                             for k in ("L/C", "L/C-fwrapv")), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
