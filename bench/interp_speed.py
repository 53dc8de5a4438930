"""The reference interpreter of chapter 4b, measured against its former self and the compiled code.

    python bench/interp_speed.py calls [--before REV] [--repeat 5]   # calls per second, before and after
    python bench/interp_speed.py heap [--before REV] [--limits 64M,default] [--timeout 60]

`calls`: chapter 4b's interpreter is the standard every compiled program is compared with, so the
tests run long loops through it; this measures how many L calls it makes per second. Each loop of
LOOPS is an L program whose number of calls is known in advance (its output is checked too). Each
run is a fresh Python process that translates the program, then times `Interpreter.run` in CPU
time (user + system, from `resource.getrusage`: the interpreter runs the program on a thread of
its own, and the system time — the kernel's work for the frames of a deep recursion — is part of
what a call costs). It also counts, deterministically, the Python function calls that one L call
costs: the profiler hook of `threading.setprofile` counts them while a smaller loop runs at two
sizes, and the difference divided by the difference in L calls is the cost of one more call.

`heap`: the program `grow.l` of GROW allocates without end. For each heap limit (a value of
LC_HEAP_LIMIT, or `default` for none), it runs `lc run --interp grow.l` and the executable that
`lc build grow.l` makes, in alternation, and records the CPU time (user + system) and the peak
resident memory of the child, its exit status and the last line of its standard error. The
interpreter of REV, which had no heap limit, is run too, under the first limit, and stopped after
--timeout seconds.

"before" is the interpreter of commit REV (by default BEFORE, the last commit before the calls
were made faster and the heap limited), extracted with `git archive` into a temporary folder and
imported from there; "after" is the package of this working tree. Before and after are run in
alternation, so that the load of a shared machine falls on both; a ratio is the median of the
per-pair ratios. Each command writes its figures, with the machine and both commits, under its
own key of bench/interp_speed.json, which chapter 4b reads.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "interp_speed.json"
BEFORE = "9c31afb6c9b953682c96318a5c39829e1cb59719"     # the interpreter before this change


# Each loop: its program (with {n}), the number of L calls it makes, what it prints, and n.
LOOPS = {
    "tail calls": (
        "def count(i, n) = if (i == n) i else count(i + 1, n)\n"
        "print(count(0, {n}))\n",
        lambda n: n + 1, lambda n: f"{n}\n", 1_000_000),
    "non-tail recursion, 10,000 deep": (
        "def sum(n) = if (n == 0) 0 else n + sum(n - 1)\n"
        "def repeat(k, total) = if (k == 0) total else repeat(k - 1, total + sum(10000))\n"
        "print(repeat({n}, 0))\n",
        lambda n: n * 10001 + n + 1, lambda n: f"{n * 50005000}\n", 30),
    "tree recursion (fib)": (
        "def fib(n) = if (n < 2) n else fib(n - 1) + fib(n - 2)\n"
        "print(fib({n}))\n",
        lambda n: 2 * fib(n + 1) - 1, lambda n: f"{fib(n)}\n", 25),
    "calls through closures": (
        "def twice(f, x) = f(f(x))\n"
        "def loop(i, acc) = if (i == 0) acc else loop(i - 1, twice({{ y -> y + i }}, acc))\n"
        "print(loop({n}, 0))\n",
        lambda n: 4 * n + 1, lambda n: f"{n * (n + 1)}\n", 250_000),
}

# the sizes at which the Python calls are counted (the profiler hook slows everything down)
COUNT_SIZES = {"tail calls": (1000, 2000), "non-tail recursion, 10,000 deep": (1, 2),
               "tree recursion (fib)": (12, 14), "calls through closures": (500, 1000)}

GROW = """\
data List<a> { Cons(a, List<a>); Nil }
def grow(acc) = grow(Cons(1, acc))
print("growing")
print(grow(Nil))
"""


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = a + b, a
    return a


CHILD = """
import io, json, resource, sys, threading
from lcompiler.errors import Source
from lcompiler.interp import Interpreter, check
text, count = sys.argv[1], sys.argv[2] == "count"
program = check(Source("loop.l", text))
out, calls = io.StringIO(), [0]

def hook(frame, event, arg):
    if event == "call":
        calls[0] += 1

if count:
    threading.setprofile(hook)          # the program runs on a thread of its own
before = resource.getrusage(resource.RUSAGE_SELF)
Interpreter(out).run(program)
after = resource.getrusage(resource.RUSAGE_SELF)
threading.setprofile(None)
cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
print(json.dumps({"cpu": cpu, "output": out.getvalue(), "python_calls": calls[0]}))
"""

LC = "import sys\nfrom lcompiler.cli import main\nsys.exit(main())\n"     # lc, from the tree on PYTHONPATH


def child(tree: Path, text: str, count: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, "-c", CHILD, text, "count" if count else "time"],
                          capture_output=True, text=True, env=env, cwd=tree)
    if done.returncode:
        raise RuntimeError(f"the loop failed under {tree}:\n{done.stderr}")
    return json.loads(done.stdout)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def extract(commit: str, into: Path) -> Path:
    """The package lcompiler as it was at commit, in into/."""
    archive = subprocess.run(["git", "archive", commit, "lcompiler"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def python_calls_per_call(tree: Path, name: str) -> float:
    text, calls, _, _ = LOOPS[name]
    small, large = COUNT_SIZES[name]
    counted = [child(tree, text.format(n=n), count=True)["python_calls"] for n in (small, large)]
    return (counted[1] - counted[0]) / (calls(large) - calls(small))


def header(argv, commit: str) -> dict:
    from machine import describe        # bench/machine.py
    return {
        # bench/machine.py's record of the machine (CPU, caches, OS, load, compilers), as the measurement
        # starts, and the Python that runs both interpreters
        "machine": {**describe(), "python": platform.python_version()},
        "command": " ".join(["python", "bench/interp_speed.py", *argv]),
        "before": {"commit": commit, "subject": git("log", "-1", "--format=%s", commit)},
        "after": {"commit": git("rev-parse", "HEAD"),
                  "changed since": git("status", "--porcelain", "--", "lcompiler").splitlines()},
    }


def measure_calls(args, commit: str, trees: dict) -> dict:
    results = {"repeat": args.repeat, "loops": {}}
    print(f"{'loop':34} {'L calls':>10} {'before /s':>11} {'after /s':>11} {'after/before':>12}"
          f" {'Python calls per L call':>24}")
    for name, (text, calls, expected, n) in LOOPS.items():
        program, seconds = text.format(n=n), {side: [] for side in trees}
        for _ in range(args.repeat):
            for side, tree in trees.items():
                run = child(tree, program)
                if run["output"] != expected(n):
                    raise RuntimeError(f"{name} printed {run['output']!r} {side}, not {expected(n)!r}")
                seconds[side].append(run["cpu"])
        ratios = [b / a for b, a in zip(seconds["before"], seconds["after"])]
        per_call = {side: python_calls_per_call(tree, name) for side, tree in trees.items()}
        record = {"program": program, "calls": calls(n)}
        for side in trees:
            record[side] = {"seconds": seconds[side], "median seconds": statistics.median(seconds[side]),
                            "calls per second": calls(n) / statistics.median(seconds[side]),
                            "python calls per call": per_call[side]}
        record["after/before"] = {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)}
        results["loops"][name] = record
        print(f"{name:34} {calls(n):>10,} {record['before']['calls per second']:>11,.0f}"
              f" {record['after']['calls per second']:>11,.0f} {statistics.median(ratios):>12.2f}"
              f" {per_call['before']:>11.1f} -> {per_call['after']:<11.1f}", flush=True)
    return results


def run_child(command: list, env: dict, cwd: Path, timeout: float | None = None) -> dict:
    """Run command; its CPU seconds, peak resident memory, exit status and last line of stderr
    (it is killed after timeout seconds, if given)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd)
        stopped = False
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if timeout is not None and time.perf_counter() - start > timeout:
                process.kill()
                stopped = True
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.02)
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": time.perf_counter() - start,
            "peak_mb": usage.ru_maxrss / 1024, "status": None if stopped else process.returncode,
            "stopped after": timeout if stopped else None, "stderr": lines[-1] if lines else ""}


def measure_heap(args, commit: str, trees: dict) -> dict:
    results = {"program": GROW, "limits": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "grow.l").write_text(GROW)
        build = subprocess.run([sys.executable, "-c", LC, "build", "grow.l", "-o", "grow"], cwd=tmp,
                               env={**os.environ, "PYTHONPATH": str(trees["after"])}, capture_output=True, text=True)
        if build.returncode:
            raise RuntimeError(build.stderr)
        for i, limit in enumerate(args.limits.split(",")):
            env = {k: v for k, v in os.environ.items() if k != "LC_HEAP_LIMIT"}
            if limit != "default":
                env["LC_HEAP_LIMIT"] = limit
            interpreted = {**env, "PYTHONPATH": str(trees["after"])}
            runs = {"interpreted": [], "compiled": []}
            for _ in range(args.repeat):
                runs["interpreted"].append(run_child([sys.executable, "-c", LC, "run", "--interp", "grow.l"],
                                                     interpreted, tmp))
                runs["compiled"].append(run_child([str(tmp / "grow")], env, tmp))
            record = {side: {"runs": rs, "median cpu": statistics.median(r["cpu"] for r in rs),
                             "median peak_mb": statistics.median(r["peak_mb"] for r in rs)}
                      for side, rs in runs.items()}
            if i == 0:
                old = {**env, "PYTHONPATH": str(trees["before"])}
                record["interpreted before"] = {"runs": [run_child(
                    [sys.executable, "-c", LC, "run", "--interp", "grow.l"], old, tmp, timeout=args.timeout)]}
            results["limits"][limit] = record
            for side, r in record.items():
                last = r["runs"][-1]
                print(f"{limit:>8} {side:19} cpu {statistics.median(x['cpu'] for x in r['runs']):7.2f} s  "
                      f"peak {statistics.median(x['peak_mb'] for x in r['runs']):7.0f} MB  "
                      f"status {last['status']}  {last['stderr'][:60]}", flush=True)
    return results


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["calls", "heap"])
    ap.add_argument("--before", metavar="REV", default=BEFORE, help="the commit to compare with")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--limits", default="64M,default", help="heap: the values of LC_HEAP_LIMIT to try")
    ap.add_argument("--timeout", type=float, default=60, help="heap: seconds before the old interpreter is stopped")
    ap.add_argument("--json", metavar="FILE", default=str(RESULTS), help="where to write the figures")
    args = ap.parse_args(argv)
    commit = git("rev-parse", args.before)
    results = header(argv, commit)
    print(f"before: {commit[:12]}   after: {results['after']['commit'][:12]}"
          + (" (with uncommitted changes)" if results["after"]["changed since"] else ""))
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": extract(commit, Path(tmp)), "after": ROOT}
        results.update((measure_calls if args.command == "calls" else measure_heap)(args, commit, trees))
    path = Path(args.json)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[args.command] = results
    path.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
