"""Run the benchmarks: eight programs, each written in L, C and Python.

    python bench/run.py            # measure, and print a table
    python bench/run.py --small    # tiny sizes: only check that the outputs agree

The first line of every program sets its size (`def n = 32`, `#define N 32`,
`N = 32`); this script rewrites that line, so the three versions of a
benchmark always do the same work, and their outputs must be identical. C is
compiled with `gcc -O2`, L with `lc build`; each executable runs --repeat
times and the median time counts. Python runs once, with a time limit.
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "programs"
LC = Path(sys.executable).parent / "lc"
TIMEOUT = 120  # seconds, for one run of one program

# name: (full size, small size). The full sizes take 0.1 to 1 s in C and at
# most about 45 s in CPython; the small ones take under 1 s with `lc run`.
SIZES = {
    "fib": (40, 20),
    "tak": (11, 6),
    "ack": (11, 5),
    "loop": (2_000_000, 1000),
    "cpstak": (200, 1),
    "nqueens": (13, 5),
    "primes": (60_000, 2000),
    "fold": (10_000, 20),
}
# The targets: the geometric mean of L/C over each group, and L against Python.
GROUPS = {("fib", "tak", "ack", "loop"): 1.5,
          ("cpstak", "nqueens", "primes", "fold"): 3.0}
PYTHON_OVER_L = 30

FIRST_LINE = {".l": "def n = ", ".c": "#define N ", ".py": "N = "}


def sized(name, ext, size, tmp):
    """Copy programs/NAME.EXT into tmp, with its first line set to size."""
    first, rest = (PROGRAMS / (name + ext)).read_text().split("\n", 1)
    assert first.startswith(FIRST_LINE[ext]), f"{name}{ext}: bad first line"
    path = tmp / (name + ext)
    path.write_text(f"{FIRST_LINE[ext]}{size}\n{rest}")
    return path


def lc_can_build():
    return LC.exists() and subprocess.run([LC, "build", "--help"], capture_output=True).returncode == 0


def commands(name, size, tmp, l_mode, python):
    """The command that runs the benchmark, in each language."""
    cmds = {}
    c_exe = tmp / f"{name}-c"
    subprocess.run(["gcc", "-O2", sized(name, ".c", size, tmp), "-o", c_exe], check=True)
    cmds["C"] = [c_exe]
    l_src = sized(name, ".l", size, tmp)
    if l_mode == "build":
        l_exe = tmp / f"{name}-l"
        r = subprocess.run([LC, "build", l_src, "-o", l_exe], capture_output=True, text=True)
        if r.returncode == 0:
            cmds["L"] = [l_exe]
        else:
            print(f"{name}: lc build failed, L skipped:\n{r.stderr}", file=sys.stderr)
    elif l_mode == "run":
        cmds["L"] = [LC, "run", l_src]
    if python:
        cmds["Python"] = [sys.executable, sized(name, ".py", size, tmp)]
    return cmds


def measure(cmd, repeat):
    """Run cmd repeat times: its output, and the median time (None if it failed)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return f"timeout after {TIMEOUT} s", None
        times.append(time.perf_counter() - start)
        if r.returncode != 0:
            return f"exit status {r.returncode}: {r.stderr.strip()}", None
    return r.stdout, statistics.median(times)


def ratio(a, b):
    return a / b if a and b else None


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def cell(x, width, digits):
    return f"{x:{width}.{digits}f}" if x else f"{'-':>{width}}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="tiny sizes, one run: only check the outputs")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each C and L program (default 5)")
    ap.add_argument("--only", action="append", choices=SIZES, metavar="NAME", help="run only this benchmark")
    ap.add_argument("--no-python", action="store_true", help="do not run the Python programs")
    ap.add_argument("--json", metavar="FILE", help="write the measurements to FILE")
    args = ap.parse_args()
    repeat = 1 if args.small else args.repeat

    if lc_can_build():
        l_mode = "build"
    elif args.small:
        l_mode = "run"
        print("lc build does not exist yet: L runs with `lc run`, the interpreter.")
    else:
        l_mode = None
        print("lc build does not exist yet: L is skipped.")

    results, all_agree = {}, True
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or SIZES:
            size = SIZES[name][args.small]
            cmds = commands(name, size, Path(tmp), l_mode, not args.no_python)
            runs = {lang: measure(cmd, 1 if lang == "Python" else repeat)
                    for lang, cmd in cmds.items()}
            outputs = {lang: out for lang, (out, _) in runs.items()}
            agree = (len(set(outputs.values())) == 1 and all(t for _, t in runs.values())
                     and (l_mode is None or "L" in runs))
            all_agree &= agree
            print(f"{name}({size}): {'ok' if agree else 'OUTPUTS DIFFER'}", " ".join(runs))
            if not agree:
                for lang, out in outputs.items():
                    print(f"  {lang}: {out!r}")
            results[name] = {"size": size, "output": outputs["C"],
                             **{lang: t for lang, (_, t) in runs.items()}}

    if not args.small:
        print(f"\n{'benchmark':10} {'C s':>8} {'L s':>8} {'Python s':>9} {'L/C':>6} {'Python/L':>9}")
        for name, r in results.items():
            c, l, py = r["C"], r.get("L"), r.get("Python")
            print(f"{name:10} {cell(c, 8, 3)} {cell(l, 8, 3)} {cell(py, 9, 2)}"
                  f" {cell(ratio(l, c), 6, 2)} {cell(ratio(py, l), 9, 1)}")
        for group, target in GROUPS.items():
            g = geomean(ratio(results[n].get("L"), results[n]["C"]) for n in group if n in results)
            print(f"geometric mean of L/C over {', '.join(group)}: {cell(g, 0, 2)} (target <= {target})")
        slow = [n for n, r in results.items() if (ratio(r.get("Python"), r.get("L")) or math.inf) < PYTHON_OVER_L]
        if slow:
            print(f"L is less than {PYTHON_OVER_L}x faster than Python on: {', '.join(slow)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all_agree else 1


if __name__ == "__main__":
    sys.exit(main())
