"""The start-up of every language, measured apart from the benchmarks, with the machine.

    python bench/startup.py [--repeat 21] [--json FILE]

An empty program (one that prints 0) in L, C (gcc -O2), OCaml, Chez Scheme and CPython, built
as bench/run.py builds the benchmarks and timed in the same alternation with L's, by
bench/run.py's own `measure_startup`. `bench/run.py` records the same measurement in
results.json (under "startup") when it measures the benchmarks, and chapter 12 reads it
there; this script measures it alone, to look at start-up without timing every benchmark.
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import machine  # noqa: E402  (bench/machine.py)
import run  # noqa: E402  (bench/run.py)

LANGUAGES = ["L", "C", "OCaml", "Chez", "Python"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=run.STARTUP_REPEAT, help="runs of each, alternated with L's")
    ap.add_argument("--json", metavar="FILE", default=None, help="where to record the runs")
    args = ap.parse_args()
    languages = [lang for lang in LANGUAGES if run.LANGUAGES[lang].available()]
    described = machine.describe()
    with tempfile.TemporaryDirectory() as tmp:
        startup, problems = run.measure_startup(Path(tmp) / "startup", languages, args.repeat)
    for problem in problems:
        print(problem)
    if not startup:
        return 1
    for lang, record in startup["languages"].items():
        print(f"{lang:7} an empty program: median {record['median'] * 1000:6.1f} ms"
              f" (min {record['min'] * 1000:6.1f}, max {record['max'] * 1000:6.1f})")
    if args.json:
        startup["machine"] = {**described, "command": " ".join(["python", "bench/startup.py", *sys.argv[1:]])}
        Path(args.json).write_text(json.dumps(startup, indent=1) + "\n")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
