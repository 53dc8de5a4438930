"""bench/statepoints.py, a precise stack (issue: faster on any machine): every
call that may collect written as an LLVM statepoint, and minor collections that move what the stack
maps point to. Its executables must print what lc build's print, with the smallest nursery, so that
they collect often (a value missing from a stack map would keep a dead copy's address); a program
that calls and allocates gets stack maps, and its collections walk them."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_statepoint_builds_print_what_lc_build_prints():
    corpus = sorted(str(p) for kind in ("run", "exceptions", "fail") for p in (ROOT / "tests" / "corpus" / kind).glob("*.l"))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "statepoints.py"), "--check", "--stress", "msort", "loop",
                           str(ROOT / "examples" / "lists.l"), *corpus], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines())
    assert len(corpus) > 50 and len(lines) == len(corpus) + 3
    assert all(text.startswith("same output, ") for text in lines.values()), done.stdout   # errors and exceptions too
    assert lines["loop"] == "same output, 16 bytes of stack maps"       # only the runtime's end marker
    walks = re.search(r"(\d+) walks, (\d+) frames, (\d+) slots", lines["msort"])
    assert walks and all(int(n) > 10 for n in walks.groups()), lines["msort"]
