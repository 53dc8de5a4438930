"""Where innermost loops start: L's programs with loops at a multiple of 32 bytes against 16 (chapter 12).

    python bench/align.py [--repeat 5] [--only NAME ...] [--json bench/align.json]

LLVM starts a loop at an address that is a multiple of 16, as gcc -O2 does;
the compiler of this book asks for 32 for innermost loops (appendix B,
`target_machine`). This script builds every L benchmark of bench/programs
twice -- as `lc build` does, and with innermost loops at LLVM's 16 (a child
process that sets the option back before compiling) -- and times the two
executables in alternation (as bench/run.py times L against its peers), at
bench/run.py's sizes. It prints, per program, the median ratio of the
32-byte build to the 16-byte build with its 95 % bootstrap interval, and the
geometric mean over the programs. For `takl` it also records where the
loops of `mas` lie in each build (objdump), to show the loop that straddles
a 64-byte boundary.
"""
import re
import subprocess
import sys

from builds import OtherBuild, compare      # L built two ways, timed in alternation

# LLVM set up as lc sets it up (target_machine), then innermost loops put back at LLVM's own 16 bytes.
ALIGNED_16 = """\
import llvmlite.binding as llvm
from lcompiler.support import target_machine
target_machine()
llvm.set_option("", "-x86-experimental-pref-innermost-loop-alignment=4")
"""


def loops(exe, function):
    """The innermost loops of a function in an executable: (start, end) addresses of each backward
    branch's target and the branch, from objdump."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True, text=True).stdout
    body = re.search(rf"<{function}[_0-9]*>:\n(.*?)\n\n", text, re.S)
    found = []
    for line in body.group(1).splitlines() if body else []:
        m = re.match(r"\s*([0-9a-f]+):\s+j\w+\s+([0-9a-f]+) <", line)
        if m and int(m.group(2), 16) < int(m.group(1), 16):
            found.append((int(m.group(2), 16), int(m.group(1), 16)))
    return [(a, b) for a, b in found if not any(a < c and d < b for c, d in found)]   # innermost


def takl_loops(name, cmds) -> dict:
    """For takl, where the innermost loops of `mas` lie in each build."""
    if name != "takl":
        return {}
    return {"loops": {lang: [[hex(a), hex(b)] for a, b in loops(cmds[lang][0], "mas")] for lang in cmds}}


def main(argv=None) -> int:
    other = OtherBuild("L-16", ALIGNED_16, "innermost loops at a multiple of 16 bytes")
    return compare("align.py", __doc__, other, "32 bytes / 16 bytes", argv, extra=takl_loops)


if __name__ == "__main__":
    sys.exit(main())
