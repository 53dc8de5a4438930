"""How the collector of chapter 10b behaves: five questions, asked of programs that allocate, built with `lc build`.

    python bench/gc_speed.py [--json bench/gc_speed.json] [--repeat 3]

1. live: a list of S cells stays live while the program allocates 3 * 10^7 short-lived cells,
   or 6 * 10^7; the time per short-lived cell -- the difference of the two, over 3 * 10^7: what
   one more costs, once the list is built and whatever collections the build left to the first
   cells -- for S from 0 to 3 * 10^6, must not grow with S (a collector that traced the live
   list at every collection would grow linearly per cell, quadratically in all);
2. cells: 10^8 short-lived cells, in bounded memory (chapter 10b's promise);
3. list: a list of 10^7 cells, built and summed;
4. limit: a list that grows until the heap reaches its limit: the time until the runtime error
   (status 2, "out of memory"), for limits of 256 MB, 1 GB (the default) and 4 GB (the default
   before this collector);
5. nursery: the allocation-heavy benchmarks of bench/programs (cpstak, nqueens, primes, fold,
   binarytrees, perm) with nurseries of 256 KB to 8 MB (LC_NURSERY: the size the nursery starts
   at and never goes below), all sizes run in alternation; CPU seconds relative to the default
   size, 2 MB, and the largest the nursery grew to.

Each program runs --repeat times; the medians are printed, with the peak resident memory of the
process and the collector's own statistics (LC_GC_STATS=1). Times are user + system CPU seconds
of the program, which the other processes of a shared machine disturb less than wall time.
For the nursery sizes, the file keeps each size's ratios to 2M, run by run, and the 95 %
bootstrap interval of their median (bench/run.py's `interval`), for the chapter to print beside it.
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

from lcompiler import driver
from lcompiler.errors import Source
from run import interval as run_interval      # bench/run.py: the bootstrap interval of a median ratio

LIST = "data List<a> { Cons(a, List<a>); Nil }\n"

LIVE = LIST + """
def build(i, l) = if (i == 0) l else build(i - 1, Cons(i, l))
def churn(i, total) = if (i == 0) total else match (Cons(i, Nil)) { Cons(x, _) -> churn(i - 1, total + x); Nil -> 0 }
def length(l, n) = match (l) { Cons(_, r) -> length(r, n + 1); Nil -> n }
def main() = {
  let live = build(SIZE, Nil)
  let total = churn(CHURN, 0)
  print(length(live, 0), total)
}
main()
"""

CELLS = LIST + """
def loop(i, total) = if (i == 0) total else match (Cons(i, Nil)) { Cons(x, _) -> loop(i - 1, total + x); Nil -> 0 }
print(loop(100000000, 0))
"""

BIG_LIST = LIST + """
def build(i, l) = if (i == 0) l else build(i - 1, Cons(i, l))
def sum(l, s) = match (l) { Cons(x, r) -> sum(r, s + x); Nil -> s }
print(sum(build(10000000, Nil), 0))
"""

FOREVER = LIST + """
def grow(i, l) = grow(i + 1, Cons(i, l))
print(grow(0, Nil))
"""

SIZES = [0, 100_000, 1_000_000, 3_000_000]
NURSERIES = ["256K", "512K", "1M", "2M", "4M", "8M"]
ALLOCATING = ["cpstak", "nqueens", "primes", "fold", "binarytrees", "perm"]
SIZED = {"binarytrees": 18, "perm": 600}     # the others at the size their file says: a second or less
PROGRAMS = Path(__file__).resolve().parent / "programs"
CHURN = 30_000_000
LIMITS = ["256M", "1G", "4G"]


def build(text: str, name: str, tmp: Path) -> Path:
    """An executable, compiled without chapter 9's optimiser: it would remove the very
    allocations these programs exist to make."""
    return driver.build(Source(name, text), tmp / name.removesuffix(".l"), optimiser=False)


def run(exe: Path, env: dict | None = None) -> dict:
    """One run: CPU seconds, peak resident memory (MB), status, output, the collector's statistics."""
    environment = {**os.environ, "LC_GC_STATS": "1", **(env or {})}
    child = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)
    out, err = child.stdout.read().decode(), child.stderr.read().decode()     # both are short
    _, status, usage = os.wait4(child.pid, 0)
    minor = re.search(r"gc: (\d+) minor and (\d+) major collections", err)
    heap = re.search(r"max heap ([\d.]+) MB", err)
    nursery = re.search(r"nursery up to ([\d.]+) MB", err)
    gc_time = re.search(r"gc time ([\d.]+) s", err)
    peak = re.search(r"gc: peak resident memory\s+(\d+) kB", err)   # ru_maxrss would count the parent's
    code = os.waitstatus_to_exitcode(status)
    return {"cpu": usage.ru_utime + usage.ru_stime, "rss_mb": int(peak.group(1)) / 1024 if peak else None,
            "status": code, "output": out, "error": err.splitlines()[-1] if code else "",
            "minor": int(minor.group(1)) if minor else None, "major": int(minor.group(2)) if minor else None,
            "max_heap_mb": float(heap.group(1)) if heap else None,
            "nursery_mb": float(nursery.group(1)) if nursery else None,
            "gc_s": float(gc_time.group(1)) if gc_time else None}


def median_run(exe: Path, repeat: int, env: dict | None = None) -> dict:
    runs = [run(exe, env) for _ in range(repeat)]
    best = dict(runs[0])
    best["cpu"] = statistics.median(r["cpu"] for r in runs)
    best["cpu_min"], best["cpu_max"] = min(r["cpu"] for r in runs), max(r["cpu"] for r in runs)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args(argv)
    from machine import describe        # bench/machine.py
    described = describe()              # as the measurement starts
    results = {"live": [], "limit": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print(f"1. a live list of S cells, then {CHURN:,} short-lived cells, or twice as many")
        print(f"{'S':>10} {'once s':>8} {'twice s':>8} {'ns/cell':>8} {'minor':>6} {'major':>6} {'heap MB':>8}")
        for size in SIZES:
            once = median_run(build(LIVE.replace("SIZE", str(size)).replace("CHURN", str(CHURN)), f"once{size}.l", tmp), args.repeat)
            twice = median_run(build(LIVE.replace("SIZE", str(size)).replace("CHURN", str(2 * CHURN)), f"twice{size}.l", tmp),
                               args.repeat)
            per_cell = (twice["cpu"] - once["cpu"]) / CHURN * 1e9
            results["live"].append({"size": size, "once_s": once["cpu"], "twice_s": twice["cpu"], "ns_per_cell": per_cell,
                                    "minor": twice["minor"], "major": twice["major"], "max_heap_mb": twice["max_heap_mb"],
                                    "nursery_mb": twice["nursery_mb"]})
            print(f"{size:>10,} {once['cpu']:8.3f} {twice['cpu']:8.3f} {per_cell:8.2f} {twice['minor']:6} {twice['major']:6} "
                  f"{twice['max_heap_mb']:8.1f}")
        cells = median_run(build(CELLS, "cells.l", tmp), args.repeat)
        results["cells"] = cells
        print(f"\n2. 10^8 short-lived cells: {cells['cpu']:.2f} s, peak resident memory {cells['rss_mb']:.1f} MB, "
              f"heap {cells['max_heap_mb']:.1f} MB, {cells['minor']} minor and {cells['major']} major collections")
        big = median_run(build(BIG_LIST, "list.l", tmp), args.repeat)
        results["list"] = big
        print(f"3. a list of 10^7 cells: {big['cpu']:.2f} s, peak resident memory {big['rss_mb']:.1f} MB, "
              f"heap {big['max_heap_mb']:.1f} MB, {big['minor']} minor and {big['major']} major collections")
        forever = build(FOREVER, "forever.l", tmp)
        print("4. a list that grows until the heap is full")
        for limit in LIMITS:
            r = run(forever, {"LC_HEAP_LIMIT": limit})
            results["limit"].append({"limit": limit, **r})
            print(f"   limit {limit:>4}: status {r['status']} after {r['cpu']:.2f} s, peak resident memory "
                  f"{r['rss_mb']:.0f} MB, {r['minor']} minor and {r['major']} major collections: {r['error']}")
        print("\n5. nursery sizes: CPU seconds (median), and relative to 2M (median of the ratios)")
        print(f"{'benchmark':10}" + "".join(f"{n:>14}" for n in NURSERIES))
        results["nursery"] = {}
        for name in ALLOCATING:
            first, rest = (PROGRAMS / f"{name}.l").read_text().split("\n", 1)
            text = f"def n = {SIZED[name]}\n{rest}" if name in SIZED else f"{first}\n{rest}"
            exe = build(text, f"{name}.l", tmp)
            times, largest, gc = ({n: [] for n in NURSERIES} for _ in range(3))
            for _ in range(args.repeat):
                for n in NURSERIES:
                    r = run(exe, {"LC_NURSERY": n})
                    times[n].append(r["cpu"])
                    largest[n].append(r["nursery_mb"])
                    gc[n].append(r["gc_s"])
            paired = {n: [a / b for a, b in zip(times[n], times["2M"])] for n in NURSERIES}
            ratios = {n: statistics.median(paired[n]) for n in NURSERIES}
            # the 95 % bootstrap interval of each median ratio, as bench/run.py computes it for the benchmarks
            results["nursery"][name] = {n: {"median": statistics.median(times[n]), "ratio": ratios[n],
                                            "ratios": paired[n], "interval": list(run_interval(paired[n])),
                                            "largest_mb": max(largest[n]), "gc_s": statistics.median(gc[n])}
                                      for n in NURSERIES}
            print(f"{name:10}" + "".join(f"{statistics.median(times[n]):7.3f} ({ratios[n]:.2f})" for n in NURSERIES))
    if args.json:
        results["machine"] = described
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
