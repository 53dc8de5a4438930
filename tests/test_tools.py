"""The records that tools/random_programs.py and tools/mutants.py write with --json, and bench/gc_share.py's.

Chapter 11 prints the long runs of the two scripts from bench/random_runs.json, through each script's
summary(record): these tests run each script briefly, as a reader would, and check that the record it
appends holds what the chapter reads, and that summary(record) is the very line the script printed last.
"""

import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))

import mutants  # noqa: E402
import random_programs  # noqa: E402
from machine import lines  # noqa: E402

FIELDS = {"command", "date", "seconds", "commit", "machine", "ways", "counts", "findings"}


def run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, f"tools/{script}", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def check(record: dict, script: str, args: list[str]) -> None:
    assert FIELDS <= record.keys(), record.keys()
    assert record["command"] == " ".join(["python", f"tools/{script}", *args])      # without --json, --out
    start = datetime.datetime.fromisoformat(record["date"])
    assert start.utcoffset() == datetime.timedelta(0)
    assert abs(datetime.datetime.now(datetime.timezone.utc) - start) < datetime.timedelta(minutes=10)
    assert 0 < record["seconds"] < 600
    assert record["commit"].removesuffix("+dirty") and " " not in record["commit"]
    assert record["machine"]["cores"] >= 1 and lines(record["machine"])[0].startswith("machine: ")
    assert record["findings"] == [] and sum(record["counts"].values()) > 0


@pytest.mark.slow
def test_each_script_appends_a_record_whose_summary_is_its_last_line(tmp_path):
    results = tmp_path / "runs.json"
    args = ["-n", "2", "--seed", "5", "--runaway", "0", "--ways", "interpreter", "jit"]
    out = run("random_programs.py", *args, "--json", str(results), "--out", str(tmp_path / "found"))
    [record] = json.loads(results.read_text())["runs"]
    check(record, "random_programs.py", args)
    assert record["programs"] == 2 and record["ways"] == ["interpreter", "jit"]
    assert sum(record["counts"].values()) == 2 and record["counts"]["findings"] == 0
    assert random_programs.summary(record) == out.splitlines()[-1]

    args = ["-n", "5", "--seed", "5"]
    out = run("mutants.py", *args, f"--json={results}")
    first, record = json.loads(results.read_text())["runs"]                     # appended, not replaced
    assert first["programs"] == 2
    check(record, "mutants.py", args)
    assert record["mutants"] == 5 and sum(record["counts"].values()) == 5
    assert mutants.summary(record) == out.splitlines()[-1]


def test_a_summary_names_the_folder_of_the_findings():
    record = {"programs": 3, "ways": ["interpreter", "jit"], "findings": ["/tmp/f/random-0001.l"],
              "counts": {"agree, status 0": 2, "agree, runtime error": 0, "agree, stack overflow": 0, "findings": 1}}
    assert random_programs.summary(record) == ("done: 3 programs run 2 ways (interpreter, jit); agree, status 0 2, "
                                               "agree, runtime error 0, agree, stack overflow 0, findings 1; "
                                               "findings saved in /tmp/f")
    record = {"mutants": 4, "counts": {"ran": 1, "rejected": 2, "findings": 1}, "findings": ["/tmp/m/mutant-0001.l"]}
    assert mutants.summary(record) == "done: 4 mutants; findings 1, ran 1, rejected 2; 1 kinds of finding saved in /tmp/m"


def test_the_command_line_leaves_out_where_things_were_written():
    argv = ["tools/random_programs.py", "-n", "3", "--json", "x.json", "--out=/tmp/o", "--seed", "5"]
    assert random_programs.command_line(argv) == "python tools/random_programs.py -n 3 --seed 5"


def test_a_mutant_warned_of_that_then_runs_is_no_finding():
    """A match that misses a case compiles with a warning, then runs: a mutant like that is classified
    as what it did, not as 'status 0 with something on stderr'; a stderr that is not only warnings is."""
    warning = "mutant.l:1:1: warning: the clauses of this function do not cover 1\n{0->()->2}\n^~~~~~~~~~\n"
    error = "mutant.l:2:3: runtime error: division by zero\nprint(1 / 0)\n  ^~~\n"
    outcome = random_programs.Outcome
    assert mutants.classify(outcome("", warning, 0)) == "ran"
    assert mutants.classify(outcome("", warning + error, 2)) == "runtime error"
    assert mutants.classify(outcome("1\n", warning, 0), outcome("1\n", warning, 0), outcome("1\n", warning, 0)) == "ran"
    assert mutants.classify(outcome("1\n", warning, 0), outcome("2\n", warning, 0)).startswith("finding: interpreted")
    assert mutants.classify(outcome("", warning + "more\n", 0)).startswith("finding: status 0")
    assert mutants.classify(outcome("", "", 0)) == "ran"


def test_gc_share_records_what_the_runtime_says_of_a_run(tmp_path):
    """bench/gc_share.py (chapter 12's collector shares) reads every figure of the runtime's LC_GC_STATS
    lines, from a real run of a program that collects, and keeps the run of median time."""
    import gc_share
    program = tmp_path / "lists.l"
    program.write_text("data List { Cons(Int, List); Nil }\n"
                       "def range(a, b) = if (a > b) Nil else Cons(a, range(a + 1, b))\n"
                       "def length(l) = match (l) { Nil -> 0; Cons(_, t) -> 1 + length(t) }\n"
                       "def loop(i, s) = if (i == 0) s else loop(i - 1, s + length(range(1, 10000)))\n"
                       "print(loop(300, 0))\n")
    exe = tmp_path / "lists"
    lc = Path(sys.executable).parent / "lc"
    subprocess.run([str(lc), "build", str(program), "-o", str(exe)], check=True, timeout=120)
    runs = [gc_share.run_once([str(exe)]) for _ in range(3)]
    for r in runs:
        assert r["minor"] > 0 and r["allocated_mb"] > 40 and r["nursery_mb"] >= 1 and r["seconds"] > 0, r
        assert 0 <= r["gc_seconds"] == pytest.approx(r["minor_seconds"] + r["major_seconds"], abs=0.002)
    median = gc_share.median_run(runs)
    assert median["seconds"] == sorted(r["seconds"] for r in runs)[1]
    assert median["share"] == pytest.approx(median["gc_seconds"] / median["seconds"], abs=1e-4)
    with pytest.raises(RuntimeError):
        gc_share.parse("3000000\n")
