"""bench/statepoints.py, the compiler's half of a precise stack (issue: faster on any machine): every
call that may collect written as an LLVM statepoint. Its executables must print what lc build's
print, and a program that calls and allocates must get stack maps."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_statepoint_builds_print_what_lc_build_prints():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "statepoints.py"), "--check", "deriv", "loop",
                           str(ROOT / "examples" / "lists.l")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines())
    assert set(lines) == {"deriv", "loop", "lists"}
    assert all(text.startswith("same output, ") for text in lines.values()), done.stdout
    assert lines["loop"] == "same output, 0 bytes of stack maps"        # no call that is not a tail call
    assert int(lines["deriv"].split()[2].replace(",", "")) > 1000
