"""Re-measure every JSON file a chapter reads, in one session on one machine.

    python bench/all.py --pin 1         # hours: every script of bench/, in sequence, as the chapters cite it
    python bench/all.py --only results.json --only calls.json
    python bench/all.py --check         # minutes: every script at tiny sizes, into a temporary folder
    python bench/all.py --list          # print the commands, run nothing

Each step runs one script of bench/ with the options that produce the file a
chapter reads (STEPS: the file, the chapters that read it, the command), one
after the other, so that no two measurements disturb each other. Every
script records the machine it ran on in its file (bench/machine.py: CPU
model, caches, cores, OS, kernel, load, compiler versions), and this script
checks that it did. Run it on a quiet machine, then re-run the chapters
that read the files (python tools/literate.py run NN_name) and re-read their
prose.

Pinning it to one core (taskset -c 1, as this book's sessions do, to keep
other work off the measured core) suits every step that times programs, but
not the four that time the compiler itself -- compile_speed.json,
compile_scaling.json, compile_speed-O0.json and mono_check.json, and
optimiser.json's `compile`:
the compiler makes a big module's machine code in parallel parts, one per
core it may use (chapter 11), so pinned they measure a one-core compiler.
`--pin CORE` does exactly that: it runs every other step under
`taskset -c CORE` and these unpinned (--list marks which is which). They
come first, so that the machine is left alone while they run on every core.
`--group compiler` runs only them and `--group programs` only the others:
the programs' steps, pinned, leave the other core free for light work, while
the compiler's need the whole machine quiet.

--check runs every step at the tiny sizes its script offers, writing into a
temporary folder instead of bench/, to see that every script still works;
its figures mean nothing and are thrown away.

Chapter 5 quotes what `python bench/infer_speed.py` prints, which writes no
file; it is not a step here. Nor is bench/results-machine1.json, which chapter
12 reads beside results.json: the same suite measured on another machine
(`python bench/run.py --repeat 5 --python keep` there, the results.json of
the measuring session before), kept as a record of that machine, not
re-measured on this one.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# (file, chapters that read it, the command that makes it (the options the file records, or the chapter
# cites), the tiny command that checks the script, with {json} for where its file goes).
STEPS = [
    ("results.json", "12", "run.py --repeat 5",
     "run.py --small --only fib --only interp --json {json}"),
    ("compile_speed.json", "11, 12", "compile_speed.py --repeat 3 --gcc --json bench/compile_speed.json",
     "compile_speed.py --lines 100 200 --repeat 1 --gcc --json {json}"),
    ("compile_scaling.json", "12",
     "compile_speed.py --lines 12500 25000 50000 100000 --repeat 3 --parts 2 --json bench/compile_scaling.json",
     "compile_speed.py --lines 100 400 --repeat 1 --parts 2 --json {json}"),
    ("compile_speed-O0.json", "12", "compile_speed.py --lines 10000 --repeat 3 --O0 --json bench/compile_speed-O0.json",
     "compile_speed.py --lines 100 --repeat 1 --O0 --json {json}"),
    ("interp_speed.json", "4b", "interp_speed.py calls", "interp_speed.py calls --repeat 1 --json {json}"),
    ("interp_speed.json", "4b", "interp_speed.py heap", "interp_speed.py heap --limits 16M --timeout 5 --json {json}"),
    ("mono_check.json", "5b", "mono_check.py --lines 10000 --repeat 7 --json bench/mono_check.json",
     "mono_check.py --lines 200 --repeat 1 --json {json}"),
    ("output_speed.json", "10b", "output_speed.py", "output_speed.py --repeat 1 --json {json}"),
    ("parse_speed.json", "4a", "parse_speed.py --repeat 5 --clock process",
     "parse_speed.py --lines 2000 --repeat 1 --clock process --json {json}"),
    ("cps_speed.json", "6", "cps_speed.py --clock process",
     "cps_speed.py --sizes 1000,3000 --occurrences 10,100 --chain 100 --repeat 1 --clock process --json {json}"),
    ("convert_speed.json", "7, 8", "convert_speed.py --clock process --repeat 5",
     "convert_speed.py --largest 2000 --repeat 1 --clock process --json {json}"),
    ("optimiser.json", "9", "optimiser.py shrinkers",
     "optimiser.py --json {json} shrinkers --largest 3000 --census-chain 100"),
    ("optimiser.json", "9", "optimiser.py compile", "optimiser.py --json {json} compile --lines 100 --repeat 1"),
    ("optimiser.json", "9", "optimiser.py run", "optimiser.py --json {json} run --repeat 1 --only fib"),
    ("optimiser.json", "9", "optimiser.py unroll", "optimiser.py --json {json} unroll --repeat 1 --only fib"),
    ("optimiser.json", "9", "optimiser.py closures", "optimiser.py --json {json} closures --repeat 1 --only fib"),
    ("optimiser.json", "9", "optimiser.py layout interp", "optimiser.py --json {json} layout interp --repeat 1"),
    ("calls.json", "10", "calls.py --json bench/calls.json", "calls.py --repeat 1 --json {json}"),
    ("exceptions.json", "10", "exceptions.py --json bench/exceptions.json", "exceptions.py --repeat 1 --json {json}"),
    ("gc_speed.json", "10", "gc_speed.py --repeat 5 --json bench/gc_speed.json", "gc_speed.py --repeat 1 --json {json}"),
    ("gc_share.json", "12", "gc_share.py --repeat 3 --json bench/gc_share.json",
     "gc_share.py --repeat 1 --only msort --json {json}"),
    ("wrapv.json", "12", "wrapv.py --repeat 5 --json bench/wrapv.json", "wrapv.py --repeat 1 --json {json}"),
    ("same_program.json", "12", "same_program.py --repeat 5 --json bench/same_program.json",
     "same_program.py --repeat 1 --json {json}"),
    ("align.json", "12", "align.py --repeat 5 --json bench/align.json",
     "align.py --repeat 1 --only takl --json {json}"),
    ("heap_pointer.json", "10", "heap_pointer.py --repeat 5 --json bench/heap_pointer.json",
     "heap_pointer.py --repeat 1 --only cpstak --json {json}"),
    # the timing writes the file afresh; the compile times are added to it, so they come after
    ("statepoints.json", "10b", "statepoints.py --repeat 5 --json bench/statepoints.json",
     "statepoints.py --repeat 1 --only cpstak --json {json}"),
    ("statepoints.json", "10b", "statepoints.py --compile-time --repeat 3 --json bench/statepoints.json",
     "statepoints.py --compile-time --repeat 1 --only cpstak --json {json}"),
]


# The steps that time the compiler itself, which --pin leaves unpinned (the docstring says why).
UNPINNED = {"compile_speed.py", "mono_check.py", "optimiser.py compile"}


def unpinned(full: str) -> bool:
    return any(full.startswith(prefix) for prefix in UNPINNED)


def has_machine(path: Path) -> bool:
    """Whether the file records the machine: at its top, per command (optimiser.json), or in every
    entry (calls.json, whose top-level keys chapter 10 reads as benchmarks)."""
    data = json.loads(path.read_text())
    for key in ("machine", "machines"):
        if "cpu" in data.get(key, {}) or all("cpu" in m for m in data.get(key, {"": {}}).values()):
            return True
    return bool(data) and all(isinstance(v, dict) and "cpu" in v.get("machine", {}) for v in data.values())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="tiny sizes, into a temporary folder")
    ap.add_argument("--only", action="append", choices=sorted({s[0] for s in STEPS}), metavar="FILE",
                    help="re-measure only this file (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--pin", type=int, metavar="CORE",
                    help="run the steps that time programs on this core only (taskset -c CORE)")
    ap.add_argument("--group", choices=("compiler", "programs"),
                    help="only the steps that time the compiler, or only the others")
    args = ap.parse_args(argv)
    chosen = [s for s in STEPS if (not args.only or s[0] in args.only)
              and (args.group is None or unpinned(s[2]) == (args.group == "compiler"))]
    # The compiler-timing steps first, then the rest, each group in STEPS's order (sorted is stable).
    steps = sorted(chosen, key=lambda s: not unpinned(s[2]))
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, chapters, full, tiny in steps:
            path = Path(tmp) / name if args.check else BENCH / name
            command = (tiny.format(json=path) if args.check else full).split()
            pin = [] if args.pin is None or unpinned(full) else ["taskset", "-c", str(args.pin)]
            shown = " ".join([*pin, "python", f"bench/{command[0]}", *command[1:]])
            print(f"== {name} (chapter {chapters}): {shown}"
                  + (" [unpinned: times the compiler]" if unpinned(full) else ""), flush=True)
            if args.list:
                continue
            start = time.perf_counter()
            done = subprocess.run([*pin, sys.executable, str(BENCH / command[0]), *command[1:]], cwd=BENCH.parent)
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                failed.append(f"{name}: exit status {done.returncode}")
            elif not path.exists() or not has_machine(path):
                failed.append(f"{name}: no machine recorded in {path}")
            print(f"== {name}: {'done' if done.returncode == 0 else 'FAILED'} in {seconds:.0f} s", flush=True)
    for line in failed:
        print("FAILED", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
