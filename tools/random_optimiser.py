"""Random well-typed L programs through chapter 9's optimiser: a long run of what its tests check on a few.

    nice -n 10 python tools/random_optimiser.py [-n 2000] [--seed 1] [--compiled] [--exceptions]

The random tests of tests/test_shrink.py run the same few programs at every run (Hypothesis with
`derandomize`), so that a test run cannot fail by chance. This script explores further: it takes n
programs from the generator of tests/test_convert.py, reproducibly for a seed (tools/random_programs.py's
`generate`), and runs on each what the test `test_random_programs_mean_the_same_after_every_single_rewrite`
runs: both shrinkers and the optimiser, chapter 6's `check` after every single rewrite, no redex left at
the end, the same output and runtime error as before. With --compiled, each program is also compiled with
and without the optimiser and run, as `test_random_programs_compiled_with_and_without_the_optimiser` does:
the same output, errors and exit status, and no more bytes allocated optimised. With --exceptions, the
programs also raise (directly, or from a recursion of random depth) and catch, with handlers that do and
do not match, as the tests `test_random_programs_that_raise_and_catch_*` draw them.

Every program that fails is a finding: it is minimised (lines, then tokens, removed while the same check
still fails with the same message) and printed. Fix the bug, and add the program to the tests.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from random_programs import generate, minimise  # noqa: E402
from test_shrink import compiled_the_same_with_and_without_the_optimiser, \
    means_the_same_after_every_single_rewrite  # noqa: E402


def failure(check, text: str) -> str | None:
    """None if check(text) passes, else what went wrong, in one line: the kind of exception and its
    message, with numbers as # (a byte count changes as the program is minimised)."""
    try:
        check(text)
    except Exception as error:              # an assertion of the check, or a crash of the compiler
        message = str(error).splitlines()[0] if str(error) else ""
        return re.sub(r"\d+", "#", f"{type(error).__name__}: {message}")
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="how many programs (default 2000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compiled", action="store_true", help="also compile and run each program both ways")
    parser.add_argument("--exceptions", action="store_true", help="programs that raise and catch exceptions")
    parser.add_argument("--minimise-budget", type=float, default=300, help="seconds per finding")
    args = parser.parse_args()
    sys.setrecursionlimit(100_000)

    start = time.monotonic()
    texts = generate(args.n, args.seed, runaway=0, exceptions=args.exceptions)
    checks = [means_the_same_after_every_single_rewrite] \
        + ([compiled_the_same_with_and_without_the_optimiser] if args.compiled else [])
    print(f"{len(texts)} programs generated (seed {args.seed}); checks: {', '.join(c.__name__ for c in checks)}",
          flush=True)
    findings = 0
    for i, text in enumerate(texts, 1):
        for check in checks:
            what = failure(check, text)
            if what is None:
                continue
            findings += 1
            print(f"program {i}: FINDING: {check.__name__}: {what}", flush=True)
            small = minimise(text, lambda t, check=check, what=what: failure(check, t) == what, args.minimise_budget)
            print(f"--- the program, minimised to {len(small.splitlines())} lines:\n{small}---", flush=True)
        if i % 100 == 0 or i == len(texts):
            print(f"{i} programs, {time.monotonic() - start:.0f} s, {findings} findings", flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
