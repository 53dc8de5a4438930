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
# A language with nothing but whole numbers and `+`, compiled to LLVM by a
# `compile` function that is told, instead of asked, what to do with each
# result; then the LLVM text is verified, JIT-compiled and run, and agrees with
# an interpreter.
#
# This chapter re-tells, in Python, a short literate Idris post, *Writing an
# LLVM compiler using continuation passing* (seed 003 of this book). Its
# language is tiny on purpose: the one idea it carries, that a compiler can
# take a **continuation** — "what to do next with the value you compute" —
# instead of returning a result, is the idea the whole book is built on. The
# A-normal form of chapter 3 and the conversion of L to CPS in chapter 7 are
# this chapter's `compile`, grown up.
#
# What this chapter builds, in the order it builds it:
#
# | name | what it is |
# |---|---|
# | `Exp.Var`, `Exp.Lit`, `Exp.Add` | the source language: variables, literals, additions |
# | `Value.Var`, `Value.Lit` | what an instruction operates on: a register or an immediate |
# | `Llvm.Add`, `Llvm.Print`, `Llvm.Halt`, `Llvm.Ret` | a program, with the rest of the program inside each instruction |
# | `compile(e, k)` | source → program; `k` receives the value of `e` |
# | `pretty(p)`, `llvm_module(p)` | program → LLVM assembly text |
# | `jit_run(text)` | LLVM text → verified, JIT-compiled, run in a child process; its output |
# | `evaluate(p)` | the same program run by an interpreter |
# | `lc add EXPR` | all of it from the command line |
#
# and the promise it keeps, checked at the end and in `tests/test_addlang.py`:
# for every expression, the tree's value, the interpreter's output and the
# output of the native code are the same.

# %%
#| default_exp addlang

# %% [markdown]
# A word on reading this notebook. Cells whose first line is `#| export` are
# copied into the Python package: this notebook's cells go to
# `lcompiler/addlang.py` (the `#| default_exp` line above names it), and a
# cell marked `#| export cli` goes to the `lc` command. Everything else —
# examples, pictures, checks — stays in the book. The preface explains the
# mechanism.

# %%
#| export
import ctypes
import os
from dataclasses import dataclass
from typing import Callable

import llvmlite.binding as llvm

# %% [markdown]
# ## The language of addition
#
# An expression is a variable, an integer literal, or the sum of two
# expressions. The Idris original writes it as a data type with three
# constructors in a namespace `Exp`, because the target language will reuse
# the names `Var`, `Lit` and `Add`. We keep the names and the namespaces: a
# class used as a namespace holds one small frozen dataclass per constructor,
# so `Exp.Add(Exp.Lit(3), Exp.Var("x"))` reads like the seed's
# ``Add (Lit 3) (Var "x")``.
#
# The type of a variable is left open. In the seed, `AddExp var` is
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
# Our running example is the seed's `prog0`, that is 3 + (2 + 4):

# %%
prog0 = Exp.Add(Exp.Lit(3), Exp.Add(Exp.Lit(2), Exp.Lit(4)))
prog0

# %% [markdown]
# What does an expression mean? Its value, of course — but we must say what
# kind of number it is, because the native code will use machine integers.
# We choose what L itself will use (chapter 4): **signed 64-bit integers that
# wrap around** on overflow, so 2⁶³ − 1 + 1 is −2⁶³. (The seed's interpreter
# used Idris's `Int` while its LLVM used 32-bit `i32` with `nsw`, under which
# an overflowing addition has no defined result: the two disagreed on large
# numbers. Fixing one meaning and testing both against it is the first habit
# of this book.)
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
    class Ret1:          # "return this value": the seed's hypothetical Ret
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
# We will run it as soon as we have a JIT, below.

# %%
naive = "define i64 @f() {\n  ret i64 2\n  ret i64 3\n}\n"
print(naive)

# %% [markdown]
# The two problems are the ones the seed names. A value is not an
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
# LLVM (whose registers are assigned exactly once) rejects. The information
# flows up the tree (where the result is, what the counter is now) when the
# program being built flows down it.
#
# ## Programs that continue
#
# The seed's way out is to stop building lists. Fold the "rest of the
# program" into each instruction, and let an instruction that produces a
# result *bind a name* for it, the way a Python `lambda` binds its parameter:
#
# ```text
# explicit destinations                     continuation encoding
# Add1("%1", Lit(2), Lit(3))                Add(Lit(2), Lit(3), lambda t1:
# Add1("%2", Var("%1"), Lit(4))             Add(Var(t1), Lit(4), lambda t2:
# Add1("%3", Var("%1"), Var("%2"))          Add(Var(t1), Var(t2), lambda t3:
# Print1(Var("%3"))                         Print(Var(t3),
# Halt1()                                   Halt()))))
# ```
#
# `Add(v, w, program)` reads: add `v` and `w`, call the sum `z`, and go on
# with `program(z)`. A program is no longer a list but a chain in which each
# link holds the next; the name of a result exists exactly where the rest of
# the program can see it, and nowhere else. We add a fourth ending to the
# seed's three: `Ret`, which returns a value from a function, so the same
# compiler can produce functions as well as whole programs.

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
# *reads* the program, when it calls each `program` function. The compiled
# seed example ends by printing its result and halting:

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
# instead of being moved into a register first. Chapter 7 calls such useless
# steps *administrative redexes*, and avoids them with exactly this
# technique. Second, the continuation `k` is called exactly once in every case
# — this language has no `if`. When a language has branches, the rest of the
# program is needed on two paths, and calling `k` twice would copy it; chapter
# 3 is about what to do then (*join points*).
#
# ## Printing LLVM
#
# To give the program to LLVM we must finally choose names. Now that the
# program is a chain rather than a tree, a counter local to one loop is
# enough: walk the chain, and each time an `Add` wants a name, give it the next
# number.
#
# Three details of LLVM's text format shape the printer, and the first two
# differ from the 2016 original:
#
# - Numbered registers (`%1`, `%2`, …) must be numbered in order, and *every*
#   unnamed value takes a number, including the entry block of a function
#   (`%0` when the function has no numbered parameters) and the `i32` that
#   `printf` returns. So numbering starts at 1, and the printer names
#   `printf`'s result too, even though nobody reads it; otherwise an `Add`
#   after a `Print` would be misnumbered.
# - Since LLVM 15 pointers are untyped: `ptr`, not `i8*`. The seed's
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
# The loop replaces the seed's recursive `prettyLlvm`: Python has no tail
# calls, and a long program would otherwise exhaust Python's stack.
#
# A complete module needs the format string for `printf`, declarations of the
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
# The format is `"%lld\n"`: a 64-bit integer and a newline, where the seed
# printed a 32-bit `%i` and no newline.
#
# ## Running it
#
# [llvmlite](https://llvmlite.readthedocs.io) gives Python the parts of LLVM
# we need: `parse_assembly` reads the text into a module, `verify` checks that
# it is well formed (types agree, registers are defined before use, every
# block ends with a terminator), and an MCJIT execution engine compiles it to
# machine code in memory and tells us the address of `main`, which `ctypes`
# can call.
#
# One thing stops us calling it directly. The program ends with `exit(0)`,
# and `exit` ends the *process* — in a notebook, the Jupyter kernel. So we run
# it the way a shell runs a program: in a child process. `os.fork` makes a
# copy of the current process, machine code included, in about a
# millisecond. The child points its standard output at a pipe, calls `main`,
# and is gone; the parent reads what came through the pipe and how the child
# ended. Whatever the compiled code does, the notebook survives. (Reading the
# pipe in Python and printing the text also makes the output visible to
# `nbval`, which does not see what native code writes to file descriptor 1.)
#
# One trap of llvmlite deserves a warning, because it fails far from its
# cause: an execution engine takes *ownership* of the target machine it is
# given and frees it when the engine is garbage-collected. Sharing one target
# machine between engines works once, and the next engine crashes the process.
# So `target_machine()` makes a new one each time; it is cheap.

# %%
#| export
_llvm_ready = False


def target_machine() -> llvm.TargetMachine:
    """A new LLVM target machine for this host; initialises LLVM on first use."""
    global _llvm_ready
    if not _llvm_ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _llvm_ready = True
    return llvm.Target.from_default_triple().create_target_machine()


def load(text: str) -> llvm.ModuleRef:
    """Parse and verify LLVM assembly (raises RuntimeError if it is not valid)."""
    target_machine()
    module = llvm.parse_assembly(text)
    module.verify()
    return module


def jit(text: str) -> llvm.ExecutionEngine:
    """An execution engine holding the machine code of an LLVM module."""
    engine = llvm.create_mcjit_compiler(load(text), target_machine())
    engine.finalize_object()
    return engine


# %%
#| export
_libc = ctypes.CDLL(None)


@dataclass(frozen=True)
class Run:
    """How a program run in a child process ended."""
    output: str    # what it wrote to its standard output
    status: int    # its exit status, or -N if signal N killed it


def run_in_child(function: Callable[[], int]) -> Run:
    """Call function() in a forked child whose standard output is captured."""
    _libc.fflush(None)                 # nothing buffered may be written twice
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                       # the child: never returns
        status = 70
        try:
            os.close(read_end)
            os.dup2(write_end, 1)
            status = function()
            _libc.fflush(None)
        finally:
            os._exit(status)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 1 << 16):
        chunks.append(chunk)
    os.close(read_end)
    _, wait_status = os.waitpid(pid, 0)
    return Run(b"".join(chunks).decode(), os.waitstatus_to_exitcode(wait_status))


def jit_run(text: str, entry: str = "main") -> Run:
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
# The seed ends with its nicest trick. The program `llvm0` does not contain
# register names; it contains functions waiting for them. The printer passed
# strings (`"%1"`). An interpreter can pass *the numbers themselves*: then
# `Value.Var` holds the value computed so far, `Add(v, w, program)` computes
# the sum and continues with `program(sum)`, and `Print` writes a line.
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
# `rename` is the seed's parametric `var` at work: the same expression with
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
# error this book's compiler reports looks the same, the way C compilers
# report them: the file, the line and the column, the message, then the line
# itself with a caret under the place:
#
# ```text
# <expression>:1:5: error: expected a number, a variable or '('
# 3 + + 4
#     ^
# ```
#
# That format is the contract for every later stage, so its pieces go into a
# module of their own, `lcompiler.errors`: a `Source` (a name and its text),
# a `Span` (a stretch of a source), and `Diagnostic`, an exception that knows
# where the mistake is and how to show it. Its subclass `CompileError` is the
# one exception the compiler raises for a mistake in its input; chapter 4 adds
# a second subclass for errors that happen while an L program runs, printed as
# `runtime error` instead of `error`, and builds L's front end on them.

# %%
#| export errors
"""Source text, spans in it, and the compiler's one error type."""

import bisect
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """A named text: a file, a notebook cell, a command-line argument."""
    name: str
    text: str
    line_starts: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        starts = [0] + [i + 1 for i, c in enumerate(self.text) if c == "\n"]
        object.__setattr__(self, "line_starts", tuple(starts))

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def line_text(self, line: int) -> str:
        start = self.line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]


@dataclass(frozen=True)
class Span:
    """The characters [start, end) of a source."""
    source: Source
    start: int
    end: int

    def __repr__(self) -> str:
        line, col = self.source.line_col(self.start)
        return f"{self.source.name}:{line}:{col}"

    def to(self, other: "Span") -> "Span":
        """The span from the start of this one to the end of other."""
        return Span(self.source, self.start, other.end)


class Diagnostic(Exception):
    """A mistake in a program, with where it is; render() shows it to a person."""

    kind = "error"     # what the message calls it
    status = 1         # the exit status of lc when it stops on this

    def __init__(self, message: str, span: Span):
        super().__init__(message)
        self.message, self.span = message, span

    def render(self) -> str:
        """FILE:LINE:COL: error: message, the source line, and a caret under the place."""
        source = self.span.source
        line, col = source.line_col(self.span.start)
        text = source.line_text(line)
        pad = "".join("\t" if c == "\t" else " " for c in text[:col - 1])
        width = max(1, min(self.span.end, source.line_starts[line - 1] + len(text)) - self.span.start)
        return (f"{source.name}:{line}:{col}: {self.kind}: {self.message}\n"
                f"{text}\n{pad}^{'~' * (width - 1)}")

    def __str__(self) -> str:
        return self.render()


class CompileError(Diagnostic):
    """A mistake found before the program runs: the compiler's one error type."""


# %% [markdown]
# The caret line copies the tabs of the source line, so the caret stays under
# the right character whatever the terminal's tab width; a span longer than one
# character is underlined with `~`, as clang does.
#
# The grammar of the command line's expressions is one rule, `exp ::= atom
# ('+' atom)*` with `atom ::= number | variable | '(' exp ')'`, where `+` is
# left-associative. A scanner finds the tokens with a regular expression; a
# recursive-descent parser follows the grammar. Each token carries its span,
# and so does each error. Since `compile` has no state of its own, the parser
# records the spans of variables in a dictionary on the side, only to report
# an unbound variable precisely.

# %%
#| export
import re

from lcompiler.errors import CompileError, Source, Span

_TOKEN = re.compile(r"\s*(?:(?P<num>[0-9]+)|(?P<var>[a-z_][A-Za-z0-9_]*)|(?P<op>[+()])|(?P<bad>\S))")
MAX_I64 = 2**63 - 1


def parse(text: str, name: str = "<expression>") -> tuple[object, dict]:
    """An expression from text, and the span of each variable's first use."""
    source = Source(name, text)
    tokens = []                         # (kind, text, span), ending with ("end", "", span)
    pos = 0
    while (m := _TOKEN.match(text, pos)) and m.lastgroup:
        kind = m.lastgroup
        span = Span(source, m.start(kind), m.end(kind))
        if kind == "bad":
            raise CompileError(f"unexpected character {m.group(kind)!r}", span)
        tokens.append((kind, m.group(kind), span))
        pos = m.end()
    tokens.append(("end", "", Span(source, len(text.rstrip()), len(text.rstrip()) + 1)))
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
parse("3 + (2 + 4)")[0] == prog0

# %%
for bad in ["3 + + 4", "(1 + 2", "1 + 99999999999999999999", "1 2", "1 + @"]:
    try:
        parse(bad)
    except CompileError as error:
        print(error.render(), end="\n\n")

# %% [markdown]
# The recursion in `exp` and `atom` follows the nesting of parentheses; an
# expression nested a thousand parentheses deep would exhaust Python's stack,
# a limit the command line reports instead of crashing on (below). L's parser
# in chapter 4 has the same concern at a larger scale.
#
# ## The chapter from the shell: lc add
#
# The package installs a command, `lc`. Each chapter that has something to
# run adds a sub-command to it, in a cell marked `#| export cli`; this is
# the first. `lc add EXPR` parses an expression, compiles it, and runs it
# natively; `--llvm` prints the LLVM module instead, and `--interp` runs the
# interpreter instead of the native code. Errors in the expression are
# reported in the format above and exit with status 1; and whatever goes wrong,
# no Python traceback reaches the user.
#
# The command line is a small registry: `command` records a sub-command's
# help text, its arguments and the function that runs it; `main` builds the
# `argparse` parser from the registry and turns errors into messages and exit
# statuses: a `Diagnostic` (a mistake in the program) is shown with its
# place, a `UsageError` (a file that cannot be read, say) as `lc: error: …`.

# %%
#| export cli
"""The `lc` command: one sub-command per chapter that has something to run."""

import argparse
import os
import sys
import textwrap
from importlib import metadata
from typing import Callable

from lcompiler.errors import CompileError, Diagnostic

COMMANDS: dict[str, tuple[str, tuple, Callable]] = {}
ENVIRONMENT: dict[str, str] = {}       # the variables lc reads, for --help: name -> what it does


class UsageError(Exception):
    """A problem with how lc was called, not with a program: a file it cannot read, say."""


def arg(*names, **options) -> tuple:
    """One argument of a sub-command, as argparse's add_argument takes it."""
    return names, options


def command(name: str, help: str, *arguments: tuple) -> Callable:
    """Register `lc NAME`, run by the decorated function(args) -> exit status."""
    def register(run: Callable) -> Callable:
        COMMANDS[name] = (help, arguments, run)
        return run
    return register


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):      # argparse's status is 2, a runtime error's for lc: use 1
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def version() -> str:
    try:
        return f"lc {metadata.version('lcompiler')} (Python {sys.version.split()[0]})"
    except metadata.PackageNotFoundError:
        return "lc (not installed)"


def flush_output() -> str | None:
    """Flush standard output; why it cannot be written, if it cannot (None for a closed pipe)."""
    try:
        sys.stdout.flush()
        return None
    except OSError as error:    # nothing more can go there: send what is buffered nowhere, quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return None if isinstance(error, BrokenPipeError) else error.strerror or str(error)


def main(argv: list[str] | None = None) -> int:
    """Run lc; return its exit status (0 ok, 1 error in the input or the system, 2 failure at run
    time, 3 a bug in lc)."""
    epilog = "environment variables:\n" + "\n".join(
        textwrap.fill(text, 79, initial_indent=f"  {name:15} ", subsequent_indent=" " * 18)
        for name, text in ENVIRONMENT.items())
    parser = ArgumentParser(prog="lc", description="The L compiler of the book.",
                            epilog=epilog if ENVIRONMENT else None,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help, arguments, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        for names, options in arguments:
            p.add_argument(*names, **options)
        p.set_defaults(run=run)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:          # --help, --version, or a mistake in the arguments
        return exit.code
    try:
        status = args.run(args)
    except Diagnostic as error:
        flush_output()                 # what the program printed comes first
        print(error.render(), file=sys.stderr)
        return error.status
    except UsageError as error:
        print(f"lc: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:            # the reader of the output is gone (lc … | head): stop, quietly
        flush_output()
        return 1
    except OSError as error:           # the system, not the program or lc: a full disk, no C compiler
        flush_output()
        where = f"{error.filename}: " if error.filename else ""
        print(f"lc: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1
    except (RecursionError, MemoryError) as error:
        print("lc: error: " + ("the input is nested too deeply for this compiler"
                               if isinstance(error, RecursionError) else "out of memory"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug in lc, not in the input: say so, briefly
        print(f"lc: internal compiler error: {type(error).__name__}: {error}", file=sys.stderr)
        return 3
    if problem := flush_output():
        print(f"lc: error: cannot write the output: {problem}", file=sys.stderr)
        return 1
    return status


# %%
#| export cli
from lcompiler import addlang


@command("add", "compile an expression of additions to LLVM and run it (chapter 1)",
         arg("expression", help="for example '3 + (2 + 4)'"),
         arg("--llvm", action="store_true", help="print the LLVM module instead of running it"),
         arg("--interp", action="store_true", help="run the interpreter instead of native code"))
def add_command(args) -> int:
    e, spans = addlang.parse(args.expression)
    if unbound := addlang.free_variables(e):
        raise CompileError(f"unbound variable {unbound[0]}: lc add compiles closed expressions",
                           spans[unbound[0]])
    program = addlang.compile(e, lambda result: addlang.Llvm.Print(result, addlang.Llvm.Halt()))
    if args.llvm:
        print(addlang.llvm_module(program), end="")
        return 0
    if args.interp:
        output, _ = addlang.evaluate(program)
        print(output, end="")
        return 0
    run = addlang.jit_run(addlang.llvm_module(program))
    print(run.output, end="")
    if run.status != 0:
        print(f"lc: the compiled program failed with status {run.status}", file=sys.stderr)
        return 2
    return 0


# %% [markdown]
# In the notebook we call `main` with the arguments a shell would pass (the
# error goes to standard error, shown in red in Jupyter, with the exit status
# returned):

# %%
from lcompiler.cli import main

main(["add", "3 + (2 + 4)"])

# %%
main(["add", "--llvm", "1 + 2 + x"])

# %% [markdown]
# ## The promise, checked
#
# Three meanings of an expression now exist: `value_of` on the tree, the
# interpreter `evaluate` on the compiled program, and the machine code that
# LLVM makes from the printed program. They must agree, on everything,
# including overflow. Here they are side by side on a few expressions chosen
# to catch mistakes — a lone literal (no instruction at all), deep nesting on
# either side, wrap-around in both directions:

# %%
def three_ways(text: str) -> tuple[int, str, str]:
    e, _ = parse(text)
    program = compile(e, lambda result: Llvm.Print(result, Llvm.Halt()))
    run = jit_run(llvm_module(program))
    assert run.status == 0
    return value_of(e), evaluate(program)[0].strip(), run.output.strip()


cases = ["7", "3 + (2 + 4)", "((1 + 2) + 3) + 4", "1 + (2 + (3 + 4))",
         "9223372036854775807 + 1", "(9223372036854775807 + 9223372036854775807) + 2"]
for text in cases:
    tree, interp, native = three_ways(text)
    assert str(tree) == interp == native, (text, tree, interp, native)
    print(f"{text:50} {native}")

# %% [markdown]
# The property-based test in `tests/test_addlang.py` makes the same comparison
# on hundreds of random expressions generated by
# [Hypothesis](https://hypothesis.readthedocs.io), for whole programs (run in
# a child process) and for functions of random variables (called in process),
# and checks that every malformed expression is reported as an error, never as
# a traceback.
#
# ## What to take from this chapter
#
# - A compiler whose results *flow down* into a continuation needs no state to
#   name intermediate results, cannot use a name outside the code that binds
#   it, and produces no useless moves.
# - The same compiled program can be printed (names are strings) or run
#   (names are numbers): the representation does not fix what a variable is.
# - LLVM checks our output (`verify`), compiles it, and runs it; running
#   machine code that calls `exit` belongs in a child process.
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
#    the program is big? (Chapter 3 answers.)
