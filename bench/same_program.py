"""L against a peer written as L must write the program (chapter 12).

    python bench/same_program.py [--repeat 5] [--json bench/same_program.json]

bench/run.py times each peer's natural version of a benchmark: where the
language has arrays, its program uses them. L has none, so on `interp` the
OCaml version updates an array of six variables in place and reads a
variable with one indexed load, while L's replaces a record of six numbers
at every assignment and reads a variable by matching on its number -- a
second jump through a table for every variable read. This script times L's
program, the peer's natural program, and the peer's program written as L's
is (bench/programs/NAME.record.EXT: the same record, the same matches), in
alternation as bench/run.py times them, at bench/run.py's sizes, and prints
the median ratios with their 95 % bootstrap intervals. What is left of the
gap against the second is the compiler's; what closes is the program's.
"""
import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

import run                                   # bench/run.py: building, alternation, intervals
from builds import start_record             # bench/builds.py: the machine and the command, recorded

# The benchmarks that have a variant, bench/programs/NAME.record.ml, of their peer's program: so far OCaml's
# interp, the peer L trails there.
PEER = "OCaml"
VARIANTS = ("interp",)


class AsL(run.OCaml):
    """OCaml's program written as L's must be: bench/programs/NAME.record.ml, built as OCaml's is."""

    def source(self, bench, size, tmp):
        first, rest = (run.PROGRAMS / (bench + self.ext)).read_text().split("\n", 1)
        assert first.startswith(self.prefix), f"{bench}{self.ext}: bad first line"
        path = tmp / f"{bench}_record.ml"          # an OCaml module name has no dot
        path.write_text(f"{self.prefix}{size}\n{rest}")
        return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args(argv)
    results = start_record("same_program.py", argv, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        peer, variant = PEER, f"{PEER}-as-L"
        for name in VARIANTS:
            languages = {"L": run.LANGUAGES["L"], peer: run.LANGUAGES[peer],
                         variant: AsL(variant, ".record.ml", run.LANGUAGES[peer].prefix, tool="ocamlopt")}
            size = run.SIZES[name][0]
            cmds = {lang: language.build(language.source(name, size, tmp), tmp) for lang, language in languages.items()}
            outputs = set()

            def check(lang, out):
                outputs.add(out)
                return None if len(outputs) == 1 else f"printed {out!r}, not what the others printed"
            times, _, paired, problem = run.alternate(cmds, [peer, variant], args.repeat, check)
            if problem:
                print(f"{name}: {problem}")
                return 1
            keys = (f"L/{peer}", f"L/{variant}")
            record = {"size": size, "date": datetime.datetime.now().isoformat(timespec="seconds"),
                      "peer": peer, "variant": f"bench/programs/{name}.record.ml",
                      "times": times, **{k: run.pair_record(paired[p], times[p]) for k, p in zip(keys, (peer, variant))}}
            results["benchmarks"][name] = record
            print(f"{'benchmark':10} {keys[0]:>20} {keys[1]:>20}")
            print(f"{name:10} " + " ".join(f"{record[k]['ratio']:6.2f} [{record[k]['ci'][0]:.2f}, {record[k]['ci'][1]:.2f}]"
                                             for k in keys), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
