"""The heap pointer in a register: L's programs with a copy of lc_hp in each function against lc_hp itself (chapter 10).

    python bench/heap_pointer.py [--repeat 5] [--only NAME ...] [--json bench/heap_pointer.json]

Chapter 10's back end gives every function that allocates a local copy of
the runtime's heap pointer `lc_hp`, which LLVM keeps in a register, writes it
through to `lc_hp` at every bump, and reads it again after a call that may
move it (`LOCAL_HEAP_POINTER`), with alias tags that come with the copy. This
script builds every L benchmark of bench/programs twice -- as `lc build`
does, and with every allocation reading and writing `lc_hp` in memory and no
tags (a child process that sets `LOCAL_HEAP_POINTER = False` before compiling) --
and times the two in alternation at bench/run.py's sizes. It prints, per
program, the median ratio of the first build's time to the second's with
its 95 % bootstrap interval, and the geometric mean over the programs.
"""
import sys

from builds import OtherBuild, compare      # L built two ways, timed in alternation

GLOBAL = """\
from lcompiler import llvm_backend
llvm_backend.LOCAL_HEAP_POINTER = False
"""


def main(argv=None) -> int:
    other = OtherBuild("L-global", GLOBAL, "every allocation reading and writing lc_hp in memory")
    return compare("heap_pointer.py", __doc__, other, "copy / lc_hp itself", argv)


if __name__ == "__main__":
    sys.exit(main())
