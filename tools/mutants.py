"""Mutated L programs, each outcome classified against the contract; what breaks it is a finding.

    python tools/mutants.py [-n 20000] [--seed 1] [--timeout 10] [--out DIR]

Each mutant is a program of the corpus (tests/corpus/) or of examples/ with one to four mutations: a
byte inserted, deleted or replaced (any byte, or one of the characters that structure L), or a token
deleted, doubled, swapped with the next, or replaced by another token of the program or of L. Each
mutant is run with `lc run` (compiled, through the JIT) and classified:

- rejected: exit status 1, nothing on stdout, and stderr made only of located errors —
  `FILE:LINE:COL: error: …` (or `note`), the source line, a caret;
- ran: exit status 0, nothing on stderr but the compiler's warnings, each located, before the
  program runs (a match that misses a case is legal L, and warned of: chapter 5);
- runtime error: exit status 2, stderr ending in one `FILE:LINE:COL: runtime error: …`;
- timeout: still running after --timeout seconds (a mutant may loop for ever: allowed);

and a mutant that ran, or stopped with a runtime error, runs again without the optimiser of chapter 9
(`lc run -O0`) and under the reference interpreter (`lc run --interp`), which must each write the same
stdout and stderr and end with the same status. Anything else — exit status 3 (an internal compiler
error), a signal, a Python traceback, an error without a location, a message not in the contract's form,
a disagreement between the three runs — is a finding, minimised (lines, then tokens, removed while it is
the same finding) and saved with what happened.

One disagreement is not a finding but a documented difference (the language reference, "How deep may
non-tail calls nest?"): a recursion too deep for the interpreter's stack, which LLVM compiled into a loop —
one that may even end, with the answer an unbounded stack would give (`1 + f(n - 11)` from 10,000 reaches
0 after about 3·10¹⁸ calls, in 64-bit arithmetic). It is counted apart.

The programs run with LC_HEAP_LIMIT=256M, which the compiled code and the reference interpreter both
honour with the same message (`FILE: runtime error: out of memory: the heap reached its limit …`, without
a line: neither knows where the program was), and under a 4 GiB address-space limit as a safety net, so
that a mutant that allocates without end stops soon; such a mutant is classified as "out of memory"
rather than compared, since where each way stops depends on how much it keeps alive. Long runs compete
with other work: run them with `nice -n 10`.

With --json FILE, the run is also recorded, as tools/random_programs.py records its runs: one record
appended to the list "runs" of the JSON object in FILE (created if absent, written atomically) with the
command line as typed (without --json and --out), the date and time it started (UTC), the seconds the
whole run took, the compiler's commit ("+dirty" if lcompiler/ has changes), the machine (bench/machine.py's
describe()), the ways each mutant may run, the counts of each class and the findings (the minimised
files). summary(record) is the last line the script prints; chapter 11 prints it from
bench/random_runs.json:

    python tools/mutants.py -n 10000 --seed 5 --json bench/random_runs.json
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from random_programs import TIMEOUT, TOKEN, append_record, lc_in_child, minimise, start_record  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "tests" / "corpus").glob("*/*.l")) + sorted((ROOT / "examples").glob("*.l"))
STRUCTURE = list(b"(){};\n\"-+.,=<>|&!:_ ")
VOCABULARY = ["def", "data", "let", "var", "if", "else", "match", "while", "print", "assert", "true", "false",
              "x", "f", "Cons", "Nil", "_", "0", "1", "-1", "9223372036854775807", '"s"', "()", "(", ")", "{", "}",
              ",", ";", "\n", ".", "->", ":=", "=", "==", "!=", "<", ">", "+", "-", "*", "/", "%", "&&", "||", "!"]

LOCATED = re.compile(r"^mutant\.l:\d+:\d+: (error|note|runtime error|warning): .+$")
CARET = re.compile(r"^[ \t]*\^~*$")


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four mutations of bytes or of tokens."""
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            data = bytearray(data)
            at = rng.randint(0, len(data))
            byte = rng.choice(STRUCTURE) if rng.random() < 0.6 else rng.randint(0, 255)
            kind = rng.choice(["insert", "delete", "replace"])
            if kind == "insert":
                data.insert(at, byte)
            elif at < len(data):
                if kind == "delete":
                    del data[at]
                else:
                    data[at] = byte
            data = bytes(data)
        else:
            tokens = TOKEN.findall(data.decode("utf-8", errors="replace"))
            words = [i for i, t in enumerate(tokens) if not t.isspace()]
            if not words:
                continue
            i = rng.choice(words)
            kind = rng.choice(["delete", "double", "swap", "replace", "replace"])
            if kind == "delete":
                del tokens[i]
            elif kind == "double":
                tokens.insert(i, tokens[i])
            elif kind == "swap":
                later = [j for j in words if j > i]
                if later:
                    j = later[0]
                    tokens[i], tokens[j] = tokens[j], tokens[i]
            else:
                tokens[i] = rng.choice(VOCABULARY + [tokens[j] for j in words])
            data = "".join(tokens).encode()
    return data


def blocks_ok(stderr: str, kinds: tuple) -> bool:
    """Is stderr made only of located messages of these kinds, each with its line and caret?"""
    lines = stderr.split("\n")
    if lines[-1] != "" or len(lines) < 4:
        return False
    lines.pop()
    if len(lines) % 3:
        return False
    for i in range(0, len(lines), 3):
        m = LOCATED.match(lines[i])
        if not m or m.group(1) not in kinds or not CARET.match(lines[i + 2]):
            return False
    return True


def unwarned(stderr: str) -> str | None:
    """stderr without the compiler's warnings that begin it (chapter 5's warnings of a match that
    misses a case, or of a clause that never matches: written before the program runs, with status 0
    or 2 after them); None if something that is not a whole located warning is among them."""
    lines = stderr.split("\n")
    while lines and (m := LOCATED.match(lines[0])) and m.group(1) == "warning":
        if len(lines) < 3 or not CARET.match(lines[2]):
            return None
        lines = lines[3:]
    return "\n".join(lines)


def classify(compiled, interpreted=None, unoptimised=None) -> str:
    """The class of an outcome: one of OK_CLASSES, or a finding's description."""
    o = compiled
    if o.status in (0, 2) and unwarned(o.stderr) not in (None, o.stderr):    # warned, then ran:
        o, interpreted, unoptimised = (None if x is None else x if unwarned(x.stderr) is None   # judged
                                       else type(x)(x.stdout, unwarned(x.stderr), x.status)    # as what
                                       for x in (o, interpreted, unoptimised))                  # ran
    if o.status == TIMEOUT:
        return "timeout"
    if "Traceback" in o.stderr:
        return "finding: a Python traceback: " + o.stderr.strip().splitlines()[-1][:120]
    if o.status == 3 or "internal" in o.stderr:
        return "finding: internal error: " + re.sub(r"mutant\.l:\d+:\d+", "mutant.l", o.stderr.strip())[:200]
    if o.status < 0:
        return f"finding: killed by signal {-o.status}"
    if o.status == 1:
        if o.stdout:
            return "finding: a rejected program printed"
        if o.stderr.startswith("lc: error: "):
            return "finding: an error without a location: " + o.stderr.strip()[:120]
        return "rejected" if blocks_ok(o.stderr, ("error", "note")) else "finding: a malformed compile error"
    if o.status == 0 and o.stderr:
        return "finding: status 0 with something on stderr"
    if o.status == 2:
        if re.search(r"^mutant\.l: runtime error: out of memory: ", o.stderr, re.M):
            return "out of memory"              # the runtime of chapter 10 says it without a location
        last = "\n".join(o.stderr.split("\n")[-4:]) if o.stderr.count("\n") >= 3 else ""
        if not blocks_ok(last, ("runtime error",)):
            return "finding: a malformed runtime error"
    if o.status not in (0, 2):
        return f"finding: exit status {o.status}"
    if unoptimised is not None and (unoptimised.stdout, unoptimised.stderr, unoptimised.status) != \
            (o.stdout, o.stderr, o.status):
        if "out of memory" in unoptimised.stderr:
            return "out of memory"
        what = [p for p in ("stdout", "stderr", "status") if getattr(unoptimised, p) != getattr(o, p)]
        return f"finding: with and without the optimiser differ ({', '.join(what)})"
    if interpreted is not None:
        if interpreted.status == TIMEOUT:
            return "interpreter timeout"
        if "out of memory" in interpreted.stderr:
            return "out of memory"
        if "stack overflow" in interpreted.stderr and "stack overflow" not in o.stderr \
                and o.stdout.startswith(interpreted.stdout):
            return "deeper than the interpreter goes, a loop compiled"    # documented: see the docstring
        if (interpreted.stdout, interpreted.stderr, interpreted.status) != (o.stdout, o.stderr, o.status):
            what = [p for p in ("stdout", "stderr", "status") if getattr(interpreted, p) != getattr(o, p)]
            return f"finding: interpreted and compiled differ ({', '.join(what)})"
    return "ran" if o.status == 0 else "runtime error"


WAYS = ["jit", "jit -O0", "interpreter"]     # lc run; lc run -O0 and lc run --interp if the first ran


def summary(record: dict) -> str:
    """The last line of a run: what the record holds, as the script printed it."""
    findings = record["findings"]
    return (f"done: {record['mutants']} mutants; " + ", ".join(f"{k} {v}" for k, v in sorted(record["counts"].items()))
            + (f"; {len(findings)} kinds of finding saved in {Path(findings[0]).parent}" if findings else ""))


def run(data: bytes, work: Path, timeout: float, interpreter_timeout: float) -> str:
    path = work / "mutant.l"
    path.write_bytes(data)
    compiled = lc_in_child(["run", path.name], timeout, work)
    interpreted = unoptimised = None
    if compiled.status in (0, 2) and "out of memory" not in compiled.stderr:
        unoptimised = lc_in_child(["run", "-O0", path.name], timeout, work)
        interpreted = lc_in_child(["run", "--interp", path.name], interpreter_timeout, work)
    return classify(compiled, interpreted, unoptimised)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20000, help="how many mutants (default 20000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10, help="seconds for the compiled run")
    parser.add_argument("--interpreter-timeout", type=float, default=120, help="seconds for the interpreter")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "lc-mutant-findings")
    parser.add_argument("--minimise-budget", type=float, default=300, help="seconds per finding")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="append a record of the run to the list \"runs\" in FILE (e.g. bench/random_runs.json)")
    args = parser.parse_args()

    os.environ["LC_HEAP_LIMIT"] = "256M"
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
    texts = [p.read_bytes() for p in SOURCES]
    counts, findings, seen, saved_files = Counter(), 0, set(), []
    record = start_record(sys.argv) if args.json else {}
    start = time.monotonic()
    print(f"{args.n} mutants of {len(SOURCES)} programs (seed {args.seed})", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(1, args.n + 1):
            rng = random.Random(args.seed * 1_000_003 + i)
            origin = rng.randrange(len(SOURCES))
            data = mutate(texts[origin], rng)
            kind = run(data, work, args.timeout, args.interpreter_timeout)
            if kind.startswith("finding"):
                counts["findings"] += 1
                print(f"mutant {i} of {SOURCES[origin].relative_to(ROOT)}: {kind}", flush=True)
                if kind not in seen:               # each kind of finding minimised and saved once
                    seen.add(kind)
                    findings += 1
                    text = data.decode("utf-8", errors="replace")
                    small = minimise(text, lambda t, kind=kind: run(t.encode(), work, args.timeout,
                                                                    args.interpreter_timeout) == kind, args.minimise_budget)
                    args.out.mkdir(parents=True, exist_ok=True)
                    saved = args.out / f"mutant-{findings:04}.l"
                    saved.write_text(small, encoding="utf-8")
                    saved.with_suffix(".txt").write_text(f"{kind}\nmutant {i} (seed {args.seed}) of "
                                                         f"{SOURCES[origin].relative_to(ROOT)}\n\n{text}",
                                                         encoding="utf-8")
                    saved_files.append(str(saved))
                    print(f"  minimised to {len(small)} characters: {saved}", flush=True)
            else:
                counts[kind] += 1
            if i % 500 == 0 or i == args.n:
                print(f"{i} mutants, {time.monotonic() - start:.0f} s: "
                      + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    record.update(mutants=args.n, ways=WAYS, counts=dict(sorted(counts.items())), findings=saved_files)
    record["seconds"] = round(time.monotonic() - start, 1)
    if args.json:
        append_record(args.json, record)
    print(summary(record), flush=True)
    return 1 if counts["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
