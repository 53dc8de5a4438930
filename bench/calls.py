"""Does the register convention of chapter 10 still pay? Benchmarks built with and without it.

    python bench/calls.py [--repeat 7] [--json bench/calls.json]

Chapter 10 marks its `fastcc` functions "no_callee_saved_registers", so that no stale pointer
left in a callee-saved register is saved in a frame, where the conservative stack scan would
take it for a live one. This script builds the call-heavy benchmarks (fib, tak, ack) and the
allocation-heavy ones (cpstak, nqueens, primes, fold) of bench/programs twice, with the
attribute (as lc does) and without, runs the two executables in alternation, and prints the
user + system CPU seconds of each (min, median, max), the ratio without/with (median of the
per-pair ratios), and, from the collector's statistics (LC_GC_STATS=1), the blocks pinned by
minor collections and the largest heap.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from lcompiler import driver, llvm_backend
from lcompiler.errors import Source

PROGRAMS = Path(__file__).resolve().parent / "programs"
NAMES = ["fib", "tak", "ack", "cpstak", "nqueens", "primes", "fold"]


def build(name: str, exe: Path, convention: bool) -> Path:
    saved = llvm_backend.saves_no_registers
    if not convention:
        llvm_backend.saves_no_registers = lambda f: None
    try:
        return driver.build(Source(f"{name}.l", (PROGRAMS / f"{name}.l").read_text()), exe)
    finally:
        llvm_backend.saves_no_registers = saved


def run(exe: Path, stats: bool = False) -> tuple:
    """CPU seconds, output, and the collector's statistics (if asked)."""
    env = {**os.environ, "LC_GC_STATS": "1"} if stats else None
    child = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = child.stdout.read().decode(), child.stderr.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        raise RuntimeError(f"{exe} failed: {err}")
    return usage.ru_utime + usage.ru_stime, out, err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args(argv)
    from machine import describe        # bench/machine.py
    described = describe()              # as the measurement starts
    results = {}
    print(f"{'benchmark':10} {'with s':>7} {'without s':>9} {'without/with':>12}   {'pinned with/without':>20} {'heap MB with/without':>21}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in NAMES:
            exes = {kind: build(name, Path(tmp) / f"{name}-{kind}", kind == "with") for kind in ("with", "without")}
            times = {kind: [] for kind in exes}
            for _ in range(args.repeat):
                for kind, exe in exes.items():
                    times[kind].append(run(exe)[0])
            ratios = [b / a for a, b in zip(times["with"], times["without"])]
            gc = {}
            for kind, exe in exes.items():
                err = run(exe, stats=True)[2]
                pinned = re.search(r"gc: (\d+) blocks pinned", err)
                heap = re.search(r"max heap ([\d.]+) MB", err)
                gc[kind] = (int(pinned.group(1)), float(heap.group(1))) if pinned else (0, 0.0)
            results[name] = {kind: {"min": min(ts), "median": statistics.median(ts), "max": max(ts),
                                    "pinned": gc[kind][0], "max_heap_mb": gc[kind][1]} for kind, ts in times.items()}
            results[name]["ratio"] = {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)}
            print(f"{name:10} {statistics.median(times['with']):7.3f} {statistics.median(times['without']):9.3f} "
                  f"{statistics.median(ratios):12.3f}   {gc['with'][0]:>9} / {gc['without'][0]:<9} "
                  f"{gc['with'][1]:>9.1f} / {gc['without'][1]:<9.1f}")
    if args.json:
        for record in results.values():  # in each entry: chapter 10 reads every top-level key as a benchmark
            record["machine"] = described
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
