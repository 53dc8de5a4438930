"""Run the benchmarks: each program in L, in its peers C (gcc -O2, gcc -O3, clang -O2), OCaml and Chez Scheme, and in CPython.

    python bench/run.py                  # measure everything, write bench/results.json
    python bench/run.py --small          # tiny sizes, one run: only check that all outputs agree
    python bench/run.py --only fib --only tak --repeat 3
    python bench/run.py --python keep    # re-measure the compiled languages, keep CPython's times
    python bench/run.py --table          # print the table of the stored results, measure nothing

Every benchmark is five files, programs/NAME.{l,c,ml,ss,py}.
The first line of each sets its size (`def n = 32`, `#define N 32`, `let n =
32`, `(import (chezscheme)) (define n 32)`, `N = 32`); this script rewrites
that line, so that all versions do the same work, and their outputs must be
identical. At the full sizes (SIZES) the fastest compiled version of each
takes about a second on the machine of the last measurement.

Each program is built once: L with `lc build`, C three times (`gcc -O2`, the
peer the targets are set against, and `gcc -O3` and `clang -O2`, which a
reader will ask about), OCaml with `ocamlopt -unsafe -inline 200` (and -O3
when the compiler has flambda), Chez Scheme with `compile-program` at
`(optimize-level 3)`, run as `scheme --program NAME.so`. Then the L
executable is timed in alternation with each peer, --repeat times: L, C, L,
C-O3, L, clang, L, OCaml, L, Chez, L, C, ... so that a change in the load
of a shared machine falls on both sides of each ratio. CPython runs once,
with a time limit (--python-timeout, 60 s); a run that reaches it gives a
lower bound, which still decides the target of CPython at least thirty times
slower for every L run under 2 s; on a longer one it may leave it undecided,
and the table says so. The benchmarks of SCALING (`live`) are also timed at other sizes, to
show how their time per unit of size grows.

Start-up is measured apart: an empty program (one that prints 0) in every
language, timed in the same alternation (STARTUP_REPEAT runs each), and
printed above the tables. It is not subtracted from the benchmarks' times:
at about a second a run, it weighs little except for Chez Scheme (about 60 ms)
and CPython.

The ratios. L/peer is the median, over the repetitions, of the ratio of
each L run to the peer's run beside it; beside it, a 95 % confidence
interval: a bootstrap (BOOTSTRAP resamples, fixed seed) over those paired
ratios, the median of each resample. L/best is L over the faster (by median
time) of gcc -O2 and ocamlopt, as issue 26 defines it; L/best-O3 and
L/best-clang replace gcc -O2 by gcc -O3 and by clang -O2. The geometric mean
of a column has its interval too: each resample draws every benchmark's
pairs again and takes the geometric mean of their medians.

One noise rule, used for every verdict this script prints (`verdict`): a
ratio is compared with a threshold (1 for faster or slower, the targets for
met or missed) by its interval, never by its point alone. The interval
wholly below the threshold: faster, or met; wholly above: slower, or missed;
an interval that contains the threshold is a tie, "within noise", and is
neither met nor missed. The targets (issue 26): the geometric mean of
L/best at most 0.9, and no benchmark's L/best above 1.1.

The machine (CPU model, cache sizes, cores, OS, kernel, load, compiler
versions: bench/machine.py) is recorded in the JSON file and printed above
the tables. A peer that is not installed is skipped with a note. Every run
is recorded in bench/results.json (--json), merged into what the file
already holds, so that --only re-measures some benchmarks and keeps the
others. With `--python keep`, CPython is not run again for a benchmark
whose stored CPython result was measured on the same program text at the
same size (its ratio to L then compares times taken at different moments:
on a shared machine, re-run CPython for the final table).

How the C versions allocate is written at the top of each: malloc and free
where a value has one owner (as a C programmer writes it, so that L/C on
those programs also measures glibc's malloc), an arena where values share
parts and no cell has one owner (deriv, perm), the stack or nothing
elsewhere.
"""
import argparse
import datetime
import hashlib
import json
import math
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import machine  # noqa: E402  (bench/machine.py)

PROGRAMS = BENCH / "programs"
RESULTS = BENCH / "results.json"
LC = Path(sys.executable).parent / "lc"
TIMEOUT = 120  # seconds, for one run of one compiled program

# name: (full size, small size). At the full sizes, the fastest compiled
# version takes about a second on the 2-core AMD EPYC virtual machine of the
# last measurement (CPython at most --python-timeout); the small sizes take a
# fraction of a second, for --small and the tests.
SIZES = {
    "fib": (44, 20),
    "tak": (12, 6),               # 2 s: a step of n multiplies tak's time by 7, and 11 takes 0.3 s
    "takl": (4000, 1),
    "ack": (13, 5),
    "states": (340_000_000, 10_000),
    "loop": (8_000_000, 1000),
    "cpstak": (8000, 1),
    "cpstree": (1500, 1),
    "fold": (90_000, 20),
    "nqueens": (13, 5),           # 0.5 s: 14 takes six times as long
    "primes": (210_000, 2000),
    "msort": (600, 2),
    "deriv": (4000, 2),
    "binarytrees": (20, 8),
    "live": (250_000, 1000),
    "divrec": (400_000, 20),
    "mandel": (4500, 50),
    "gcd": (6500, 50),
    "hof": (68_000, 5),
    "interp": (480_000, 1000),
    "rbtree": (450_000, 1000),
    "perm": (2400, 1),            # the C version's arena makes it the fastest by far: L takes about 9 s
    "change": (1200, 100),
    "raisesearch": (240, 1),      # first n-queens solutions, a raise at every dead end (issue 25)
    "raiseparse": (5_500_000, 1000),  # a parser that raises on the bad half of its inputs (issue 25)
}
# Benchmarks also measured at smaller sizes, to see how their time grows.
SCALING = {"live": (62_500, 125_000, 500_000)}

# The targets of issue 26 (L/best), and issue 17's for CPython.
TARGET_MEAN, TARGET_EACH, TARGET_PYTHON = 0.9, 1.1, 30

PEERS = ("C", "C-O3", "clang", "OCaml", "Chez")
# The best-of columns: the L/best, and the same with the other C compilers.
BESTS = {"L/best": ("C", "OCaml"), "L/best-O3": ("C-O3", "OCaml"), "L/best-clang": ("clang", "OCaml")}
BEST_OF = BESTS["L/best"]          # "the best of gcc -O2 and ocamlopt"
INSTALL = {"C": "apt-get install gcc", "C-O3": "apt-get install gcc", "clang": "apt-get install clang",
           "OCaml": "apt-get install ocaml-nox", "Chez": "apt-get install chezscheme"}

# The confidence intervals.
BOOTSTRAP, SEED, LEVEL = 10_000, 26, 0.95
STARTUP_REPEAT = 21


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
    """C built by one compiler at one level: gcc -O2 (the peer of the targets), gcc -O3, clang -O2."""

    def __init__(self, name, compiler, level):
        super().__init__(name, ".c", "#define N ", tool=compiler)
        self.compiler, self.level = compiler, level

    def build(self, src, tmp):
        exe = tmp / f"{src.stem}-{self.compiler}{self.level}"
        check_build(subprocess.run([self.compiler, self.level, src, "-o", exe], capture_output=True, text=True),
                    f"{self.compiler} {self.level}")
        return [str(exe)]

    def version(self):
        return first_line(subprocess.run([self.compiler, "--version"], capture_output=True, text=True).stdout)

    def flags(self):
        return f"{self.compiler} {self.level}"


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
    "C": C("C", "gcc", "-O2"),
    "C-O3": C("C-O3", "gcc", "-O3"),
    "clang": C("clang", "clang", "-O2"),
    "OCaml": OCaml("OCaml", ".ml", "let n = ", tool="ocamlopt"),
    "Chez": Chez("Chez", ".ss", "(import (chezscheme)) (define n ", ")", tool="scheme"),
    "Python": Python("Python", ".py", "N = "),
}


# An empty program in each language: it prints 0 (start-up, measured apart).
EMPTY = {"L": "print(0)\n", "C": '#include <stdio.h>\nint main(void) { printf("0\\n"); return 0; }\n',
         "OCaml": 'let () = print_endline "0"\n', "Chez": "(import (chezscheme)) (display 0) (newline)\n",
         "Python": "print(0)\n"}
EMPTY.update({"C-O3": EMPTY["C"], "clang": EMPTY["C"]})


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


def alternate(cmds, peers, repeat, check):
    """Time cmds["L"] in alternation with each peer's command, repeat times: L, peer1, L, peer2, ...

    check(lang, stdout) returns an error message or None. Returns (times, cpu, paired, problem),
    where paired[peer] are the L runs timed next to that peer's runs."""
    times = {lang: [] for lang in cmds}
    cpu = {lang: [] for lang in cmds}
    paired = {p: [] for p in peers}
    for _ in range(repeat):
        for peer in peers or [None]:
            for lang in ("L", peer) if peer else ("L",):
                out, wall, used = run_once(cmds[lang], TIMEOUT)
                problem = out if wall is None else check(lang, out)
                if problem:
                    return times, cpu, paired, f"{lang}: {problem}"
                times[lang].append(wall)
                cpu[lang].append(used)
                if lang == "L" and peer:
                    paired[peer].append(wall)
    return times, cpu, paired, None


def pair_record(l_times, peer_times):
    ratios = [a / b for a, b in zip(l_times, peer_times)]
    low, high = interval(ratios)
    return {"ratio": statistics.median(ratios), "ci": [low, high], "ratios": ratios,
            "ratio_min": min(ratios), "ratio_max": max(ratios)}


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

    def check(lang, out):
        if expected_outputs and out not in expected_outputs:
            return f"printed {out!r}, not {next(iter(expected_outputs))!r}"
        expected_outputs.add(out)
        return None

    peers = [p for p in PEERS if p in cmds]
    times, cpu, paired, problem = alternate(cmds, peers, repeat, check)
    if problem:
        return None, problems + [f"{bench}: {problem}"]
    record = {"size": size, "output": next(iter(expected_outputs)),
              "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "languages": {lang: summary(times[lang], cpu[lang]) for lang in times},
              "pairs": {p: {"L": paired[p], p: times[p], **pair_record(paired[p], times[p])} for p in peers}}
    return record, problems


def measure_startup(tmp, languages, repeat):
    """The start-up of every language: an empty program (it prints 0), timed in alternation with L's."""
    tmp.mkdir()
    cmds, problems = {}, []
    for lang in languages:
        src = tmp / ("empty" + LANGUAGES[lang].ext)
        src.write_text(EMPTY[lang])
        try:
            cmds[lang] = LANGUAGES[lang].build(src, tmp)
        except BuildError as e:
            problems.append(f"start-up: {lang}: {e}")
    if "L" not in cmds:
        return None, problems
    peers = [lang for lang in cmds if lang != "L"]
    times, cpu, paired, problem = alternate(cmds, peers, repeat,
                                            lambda lang, out: None if out == "0\n" else f"printed {out!r}")
    if problem:
        return None, problems + [f"start-up: {problem}"]
    return {"repeat": repeat, "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "languages": {lang: summary(times[lang], cpu[lang]) for lang in times}}, problems


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


# --- Intervals and the noise rule --------------------------------------------

def percentiles(values, level=LEVEL):
    values = sorted(values)
    tail = (1 - level) / 2
    at = lambda q: values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]  # noqa: E731
    return at(tail), at(1 - tail)


def interval(ratios, resamples=BOOTSTRAP, seed=SEED):
    """The 95 % bootstrap interval of the median of paired ratios: resample them with replacement
    (fixed seed), take each resample's median, and keep the middle 95 % of those medians."""
    if len(ratios) < 2:
        return ratios[0], ratios[0]
    rng = random.Random(seed)
    k = len(ratios)
    return percentiles([statistics.median(rng.choices(ratios, k=k)) for _ in range(resamples)])


def geometric_mean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def mean_interval(ratio_lists, resamples=BOOTSTRAP, seed=SEED):
    """The 95 % interval of the geometric mean of the medians of several benchmarks' paired ratios:
    each resample draws every benchmark's ratios again (the benchmarks stay the same)."""
    ratio_lists = [r for r in ratio_lists if r]
    if not ratio_lists:
        return None, None
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        logs = [math.log(statistics.median(rng.choices(r, k=len(r)))) for r in ratio_lists]
        means.append(math.exp(sum(logs) / len(logs)))
    return percentiles(means)


def verdict(low, high, threshold, below="met", above="missed"):
    """THE noise rule of this script: an interval wholly at or below the threshold is `below`
    (faster, met), wholly above it `above` (slower, missed), and one that contains it a tie."""
    if high <= threshold:
        return below
    if low > threshold:
        return above
    return "within noise"


# --- Ratios and the table ----------------------------------------------------

def ratios(record):
    """The ratios of one benchmark's record: {column: (ratio, low, high, paired ratios) or None},
    with the peer each best-of column chose under column + ' peer', and Python/L."""
    pairs = record.get("pairs", {})

    def entry(p):
        if p not in pairs:
            return None
        low, high = pairs[p].get("ci") or interval(pairs[p]["ratios"])
        return pairs[p]["ratio"], low, high, pairs[p]["ratios"]

    r = {f"L/{p}": entry(p) for p in PEERS}
    for column, group in BESTS.items():
        present = [p for p in group if p in pairs]     # a best of fewer peers than its group is no best
        fastest = min(present, key=lambda p: record["languages"][p]["median"]) if present == list(group) else None
        r[column], r[column + " peer"] = (entry(fastest), fastest) if fastest else (None, None)
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


def fmt(x, width, digits, at_least=False):
    return f"{('>' if at_least else '') + format(x, f'.{digits}f'):>{width}}" if x else f"{'-':>{width}}"


def fmt_ratio(e, width=18):
    """'0.83 [0.79, 0.88]'"""
    return f"{e[0]:.2f} [{e[1]:.2f}, {e[2]:.2f}]".rjust(width) if e else "-".rjust(width)


TIME_COLUMNS = ("L", "C", "C-O3", "clang", "OCaml", "Chez")


def print_table(results, names):
    for line in machine.lines(results.get("machine", {})):
        print(line)
    for lang, compiler in results.get("compilers", {}).items():
        print(f"  {lang:7} {compiler['version']:46} built with: {compiler['build']}")
    startup = results.get("startup")
    if startup:
        print(f"start-up, an empty program (median of {startup['repeat']} runs, not subtracted below): "
              + ", ".join(f"{lang} {s['median'] * 1000:.1f} ms" for lang, s in startup["languages"].items()))

    print(f"\nseconds (median of the runs){'':8}" + "".join(f"{c:>8}" for c in TIME_COLUMNS) + f"{'Python':>9}")
    for name in names:
        rec = results["benchmarks"][name]
        langs, py = rec["languages"], rec.get("Python") or {}
        print(f"{name:12} {rec['size']:>11} " + " ".join(fmt(langs[c]['median'] if c in langs else None, 7, 3)
                                                       for c in TIME_COLUMNS)
              + f" {fmt(py.get('median') or py.get('timeout'), 8, 1, 'timeout' in py)}")

    rows = {name: ratios(results["benchmarks"][name]) for name in names}
    print(f"\nL/peer: median of the paired ratios [{LEVEL:.0%} bootstrap interval]; "
          "< 1: L took less time (faster: the whole interval below 1)")
    print(f"{'benchmark':12}" + "".join(f"{'L/' + p:>19}" for p in PEERS) + f"{'Python/L':>10}")
    for name, r in rows.items():
        print(f"{name:12}" + "".join(" " + fmt_ratio(r[f"L/{p}"]) for p in PEERS)
              + f" {fmt(r['Python/L'], 9, 1, r['Python/L at least'])}")
    print(f"{'geo. mean':12}" + "".join(" " + fmt_ratio(mean_entry(rows, f"L/{p}")) for p in PEERS)
          + f" {fmt(geometric_mean(r['Python/L'] for r in rows.values()), 9, 1)}")

    print(f"\nL/best: L over the faster of gcc -O2 and ocamlopt (the targets' peer); -O3: of gcc -O3 and ocamlopt;"
          f" clang: of clang -O2 and ocamlopt.\ntarget per benchmark: L/best <= {TARGET_EACH}, judged by the"
          f" interval (the noise rule: an interval that contains {TARGET_EACH} is 'within noise')")
    print(f"{'benchmark':12}" + "".join(f"{c:>19}{'peer':>6} {'<= ' + str(TARGET_EACH):>13}" for c in BESTS))
    verdicts = {c: {} for c in BESTS}
    for name, r in rows.items():
        cells = []
        for c in BESTS:
            e = r[c]
            v = verdict(e[1], e[2], TARGET_EACH) if e else "-"
            verdicts[c][name] = v
            cells.append(f" {fmt_ratio(e)}{(r[c + ' peer'] or '-'):>6} {v:>13}")
        print(f"{name:12}" + "".join(cells))
    means = {c: mean_entry(rows, c) for c in BESTS}
    print(f"{'geo. mean':12}" + "".join(
        f" {fmt_ratio(means[c])}{'':>6} {verdict(means[c][1], means[c][2], TARGET_MEAN) if means[c] else '-':>13}"
        for c in BESTS))
    for c in BESTS:
        m = means[c]
        if not m:
            continue
        counts = {v: [n for n, x in verdicts[c].items() if x == v] for v in ("met", "within noise", "missed")}
        print(f"target {c}: geometric mean <= {TARGET_MEAN}: {m[0]:.2f} [{m[1]:.2f}, {m[2]:.2f}], "
              f"{verdict(m[1], m[2], TARGET_MEAN)}; each <= {TARGET_EACH}: met on {len(counts['met'])}"
              f" of the {sum(v != '-' for v in verdicts[c].values())} measured"
              + (f", within noise on {', '.join(counts['within noise'])}" if counts["within noise"] else "")
              + (f", missed on {', '.join(counts['missed'])}" if counts["missed"] else ""))
    faster = {v: [n for n, r in rows.items() if r["L/best"] and verdict(r["L/best"][1], r["L/best"][2], 1,
                                                                           "faster", "slower") == v]
              for v in ("faster", "within noise", "slower")}
    print(f"L against the best of gcc -O2 and ocamlopt, by the same rule (threshold 1): faster on "
          f"{len(faster['faster'])}, within noise on {len(faster['within noise'])}, slower on "
          f"{len(faster['slower'])} ({', '.join(faster['slower']) or 'none'})")
    under = [f"{n} {r['Python/L']:.1f}" for n, r in rows.items()
             if r["Python/L"] and r["Python/L"] < TARGET_PYTHON and not r["Python/L at least"]]
    undecided = [f"{n} >{r['Python/L']:.1f}" for n, r in rows.items()
                 if r["Python/L"] and r["Python/L"] < TARGET_PYTHON and r["Python/L at least"]]
    measured = [n for n, r in rows.items() if r["Python/L"]]
    print(f"target: Python/L >= {TARGET_PYTHON} everywhere (one CPython run, no interval): "
          + ("missed by " + ", ".join(under) if under else f"met on the {len(measured) - len(undecided)} decided")
          + (f"; undecided on {', '.join(undecided)} (CPython stopped at its time limit, which is less than"
             f" {TARGET_PYTHON} times L's time there)" if undecided else ""))
    for name in results.get("scaling", {}):
        print(f"\n{name}: microseconds per unit of size (medians)")
        for size, rec in scaling(results, name):
            print(f"  {size:>9} " + "  ".join(f"{lang} {t:.2f}" for lang, t in rec.items()))


def mean_entry(rows, column):
    """(geometric mean, low, high, None) of a column's ratios, or None."""
    entries = [r[column] for r in rows.values() if r[column]]
    if not entries:
        return None
    low, high = mean_interval([e[3] for e in entries])
    return geometric_mean(e[0] for e in entries), low, high, None


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
    ap.add_argument("--python-timeout", type=float, default=60, metavar="S",
                    help="time limit of one CPython run (default 60 s); a run that reaches it counts as S")
    ap.add_argument("--json", metavar="FILE", default=None,
                    help="where to record the runs (default bench/results.json; --small writes nothing unless given)")
    ap.add_argument("--table", action="store_true", help="only print the table of the results stored in the JSON")
    args = ap.parse_args()
    repeat = 1 if args.small else args.repeat
    json_path = Path(args.json) if args.json else (None if args.small else RESULTS)

    results = {"benchmarks": {}, "scaling": {}}
    if json_path and json_path.exists():
        stored = json.loads(json_path.read_text())
        if "benchmarks" in stored:                 # not a file of the old format
            results = {**stored, "scaling": stored.get("scaling", {})}
    if args.table:
        print_table(results, [n for n in SIZES if n in results["benchmarks"]])
        return 0

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

    described = machine.describe()                 # before the runs: the load they start under
    names = args.only or list(SIZES)
    all_ok = True
    with tempfile.TemporaryDirectory() as tmpdir:
        startup, problems = measure_startup(Path(tmpdir) / "startup", languages, 1 if args.small else STARTUP_REPEAT)
        ran = " ".join(startup["languages"]) if startup else ""
        print(f"start-up: {'ok' if startup and not problems else 'FAILED'} {ran}", flush=True)
        for problem in problems:
            print("  " + problem.replace("\n", "\n  "))
        all_ok &= bool(startup) and not problems
        if startup and not args.small:
            results["startup"] = startup
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

    results["benchmarks"] = {n: results["benchmarks"][n] for n in SIZES if n in results["benchmarks"]}
    results["machine"] = {**described, "command": " ".join(["python", "bench/run.py", *sys.argv[1:]]),
                          "repeat": repeat}
    results["compilers"] = {lang: {"version": LANGUAGES[lang].version(), "build": LANGUAGES[lang].flags()}
                            for lang in languages}
    if not args.small:
        print()
        print_table(results, [n for n in SIZES if n in results["benchmarks"]])
    if json_path:
        json_path.write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
