# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Appendix B. What the stages share: the host
#
# A compiler written in Python asks things of the machine it runs on and of
# Python itself, and several of its stages ask the same things: a pause of
# Python's garbage collector while they build big structures, more room
# for recursion than Python gives by default, LLVM's description of the
# machine, the C library, a child process in which to run code that may
# crash, a thread with a big stack. Each was first written in the chapter
# that needed it first; they live here, once, in `lcompiler.support`, and
# every stage that needs one imports it from here.

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** Python (CPython 3.11: two of the tools below depend on how it
# runs Python calls) and [llvmlite](https://llvmlite.readthedocs.io); nothing
# from the chapters.
#
# **Builds:** the module `lcompiler.support` — `collector_paused`,
# `NESTING_LIMIT` and `recursion_limit`, `target_machine`, `libc`,
# `run_in_child` and its `Result`, `on_big_stack`, `in_frame_room` and
# `collector_looks_every`.
#
# </div>
#
# The pieces come from [chapter 1](01_addlang.ipynb) (the target machine,
# running in a child), [chapter 4a](04a_syntax.ipynb) (the paused collector,
# the recursion limit), [chapter 4b](04b_meaning.ipynb) (the reference
# interpreter's thread, frames and collector), [chapter 10](10_llvm.ipynb)
# (the executable's target machine) and [chapter 11](11_running.ipynb)
# (running a compiled program in a child, with a time limit). Those chapters
# say what they need and why, and link here for how. [Appendix
# A](A_errors.ipynb) holds the errors and the drawings, [appendix
# C](C_cli.ipynb) the command line.

# %%
#| default_exp support

# %% [markdown]
# ## What this appendix promises
#
# - `collector_paused()`: Python's cyclic garbage collector does not run
#   inside it, and is as it was after it, whatever happens inside.
# - `recursion_limit(n)`: inside it, at least `n` more Python frames than
#   are running when it starts; Python's limit as it was after it.
#   `NESTING_LIMIT` is the room the recursive stages ask for.
# - `target_machine(executable=False)`: a new LLVM target machine for this
#   host, LLVM initialised on first use: the JIT's (MCJIT's defaults), or an
#   executable's (position-independent code, small code model).
# - `run_in_child(main, timeout=None, output=None)`: `main()` runs in a
#   forked child, with its standard output and error captured; the `Result`
#   holds them and the exit status (`-N` when signal N killed the child);
#   `output(text)` gets the standard output as it comes. A child that runs
#   longer than `timeout` seconds is stopped — `SIGTERM`, then `SIGKILL`
#   after `GRACE` seconds — and so is the child of a caller that is
#   interrupted. Nothing the child does — exit, crash, overflow its stack —
#   reaches the caller.
# - `on_big_stack(run, *args)`: `run(*args)` on a thread with a C stack of
#   `THREAD_STACK` bytes; its result, or its exception, as if called here; an
#   interrupt of the caller interrupts it too.
# - `in_frame_room(run, *args)`: `run(*args)`, the frames of its Python calls
#   in one block of memory reserved at once, or as usual where the system
#   will not reserve it.
# - `collector_looks_every(n)`: inside it, the garbage collector looks at new
#   objects once every `n` of them; its thresholds as they were after it.
#
# ## Who uses what
#
# Every stage imports what it needs from this module by name, so the
# package itself says who shares what. The cell reads the import lines of
# every module of the package, and the first line of each, which names the
# notebook it is generated from:

# %%
import ast
import re
from pathlib import Path

import lcompiler
import lcompiler.support

users: dict = {}       # a name of this module: the modules that import it
chapter: dict = {}     # a module that imports one: the notebook it comes from, as its first line says
for path in sorted(Path(lcompiler.__file__).parent.glob("*.py")):
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module == "lcompiler.support":
            for alias in node.names:
                users.setdefault(alias.name, []).append(path.stem)
            chapter[path.stem] = re.search(r"from notebooks/(\w+)\.ipynb", text).group(1)

# %% [markdown]
# Drawn as a grid: a row per name that some module imports, in the order
# of this appendix; a column per module that imports one, in the order of
# the chapters it comes from; a dot where the module imports the name; and
# at the end of a row, how many modules import the name. Look
# for the blocks the dots make: the paused collector in nearly every
# stage, and the recursion limit with its room in the recursive ones; the
# target machine and the child process at the two ends of the book,
# chapter 1 and the back end, the driver and its cache of chapters 10 and
# 11; and the last three rows, a dot each, in chapter 4b's column. The
# picture writes its SVG itself, with the sizes and colours of
# `lcompiler.drawing` ([appendix A](A_errors.ipynb)), as chapter 5's
# picture of its components does:

# %%
import html
from dataclasses import dataclass

from lcompiler.drawing import BOX_H, CHAR_W, STYLES


@dataclass
class Drawing:
    """SVG text that Jupyter shows as a picture, with alt, its description in words, as its plain-text
    form and in its metadata, as a Picture of appendix A is shown."""
    svg: str
    alt: str

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/svg+xml": self.svg, "text/plain": self.alt}, {"alt": self.alt}


def users_picture(users: dict, chapter: dict) -> Drawing:
    """A row per name of lcompiler.support that a module imports, a column per module that imports one
    (in the order of the chapters), a dot where the module imports the name."""
    names = [name for name in lcompiler.support.__all__ if name in users]
    modules = sorted(chapter, key=lambda m: (chapter[m], m))
    heading = {m: f"{m} ({chapter[m].split('_')[0].lstrip('0')})" for m in modules}
    step, x0 = 30, 24 + max(map(len, names)) * CHAR_W
    top = 24 + max(map(len, heading.values())) * CHAR_W * 0.71        # headings at 45 degrees
    x = {m: x0 + step * (i + 0.5) for i, m in enumerate(modules)}
    y = {name: top + step * (i + 0.5) for i, name in enumerate(names)}
    colour = STYLES["blue"][1]
    shapes = []
    for m in modules:
        shapes.append(f'<text class="module" data-module="{m}" x="{x[m]:.1f}" y="{top - 8:.1f}" '
                      f'transform="rotate(-45 {x[m]:.1f} {top - 8:.1f})">{html.escape(heading[m])}</text>')
        shapes.append(f'<path d="M{x[m]:.1f},{top - 4:.1f} L{x[m]:.1f},{top + step * len(names):.1f}" '
                      f'stroke="#e2e8f0"/>')
    for name in names:
        shapes.append(f'<text class="name" data-name="{name}" x="12" y="{y[name] + 4:.1f}">{name}</text>')
        shapes.append(f'<path d="M{x0 - 6:.1f},{y[name]:.1f} L{x0 + step * len(modules):.1f},{y[name]:.1f}" '
                      f'stroke="#e2e8f0"/>')
        shapes += [f'<circle class="uses" data-name="{name}" data-module="{m}" cx="{x[m]:.1f}" cy="{y[name]:.1f}" '
                   f'r="8" fill="{colour}"/>' for m in users[name]]
        shapes.append(f'<text x="{x0 + step * len(modules) + 10:.1f}" y="{y[name] + 4:.1f}" fill="#64748b">'
                      f'{len(users[name])}</text>')
    right = max(x[m] + len(heading[m]) * CHAR_W * 0.71 for m in modules)     # the last heading's end
    width, height = round(max(x0 + step * len(modules) + 40, right + 10)), round(top + step * len(names) + 10)
    alt = (f"A grid of which modules of lcompiler import which names of lcompiler.support: a column per module, "
           f"in the order of the chapters ({', '.join(heading.values())}), a row per name, a dot where the "
           f"module imports the name. " + "; ".join(f"{name}: {', '.join(users[name])}" for name in names) + ".")
    return Drawing("\n".join(
        [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12" fill="#0f172a">',
         f"<title>{html.escape(alt)}</title>", f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
         *shapes, "</svg>"]), alt)


users_picture(users, chapter)

# %% [markdown]
# Most names serve several stages. The last three serve only the reference
# interpreter of chapter 4b, but they are about Python, not about L: any
# program that recurses deeply in Python, and allocates as it goes, needs
# them. The module's other names are the parts these are made of.
#
# ## The garbage collector, paused
#
# Python frees most objects as soon as the last reference to them goes.
# What reference counting cannot free — cycles, objects that refer to each
# other — a second collector finds, by walking the objects that might be in
# a cycle (containers: lists, dicts, instances of classes, not numbers or
# strings); it looks at the youngest each time 700 more of them have been
# made than freed, and at older ones, whole, now and then. A stage of the
# compiler makes hundreds of thousands of small objects and frees none until
# it ends: tokens, spans, tree nodes, CPS terms. The collector does not know
# they will all live, and walks them again and again as they pile up. On
# the large programs of [chapter 4a](04a_syntax.ipynb#how-fast-and-how-it-scales)'s
# measurements it costs a good part of the parsing time (the chapter prints
# how much), for nothing: tokens, spans and tree nodes never form cycles.
# So every stage that builds or walks a big structure — the lexer and the
# parser, desugaring and name resolution, type inference,
# monomorphisation, the conversion to CPS, the optimiser, closure
# conversion, the back end, the driver that splits a module, and chapter
# 6's reader and checker of CPS text — runs with the collector paused. Paused, not turned off: what it
# would have found, it finds at its next look after the stage. Between two
# stages it would look too, and at the oldest objects whole — the program as
# the last stage left it, and what the stages before kept — so chapter 4's
# `compile_to`, which `lc` compiles with, pauses it over all the stages,
# from the source to the last, at the price of the cycles it would have
# freed in between (a few tens of megabytes for a 10,000-line program).

# %%
#| export
import gc
import sys
from contextlib import contextmanager


@contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector, restoring its state after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# %%
print("before:", gc.isenabled())
with collector_paused():
    print("inside:", gc.isenabled())
    with collector_paused():        # inside a stage that pauses it too, as the parser inside lc run
        pass
    print("inside, after a nested pause:", gc.isenabled())
print("after:", gc.isenabled())

# %% [markdown]
# A pause inside a pause leaves the collector paused when it ends: each
# restores the state it found, not "on".
#
# What the collector would have found, it looks for at its first look
# after `compile_to`: every object the stages made is still in its
# youngest generation, and that look walks all of them — the tree, the
# terms, the IR — and frees the dead cycles among them. The cell below
# compiles the 2,500-line program of chapter 12's measurements of the
# compiler (`bench/compile_speed.py`) to LLVM's IR with the collector
# paused, as `compile_to` does, then times that first look: the objects it
# walked, the seconds, and the compilation's seconds beside them (on the
# machine the cell runs on; its output is not checked).

# %% tags=["nbval-ignore-output"]
import time

sys.path.insert(0, "../bench")
from compile_speed import program  # noqa: E402  (bench/compile_speed.py: its generated programs)

from lcompiler import pipeline  # noqa: E402
from lcompiler.errors import Source  # noqa: E402

gc.collect()
with collector_paused():              # so that the look comes when this cell asks for it, and is timed
    start = time.perf_counter()
    module, _ = pipeline.compile_to("llvm", Source("generated.l", program(2500)))
    compiled = time.perf_counter() - start
    tracked = gc.get_count()[0]
    start = time.perf_counter()
    freed = gc.collect(0)
    looked = time.perf_counter() - start
print(f"compiling to LLVM's IR: {compiled:.2f} s; the collector's first look after it: {looked:.2f} s "
      f"({looked / compiled:.0%} of the compilation), over {tracked:,} objects, {freed:,} of them in dead cycles")
del module

# %% [markdown]
# In a notebook, a test or the REPL, which go on compiling in the same
# process, that look is worth its price: the cycles it frees would pile up
# otherwise. The command `lc`, compiling one program and then ending — or
# handing its process to the program, as `lc run` does (chapter 11) — would
# pay it for memory that no one reuses, as the last thing it does; so
# `lc`'s `main` ([appendix C](C_cli.ipynb)) turns the collector off for good
# when it is the command and only compiles: not for the REPL, nor for a
# program run by the interpreter (`--interp`), which go on in Python.
#
# ## Room for recursion
#
# The parser of [chapter 4a](04a_syntax.ipynb) is recursive, a method for
# each rule of the grammar, and so are the later stages that walk the tree:
# desugaring, type inference, the conversion to CPS. Python's default
# recursion limit, 1000 frames, would stop them at a nesting depth of a few
# hundred parentheses at most, since each level of nesting is several
# calls of the parser. CPython 3.11 runs a call from Python code to
# Python code without the C stack — the new frame is a small record on a
# stack of its own, on the heap — so raising the limit is safe for code
# that recurses only in Python. `recursion_limit(n)` raises it while a stage
# works, to `n` frames more than are running when it starts: the room is
# counted from the stage, so that a program is too deep or not whoever
# calls the stage (`lc run` calls the parser from further down than `lc run
# --interp`). `NESTING_LIMIT`, twenty thousand frames, is thousands of
# levels of nesting; chapter 4a shows what happens past it — a located
# error, not a crash — and [chapter 7](07_cps_convert.ipynb) asks for fifty
# times as much, for its higher-order translation, as does the
# monomorphiser of [chapter 5b](05b_mono.ipynb).

# %%
#| export
NESTING_LIMIT = 20_000     # Python frames for the recursive stages: a nesting depth of thousands


def stack_depth() -> int:
    """How many Python frames are running, this one's caller included."""
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


@contextmanager
def recursion_limit(limit: int):
    """Run with room for at least limit more Python frames (CPython 3.11 recursion in Python
    code does not use the C stack, so this is safe for code that recurses only in Python)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, stack_depth() + limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# %%
def depth(n: int) -> int:
    return 0 if n == 0 else 1 + depth(n - 1)


before = sys.getrecursionlimit()
try:
    depth(5_000)
except RecursionError:
    print("5,000 calls deep: RecursionError")
with recursion_limit(NESTING_LIMIT):
    print("5,000 calls deep inside recursion_limit(NESTING_LIMIT):", depth(5_000))
print("the limit restored after:", sys.getrecursionlimit() == before)

# %% [markdown]
# ## LLVM's description of the machine
#
# LLVM compiles for a *target machine*: the processor, its features, the
# operating system, and how code is laid out in memory. Two parts of the
# book ask for one. The JIT ([chapter 1](01_addlang.ipynb), and
# [chapter 11](11_running.ipynb) for L) loads machine code into this
# process; `lc build` ([chapter 11](11_running.ipynb)) writes an executable,
# and `lc show asm` ([chapter 10](10_llvm.ipynb)) shows its code. They want
# different machine code. MCJIT, the JIT of LLVM that llvmlite offers, may
# load the code anywhere in the 64-bit address space, far from the C
# library it calls, so its target machine uses the *large* code model: a
# direct call is a `movabs` of the callee's address into a register, then
# a `call` through it. An executable's code is laid out by the linker, its
# calls within reach of one `call` instruction's 32-bit offset, so `lc
# build` asks for the *small* code model, with position-independent code
# (the system may load it at any address, as it does today's
# executables): a direct call is one `call` instruction — to `f@PLT`
# below, the linker's stub for a function that may live in a shared
# library. `target_machine(executable)` makes either, and
# initialises LLVM's parts for this machine the first time it is called.
#
# One trap of llvmlite deserves a warning, because it fails far from its
# cause: an execution engine takes *ownership* of the target machine it is
# given and frees it when the engine is garbage-collected. Sharing one
# target machine between engines works once, and the next engine crashes
# the process. So `target_machine` makes a new one each time; it is cheap.
#
# One setting is the book's own, for both: where an innermost loop starts.
# LLVM places the first instruction of a loop at an address that is a
# multiple of 16, as gcc -O2 does where that takes at most ten bytes of
# padding. A loop of a few instructions can then
# straddle a 64-byte boundary of the code, and on the processor this book
# was measured on such a loop runs much slower than the same loop placed
# inside one 64-byte line: `takl`, whose time is a loop of six
# instructions, takes about a quarter less time with the loop inside one
# line ([chapter 12](12_measuring.ipynb#where-a-loop-starts) measures it,
# program by program). Starting innermost loops at a multiple
# of 32 keeps a loop of up to 32 bytes inside one line, wherever the
# function lands, at the cost of some padding before it. LLVM offers this
# only as a command-line option of its x86 back end (`llvm.set_option`
# passes one, for the whole process; the back ends of other processors do
# not read it).

# %%
#| export
import llvmlite.binding as llvm

_llvm_ready = False
INNER_LOOP_ALIGN_LOG2 = 5        # innermost loops start at a multiple of 2**5 = 32 bytes (chapter 12)


def target_machine(executable: bool = False) -> llvm.TargetMachine:
    """A new LLVM target machine for this host (LLVM initialised on first use): the JIT's, with
    MCJIT's defaults (the large code model), or an executable's (position independent, small code
    model)."""
    global _llvm_ready
    if not _llvm_ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.set_option("", f"-x86-experimental-pref-innermost-loop-alignment={INNER_LOOP_ALIGN_LOG2}")
        _llvm_ready = True
    if not executable:
        return llvm.Target.from_default_triple().create_target_machine()
    return llvm.Target.from_default_triple().create_target_machine(reloc="pic", codemodel="small", opt=2)


# %% [markdown]
# A function that calls another, compiled for each machine; the lines that
# make the call:

# %%
CALLER = """\
declare i64 @f(i64)
define i64 @g(i64 %x) {
  %y = call i64 @f(i64 %x)
  ret i64 %y
}
"""
for executable in (False, True):
    assembly = target_machine(executable).emit_assembly(llvm.parse_assembly(CALLER))
    calls = [line.strip() for line in assembly.splitlines() if "call" in line or "movabs" in line]
    print(f"{'an executable' if executable else 'the JIT':14}", " ; ".join(calls))

# %% [markdown]
# ## Running in a child
#
# Machine code that LLVM compiled from our text runs in the process that
# called it, with nothing between it and the machine. If it crashes, the
# process goes; if it calls `exit`, as chapter 1's programs do, the process
# ends; if it never stops, neither does the caller. For `lc run` that is
# what a user expects. For a notebook kernel, the REPL, or a test suite that
# runs thousands of programs, it is not: they must outlive what they run.
# So they run it the way a shell runs a program: in a child process.
# `os.fork` makes a copy of the current process, machine code included,
# without copying its memory: the two share its pages until one of them
# writes to one. The child sends its standard output into a pipe and
# its standard error into a temporary file, calls `main`, and is gone; the
# parent reads the pipe while the child runs — handing each piece to the
# callback `output`, if it is given one, so that a long program shows its
# progress as it goes — waits, and returns what happened — what the program
# wrote and how it ended — as a `Result`. Whatever the program does ends the
# child, never the parent. A program that never stops is stopped by
# `timeout` (seconds), or by an interrupt (the notebook's stop button).
# (Reading the output in Python and printing the text also makes it visible
# to the notebook's tests, which do not see what native code writes to the
# file descriptor 1 of the kernel.)
#
# Two flushes keep the output in order. Before the fork, every buffer —
# C's, through the C library `libc`, and Python's — is flushed, so that
# nothing buffered is written twice, once by each process. In the child,
# after `main` returns, C's buffers are flushed again, since `os._exit` ends
# the child without flushing them.

# %%
#| export
import contextlib
import ctypes
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

libc = ctypes.CDLL(None)         # the C library this process runs with


@dataclass(frozen=True)
class Result:
    """How a program ran: what it wrote, and its exit status (-N: killed by signal N)."""
    stdout: str
    stderr: str
    status: int


GRACE = 1.0      # seconds a child stopped by SIGTERM has to write its output, before SIGKILL


def run_in_child(main: Callable[[], int], timeout: float | None = None,
                 output: Callable[[str], object] | None = None) -> Result:
    """Call main() in a forked child whose standard output and error are captured, its output handed
    to output(text) as it comes; stop it after timeout seconds, or when the caller is interrupted."""
    libc.fflush(None)                             # nothing buffered may be written twice
    sys.stdout.flush()
    sys.stderr.flush()
    reader, writer = os.pipe()
    with tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:                              # the child: never returns
            status = 70
            try:
                os.close(reader)
                os.dup2(writer, 1)
                os.dup2(err.fileno(), 2)
                status = main()
                libc.fflush(None)                 # os._exit would drop what C still buffers
            finally:
                os._exit(status)
        os.close(writer)
        child = Child(pid, reader, output)
        try:
            child.follow(timeout)
        except BaseException:                     # an interrupt: the child goes with it
            child.stop()
            raise
        finally:
            os.close(reader)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        if child.stopped and timeout is not None:
            stderr += f"stopped: the program ran longer than {timeout:g} s\n"
        return Result(child.text(), stderr, child.status)


# %% [markdown]
# `Child` follows the child: it reads the pipe as the child writes into it,
# for at most a given time, decodes what comes as UTF-8 (a character cut
# between two reads is completed by the next, and bytes that are not UTF-8
# become `�`), and hands each piece on:

# %%
#| export
import codecs
import select


class Child:
    """A forked child whose standard output is the pipe `reader`: its output so far, and its status."""

    def __init__(self, pid: int, reader: int, output: Callable[[str], object] | None):
        self.pid, self.reader, self.output = pid, reader, output
        self.pieces, self.decoder = [], codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.stopped, self.status = False, None

    def read(self, seconds: float | None) -> bool:
        """Read what the child writes for at most `seconds` (None: until it closes its output);
        False once the output is closed."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.reader], [], [], left)[0]:
                return True
            data = os.read(self.reader, 1 << 16)
            if not data:
                return False
            self.take(self.decoder.decode(data))

    def take(self, text: str) -> None:
        if text:
            self.pieces.append(text)
            if self.output is not None:
                self.output(text)


# %% [markdown]
# Then it waits for the child to end. A child that runs past its time
# limit is asked to stop first, with `SIGTERM`, and given `GRACE` seconds
# to write out what it holds — the runtime of chapter 10b flushes its
# output on `SIGTERM` — before `SIGKILL`, which cannot be caught, ends it
# for sure. A child that has closed its output and runs on has nothing
# left to write: it gets `SIGKILL` when the limit comes, which counts from
# the start either way. An interrupt of the caller (Ctrl-C, or the
# notebook's stop button) stops the child as a late one is stopped.

# %%
#| export
class Child(Child):
    def follow(self, timeout: float | None) -> None:
        """Follow the child to its end; stop it after timeout seconds, counted from now
        whether it still writes or has closed its output and still runs."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.read(timeout):
            self.stop()
        else:
            self.reap(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """SIGTERM, then, after GRACE seconds, SIGKILL; the output meanwhile is read."""
        self.stopped = True
        try:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            if self.read(GRACE):
                os.kill(self.pid, signal.SIGKILL)
        finally:                                  # even if a second interrupt comes meanwhile
            if self.status is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self.reap(None)

    def reap(self, timeout: float | None) -> None:
        """Wait for the child to end (it closed its output, but may still run)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.status is None:
            done, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                self.stopped, deadline = True, None
            else:
                time.sleep(0.005)

    def text(self) -> str:
        self.take(self.decoder.decode(b"", final=True))
        return "".join(self.pieces)


# %% [markdown]
# Four children: one that writes to its standard output and error and ends
# with status 3, one that kills itself with the signal of a crash, one
# that would sleep for ten seconds, stopped after a fifth of one, and one
# that writes a line and then sleeps, stopped likewise, whose line the
# callback got while it slept:

# %%
print(run_in_child(lambda: os.write(1, b"to stdout\n") and os.write(2, b"to stderr\n") and 3))
print("status", run_in_child(lambda: os.kill(os.getpid(), signal.SIGSEGV)).status)
print(run_in_child(lambda: time.sleep(10) or 0, timeout=0.2))
shown = []
print(run_in_child(lambda: os.write(1, b"started\n") and time.sleep(10) or 0, timeout=0.2, output=shown.append),
      shown)

# %% [markdown]
# Signal 11 is `SIGSEGV`, what a program that reads memory it may not
# gets; signal 15 is `SIGTERM`, which `Child.stop` sent when the time was
# up (a Python child that sleeps ends at once on it, and the `SIGKILL`
# that `stop` sends from its `finally` finds it ended). The notebook is
# still here.
#
# ### The two processes, watched
#
# What passes between the parent and the child is easier to see than to
# read. The cells below run the first and the last of those children again,
# and watch the calls to the system that `run_in_child`, `Child` and the
# child's `main` make: for the length of a run, they are given stand-ins
# for the modules `os`, `select` and `time` whose functions that move bytes
# or processes (`WATCHED`) make a note of each call, as it is written in
# the code, and of what it sent or got. The
# child writes its notes, each before its call, into a file both processes
# share, since its last call never comes back. The same code runs, in the
# same order; only the notes are new:

# %%
import json
import linecache
from unittest import mock

WATCHED = {"os": ("pipe", "fork", "close", "dup2", "write", "read", "kill", "waitpid", "_exit"),
           "select": ("select",), "time": ("sleep",)}


def what(name: str, args: tuple, value) -> str:
    """What a watched call sent or got, as the picture shows it: no descriptor numbers, no pids."""
    if name == "write":
        return f"{args[1]!r} to {args[0]}"
    if name == "kill":
        return signal.Signals(args[1]).name
    if name == "read":
        return f"→ {value!r}"
    if name == "select":
        return "→ ready" if value[0] else "→ time up"
    if name == "waitpid":
        return f"→ {os.waitstatus_to_exitcode(value[1])}"
    return ""


def watched_run(main, **options) -> tuple[list, list, Result]:
    """run_in_child(main, **options), its calls to the system watched: the parent's and the child's, each a
    list of [the function's name, the call as written, what it sent or got], and the Result."""
    parent, notes, write = os.getpid(), tempfile.TemporaryFile(), os.write
    calls = []

    class Watched:
        """A module whose watched functions make a note of each call."""

        def __init__(self, module):
            self.module = module

        def __getattr__(self, name):
            function = getattr(self.module, name)
            if name not in WATCHED[self.module.__name__]:
                return function

            def watched(*args):
                frame = sys._getframe(1)                     # the call, as written: its place in the caller
                line, _, start, end = list(frame.f_code.co_positions())[frame.f_lasti // 2]
                note = [name, linecache.getline(frame.f_code.co_filename, line)[start:end],
                        what(name, args, None) if name in ("write", "kill") else ""]
                if os.getpid() != parent:                    # the child: a line in the shared file, first
                    write(notes.fileno(), (json.dumps(note) + "\n").encode())
                    return function(*args)
                value = function(*args)
                calls.append(note[:2] + [what(name, args, value) if name in ("read", "select", "waitpid")
                                         else note[2]])
                return value
            return watched

    stand_ins = {name: Watched(sys.modules[name]) for name in WATCHED}
    with contextlib.ExitStack() as watching, notes:
        for space in {id(g): g for g in (run_in_child.__globals__, main.__globals__)}.values():
            watching.enter_context(mock.patch.dict(space, stand_ins))
        result = run_in_child(main, **options)
        notes.seek(0)
        return calls, [json.loads(line) for line in notes], result


# %% [markdown]
# The picture draws each run in two lanes: the parent's calls on the left,
# the child's on the right, each lane in the order its process made them.
# How the two processes interleave is the system's choice, and differs from
# run to run; what the picture fixes is what waits for what. A call of the
# parent that waits for the child — an `os.read` for its bytes, an
# `os.waitpid` for its end — is drawn below what it waits for, and a red
# arrow says what passes: the fork; the bytes of the pipe; the bytes of the
# temporary file, which the parent reads once, into the `Result`; the
# signal that ends the child; its status.

# %%
def lanes(parent: list, child: list, result: Result) -> tuple:
    """Where a run's calls go: the rows of the parent's calls, of the child's (from the row after the fork),
    and of the child's end; the child's write that each read of the parent got; the kill that ended it."""
    fork = [name for name, *_ in parent].index("fork")
    at = [fork + 1 + j for j in range(len(child))]
    sent = {said: j for j, (name, _, said) in enumerate(child) if name == "write"}
    got = {i: sent[f"{said[2:]} to 1"] for i, (name, _, said) in enumerate(parent) if name == "read" and said != "→ b''"}
    signalled = -result.status if result.status < 0 else None
    end, killer = (None if signalled else at[-1] + 1), None    # a child killed ends where the signal reaches it

    def waits(i: int) -> int:                                  # the row a call needs: below what it waits for
        name, _, said = parent[i]
        if i in got:                                           # bytes the child wrote into the pipe
            return at[got[i]] + 1
        if name in ("read", "waitpid"):                        # the end of its output, or of the child
            return end + 1
        return waits(i + 1) - 1 if name == "select" and said == "→ ready" else 0

    rows = []
    for i, (name, _, said) in enumerate(parent):
        rows.append(max(rows[-1] + 1 if rows else 0, waits(i)))
        if name == "kill" and signalled and said == signal.Signals(signalled).name:
            end, killer = max(at[-1], rows[-1]) + 1, i
    return rows, at, end, got, killer


# %% [markdown]
# `child_picture` draws runs with those rows: a box per call, blue for the
# parent's, yellow for the child's, red for how the child ended, green for
# the `Result`; a red arrow for each thing that passes; and the same in
# words, for the site.

# %%
def child_picture(runs: list) -> Drawing:
    """Runs of run_in_child, [(caption, the parent's calls, the child's, the Result)], each as two lanes of
    calls in the order they were made, with arrows for what passes between the processes: the fork, the
    bytes of the pipe and of the file, the signal that ends the child, and how it ended."""
    shapes, words, passing, top, row_h, red = [], [], [], 10, BOX_H + 8, STYLES["red"][1]
    shown = lambda text, said: f"{text}  {said}" if said.startswith("→") else text
    widest = max(len(shown(t, s)) for _, calls, _, r in runs for _, t, s in calls + [("", repr(r), "")])
    lane = 12 + widest * CHAR_W + 14 + 110                          # where the child's lane starts
    right = [lane]

    def box(x, row, text, kind, style):
        w = len(text) * CHAR_W + 14
        fill, stroke = STYLES[style]
        shapes.append(f'<rect class="{kind}" x="{x:.1f}" y="{top + row * row_h}" width="{w:.1f}" height="{BOX_H}" '
                      f'rx="5" fill="{fill}" stroke="{stroke}"/>')
        shapes.append(f'<text x="{x + 7:.1f}" y="{top + row * row_h + 15}">{html.escape(text)}</text>')
        right.append(x + w)
        return x + w

    def arrow(x1, row1, x2, row2, label, source, target):
        y1, y2 = top + row1 * row_h + BOX_H / 2, top + row2 * row_h + BOX_H / 2
        shapes.append(f'<path class="passes" data-what="{label}" data-from="{html.escape(source)}" '
                      f'data-to="{html.escape(target)}" d="M{x1:.1f},{y1} L{x2:.1f},{y2}" stroke="{red}" '
                      f'fill="none" marker-end="url(#arrow)"/>')
        x, anchor = (x1 + 8, "start") if x1 < x2 else (x1 - 8, "end")      # the label by the arrow's start
        shapes.append(f'<text x="{x:.1f}" y="{y1 - 5}" text-anchor="{anchor}" fill="{red}">{label}</text>')
        passing.append(f"{label}, from {source} to {target}")

    for caption, parent, child, result in runs:
        shapes.append(f'<text x="12" y="{top + 15}" font-weight="bold">{html.escape(caption)}</text>')
        shapes.append(f'<text x="12" y="{top + row_h + 15}" fill="#64748b">the parent</text>')
        shapes.append(f'<text x="{lane}" y="{top + row_h + 15}" fill="#64748b">the child</text>')
        top += 2 * row_h                                       # below the caption and the lanes' names
        rows, at, end, got, killer = lanes(parent, child, result)
        ends = f"killed by {signal.Signals(-result.status).name}" if killer is not None else f"exit status {result.status}"
        for i, (name, text, said) in enumerate(parent):
            edge = box(12, rows[i], shown(text, said), "parent", "blue")
            if name == "fork":
                arrow(edge, rows[i], lane, at[0], "fork", text, child[0][1])
            elif i == killer:
                arrow(edge, rows[i], lane, end, said, text, ends)
            elif i in got:
                arrow(lane, at[got[i]], edge, rows[i], "the pipe", child[got[i]][1], shown(text, said))
            elif name == "waitpid":
                arrow(lane, end, edge, rows[i], "status", ends, shown(text, said))
        row = rows[-1] + 1
        edge = box(12, row, repr(result), "result", "green")
        for j, (name, text, said) in enumerate(child):
            box(lane, at[j], text, "child", "yellow")
            if name == "write" and said.endswith(" to 2"):
                arrow(lane, at[j], edge, row, "the file", text, repr(result))
        box(lane, end, ends, "end", "red")
        words.append(f"{caption}. The parent calls {', '.join(shown(t, s) for _, t, s in parent)}; the child "
                     f"{', '.join(t for _, t, _ in child)}, then ends: {ends}. Arrows: {'; '.join(passing)}. "
                     f"The parent's Result: {result!r}")
        passing.clear()
        top += (row + 2) * row_h
    width, height = round(max(right) + 12), top - row_h + 10
    alt = ("Two runs of run_in_child, each in two lanes, the parent's calls to the system on the left and the "
           "child's on the right, in the order each made them; red arrows say what passes between them. "
           + ". ".join(words) + ".")
    return Drawing("\n".join(
        [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12" fill="#0f172a">',
         f"<title>{html.escape(alt)}</title>",
         '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
         '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>',
         f'<rect width="{width}" height="{height}" fill="#ffffff"/>', *shapes, "</svg>"]), alt)


# %% [markdown]
# The first child and the last one of the examples above, watched (the
# second with half a second to run, so that its line is written well
# within the time):

# %%
runs = [("a child that writes to both streams, then ends with status 3",
         *watched_run(lambda: os.write(1, b"to stdout\n") and os.write(2, b"to stderr\n") and 3)),
        ("a child that writes a line, then sleeps, stopped after half a second",
         *watched_run(lambda: os.write(1, b"started\n") and time.sleep(10) or 0, timeout=0.5))]
child_picture(runs)

# %% [markdown]
# Read each run from the top. The fork makes the child, which closes the
# end of the pipe it does not use and puts the pipe and the file in place
# of its standard output and error: after that, `main` writes to
# descriptors 1 and 2 as any program does. The parent's `select` returns
# when there is something to read; an `os.read` that returns `b''` is the
# end of the output — the child has ended, and its end of the pipe with it
# — and `os.waitpid` then gets the status. In the second run the parent's
# second `select` finds the time up, and it sends `SIGTERM`, which ends the
# child in its `time.sleep`; the `SIGKILL` that follows is the `finally` of
# `Child.stop`, sent because the status is not known yet, to a child that
# has already ended: it changes nothing, and the status says `SIGTERM`,
# −15.
#
# ## A program on a stack of its own
#
# The reference interpreter of [chapter 4b](04b_meaning.ipynb) runs L
# programs that recurse a million calls deep, by recursing in Python
# itself; its design note on deep calls says why it chose that. It asks
# three more things of the host, and each is generic: any program that
# recurses deeply in Python, and allocates a lot while it does, needs the
# same.
#
# **A big C stack.** CPython runs Python-to-Python calls without the C
# stack, but not everything is such a call: C code that calls back into
# Python, or walks a deep structure itself (`repr` of a deeply nested
# list), recurses on the C stack, which is 8 MiB on the main thread (Linux's
# usual `ulimit -s`), and a C stack overflow kills the process. `on_big_stack` runs a function on a
# thread of its own, made with a C stack of `THREAD_STACK` bytes, 256 MiB
# — the stack the compiled code has by default ([chapter
# 10b](10b_runtime.ipynb)) — waits for it, and hands
# back its result or its exception. Two details make the thread invisible to
# the caller. The thread runs in a copy of the caller's *context* (Python's
# `contextvars`), where Jupyter keeps the cell that output belongs to. And
# an interrupt — Ctrl-C, or the stop button of a notebook — reaches only
# the main thread, which is waiting; it passes the `KeyboardInterrupt` on to
# the running thread, as an *asynchronous exception*
# (`PyThreadState_SetAsyncExc`, which raises it in that thread at its next
# Python instruction), so that a program that loops for ever can still be
# stopped.

# %%
#| export
import contextvars
import threading

THREAD_STACK = 256 << 20   # the C stack of the thread on_big_stack starts, in bytes


def on_big_stack(run, *args):
    """run(*args) on a thread with a THREAD_STACK-byte C stack: its result, or its exception."""
    outcome = {}

    def thread_main():
        try:
            outcome["value"] = run(*args)
        except BaseException as error:
            outcome["error"] = error

    old = threading.stack_size(THREAD_STACK)
    try:
        thread = threading.Thread(target=contextvars.copy_context().run, args=(thread_main,), daemon=True)
        thread.start()
    finally:
        threading.stack_size(old)
    try:
        thread.join()
    except KeyboardInterrupt:                   # stop the program too, then report the interrupt
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(KeyboardInterrupt))
        thread.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# %% [markdown]
# `repr` of a list nested a hundred thousand deep recurses in C, a few C
# frames per level: at that depth, more than the main thread's 8 MiB of C
# stack hold (the process dies of it, with `SIGSEGV`), and well within the
# thread's 256. And an exception raised on the thread is raised again in
# the caller:

# %%
nested: list = []
for _ in range(100_000):
    nested = [nested]
with recursion_limit(1_000_000):
    print("the repr has", len(on_big_stack(repr, nested)), "characters")
try:
    on_big_stack(int, "forty-two")
except ValueError as error:
    print("raised in the caller:", error)

# %% [markdown]
# **Frames in one block.** CPython keeps its stack of Python frames in
# blocks of 16 KiB, which it asks the system for when a call needs one
# more and gives back as soon as the call returns: a recursion that goes
# down and up again pays two system calls, and the kernel's page faults,
# each time it crosses into a new block. `in_frame_room` starts a function
# inside a call whose frame claims half a gigabyte. CPython sizes the frame
# of a call from its code object, which says how many values the call may
# push on its own evaluation stack; `ROOMY_ENTER` is the small function
# `enter` with a code object that claims room for `FRAME_ROOM` more (2²⁶ +
# 64 values, just over 512 MiB). Calling it makes CPython ask the system for a block of
# its frame stack large enough for that frame — a gigabyte, as it rounds up
# to a power of two — which the system only reserves: a page costs memory
# when a frame first touches it. The frame itself never uses its room, and
# the frames of the calls that follow go into the half after it. Where the
# system will not reserve so much (a limit set with `ulimit -v`, say), the
# call fails before `enter` runs, and the function runs as Python would run
# it anyway.

# %%
#| export
import types

FRAME_ROOM = (1 << 26) + 64     # values: a frame of just over 512 MiB, in a block of 1 GiB


def enter(entered: list, run, *args):
    entered.append(True)
    return run(*args)


ROOMY_ENTER = types.FunctionType(enter.__code__.replace(co_stacksize=enter.__code__.co_stacksize + FRAME_ROOM),
                                 enter.__globals__, "roomy_enter")


def in_frame_room(run, *args):
    """run(*args), the frames of its calls in one block of memory reserved at once; run as usual
    if the system will not reserve it."""
    entered = []
    try:
        return ROOMY_ENTER(entered, run, *args)
    except MemoryError:
        if entered:                 # not the frame: run itself ran out of memory
            raise
    return run(*args)


# %%
with recursion_limit(200_000):
    print("100,000 calls deep, in frame room:", in_frame_room(depth, 100_000))
print("room claimed, in values:", ROOMY_ENTER.__code__.co_stacksize - enter.__code__.co_stacksize)

# %% [markdown]
# **A collector that looks less often.** A recursion a million calls deep
# keeps every frame alive, and a program that builds a long list keeps every
# cell: each look of the garbage collector at the youngest objects then
# frees nothing, and moves them to an older generation that it walks again,
# whole, now and then. For a parser, whose objects never form cycles,
# pausing the collector is the answer. An L program can make cycles (a
# closure that assigns to a `var` it captures may be stored in it), so the
# interpreter keeps the collector running and lets it look once every
# million new objects instead of every 700: cycles are still found, only
# less often. `collector_looks_every(n)` sets that threshold while a
# function runs, and puts back the one it found:

# %%
#| export
@contextmanager
def collector_looks_every(young: int):
    """Let Python's cyclic garbage collector look at new objects once every `young` of them,
    restoring its thresholds after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(young, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


# %%
print("before:", gc.get_threshold())
with collector_looks_every(1_000_000):
    print("inside:", gc.get_threshold())
print("after:", gc.get_threshold())

# %% [markdown]
# The interpreter that uses them is measured where it is built: the
# "Measured" sections of [chapter
# 4b](04b_meaning.ipynb#measured-tail-calls-and-deep-calls) time
# recursions a million calls deep and a heap that fills up, and say what
# part `in_frame_room` had in what deep recursion gained.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a support module, not the first chapter that needed it</p>
#
# Before this appendix, each of these lived in the chapter that first
# needed it: the target machine and the child process in chapter 1's toy
# compiler of additions, the paused collector and the recursion limit in
# chapter 4a's parser, the thread in chapter 4b's interpreter. Every later
# stage then imported the back end's target machine from the module of
# additions, and the paused collector from the parser, module after
# module. That reads as if the back end were built on the toy, and
# makes the toy's module hard to change. l-lang, the original L compiler,
# has a `support` directory for exactly this: what several passes share,
# and none of them is about. A stage's chapter still says what it needs and
# why — chapter 4a why the parser pauses the collector, chapter 4b why the
# interpreter recurses in Python — and links here for how.
#
# </div>
#
# ## What the tests check
#
# `tests/test_support.py` holds this appendix's promises: the collector, its
# thresholds and the recursion limit are as they were after a pause or a
# raise, an exception inside included; `run_in_child` returns what a
# child wrote on each stream (what C still buffered included) and its
# status, for a status, a crash and a time limit, and kills a child that
# ignores `SIGTERM` after the grace period; `on_big_stack` hands back
# results and exceptions; the JIT and an executable get the code models
# they need; and no other module of the package defines a name of this
# module — each imports it from here.
# They run with the rest: `tests/test_interp.py` stops a running program with
# an interrupt and runs recursions a million calls deep, and
# `tests/test_native.py` runs every compiled program in a child.
# `tests/test_drawing.py` reads this appendix's two pictures back from the
# notebook: the dots of the grid are the imports of `lcompiler.support`
# that the package's files hold, read as text; and the calls of the two
# runs are those that `run_in_child` makes when it is watched another way
# (with `sys.setprofile`, which the child inherits), written as in the
# code, with each arrow between the boxes it names, pointing down, and
# true to what passed: the bytes written and read, the status, the signal.
#
# ## Exercises
#
# 1. `Child.reap` polls every 5 ms when there is a time limit. Wait without
#    polling instead (`signal.alarm`, or `os.pidfd_open` and `select`). What
#    does each cost, and which works on macOS?
# 2. `run_in_child` reads the child's standard error only at the end, from
#    a file. Why is a file safe there, and what would a second pipe need?
# 3. Without `in_frame_room`, how does the time of a recursion a million
#    calls deep change? Time `Interpreter().run` on chapter 4b's deep
#    recursion with `in_frame_room` replaced by a plain call.
# 4. Why must `recursion_limit` count the frames already running
#    (`stack_depth`) instead of setting the limit to `NESTING_LIMIT`?
#
# <details><summary>Solutions</summary>
#
# 1. `os.pidfd_open(pid)` gives a file descriptor that becomes readable
#    when the child ends: `select.select([fd], [], [], timeout)` waits for
#    that or the time limit, with no polling and no signal. It is Linux only
#    (5.3 and later). `signal.alarm` works everywhere, but only in the main
#    thread, with whole seconds, and it interrupts whatever else the process
#    is doing; polling works everywhere at the cost of waking up 200 times a
#    second, which is nothing next to compiling the program. On macOS,
#    `select.kqueue` with a `KQ_FILTER_PROC` event for `KQ_NOTE_EXIT` waits
#    for the child's end without polling, as `pidfd_open` does on Linux.
# 2. A file never fills: the child can write as much as it likes to its
#    standard error while nobody reads it. A second pipe must be read at
#    the same time as the first — `select` on both read ends, until both
#    report end of file — or a child that writes more than 64 KiB of errors
#    (a pipe's capacity on Linux) blocks for ever.
# 3. It gets slower, by how much depends on the system: every 16 KiB of
#    frames, on the way down and again on the way up, CPython asks the
#    system for a block and gives it back. Chapter 4b measures the whole
#    interpreter; to see this part alone, run the same recursion both ways
#    under `time` several times, alternating.
# 4. Because the limit is on all the frames running, not on those of the
#    stage. Called from deep inside `lc run`, a parser given a limit of
#    `NESTING_LIMIT` would have less room than called from a notebook, and a
#    program would be too deep or not depending on who asked; counted from
#    the stage, the room is the same for every caller. And setting a limit
#    below the frames already running would raise `RecursionError` at once.
#
# </details>
