"""Where innermost loops start: L's programs with loops at a multiple of 32 bytes against 16 (chapter 12).

    python bench/align.py [--repeat 5] [--only NAME ...] [--json bench/align.json]

LLVM starts a loop at an address that is a multiple of 16, as gcc -O2 does;
the compiler of this book asks for 32 for innermost loops (appendix B,
`target_machine`). This script builds every L benchmark of bench/programs
twice -- as `lc build` does, and with innermost loops at LLVM's 16 (a child
process that sets the option back before compiling) -- and times the two
executables in alternation (as bench/run.py times L against its peers), at
bench/run.py's sizes. It prints, per program, the median ratio of the
32-byte build to the 16-byte build with its 95 % bootstrap interval, and the
geometric mean over the programs. For `takl` it also records where the
loops of `mas` lie in each build (objdump), to show the loop that straddles
a 64-byte boundary.
"""
import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import run                                   # bench/run.py: sizes, building, alternation, intervals
from machine import describe, lines

BUILD_16 = """\
import sys
import llvmlite.binding as llvm
from lcompiler import driver
from lcompiler.errors import Source
from lcompiler.support import target_machine
target_machine()                                   # LLVM set up as lc sets it up, then:
llvm.set_option("", "-x86-experimental-pref-innermost-loop-alignment=4")   # LLVM's own 16 bytes
driver.build(Source(sys.argv[1], open(sys.argv[1]).read()), sys.argv[2])
"""


class Aligned16(run.L):
    """L with innermost loops where LLVM puts them by default: at a multiple of 16 bytes."""

    def build(self, src, tmp):
        exe = tmp / (src.stem + "-l16")
        run.check_build(subprocess.run([sys.executable, "-c", BUILD_16, src, exe], capture_output=True,
                                       text=True), "lc build with 16-byte loops")
        return [str(exe)]

    def flags(self):
        return "lc build, innermost loops at a multiple of 16 bytes"


def loops(exe, function):
    """The innermost loops of a function in an executable: (start, end) addresses of each backward
    branch's target and the branch, from objdump."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True, text=True).stdout
    body = re.search(rf"<{function}[_0-9]*>:\n(.*?)\n\n", text, re.S)
    found = []
    for line in body.group(1).splitlines() if body else []:
        m = re.match(r"\s*([0-9a-f]+):\s+j\w+\s+([0-9a-f]+) <", line)
        if m and int(m.group(2), 16) < int(m.group(1), 16):
            found.append((int(m.group(2), 16), int(m.group(1), 16)))
    return [(a, b) for a, b in found if not any(a < c and d < b for c, d in found)]   # innermost


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", action="append", metavar="NAME", help="only these benchmarks")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args(argv)
    names = args.only or [name for name in run.SIZES if (run.PROGRAMS / f"{name}.l").exists()]
    languages = {"L": run.LANGUAGES["L"], "L-16": Aligned16("L-16", ".l", "def n = ")}
    print("\n".join(lines(machine := describe())))
    results = {"command": "python bench/align.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "repeat": args.repeat, "machine": machine, "benchmarks": {}}
    print(f"{'benchmark':12} {'32 bytes / 16 bytes':>24}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in names:
            size = run.SIZES[name][0]
            src = languages["L"].source(name, size, tmp)
            cmds = {lang: language.build(src, tmp) for lang, language in languages.items()}
            outputs = set()

            def check(lang, out):
                outputs.add(out)
                return None if len(outputs) == 1 else f"printed {out!r}, not what the other build printed"
            times, _, paired, problem = run.alternate(cmds, ["L-16"], args.repeat, check)
            if problem:
                print(f"{name}: {problem}")
                return 1
            record = {"size": size, "date": datetime.datetime.now().isoformat(timespec="seconds"),
                      "times": times, "L/L-16": run.pair_record(paired["L-16"], times["L-16"])}
            if name == "takl":
                record["loops"] = {lang: [[hex(a), hex(b)] for a, b in loops(cmds[lang][0], "mas")]
                                   for lang in cmds}
            results["benchmarks"][name] = record
            r = record["L/L-16"]
            print(f"{name:12} {r['ratio']:8.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]", flush=True)
    ratio_lists = [b["L/L-16"]["ratios"] for b in results["benchmarks"].values()]
    mean, (low, high) = run.geometric_mean([run.statistics.median(r) for r in ratio_lists]), \
        run.mean_interval(ratio_lists)
    results["geometric mean"] = {"ratio": mean, "ci": [low, high]}
    print(f"{'geometric mean':12} {mean:8.2f} [{low:.2f}, {high:.2f}]")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
