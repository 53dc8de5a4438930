"""What exceptions cost in machine code, with each of chapter 10's lowerings (a flag tested after each
call; trap frames, LC_EXCEPTIONS=traps).

    python bench/exceptions.py [--repeat 5] [--json bench/exceptions.json]

Each measurement is a pair of L programs that differ in one thing, built as executables and run in
alternation (user + system CPU seconds, median of the runs); the difference of the medians divided
by the number of times the thing happens is its cost:

- a call, in a program without `try`: fib with a guard that raises (never taken), without any
  `try` (a raise stops the program at once, so no call tests the flag) and with one `try` around the whole run (the
  program catches, so every call of fib is followed by a test of the flag): the cost per call of
  the test;
- a `try` entered, no raise: a loop calling a function that may raise, inside a `try` or not,
  built without chapter 9's optimiser (which would inline the function, leaving no call to protect;
  LLVM still inlines it, but after the back end has protected the call);
- a `raise` caught at depth 1, 20 and 100,000: a loop calling a recursion of that depth that
  raises at its bottom, against the same recursion returning normally.

Every pair is built and measured under each lowering. The script checks that both programs of a pair
print what they should, and records the machine (bench/machine.py).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from lcompiler import driver
from lcompiler.errors import Source

FIB = """\
exception Negative
def fib(n) = if (n < 0) raise(Negative) else if (n < 2) n else fib(n - 1) + fib(n - 2)
"""
CALLS = 2 * 39088169 - 1          # the calls of fib(37): 2 fib(38) - 1
PAIRS = {
    "call": ("calls of fib(37) (2 fib(38) - 1), which may raise",
             FIB + "print(fib(37))\n",
             FIB + "print(try { fib(37) } catch { Negative -> -1 })\n",
             CALLS, "24157817\n"),
    "try": ("try entered, no raise (10^8)",
            "exception E\ndef id(n) = if (n < 0) raise(E) else n\n"
            "def loop(i, acc) = if (i == 0) acc else loop(i - 1, acc + id(i) % 7)\nprint(loop(100000000, 0))\n",
            "exception E\ndef id(n) = if (n < 0) raise(E) else n\n"
            "def loop(i, acc) = if (i == 0) acc else loop(i - 1, acc + try { id(i) % 7 } catch { E -> 0 })\n"
            "print(loop(100000000, 0))\n",
            100000000, None),
}
RAISE = """\
exception Bottom(Int)
def down(n) = if (n == 0) $BOTTOM else 1 + down(n - 1)
def loop(i, acc) = if (i == 0) acc else loop(i - 1, acc + try { down($DEPTH) } catch { Bottom(k) -> k })
print(loop($TIMES, 0))
"""
for depth, times in ((1, 50000000), (20, 5000000), (100000, 1000)):
    returning = RAISE.replace("$BOTTOM", "0").replace("$DEPTH", str(depth)).replace("$TIMES", str(times))
    raising = RAISE.replace("$BOTTOM", "raise(Bottom(0))").replace("$DEPTH", str(depth)).replace("$TIMES", str(times))
    PAIRS[f"raise at depth {depth}"] = (f"raise caught at depth {depth} ({times} times), against returning",
                                        returning, raising, times, None)


LOWERINGS = ("flag", "traps")


def build(text: str, exe: Path, lowering: str, optimiser: bool = True) -> Path:
    os.environ["LC_EXCEPTIONS"] = lowering        # read by chapter 10's Backend as it compiles
    try:
        return driver.build(Source("bench.l", text), exe, optimiser=optimiser)
    finally:
        del os.environ["LC_EXCEPTIONS"]


def run(exe: Path) -> tuple:
    """CPU seconds and output."""
    env = {**os.environ, "LC_STACK_SIZE": "64M"}
    child = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = child.stdout.read().decode(), child.stderr.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        raise RuntimeError(f"{exe} failed: {err}")
    return usage.ru_utime + usage.ru_stime, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args(argv)
    from machine import describe        # bench/machine.py
    described = describe()              # as the measurement starts
    results = {lowering: {} for lowering in LOWERINGS}
    print(f"{'lowering':8} {'what':22} {'without s':>9} {'with s':>8} {'count':>11} {'ns each':>10} {'with/count ns':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (what, without, with_, count, expected) in PAIRS.items():
            for lowering in LOWERINGS:
                optimiser = name != "try"
                exes = [build(without, Path(tmp) / "a", lowering, optimiser),
                        build(with_, Path(tmp) / "b", lowering, optimiser)]
                times = [[], []]
                outputs = set()
                for _ in range(args.repeat):
                    for i, exe in enumerate(exes):
                        seconds, out = run(exe)
                        times[i].append(seconds)
                        outputs.add(out)
                if expected is not None and outputs != {expected}:
                    raise RuntimeError(f"{name}: printed {outputs}, not {expected!r}")
                a, b = statistics.median(times[0]), statistics.median(times[1])
                each = (b - a) / count * 1e9
                results[lowering][name] = {
                    "what": what, "with_ns_each": b / count * 1e9,
                    "without": {"median": a, "min": min(times[0]), "max": max(times[0])},
                    "with": {"median": b, "min": min(times[1]), "max": max(times[1])},
                    "count": count, "ns_each": each}
                print(f"{lowering:8} {name:22} {a:9.3f} {b:8.3f} {count:11} {each:10.2f} {b / count * 1e9:13.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": described, "lowerings": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
