"""L built two ways, timed in alternation: the machinery of bench/align.py and bench/heap_pointer.py.

Each of those scripts names a second way to build L's benchmarks -- a
snippet of Python that sets up the compiler differently, then builds -- and
`compare` builds every L benchmark of bench/programs as `lc build` does and
that other way, times the two executables in alternation (as bench/run.py
times L against its peers), at bench/run.py's sizes, and prints per program
the median ratio of `lc build`'s executable to the other with its 95 %
bootstrap interval, and the geometric mean over the programs.
"""
import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import run                                   # bench/run.py: sizes, building, alternation, intervals
from machine import describe, lines

# The child process that builds the other way: the caller's set-up, then lc build's driver.
BUILD = """\
import sys
from lcompiler import driver
from lcompiler.errors import Source
{setup}
driver.build(Source(sys.argv[1], open(sys.argv[1]).read()), sys.argv[2])
"""


class OtherBuild(run.L):
    """L built by a child process that sets the compiler up in another way first."""

    def __init__(self, name, setup, description):
        super().__init__(name, ".l", "def n = ")
        self.setup, self.description = setup, description

    def build(self, src, tmp):
        exe = tmp / f"{src.stem}-{self.name}"
        run.check_build(subprocess.run([sys.executable, "-c", BUILD.format(setup=self.setup), src, exe],
                                       capture_output=True, text=True), f"lc build, {self.description}")
        return [str(exe)]

    def flags(self):
        return f"lc build, {self.description}"


def start_record(script, argv, repeat) -> dict:
    """Print the machine, and return the record a script fills: its command, the machine, no benchmarks yet."""
    print("\n".join(lines(machine := describe())))
    return {"command": f"python bench/{script} " + " ".join(argv if argv is not None else sys.argv[1:]),
            "repeat": repeat, "machine": machine, "benchmarks": {}}


def arguments(doc, repeat, argv=None):
    """The options of a script that runs every L benchmark (--repeat, --only, --json), parsed, and the
    names of the benchmarks it runs: every program of bench/programs, in run.py's order, or --only's."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--only", action="append", metavar="NAME", help="only these benchmarks")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args(argv)
    return args, args.only or [name for name in run.SIZES if (run.PROGRAMS / f"{name}.l").exists()]


def compare(script, doc, other, header, argv=None, extra=None) -> int:
    """Time lc build's executables against other's (an OtherBuild) on every L benchmark, print
    the ratios under header, and write them (key "L/<other.name>") to --json; extra(name, cmds)
    may add to a program's record."""
    args, names = arguments(doc, 5, argv)
    languages = {"L": run.LANGUAGES["L"], other.name: other}
    key = f"L/{other.name}"
    results = start_record(script, argv, args.repeat)
    print(f"{'benchmark':12} {header:>24}")
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
            times, _, paired, problem = run.alternate(cmds, [other.name], args.repeat, check)
            if problem:
                print(f"{name}: {problem}")
                return 1
            record = {"size": size, "date": datetime.datetime.now().isoformat(timespec="seconds"),
                      "times": times, key: run.pair_record(paired[other.name], times[other.name])}
            if extra is not None:
                record.update(extra(name, cmds))
            results["benchmarks"][name] = record
            r = record[key]
            print(f"{name:12} {r['ratio']:8.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]", flush=True)
    ratio_lists = [b[key]["ratios"] for b in results["benchmarks"].values()]
    mean, (low, high) = run.geometric_mean([run.statistics.median(r) for r in ratio_lists]), \
        run.mean_interval(ratio_lists)
    results["geometric mean"] = {"ratio": mean, "ci": [low, high]}
    print(f"{'geometric mean':12} {mean:8.2f} [{low:.2f}, {high:.2f}]")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0
