"""Random well-typed L programs, run every way L can run; any disagreement is a finding.

    python tools/random_programs.py [-n 2000] [--seed 1] [--out DIR] [--timeout 60]
    python tools/random_programs.py --exceptions [-n 300]      # raise and try (issue 25): five ways

Each program comes from the generator of tests/test_convert.py (every construct of the contract:
nested patterns on user data types, polymorphic helpers at several types, vars captured by closures,
mutual recursion, non-tail recursion thousands of calls deep, every kind of runtime error on purpose, and
now and then a recursion that never ends). Each is run by `lc` in each way of WAYS — the reference
interpreter, the JIT, a native executable, the JIT without chapter 9's optimiser — and what each way
writes on stdout, writes on stderr, and its exit status must be the same, and a status the contract
allows for a well-typed program: 0, or 2 with a located runtime error (the compiler's warnings may come
first on stderr; an executable's are those `lc build` wrote). Every program that breaks this is a
finding: it is minimised (its lines, then its tokens, removed while the same ways still disagree in the
same way) and saved in the output folder with what each way did. The script prints the counts as it
goes and at the end.

With --exceptions the programs also raise (directly, or from a recursion of random depth) and catch,
with handlers that do and do not match, and go a fifth way by default: the JIT with exceptions lowered to
trap frames (`LC_EXCEPTIONS=traps`, chapter 10) instead of the flag.

With --json FILE, the run is also recorded: at the end, one record is appended to the list "runs" of
the JSON object in FILE (created if absent; written to a temporary file, then renamed): the command
line as typed (without --json and --out), the date and time it started (UTC), the seconds the whole run
took, the compiler's commit (`git rev-parse --short HEAD`, "+dirty" if lcompiler/ has changes), the
machine (bench/machine.py's describe()), the ways, the counts and the findings (the minimised files).
summary(record) is the last line the script prints; chapter 11 prints it from bench/random_runs.json:

    python tools/random_programs.py -n 1000 --seed 5 --json bench/random_runs.json

Long runs compete with other work: run them with `nice -n 10`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from lcompiler import cli, support  # noqa: E402


@dataclass(frozen=True)
class Way:
    """One way to run a program: the arguments of `lc` before the file (`run …`), or, with executable,
    of `lc build` after `-o EXE`, whose executable is then run; env, variables set for `lc`."""
    args: tuple
    executable: bool = False
    env: tuple = ()


WAYS = {
    "interpreter": Way(("run", "--interp")),
    "jit": Way(("run",)),
    "executable": Way(("build",), executable=True),
    "jit -O0": Way(("run", "-O0")),             # without the optimiser of chapter 9
    "jit traps": Way(("run",), env=(("LC_EXCEPTIONS", "traps"),)),    # exceptions lowered to trap frames
}
EXCEPTIONS_ONLY = {"jit traps"}         # a way that differs from another only for programs that raise


@dataclass(frozen=True)
class Outcome:
    stdout: str
    stderr: str
    status: int          # -N: killed by signal N; None-like TIMEOUT below: ran out of time

    def short(self) -> str:
        return f"status {self.status}, {len(self.stdout)} bytes out, stderr {self.stderr[:300]!r}"


TIMEOUT = -1000


def lc_in_child(argv: list[str], timeout: float, cwd: Path, env: tuple = ()) -> Outcome:
    """Run `lc ARGV` as cli.main in a forked child (no interpreter start-up; appendix B's run_in_child),
    its output captured; an exception of lc itself is a traceback on stderr and status 99."""
    def main() -> int:
        try:
            os.chdir(cwd)
            os.environ.update(env)
            status = cli.main(list(argv))
            sys.stdout.flush()
            return status if isinstance(status, int) else 99
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            return 99

    r = support.run_in_child(main, timeout)
    if r.stderr.endswith(f"stopped: the program ran longer than {timeout:g} s\n"):
        return Outcome("", "", TIMEOUT)
    return Outcome(r.stdout, r.stderr, r.status)


def run_way(way: Way, path: Path, timeout: float) -> Outcome:
    if not way.executable:
        return lc_in_child([*way.args, path.name], timeout, path.parent, way.env)
    exe = path.with_suffix(".exe")
    built = lc_in_child(["build", path.name, "-o", exe.name, *way.args[1:]], timeout, path.parent, way.env)
    if built.status != 0:
        return built
    try:
        done = subprocess.run([str(exe)], capture_output=True, timeout=timeout, cwd=path.parent)
    except subprocess.TimeoutExpired:
        return Outcome("", "", TIMEOUT)
    finally:
        exe.unlink(missing_ok=True)
    # what `lc build` warned of (chapter 4b's warnings) comes first, as `lc run` writes it before running
    return Outcome(done.stdout.decode(errors="replace"), built.stderr + done.stderr.decode(errors="replace"),
                   done.returncode)


RUNTIME_ERROR = re.compile(r"^random\.l:\d+:\d+: runtime error: .+\n.*\n[ \t]*\^~*\n\Z")
WARNING = re.compile(r"^random\.l:\d+:\d+: warning: .+\n.*\n[ \t]*\^~*\n", re.M)


def unwarned(stderr: str) -> str:
    """stderr without the compiler's warnings (a clause list that does not cover every constructor
    is well typed, and warned of: at compile time, before the program runs)."""
    return WARNING.sub("", stderr)


def problems(outcomes: dict) -> tuple:
    """What is wrong with the outcomes of one well-typed program: () if nothing. The signature of a
    finding, kept while it is minimised."""
    found = []
    reference = next(iter(outcomes.values()))
    for name, o in outcomes.items():
        if o != reference:
            what = [part for part in ("stdout", "stderr", "status") if getattr(o, part) != getattr(reference, part)]
            found.append(f"{name} differs ({', '.join(what)})")
        if o.status == TIMEOUT:
            found.append(f"{name} timed out")
        elif o.status == 0 and unwarned(o.stderr) or o.status == 2 and not RUNTIME_ERROR.match(unwarned(o.stderr)) \
                or o.status not in (0, 2):
            found.append(f"{name}: status {o.status} against the contract")
    return tuple(found)


def run_all(text: str, folder: Path, timeout: float) -> dict:
    path = folder / "random.l"
    path.write_text(text, encoding="utf-8")
    return {name: run_way(way, path, timeout) for name, way in WAYS.items()}


# --- minimising -------------------------------------------------------------------------------

TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*\??|[0-9]+|:=|->|==|!=|<=|>=|&&|\|\||\s+|.')


def ddmin(chunks: list[str], interesting) -> list[str]:
    """Zeller's delta debugging: a smaller list of chunks, still interesting when joined."""
    n = 2
    while len(chunks) >= 2:
        size = max(1, len(chunks) // n)
        for start in range(0, len(chunks), size):
            rest = chunks[:start] + chunks[start + size:]
            if rest and interesting(rest):
                chunks, n = rest, max(n - 1, 2)
                break
        else:
            if size == 1:
                break
            n = min(len(chunks), n * 2)
    return chunks


def minimise(text: str, interesting, budget: float = 600) -> str:
    """Remove lines, then tokens, while interesting(text) stays true (within budget seconds)."""
    deadline = time.monotonic() + budget
    tries = lambda chunks: time.monotonic() < deadline and interesting("".join(chunks))
    lines = ddmin(text.splitlines(keepends=True), tries)
    tokens = ddmin(TOKEN.findall("".join(lines)), tries)
    return "".join(tokens)


def save(folder: Path, number: int, kind: str, text: str, signature, outcomes: dict, original: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kind}-{number:04}.l"
    path.write_text(text, encoding="utf-8")
    report = [f"finding {number}: {'; '.join(signature)}", ""]
    for name, o in outcomes.items():
        report += [f"--- {name}: exit status {o.status}", "stdout:", o.stdout, "stderr:", o.stderr]
    report += ["--- the program before minimising", original]
    path.with_suffix(".txt").write_text("\n".join(report), encoding="utf-8")
    return path


# --- the record of a run (--json) ----------------------------------------------------------------

def command_line(argv: list[str]) -> str:
    """The command as typed, without --json FILE and --out DIR (where things were written, not what ran)."""
    kept, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in ("--json", "--out"):
            skip = True
        elif not arg.startswith(("--json=", "--out=")):
            kept.append(arg)
    return shlex.join(["python", argv[0], *kept])


def compiler_commit() -> str:
    """The commit of the repository, with "+dirty" if lcompiler/ differs from it."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "?"
    return commit + ("+dirty" if git("status", "--porcelain", "--", "lcompiler") else "")


def start_record(argv: list[str]) -> dict:
    """The fields of a run's record known at its start (the machine as it is then: its load average)."""
    from machine import describe
    return {"command": command_line(argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": compiler_commit(), "machine": describe()}


def append_record(path: Path, record: dict) -> None:
    """Append record to the list "runs" of the JSON object in path, atomically (a temporary file renamed)."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    data.setdefault("runs", []).append(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def summary(record: dict) -> str:
    """The last line of a run: what the record holds, as the script printed it."""
    ways = record["ways"]
    return (f"done: {record['programs']} programs run {len(ways)} ways ({', '.join(ways)}); "
            + ", ".join(f"{k} {v}" for k, v in record["counts"].items())
            + (f"; findings saved in {Path(record['findings'][0]).parent}" if record["findings"] else ""))


# --- the run ------------------------------------------------------------------------------------

def generate(count: int, seed: int, runaway: int, exceptions: bool = False):
    """count program texts from the test generator, reproducibly for a seed."""
    from hypothesis import HealthCheck, Phase, given, settings, seed as hseed
    from test_convert import programs
    texts = []

    @hseed(seed)
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs(runaway=runaway, exceptions=exceptions))
    def collect(text):
        texts.append(text)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collect()
    return texts[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="how many programs (default 2000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runaway", type=int, default=12,
                        help="the larger, the fewer programs start a recursion that never ends (12: about one in 25; 0: none)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per way and program")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "lc-random-findings")
    parser.add_argument("--minimise-budget", type=float, default=600, help="seconds per finding")
    parser.add_argument("--exceptions", action="store_true", help="programs that raise and catch exceptions")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="append a record of the run to the list \"runs\" in FILE (e.g. bench/random_runs.json)")
    parser.add_argument("--ways", nargs="+", choices=list(WAYS),
                        help="the ways to run each program (default: all; without --exceptions, all but "
                             + ", ".join(sorted(EXCEPTIONS_ONLY)) + ")")
    args = parser.parse_args()
    if args.ways is None:
        args.ways = [name for name in WAYS if args.exceptions or name not in EXCEPTIONS_ONLY]
    for name in [name for name in WAYS if name not in args.ways]:
        del WAYS[name]

    record = start_record(sys.argv) if args.json else {}
    start = time.monotonic()
    texts = generate(args.n, args.seed, args.runaway, args.exceptions)
    print(f"{len(texts)} programs generated (seed {args.seed}) in {time.monotonic() - start:.0f} s; "
          f"ways: {', '.join(WAYS)}", flush=True)
    counts = {"agree, status 0": 0, "agree, runtime error": 0, "agree, stack overflow": 0, "findings": 0}
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i, text in enumerate(texts, 1):
            outcomes = run_all(text, work, args.timeout)
            signature = problems(outcomes)
            if signature:
                counts["findings"] += 1
                print(f"program {i}: FINDING: {'; '.join(signature)}", flush=True)
                small = minimise(text, lambda t, signature=signature: problems(run_all(t, work, args.timeout)) == signature,
                                 args.minimise_budget)
                saved = save(args.out, counts["findings"], "random", small, signature,
                             run_all(small, work, args.timeout), text)
                findings.append(str(saved))
                print(f"  minimised to {len(small.splitlines())} lines: {saved}", flush=True)
            else:
                o = next(iter(outcomes.values()))
                key = "agree, status 0" if o.status == 0 else \
                    "agree, stack overflow" if "stack overflow" in o.stderr else "agree, runtime error"
                counts[key] += 1
            if i % 50 == 0 or i == len(texts):
                print(f"{i} programs, {time.monotonic() - start:.0f} s: "
                      + ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
    record.update(programs=len(texts), ways=list(WAYS), counts=counts, findings=findings)
    record["seconds"] = round(time.monotonic() - start, 1)
    if args.json:
        append_record(args.json, record)
    print(summary(record), flush=True)
    return 1 if counts["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
