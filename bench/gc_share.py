"""How much of each L benchmark's run the collector takes, from the runtime's own statistics (chapter 12).

    python bench/gc_share.py [--repeat 3] [--only NAME ...] [--json bench/gc_share.json]

Builds every L benchmark of bench/programs as `lc build` does, at bench/run.py's
full sizes, and the benchmarks of run.py's SCALING (`live`) at their other
sizes too, and runs each --repeat times with LC_GC_STATS=1: the runtime then
prints, when the program ends, how many minor and major collections it made,
how much it allocated and promoted, how many blocks it pinned, and the time
it spent collecting (chapter 10b). For each program this script records every
run (its wall-clock time and the statistics line) and keeps the run of median
wall-clock time as the program's figures: the collector's time over the run's
time is its share. The counts hardly move between runs of one executable; the
times do, on a shared machine, which is why the median is kept and the runs
are alternated between programs (the first program's runs, the second's, ...,
then again), as bench/run.py alternates L with its peers.
"""
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run                                   # bench/run.py: sizes, building L
from builds import arguments                 # bench/builds.py: the options every such script takes
from machine import describe, lines

STATS = re.compile(r"gc: (\d+) minor and (\d+) major collections, max heap ([\d.]+) MB, allocated ([\d.]+) MB"
                   r" \(\d+ bytes\), promoted ([\d.]+) MB, gc time ([\d.]+) s \(minor ([\d.]+) s, major ([\d.]+) s\)")
PINNED = re.compile(r"gc: (\d+) blocks pinned, ([\d.]+) MB of stack scanned by minor collections, nursery up to ([\d.]+) MB")
FIELDS = ("minor", "major", "max_heap_mb", "allocated_mb", "promoted_mb", "gc_seconds", "minor_seconds",
          "major_seconds")


def parse(stderr: str) -> dict:
    """The runtime's statistics lines, as numbers (raises if the runtime printed none)."""
    found = STATS.search(stderr)
    if not found:
        raise RuntimeError(f"no collector statistics in {stderr!r}")
    stats = {key: (int if key in ("minor", "major") else float)(value) for key, value in zip(FIELDS, found.groups())}
    pinned = PINNED.search(stderr)
    if not pinned:
        raise RuntimeError(f"no line of pinned blocks in {stderr!r}")
    stats.update(pinned=int(pinned.group(1)), stack_scanned_mb=float(pinned.group(2)),
                     nursery_mb=float(pinned.group(3)))
    return stats


def run_once(cmd: list[str]) -> dict:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_GC_STATS": "1"},
                          timeout=run.TIMEOUT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} ended with status {done.returncode}: {done.stderr[-500:]}")
    return {"seconds": round(seconds, 4), **parse(done.stderr)}


def median_run(runs: list[dict]) -> dict:
    """The run of median wall-clock time (the lower middle one of an even count), with the collector's share."""
    chosen = sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]
    return {**chosen, "share": round(chosen["gc_seconds"] / chosen["seconds"], 4)}


def main(argv=None) -> int:
    args, names = arguments(__doc__, 3, argv)
    jobs = [(name, run.SIZES[name][0], False) for name in names]
    jobs += [(name, size, True) for name in names for size in run.SCALING.get(name, ())]
    print("\n".join(lines(machine := describe())))
    record = {"command": "python bench/gc_share.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "repeat": args.repeat, "machine": machine, "lc": run.LANGUAGES["L"].version(),
              "benchmarks": {}, "scaling": {}}
    language = run.LANGUAGES["L"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        built = {}
        for name, size, _ in jobs:
            sized = tmp / f"{size}"
            sized.mkdir(exist_ok=True)
            built[name, size] = language.build(language.source(name, size, sized), sized)
        runs = {job: [] for job in built}
        for _ in range(args.repeat):                 # alternate: every program once, then again
            for job, cmd in built.items():
                runs[job].append(run_once(cmd))
    for name, size, scaling in jobs:
        entry = {"size": size, **median_run(runs[name, size]), "runs": runs[name, size]}
        if scaling:
            record["scaling"].setdefault(name, {})[str(size)] = entry
        else:
            record["benchmarks"][name] = entry
        print(f"{name + ('' if not scaling else f'({size})'):16} {entry['gc_seconds']:6.3f} s of"
              f" {entry['seconds']:6.3f} s in the collector ({100 * entry['share']:3.0f} %), {entry['minor']:5} minor,"
              f" {entry['major']:4} major, promoted {entry['promoted_mb']:8.1f} MB", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
