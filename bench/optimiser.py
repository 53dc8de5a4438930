"""The optimiser of chapter 9, measured: its two shrinkers, and what it saves later stages.

    python bench/optimiser.py shrinkers [--largest 1000000]   # census against work list, per node
    python bench/optimiser.py compile [--lines 10000]         # compile time with and without it
    python bench/optimiser.py run [--repeat 11]               # the benchmarks with and without it
    python bench/optimiser.py unroll [--repeat 5]             # the benchmarks, recursion unrolled 0-3 rounds
    python bench/optimiser.py closures [--repeat 21]          # unrolling functions that make closures, or not
    python bench/optimiser.py layout interp [--repeat 7]      # one benchmark: instructions run, and code layouts

`shrinkers` times Appel and Jim's census-based shrinker and Kennedy's
work-list shrinker on the same programs, 10^3 to 10^6 CPS nodes: generated L
programs (the ten-line blocks of bench/compile_speed.py: a data type, a
match, a closure, a loop, calls between blocks), converted to CPS, and a
chain of dead tuples built directly in CPS (x1 = tuple(x0), x2 = tuple(x1),
…, each used only by the next, none by the program), the case where a sweep
in program order frees one binding per pass. It prints passes, seconds and
microseconds per node.

`compile` times the stages of compiling the generated program of --lines
lines with the optimiser (`lc` by default) and without it (`lc -O0`),
alternately, and counts the CPS nodes and the LLVM instructions handed to
LLVM's O2 pipeline.

`run` builds every program of bench/programs with and without the optimiser,
at the sizes of SIZES (`def n = …`: about half a second or more at -O0; a run
that takes less than a few tenths of a second measures the machine's noise
more than the program), and times the two executables in alternation (user +
system time of the child): -O0, optimised, a copy of -O0, -O0, optimised, ...
The ratio of a benchmark is the median, over the --repeat repetitions, of the
optimised run's time over the -O0 run's beside it; it is marked "met" when it
is at most TARGET (1.05: the optimiser must not make a program slower than
-O0), "missed" otherwise. The copy of -O0, timed the same way against -O0,
is the control: the ratio that the noise alone makes, since the two are the
same executable.

`unroll` builds every program of bench/programs, at the sizes of SIZES, with
the optimiser's UNROLL set to 0, 1, 2 and 3 rounds (no unrolling; then the
recursion 2, 4, 8 levels deep), and times the executables in alternation as
`run` does; it also records each program's size in CPS nodes after the
optimiser.

`closures` builds every program of bench/programs twice, at the sizes of
SIZES: as the optimiser does (a recursive function that makes closures is
not unrolled) and with that rule switched off; it counts the functions
(closure bodies included) left after the optimiser and, where the two builds
differ, times them in alternation.

`layout NAME` looks at one benchmark whose optimised build is not faster
than its -O0 build: are there more instructions to run, or the same ones laid
out differently? It counts the instructions each build executes, its indirect branches and
how many of those valgrind's model of a branch predictor mispredicts (valgrind's
cachegrind, at an eighth of the size, where valgrind is installed), then builds both again under three layouts of the machine code
(LLVM's default; every block that is not fallen into aligned to 32 bytes;
every function to 64 bytes: LLVM's options -align-all-nofallthru-blocks=5
and -align-all-functions=6, set in a child process that builds, since an
LLVM option is set once per process), and times the six executables in
alternation. If a change of alignment alone moves a build's time as much as
the optimiser does, the difference between the two builds is where their
code lies, not what it does.

Each command adds its figures to bench/optimiser.json (--json, before the
command), which chapter 9 reads, with the machine it ran on (bench/machine.py,
under "machines"). With --only, the benchmarks named are measured again and
the others' figures are kept.
"""
import argparse
import datetime
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lcompiler import cps, driver, pipeline, shrink
from lcompiler.cps import Seq, const, halt, tuple_
from lcompiler.errors import Source
from lcompiler.support import collector_paused, target_machine

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "optimiser.json"
sys.path.insert(0, str(HERE))
from compile_speed import program  # noqa: E402  (the generated L programs)


# The sizes of `run`, `unroll` and `closures`: bench/programs' own, made larger where that takes less than
# about half a second without the optimiser on the book's machine (a 2-core AMD EPYC virtual machine).
SIZES = {"ack": 12, "binarytrees": 19, "cpstak": 3000, "cpstree": 1000, "deriv": 1000, "fib": 41,
             "fold": 40000, "live": 250000, "loop": 4000000, "msort": 250, "nqueens": 13, "primes": 150000,
             "states": 200000000, "tak": 11, "takl": 4000,
             # about half of bench/run.py's sizes (about a second for the fastest version there)
             "change": 1000, "divrec": 200000, "gcd": 4600, "hof": 34000, "interp": 300000, "mandel": 3200,
             "perm": 600, "rbtree": 250000, "raisesearch": 120, "raiseparse": 2750000}
TARGET = 1.05          # optimised / -O0, at most


def machine(args) -> dict:
    """The machine (bench/machine.py), the moment, the command and the commit of a measurement."""
    from machine import describe
    git = ["git", "-C", str(HERE.parent)]
    commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(git + ["status", "--porcelain", "lcompiler"], capture_output=True, text=True).stdout
    return {**describe(), "command": " ".join(["python", "bench/optimiser.py", *sys.argv[1:]]),
            "commit": (commit or "?") + (" with uncommitted changes to lcompiler/" if changed.strip() else "")}


def save(key: str, value, args) -> None:
    """Record value under key in bench/optimiser.json, with the machine; with --only, merged into
    what the file holds for the other benchmarks."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    old = data.get(key)
    if getattr(args, "only", None) and isinstance(old, dict) and (key != "run" or "benchmarks" in old):
        rows = value["benchmarks"] if key == "run" else value
        kept = old["benchmarks"] if key == "run" else old
        rows = dict(sorted({**kept, **rows}.items()))
        if key == "run":
            value["benchmarks"] = rows
        else:
            value = rows
    data[key] = value
    data.setdefault("machines", {})[key] = getattr(args, "described", None) or machine(args)
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")


def converted(lines: int) -> cps.Program:
    """The CPS (before the optimiser) of the generated program of about this many lines."""
    return pipeline.compile_to("cps", Source("generated.l", program(lines)))[0]


def chain(n: int) -> cps.Program:
    """x0 = 0, x1 = tuple(x0), …, x_n = tuple(x_{n-1}); halt x0: a chain of dead tuples."""
    s = Seq()
    x = first = s.let(const(0), "x")
    for _ in range(n):
        x = s.let(tuple_(x), "x")
    p = cps.Program()
    p.define(s.end(halt(first)), "unused")
    return p


def timed(f, *args):
    start = time.perf_counter()
    result = f(*args)
    return time.perf_counter() - start, result


class Counting(shrink.Kennedy):
    """The work-list shrinker, counting the nodes it looks at (a measure of work that no other
    process on the machine can disturb)."""
    visits = 0

    def visit(self, node, do=True):
        self.visits += 1
        return super().visit(node, do)


def shrinkers(args) -> None:
    rows = []
    print(f"{'program':>9} {'nodes':>9} {'census passes':>13} {'s':>7} {'µs/node':>8}   "
          f"{'work list s':>11} {'µs/node':>8} {'visits/node':>11}   {'after':>8}")
    for kind, sizes in (("generated", [90, 900, 9000, 90000]), ("chain", [1000, 3000, 10000, 100000, 1000000])):
        for size in sizes:
            if kind == "generated" and size * 11 > args.largest * 1.1:
                continue
            if kind == "chain" and size > args.largest:
                continue
            make = (lambda: converted(size)) if kind == "generated" else (lambda: chain(size))
            with collector_paused():
                p = make()
                nodes = cps.size(p)
                row = {"program": kind, "nodes": nodes}
                if kind == "generated" or size <= args.census_chain:
                    seconds, stats = timed(shrink.shrink_census, p)
                    row.update(census_passes=stats["passes"], census_s=seconds)
                p = make()
                seconds, _ = timed(shrink.shrink, p)
                row.update(work_list_s=seconds, after=cps.size(p))
                p = make()
                counting = Counting(p)
                counting.run()
                row.update(visits=counting.visits)
            rows.append(row)
            census = (f"{row['census_passes']:13} {row['census_s']:7.2f} {1e6 * row['census_s'] / nodes:8.2f}"
                      if "census_s" in row else f"{'(too slow)':>13} {'':7} {'':8}")
            print(f"{kind:>9} {nodes:9} {census}   {row['work_list_s']:11.3f} "
                  f"{1e6 * row['work_list_s'] / nodes:8.2f} {row['visits'] / nodes:11.2f}   {row['after']:8}",
                  flush=True)
    save("shrinkers", rows, args)


def stages(text: str, optimiser: bool) -> dict:
    """Seconds per stage of compiling text to object files, and the sizes handed on."""
    source = Source("generated.l", text)
    unit, value, out = pipeline.Unit(source, optimiser), source, {}
    with collector_paused():
        for s in pipeline.load():
            if s.name == "llvm-opt":
                break
            if optimiser or s.name not in pipeline.OPTIMISATIONS:
                seconds, value = timed(s.run, value, unit)
                out[s.name] = seconds
            if s.name == "closure" or (s.name == "shrink" and optimiser):
                out["cps nodes"] = cps.size(value)
    out["llvm instructions"] = sum(len(b.instructions) for f in value.functions for b in f.blocks)
    seconds, _ = timed(driver.machine_code, value, 2, True, driver.parts_for(value))
    out["machine code"] = seconds
    return out


def compile_(args) -> None:
    target_machine()
    text = program(args.lines)
    runs = {True: [], False: []}
    for _ in range(args.repeat):
        for optimiser in (False, True):
            runs[optimiser].append(stages(text, optimiser))
    result = {}
    for optimiser, label in ((False, "-O0"), (True, "optimised")):
        median = {k: statistics.median(r[k] for r in runs[optimiser]) for k in runs[optimiser][0]}
        timing = {k: v for k, v in median.items() if k not in ("cps nodes", "llvm instructions")}
        median["total"] = sum(timing.values())
        result[label] = median
    result["lines"] = text.count("\n")
    names = [k for k in result["optimised"] if k not in ("cps nodes", "llvm instructions", "total")]
    print(f"{result['lines']} lines, median of {args.repeat} runs each, alternating (seconds):")
    for label in ("-O0", "optimised"):
        m = result[label]
        print(f"{label:>10}: " + "  ".join(f"{k} {m.get(k, 0):.2f}" for k in names)
              + f"  total {m['total']:.2f}   CPS nodes {m['cps nodes']}  LLVM instructions {m['llvm instructions']}")
    save("compile", result, args)


def cpu(command) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def alternately(exes: dict, repeat: int) -> dict:
    """Run each executable of exes (label -> path) repeat times, in turn; label -> CPU seconds."""
    times = {label: [] for label in exes}
    for _ in range(repeat):
        for label, exe in exes.items():
            times[label].append(cpu([exe]))
    return times


def sized(path: Path, size: int) -> Source:
    """A benchmark with its first line, `def n = …`, set to size."""
    first, rest = path.read_text().split("\n", 1)
    assert first.startswith("def n = "), path.name
    return Source(path.name, f"def n = {size}\n{rest}")


def run(args) -> None:
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((HERE / "programs").glob("*.l")):
            if args.only and path.stem not in args.only:
                continue
            size = SIZES[path.stem]
            exes = {}
            for optimiser, label in ((False, "-O0"), (True, "optimised")):
                exe = Path(tmp) / f"{path.stem}{label}"
                driver.build(sized(path, size), exe, optimiser=optimiser)
                exes[label] = exe
            exes["-O0 again"] = Path(tmp) / f"{path.stem}-O1"     # a copy: what the noise alone makes
            shutil.copy(exes["-O0"], exes["-O0 again"])
            outputs = {label: subprocess.run([exe], capture_output=True, text=True).stdout
                       for label, exe in exes.items()}
            assert outputs["-O0"] == outputs["optimised"], path.name
            times = alternately(exes, args.repeat)
            ratios = [b / a for a, b in zip(times["-O0"], times["optimised"])]
            control = [b / a for a, b in zip(times["-O0"], times["-O0 again"])]
            rows[path.stem] = {"size": size, "date": datetime.datetime.now().isoformat(timespec="seconds"),
                               **{label: {"times": t, "min": min(t), "median": statistics.median(t), "max": max(t)}
                                  for label, t in times.items()},
                               "ratios": ratios, "ratio": statistics.median(ratios),
                               "control ratios": control, "control": statistics.median(control)}
            r = rows[path.stem]
            print(f"{path.stem:12} n = {size:<10} -O0 {r['-O0']['median']:7.3f} s   optimised "
                  f"{r['optimised']['median']:7.3f} s   ratio {r['ratio']:.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                  f"   {'met' if r['ratio'] <= TARGET else 'missed'}   (-O0 against itself {r['control']:.2f})",
                  flush=True)
    missed = [name for name, r in rows.items() if r["ratio"] > TARGET]
    print(f"target: optimised / -O0 <= {TARGET} for every benchmark: "
          + ("met" if not missed else "missed by " + ", ".join(missed)))
    save("run", {"target": TARGET, "repeat": args.repeat, "benchmarks": rows}, args)


def unroll(args) -> None:
    rows, rounds = {}, (0, 1, 2, 3)
    saved = shrink.UNROLL
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((HERE / "programs").glob("*.l")):
            if args.only and path.stem not in args.only:
                continue
            source, exes, sizes = sized(path, SIZES[path.stem]), {}, {}
            try:
                for u in rounds:
                    shrink.UNROLL = u
                    sizes[u] = cps.size(pipeline.compile_to("opt", source)[0])
                    exes[u] = Path(tmp) / f"{path.stem}-{u}"
                    driver.build(source, exes[u])
            finally:
                shrink.UNROLL = saved
            outputs = {subprocess.run([exe], capture_output=True, text=True).stdout for exe in exes.values()}
            assert len(outputs) == 1, path.name
            times = alternately(exes, args.repeat)
            rows[path.stem] = {str(u): {"min": min(t), "median": statistics.median(t), "max": max(t),
                                        "cps nodes": sizes[u]} for u, t in times.items()}
            print(f"{path.stem:12}" + "".join(f"  {u}: {statistics.median(times[u]):6.3f} s {sizes[u]:5} nodes"
                                              for u in rounds), flush=True)
    save("unroll", rows, args)


def lambdas(program: cps.Program) -> int:
    """How many functions program defines: its top-level functions and the closure bodies in them."""
    return sum(type(n) is cps.Lambda for d in program.definitions for n in cps.walk(d))


def closures(args) -> None:
    rows, rule = {}, shrink.makes_closures
    variants = {"rule": rule, "no rule": lambda body: False}
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((HERE / "programs").glob("*.l")):
            if args.only and path.stem not in args.only:
                continue
            source, exes, counts, texts = sized(path, SIZES[path.stem]), {}, {}, {}
            try:
                for label, f in variants.items():
                    shrink.makes_closures = f
                    counts[label] = lambdas(pipeline.compile_to("opt", source)[0])
                    exes[label] = Path(tmp) / f"{path.stem}-{label.replace(' ', '-')}"
                    driver.build(source, exes[label])
                    texts[label] = exes[label].read_bytes()
            finally:
                shrink.makes_closures = rule
            if texts["rule"] == texts["no rule"]:
                print(f"{path.stem:12} {counts['rule']:4} functions either way", flush=True)
                continue
            outputs = {subprocess.run([exe], capture_output=True, text=True).stdout for exe in exes.values()}
            assert len(outputs) == 1, path.name
            times = alternately(exes, args.repeat)
            rows[path.stem] = {label: {"min": min(t), "median": statistics.median(t), "max": max(t),
                                       "functions": counts[label]} for label, t in times.items()}
            print(f"{path.stem:12}" + "".join(f"  {label}: {statistics.median(times[label]):6.3f} s"
                                              f" {counts[label]:4} functions" for label in variants), flush=True)
    save("closures", rows, args)


LAYOUTS = {"default": None, "blocks aligned": "-align-all-nofallthru-blocks=5",
           "functions aligned": "-align-all-functions=6"}


def build_with(args) -> None:
    """(In a child process:) build one benchmark with an LLVM option set first."""
    if args.option != "none":
        import llvmlite.binding as llvm
        llvm.set_option("", "-" + args.option)        # (passed without its dash: argparse)
    driver.build(sized(HERE / "programs" / f"{args.name}.l", args.size), Path(args.exe),
                 optimiser=args.optimiser == "optimised")      # "O0" or "optimised"


def instructions(exe: Path) -> dict | None:
    """What exe executes, by valgrind's cachegrind with its model of branch prediction: instructions,
    indirect branches (jump tables, calls through pointers) and how many of those it mispredicts."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--branch-sim=yes",
                               f"--cachegrind-out-file={tmp}/out", str(exe)], capture_output=True, text=True, check=True)

    def number(pattern: str) -> int:
        return int(re.search(pattern, done.stderr).group(1).replace(",", ""))
    return {"instructions": number(r"I\s+refs:\s+([\d,]+)"),
            "indirect branches": number(r"Branches:.*\+\s+([\d,]+) ind"),
            "indirect mispredicted": number(r"Mispredicts:.*\+\s+([\d,]+) ind")}


def layout(args) -> None:
    name, size = args.name, SIZES[args.name]
    small = args.count_size or size // 8            # valgrind runs a program some fifty times slower
    row = {"size": size, "count size": small, "instructions": {}, "layouts": {}}
    with tempfile.TemporaryDirectory() as tmp:
        exes = {}
        for label in ("-O0", "optimised"):
            exe = Path(tmp) / f"small{label}"
            subprocess.run([sys.executable, __file__, "build-with", "none", name, str(small), label.strip("-"),
                            str(exe)], check=True)
            row["instructions"][label] = instructions(exe)
        for layout_name, option in LAYOUTS.items():
            for label in ("-O0", "optimised"):
                exe = Path(tmp) / f"{layout_name.replace(' ', '-')}{label}"
                subprocess.run([sys.executable, __file__, "build-with", (option or "none").lstrip("-"), name, str(size),
                                label.strip("-"), str(exe)], check=True)
                exes[layout_name, label] = exe
        outputs = {subprocess.run([exe], capture_output=True, text=True).stdout for exe in exes.values()}
        assert len(outputs) == 1, name
        times = alternately(exes, args.repeat)
    for layout_name in LAYOUTS:
        o0, opt = times[layout_name, "-O0"], times[layout_name, "optimised"]
        ratios = [b / a for a, b in zip(o0, opt)]
        row["layouts"][layout_name] = {"-O0": o0, "optimised": opt, "ratios": ratios,
                                       "ratio": statistics.median(ratios)}
        print(f"{name} {layout_name:18} -O0 {statistics.median(o0):.3f} s  optimised {statistics.median(opt):.3f} s"
              f"  ratio {statistics.median(ratios):.2f}", flush=True)
    print(f"{name}: instructions at n = {small}: {row['instructions']}")
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    save("layout", {**data.get("layout", {}), name: row}, args)


def main(argv=None) -> int:
    global RESULTS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=RESULTS, help="the file to add the figures to (default: %(default)s)")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("shrinkers")
    s.add_argument("--largest", type=int, default=1_000_000, help="the most CPS nodes in a program")
    s.add_argument("--census-chain", type=int, default=3_000, help="the longest chain given to the census")
    c = sub.add_parser("compile")
    c.add_argument("--lines", type=int, default=10_000)
    c.add_argument("--repeat", type=int, default=3)
    r = sub.add_parser("run")
    r.add_argument("--repeat", type=int, default=11)
    r.add_argument("--only", nargs="*", help="benchmark names")
    u = sub.add_parser("unroll")
    u.add_argument("--repeat", type=int, default=5)
    u.add_argument("--only", nargs="*", help="benchmark names")
    k = sub.add_parser("closures")
    k.add_argument("--repeat", type=int, default=21)
    k.add_argument("--only", nargs="*", help="benchmark names")
    lay = sub.add_parser("layout")
    lay.add_argument("name", choices=sorted(SIZES))
    lay.add_argument("--repeat", type=int, default=7)
    lay.add_argument("--count-size", type=int, help="the size at which cachegrind counts (default: an eighth)")
    b = sub.add_parser("build-with")               # used by layout, in a child process
    for field in ("option", "name", "size", "optimiser", "exe"):
        b.add_argument(field)
    args = ap.parse_args(argv)
    if args.command == "build-with":
        args.size = int(args.size)
    RESULTS = args.json
    if args.command != "build-with":
        args.described = machine(args)     # as the measurement starts
    sys.setrecursionlimit(100_000)
    {"shrinkers": shrinkers, "compile": compile_, "run": run, "unroll": unroll,
     "closures": closures, "layout": layout, "build-with": build_with}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
