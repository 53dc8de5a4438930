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
# # Chapter 1. Compiling with continuations, in the small
#
# A language with nothing but whole numbers, variables and `+`, compiled to
# LLVM by a `compile` function that is told, instead of asked, what to do with
# each result; then the LLVM text is verified, compiled to machine code in
# memory and run at once (*just-in-time*, or JIT, compilation), and agrees
# with an interpreter.

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** Python, and nothing from earlier chapters: this is the first.
# LLVM comes with the package llvmlite. The workshop of the appendices
# provides what every chapter uses: the error format and the drawings
# ([appendix A](A_errors.ipynb)), LLVM's target machine and running code in
# a child process ([appendix B](B_support.ipynb)), and the command `lc`
# ([appendix C](C_cli.ipynb)).
#
# **Builds:** the module `lcompiler.addlang`, the compiler of this chapter,
# and its JIT; `lc add` runs it from the shell.
#
# </div>
#
# This chapter re-tells, in Python, a short literate Idris post by
# Christopher Schwaab, *Writing an LLVM compiler using continuation passing*
# (one of the sources this book grew from; see its entry in the
# [bibliography](../bibliography.md#llvm-compiler-in-idris)). Its language
# is tiny on purpose: the one idea it carries, that a compiler can take a
# **continuation** — "what to do next with the value you compute" — instead
# of returning a result, is the idea the whole book is built on, as it is
# the idea of Appel's *Compiling with Continuations*. A program written that
# way is in *continuation-passing style*, CPS for short. The A-normal form
# of [chapter 3](03_anf.ipynb) and the conversion of L to CPS in
# [chapter 7](07_cps_convert.ipynb) are this chapter's `compile`, grown up.
#
# The target is LLVM, the compiler toolkit behind Clang and Rust's compiler.
# It reads a program written in its own assembly-like text, *LLVM IR*,
# checks it, optimises it and turns it into machine code for the processor at
# hand; a compiler that produces LLVM IR need not write any of that itself.
#
# What this chapter builds, in the order it builds it:
#
# | name | what it is |
# |---|---|
# | `Exp.Var`, `Exp.Lit`, `Exp.Add` | the source language: variables, literals, additions |
# | `value_of(e)` | what an expression means: its value, a 64-bit integer that wraps around |
# | `Value.Var`, `Value.Lit` | what an instruction operates on: a register or an immediate |
# | `Llvm.Add`, `Llvm.Print`, `Llvm.Halt`, `Llvm.Ret` | a program: each instruction holds the rest of the program, until `Halt` or `Ret` ends it |
# | `compile(e, k)` | source → program; `k` receives the value of `e` |
# | `pretty(p)`, `llvm_module(p)` | program → LLVM assembly text |
# | `jit_run(text)`, `run_i64_function(text, name, …)` | LLVM text → verified, JIT-compiled and run: a whole program in a child process (what it printed, how it ended), or one function in this process (its result) |
# | `evaluate(p)` | the same program run by an interpreter |
# | `llvm_function(name, params, e)` | an expression → an LLVM function of its variables |
# | `parse(text)` | text → expression, or an error at the place of the mistake |
#
# and the promise it keeps, checked at the end and in `tests/test_addlang.py`:
# for every expression, the tree's value, the interpreter's output and the
# output of the native code are the same.

# %%
#| default_exp addlang

# %% [markdown]
# A word on reading this notebook. Cells whose first line is `#| export` are
# copied into the Python package: this notebook's cells go to
# `lcompiler/addlang.py` (the `#| default_exp` line above names it).
# Everything else — examples, pictures, checks — stays in the book. The
# [preface](../preface.md#how-the-code-gets-from-the-notebooks-into-the-package)
# explains the mechanism.
#
# ## What this chapter promises
#
# In the module `lcompiler.addlang`:
#
# - `compile(e, k)` turns an expression into a program in continuation form
#   that computes `e` and goes on with `k` of its value, with no instruction
#   for a literal or a variable and one `Add` per `+`;
# - for the program of an expression without variables that ends with
#   `Halt`, `llvm_module(program)` is LLVM text that LLVM's verifier
#   accepts, and `jit_run(text)` compiles it to machine code and runs it in
#   a child process, so that neither its `exit` nor a crash ends the
#   caller's process;
# - for every expression, its value (`value_of`), the output of the
#   interpreter `evaluate` and the output of the native code are the same,
#   on 64-bit integers that wrap around;
# - `parse(text)` reads an expression, or raises a `CompileError` at the
#   place of the mistake — never another exception, except Python's
#   `RecursionError` for an expression nested more deeply than Python's
#   recursion limit allows, which `lc add` reports as an error.

# %%
#| export
import ctypes
from dataclasses import dataclass
from typing import Callable

import llvmlite.binding as llvm

# %% [markdown]
# ## The language of addition
#
# An expression is a variable, an integer literal, or the sum of two
# expressions. The Idris original writes it as a data type with three
# constructors in a namespace `Exp`, which keeps them apart from the target's
# constructors of the same names, `Var`, `Lit` and `Add`. We keep the names
# and give each type a namespace of its own: a
# class used as a namespace holds one small frozen dataclass per constructor,
# so `Exp.Add(Exp.Lit(3), Exp.Var("x"))` reads like the post's
# ``Add (Lit 3) (Var "x")``.
#
# The type of a variable is left open. In the post, `AddExp var` is
# *parametric* in the type of variables; we will put register names in it when
# we print LLVM, and plain integers when we interpret. Python does not need a
# type parameter to do that, but the idea matters later in the chapter.

# %%
#| export
class Exp:
    """The source language: ``e ::= x | n | e + e``."""

    @dataclass(frozen=True)
    class Var:
        name: object

    @dataclass(frozen=True)
    class Lit:
        value: int

    @dataclass(frozen=True)
    class Add:
        left: "Exp.Var | Exp.Lit | Exp.Add"
        right: "Exp.Var | Exp.Lit | Exp.Add"


# %% [markdown]
# Our running example is the post's `prog0`, that is 3 + (2 + 4):

# %%
prog0 = Exp.Add(Exp.Lit(3), Exp.Add(Exp.Lit(2), Exp.Lit(4)))
print(repr(prog0))

# %% [markdown]
# What does an expression mean? Its value, of course — but we must say what
# kind of number it is, because the native code will use machine integers.
# We choose what L itself will use ([the language reference](../language.md#arithmetic)):
# **signed 64-bit integers that wrap around** on overflow, so 2⁶³ − 1 + 1 is
# −2⁶³.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: one meaning, tested both ways</p>
#
# The post's interpreter used Idris's `Int` while its LLVM used 32-bit `i32`
# with `nsw`, under which an overflowing addition has no defined result: the
# two disagreed on large numbers, and nothing noticed. Fixing one meaning
# first, and testing every implementation against it, is the first habit of
# this book.
#
# </div>
#
# `value_of` is the meaning of an expression, written as directly as possible;
# it is the reference everything else in the chapter is compared with.

# %%
#| export
def wrap64(n: int) -> int:
    """The signed 64-bit integer equal to n modulo 2**64."""
    return (n + 2**63) % 2**64 - 2**63


def value_of(e, env=None) -> int:
    """The value of an expression, variables looked up in env."""
    match e:
        case Exp.Var(x):
            return env[x]
        case Exp.Lit(n):
            return wrap64(n)
        case Exp.Add(l, r):
            return wrap64(value_of(l, env) + value_of(r, env))
    raise TypeError(f"not an expression: {e!r}")


# %%
value_of(prog0), value_of(Exp.Add(Exp.Lit(2**63 - 1), Exp.Lit(1)))

# %% [markdown]
# ## The target: values and three instructions
#
# The machine we compile for has three instructions: add two values into a
# register, print a value, halt. Instructions operate on **values**, and a
# value is small on purpose: a register such as `%1`, or an immediate such as
# `2`. Never a nested expression — that is the whole difference between the
# source and the target, and the work of the compiler is to bridge it.
# (LLVM's registers are not the processor's few: a function may use as many
# as it likes, each assigned exactly once, and LLVM maps them onto the
# machine's registers when it makes machine code.)

# %%
#| export
class Value:
    """What an instruction operates on: ``v ::= register | n``."""

    @dataclass(frozen=True)
    class Var:
        name: object

    @dataclass(frozen=True)
    class Lit:
        value: int


# %% [markdown]
# ## A first attempt, and why it fails
#
# Assembly is written as a list of instructions, so the obvious plan is a
# compiler from expressions to lists of instructions, each instruction naming
# its destination register:

# %%
class Instr:
    """The obvious instruction set: each instruction names its destination."""

    @dataclass(frozen=True)
    class Add1:
        dest: str
        left: object
        right: object

    @dataclass(frozen=True)
    class Print1:
        value: object

    @dataclass(frozen=True)
    class Halt1:
        pass

    @dataclass(frozen=True)
    class Ret1:          # "return this value": the post's hypothetical Ret
        value: object


# %% [markdown]
# Now write `compile1`. The case `Add` is easy to start: compile the left
# operand, then the right one, then ... add what? And a literal on its own —
# which instruction is `2`? A value is not an instruction. The best we can do
# is make a bare value *return* itself:

# %%
def compile1(e) -> list:
    match e:
        case Exp.Lit(n):
            return [Instr.Ret1(n)]
        case Exp.Var(x):
            return [Instr.Ret1(x)]
        case Exp.Add(l, r):
            # The results of compile1(l) and compile1(r): where are they?
            return compile1(l) + compile1(r)


compile1(Exp.Add(Exp.Lit(2), Exp.Lit(3)))

# %% [markdown]
# This is not just incomplete, it is wrong. Written out as LLVM, the two
# `ret` instructions make a perfectly valid function — it passes LLVM's
# verifier — that returns 2 and never gets to the 3, let alone the addition.
# LLVM's code is made of *basic blocks*, straight runs of instructions each
# ending with one that leaves the block (a `ret`, a jump, or `unreachable`);
# LLVM reads the second `ret` as a second block, which nothing jumps to. We
# will run the function as soon as we have a JIT, below.

# %%
naive = "define i64 @f() {\n  ret i64 2\n  ret i64 3\n}\n"
print(naive)

# %% [markdown]
# The two problems are the ones the post names. A value is not an
# instruction, so a literal has nothing to compile to; and the result of a
# sub-expression has nowhere to go, because nothing tells `compile1` which
# register to put it in. The usual repair is to return the result's location
# along with the instructions — and to invent fresh register names, which
# needs a counter threaded through every call:

# %%
def compile2(e, counter: int) -> tuple[object, list, int]:
    """(where the value is, the instructions that put it there, next free number)"""
    match e:
        case Exp.Lit(n):
            return n, [], counter
        case Exp.Var(x):
            return x, [], counter
        case Exp.Add(l, r):
            v1, code1, counter = compile2(l, counter)
            v2, code2, counter = compile2(r, counter)
            dest = f"%{counter}"
            return dest, code1 + code2 + [Instr.Add1(dest, v1, v2)], counter + 1


compile2(prog0, 1)

# %% [markdown]
# It works, and in Python we could hide the counter in a global. But look at
# the shape: every case must receive the counter, pass it to the first
# recursive call, take the new one back, pass *that* one on, and return the
# last. Forget one hand-over and two instructions get the same name, which
# LLVM (whose registers are assigned exactly once) rejects. Every call sends
# information both ways: the counter goes down into it, and the counter and
# the place of the result come back up.
#
# ## Programs that continue
#
# The post's way out is to stop building lists. Fold the "rest of the
# program" into each instruction, and let an instruction that produces a
# result *bind a name* for it, the way a Python `lambda` binds its parameter.
# Here is `prog0`, 3 + (2 + 4), both ways: on the left the list that
# `compile2` returned above, followed by printing and halting; on the right
# the same program as a chain, which is what `compile` (below) builds:
#
# ```text
# explicit destinations                continuation encoding
# Add1("%1", 2, 4)                     Add(Lit(2), Lit(4), lambda t1:
# Add1("%2", 3, "%1")                  Add(Lit(3), Var(t1), lambda t2:
# Print1("%2")                         Print(Var(t2),
# Halt1()                              Halt())))
# ```
#
# `Add(v, w, program)` reads: add `v` and `w`, call the sum `z`, and go on
# with `program(z)`. A program is no longer a list but a chain in which each
# link holds the next; the name of a result exists exactly where the rest of
# the program can see it, and nowhere else. We add a fourth constructor to
# the post's three (`Add`, `Print`, `Halt`): `Ret`, a second way to end
# besides `Halt`, which returns a value from a function, so the same
# compiler can produce functions as well as whole programs. (In the book's
# later chapters the chain grows into the CPS language of
# [chapter 6](06_cps.ipynb): `Add(v, w, lambda z: rest)` becomes
# `LetPrim(z, v + w, rest)` — compute, name the result `z`, continue with
# `rest` — with the name written into the term instead of a lambda's
# parameter, and `Halt` becomes a `Halt` that stops with a value.)

# %%
#| export
class Llvm:
    """A program in continuation form.

    p ::= Add(v, w, z -> p) | Print(v, p) | Halt | Ret(v)
    """

    @dataclass(frozen=True)
    class Add:
        left: object          # a Value
        right: object         # a Value
        program: Callable     # receives the result's register, returns the rest

    @dataclass(frozen=True)
    class Print:
        value: object
        program: object

    @dataclass(frozen=True)
    class Halt:
        pass

    @dataclass(frozen=True)
    class Ret:
        value: object


# %% [markdown]
# ## Compiling with a continuation
#
# Now `compile` takes, besides the expression, a function `k` from the value
# of the expression to the rest of the program — its **continuation**. It
# never returns "where the result is"; it *gives* the result to `k`:
#
# - a variable or a literal is already a value: give it to `k`, and emit no
#   instruction at all;
# - for `e1 + e2`, compile `e1`, and when its value `t1` is known, compile
#   `e2`; when `t2` is known too, emit an `Add` of the two whose result `r`,
#   a register, is given to `k`.

# %%
#| export
def compile(e, k: Callable) -> object:
    """The program that computes e and continues with k(value of e)."""
    match e:
        case Exp.Var(x):
            return k(Value.Var(x))
        case Exp.Lit(n):
            return k(Value.Lit(n))
        case Exp.Add(e1, e2):
            return compile(e1, lambda t1:
                   compile(e2, lambda t2:
                   Llvm.Add(t1, t2, lambda result:
                   k(Value.Var(result)))))
    raise TypeError(f"not an expression: {e!r}")


# %% [markdown]
# No counter, no list, no register names: the names will be chosen by whoever
# *reads* the program, when it calls each `program` function. The post's
# example, compiled, ends by printing its result and halting:

# %%
llvm0 = compile(prog0, lambda result: Llvm.Print(result, Llvm.Halt()))
type(llvm0).__qualname__, llvm0.left, llvm0.right

# %% [markdown]
# The first instruction adds 2 and 4: compiling `3 + (2 + 4)` visits the
# literal 3 first, which emits nothing, and the first instruction is the inner
# addition. The rest is inside `llvm0.program`, waiting for a name.
#
# Two remarks that will matter later in the book. First, `compile` never
# produces a useless step: a literal is handed to its continuation directly
# instead of being moved into a register first. (Moving 3 into a register `t`
# only to read `t` in the rest of the program amounts to applying a
# continuation, `lambda t: rest`, at once to the value 3.) Chapter 7 calls
# such useless steps *administrative redexes*, and avoids them with exactly
# this technique. Second, the continuation `k` is called exactly once in
# every case — this language has no `if`. When a language has branches, the rest of the
# program is needed on two paths, and calling `k` twice would copy it;
# [chapter 3](03_anf.ipynb) is about what to do then (*join points*).
#
# ### A picture of the chain
#
# A program is now a chain of instructions, each holding the rest. The book
# draws such structures — chains, trees, forests — with a small module of its
# own, `lcompiler.drawing`: a `Box` has a label, the boxes below it, a
# colour, and a label for the edge that comes down to it, and a `Picture`
# lays trees of boxes out side by side and becomes SVG, with a description
# in words for readers who do not see it. Its code is in [appendix
# A](A_errors.ipynb#pictures-of-the-books-data), with the rest of the
# workshop.
#
# To draw a program we walk it as the printer below will: an `Add` is called
# with the name of its result, and its box gets a child, the rest of the
# program, on an edge labelled with that name; a `Print` holds the rest of
# the program directly, so its edge has no name.

# %%
from lcompiler.drawing import Box, Picture


def chain(program, names) -> Box:
    """The program as a chain of boxes; names() gives the name each Add's continuation receives."""
    def value(v) -> str:
        return f"Lit {v.value}" if isinstance(v, Value.Lit) else f"Var {v.name}"

    links = []                                   # (label, edge label, style), top to bottom
    edge = ""
    while True:
        match program:
            case Llvm.Add(v, w, rest):
                links.append((f"Add({value(v)}, {value(w)}, ·)", edge, "blue"))
                name = names(v, w)
                edge, program = f"λ {name} ↦", rest(name)
            case Llvm.Print(v, rest):
                links.append((f"Print({value(v)}, ·)", edge, "plain"))
                edge, program = "", rest
            case Llvm.Halt():
                links.append(("Halt()", edge, "red"))
                break
            case Llvm.Ret(v):
                links.append((f"Ret({value(v)})", edge, "red"))
                break
            case _:
                raise TypeError(f"not a program: {program!r}")
    box = None
    for label, edge, style in reversed(links):
        box = Box(label, [box] if box else [], style, edge)
    return box


# %% [markdown]
# Two helpers: `describe` says in words what a chain shows (the picture's
# `alt`), and `register_names` hands out `%1`, `%2`, … as the printer will.

# %%
def describe(box: Box) -> str:
    """A chain of boxes in words, top to bottom."""
    steps = []
    while box:
        steps.append((f"then, through {box.edge} " if box.edge else "then " if steps else "") + box.label)
        box = box.children[0] if box.children else None
    return ", ".join(steps)


def register_names():
    counter = iter(range(1, 1000))
    return lambda v, w: f"%{next(counter)}"


# %%
llvm0_chain = chain(llvm0, register_names())
Picture([("llvm0, named as the printer will name it", [llvm0_chain])],
        alt="The program llvm0 as a chain of boxes, top to bottom: " + describe(llvm0_chain))

# %% [markdown]
# Read from the top: `Add(Lit 2, Lit 4, ·)` holds a function; called with the
# name `%1`, it returns the next box, `Add(Lit 3, Var %1, ·)`, whose function
# called with `%2` returns `Print(Var %2, ·)`, which holds `Halt()`. The dot
# `·` is the rest of the program, below. Until someone calls the functions,
# the boxes below the first do not exist: they are built on demand, with the
# names the caller chooses. That is what the next section exploits.
#
# ## Printing LLVM
#
# To give the program to LLVM we must finally choose names. Now that the
# program is a chain rather than a tree, a counter local to one loop is
# enough: walk the chain, and each time an `Add` wants a name, give it the next
# number.
#
# Three details of LLVM's text format shape the printer, and the printer
# handles all three differently from the original post:
#
# - Numbered registers (`%1`, `%2`, …) must be numbered in order, and *every*
#   unnamed value takes a number, including the entry block of a function
#   (`%0` when the function has no numbered parameters) and the `i32` that
#   `printf` returns. So numbering starts at 1, as in the post; and the
#   printer names `printf`'s result too, even though nobody reads it, where
#   the post left it unnamed. Unnamed, it takes the next number all the same,
#   and an `Add` after a `Print` would be misnumbered (the post's program
#   has no such `Add`).
# - Since LLVM 15 pointers are untyped: `ptr`, not `i8*`. The post's
#   `getelementptr` on the format string is no longer needed; `@int_format`
#   is already a `ptr`.
# - `add nsw` promises LLVM that the addition does not overflow, and an
#   overflowing `add nsw` has no defined result. We want wrap-around, which is
#   plain `add`.

# %%
#| export
def llvm_value(v) -> str:
    match v:
        case Value.Var(name):
            return str(name)
        case Value.Lit(n):
            return str(wrap64(n))
    raise TypeError(f"not a value: {v!r}")


def pretty(program, first: int = 1) -> str:
    """The instructions of a program as LLVM text, registers numbered from first."""
    lines, n = [], first
    while True:
        match program:
            case Llvm.Add(v, w, rest):
                result = f"%{n}"
                lines.append(f"{result} = add i64 {llvm_value(v)}, {llvm_value(w)}")
                n += 1
                program = rest(result)
            case Llvm.Print(v, rest):
                lines.append(f"%{n} = call i32 (ptr, ...) @printf(ptr @int_format, i64 {llvm_value(v)})")
                n += 1
                program = rest
            case Llvm.Halt():
                lines += ["call void @exit(i32 0)", "unreachable"]
                return "\n".join(lines)
            case Llvm.Ret(v):
                lines.append(f"ret i64 {llvm_value(v)}")
                return "\n".join(lines)
            case _:
                raise TypeError(f"not a program: {program!r}")


# %%
print(pretty(llvm0))

# %% [markdown]
# The loop replaces the post's recursive `prettyLlvm`: Python does not turn
# a function's last call into a jump, so a recursive printer would hold one
# Python frame per instruction, and a program of a few thousand instructions
# would pass Python's recursion limit (1,000 frames by default) even when
# its expression is shallow.
#
# A complete *module* — LLVM's unit of compilation, one file of LLVM IR —
# needs the format string for `printf`, declarations of the
# two C functions we call, and a `main` around the instructions:

# %%
#| export
LLVM_HEADER = """\
@int_format = private constant [6 x i8] c"%lld\\0A\\00"
declare i32 @printf(ptr, ...)
declare void @exit(i32) noreturn
"""


def llvm_module(program) -> str:
    """A whole LLVM module whose main runs the program."""
    body = "\n".join("  " + line for line in pretty(program).splitlines())
    return f"{LLVM_HEADER}\ndefine i32 @main() {{\n{body}\n}}\n"


# %%
print(llvm_module(llvm0))

# %% [markdown]
# The format is `"%lld\n"`: a 64-bit integer and a newline, where the post
# printed a 32-bit `%i` and no newline.
#
# ## Running it
#
# [llvmlite](https://llvmlite.readthedocs.io) gives Python the parts of LLVM
# we need: `parse_assembly` reads the text into a module, and already rejects
# text whose types disagree, that uses a register nobody defines, or whose
# block does not end with an instruction that leaves it; `verify` then checks
# the rules that need the whole function, such as that every register is
# defined before it is used. An MCJIT execution engine (MCJIT is one of
# LLVM's JIT compilers) compiles the module to machine code in memory and
# tells us the address of `main`, which `ctypes` can call. LLVM compiles for
# a *target machine* — this processor, this operating system, and a way of
# laying code out in memory — which `target_machine()` makes. One trap of
# llvmlite deserves a warning, because it fails far from its cause: an
# execution engine takes *ownership* of the target machine it is given and
# frees it when the engine is garbage-collected. One target machine can
# serve several engines while the first one lives; once that one has been
# collected, the next engine made with it crashes the process. So
# `target_machine()` makes a new one each time; that costs little next to
# the compilation itself.

# %%
#| export
from lcompiler.support import Result, run_in_child, target_machine


def load(text: str) -> llvm.ModuleRef:
    """Parse and verify LLVM assembly (raises RuntimeError if it is not valid)."""
    target_machine()                     # LLVM is initialised by the first call
    module = llvm.parse_assembly(text)
    module.verify()
    return module


def jit(text: str) -> llvm.ExecutionEngine:
    """An execution engine holding the machine code of an LLVM module."""
    engine = llvm.create_mcjit_compiler(load(text), target_machine())
    engine.finalize_object()
    return engine


# %% [markdown]
# Two functions that `load` refuses: the first returns an `i32` from a
# function declared to return an `i64`, which the parser rejects; the second
# reads `%2` before the instruction that defines it, which only the verifier
# notices.

# %%
for bad in ["define i64 @f() {\n  ret i32 2\n}\n",
            "define i64 @f() {\n  %1 = add i64 %2, 1\n  %2 = add i64 1, 2\n  ret i64 %1\n}\n"]:
    try:
        load(bad)
    except RuntimeError as error:
        print(error)

# %% [markdown]
# One thing stops us calling `main` directly. The program ends with
# `exit(0)`, and `exit` ends the *process* — in a notebook, the Jupyter
# kernel. So we run it the way a shell runs a program: in a child process.
# `os.fork` makes a copy of the current process, machine code included,
# cheaply: the copy shares the parent's memory until one of them writes to
# it. The child sends its standard output into a pipe that the parent
# reads and its standard error into a temporary file, calls `main`, and is
# gone; the parent collects what the child wrote and how it ended. If the
# compiled code exits, or even crashes, the notebook survives.
# `run_in_child(main)` does that, and returns what happened as a `Result`:
# what the child wrote on its standard output and error, and its exit
# status. The later chapters run L programs the same way, so it lives with
# `target_machine` in the module of what the stages share,
# `lcompiler.support` ([appendix B](B_support.ipynb#running-in-a-child)
# shows its code).

# %%
#| export
def jit_run(text: str, entry: str = "main") -> Result:
    """JIT-compile an LLVM module and run its entry function in a child process."""
    engine = jit(text)
    main = ctypes.CFUNCTYPE(ctypes.c_int)(engine.get_function_address(entry))
    return run_in_child(main)

# %%
jit_run(llvm_module(llvm0))

# %% [markdown]
# Nine, and a clean exit. The naive attempt from the beginning of the chapter
# can be run too. It is a function returning an `i64` rather than a program,
# and it cannot misbehave, so we call it in this process:

# %%
#| export
def run_i64_function(text: str, name: str, *args: int) -> int:
    """Call an i64 function of an LLVM module with i64 arguments, in this process."""
    engine = jit(text)
    signature = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_int64] * len(args))
    return signature(engine.get_function_address(name))(*args)


# %%
run_i64_function(naive, "f")

# %% [markdown]
# As predicted, `2 + 3` "evaluates" to 2.
#
# ## An interpreter, from the same program
#
# The post ends with its nicest trick. The program `llvm0` does not contain
# register names; it contains functions waiting for them. The printer passed
# strings (`"%1"`). An interpreter can pass *the numbers themselves*: then
# a `Value.Var` holds the sum that the `Add` which named it computed,
# `Add(v, w, program)` computes the sum and continues with `program(sum)`,
# and `Print` writes a line.
# Compiling once gives a program that can be printed or run.

# %%
#| export
def evaluate(program) -> tuple[str, int | None]:
    """Run a program: (what it printed, the value it returned or None if it halted)."""

    def value(v) -> int:
        match v:
            case Value.Var(n) | Value.Lit(n):
                return wrap64(n)
        raise TypeError(f"not a value: {v!r}")

    output = []
    while True:
        match program:
            case Llvm.Add(v, w, rest):
                program = rest(wrap64(value(v) + value(w)))
            case Llvm.Print(v, rest):
                output.append(f"{value(v)}\n")
                program = rest
            case Llvm.Halt():
                return "".join(output), None
            case Llvm.Ret(v):
                return "".join(output), value(v)
            case _:
                raise TypeError(f"not a program: {program!r}")


# %%
evaluate(llvm0)

# %% [markdown]
# The two readings of one program, side by side: the printer passes register
# names, the interpreter the sums themselves.

# %%
def sums(v, w) -> int:
    """The name the interpreter gives a result: its value (a Value.Var holds a number here)."""
    number = lambda x: x.value if isinstance(x, Value.Lit) else x.name
    return wrap64(number(v) + number(w))


llvm0_run = chain(llvm0, sums)
Picture([("named by the printer", [llvm0_chain]), ("named by the interpreter", [llvm0_run])],
        alt="The chain of llvm0 twice. Named by the printer: " + describe(llvm0_chain)
            + ". Named by the interpreter: " + describe(llvm0_run) + ".")

# %% [markdown]
# ## Functions: the caller chooses the ending
#
# `compile` does not decide how a program ends: its caller does, through the
# continuation it passes. Passing `Llvm.Ret` instead of "print, then halt"
# compiles the expression as the body of a function that returns its value.
# Source variables become the function's parameters; since a `Value.Var`
# holds a register name, a variable `x` compiles to the register `%x`, which
# is the parameter's name.

# %%
#| export
def free_variables(e) -> list:
    """The variables of an expression, in order of first appearance."""
    match e:
        case Exp.Var(x):
            return [x]
        case Exp.Lit(_):
            return []
        case Exp.Add(l, r):
            return list(dict.fromkeys(free_variables(l) + free_variables(r)))
    raise TypeError(f"not an expression: {e!r}")


def rename(e, f: Callable) -> object:
    """The expression with every variable x replaced by f(x)."""
    match e:
        case Exp.Var(x):
            return Exp.Var(f(x))
        case Exp.Lit(_):
            return e
        case Exp.Add(l, r):
            return Exp.Add(rename(l, f), rename(r, f))
    raise TypeError(f"not an expression: {e!r}")


def llvm_function(name: str, params: list[str], e) -> str:
    """An LLVM function of the parameters that returns the value of e."""
    body = pretty(compile(rename(e, lambda x: f"%{x}"), Llvm.Ret))
    args = ", ".join(f"i64 %{p}" for p in params)
    lines = "\n".join("  " + line for line in body.splitlines())
    return f"define i64 @{name}({args}) {{\n{lines}\n}}\n"


# %%
x_y = Exp.Add(Exp.Add(Exp.Var("x"), Exp.Lit(1)), Exp.Add(Exp.Var("y"), Exp.Var("x")))
print(llvm_function("f", free_variables(x_y), x_y))

# %% [markdown]
# `rename` is the post's parametric `var` at work: the same expression with
# register names for the compiler, and — below — with numbers for the
# interpreter. To interpret the function at x = 10, y = 20 we rename each
# variable to its value, and the compiled program's `Value.Var`s then hold
# numbers from the start:

# %%
env = {"x": 10, "y": 20}
(value_of(x_y, env),
 evaluate(compile(rename(x_y, env.get), Llvm.Ret)),
 run_i64_function(llvm_function("f", ["x", "y"], x_y), "f", 10, 20))

# %% [markdown]
# ## Reading expressions, and reporting mistakes
#
# To use the compiler from a shell we need to read `3 + (2 + 4)` from text,
# and to say clearly what is wrong when the text is not an expression. Every
# mistake that this book's compiler finds in its input is reported the same
# way, the way C compilers report them: the file, the line and the column,
# the message, then the line itself with a caret under the place:
#
# ```text
# <expression>:1:5: error: expected a number, a variable or '('
# 3 + + 4
#     ^
# ```
#
# That format is the contract of every stage, so its pieces live in a
# module of their own, `lcompiler.errors`: a `Source` (a name and its
# text), a `Span` (a stretch of a source, which prints as `FILE:LINE:COL`),
# and `CompileError`, the one exception the compiler raises for a mistake
# in its input, which renders itself in that format. Their code is in
# [appendix A](A_errors.ipynb#where-a-mistake-is-sources-and-spans).
#
# The grammar of the command line's expressions has two rules, `exp ::= atom
# ('+' atom)*` and `atom ::= number | variable | '(' exp ')'`, where `+` is
# left-associative: `1 + 2 + 3` is `(1 + 2) + 3`. A number is a run of
# digits (no leading zero, at most 2⁶³ − 1), a variable a lower-case letter
# or `_` followed by letters, digits and `_`. A scanner finds the tokens with
# a regular expression; a recursive-descent parser follows the grammar. Each
# token carries its span, and so does each error. Since an `Exp` has no room
# for a position, the parser records the span of each variable's first use
# in a dictionary on the side, only to report an unbound variable precisely.

# %%
#| export
import re

from lcompiler.errors import CompileError, Source, Span

_TOKEN = re.compile(r"\s*(?:(?P<num>[0-9]+)|(?P<var>[a-z_][A-Za-z0-9_]*)|(?P<op>[+()])|(?P<bad>\S))")
MAX_I64 = 2**63 - 1


def scan(text: str, name: str = "<expression>") -> list[tuple[str, str, Span]]:
    """The tokens of an expression: (kind, text, span), ending with ("end", "", span)."""
    source = Source(name, text)
    tokens = []
    pos = 0
    while (m := _TOKEN.match(text, pos)) and m.lastgroup:
        kind = m.lastgroup
        span = Span(source, m.start(kind), m.end(kind))
        if kind == "bad":
            raise CompileError(f"unexpected character {m.group(kind)!r}", span)
        tokens.append((kind, m.group(kind), span))
        pos = m.end()
    tokens.append(("end", "", Span(source, len(text.rstrip()), len(text.rstrip()) + 1)))
    return tokens


# %%
scan("3 + (2 + 4)")

# %% [markdown]
# The parser reads the tokens with one function per rule of the grammar,
# `exp` and `atom`, sharing the position `i`; `expect` reports what was
# expected and what was found instead.

# %%
#| export
def parse(text: str, name: str = "<expression>") -> tuple[object, dict]:
    """An expression from text, and the span of each variable's first use."""
    tokens = scan(text, name)
    spans, i = {}, 0

    def expect(what: str):
        nonlocal i
        kind, tok, span = tokens[i]
        if tok != what:
            found = "the end of the expression" if kind == "end" else repr(tok)
            raise CompileError(f"expected {what!r}, found {found}", span)
        i += 1

    def atom():
        nonlocal i
        kind, tok, span = tokens[i]
        i += 1
        if kind == "num":
            if len(tok) > 1 and tok[0] == "0":
                raise CompileError("a number cannot start with 0", span)
            if int(tok) > MAX_I64:
                raise CompileError("this number does not fit in 64 bits", span)
            return Exp.Lit(int(tok))
        if kind == "var":
            spans.setdefault(tok, span)
            return Exp.Var(tok)
        if tok == "(":
            e = exp()
            expect(")")
            return e
        i -= 1
        raise CompileError("expected a number, a variable or '('", span)

    def exp():
        nonlocal i
        e = atom()
        while tokens[i][1] == "+":
            i += 1
            e = Exp.Add(e, atom())
        return e

    e = exp()
    kind, tok, span = tokens[i]
    if kind != "end":
        raise CompileError(f"expected '+' or the end of the expression, found {tok!r}", span)
    return e, spans


# %%
print(parse("3 + (2 + 4)")[0] == prog0)

# %%
for bad in ["3 + + 4", "(1 + 2", "1 + 99999999999999999999", "1 2", "1 + @"]:
    try:
        parse(bad)
    except CompileError as error:
        print(error.render(), end="\n\n")

# %% [markdown]
# The recursion in `exp` and `atom` follows the nesting of parentheses,
# two Python frames per parenthesis; an expression nested a thousand
# parentheses deep passes Python's recursion limit, and `parse` raises
# `RecursionError`, which the command line reports instead of crashing on
# (below). L's parser in [chapter 4a](04a_syntax.ipynb) has the same concern
# at a larger scale.
#
# ## The chapter from the shell: lc add
#
# The package installs a command, `lc`, and `lc add EXPR` runs this
# chapter's compiler on an expression: it parses it, compiles it, and runs
# it natively; `--llvm` prints the LLVM module instead, and `--interp` runs
# the interpreter instead of the native code. A whole program has no values
# to give its variables, so `lc add` accepts only *closed* expressions, those
# without variables. Errors in the expression are reported in the format
# above and exit with status 1; and whatever goes wrong, no Python traceback
# reaches the user. The command is a few lines around the functions of this
# chapter; it lives with the rest of the command line in
# [appendix C](C_cli.ipynb#lc-add).
#
# In the notebook we call `lc`'s `main` with the arguments a shell would
# pass. What it prints goes to standard output, an error to standard error
# (shown in red in Jupyter), and `main` returns the exit status, which
# Jupyter shows as the cell's value:

# %%
from lcompiler.cli import main

main(["add", "3 + (2 + 4)"])

# %%
main(["add", "--llvm", "1 + 2"])

# %%
main(["add", "1 + 2 + x"])

# %% [markdown]
# And the expression nested a thousand parentheses deep, which the parser's
# recursion cannot follow: a message and the exit status 1, not a traceback.

# %%
main(["add", "(" * 1000 + "1" + ")" * 1000])

# %% [markdown]
# ## The promise, checked
#
# Three meanings of an expression now exist: `value_of` on the tree, the
# interpreter `evaluate` on the compiled program, and the machine code that
# LLVM makes from the printed program. They must agree, on everything,
# including overflow. Here they are side by side on a few expressions chosen
# to catch mistakes — a lone literal (no instruction at all), nesting on
# either side, and wrap-around in both directions: past the largest number
# in the fifth and sixth lines (where (2⁶³ − 1) + (2⁶³ − 1) wraps to −2),
# and past the smallest in the last, where each parenthesis wraps to
# −2⁶³ + 1 and their sum, −2⁶⁴ + 2, wraps to 2:

# %%
def three_ways(text: str) -> tuple[int, str, str]:
    e, _ = parse(text)
    program = compile(e, lambda result: Llvm.Print(result, Llvm.Halt()))
    run = jit_run(llvm_module(program))
    assert run.status == 0
    return value_of(e), evaluate(program)[0].strip(), run.stdout.strip()


cases = ["7", "3 + (2 + 4)", "((1 + 2) + 3) + 4", "1 + (2 + (3 + 4))",
         "9223372036854775807 + 1", "(9223372036854775807 + 9223372036854775807) + 2",
         "(9223372036854775807 + 2) + (9223372036854775807 + 2)"]
for text in cases:
    tree, interp, native = three_ways(text)
    assert str(tree) == interp == native, (text, tree, interp, native)
    print(f"{text:55} {native}")

# %% [markdown]
# The property-based tests in `tests/test_addlang.py` make the same
# comparison on random expressions generated by
# [Hypothesis](https://hypothesis.readthedocs.io): for whole programs (run in
# a child process), for functions of the variables `x`, `y` and `z` given
# random values (called in this process), and for programs that print
# between two additions. They also check, on random short texts, that
# `parse` either reads each one or reports an error whose caret is under
# the column it names, never another exception.
#
# ## What to take from this chapter
#
# - A compiler whose results *flow down* into a continuation needs no state to
#   name intermediate results, cannot use a name outside the code that binds
#   it, and produces no useless moves.
# - The same compiled program can be printed (names are strings) or run
#   (names are numbers): the representation does not fix what a variable is.
# - LLVM checks our output (`parse_assembly`, `verify`), compiles it, and
#   runs it; running machine code that calls `exit` belongs in a child
#   process.
#
# ## Exercises
#
# 1. Add multiplication: `Exp.Mul`, an `Llvm.Mul`, the `mul` instruction.
#    Which functions change, and which do not?
# 2. Add `let x = e1 in e2`. Compiling it needs no new instruction: what does
#    `compile` pass to the continuation of `e1`?
# 3. Make `Print` print every intermediate sum. Why would this be awkward with
#    `compile2`, and easy with `compile`?
# 4. Add `if0 e1 then e2 else e3` with two basic blocks. Where does the
#    continuation `k` get called twice, and what goes wrong when the rest of
#    the program is big? ([Chapter 3](03_anf.ipynb) answers.)
# 5. Draw the chain of `compile(x_y, Llvm.Ret)` with `chain` and `Picture`.
#    How many boxes does it have, and how many does an expression with n `+`
#    give? Which `Add` reads registers that earlier boxes named, and why can
#    no box read a name that a box *below* it binds?
#
# <details><summary>Solutions</summary>
#
# 1. `Exp.Mul` and `Llvm.Mul` are new classes; `value_of`, `compile`,
#    `pretty` and `evaluate` each get one case, a copy of the case for `Add`
#    with `*` and `mul` (LLVM's `mul` wraps around as `add` does, so
#    `wrap64` still gives the meaning); so does the notebook's `chain`.
#    `free_variables` and `rename` each need a case that only recurses
#    (they raise on a node they do not know), and neither knows what the
#    operator does. `llvm_value`, `llvm_module`, `llvm_function`, `jit`,
#    `jit_run` and `run_i64_function` need nothing: they see values, or
#    the text that `pretty` makes. To type `*` in `lc add`, the scanner's
#    operators get `*`, and the parser a level of precedence, so that
#    `1 + 2 * 3` is 7: `exp ::= term ('+' term)*`, `term ::= atom ('*'
#    atom)*`, with a function `term` between `exp` and `atom`.
# 2. The value of `e1` itself, bound to `x` for the compilation of `e2`.
#    With an environment from variables to values as a new argument of
#    `compile`, `Let(x, e1, e2)` compiles to `compile(e1, lambda v1:
#    compile(e2, k, env | {x: v1}))`, and `Exp.Var(x)` to `k(env[x])`. No
#    instruction is emitted for the `let`: the continuation of `e1` *is* the
#    binding.
# 3. In `compile`, the case `Add` becomes `... Llvm.Add(t1, t2, lambda r:
#    Llvm.Print(Value.Var(r), k(Value.Var(r))))`: one line, since the rest
#    of the program is at hand as `k`. `compile2` returns a list and a
#    register; it would need to add a `Print1` after every `Add1` it
#    builds, and the counter would have to count the registers that
#    `printf`'s results take, which the printer of `compile`'s programs
#    already does in one place.
# 4. In the case `if0`, both branches must go on with the rest of the
#    program: `compile(e2, k)` and `compile(e3, k)` each call `k`, and each
#    call builds the whole rest of the program again, once per branch — so
#    the program doubles with each `if0` in a chain of them, each in the
#    rest of the one before (chapter 3 measures it). The cure, a *join
#    point* that both branches jump to, is chapter 3's subject.
# 5. `Picture([("x_y", [chain(compile(x_y, Llvm.Ret), register_names())])],
#    alt="…")`, drawn below. An expression with n `+` gives n + 1 boxes: one
#    `Add` per `+` (literals and variables make none, as promised) and the
#    `Ret` at the end; `x_y` has three `+`, so four boxes. The first two
#    `Add`s read only the parameters and a literal (`x + 1`, `y + x`); the
#    third adds the two registers `%1` and `%2` that they named. A name is
#    born on the edge below the `Add` that computes it — it is the parameter
#    of the function that builds the rest of the chain — so only the boxes
#    below that edge can mention it: a use before the definition cannot even
#    be written down.
#
# </details>
#
# The solutions that are code, run: exercise 2's `let` (with an environment
# argument), exercise 3's printing of every sum, and exercise 5's count, on
# `x_y` and the cases above.

# %%
@dataclass(frozen=True)
class Let:                                   # exercise 2: let name = bound in body
    name: str
    bound: object
    body: object


def compile_let(e, k: Callable, env: dict) -> object:
    match e:
        case Let(x, e1, e2):
            return compile_let(e1, lambda v1: compile_let(e2, k, env | {x: v1}), env)
        case Exp.Var(x):
            return k(env[x])
        case Exp.Lit(n):
            return k(Value.Lit(n))
        case Exp.Add(e1, e2):
            return compile_let(e1, lambda t1: compile_let(e2, lambda t2:
                   Llvm.Add(t1, t2, lambda r: k(Value.Var(r))), env), env)


def compile_printing(e, k: Callable) -> object:   # exercise 3: print every sum
    match e:
        case Exp.Var(x):
            return k(Value.Var(x))
        case Exp.Lit(n):
            return k(Value.Lit(n))
        case Exp.Add(e1, e2):
            return compile_printing(e1, lambda t1: compile_printing(e2, lambda t2:
                   Llvm.Add(t1, t2, lambda r: Llvm.Print(Value.Var(r), k(Value.Var(r))))))


print_then_halt = lambda result: Llvm.Print(result, Llvm.Halt())
doubled = Let("x", Exp.Add(Exp.Lit(1), Exp.Lit(2)), Exp.Add(Exp.Var("x"), Exp.Var("x")))
program = compile_let(doubled, print_then_halt, {})
assert evaluate(program)[0] == jit_run(llvm_module(program)).stdout == "6\n"
program = compile_printing(prog0, print_then_halt)
assert evaluate(program)[0] == jit_run(llvm_module(program)).stdout == "6\n9\n9\n"

# %%
def boxes(box: Box) -> int:
    return 1 + sum(boxes(child) for child in box.children)


for text in cases:
    e, _ = parse(text)
    assert boxes(chain(compile(e, Llvm.Ret), register_names())) == text.count("+") + 1
x_y_chain = chain(compile(x_y, Llvm.Ret), register_names())
Picture([("x_y compiled with the continuation Llvm.Ret", [x_y_chain])],
        alt="The chain of x_y, top to bottom: " + describe(x_y_chain))
