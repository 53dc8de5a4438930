# ---
# jupyter:
#   jupytext:
#     custom_cell_magics: L,c
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
# # Chapter 11. Running L: JIT, executables, lc, the REPL, %%L
#
# Chapter 10 ends with a verified, optimised LLVM module, and chapter 10b
# with the C runtime it runs on. This chapter turns the module into
# machine code — a big one in parts, compiled in parallel — and runs it,
# four ways:
#
# - **in this process**, through llvmlite's JIT: LLVM compiles the module to
#   machine code in memory, and Python calls its `main` — what `lc run`
#   does when Python calls it, in a notebook or a test;
# - **in a child process** of this one, for a host that must survive
#   whatever the program does: a notebook kernel, the REPL, the tests;
# - **as a native executable**: LLVM writes an object file, the system's C
#   compiler links it with the runtime, and the result runs without Python
#   (`lc build FILE.l -o EXE`) — or in the place of the process that made
#   it, which is what the command `lc run` does, keeping the executable for
#   the next time;
# - **one line at a time**, in `lc repl`, and one cell at a time with the
#   `%%L` cell magic in a notebook.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 10](10_llvm.ipynb), the LLVM module and its
# optimisation; [chapter 10b](10b_runtime.ipynb), the C runtime; the pipeline of stages of [chapter 4](04_pipeline.ipynb)
# (`lcompiler.pipeline`), with the optimiser of [chapter 9](09_shrink.ipynb)
# or without; [chapter 4a](04a_syntax.ipynb)'s parser and printer, with
# which the REPL cuts an entry into items and echoes a `data` declaration;
# [chapter 4b](04b_meaning.ipynb)'s reference interpreter, whose behaviour
# the compiled programs must match; [chapter 5](05_types.ipynb)'s type
# schemes, which the REPL prints; from the workshop, [appendix B](B_support.ipynb)'s target
# machine and child processes, and [appendix C](C_cli.ipynb)'s command
# `lc`.
#
# **Builds:** the module `lcompiler.driver` — `split`, `machine_code`,
# `jit`, `run_source`, `build`, `run_l` and the `%%L` magic,
# `Repl` and `repl` — which the commands `lc run` (now native), `lc build`
# and `lc repl` run; and the module `lcompiler.cache`, which keeps what
# `lc run` compiles. [Chapter 12](12_measuring.ipynb) measures what they
# produce.
#
# </div>
#
# ## What this chapter promises
#
# In the module `lcompiler.driver`, and the commands of `lcompiler.cli`
# that run it:
#
# - a module is compiled whole, or, when it is big, split into parts that
#   are optimised and compiled at the same time on the machine's cores; the
#   program behaves the same either way;
# - `lc run FILE.l` compiles to native code and runs it; the output, the
#   runtime errors and the exit status are the reference interpreter's
#   (`lc run --interp FILE.l` still runs chapter 4b's interpreter), but
#   for the difference the language reference states: a recursion deeper
#   than the interpreter's 2²⁰ calls, which compiled code may run to its end;
# - `lc build FILE.l -o EXE` writes an executable that behaves the same
#   (but when the reader of its output goes away early: the section on
#   what goes wrong);
# - `lc run` keeps the machine code it compiles: a program run again
#   unchanged is not compiled again, and behaves exactly as when it was
#   (`lc run --no-cache` compiles it all the same);
# - `run_l(text)` and the `%%L` magic run a program in a child process and
#   show its output as it is printed, then its errors; nothing an L program
#   does — a runtime error, an infinite recursion, exhausting memory, a time
#   limit — takes the kernel down; `%%L` cells share one session per
#   kernel, as the entries of the REPL do (`--fresh`: a program of its own,
#   `--reset`: a new session);
# - `lc repl` reads definitions and expressions one at a time and prints
#   each expression's value with its type: `9 : Int`; it has line editing
#   and a history on a terminal, the commands `:help`, `:type`, `:load`,
#   `:reset` and `:quit`, and survives Ctrl-C: at the prompt it abandons the
#   entry, while an entry runs it stops the program, and every definition
#   is kept.

# %%
#| default_exp driver

# %% [markdown]
# ## Machine code, in parts and in parallel
#
# Everything below starts from the same step: LLVM turns the back end's
# module into machine code — verify, optimise at O2, select instructions,
# allocate registers, emit an object file. For a small program that is
# most of the compiling (the time line later in this chapter shows it on
# `fib`); for a large one it is a good share of the compile time,
# and it grows with the amount of IR. [Chapter 12](12_measuring.ipynb)
# times every stage of the compiler on generated programs of 1,250 to
# 10,000 lines and records the medians in `bench/compile_speed.json`; its
# "machine code" is this section's work (O2 and code generation, on the
# parts the module was split into, in parallel). The cell prints the
# machine the file records, then the table:

# %%
import json
import sys
from pathlib import Path

sys.path.insert(0, "../bench")
from machine import lines as machine_lines  # noqa: E402  (bench/machine.py: the machine, in a few lines)

speed = json.loads(Path("../bench/compile_speed.json").read_text())
print("\n".join(machine_lines(speed["machine"])[:2]))
print(f"$ {speed['command']}")
print(f"{'lines':>6} {'parts':>6} {'machine code s':>15} {'all stages s':>13} {'share':>6}")
for row in speed["rows"]:
    total, machine = sum(row["seconds"].values()), row["seconds"]["machine code"]
    print(f"{row['lines']:6} {row['parts']:6} {machine:15.2f} {total:13.2f} {machine / total:6.0%}")

# %% [markdown]
# LLVM itself compiles a module on one thread, and llvmlite serialises its
# calls into LLVM with one lock, so Python threads would not help. What does
# help is what C compilers get from `make -j`: compile separate *parts* in
# separate processes. `split(module, parts)` cuts the module into parts and
# `machine_code` compiles each part in a forked child (the last in this
# process), all at the same time, and returns one object file per part. A
# module is split only when it is big — two parts need at least
# `2 × PART_SIZE` instructions — and into no more parts than there are
# cores, so the programs of the book and the tests, all small, are still
# compiled whole, in this process. (The table's programs of 2,500 lines and
# more were split in two, on a machine of two cores.)
#
# Splitting a module is not cutting its text in two. Every name a part
# uses must be either defined in it or declared in it, and every name must
# be defined once in the program. So each thing the module defines is one
# of three kinds:
#
# - **homed** — the program's functions, `main`, `lc_program`, the globals
#   that are written (`lc_globals`, a static cell) or that the runtime finds
#   by name (`lc_call_sites`), and the one block of each constructor without
#   fields (`nullary.1`: the compiled code tells `Nil` from a `Cons` by that
#   block's address, chapter 10): defined in exactly one part, chosen in module
#   order so that the parts have about the same number of instructions. A
#   part that uses a name homed elsewhere gets a *declaration*, and the name
#   becomes *exported*: its linkage goes from `linkonce_odr` or `internal`
#   (chapter 10's linkages: a definition that LLVM may drop once nothing in
#   its module uses it) to external, or its home part would be free to
#   delete it after inlining it everywhere there;
# - **copied** — private and internal things whose identity does not
#   matter: the printers, `lc_alloc`, string constants, static closures and
#   constructor values with fields (no L program can tell two copies apart; L has no
#   physical equality): each part that uses one, directly or through
#   another copy, gets its own copy;
# - **declared** — what the runtime defines (`lc_print_int`, `lc_hp`, …):
#   declared in every part.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: declarations copied from the definition's first line</p>
#
# A declaration carries the calling convention *and the attributes* of the
# definition. Forgetting either is a silent miscompilation, not an error: a
# call through a declaration without `fastcc` passes its arguments where the
# callee does not look for them, and a call to a function declared without
# `"no_callee_saved_registers"` assumes that the callee preserves `rbx` and
# friends, which it does not. Building the declaration from llvmlite's
# objects would mean listing what to carry over, and missing what a later
# chapter adds; taking the first line of the definition's text — the
# prototype llvmlite prints before the body — with `define` turned into
# `declare`, keeps everything.
#
# </div>
#
# What a split costs: a call from one part to another cannot be inlined,
# since LLVM sees only a declaration there — nor can a call through a
# closure whose code is in another part, which LLVM otherwise turns into a
# direct call when it sees the closure made. So the parts are runs of
# definitions taken in an order where each definition is followed by what
# it uses first (a depth-first walk from each definition in module order):
# a closure's code comes right after the function that makes the closure,
# not at the end of the module where closure conversion put it.
#
# First the three kinds, as predicates on llvmlite's globals, and the size
# of a definition, counted in instructions:

# %%
#| export
import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm
import llvmlite.ir as ir

from lcompiler import llvm_backend, pipeline
from lcompiler.errors import POLICY, CompileError, CompileErrors, Note, Source, Span
from lcompiler.support import Result, collector_paused, run_in_child, target_machine

PART_SIZE = 5_000                                 # instructions per part, at least
REFERENCE = re.compile(r'@"([^"]*)"')            # llvmlite quotes every global name


def declared(g) -> bool:
    return g.is_declaration if isinstance(g, ir.Function) else g.initializer is None


def copied(g) -> bool:
    return g.linkage in ("internal", "private") and (isinstance(g, ir.Function) or g.global_constant)


def instructions(g) -> int:
    return sum(len(block.instructions) for block in g.blocks) if isinstance(g, ir.Function) else 1


# %% [markdown]
# Then where each homed definition lives. `definition_order` is the
# depth-first walk that keeps a function and what it uses first together;
# `homes` cuts that order into runs of about equal numbers of instructions,
# one per part.

# %%
#| export
def definition_order(homed: dict, uses: dict) -> list:
    """The homed names, each followed by the homed names it uses, first (depth first, in module order)."""
    order, seen = [], set()
    for root in homed:
        stack = [root]
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                order.append(name)
                stack.extend(reversed([u for u in uses[name] if u in homed and u not in seen]))
    return order


def homes(order: list, homed: dict, parts: int) -> dict:
    """name -> the part it is defined in: runs of the order, of about equal numbers of instructions."""
    total, running, home = sum(map(instructions, homed.values())), 0, {}
    for name in order:
        home[name] = min(parts - 1, running * parts // max(total, 1))
        running += instructions(homed[name])
    return home


# %% [markdown]
# What each part holds: its homed definitions, and everything they use,
# transitively through the copies; a name used in a part that is not its
# home is *exported*.

# %%
#| export
def contents(home: dict, uses: dict, parts: int) -> tuple[list, set]:
    """The names each part needs, and the homed names used outside their home part."""
    needs, exported = [], set()
    for part in range(parts):
        todo = [name for name, p in home.items() if p == part]
        has = set(todo)
        while todo:                               # what the part's definitions use, transitively
            for used in uses[todo.pop()]:
                if used not in has:
                    has.add(used)
                    if used in home:
                        if home[used] != part:
                            exported.add(used)
                    elif used in uses:            # a copy: what it uses, it needs too
                        todo.append(used)
        needs.append(has)
    return needs, exported


# %% [markdown]
# `split` puts it together: what each global uses, the homes, the
# contents; exported names lose their `linkonce_odr` or `internal`; then
# each part is written as a module of its own — the types, every runtime
# declaration, its definitions, declarations of what it uses from other
# parts, and the module's metadata.
#
# What a function uses is read off its instructions' operands (a global,
# or a constant expression such as `ptrtoint ([1 x i64]* @"nullary.1" to i64)`,
# whose text names it), in the order its text would name them; a global variable's
# initializer is printed to find them. Printing is what costs here —
# llvmlite prints a module in Python, instruction by instruction — so it
# is put off: `plan` decides everything without printing a function, and
# `part_text` prints one part, only what that part holds. `machine_code`
# (below) calls `part_text` in the process that compiles the part, so the
# parts are printed in parallel too.

# %%
#| export
def references(g) -> list:
    """The names of the globals that g uses, in the order its text names them (with repeats)."""
    if not isinstance(g, ir.Function):
        return REFERENCE.findall(str(g))
    found = []
    for block in g.blocks:
        for instruction in block.instructions:
            if type(instruction) is ir.PhiInstr:
                operands = [value for value, _ in instruction.incomings]
            else:
                operands = instruction.operands
            for v in operands:
                if isinstance(v, ir.GlobalValue):
                    found.append(v.name)
                elif isinstance(v, ir.Constant) and (type(v) is ir.FormattedConstant
                                                     or not isinstance(v.type, ir.IntType)):
                    found.extend(REFERENCE.findall(str(v)))     # a constant expression names them
    return found


@dataclass
class Plan:
    """How a module is split: each global's home part, what each part needs, what is exported."""
    module: ir.Module
    parts: int
    home: dict
    needs: list
    exported: set


def plan(module: ir.Module, parts: int) -> Plan:
    values = list(module.globals.values())
    names = {g.name for g in values}
    uses = {g.name: [r for r in dict.fromkeys(references(g)) if r in names and r != g.name]
            for g in values if not declared(g)}
    homed = {g.name: g for g in values if not declared(g) and not copied(g)}
    home = homes(definition_order(homed, uses), homed, parts)
    needs, exported = contents(home, uses, parts)
    return Plan(module, parts, home, needs, exported)


def part_text(plan: Plan, part: int) -> str:
    """The LLVM text of one part of a split module."""
    module, has, home = plan.module, plan.needs[part], plan.home
    lines = [f'; ModuleID = "{module.name}, part {part + 1} of {plan.parts}"']
    lines += [t.get_declaration() for t in module.get_identified_types().values()]
    for g in module.globals.values():
        if declared(g):
            lines.append(str(g))
        elif g.name in has and home.get(g.name, part) == part:
            text = str(g)
            if g.name in plan.exported:             # external linkage, defined once
                text = re.sub(r'^(define |@"[^"]*" = )(?:linkonce_odr |internal )', r"\1", text, count=1)
            lines.append(text)
        elif g.name in has:
            lines.append(declaration(g))
    return "\n".join(lines + module._get_metadata_lines())


def split(module: ir.Module, parts: int) -> list[str]:
    """The LLVM text of `parts` modules that together define what module defines."""
    p = plan(module, parts)
    return [part_text(p, part) for part in range(parts)]


def declaration(g) -> str:
    """A declaration of g with its calling convention and attributes."""
    if isinstance(g, ir.Function):
        head = []
        g.descr_prototype(head)
        head = re.sub(r"^define (?:linkonce_odr |internal )?", "", "".join(head).strip())   # exported
        return "declare " + re.sub(r" !dbg !\d+", "", head)     # its scope (chapter 10) stays home
    preemption = f"{g.storage_class} " if g.storage_class else ""          # dso_local: see chapter 10
    kind = "constant" if g.global_constant else "global"
    return f"{g.get_reference()} = external {preemption}{kind} {g.value_type}"


# %% [markdown]
# ### A split, drawn
#
# A small program split by force, to see the kinds at work: two recursive
# functions (which the optimiser of [chapter 9](09_shrink.ipynb) does not
# inline away), a function that prints their results, two statements. The
# cell prints the definitions and declarations of each part (the first
# line of each, cut at 90 characters), leaving out the runtime's
# declarations, which every part has:

# %%
two = llvm_backend.to_llvm(Source("parts.l", """\
def fact(n) = if (n < 2) 1 else n * fact(n - 1)
def sum(n) = if (n == 0) 0 else n + sum(n - 1)
def show(n) = print(fact(n), sum(n))
show(5)
print(sum(100))
"""))
runtime = {g.name for g in two.globals.values() if declared(g)}
for text in split(two, 2):
    print("\n".join(line[:90] for line in text.splitlines() if line.startswith(("define", "declare", "; Module", "@"))
                    and not ((m := REFERENCE.search(line)) and m.group(1) in runtime)), "\n")

# %% [markdown]
# `show` is gone, inlined into the initialiser of the first statement,
# `init.statement.2`. Part 1 holds `fact`, `sum`, the first statement,
# `lc_program`, which runs the statements, and `lc_globals`; part 2 the
# second statement, `main`, and the tables of call sites (chapter 10) with
# their strings. The second statement calls `sum`: so `sum` is exported —
# its definition in part 1 lost `linkonce_odr`, which `fact`, used only at
# home, keeps — and part 2 declares it, with `fastcc` and the attribute.
# The other way round, `lc_program` in part 1 calls the second statement's
# initialiser, which part 1 declares; `main`, in part 2, calls
# `lc_program`, which part 2 declares; `lc_globals` is declared `external`
# in part 2. Both parts print an `Int`, so both have a copy of `print.Int`,
# internal to each; the strings are copied only where they are used. The picture
# reads the same from the parts' text: homed definitions in blue (exported
# ones say so), copies in green, declarations of another part's names in
# yellow, each with a dashed arrow to its home.

# %%
from lcompiler.drawing import Box, Picture

DEFINES = re.compile(r'^(define [^@]*|declare [^@]*)?@"([^"]*)"( = (external )?)?')


def part_boxes(module: ir.Module, texts: list) -> tuple[list, list, list]:
    """Panels of the parts (homed, copied, declared names), the arrows from each declaration to its
    home, and the picture's description."""
    kinds, where = {g.name: g for g in module.globals.values()}, {}
    found = []
    for part, text in enumerate(texts):
        homed, copies, declarations = [], [], []
        for line in text.splitlines():
            m = DEFINES.match(line)
            if not m or (m.group(1) is None and m.group(3) is None) or declared(kinds[m.group(2)]):
                continue
            name = m.group(2)
            if (m.group(1) or "").startswith("declare") or m.group(4):
                declarations.append(name)
            elif copied(kinds[name]):
                copies.append(name)
            else:
                homed.append(name)
                where[name] = part
        found.append((homed, copies, declarations))
    panels, arrows, words = [], [], []
    for part, (homed, copies, declarations) in enumerate(found):
        exported = {n for other in found for n in other[2]}
        column = [Box(f"{n}, exported" if n in exported else n, style="blue", name=f"{n}@{part}") for n in homed]
        strings = [n for n in copies if n.startswith("str.")]
        column += [Box(n, style="green") for n in copies if n not in strings]
        column += [Box(f"{len(strings)} strings, str.…", style="green")] if strings else []
        column += [Box(f"declare {n}", style="yellow", name=f"declare {n}@{part}") for n in declarations]
        arrows += [(f"declare {n}@{part}", f"{n}@{where[n]}") for n in declarations]
        for upper, lower in zip(column, column[1:]):   # a column: each box above the next
            upper.children.append(lower)
        panels.append((f"part {part + 1} of {len(found)}", column[:1]))
        words.append(f"part {part + 1}: defines {', '.join(homed)}; copies {', '.join(copies)}; "
                     f"declares {', '.join(declarations) or 'nothing of the other parts'}")
    return panels, arrows, ". ".join(words)


panels, arrows, words = part_boxes(two, split(two, 2))
Picture(panels, edges="none", arrows=arrows, alt=f"parts.l split in two. {words}.")

# %% [markdown]
# On a program of the size chapter 12 measures: its generated program of
# 1,250 lines (`bench/compile_speed.py`'s `program`), its IR, and what a
# split in two sends across the cut. The program is made of identical
# blocks, so its IR grows in proportion, and the 10,000-line program of the
# table has eight times as much. This one is just over `PART_SIZE`, and is
# compiled whole (the table's first row); split in two by force, one
# function is called across the cut:

# %%
import importlib.util

spec = importlib.util.spec_from_file_location("compile_speed", "../bench/compile_speed.py")
compile_speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compile_speed)
generated = compile_speed.program(1250)
module, _ = pipeline.compile_to("llvm", Source("generated.l", generated))
size = sum(map(instructions, module.functions))
print(f"{generated.count(chr(10))} lines of L, {str(module).count(chr(10))} lines of IR, {size} instructions "
      f"({size // PART_SIZE} × PART_SIZE)")
halves = split(module, 2)
defined = [set(re.findall(r'^define [^@]*@"([^"]*)"', text, re.M)) for text in halves]
for part, text in enumerate(halves):
    called = sorted(set(re.findall(r'^declare [^@]*@"([^"]*)"', text, re.M)) & defined[1 - part])
    print(f"part {part + 1} declares, of part {2 - part}'s functions: {', '.join(called) or 'none'}")

# %% [markdown]
# The parts are compiled by `object_code`: parse, verify, optimise (chapter
# 10's `optimise`), label the call sites and add the part's table of them
# (chapter 10's `call_site_table`: part k's table links to part k + 1's),
# emit. The target machine (`target_machine`, appendix B) differs between
# the JIT and executables in its code model and in making the code position
# independent for executables (next sections). `machine_code`
# decides how many parts, forks one child per part but the last, compiles
# the last itself meanwhile, and collects the children's object files
# through temporary files. A child that fails — a bug of this compiler —
# sends back its traceback, which the parent raises; an error or an
# interrupt in the parent meanwhile (the notebook's stop button) kills the
# children.

# %%
#| export
def object_code(text: str, level: int, executable: bool, part: int = 0, parts: int = 1) -> bytes:
    """An object file from LLVM text: verified, optimised at O<level>, given its part of the
    call-site table (chapter 10), compiled."""
    optimised = llvm_backend.optimise(text, level)
    return llvm_backend.target_machine(executable).emit_object(
        llvm_backend.call_site_table(optimised, part, parts))


def cores() -> int:
    """How many cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                        # not Linux
        return os.cpu_count() or 1


def parts_for(module: ir.Module) -> int:
    size = sum(map(instructions, module.functions))
    return max(1, min(cores(), size // PART_SIZE))


# %% [markdown]
# `machine_code` forks a child per part but the last, each of which
# compiles its part and writes the object file to a temporary folder, or
# its traceback beside it; the parent compiles the last part meanwhile,
# waits, and reads the files back in order.

# %%
#| export
def machine_code(module: ir.Module, level: int = 2, executable: bool = False,
                 parts: int | None = None) -> list[bytes]:
    """Object files that together hold the module's machine code."""
    parts = parts or parts_for(module)
    with collector_paused():
        split_plan = plan(module, parts) if parts > 1 else None

    def text(part: int) -> str:                   # printed by the process that compiles it
        with collector_paused():
            return str(module) if split_plan is None else part_text(split_plan, part)

    with tempfile.TemporaryDirectory() as tmp:
        children = []
        try:
            for i in range(parts - 1):
                pid = os.fork()
                if pid == 0:                      # a child: print, compile, write the object, exit
                    status = 1
                    try:
                        Path(tmp, f"{i}.o").write_bytes(object_code(text(i), level, executable, i, parts))
                        status = 0
                    except BaseException:
                        Path(tmp, f"{i}.err").write_text(traceback.format_exc())
                    finally:
                        os._exit(status)
                children.append(pid)
            last = object_code(text(parts - 1), level, executable, parts - 1, parts)
            statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
        except BaseException:                     # an error or an interrupt here: the children go too
            for pid in children:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            raise
        objects = []
        for i, status in enumerate(statuses):
            if status != 0:
                error = Path(tmp, f"{i}.err")
                raise RuntimeError(f"compiling part {i + 1}: " + (error.read_text() if error.exists() else "crashed"))
            objects.append(Path(tmp, f"{i}.o").read_bytes())
        return objects + [last]

# %% [markdown]
# ## Just in time, in this process
#
# llvmlite's MCJIT engine takes machine code — here the object files of
# `machine_code` — loads it into this process's memory, and resolves the
# external names of each — the runtime's `lc_print_int`, `lc_hp`, `lc_run`,
# and the names one part exports to another — among the objects it holds
# and the symbols of the libraries loaded into the process. So the runtime
# is compiled once into a shared library ([chapter 10b](10b_runtime.ipynb)'s
# `runtime_library("shared")`, cached on disk) and loaded with
# `load_library_permanently`; then `main` is a plain C function that
# `ctypes` can call.
#
# (The library is loaded once per process: after changing the runtime's C in
# chapter 10b, restart the kernel, or the old functions stay in use.)
#
# Running in this process is what `lc run` wants when Python calls it
# (`lc("run", …)` in a notebook): the program's output goes straight to
# the process's standard output, and when the program stops with a runtime
# error the runtime exits the process with status 2 — which is `lc run`'s
# exit status. Python's own buffered output is flushed first, so nothing
# comes out of order. (It does it through the cache of compiled programs,
# at the end of this chapter, whose `call_main` is these steps again:
# loading, then flushing, then calling `main`. The command `lc run`, whose
# process is its own, does better: an executable takes the place of the
# process, which then needs neither LLVM nor the compiler — the same
# section says how.)
#
# Ctrl-C, too, reaches the program directly. While `main` runs, Python
# cannot act on it: its handler of `SIGINT` only sets a flag, looked at
# between two bytecodes, and no bytecode runs until `main` returns — so an
# infinite loop used to ignore Ctrl-C. The runtime therefore handles
# `SIGINT` and `SIGTERM` itself while `lc_run` runs ([chapter 10b's section
# on stopping](10b_runtime.ipynb#stopping-ctrl-c-and-sigterm)): it writes out
# what the program printed and ends the process by the same signal, which
# the shell reports as status 130 (143 for `SIGTERM`). Ctrl-C during the
# compilation, in Python, is a `KeyboardInterrupt`, and `lc` ends with 130.

# %% [markdown]
# The runtime needs a C compiler, once, to be compiled (and `lc build` needs
# one at every build, to link). A machine without one is not a mistake in
# the program, nor a bug of `lc`; chapter 10b raises a `RuntimeError` for
# it, which `runtime` turns into a `ToolchainError`: an `OSError`, like the
# other failures of the system that `lc` reports as `lc: error: …` with exit
# status 1 (`lc`'s `main`, [appendix C](C_cli.ipynb)), keeping status 3
# for its own bugs.

# %%
#| export
from lcompiler import runtime as c_runtime


class ToolchainError(OSError):
    """The machine lacks a tool lc needs (a C compiler), or the tool failed."""


def runtime(kind: str) -> Path:
    """Chapter 10b's runtime library or object file, compiled for this machine."""
    try:
        return c_runtime.runtime_library(kind)
    except RuntimeError as error:                 # no C compiler, or one that fails on the runtime
        raise ToolchainError(str(error)) from None


def c_compiler() -> str:
    try:
        return c_runtime.c_compiler()
    except RuntimeError as error:
        raise ToolchainError(str(error)) from None


_runtime_loaded = False


def jit(objects: list[bytes]):
    """An execution engine holding machine code, and its main as a C function."""
    global _runtime_loaded
    if not _runtime_loaded:
        llvm.load_library_permanently(str(runtime("shared")))
        _runtime_loaded = True
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine())
    for code in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    main = ctypes.CFUNCTYPE(ctypes.c_int)(engine.get_function_address("main"))
    return engine, main


def compile_source(source: Source, level: int = 2, executable: bool = False,
                   parts: int | None = None, optimiser: bool = True) -> list[bytes]:
    """Source to machine code, in object files (CompileError for a program the compiler rejects):
    the pipeline's stages up to `llvm` (with chapter 9's optimiser, or without), then LLVM."""
    module, _ = pipeline.compile_to("llvm", source, optimiser)
    return machine_code(module, level, executable, parts)

# %% [markdown]
# ## In a child process: nothing reaches the host
#
# A notebook kernel, the REPL and the test suite must outlive the programs
# they run. So they run them in a forked child, as chapter 1 ran its
# programs of additions, with `run_in_child` of the workshop's support
# module ([appendix B](B_support.ipynb#running-in-a-child) has its code):
# the parent compiles (a `CompileError` is reported in the parent, as
# usual), forks, and the child calls `main` with its standard output sent
# to a pipe, which the parent reads as the program writes, and its standard
# error to a temporary file — a runtime error is written there; the parent
# reads both to the end, waits, and returns what happened as a `Result`,
# what the program wrote on each and its exit status. Whatever the
# program does — exit with a runtime error, overflow its stack, exhaust its
# heap, even crash — ends the child, never the parent. A program that never
# stops is stopped by `timeout` (seconds), or by an interrupt (the
# notebook's stop button), either of which kills the child.
#
# `run_source` is the whole path, from source to `Result`, with a compile
# error turned into a `Result` of status 1 as `lc` would print it.

# %%
#| export
def run_source(source: Source, timeout: float | None = None, level: int = 2,
               optimiser: bool = True, output=None) -> Result:
    """Compile and run a program in a child process; a compile error is a Result with status 1.
    With output, a function, each line the program prints is handed to it as it is printed."""
    try:
        objects = compile_source(source, level, optimiser=optimiser)
    except CompileError as error:
        return Result("", error.render() + "\n", 1)
    engine, main = jit(objects)

    def line_by_line() -> int:                   # in the child: the runtime flushes every line
        os.environ["LC_BUFFER"] = "line"
        return main()
    return run_in_child(main if output is None else line_by_line, timeout, output)

# %% [markdown]
# A program that prints, then fails; and one that never stops, stopped after
# half a second:

# %%
print(run_source(Source("half.l", 'print("one")\nprint(1 / (1 - 1))\n')))
print(run_source(Source("forever.l", "def spin(n) = spin(n + 1)\nspin(0)\n"), timeout=0.5))

# %% [markdown]
# ## Native executables
#
# `lc build` asks LLVM for an object file — machine code for this machine,
# position independent (chapter 10), so that the system linker may make a
# position-independent executable, a PIE — and links
# it with the runtime's object file, compiled by the system C compiler
# (`cc`), which also links the C library and POSIX threads. The executable
# needs nothing else: not Python, not LLVM.

# %%
#| export
import shutil


def build(source: Source, exe: str | Path, level: int = 2, parts: int | None = None,
          optimiser: bool = True) -> Path:
    """Compile a program to a native executable (CompileError for a rejected program; OSError for an
    executable that cannot be written, ToolchainError for a missing C compiler)."""
    objects = compile_source(source, level, executable=True, parts=parts, optimiser=optimiser)
    exe = Path(exe)
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / f"part{i}.o" for i in range(len(objects))]
        for file, code in zip(files, objects):
            file.write_bytes(code)
        linked = Path(tmp) / "program"
        done = subprocess.run([c_compiler(), *map(str, files), str(runtime("object")), "-o", str(linked),
                               "-lpthread"], capture_output=True, text=True)
        if done.returncode:
            raise ToolchainError(f"the C compiler could not link the program: {done.stderr.strip()}")
        try:                                      # linked where it surely can be, then copied
            shutil.copyfile(linked, exe)
            shutil.copymode(linked, exe)
        except OSError as error:
            raise OSError(error.errno, f"cannot write {exe}: {error.strerror}") from None
    return exe

# %% [markdown]
# The linker writes the executable into a temporary folder, from where it is
# copied to its place: so an output that cannot be written — a folder that
# does not exist, a file that is a folder — is an `OSError` that names the
# output, not a failure of the linker. One of the book's examples,
# `queens.l`, built and run as an executable (the runtime's object file is
# compiled once and cached; each build is an LLVM compilation and a link):

# %%
import contextlib  # noqa: F811  (the cell imports what it uses, as a module would)

with tempfile.TemporaryDirectory() as tmp:
    exe = build(Source("queens.l", open("../examples/queens.l").read()), Path(tmp) / "queens")
    done = subprocess.run([str(exe)], capture_output=True, text=True)
    print(done.stdout, end="")
    print("exit status", done.returncode)

# %% [markdown]
# ### The three ways, on one time line
#
# Each way starts with the same two steps — the stages of the pipeline, in
# Python, then LLVM's optimisation and code generation — and differs in
# what it does with the machine code. `lc run` called from Python loads
# it into this process and calls `main`. `run_l`, `%%L` and the REPL
# (later in this chapter) load it the same way and call `main` in a forked
# child, so a crash or an endless loop ends the child, not the host. `lc
# build` asks LLVM for position-independent code instead, links it with
# the runtime using the C compiler, and then the executable runs with no
# Python at all; the command `lc run` does the same, and the executable
# takes its process's place (its last step here is a child, as the
# notebook must survive it). The cell
# below times each step for `fib(30)`, one way after the other, once, and
# draws them, then prints the times and the machine they were taken on:
# the widths change from run to run (this cell's figures are not
# compared by the tests), the order of the steps does not. For a program
# this small, the two compiling steps are most of every line; the link is
# what a build adds, the fork what a child adds, and loading the code is
# the JIT's only cost.

# %% tags=["nbval-ignore-output"]
import time

import matplotlib.pyplot as plt
from IPython.display import display
from machine import describe  # noqa: E402  (bench/machine.py, on the path since the first cell)
from matplotlib.patches import Patch

TIMELINE = Source("fib.l", "def fib(n) = if (n < 2) n else fib(n - 1) + fib(n - 2)\nprint(fib(30))\n")


def timed(steps: list, what: str, run):
    """Run run(), append (what, seconds) to steps, and return what it returned."""
    start = time.perf_counter()
    result = run()
    steps.append((what, time.perf_counter() - start))
    return result


def timeline(source: Source) -> dict:
    """Each way of running source, with its steps (what, seconds), measured now, one after the other."""
    ways = {"lc run from Python: JIT, in this process": [], "run_l, %%L, REPL: a child": [],
            "lc build, the command lc run: an executable": []}
    for way, steps in ways.items():
        module = timed(steps, "front end, optimiser", lambda: pipeline.compile_to("llvm", source)[0])
        executable = "executable" in way
        objects = timed(steps, "LLVM", lambda: machine_code(module, executable=executable))  # noqa: B023  (called in this iteration)
        if not executable:
            engine, main = timed(steps, "load", lambda: jit(objects))  # noqa: B023  (called in this iteration)
            if way.startswith("lc run"):
                sys.stdout.flush()
                assert timed(steps, "run", main) == 0
            else:
                assert timed(steps, "fork, run", lambda: run_in_child(main, 60)).status == 0  # noqa: B023  (called in this iteration)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            files = [Path(tmp) / f"part{i}.o" for i in range(len(objects))]
            for file, code in zip(files, objects):
                file.write_bytes(code)
            exe = Path(tmp) / "fib"
            timed(steps, "link", lambda: subprocess.run(
                [c_compiler(), *map(str, files), str(runtime("object")), "-o", str(exe), "-lpthread"], check=True))  # noqa: B023  (called in this iteration)
            assert timed(steps, "exec, run", lambda: subprocess.run([str(exe)], capture_output=True)).returncode == 0  # noqa: B023  (called in this iteration)
    return ways


pipeline.compile_to("llvm", TIMELINE)                # once before timing: Python's first-call costs
machine = describe()                                 # its load average: at the start
ways = timeline(TIMELINE)
colours = {"front end, optimiser": "tab:blue", "LLVM": "tab:orange", "load": "tab:green", "run": "tab:red",
           "fork, run": "tab:red", "link": "tab:purple", "exec, run": "tab:red"}
longest = max(sum(seconds for _, seconds in steps) for steps in ways.values())
fig, ax = plt.subplots(figsize=(9, 2.9))
for y, (_way, steps) in enumerate(reversed(ways.items())):
    x = 0.0
    for what, seconds in steps:
        ax.broken_barh([(x * 1000, seconds * 1000)], (y - 0.35, 0.7), color=colours[what])
        if seconds > 0.25 * longest:                # a label only where it fits
            ax.text((x + seconds / 2) * 1000, y, what, ha="center", va="center", fontsize=8, color="white")
        x += seconds
ax.set_yticks(range(len(ways)), list(reversed(ways)))
ax.set_xlabel("milliseconds, from the source text to the end of the run")
ax.legend(handles=[Patch(color=c, label=w) for w, c in colours.items() if w not in ("fork, run", "exec, run")],
          loc="upper center", bbox_to_anchor=(0.5, -0.32), fontsize=8, ncol=5, frameon=False)
plt.tight_layout()
display(fig, metadata={"alt": "Three time lines, one per way of running fib(30): " + "; ".join(
    f"{way}: " + ", ".join(f"{what} {seconds * 1000:.0f} ms" for what, seconds in steps) for way, steps in ways.items())})
plt.close(fig)
for way, steps in ways.items():
    print(f"{way:44} " + "  ".join(f"{what} {seconds * 1000:.0f}" for what, seconds in steps)
          + f"  = {sum(s for _, s in steps) * 1000:.0f} ms")
print("\n".join(machine_lines(machine)[:2]))

# %% [markdown]
# ## L in a notebook: run_l and the %%L magic
#
# `run_l(text)` compiles a program given as text and runs it in a child: it
# prints the program's output as the program prints it (`run_source` hands
# each line to it: the child's runtime is told to flush at every line,
# `LC_BUFFER=line`), then its errors (compile or runtime, rendered as `lc`
# renders them), and returns the `Result`. A program that runs past its time
# limit is asked to stop with `SIGTERM`, on which its runtime writes out its
# output, and is killed a second later if it has not
# ([appendix B](B_support.ipynb#running-in-a-child)).
#
# The cell magic `%%L`, after `%load_ext lcompiler.driver`, runs its cell
# in the kernel's *session*, the REPL's of the next section: the definitions
# of earlier `%%L` cells are known, a cell's own definitions are shown with
# their types after what it prints, and a cell that ends with an expression
# shows its value with its type, unless its type is `Unit` (a cell that ends
# with `print(…)` shows only what it prints). A cell whose program fails is
# forgotten, but for one case: when the cell ends with an expression and
# only that expression fails, the definitions before it are kept (the
# cell is run as two, as the REPL below runs an entry).
# `%%L --fresh` runs the cell as a program of its own, as `run_l` does, and
# `%%L --reset` starts a new session with it. The line may also give a name
# for the cell's source (`%%L fib.l`, used in error messages) and a time
# limit (`--timeout 10`).

# %%
#| export
def run_l(text: str, name: str = "cell.l", timeout: float | None = None) -> Result:
    """Compile and run an L program given as text, safely: show its output as it comes, then its errors."""
    warnings, sink = [], POLICY["sink"]
    POLICY["sink"] = warnings
    try:
        result = run_source(Source(name, text), timeout, output=lambda text: print(text, end="", flush=True))
    finally:
        POLICY["sink"] = sink
    for w in warnings:                                  # as its errors: under the output
        print(w.render())
    if result.stderr:
        print(result.stderr, end="", file=sys.stdout)   # in a notebook: right under the output
    if result.status not in (0, 1, 2) and "stopped:" not in result.stderr:
        print(f"the program was stopped (exit status {result.status})")
    return result


SESSION: "Repl | None" = None           # the session of the %%L cells of this kernel (below)
MAGIC_LINE = "%%L [NAME.l] [--timeout SECONDS] [--fresh] [--reset]"


def l_cell_magic(line: str, cell: str) -> None:
    """%%L [NAME.l] [--timeout SECONDS] [--fresh] [--reset]: run the cell in the kernel's L session
    (--fresh: as a program of its own; --reset: in a new session)."""
    global SESSION
    words, name, timeout, fresh, reset = line.split(), "cell.l", None, False, False
    while words:
        w = words.pop(0)
        if w == "--timeout":
            seconds = words.pop(0) if words else ""
            try:
                timeout = float(seconds)
            except ValueError:
                timeout = -1.0
            if not 0 < timeout < float("inf"):
                print(f"%%L: error: --timeout needs a number of seconds, not {seconds!r}")
                return
        elif w in ("--fresh", "--reset"):
            fresh, reset = fresh or w == "--fresh", reset or w == "--reset"
        elif w.startswith("-"):
            print(f"%%L: error: unknown option {w} (the line is: {MAGIC_LINE})")
            return
        else:
            name = w
    try:
        if fresh:
            run_l(cell, name, timeout)
            return
        if SESSION is None or reset:
            SESSION = Repl()
        SESSION.timeout = timeout
        SESSION.enter(cell, name, cell=True)
    except OSError as error:                      # no C compiler, say
        print(f"%%L: error: {error.strerror or error}")


def load_ipython_extension(ipython) -> None:
    """`%load_ext lcompiler.driver` registers the %%L cell magic."""
    ipython.register_magic_function(l_cell_magic, magic_kind="cell", magic_name="L")

# %%
# %load_ext lcompiler.driver

# %% magic_args="fib.l" language="L"
# def fib(n) = if (n < 2) n else fib(n - 1) + fib(n - 2)
# print(fib(30))
# print((1, "two", Cons(3, Nil)))
# data List<a> { Cons(a, List<a>)
#   Nil }

# %% [markdown]
# An error, and the same kernel carries on. (The recursion is
# `2 * down(n + 1) + 1` rather than `1 + down(n + 1)` on purpose: LLVM's
# tail-recursion elimination turns the latter into a loop with an
# accumulator — chapter 10 showed it on `length` — and the program then runs
# forever in constant stack, which is also a correct way to not terminate.)

# %% magic_args="deep.l" language="L"
# def down(n) = 2 * down(n + 1) + 1
# print("going down")
# print(down(0))

# %% magic_args="--timeout 1" language="L"
# def spin(n) = spin(n + 1)
# spin(0)

# %% language="L"
# print(1 + true)

# %% [markdown]
# A mistake in the magic's own line is reported as such, and nothing runs:

# %% magic_args="--timeout abc" language="L"
# print("not run")

# %%
_ = run_l("print(\"the kernel is still here\")")

# %% [markdown]
# A program that prints, then loops: its line is shown, then the time
# limit's message (the runtime wrote its output when `SIGTERM` came).

# %%
_ = run_l('print("started")\ndef spin(n) = spin(n + 1)\nspin(0)', timeout=2)

# %% [markdown]
# The session: a definition in one cell, used in the next; `--fresh` does
# not see it, and `--reset` forgets it.

# %% magic_args="--reset" language="L"
# def x = 20
# data Shape { Circle(Int); Rect(Int, Int) }

# %% language="L"
# x + 22

# %% magic_args="--fresh" language="L"
# print(x)

# %% [markdown]
# ## The REPL
#
# `lc repl` reads an entry — a definition, a `data` declaration, or an
# expression — compiles it with everything accepted before, and runs it. An
# expression's value is printed with its type, `9 : Int`; a definition is
# kept (and its type shown, a `data` declaration echoed on one line) if it
# compiles and runs; an entry with an error shows the error and is
# forgotten. An entry may span lines: while what has been typed is an
# unfinished program (the parser stops at its end), the REPL asks for more
# with `...`. utop, ghci and Python's REPL are the models: what they offer
# a person at a terminal, this one offers too — the line editing and a
# history kept between sessions, commands that start with `:`, and Ctrl-C
# that stops what is under way without ending the session.
#
# How it works, in the simplest way that is right: the REPL keeps the text
# of the definitions accepted so far. For an expression `e` it compiles
# those definitions followed by `def it = { e }` and `print(it)` (the
# braces make any statement an expression), and looks up
# the type of `it` among the type schemes of chapter 5. An entry of
# several items — definitions, then an expression — is run as two: the
# definitions first, kept, then the expression. Everything runs in a
# child process, so a runtime error or an infinite recursion costs the entry
# and never the session. Since the earlier definitions run again at every
# entry, the REPL remembers how much output they produce (L programs read no
# input, so they print the same thing every time) and shows only what is
# new, as the program prints it. The cost is that each entry recompiles the
# whole session: fine for a session typed by hand. And if the compiler
# itself fails on an entry — a bug in `lc`, which `lc run` would report as
# an internal compiler error with status 3 — the session says so in one
# line, as `lc` does, drops the entry, and goes on with what it had.

# %%
#| export
import re

from lcompiler import syntax, types

KEPT = (syntax.Def, syntax.Data, syntax.ExceptionDecl, syntax.Let, syntax.VarDecl)   # items that bind names: kept


@dataclass
class Entry:
    """The text of an entry, or of its last part: `before` is the part run first, from the
    session's line `before_line` on."""
    name: str
    text: str
    before: str = ""
    before_line: int = 0


def print_text(text: str) -> None:
    print(text, end="", flush=True)


class Repl:
    """A session: the text accepted so far, how much it prints, and where what it shows goes."""

    NAME = "it"

    def __init__(self, write=print_text, timeout: float | None = None):
        self.write, self.timeout = write, timeout
        self.reset()

    def reset(self) -> None:
        self.definitions, self.printed = "", 0

    def enter(self, text: str, name: str = "<repl>", cell: bool = False) -> None:
        """Run one complete entry, its output shown as it comes: what it defines is kept; an
        expression at its end is shown with its type (in a cell, unless its type is Unit). A
        failure of lc itself is said in one line, as `lc` says it, and the session goes on
        without the entry."""
        try:
            self.enter_items(text, name, cell)
        except (RecursionError, MemoryError) as error:
            self.write("error: " + ("the entry is nested too deeply for this compiler"
                                    if isinstance(error, RecursionError) else "out of memory") + "\n")
        except Exception as error:         # a bug in lc, not in the entry: said, never a traceback
            self.write(f"internal compiler error: {type(error).__name__}: {error}\n"
                       "(the entry is dropped; the session goes on)\n")

    def enter_items(self, text: str, name: str, cell: bool) -> None:
        try:
            items = syntax.parse(Source(name, text)).items
        except CompileError as error:
            self.write(error.render() + "\n")
            return
        if not items or isinstance(items[-1], KEPT):
            self.define(Entry(name, text), items)
            return
        start = items[-2].span.end if len(items) > 1 else 0   # (a node's span may not start at its start)
        start, line = len(text) - len(text[start:].lstrip(" \t\n;")), self.definitions.count("\n")
        if items[:-1] and not self.define(Entry(name, text[:start]), items[:-1]):
            return
        line_start = text.rfind("\n", 0, start) + 1        # columns as in the entry: padded
        self.evaluate(Entry(name, " " * (start - line_start) + text[start:], text[:line_start], line),
                      show_unit=not cell)


# %% [markdown]
# What an entry shows. The session's output so far is printed again at each
# run, so the output goes through a `Shown`, which drops the first
# `printed` characters and writes the rest as the program prints it; for an
# expression it holds back the last newline, after which the value's type
# goes. The errors are shown as if the entry were the whole program: a
# compile error's spans are moved into the entry's text, and a runtime
# error's line numbers are counted from the entry's first line.

# %%
#| export
class Shown:
    """The output of a run, written as it comes: without its first `skip` characters and, with
    `hold`, without its last newline, until `end` says whether a value's type follows."""

    def __init__(self, write, skip: int, hold: bool):
        self.write, self.skip, self.hold, self.held = write, skip, hold, False

    def __call__(self, text: str) -> None:
        cut = min(self.skip, len(text))
        text, self.skip = text[cut:], self.skip - cut
        if text and self.held:
            text, self.held = "\n" + text, False
        if text and self.hold and text.endswith("\n"):
            text, self.held = text[:-1], True
        if text:
            self.write(text)

    def end(self, value_follows: bool = False) -> None:
        if self.held and not value_follows:
            self.write("\n")
        self.held = False

# %% [markdown]
# `run` compiles and runs the session with the entry, its output through a
# `Shown`: it types the program first, to show the entry's warnings (and
# only the entry's: the session's were shown when they were entered), then
# compiles it again to run it with no warning to show. A Ctrl-C while it
# runs ends the held line before it goes on up to the loop.

# %%
#| export
class Repl(Repl):
    def run(self, entry: Entry, program: str, hold: bool = False):
        """Compile and run the program (the session, then the entry's text), its output shown as
        it comes: (result, typing); None for typing if the program does not type."""
        source, warnings, sink = Source(entry.name, program), [], POLICY["sink"]
        POLICY["sink"] = warnings              # the warnings of the whole session, shown: the entry's
        try:
            _, typing = types.check_types(source)
        except CompileError as error:
            return Result("", self.locate(error, entry, program), 1), None
        finally:
            POLICY["sink"] = sink
        at = program.index(entry.text, len(self.definitions))
        new = [w for w in warnings if w.span.start >= at]
        if new:
            self.write(self.locate(CompileErrors(new) if len(new) > 1 else new[0], entry, program))
        shown = Shown(self.write, self.printed, hold)
        POLICY["sink"] = []                    # compiled again to run: the warnings are shown already
        try:
            result = run_source(source, self.timeout, output=shown)
        except KeyboardInterrupt:
            shown.end()
            raise
        finally:
            POLICY["sink"] = sink
        shown.end(value_follows=hold and result.status == 0)
        return result, typing

    def locate(self, error: CompileError, entry: Entry, program: str) -> str:
        """Render the errors in the entry, and their notes, as if the entry were the whole source."""
        at, original = program.index(entry.text, len(self.definitions)), Source(entry.name, entry.before + entry.text)

        def moved(span):
            if not at <= span.start <= at + len(entry.text):
                return span
            shift = at - len(entry.before)
            return Span(original, span.start - shift, min(span.end - shift, len(original.text)))
        return "".join(type(e)(e.message, moved(e.span), [Note(n.message, moved(n.span)) for n in e.notes])
                       .render() + "\n" for e in getattr(error, "errors", [error]))

    def relocate(self, result: Result, entry: Entry, program: str) -> str:
        """A runtime error's line numbers, counted from the entry's first line (a compile error's
        are already: `locate`); on a terminal, the place is painted (appendix A's colour)."""
        if result.status == 1:
            return result.stderr
        before = program[:program.index(entry.text, len(self.definitions))].count("\n")

        def moved(m):
            line = int(m.group(2))
            if line > before:                       # in the entry's text
                line = line - before + entry.before.count("\n")
            elif entry.before and line > entry.before_line:     # in the part of it run first
                line -= entry.before_line
            else:
                return m.group(0)
            return f"{m.group(1)}{entry.name}:{line}:"
        return re.sub(rf"^((?:\x1b\[[0-9;]*m)?){re.escape(entry.name)}:(\d+):", moved, result.stderr, flags=re.M)

# %% [markdown]
# The two kinds of entry. A definition (or a statement, or several) is
# run with the session before it; if it runs, the session keeps it, and
# each new name is shown with its type (chapter 5's scheme). An expression
# is wrapped as `def it = { … }` and printed; its type follows its value on
# the same line — unless it is `Unit` and the entry came from `%%L`, where
# a cell of statements should not end with `()`.

# %%
#| export
class Repl(Repl):
    def define(self, entry: Entry, items: list) -> bool:
        """Run the session with the entry's definitions (and statements); keep them if they run."""
        program = self.definitions + entry.text + "\n"
        result, typing = self.run(entry, program)
        if result.status != 0:
            self.write(self.relocate(result, entry, program))
            return False
        self.definitions, self.printed = program, len(result.stdout)
        for item in items:
            if isinstance(item, syntax.Def):
                self.write(f"{item.name.name} : {typing.show(item.name.name)}\n")
            elif isinstance(item, (syntax.Data, syntax.ExceptionDecl)):
                self.write(data_text(item) + "\n")
        return True

    def evaluate(self, entry: Entry, show_unit: bool = True) -> None:
        """Run the session with `def it = { entry }`, and show it with its type."""
        program = self.definitions + f"def {self.NAME} = {{\n" + entry.text + "\n}\n"
        show = show_unit or self.type_of(entry, program) not in ("Unit", None)
        if show:
            program += f"print({self.NAME})\n"
        result, typing = self.run(entry, program, hold=show)
        if result.status != 0:
            self.write(self.relocate(result, entry, program))
        elif show:
            self.write(f" : {typing.show(self.NAME)}\n")

    @staticmethod
    def typed_quietly(source: Source):
        """check_types, its warnings dropped: `run` shows each entry's warnings, once."""
        sink, POLICY["sink"] = POLICY["sink"], []
        try:
            return types.check_types(source)
        finally:
            POLICY["sink"] = sink

    def type_of(self, entry: Entry, program: str) -> str | None:
        try:
            return self.typed_quietly(Source(entry.name, program))[1].show(self.NAME)
        except CompileError:
            return None                         # run() shows the error


def data_text(item) -> str:
    """A data or exception declaration as L writes it (chapter 4a's pretty printer), on one line."""
    head, *constructors = syntax.pretty(item).split("\n")
    return head + (" " + "; ".join(c.strip() for c in constructors[:-1]) + " }" if constructors else "")


# %% [markdown]
# The loop. Lines are gathered into an entry while `unfinished` says the
# text so far is the beginning of a program cut short — the parser's error
# is at its very end — and each complete entry goes to the session. A line
# that starts with `:` is a command of the REPL itself (`COMMANDS`). The
# loop reads through a function, `read(prompt)`, that raises
# `KeyboardInterrupt` at Ctrl-C and `EOFError` at Ctrl-D, as Python's
# `input` does: Ctrl-C at the prompt abandons the entry under way, Ctrl-D
# abandons a half-typed entry, and on an empty prompt ends the session.
# Ctrl-C while an entry runs reaches the program too (the terminal sends it
# to every process of the foreground job): the runtime stops the program,
# `run_in_child` gets the interrupt, and the loop says so and asks for the
# next entry, the session as it was before the entry.

# %%
#| export
from difflib import get_close_matches

COMMANDS = {
    ":help": "this list",
    ":type EXPR": "the type of an expression, without running it",
    ":load FILE": "run an L file in the session, and keep its definitions",
    ":reset": "forget every definition",
    ":quit": "end the session (Ctrl-D does too)",
}


def unfinished(text: str) -> bool:
    """Is text the beginning of a program, cut short (an error at its very end)?"""
    try:
        syntax.parse(Source("<repl>", text))
    except CompileError as error:
        return error.span.start >= len(text.rstrip())
    return False


class Repl(Repl):
    def command(self, line: str) -> bool:
        """Run a command of the REPL; False for :quit."""
        word, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if word == ":quit":
            return False
        if word == ":help":
            self.write("".join(f"  {c:12} {text}\n" for c, text in COMMANDS.items())
                       + "  Ctrl-C stops the entry being typed or run; an expression shows its value : type\n")
        elif word == ":reset":
            self.reset()
            self.write("the session is empty\n")
        elif word == ":type" and rest:
            program = self.definitions + f"def {self.NAME} = {{\n" + rest + "\n}\n"
            try:
                self.write(f"{rest} : {self.typed_quietly(Source('<repl>', program))[1].show(self.NAME)}\n")
            except CompileError as error:
                self.write(self.locate(error, Entry("<repl>", rest), program))
        elif word == ":load" and rest:
            try:
                text = Path(rest).read_text()
            except (OSError, UnicodeDecodeError) as error:
                self.write(f":load: cannot read {rest}: {getattr(error, 'strerror', None) or error}\n")
            else:
                self.enter(text, name=rest, cell=True)
        else:
            names = [c.split()[0] for c in COMMANDS]
            near = get_close_matches(word, names, n=1)
            needs = next((c for c in COMMANDS if c.split()[0] == word), None)
            self.write(f"usage: {needs}\n" if needs else f"unknown command {word}"
                       + (f" (did you mean {near[0]}?)" if near else "") + "; :help lists the commands\n")
        return True


# %% [markdown]
# The loop itself gathers lines into an entry until the entry is complete:
# a line that starts with `:` is a command at once; otherwise `unfinished`
# asks the parser whether the text so far is a program cut short (its
# error falls at the very end), and if so the loop asks for another line,
# with the prompt `...`. An empty line on its own is skipped.

# %%
#| export
def session_loop(read, write, timeout: float | None = None) -> None:
    """Read lines with read(prompt) until it raises EOFError on an empty entry; write what the
    session shows."""
    session, entry = Repl(write, timeout), ""
    while True:
        try:
            line = read("... " if entry else "L> ")
        except KeyboardInterrupt:                 # Ctrl-C at the prompt: the entry is abandoned
            write("\n")
            entry = ""
            continue
        except EOFError:
            if not entry:
                return
            write("\n")                           # Ctrl-D on a continuation line: abandoned
            entry = ""
            continue
        entry += line if line.endswith("\n") else line + "\n"
        if not entry.strip():
            entry = ""
            continue
        try:
            if entry.lstrip().startswith(":"):
                if not session.command(entry):
                    return
            elif unfinished(entry):
                continue
            else:
                session.enter(entry.rstrip("\n"))
        except KeyboardInterrupt:                 # Ctrl-C while the entry ran
            write("\nInterrupted.\n")
        entry = ""


# %% [markdown]
# `repl` is the loop fed from any iterator of lines — a file, a pipe, a
# list in a test — with the prompts written (or not) and the end of the
# lines taken for Ctrl-D:

# %%
#| export
def repl(lines, write, prompt: bool = True, timeout: float | None = None) -> None:
    """Read entries from an iterator of lines (a file, a pipe, a list); write what the session shows."""
    lines = iter(lines)

    def read(text: str) -> str:
        if prompt:
            write(text)
        line = next(lines, None)
        if line is None:
            if prompt:
                write("\n")
            raise EOFError
        return line
    session_loop(read, write, timeout)


# %% [markdown]
# On a terminal, `lc repl` reads with Python's `input`, which uses the
# standard library's `readline` when it is loaded: the arrow keys move in
# the line and through the history, Ctrl-R searches it. The history is
# kept between sessions in a file, `$XDG_STATE_HOME/lc_history` when that
# variable is set, else `~/.lc_history`. From a pipe, nothing of this: the
# lines are read as they are, and no history is written.

# %%
#| export
def history_file() -> Path:
    state = os.environ.get("XDG_STATE_HOME")
    return Path(state) / "lc_history" if state else Path.home() / ".lc_history"


def terminal_repl(timeout: float | None = None) -> None:
    """The REPL on a terminal: line editing, and the history, kept between sessions."""
    try:
        import readline
    except ImportError:                           # a Python built without it: plain input
        readline = None
    if readline is not None:
        readline.set_history_length(1000)
        with contextlib.suppress(OSError):
            readline.read_history_file(history_file())
    try:
        session_loop(input, print_text, timeout)
        print()
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                history_file().parent.mkdir(parents=True, exist_ok=True)
                readline.write_history_file(history_file())

# %% [markdown]
# A session, driven from a list of lines as the tests drive it, with a
# command or two:

# %%
session = ["def square(x) = x * x",
           "square(12)",
           "data Shape { Circle(Int)",
           "  Rect(Int, Int) }",
           "def area = { Circle(r) -> 3 * square(r); Rect(w, h) -> w * h }",
           "(area(Circle(2)), area(Rect(2, 5)))",
           "def id(x) = x",
           "id(Rect(1, 2))",
           "area(true)",
           "square(1 / 0)",
           "print(\"printed\")",
           ":type area",
           ":tpye id",
           "def d = 4\nprint(\"d is defined\")\nd * square(d)"]
repl(iter(session), lambda text: print(text, end=""), prompt=False)

# %% [markdown]
# ## The commands
#
# `lc run` now compiles natively and runs the machine code in its own
# process — as an executable that takes the process's place — through the
# cache of compiled programs of the next section (`lcompiler.cache`'s
# `run`); the reference interpreter
# stays one flag away, `lc run --interp`, for comparison and for debugging
# the compiler. `lc build` writes an executable (`build`). `lc repl` starts
# a session on the terminal (`repl`), with a prompt when its input is a
# terminal (`terminal_repl`, with `readline`), and without when it reads a
# file or a pipe — the way the tests drive it. Each command is a few lines around this chapter's functions;
# they are in [appendix C](C_cli.ipynb#the-commands), with the rest of the
# command line, and `lc --help` lists the runtime's environment variables
# there.

# %% [markdown]
# From the shell — here through `subprocess`, because a program run by
# `lc run` writes to the process's own standard output, below Python:

# %%
lc_path = str(Path(sys.executable).parent / "lc")
with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("hello.l").write_text('print("Hello from native code", 6 * 7)\nassert(1 > 2)\n')
    for argv in (["run", "hello.l"], ["run", "--interp", "hello.l"], ["build", "hello.l", "-o", "hello"]):
        done = subprocess.run([lc_path, *argv], capture_output=True, text=True)
        print(f"$ lc {' '.join(argv)}\n{done.stdout}{done.stderr}(exit status {done.returncode})\n")
    done = subprocess.run(["./hello"], capture_output=True, text=True)
    print(f"$ ./hello\n{done.stdout}{done.stderr}(exit status {done.returncode})")

# %%
with tempfile.TemporaryDirectory() as tmp:
    done = subprocess.run([lc_path, "repl"], input="def x = 6\nx * 7\nx.{ 6 -> \"six\"; _ -> \"other\" }\n",
                          capture_output=True, text=True)
    print(done.stdout, end="")

# %% [markdown]
# Ctrl-C, as the terminal sends it: `SIGINT` to `lc run` on a program that
# prints a line and then loops. The line is read first (`LC_BUFFER=line`
# makes the runtime write each line as it prints it, as on a terminal),
# then the signal is sent; the process ends at once, killed by `SIGINT`,
# which `subprocess` reports as `-2` and a shell as 130. `lc repl` and
# `lc run -` (the program on standard input) appear in appendix C;
# `tests/test_terminal.py` drives `lc repl`, and Ctrl-C typed into `lc run`,
# through a pseudo-terminal, and `tests/test_cli.py` gives `lc run -` its
# program through a pipe.

# %%
with tempfile.TemporaryDirectory() as tmp:
    Path(tmp, "loop.l").write_text('print("step 1")\ndef spin(n) = spin(n + 1)\nspin(0)\n')
    child = subprocess.Popen([lc_path, "run", str(Path(tmp, "loop.l"))], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "LC_BUFFER": "line"})
    first = child.stdout.readline()
    child.send_signal(signal.SIGINT)
    print(f"{first}{child.stdout.read()}(exit status {child.wait()})")

# %% [markdown]
# ## Running again without compiling: a cache of programs
#
# `lc run` compiles its program every time, though a program is mostly run
# unchanged, again and again, while its author looks at what it prints or
# edits another file. Compiling is much of the time `lc run` takes:
# loading the compiler's modules, then the stages and LLVM (the end of this
# section times `lc run` with and without compiling; chapter 12 measures
# the stages on big programs). So `lc run`
# keeps what it compiles, in a folder, under a name that is a hash of
# everything it depends on: the command `lc run` keeps the executable that
# `build` links, and `lc run` called from Python the object files that
# `machine_code` makes for the JIT. Running the same program again finds
# the entry and runs it without compiling — without even loading the
# compiler, and, for the command, without loading LLVM.
#
# The contract: a program is run from the cache only if nothing it was
# compiled from has changed, and then it behaves exactly as if it had been
# compiled again — the same output, the same messages, the same exit
# status, the same signals. What the machine code depends on, and so what
# the name of an entry is the hash of:
#
# - the program: its text, and its name, which the runtime errors compiled
#   into it quote (`hello.l:2:1: runtime error: …`);
# - the compiler: every file of the package `lcompiler`, its Python modules
#   and the runtime's C, and the version of llvmlite, which brings its LLVM,
#   and the machine's kind (`x86_64`): editing a chapter and exporting it is
#   a new compiler, and every program is compiled again;
# - the options: `-O`, and those that shape the warnings, `-Werror` and
#   the colour;
# - the kind of entry: an executable, or object files for the JIT;
# - the environment: `CC`, and every variable whose name starts with `LC_`
#   (but `LC_CACHE`, which says where the cache is). Most of them are read
#   by the runtime when the program runs, not by the compiler, so this is
#   more than needed: changing `LC_STACK_SIZE` costs a compilation. But it
#   is safe without anyone having to remember, when a chapter lets a
#   variable steer the compiler (chapter 10's `LC_EXCEPTIONS` does), to add
#   it to a list here.
#
# An entry holds the executable or the object files, and the warnings that compiling the
# program wrote, as they were written: a program run from the cache says
# them again, so that what `lc run` shows does not depend on whether it
# compiled. It starts with a line naming the format, then the SHA-256 of the
# rest, which is checked when it is read: a truncated entry, a corrupt one,
# one from another version of the format, is a miss, and the program is
# compiled again and the entry written anew. An entry is written into a
# temporary file of the folder, then renamed to its name, which is atomic:
# two `lc run` at the same time never see half an entry. The folder keeps
# the `ENTRIES_KEPT` entries used last (a hit touches its entry), so that it does
# not grow without end; a temporary file that an `lc` killed while writing
# left behind is removed after an hour. A cache that cannot be written — a full disk, a
# folder `lc` may not write into — is a cache that keeps nothing; the program
# runs all the same. (When the cache's folder cannot even be made — a
# read-only home — chapter 10b's cache moves to a private folder under
# `/tmp`, and the programs go there with it.)
#
# <div class="admonition note">
# <p class="admonition-title">Design note: which cache, where, and how to turn it off</p>
#
# **What is kept.** For the command, an executable, run in the command's
# own place: `os.execve` replaces the program the process runs — Python,
# running `lc` — by the executable, read from a file in memory
# (`os.memfd_create`), so that nothing is written to disk to run it. The
# process stays the same: its id, its open files, its environment, the
# signals it ignores (Python ignores `SIGPIPE`, and so the program goes
# on quietly when the reader of its output goes away, as it did under the
# JIT); and its exit status and the signal that ends it are
# the program's own, with nothing to carry back from a child. A hit then
# loads neither the compiler nor llvmlite's binding, the LLVM library that
# a JIT needs, whose loading was most of what a hit cost when the cache
# kept object files for the command too (the timings at the end of this
# section print it beside the rest); a miss pays the C compiler's link
# instead of loading the object files into the JIT. From Python —
# `lc("run", …)` in a notebook, a test — `lc run` must not replace the
# process it was called in, a notebook's kernel, and keeps and loads
# object files, as this chapter's JIT does. `main` tells the two apart by
# how it was called ([appendix C](C_cli.ipynb)): with no arguments, it is
# the command, whose arguments are the process's own. On a system without
# `memfd_create` (other than Linux), or one set to refuse running a file
# in memory, the command does as Python's call does.
#
# **Where.** [Chapter 10b](10b_runtime.ipynb) already keeps the compiled
# runtime under `$LC_CACHE` (by default `~/.cache/lcompiler`); the programs
# go in its folder `programs`. A second variable, `LC_CACHE_DIR` say, was
# the other choice; one is better: `LC_CACHE` pointed at an empty folder is
# how the tests and the section below show `lc` on a machine where nothing
# has been compiled yet, and with two variables such a machine would still
# run, from the other cache, a program that no C compiler on it could have
# compiled.
#
# **Off.** `lc run --no-cache` compiles, runs, and keeps nothing. An empty
# `LC_CACHE` cannot say it, since it already means the default folder.
#
# </div>
#
# The code is a module of its own, `lcompiler.cache`, which imports no stage
# of the compiler: a hit of the command reads the executable and runs it;
# a hit from Python loads llvmlite's binding, the runtime and the object
# files (with the small modules `errors` and `support` of the appendices),
# and no stage; a miss imports this chapter's `driver` and compiles, with
# `build` or `compile_source`. First the name of an entry: the hash of the
# compiler, then of everything else.

# %%
#| export cache
"""lc run's cache of compiled programs: a program run again unchanged is not compiled again."""

import hashlib
import os
from pathlib import Path

import lcompiler

FORMAT = b"lc compiled program, format 1\n"      # the first line of an entry
PACKAGE = Path(lcompiler.__file__).parent         # the compiler's files


def compiler_digest(package: Path = PACKAGE) -> bytes:
    """The SHA-256 of the compiler: the package's Python modules and the runtime's C, names and contents."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".c", ".h")):
        digest.update(f"{path.relative_to(package)}\0{path.stat().st_size}\0".encode() + path.read_bytes())
    return digest.digest()


def entry_name(source, optimiser: bool, policy: dict, environment: dict, package: Path = PACKAGE,
               kind: str = "objects") -> str:
    """The name of a program's entry: a hash of what its machine code depends on, and of its kind
    ("objects" for the JIT, "executable" for the command lc)."""
    import llvmlite
    settings = sorted((name, value) for name, value in environment.items()
                      if (name.startswith("LC_") and name != "LC_CACHE") or name == "CC")
    digest = hashlib.sha256(FORMAT + compiler_digest(package))
    digest.update(repr((llvmlite.__version__, os.uname().machine, source.name, source.text, optimiser,
                        policy["color"], policy["warnings_are_errors"], settings, kind)).encode())
    return digest.hexdigest()

# %% [markdown]
# The hello program of the section above, and what changes its name: an
# edit, an option, a variable of the environment, a compiler that is not
# the same (a copy of the package with one character added to one file);
# and what does not — running it again, or moving the cache:

# %%
import shutil  # noqa: F811  (the cell imports what it uses, as a module would)

from lcompiler.cache import PACKAGE, entry_name  # noqa: F811  (the cell imports what it uses, as a module would)

hello = Source("hello.l", 'print("Hello from native code", 6 * 7)\n')
usual = {"color": False, "warnings_are_errors": False}
first = entry_name(hello, True, usual, {})
with tempfile.TemporaryDirectory() as tmp:
    copy = Path(shutil.copytree(PACKAGE, Path(tmp, "lcompiler")))
    (copy / "driver.py").write_text((copy / "driver.py").read_text() + "\n")
    names = {"the same program, again": entry_name(hello, True, usual, {}),
             "LC_CACHE elsewhere": entry_name(hello, True, usual, {"LC_CACHE": "/elsewhere", "HOME": "/x"}),
             "edited": entry_name(Source("hello.l", 'print("Hello from native code", 6 * 8)\n'), True, usual, {}),
             "named ./hello.l": entry_name(Source("./hello.l", hello.text), True, usual, {}),
             "-O0": entry_name(hello, False, usual, {}),
             "-Werror": entry_name(hello, True, {**usual, "warnings_are_errors": True}, {}),
             "LC_STACK_SIZE=1G": entry_name(hello, True, usual, {"LC_STACK_SIZE": "1G"}),
             "CC=clang": entry_name(hello, True, usual, {"CC": "clang"}),
             "another compiler": entry_name(hello, True, usual, {}, package=copy)}
for what, name in names.items():
    print(f"{what:24} {'the same entry' if name == first else 'another entry'}")

# %% [markdown]
# An entry, written and read. `pack` lays out the warnings and the object
# files, each after its length, behind the line of the format and the hash
# of what follows; `unpack` gives them back, or `None` for anything that is
# not an entry as `pack` writes it. `keep` writes one atomically, then
# removes the entries used least recently beyond `ENTRIES_KEPT`; `kept` reads one,
# and touches it.

# %%
#| export cache
import contextlib
import struct
import tempfile
import time  # noqa: F811  (the cell imports what it uses, as a module would)

ENTRIES_KEPT = 100          # entries the folder keeps, the ones used last


def pack(warnings: str, objects: list[bytes]) -> bytes:
    """An entry: the format's line, the SHA-256 of the rest, then each field after its length."""
    body = b"".join(struct.pack("<Q", len(field)) + field for field in [warnings.encode(), *objects])
    return FORMAT + hashlib.sha256(body).digest() + body


def unpack(data: bytes) -> tuple[str, list[bytes]] | None:
    """The warnings and the object files of an entry; None if it is not one pack wrote, whole."""
    head = len(FORMAT) + 32
    if not data.startswith(FORMAT) or hashlib.sha256(data[head:]).digest() != data[len(FORMAT):head]:
        return None
    fields, at = [], head
    while at + 8 <= len(data):
        (size,) = struct.unpack_from("<Q", data, at)
        fields.append(data[at + 8:at + 8 + size])
        at += 8 + size
    if at != len(data) or len(fields) < 2:
        return None
    return fields[0].decode(), fields[1:]


def folder() -> Path | None:
    """Where the programs are kept: the folder programs of chapter 10b's cache; None if it cannot be made."""
    from lcompiler import runtime
    try:
        programs = runtime.cache_directory() / "programs"
        programs.mkdir(exist_ok=True)
        return programs
    except OSError:
        return None


def kept(path: Path) -> tuple[str, list[bytes]] | None:
    """The entry at path, if there is a whole one; it is then the one used last."""
    try:
        found = unpack(path.read_bytes())
        if found is not None:
            os.utime(path)
        return found
    except OSError:
        return None


def keep(path: Path, entry: bytes, most: int = ENTRIES_KEPT) -> None:
    """Write an entry atomically, then forget the entries used least recently beyond `most`; quietly
    nothing if the folder cannot be written."""
    temporary = None
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".new-", delete=False) as file:
            temporary = file.name
            file.write(entry)
        os.replace(temporary, path)               # atomic: a reader sees the old entry or the new one
    except OSError:
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return
    entries, hour_ago = [], time.time() - 3600
    for other in path.parent.glob("*.lcp"):
        with contextlib.suppress(OSError):       # another lc may be removing it
            entries.append((other.stat().st_mtime, other))
    for other in path.parent.glob(".new-*"):     # left by an lc killed while it wrote
        with contextlib.suppress(OSError):
            if other.stat().st_mtime < hour_ago:
                other.unlink()
    for _, other in sorted(entries)[:max(0, len(entries) - most)]:
        with contextlib.suppress(OSError):
            other.unlink()

# %% [markdown]
# A few entries, as `pack` writes them and as they may be found: whole,
# cut short, with a byte changed, from another format:

# %%
from lcompiler.cache import pack, unpack  # noqa: F811  (the cell imports what it uses, as a module would)

entry = pack("hello.l:1:1: warning: …\n", [b"\x7fELF first part", b"\x7fELF second part"])
for what, data in [("whole", entry), ("cut short", entry[:-3]), ("a byte changed", entry[:-1] + b"!"),
                   ("another format", entry.replace(b"format 1", b"format 2")), ("empty", b"")]:
    print(f"{what:15} {unpack(data)}")

# %% [markdown]
# Then `run`, which `lc run` calls, with `replace` when it is the command.
# It looks for the program's entry; on a miss it compiles the program —
# with `build`, into a temporary folder whose executable it reads, or with
# `compile_source` — while a `Recorder` in `POLICY`'s place of the
# warnings writes them to standard error as ever and keeps a copy; then it
# keeps the entry. On a hit it writes the warnings kept. Then
# `replace_process` writes the executable into a file in memory and runs
# it in the process's place, never to return — unless the system refuses
# to run a file in memory (Linux's `vm.memfd_noexec` can forbid it), and
# then `run` does as Python's call does; or `call_main` loads the
# object files with the runtime library and calls `main`, as `jit` does:
# the same few lines, here so that a hit needs nothing of `driver`, whose
# module imports the whole compiler.

# %%
#| export cache
import sys


class Recorder:
    """A file that writes what it is given on to another (standard error) and keeps a copy."""

    def __init__(self, sink):
        self.sink, self.parts = sink, []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.sink.write(text) if self.sink is not None else len(text)

    def flush(self) -> None:
        if self.sink is not None:
            self.sink.flush()


def run(source, optimiser: bool = True, cached: bool = True, replace: bool = False) -> int:
    """lc run: the program's machine code from the cache, or compiled (and kept); then run in this
    process, through the JIT (a runtime error exits the process with status 2) -- or, with replace (the
    command lc, whose process is its own), as an executable that takes the process's place."""
    from lcompiler.errors import POLICY
    replace = replace and can_replace()
    kind = "executable" if replace else "objects"
    place = folder() if cached and not isinstance(POLICY["sink"], list) else None
    path = place / f"{entry_name(source, optimiser, POLICY, os.environ, kind=kind)}.lcp" if place else None
    found = kept(path) if path else None
    if found is None:
        from lcompiler import driver
        sink = POLICY["sink"]
        if path:
            POLICY["sink"] = recorder = Recorder(sink)
        try:
            if replace:
                with tempfile.TemporaryDirectory() as tmp:
                    code = [driver.build(source, Path(tmp, "program"), optimiser=optimiser).read_bytes()]
            else:
                code = driver.compile_source(source, optimiser=optimiser)
        finally:
            POLICY["sink"] = sink
        if path:
            keep(path, pack("".join(recorder.parts), code))
    else:
        warnings, code = found
        if warnings and POLICY["sink"] is not None:
            POLICY["sink"].write(warnings)
    if replace:
        try:
            replace_process(code[0], source.name)
        except OSError:                       # a system that will not run it (vm.memfd_noexec): the JIT,
            sink, POLICY["sink"] = POLICY["sink"], None       # without saying the warnings again
            try:
                return run(source, optimiser, cached)
            finally:
                POLICY["sink"] = sink
    return call_main(code)


def can_replace() -> bool:
    """Whether this system can run an executable held in memory in this process's place (Linux)."""
    return hasattr(os, "memfd_create") and os.execve in os.supports_fd


MFD_EXEC = 0x10                               # linux/memfd.h: a file in memory that may be run


def replace_process(executable: bytes, name: str):
    """Run an executable in this process's place, from a file in memory: it never returns (but by an
    OSError). The executable inherits the process: its id, its files, its environment, its signals
    ignored."""
    try:                                      # closed on exec; gone when the program ends
        fd = os.memfd_create(name, os.MFD_CLOEXEC | MFD_EXEC)
    except OSError:                           # a kernel older than MFD_EXEC (6.3): every such file may run
        fd = os.memfd_create(name)
    written = memoryview(executable)
    while written:
        written = written[os.write(fd, written):]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(fd, [name], os.environ)
    finally:                                  # reached only when the system refused
        os.close(fd)


_runtime_loaded = False


def call_main(objects: list[bytes]) -> int:
    """Load object files with chapter 10b's runtime library and call their main (driver.jit's work)."""
    global _runtime_loaded
    import ctypes

    import llvmlite.binding as llvm

    from lcompiler import runtime
    from lcompiler.support import target_machine
    if not _runtime_loaded:
        try:
            library = runtime.runtime_library("shared")
        except RuntimeError as error:            # no C compiler: a ToolchainError, as driver.runtime says
            from lcompiler.driver import ToolchainError
            raise ToolchainError(str(error)) from None
        llvm.load_library_permanently(str(library))
        _runtime_loaded = True
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine())
    for code in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    main = ctypes.CFUNCTYPE(ctypes.c_int)(engine.get_function_address("main"))
    sys.stdout.flush()
    sys.stderr.flush()
    return main()

# %% [markdown]
# At work, from the shell, with a cache of its own (`LC_CACHE`): a program
# run, run again, edited and run, its entry cut short and run, and run with
# `--no-cache`; then a program with a warning, run twice, and once with
# `-Werror`. Whether `lc` compiled is not a matter of timing: Python's
# `-X importtime` lists the modules a run imports, and a run that compiles
# imports the pipeline of chapter 4.

# %%
def shell_run(*argv: str, env: dict) -> str:
    """lc ARGV as a shell runs it; what it printed, its exit status, and whether it compiled."""
    done = subprocess.run([sys.executable, "-X", "importtime", lc_path, *argv], capture_output=True,
                          text=True, env={**os.environ, **env})
    compiled = any(line.startswith("import time:") and line.split("|")[2].strip() == "lcompiler.pipeline"
                   for line in done.stderr.splitlines())
    messages = "".join(line + "\n" for line in done.stderr.splitlines() if not line.startswith("import time:"))
    return (f"$ lc {' '.join(argv)}\n{done.stdout}{messages}(exit status {done.returncode}; "
            f"{'compiled' if compiled else 'from the cache'})\n")


with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    cache = {"LC_CACHE": str(Path(tmp, "cache"))}
    Path("hello.l").write_text('print("Hello from native code", 6 * 7)\n')
    print(shell_run("run", "hello.l", env=cache))
    print(shell_run("run", "hello.l", env=cache))
    Path("hello.l").write_text('print("Hello from native code", 6 * 8)\n')
    print(shell_run("run", "hello.l", env=cache))
    entries = sorted(Path("cache", "programs").glob("*.lcp"), key=lambda p: p.stat().st_mtime)
    entries[-1].write_bytes(entries[-1].read_bytes()[:-100])      # the entry used last, cut short
    print(shell_run("run", "hello.l", env=cache))
    print(shell_run("run", "hello.l", env=cache))
    print(shell_run("run", "--no-cache", "hello.l", env=cache))
    Path("warns.l").write_text('def f(x) = x.{ 0 -> "zero" }\nprint(f(0))\n')
    print(shell_run("run", "warns.l", env=cache))
    print(shell_run("run", "warns.l", env=cache))
    print(shell_run("run", "-Werror", "warns.l", env=cache))
    print(sorted(p.suffix for p in Path("cache", "programs").iterdir()))

# %% [markdown]
# The first run compiles, the second does not and prints the same; the
# edited program is compiled, and so is the one whose entry was cut short,
# after which it is whole again; `--no-cache` compiles. The warning is said
# by the run that compiled and by the one that did not, the same; with
# `-Werror` it is an error and nothing runs, which is not kept. The folder
# holds one entry per program that was compiled and run: the first hello,
# the edited one (written twice), and the program with a warning.
#
# How long `lc run` takes, compiling and not, on the machine the cell
# prints first: the median of ten runs of each, in alternation, with the
# fastest and the slowest of the ten in brackets, of the book's `hello.l`
# and of its biggest example; then, timed the same way, Python starting
# and doing nothing, the floor of any `lc`, and Python starting and
# loading llvmlite's binding, which a hit of the command no longer does
# (the times depend on the machine and its load, so the cell's output is
# not checked; chapter 12 runs the book's benchmarks). The aim is a hit
# under 0.2 s.

# %% tags=["nbval-ignore-output"]
import statistics
import time  # noqa: F811  (the cell imports what it uses, as a module would)

from machine import describe  # noqa: E402, F811  (the cell imports what it uses, as a module would)


def wall(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([lc_path, *argv], capture_output=True, env={**os.environ, **env})
    return time.perf_counter() - start


print("\n".join(machine_lines(describe())[:2]))
with tempfile.TemporaryDirectory() as tmp:
    cache = {"LC_CACHE": tmp}
    biggest = max(Path("../examples").glob("*.l"), key=lambda p: p.stat().st_size)
    for program in (Path("../examples/hello.l"), biggest):
        wall(["run", str(program)], cache)                        # the runtime, and the entry
        times = {"compiling": [], "from the cache": []}
        for _ in range(10):
            times["compiling"].append(wall(["run", "--no-cache", str(program)], cache))
            times["from the cache"].append(wall(["run", str(program)], cache))
        print(f"lc run {program.name} ({len(program.read_text().splitlines())} lines): "
              + ", ".join(f"{how} {statistics.median(t):.3f} s [{min(t):.3f}, {max(t):.3f}]"
                          for how, t in times.items()))
floors = {"python -c pass": [sys.executable, "-c", "pass"],
          "loading llvmlite.binding": [sys.executable, "-c", "import llvmlite.binding"]}
times = {what: [] for what in floors}
for _ in range(10):
    for what, argv in floors.items():
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True)
        times[what].append(time.perf_counter() - start)
print("Python: " + ", ".join(f"{what} {statistics.median(t):.3f} s [{min(t):.3f}, {max(t):.3f}]"
                             for what, t in times.items()))

# %% [markdown]
# On the machine printed above, a hit of the command is under that aim,
# and loading llvmlite's binding alone takes longer than a whole hit.
#
# `tests/test_cli.py` checks the promises of this section through `lc`,
# with a cache of its own: a program run again is not compiled (the
# pipeline is not imported) and prints, says and returns the same — a
# program that ends with a runtime error, a program with a warning, a
# program stopped by Ctrl-C; an edit, an option and a setting of the
# environment each make it compiled again, with the new result; an entry
# cut short or changed is compiled again; `--no-cache` keeps nothing; and
# `lc --help`, `lc --version` and a hit import none of the compiler's
# stages, and a hit of the command not llvmlite's binding either; a
# command whose executable the system will not run runs the program
# through the JIT, with the same output and status. The entry's name is checked to change with each file of a copy of
# the package, and `keep` to keep the entries used last.

# %% [markdown]
# ## When something goes wrong
#
# `lc` meets three kinds of trouble — in the program (found before it runs,
# or as it runs: two rows below), in how `lc` was called or the machine,
# and in `lc` itself — and says which it is:
#
# | where the fault is | what `lc` writes | exit status |
# |---|---|---|
# | in the program, found before it runs | `FILE:LINE:COL: error: …`, every error found, with notes | 1 |
# | in the program, as it runs | `FILE:LINE:COL: runtime error: …` | 2 |
# | in how `lc` was called, or in the machine: a file it cannot read, an executable it cannot write, no C compiler, a full disk | `lc: error: …` | 1 |
# | in `lc` itself | `lc: internal compiler error: …` | 3 |
#
# The last line is for bugs of this compiler, and only for them: a missing C
# compiler or a folder that does not exist is not one, and neither is a
# reader that goes away before the output is written (`lc run prog.l |
# head -1`): the program runs on to its end with its output discarded,
# and `lc` ends quietly. (An executable of `lc build` is stopped there by
# the system's SIGPIPE signal instead, as a C program is: the language
# reference says both.) `lc`'s `main` sorts
# the exceptions into these kinds, and `lc build` checks where it will
# write before it starts compiling ([appendix C](C_cli.ipynb) has both);
# this chapter's part is the driver's `ToolchainError`. Here are the
# mistakes of a new user, each with its answer:

# %%
def shell(*argv: str, env: dict | None = None, comment: str = "") -> None:
    done = subprocess.run([lc_path, *argv], capture_output=True, text=True, env=env)
    print(f"$ lc {' '.join(argv)}{comment}\n{done.stdout}{done.stderr}(exit status {done.returncode})\n")


with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("hello.l").write_text('print("hello")\n')
    Path("latin1.l").write_bytes(b'print("caf\xe9")\n')
    shell("build", "hello.l", "-o", "no/such/folder/hello")
    shell("build", "hello.l", "-o", ".")
    shell("run", ".")
    shell("run", "latin1.l")
    shell("run")
    no_compiler = {"PATH": str(Path(sys.executable).parent), "LC_CACHE": tmp}   # and no runtime compiled yet
    shell("run", "hello.l", env=no_compiler, comment="        # on a machine without a C compiler")

# %% [markdown]
# ### An exception nobody catches
#
# An exception that no `try` catches (chapter 4b; the language
# reference's [uncaught exceptions](../language.md#uncaught-exceptions)) is a runtime error like the others: the place of the `raise`,
# `uncaught exception` and the exception's value, the line and a caret —
# and exit status 2, whichever way the program runs. The program below
# prints a line, then raises `Boom(3)` outside any `try`: its output so far
# stays, the message follows.

# %%
BOOM = "exception Boom(Int)\ndef f(n) = if (n > 2) raise(Boom(n)) else n\nprint(f(1))\nprint(f(3))\n"
with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("boom.l").write_text(BOOM)
    shell("run", "boom.l")
    shell("run", "--interp", "boom.l")
    shell("build", "boom.l", "-o", "boom")
    done = subprocess.run(["./boom"], capture_output=True, text=True)
    print(f"$ ./boom\n{done.stdout}{done.stderr}(exit status {done.returncode})")

# %% [markdown]
# In the REPL and in a `%%L` cell the message is the same; the entry that
# raised is forgotten, as any entry that fails is, and the session goes on
# with everything defined before. A line is counted from the entry (or
# the cell), or, when the `raise` is in a function an earlier entry
# defined, from the session's first line: `f`'s `raise` is on the
# session's line 2, the line of the second entry.

# %%
repl(iter(["exception Boom(Int)", "def f(n) = if (n > 2) raise(Boom(n)) else n", "f(3)", "2 * raise(Boom(4))",
           "def g = f(5)", "try { f(6) } catch { Boom(k) -> k * 10 }", "g"]),
     lambda text: print(text, end=""), prompt=False)

# %% magic_args="--reset" language="L"
# exception Boom(Int)
# def f(n) = if (n > 2) raise(Boom(n)) else n
# f(1) + raise(Boom(7))

# %% language="L"
# f(2) * 7

# %% [markdown]
# Every fault of a program as it runs keeps status 2, an uncaught exception
# among them; 3 is for `lc`'s own bugs. One was here until the tests of
# this section ran `lc` on a pseudo-terminal: on a terminal `lc` paints its
# messages (appendix A), its table of colours had none for `runtime
# error:`, and every runtime error on a terminal became an internal error,
# status 3; the table now paints it red, as `error:`.

# %% [markdown]
# `lc --version` says which `lc` this is, and `lc --help` ends with the
# environment variables of `lc` and its programs that a user sets most
# (the collector's own, such as `LC_NURSERY`, and `LC_BACKTRACE` are
# chapter 10b's, and `LC_EXCEPTIONS` chapter 10's). The
# defaults are the runtime's own, `DEFAULTS` of chapter 10b, which the C
# compiler receives when it compiles the runtime (`268435456` bytes of
# stack is `256M`), so the help stays true when the runtime changes. The
# heap's depends on the machine, as chapter 10b explains, and the help
# says how.

# %%
done = subprocess.run([lc_path, "--help"], capture_output=True, text=True)
print(done.stdout[done.stdout.index("environment variables"):])

# %% [markdown]
# ## The promises, tested
#
# `tests/test_native.py` runs every corpus program and example compiled —
# in a child through the JIT, and a third of them as executables — and
# requires the reference interpreter's output, errors and exit status; the
# same for forty random well-typed programs per run through the JIT and
# eight as executables (the generator of chapter 7's tests). Half of the
# corpus, fifteen random programs and a few executables are compiled again
# split into two to four parts by force, and must still behave as
# interpreted; the split itself is checked to define every name once and
# to declare it exactly as it is defined. It checks that `lc run` reports rejected programs
# exactly as the interpreter does, that `lc build` makes an executable that
# behaves like `lc run`, the REPL's answers, and the notebook-safety
# promise: it executes a notebook whose `%%L` cells run an infinite non-tail
# recursion, a failing assertion and a program that fills its heap, and
# requires each cell to show the error and the kernel to answer the next
# cells. `tests/test_errors.py` holds the answers of the section above, each
# checked through `lc`: a clear `lc: error: …` and exit status 1 for every
# mistake of the user or the machine, never status 3.
#
# `tests/test_terminal.py` drives what a person does at a terminal through
# a pseudo-terminal (the standard library's `pty`): Ctrl-C typed while `lc
# run`, or an executable of `lc build`, loops after printing a line — the
# line must be on the terminal before, and the process must end by
# `SIGINT`; and a session of `lc repl` in which Ctrl-C stops a running
# entry and abandons a half-typed one, Ctrl-D abandons a continuation line
# and then ends the session with status 0, every definition is kept
# throughout, a misspelt command gets a suggestion, and the history is in
# `~/.lc_history` after; and, on the same pseudo-terminal, an uncaught
# exception: `lc run`, `lc run --interp` and an executable stop with the
# message of the section above and status 2, and in `lc repl` the message
# is the same, its line counted from the entry, and the session goes on. It
# also checks `run_l` under a time limit (the line printed, then the
# message), that `run_source` hands over a line while the program still
# runs, that `%%L` cells share a session unless `--fresh` or `--reset`, and
# that a cell that raises an exception nobody catches shows the message and
# the next cell still sees the session's definitions.
#
# ### Random programs and mutants, by the thousand
#
# The tests keep small samples: a few dozen random programs per run, a few
# thousand mutated and random texts for the parser alone. Two scripts take the same
# ideas further, for runs too long for a test suite:
#
# - `tools/random_programs.py` generates N random well-typed programs with
#   the generator of the tests — nested patterns on user data types,
#   polymorphic helpers used at several types, vars captured by closures,
#   mutual recursion, non-tail recursion thousands of calls deep, every kind
#   of runtime error on purpose, and now and then a recursion that never
#   ends — and runs each every way L can run: `lc run --interp`, `lc run`,
#   an executable from `lc build`, and `lc run -O0`, without the optimiser of
#   chapter 9. What each way writes on stdout and on stderr, and its exit
#   status, must be the same, and 0, or 2 with a located runtime error (a
#   warning of the compiler, on stderr before the program runs, is allowed).
#   The ways are a table in the script, `WAYS`; a new way to run programs is
#   one more line in it. With `--exceptions` the programs also raise —
#   directly, or from a recursion of random depth — and catch, with handlers
#   that do and do not match, and go a fifth way: `lc run` with exceptions
#   lowered to trap frames (`LC_EXCEPTIONS=traps`, chapter 10) instead of the
#   flag.
# - `tools/mutants.py` makes N mutants of the corpus and the examples — one
#   to four bytes inserted, deleted or replaced, or tokens deleted, doubled,
#   swapped or replaced — and classifies what `lc run` does with each against
#   the contract: rejected with located errors and status 1, run with status
#   0, stopped by a located runtime error with status 2, still running
#   after ten seconds (a mutant may loop for ever), or stopped by the heap
#   limit the script sets ("out of memory": a mutant that allocates without
#   end, not compared, since where each way stops depends on what it keeps
#   alive). A mutant that runs to its end or to a runtime error is run
#   again without the optimiser (`lc run -O0`) and by the interpreter, which
#   must both agree. Anything else is a finding.
#
# Both print their counts as they go, and minimise every finding — remove
# lines, then tokens, as long as the same finding remains — and save it
# with what each way did (`--out`, by default a folder under `/tmp`). With
# `--json FILE` each also appends a record of the run to `FILE`: the
# command, when it started, the seconds it took, the commit of the
# compiler, the machine, and the counts its last line prints, which each
# script's `summary(record)` writes, for the script and for the cell below.
# The runs of this book are in `bench/random_runs.json`, made on one
# afternoon on compilers that all have what this book describes — the
# optimiser of chapter 9, the generational runtime of chapter 10b, chapter
# 10's heap pointer in a register, exceptions through every stage — though
# not all at the same commit (each run names its own: the later commits
# changed error messages and prose, not how the compiler translates a
# program), on a machine with two cores, each run pinned to one
# of them (the command line says which, and how niced):

# %%
import json
import sys
from pathlib import Path

sys.path.insert(0, "../tools")
sys.path.insert(0, "../bench")
import mutants  # noqa: E402  (tools/mutants.py)
import random_programs  # noqa: E402  (tools/random_programs.py)
from machine import lines as machine_lines  # noqa: E402  (bench/machine.py: the machine, in a few lines)

runs = json.loads(Path("../bench/random_runs.json").read_text())["runs"]


def same(machine):
    """The machine without the moment: its load average, the date, the core and the niceness of a run
    differ from run to run."""
    return {k: v for k, v in machine.items() if k not in ("load", "date", "cpus", "nice")}


shared = all(same(run["machine"]) == same(runs[0]["machine"]) for run in runs)
if shared:
    common = same(runs[0]["machine"])
    for line in machine_lines(common):
        print(line if not line.startswith("system:") else f"system: {common['os']}, kernel {common['kernel']}")
for run in runs:
    print()
    if not shared:
        print("\n".join(machine_lines(run["machine"])))
    nice = run["machine"].get("nice") or 0
    print(f"$ taskset -c {','.join(map(str, run['machine']['cpus']))} {f'nice -n {nice} ' if nice else ''}{run['command']}")
    print((mutants if "mutants" in run else random_programs).summary(run))
    print(f"({run['seconds']:.0f} s from {run['date']}, load average {run['machine']['load']} at the start; "
          f"the compiler at commit {run['commit']})")

# %% [markdown]
# The first six runs are far smaller than the scripts' defaults (2,000
# programs, 20,000 mutants): the time set aside for them was short. The
# last three are longer — the default 2,000 programs, 400 programs with
# exceptions, 3,000 mutants, each with a new seed, one after the other on
# the core that the session's other work (kept to the other core) left to
# them; the load average beside each counts both cores — and found
# nothing. The first three
# shared their core with other work (see the load beside each), and the
# first of them has one finding: program 118 ends in a recursion that never
# ends, and the reference interpreter did not report its stack overflow
# within the script's sixty seconds, so every other way differed from it.
# The finding the script saved tells more: the timeout never came back
# while the script tried to minimise the program, so it saved the program
# whole, and run once more the four ways agreed, each stopping with the
# same located stack overflow. The fourth run is the same command — the
# same seed, so the same two hundred programs — on a core of its own: no
# finding, and one stack overflow more, program 118's, on which the four
# ways agreed. The finding was the load, as with program
# 438 below: the interpreter is slow on a deep recursion, and on a core
# shared several ways it was slower than the limit. The fifth and sixth
# runs, each on a core of its own, found nothing. A first try of the sixth's mutants had
# findings, all of one kind, and in the script: a mutant whose match
# misses a case compiles with a warning (chapter 5) and then runs with
# status 0, and `tools/mutants.py`, older than the warnings, took anything
# on stderr beside status 0 for a finding. It now judges such a mutant by
# what it ran, and `tests/test_tools.py` checks that it does, and that
# something else on stderr is still a finding.
#
# Earlier runs, on earlier compilers and with other seeds, were longer, and
# found five things, none of them left. On the compiler before the
# optimiser and the new runtime, three ways (without `lc run -O0`), they
# found three. A string literal with a NUL character (the byte 0) in it,
# between `"` and `one"`, printed an empty line compiled — C strings end
# at a NUL — and the NUL and `one` interpreted: the lexer (chapter 4a) now
# refuses such a string. A mutant of a test, `1 + count_up(n - 11)` called
# on 10000, never reaches 0 before wrapping around the 64-bit integers,
# some 3·10¹⁸ calls later: the interpreter reports a stack overflow, and
# the compiled code, which LLVM turned into a loop and then into a
# formula, prints `3353953467947192112`. That is the one disagreement the
# contract allows (the language reference says so), and `tools/mutants.py`
# counts it apart ("deeper than the interpreter goes, a loop compiled").
# And the runtime's `out of memory` error names the file but no line,
# since the runtime does not know where the program was (chapter 10): the
# script expected a line and a caret, and now accepts it.
#
# On the compiler with the optimiser and the generational runtime, a first
# run of random programs found one in the reference interpreter: program
# 438 of that run ends in a recursion that never ends, and the
# interpreter, asked to report its stack overflow within the script's
# sixty seconds, took longer on the loaded machine — most of its time
# spent in Python's garbage collector, walking again and again the million
# frames the recursion keeps alive. Chapter 4b now lets the collector look
# at new objects less often while a program runs. And the first run of
# programs that raise and catch had a finding on every program with a
# warning, in the script: `lc run` writes the compiler's warnings on
# stderr before the program's output, and the executable, built before,
# did not; the script now counts what `lc build` wrote as the executable's
# too, and allows warnings before the program's own stderr.
#
# What the scripts did not find, a reader of chapter 4b did, by hand:
# `def down(n) = down(n + 1) * down(n)`, optimised, died of a second fault
# inside the runtime's stack-overflow handler. LLVM had given `down` a frame
# whose first store faults in the guard zone *after* the stack pointer has
# moved into it, and the handler read the stack from there. It now starts
# its scan above the guard zone ([chapter 10b](10b_runtime.ipynb#stack-overflow)), and the program is one of
# `tests/test_native.py`'s located overflows. The random programs have one
# runaway recursion, always the same, `def runaway(n) = 2 * runaway(n + 1)
# + 1`, with one recursive call; a generator that also wrote recursions of
# other shapes would have found it — an exercise below.

# %% [markdown]
# ## Exercises
#
# 1. The REPL recompiles and re-runs every earlier definition at each entry.
#    Keep the JIT's compiled module of each entry instead, and link new
#    entries against it (MCJIT can hold several modules). What must happen to
#    the definitions' global slots?
# 2. A `%%L` cell of the session whose program fails keeps the definitions
#    that come before its last expression. Make a failing cell keep
#    nothing. What must `enter` run, and what does it cost?
# 3. `lc run -O0` and `lc build -O0` (without `-g`) leave out chapter 9's
#    optimiser, but LLVM still optimises at O2 (`machine_code`'s `level`).
#    Pass the level on to LLVM too, and compare the compile time and the speed of the benchmarks of
#    chapter 12 at O0, O1 and O2.
# 4. Give `tools/random_programs.py` runaway recursions of other shapes
#    (two recursive calls, a call through a closure, mutual recursion) and
#    run a few hundred programs: do all of them stop with a located stack
#    overflow, and the same one every way?
# 5. Draw the split of `bench/compile_speed.py`'s 1,250-line program into
#    two parts with `part_boxes`, showing only the names used across the
#    cut. Which order of definitions would send fewer calls across it?
#
# <details><summary>Solutions</summary>
#
# 1. A definition's value lives in a slot of the module's one array
#    `lc_globals` (chapter 10), which `main` hands to the runtime as the
#    collector's roots. Each entry's module would get an array of its own
#    (`lc_globals.3` for entry 3), and a later entry *declares* the earlier
#    entries' arrays (`external global`) and reads their slots, as a part
#    of a split module declares what another part homes; MCJIT resolves
#    the declarations against the modules it already holds. For the slots
#    to keep their values, the entries must run in one process that lives
#    as long as the session — today each runs in a new forked child, whose
#    memory goes with it — and the runtime must take every entry's array
#    as roots, not one. A name defined again gets a slot in the new entry's
#    array, and the REPL's `definitions` maps each name to its latest slot.
# 2. Keep the two runs, and move the commitment: `define` runs the session
#    with the cell's definitions, which tells how much they print, but no
#    longer sets `self.definitions` and `self.printed`; `evaluate` runs
#    the session, those definitions and `def it = { last }`, and sets both
#    only if that run succeeds. Nothing more is compiled or run. The cost
#    is in what the cell shows: the definitions' types are known after the
#    first run, so they either wait until the second has ended (after the
#    value, an order unlike the REPL's) or are shown at once and followed,
#    on a failure, by a line saying that they were dropped. Running the
#    cell as one program instead would not do: the session must know how
#    much of its output the kept definitions print, to skip it at later
#    entries, and one run mixes the expression's output in after theirs —
#    which is why `enter` runs the two parts apart.
# 3. `machine_code`, `compile_source` and `build` already take the level
#    (`lc build -g -O0` passes 0, for the debugger); pass it from `lc`'s
#    `build_command` to `build`, and from `run_command` through the cache's
#    `run` to `compile_source` (`-O0` meaning both optimisers off). At O0 LLVM
#    compiles faster and the programs run slower: how much of each is for
#    your machine to measure, with `bench/compile_speed.py` for the compile
#    time and `bench/run.py` for the programs.
# 4. Add the shapes to the generator's runaway recursions and run a few
#    hundred programs with `tools/random_programs.py`. Each should stop
#    with "stack overflow" at its recursive call, every way; a finding is a
#    recursion that crashes compiled, or stops at another place, or with
#    another message, one way than another. Tried by hand first, one
#    program of each shape — `def runaway(n) = runaway(n + 1) +
#    runaway(n + 2) + 1`; `def runaway(n) = { let f = { m -> 2 *
#    runaway(m + n) + 1 }; f(n + 1) }`, whose `f(n + 1)` is a call through
#    a closure at `-O0` (the optimiser inlines `f`); and `ping` and `pong`,
#    `2 * pong(n + 1) + 1` and `3 * ping(n + 1) + 2` — each stops with
#    "stack overflow" at the same recursive call, with status 2, under
#    `lc run`, `lc run --interp`, `lc run -O0` and as an executable of
#    `lc build`: no finding there.
# 5. Keep, of each part's text, only the lines that define or declare a
#    name some part declares from another, and draw those with
#    `part_boxes` (`module` is the 1,250-line program of the section "A
#    split, drawn"):
#
#    ```python
#    halves = split(module, 2)
#    crossing = set()
#    for text in halves:                  # the names a part declares, of another part's
#        for m in map(DEFINES.match, text.splitlines()):
#            if m and ((m.group(1) or "").startswith("declare") or m.group(4)) \
#                    and not declared(module.globals[m.group(2)]):
#                crossing.add(m.group(2))
#    shown = ["\n".join(line for line in text.splitlines()
#                       if (m := DEFINES.match(line)) and m.group(2) in crossing) for text in halves]
#    panels, arrows, words = part_boxes(module, shown)
#    Picture(panels, edges="none", arrows=arrows, alt=f"generated.l, what crosses the cut. {words}.")
#    ```
#
#    Two names cross: `lc_globals`, the program's global slots, and one
#    function, `prev66_2197` (the one the section's cell prints), both
#    homed in part 1 and declared in part 2. No
#    order does better on this program: its blocks make one chain
#    (`step{i}` calls `prev{i}`, which calls `step{i-1}`), so any cut into
#    two runs crosses it somewhere, and the depth-first order the driver
#    uses, which keeps a function with what it calls first, crosses it
#    once. Where the call graph is not a chain, fewer calls cross when the
#    definitions that call each other most are in the same run: taking
#    the call graph's strongly connected components as units would keep
#    mutual recursions whole.
#
# </details>
