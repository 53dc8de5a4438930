"""Run the benchmarks: each program in L, in its peers C, OCaml and Chez Scheme, and in CPython.

    python bench/run.py                  # measure everything, write bench/results.json
    python bench/run.py --small          # tiny sizes, one run: only check that all outputs agree
    python bench/run.py --only fib --only tak --repeat 3
    python bench/run.py --python keep    # re-measure the compiled languages, keep CPython's times

Every benchmark is five files, programs/NAME.{l,c,ml,ss,py}.
The first line of each sets its size (`def n = 32`, `#define N 32`, `let n =
32`, `(import (chezscheme)) (define n 32)`, `N = 32`); this script rewrites
that line, so that all versions do the same work, and their outputs must be
identical.

Each program is built once: L with `lc build`, C with `gcc -O2`, OCaml with
`ocamlopt -unsafe -inline 200` (and -O3 when the compiler has flambda), Chez
Scheme with `compile-program` at `(optimize-level 3)`, run as `scheme
--program NAME.so`. Then the L executable is timed in alternation with each
peer, --repeat times: L, C, L, OCaml, L, Chez, L, C, ... so that a change in
the load of a shared machine falls on both sides of each ratio. L/peer is the
median, over the repetitions, of the ratio of each L run to the peer's run
beside it; L/best is L over the faster of C and OCaml. CPython runs once,
with a time limit (--python-timeout); a run that reaches it gives a lower
bound.
The benchmarks of SCALING (`live`) are also timed at other sizes, to show how
their time per unit of size grows.

A peer that is not installed is skipped with a note. Every run is recorded
in bench/results.json (--json), merged into what the file already holds, so
that --only re-measures some benchmarks and keeps the others. With
`--python keep`, CPython is not run again for a benchmark whose stored
CPython result was measured on the same program text at the same size (its
ratio to L then compares times taken at different moments: on a shared
machine, re-run CPython for the final table).
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PROGRAMS = BENCH / "programs"
RESULTS = BENCH / "results.json"
LC = Path(sys.executable).parent / "lc"
TIMEOUT = 120  # seconds, for one run of one compiled program

# name: (full size, small size). At the full sizes, the fastest compiled
# version takes about 0.1 to 1 s on a 2-core virtual machine, CPython at most
# about a minute; the small sizes take a fraction of a second.
SIZES = {
    "fib": (40, 20),
    "tak": (11, 6),
    "takl": (4000, 1),
    "ack": (11, 5),
    "states": (50_000_000, 10_000),
    "loop": (2_000_000, 1000),
    "cpstak": (200, 1),
    "cpstree": (100, 1),
    "fold": (10_000, 20),
    "nqueens": (13, 5),
    "primes": (60_000, 2000),
    "msort": (100, 2),
    "deriv": (500, 2),
    "binarytrees": (18, 8),
    "live": (250_000, 1000),
}
# Benchmarks also measured at smaller sizes, to see how their time grows.
SCALING = {"live": (62_500, 125_000, 500_000)}

# The targets of issue 17.
TARGET_MEAN, TARGET_EACH, TARGET_PYTHON = 1.05, 1.3, 30

PEERS = ("C", "OCaml", "Chez")
BEST_OF = ("C", "OCaml")          # "the best of C and OCaml"
INSTALL = {"C": "apt-get install gcc", "OCaml": "apt-get install ocaml-nox",
           "Chez": "apt-get install chezscheme"}


# --- The languages ---------------------------------------------------------

def ocaml_flags():
    config = subprocess.run(["ocamlopt", "-config"], capture_output=True, text=True).stdout
    flambda = "flambda: true" in config
    return (["-O3"] if flambda else []) + ["-unsafe", "-inline", "200"]


def first_line(tool_output):
    return tool_output.strip().splitlines()[0] if tool_output.strip() else "?"


class Language:
    """How to size, build, run and name one language's version of a benchmark."""

    def __init__(self, name, ext, prefix, suffix="", tool=None):
        self.name, self.ext, self.prefix, self.suffix, self.tool = name, ext, prefix, suffix, tool

    def available(self):
        return self.tool is None or shutil.which(self.tool) is not None

    def source(self, bench, size, tmp):
        """Copy programs/BENCH.EXT into tmp, with its first line set to size."""
        first, rest = (PROGRAMS / (bench + self.ext)).read_text().split("\n", 1)
        assert first.startswith(self.prefix) and first.endswith(self.suffix), f"{bench}{self.ext}: bad first line"
        path = tmp / (bench + self.ext)
        path.write_text(f"{self.prefix}{size}{self.suffix}\n{rest}")
        return path

    def build(self, src, tmp):
        """The command that runs src, once built; raises BuildError."""
        raise NotImplementedError

    def version(self):
        raise NotImplementedError

    def flags(self):
        return ""


class BuildError(Exception):
    pass


def check_build(done, what):
    if done.returncode != 0:
        raise BuildError(f"{what} failed:\n{done.stdout}{done.stderr}")


class L(Language):
    def build(self, src, tmp):
        exe = tmp / (src.stem + "-l")
        check_build(subprocess.run([LC, "build", src, "-o", exe], capture_output=True, text=True), "lc build")
        return [str(exe)]

    def version(self):
        from llvmlite import binding
        git = ["git", "-C", str(BENCH.parent)]
        commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        changed = subprocess.run(git + ["status", "--porcelain", "lcompiler"], capture_output=True, text=True).stdout
        commit = (commit or "?") + (" with uncommitted changes to lcompiler/" if changed.strip() else "")
        return f"lc (commit {commit}), LLVM {'.'.join(map(str, binding.llvm_version_info))}"

    def flags(self):
        return "lc build (LLVM O2, small code model)"


class C(Language):
    def build(self, src, tmp):
        exe = tmp / (src.stem + "-c")
        check_build(subprocess.run(["gcc", "-O2", src, "-o", exe], capture_output=True, text=True), "gcc")
        return [str(exe)]

    def version(self):
        return first_line(subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout)

    def flags(self):
        return "gcc -O2"


class OCaml(Language):
    def build(self, src, tmp):
        exe = tmp / (src.stem + "-ml")
        check_build(subprocess.run(["ocamlopt", *ocaml_flags(), src.name, "-o", exe], cwd=tmp,
                                   capture_output=True, text=True), "ocamlopt")
        return [str(exe)]

    def version(self):
        return "ocamlopt " + subprocess.run(["ocamlopt", "-version"], capture_output=True, text=True).stdout.strip()

    def flags(self):
        return "ocamlopt " + " ".join(ocaml_flags())


class Chez(Language):
    def build(self, src, tmp):
        so = src.with_suffix(".so")
        done = subprocess.run(["scheme", "-q"], input=f'(optimize-level 3) (compile-program "{src}" "{so}")',
                              capture_output=True, text=True, cwd=tmp)
        if "Exception" in done.stdout + done.stderr or not so.exists():
            raise BuildError(f"compile-program failed:\n{done.stdout}{done.stderr}")
        return ["scheme", "--program", str(so)]

    def version(self):
        done = subprocess.run(["scheme", "--version"], capture_output=True, text=True)
        return "Chez Scheme " + (done.stdout + done.stderr).strip()

    def flags(self):
        return "compile-program at (optimize-level 3), scheme --program"


class Python(Language):
    def build(self, src, tmp):
        return [sys.executable, str(src)]

    def version(self):
        return f"CPython {platform.python_version()}"

    def flags(self):
        return "python"


LANGUAGES = {
    "L": L("L", ".l", "def n = "),
    "C": C("C", ".c", "#define N ", tool="gcc"),
    "OCaml": OCaml("OCaml", ".ml", "let n = ", tool="ocamlopt"),
    "Chez": Chez("Chez", ".ss", "(import (chezscheme)) (define n ", ")", tool="scheme"),
    "Python": Python("Python", ".py", "N = "),
}


# --- Running ---------------------------------------------------------------

def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(cmd, timeout):
    """Run cmd: (stdout, wall seconds, cpu seconds), or (error message, None, None)."""
    cpu, start = children_cpu(), time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timeout after {timeout} s", None, None
    wall = time.perf_counter() - start
    if done.returncode != 0:
        return f"exit status {done.returncode}: {done.stderr.strip()}", None, None
    return done.stdout, wall, children_cpu() - cpu


def summary(times, cpu=()):
    return {"times": times, "cpu": list(cpu), "min": min(times), "median": statistics.median(times),
            "max": max(times)}


def measure(bench, size, tmp, languages, repeat, expected_outputs):
    """Build every version of bench at size, then time L against each peer in alternation.

    Returns the benchmark's record (without CPython) and the list of problems."""
    problems, cmds = [], {}
    for lang in languages:
        if lang == "Python":
            continue
        try:
            cmds[lang] = LANGUAGES[lang].build(LANGUAGES[lang].source(bench, size, tmp), tmp)
        except BuildError as e:
            problems.append(f"{bench}: {lang}: {e}")
    if "L" not in cmds:
        return None, problems + [f"{bench}: no L executable"]
    peers = [p for p in PEERS if p in cmds]
    times = {lang: [] for lang in cmds}
    cpu = {lang: [] for lang in cmds}
    paired = {p: [] for p in peers}        # the L runs next to each peer's
    for _ in range(repeat):
        for peer in peers or [None]:
            for lang in ("L", peer) if peer else ("L",):
                out, wall, used = run_once(cmds[lang], TIMEOUT)
                if wall is None or (expected_outputs and out not in expected_outputs):
                    return None, problems + [f"{bench}: {lang} printed {out!r}"]
                expected_outputs.add(out)
                times[lang].append(wall)
                cpu[lang].append(used)
                if lang == "L" and peer:
                    paired[peer].append(wall)
    record = {"size": size, "output": next(iter(expected_outputs)),
              "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "languages": {lang: summary(times[lang], cpu[lang]) for lang in times},
              "pairs": {}}
    for p in peers:
        ratios = [a / b for a, b in zip(paired[p], times[p])]
        record["pairs"][p] = {"L": paired[p], p: times[p],
                              "ratio": statistics.median(ratios),
                              "ratios": ratios, "ratio_min": min(ratios), "ratio_max": max(ratios)}
    return record, problems


def python_record(bench, size, tmp, timeout, stored, mode):
    """CPython's time for bench at size: run once, or kept from stored."""
    src = LANGUAGES["Python"].source(bench, size, tmp)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    if mode == "keep" and stored and stored.get("source") == digest and stored.get("size") == size:
        return stored, None
    out, wall, used = run_once([sys.executable, str(src)], timeout)
    record = {"size": size, "source": digest, "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "output": out if wall is not None else None}
    if wall is None and out.startswith("timeout"):
        return {**record, "timeout": timeout}, None
    if wall is None:
        return None, f"{bench}: Python: {out}"
    return {**record, **summary([wall], [used])}, None


# --- Ratios and the table ----------------------------------------------------

def ratios(record):
    """The ratios of one benchmark's record: L/C, L/OCaml, L/Chez, L/best, Python/L."""
    pairs = record.get("pairs", {})
    r = {f"L/{p}": pairs[p]["ratio"] if p in pairs else None for p in PEERS}
    best = [p for p in BEST_OF if p in pairs]
    if best:
        fastest = min(best, key=lambda p: record["languages"][p]["median"])
        r["L/best"], r["best"] = pairs[fastest]["ratio"], fastest
    else:
        r["L/best"], r["best"] = None, None
    py, l_time = record.get("Python"), record["languages"]["L"]["median"]
    if py and "median" in py:
        r["Python/L"], r["Python/L at least"] = py["median"] / l_time, False
    elif py and "timeout" in py:
        r["Python/L"], r["Python/L at least"] = py["timeout"] / l_time, True
    else:
        r["Python/L"], r["Python/L at least"] = None, False
    return r


def scaling(results, name):
    """[(size, {language: microseconds per unit of size})] for a benchmark measured at several sizes."""
    records = {int(size): rec for size, rec in results["scaling"][name].items()}
    if name in results["benchmarks"]:
        records[results["benchmarks"][name]["size"]] = results["benchmarks"][name]
    return [(size, {lang: r["median"] / size * 1e6 for lang, r in records[size]["languages"].items()})
            for size in sorted(records)]


def geometric_mean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def fmt(x, width, digits, at_least=False):
    return f"{('>' if at_least else '') + format(x, f'.{digits}f'):>{width}}" if x else f"{'-':>{width}}"


def print_table(results, names):
    print(f"\n{'benchmark':12} {'L s':>7} {'C s':>7} {'OCaml s':>7} {'Chez s':>7} {'Python s':>8}"
          f" {'L/C':>5} {'L/OCaml':>7} {'L/Chez':>6} {'L/best':>6} {'Python/L':>8}")
    rows = {}
    for name in names:
        rec = results["benchmarks"][name]
        langs, r = rec["languages"], ratios(rec)
        rows[name] = r
        secs = [langs[x]["median"] if x in langs else None for x in ("L", "C", "OCaml", "Chez")]
        py = rec.get("Python") or {}
        print(f"{name:12} " + " ".join(fmt(s, 7, 3) for s in secs)
              + f" {fmt(py.get('median') or py.get('timeout'), 8, 1, 'timeout' in py)}"
              f" {fmt(r['L/C'], 5, 2)} {fmt(r['L/OCaml'], 7, 2)} {fmt(r['L/Chez'], 6, 2)}"
              f" {fmt(r['L/best'], 6, 2)} {fmt(r['Python/L'], 8, 1, r['Python/L at least'])}")
    means = {k: geometric_mean(r[k] for r in rows.values()) for k in ("L/C", "L/OCaml", "L/Chez", "L/best", "Python/L")}
    print(f"{'geo. mean':12} {'':47} {fmt(means['L/C'], 5, 2)} {fmt(means['L/OCaml'], 7, 2)}"
          f" {fmt(means['L/Chez'], 6, 2)} {fmt(means['L/best'], 6, 2)} {fmt(means['Python/L'], 8, 1)}")
    if means["L/best"]:
        print(f"target: geometric mean of L/best <= {TARGET_MEAN}: {means['L/best']:.2f}, "
              f"{'met' if means['L/best'] <= TARGET_MEAN else 'missed'}")
    over = [f"{n} {r['L/best']:.2f}" for n, r in rows.items() if r["L/best"] and r["L/best"] > TARGET_EACH]
    print(f"target: no L/best above {TARGET_EACH}: " + ("met" if not over else "missed by " + ", ".join(over)))
    under = [f"{n} {r['Python/L']:.1f}" for n, r in rows.items()
             if r["Python/L"] and r["Python/L"] < TARGET_PYTHON and not r["Python/L at least"]]
    measured = [n for n, r in rows.items() if r["Python/L"]]
    print(f"target: Python/L >= {TARGET_PYTHON} everywhere: "
          + ("missed by " + ", ".join(under) if under else f"met on the {len(measured)} measured"))
    for name in results.get("scaling", {}):
        print(f"\n{name}: microseconds per unit of size (medians)")
        for size, rec in scaling(results, name):
            print(f"  {size:>9} " + "  ".join(f"{lang} {t:.2f}" for lang, t in rec.items()))
    noise = {p: [rec["pairs"][p]["ratio_max"] / rec["pairs"][p]["ratio_min"]
                 for rec in (results["benchmarks"][n] for n in names) if p in rec.get("pairs", {})] for p in PEERS}
    print("\nnoise: max/min of the ratios of one pair over the repetitions (median, largest): "
          + ", ".join(f"L/{p} {statistics.median(v):.2f}, {max(v):.2f}" for p, v in noise.items() if v))


# --- Main -----------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="tiny sizes, one run: only check that the outputs agree")
    ap.add_argument("--repeat", type=int, default=5, help="runs of L and of each peer, alternated (default 5)")
    ap.add_argument("--only", action="append", choices=SIZES, metavar="NAME",
                    help="run only this benchmark (repeatable); the others' results are kept")
    ap.add_argument("--peers", default=",".join(PEERS), help="the peers to run, comma-separated (default: all)")
    ap.add_argument("--python", choices=("run", "keep", "skip"), default="run",
                    help="run CPython (default); keep: reuse the CPython time stored in the JSON for the same "
                         "program and size, and run it only where there is none; skip: do not run it")
    ap.add_argument("--python-timeout", type=float, default=120, metavar="S",
                    help="time limit of one CPython run (default 120 s); a run that reaches it counts as S")
    ap.add_argument("--json", metavar="FILE", default=None,
                    help="where to record the runs (default bench/results.json; --small writes nothing unless given)")
    args = ap.parse_args()
    repeat = 1 if args.small else args.repeat
    json_path = Path(args.json) if args.json else (None if args.small else RESULTS)

    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    languages = ["L"]
    for p in wanted:
        if p not in PEERS:
            ap.error(f"unknown peer {p!r}: choose among {', '.join(PEERS)}")
        if LANGUAGES[p].available():
            languages.append(p)
        else:
            print(f"note: {p} is not installed ({LANGUAGES[p].tool} not found): skipped. "
                  f"On Debian: {INSTALL[p]}")
    if args.python != "skip":
        languages.append("Python")
    if not LC.exists():
        ap.error(f"{LC} not found: install the package first (pip install -e .)")

    results = {"benchmarks": {}, "scaling": {}}
    if json_path and json_path.exists():
        stored = json.loads(json_path.read_text())
        if "benchmarks" in stored:                 # not a file of the old format
            results = {**stored, "scaling": stored.get("scaling", {})}
    names = args.only or list(SIZES)
    all_ok = True
    with tempfile.TemporaryDirectory() as tmpdir:
        for name in names:
            jobs = [(name, SIZES[name][args.small], None)]
            if not args.small:
                jobs += [(name, s, "scaling") for s in SCALING.get(name, ())]
            for bench, size, kind in jobs:
                tmp = Path(tmpdir) / f"{bench}-{size}"
                tmp.mkdir()
                outputs = set()
                record, problems = measure(bench, size, tmp, languages, repeat, outputs)
                if record and "Python" in languages and kind is None:
                    stored = results["benchmarks"].get(bench, {}).get("Python")
                    py, problem = python_record(bench, size, tmp, 60 if args.small else args.python_timeout,
                                                stored, args.python)
                    if problem:
                        problems.append(problem)
                    elif py.get("output") is not None and py["output"] not in outputs:
                        problems.append(f"{bench}: Python printed {py['output']!r}, not {next(iter(outputs))!r}")
                    else:
                        record["Python"] = py
                ok = record is not None and not problems
                all_ok &= ok
                ran = " ".join(record["languages"]) + (" Python" if "Python" in record else "") if record else ""
                label = f"{bench}({size})" + (" [scaling]" if kind else "")
                print(f"{label}: {'ok' if ok else 'FAILED'} {ran}", flush=True)
                for problem in problems:
                    print("  " + problem.replace("\n", "\n  "))
                if record:
                    record["command"] = " ".join(["python", "bench/run.py", *sys.argv[1:]])
                if ok and kind:
                    results["scaling"].setdefault(bench, {})[str(size)] = record
                elif ok:
                    results["benchmarks"][bench] = record

    if not args.small:
        results["benchmarks"] = {n: results["benchmarks"][n] for n in SIZES if n in results["benchmarks"]}
        results["machine"] = {"cores": os.cpu_count(), "cpu": cpu_model(), "system": platform.platform(),
                              "date": datetime.datetime.now().isoformat(timespec="seconds"),
                              "command": " ".join(["python", "bench/run.py", *sys.argv[1:]]), "repeat": repeat,
                              "nice": os.nice(0)}
        results["compilers"] = {lang: {"version": LANGUAGES[lang].version(), "build": LANGUAGES[lang].flags()}
                                for lang in languages}
        print_table(results, [n for n in SIZES if n in results["benchmarks"]])
    if json_path:
        json_path.write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all_ok else 1


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


if __name__ == "__main__":
    sys.exit(main())
