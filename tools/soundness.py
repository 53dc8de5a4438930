"""A long run of the soundness oracle: random programs near the value restriction, judged by OCaml.

    python tools/soundness.py [--programs 2000] [--seed 1] [--no-compiled] [--bug] [--json FILE]

The programs come from tests/soundness.py (weak definitions such as `make_cell()` and `id(Nil)`,
definitions that read them, mutually recursive readers, local polymorphic and local weak `let`s,
`var`s captured by closures, data types with two and three parameters, partial applications, and
statements that use each at types chosen per use). For each program: L's type checker; OCaml's on
the translation (ocamlc); for a program L accepts, the reference interpreter, the compiled code
(`lc run`'s compiler, the code run in a child process) and the OCaml program, whose outputs must be
the same. A finding is a program L accepts and OCaml rejects, a compiled program that stops with
a status other than 0 (an internal compiler error included), or outputs that differ; each is
minimised and saved with what the judges said. OCaml accepts more than L (its value restriction is
the relaxed one, and its `=` is polymorphic where L's `==` defaults to Int): those programs are
counted, not findings.

`--bug` puts chapter 5's bug of issue 23 back (a component that is not generalised keeps its
unknowns one level too deep) to show what the oracle finds when the type checker is wrong.
`--json FILE` records the figures and the machine, beside the other kind of run's (tests/soundness.json
holds the figures that chapter 5 prints). Long runs compete with other work: run them
with `nice -n 10`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from random_programs import minimise  # noqa: E402
from soundness import generate, judge, ocaml_available  # noqa: E402


FIGURES = ("programs", "accepted by L", "accepted by OCaml", "accepted by both", "accepted by L only",
           "accepted by OCaml only", "run compiled", "compiled: status not 0", "compiled: crash (killed by a signal)",
           "outputs that differ", "programs with findings")


def kind(finding: str) -> str:
    """A finding's kind, for counting and for keeping the same finding while minimising."""
    return finding.split(":")[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-compiled", action="store_true", help="do not compile and run (types and OCaml only)")
    ap.add_argument("--bug", action="store_true", help="put back the bug of issue 23 (levels not lowered)")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "lc-soundness-findings")
    ap.add_argument("--minimise", type=int, default=10, help="minimise the first N findings (default 10)")
    ap.add_argument("--minimise-budget", type=float, default=120, help="seconds per finding")
    ap.add_argument("--json", type=Path, default=None, help="record the figures and the machine here")
    args = ap.parse_args(argv)
    if not ocaml_available():
        print("ocamlc is not installed (apt-get install ocaml-nox): no independent type checker", file=sys.stderr)
        return 2
    if args.bug:
        from lcompiler.types import Inference
        Inference.lower = lambda self, t: None
    sys.setrecursionlimit(100_000)
    start = time.monotonic()
    texts = generate(args.programs, args.seed)
    print(f"{len(texts)} programs generated ({len(set(texts))} distinct, seed {args.seed}) in "
          f"{time.monotonic() - start:.0f} s{'; with the bug of the first edition put back' if args.bug else ''}", flush=True)
    counts = Counter()
    kinds = Counter()
    compiled = not args.no_compiled
    for i, text in enumerate(texts, 1):
        verdict = judge(text, compiled=compiled)
        if verdict.ocaml is None:
            print(f"program {i}: the tool failed: {verdict.untranslatable or verdict.l_error}\n{text}")
            return 2
        counts["programs"] += 1
        counts["accepted by L"] += verdict.l_accepts
        counts["accepted by OCaml"] += verdict.ocaml.accepted
        counts["accepted by both"] += verdict.l_accepts and verdict.ocaml.accepted
        counts["accepted by OCaml only"] += verdict.ocaml.accepted and not verdict.l_accepts
        counts["accepted by L only"] += verdict.l_accepts and not verdict.ocaml.accepted
        counts["run compiled"] += verdict.compiled is not None
        counts["compiled: status not 0"] += verdict.compiled is not None and verdict.compiled[2] != 0
        counts["compiled: crash (killed by a signal)"] += verdict.compiled is not None and verdict.compiled[2] < 0
        counts["outputs that differ"] += any("differ" in f for f in verdict.findings)
        if verdict.findings:
            counts["programs with findings"] += 1
            kinds.update(set(map(kind, verdict.findings)))
            signature = sorted(set(map(kind, verdict.findings)))
            print(f"program {i}: FINDING: {'; '.join(verdict.findings)}", flush=True)
            small, minimised = text, counts["programs with findings"] <= args.minimise
            if minimised:
                small = minimise(text, lambda t, signature=signature: sorted(set(map(kind, judge(t, compiled=compiled, timeout=10)
                                                                 .findings))) == signature, args.minimise_budget)
            args.out.mkdir(parents=True, exist_ok=True)
            path = args.out / f"finding-{counts['programs with findings']:04}.l"
            path.write_text(small, encoding="utf-8")
            path.with_suffix(".txt").write_text("\n".join(judge(small, compiled=compiled).findings)
                                                + ("\n\n--- before minimising\n" + text if minimised else ""),
                                                encoding="utf-8")
            print(f"  {'minimised to' if minimised else 'not minimised (--minimise),'} "
                  f"{len(small.splitlines())} lines: {path}", flush=True)
        if i % 100 == 0 or i == len(texts):
            print(f"{i} programs, {time.monotonic() - start:.0f} s: "
                  + ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
    print("\nfigures:")
    for k in FIGURES:
        print(f"  {k:38} {counts[k]:6}")
    for k, v in sorted(kinds.items()):
        print(f"  finding: {k:29} {v:6}")
    if args.json is not None:               # one record per kind of run, kept beside the others
        record = {"command": "python tools/soundness.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "distinct": len(set(texts)), "compiled": compiled,
                  "figures": {k: counts[k] for k in FIGURES}, "findings by kind": dict(kinds),
                  "seconds": round(time.monotonic() - start),
                  "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "system": platform.platform(),
                              "date": datetime.datetime.now().isoformat(timespec="seconds")}}
        runs = json.loads(args.json.read_text()) if args.json.exists() else {}
        runs["with the bug of the first edition put back" if args.bug else "as it is"] = record
        args.json.write_text(json.dumps(runs, indent=1) + "\n")
    return 1 if counts["programs with findings"] and not args.bug else 0


def cpu_model() -> str:
    sys.path.insert(0, str(ROOT / "bench"))
    from run import cpu_model as model
    return model()


if __name__ == "__main__":
    sys.exit(main())
