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
# # Chapter 4b. What L means: a core language and a reference interpreter
#
# The syntax tree of [chapter 4a](04a_syntax.ipynb) is faithful to what the
# programmer wrote, sugar included. This chapter shrinks it to a small **core
# language**, checks that every name refers to something, and defines what a
# core program *does* with an interpreter written to be read, not to be fast.
# Every later stage — type inference, conversion to CPS, closure conversion,
# the LLVM back end — is tested against this interpreter: when the native
# code of chapter 10 prints something different from what the interpreter
# prints, the native code is wrong.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 4a](04a_syntax.ipynb), for the syntax tree, the parser,
# the printer (`lcompiler.syntax`); [chapter 4](04_pipeline.ipynb), for the
# pipeline of stages (`lcompiler.pipeline`); from the workshop, [appendix
# A](A_errors.ipynb)'s located errors (`lcompiler.errors`) and pictures
# (`lcompiler.drawing`), and [appendix B](B_support.ipynb)'s tools for
# running on a stack of its own. What L means is written down for
# programmers in [the language reference](../language.md), the contract
# that the compiler meets (this chapter calls it "the contract"); this
# chapter turns it into code.
#
# **Builds:** the module `lcompiler.core` (the core language, `desugar`,
# `resolve`, `pretty_core`); the module `lcompiler.primitives` (the table of
# L's primitive operations, which every later stage reads); the module
# `lcompiler.interp` (the reference interpreter: `check`, `Interpreter`,
# `run_source`); and the pipeline's stage `core` (`lc show core`); `lc run
# --interp` runs a program with this interpreter. [Chapter 5](05_types.ipynb) infers the types of this core
# language, and every later chapter is tested against this interpreter.
#
# </div>
#
# ## What this chapter promises
#
# Three steps, three promises:
#
# - `desugar(program)` turns a syntax tree into a core program, removing
#   every form of sugar. It cannot fail except on a `_` used as a value, a
#   misused `print`/`assert`/`raise`, or a type variable in the fields of an
#   exception. The exceptions — three predefined, then the program's — become
#   the constructors of one data type, `Exn`, in one `data` item before the
#   others, which a program that does not use exceptions does not get.
# - `resolve(core)` checks names: unknown variables, constructors and
#   exceptions (with a guess at the name meant), wrong constructor arity,
#   assignment to something that is not a `var`, a name defined twice (an
#   exception named like a constructor or a predefined exception included),
#   a top-level definition read before it can have run. Each is a
#   `CompileError` at the offending name. It also records, on each
#   variable, what kind of thing it names.
# - `Interpreter().run(program)` executes a resolved core program
#   (`run_source(source)` parses, desugars, resolves and runs a text in one
#   call), printing to standard output. `raise(e)` raises; `try` catches
#   what its clauses match, and passes the rest on; a failed assertion, a
#   match failure and a division by zero raise the predefined exceptions. The program stops with a
#   `RunError` — printed as `FILE:LINE:COL: runtime error: …` — on an
#   exception that nothing catches (a predefined one with the message it had
#   before L had exceptions, any other as `uncaught exception V`, at its
#   first raise), on a read of a definition that has not run yet, or on a
#   stack overflow; and,
#   printed as `FILE: runtime error: out of memory: …`, when its live data
#   fill the heap limit that the compiled code has (`LC_HEAP_LIMIT`). A
#   call costs it a few Python function calls; the end of the chapter
#   measures how many, and how fast, against the interpreter as it was
#   before they were made fewer.

# %%
#| default_exp core

# %% [markdown]
# ## The core language
#
# ```text
# e ::= n | "s" | () | true | false          Lit
#     | x                                    Var
#     | C(e1, …, en)                         Con: always with all its fields
#     | (e1, …, en)                          Tuple, n ≥ 2
#     | { x -> e }                           Lambda: one parameter, a variable
#     | e1(e2)                               App: one argument
#     | op(e1, …)                            Prim: + - * / % == != < <= > >=, neg, not (a table, below)
#     | if (e1) e2 else e3                   If: always with else
#     | match (e) { p1 -> e1 … }             Match
#     | let x = e1; e2                       Let: binds a variable, not a pattern
#     | var x := e1; e2                      LetVar
#     | x := e                               Assign
#     | while (e1) e2                        While
#     | e1; e2                               Seq
#     | print(e1, …, en) | assert(e)         Print, Assert
#     | raise(e)                             Raise: e is an exception
#     | try { e } catch { p1 -> e1 … }       Try
# ```
#
# and a program is a list of `def x = e`, `data` declarations, and
# expression statements. Patterns are those of the syntax, which have no
# sugar.
#
# What disappears, and how:
#
# | sugar | core |
# |---|---|
# | `def f(a, b) = e` | `def f = { (a, b) -> e }`, then as a function |
# | `{ a, b -> e }` | `{ (a, b) -> e }` |
# | `{ p -> q -> e }` | `{ p -> { q -> e } }` |
# | a function `{ p1 -> e1 … pn -> en }` | `{ %1 -> match (%1) { p1 -> e1 … } }` — a single clause with a variable pattern stays `{ x -> e }` |
# | `f()`, `f(a)`, `f(a, b)` | `f(())`, `f(a)`, `f((a, b))` |
# | `e.f`, `e.f(a, b)`, `e.f{ … }` | `f(e)`, `f((e, a, b))`, `f((e, { … }))` |
# | `e.{ clauses }` | `match (e) { clauses }` |
# | `a && b`, <code>a &#124;&#124; b</code> | `if (a) b else false`, `if (a) true else b` |
# | `-e`, `!e` | `neg(e)`, `not(e)`; `-5` is the literal −5 |
# | `if (c) e` | `if (c) e else ()` |
# | `{ s1 … sn }` | nested `Let`, `LetVar`, `Seq`; a block ending in `let` or `var` ends with `()` (a final assignment needs none: its value is `()`) |
# | `let p = e` with p not a variable | `match (e) { p -> … }`, failing at the `let` |
# | `exception E(T1, …)` | a constructor `E(T1, …)` of the one data type `Exn`, after the three predefined exceptions |
#
# The fresh names the desugaring invents, `%1`, `%2`, …, cannot be written in
# L, so they never clash with the programmer's; they are numbered from 1 for
# each program.
#
# Every node keeps a span, pointing at the source text it came from, and the
# spans are chosen so that a runtime error lands where the contract says:
# a failed `match` at its keyword, a failed `.{` at the `.`, a failed
# multi-clause function at its `{`, a failed `let` pattern at the `let`, a
# division by zero at its operator (`Prim.op_span`). Two more fields serve
# chapter 5: every node has a `type`, empty until type inference fills it,
# and an `If` remembers whether it was written as an `if`, an `if` without
# `else`, `&&` or `||`, so that a type error in `a && 1` can be reported at
# the `1` the programmer wrote rather than at a `false` they did not.

# %% [markdown]
# The nodes are Python dataclasses, one per line of the grammar, in four
# groups. First, the helpers that give every node its two fields that do not
# count when two trees are compared: the span, and the type that chapter 5
# fills in.

# %%
#| export
from dataclasses import dataclass, field

from lcompiler import syntax as s
from lcompiler.errors import CompileError, Note, Span, raise_errors
from lcompiler.syntax import PCon, PTuple, PUnit, PVar


def _span():
    return field(default=None, compare=False, repr=False)


def _type():
    """Where chapter 5's type inference records each node's type."""
    return field(default=None, compare=False, repr=False)


# %% [markdown]
# Values and names: a literal, a variable, a constructor applied to all its
# fields, a tuple. A `Var` also has a `kind`, empty until `resolve` says
# what the name refers to.

# %%
#| export
@dataclass(slots=True)
class Lit:
    value: object            # an int, a str, a bool, or () for the unit value
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class Var:
    name: str
    span: Span = _span()
    kind: str = field(default="", compare=False)   # set by resolve: local, mutable, global, builtin
    type: object = _type()


@dataclass(slots=True)
class Con:
    name: str
    args: list
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class Tuple:
    items: list
    span: Span = _span()
    type: object = _type()


# %% [markdown]
# Functions and operations: a function of one parameter, a call with one
# argument, and a primitive operation on its operands, named by its row in
# the table of primitives (after the nodes). A `Prim` remembers where its
# operator is, since that is where a division by zero is reported.

# %%
#| export
@dataclass(slots=True)
class Lambda:
    param: str
    body: object
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class App:
    fn: object
    arg: object
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class Prim:
    op: str                  # the name of a primitive: + - * / % == != < <= > >= neg not
    args: list
    span: Span = _span()
    type: object = _type()
    op_span: Span = _span()  # the operator: where a division by zero is reported


# %% [markdown]
# Choices: an `if` that always has its `else`, and a `match` whose clauses
# are pairs of a pattern (chapter 4a's patterns, unchanged) and a body.

# %%
#| export
@dataclass(slots=True)
class If:
    cond: object
    then: object
    orelse: object
    span: Span = _span()
    type: object = _type()
    form: str = field(default="if", compare=False)   # "if", "if without else", "&&" or "||"


@dataclass(slots=True)
class Match:
    scrutinee: object
    clauses: list            # [(pattern, body)]
    span: Span = _span()     # where a match failure is reported
    type: object = _type()


# %% [markdown]
# Sequencing and state: `let` and `var` bind one name for the rest of the
# block (their `body`), `:=` changes a `var`, `while` loops, `;` runs two
# things in turn.

# %%
#| export
@dataclass(slots=True)
class Let:
    name: str
    value: object
    body: object
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class LetVar:
    name: str
    value: object
    body: object
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class Assign:
    target: Var
    value: object
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class While:
    cond: object
    body: object
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class Seq:
    first: object
    second: object
    span: Span = _span()
    type: object = _type()


# %% [markdown]
# The built-in forms — `print`, `assert`, and for exceptions `raise` with
# its partner `try` — and the program: a list of definitions, `data`
# declarations (kept as chapter 4a parsed them) and top-level statements.
# Exceptions are the constructors of one data type, `Exn`: the three the
# language predefines, then those the program declares with `exception`,
# gathered by the desugaring into one `data Exn` item (the section on
# exceptions, below, says more). A
# `Def` says whether its right-hand side is a function, because a function
# definition exists before anything runs and any other waits for its turn.

# %%
#| export
@dataclass(slots=True)
class Print:
    args: list
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class Assert:
    cond: object
    span: Span = _span()
    type: object = _type()


@dataclass(slots=True)
class Raise:                 # raise(arg): arg is an exception, of type Exn
    arg: object
    span: Span = _span()     # the whole raise(…): where an uncaught exception is reported
    type: object = _type()


@dataclass(slots=True)
class Try:                   # try { body } catch { clauses }
    body: object
    clauses: list            # [(pattern, body)], tried against the exception as by Match
    span: Span = _span()
    type: object = _type()


EXN = "Exn"                  # the type of exceptions: one data type, whose constructors are the exceptions
PREDEFINED_EXCEPTIONS = ("DivisionByZero", "MatchFailure", "AssertionFailed")   # in this order, tags 0, 1, 2


def mentions_exception(p) -> bool:
    """Does a pattern name a predefined exception?"""
    match p:
        case PCon(name, args):
            return name in PREDEFINED_EXCEPTIONS or any(mentions_exception(a) for a in args or [])
        case PTuple(items):
            return any(mentions_exception(i) for i in items)
    return False


@dataclass(slots=True)
class Def:
    name: Var
    value: object
    is_function: bool        # its right-hand side is a function: it exists before anything runs
    span: Span = _span()


@dataclass(slots=True)
class Program:
    items: list              # Def, syntax.Data, or an expression (a top-level statement)
    span: Span = _span()


# %% [markdown]
# A core tree built by hand: `1 + 2`. Spans and types do not show, and do
# not count when two trees are compared.

# %%
one_plus_two = Prim("+", [Lit(1), Lit(2)])
print(one_plus_two)
print(one_plus_two == Prim("+", [Lit(1), Lit(2)], span=None, type="Int"))

# %% [markdown]
# ### One table of primitives
#
# The `op` of a `Prim` names a **primitive**: one of the operations L has
# built in, `+ - * / %`, the six comparisons, `neg` and `not`. Every stage
# of the compiler needs to know something about each of them: the type
# checker of [chapter 5](05_types.ipynb) its type, the interpreters of this
# chapter and of [chapter 6](06_cps.ipynb) what it computes, the conversion
# of [chapter 7](07_cps_convert.ipynb) whether it can fail (a primitive that
# can fail carries the place its runtime error reports), the optimiser of
# [chapter 9](09_shrink.ipynb) whether it may be computed in advance or
# deleted when its result is unused, and the back end of
# [chapter 10](10_llvm.ipynb) which instructions compute it. All of that
# is written once, here, in a table: the module `lcompiler.primitives`, one
# row per primitive, which each of those stages reads. Adding a primitive
# is adding a row, then telling chapter 10 which instructions compute it;
# exercise 7 of this chapter does it.
#
# A row says:
#
# | field | what it says | for `/` |
# |---|---|---|
# | `name` | its name in the core (`Prim.op`) and in CPS (chapter 6's `Op.op`) | `"/"` |
# | `symbol` | how L writes it, and chapter 6's CPS text; `None` when they have no operator for it | `"/"` |
# | `type` | the types of its operands, then of its result | `("Int", "Int", "Int")` |
# | `operation` | what it computes: a Python function on the interpreters' values | `c_div`, below |
# | `wraps` | whether the result of `operation` is brought back to 64 bits by `wrap` | `False`: `c_div` does it itself |
# | `fails` | how it stops the program with a runtime error, if it can | `division by zero` when operand 1 is 0 |
# | `pure` | whether it does nothing but compute its result (or fail) | `True` |
# | `arity` | its number of operands, one or two: the length of `type` less one | `2` |
#
# The types are written in a small notation that chapter 5 reads: the
# names of L's base types, `Int`, `Bool`, `String` and `Unit`, and type
# variables, written `'a`. A variable written `''a` — Standard ML's
# notation for an *equality* type variable — stands for a type that `==`
# can compare, which [the language reference](../language.md) limits to
# `Int`, `Bool` and `String`: `==` has the type `("''a", "''a", "Bool")`, two
# operands of one comparable type and a `Bool` result. What happens when
# that type is not known yet is chapter 5's business.
#
# First the arithmetic itself. An L `Int` is a signed 64-bit integer, and
# the interpreters hold it in a Python `int`, which has no limit: `+`, `-`,
# `*` and negation wrap around, which `wrap` does to a result that left 64
# bits. `/` and `%` truncate towards zero as C does (Python's `//` rounds
# towards minus infinity, so `-7 // 2` is `-4` where C gives `-3`);
# dividing the smallest Int by −1 wraps to itself, and its remainder is 0.

# %%
#| export primitives
"""The table of L's primitive operations (chapter 4b): for each one, its name, how L writes it, its
type, what it computes, whether it can fail, and whether it is pure. Every stage that needs to know
about a primitive reads its row here."""

import operator
from dataclasses import dataclass, field
from typing import Callable

MIN_INT, MAX_INT = -2**63, 2**63 - 1


def wrap(n: int) -> int:
    """n as a signed 64-bit integer (modulo 2**64)."""
    return n if MIN_INT <= n <= MAX_INT else (n + 2**63) % 2**64 - 2**63


def c_div(a: int, b: int) -> int:
    """a / b, truncated towards zero, wrapped to 64 bits."""
    q = abs(a) // abs(b)
    return wrap(q if (a < 0) == (b < 0) else -q)


def c_rem(a: int, b: int) -> int:
    """a % b with the sign of a, so that (a / b) * b + a % b == a."""
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


# %% [markdown]
# C's division beside Python's, on −7 and 2, then the two wrap-arounds:

# %%
print(c_div(-7, 2), c_rem(-7, 2), -7 // 2, -7 % 2, wrap(MAX_INT + 1) == MIN_INT, c_div(MIN_INT, -1) == MIN_INT)

# %% [markdown]
# `c_div` and `c_rem` give −3 and −1, where Python's `//` and `%` give −4 and
# 1; adding one to the largest Int gives the smallest, and so does dividing
# the smallest by −1.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: division as C does it, not as Python does</p>
#
# Rounding a quotient towards minus infinity, as Python and Haskell's `div`
# do, has a nicer algebra: the remainder always has the divisor's sign. L
# rounds towards zero instead, because [the language
# reference](../language.md) says so, and it says so for the compiled code:
# LLVM's `sdiv` and `srem`, the instructions of chapter 10, truncate, and a
# rounding towards minus infinity would need a test and a correction around
# every division. The table follows the compiled code, not Python, and
# `tests/test_interp.py` checks the two against each other on random operands.
#
# </div>
#
# A failure is described rather than programmed: `Failure("division by
# zero", 1, 0)` says that the primitive stops the program with the runtime
# error `division by zero` when its operand number 1 — the second, the
# divisor — is 0. Described, so that each stage can ask it the question it
# has: the interpreters test it before they compute; the conversion keeps
# the operator's place on a primitive that has one, for the error to
# point at; the optimiser computes a division in advance, or deletes an
# unused one, only when it knows the divisor is not 0; and the back end
# writes the test, and the call of the runtime's error, before the
# division.
#
# A `Primitive` has one or two operands: L's operators are unary or
# binary, and the interpreters have code for those two shapes. Its
# `meaning` is the result on operands for which it does not fail:
# `operation`, then `wrap` if the row says so. The optimiser calls
# `meaning`; the interpreters apply `operation` and `wrap` themselves,
# which lets this chapter's interpreter skip `wrap` when the result is
# already within 64 bits, as it almost always is.

# %%
#| export primitives
@dataclass(frozen=True, slots=True)
class Failure:
    """How a primitive fails: it raises the predefined exception `exception`, reported as the
    runtime error `message` if no `try` catches it, when its operand number `operand` (from 0) is
    `value`."""
    message: str
    operand: int
    value: object
    exception: str = "DivisionByZero"

    def happens(self, values) -> bool:
        """Does the primitive fail on these operands?"""
        return values[self.operand] == self.value


@dataclass(frozen=True, slots=True)
class Primitive:
    """One primitive operation of the core and CPS languages."""
    name: str                      # Prim.op in the core, Op.op in CPS
    symbol: str | None             # how L and the CPS text write it ("-" for neg); None: no operator
    type: tuple                    # the operands' types, then the result's: ("Int", "Int", "Bool")
    operation: Callable            # what it computes, on the interpreters' values
    wraps: bool = False            # is operation's result brought back to 64 bits by wrap?
    fails: Failure | None = None   # how it can stop the program, if it can
    pure: bool = True              # does it do nothing but compute its result (or fail)?
    arity: int = field(init=False)   # its number of operands: one or two

    def __post_init__(self):
        object.__setattr__(self, "arity", len(self.type) - 1)
        if self.arity not in (1, 2):
            raise ValueError(f"the primitive {self.name} has {self.arity} operands, not one or two")

    def meaning(self, *values):
        """Its result on operands for which it does not fail, as L computes it."""
        n = self.operation(*values)
        return wrap(n) if self.wraps else n


# %% [markdown]
# The table. `+`, `-` and `*` are the functions of Python's module
# `operator` — written in C, so that applying one costs the interpreter no
# Python call — with their results wrapped; the comparisons are
# `operator`'s too, and `==` and `!=` compare any two values of one
# comparable type. `neg` and `not` are written `-` and `!`. `neg` shares
# its symbol with the binary `-`, the only two rows that share one, so a
# symbol alone does not name a primitive: a symbol and a number of
# operands do, and `by_symbol` finds the row from the two.

# %%
#| export primitives
DIVISION_BY_ZERO = Failure("division by zero", 1, 0, "DivisionByZero")

PRIMITIVES = {p.name: p for p in [
    Primitive("+", "+", ("Int", "Int", "Int"), operator.add, wraps=True),
    Primitive("-", "-", ("Int", "Int", "Int"), operator.sub, wraps=True),
    Primitive("*", "*", ("Int", "Int", "Int"), operator.mul, wraps=True),
    Primitive("/", "/", ("Int", "Int", "Int"), c_div, fails=DIVISION_BY_ZERO),
    Primitive("%", "%", ("Int", "Int", "Int"), c_rem, fails=DIVISION_BY_ZERO),
    Primitive("neg", "-", ("Int", "Int"), operator.neg, wraps=True),
    Primitive("==", "==", ("''a", "''a", "Bool"), operator.eq),
    Primitive("!=", "!=", ("''a", "''a", "Bool"), operator.ne),
    Primitive("<", "<", ("Int", "Int", "Bool"), operator.lt),
    Primitive("<=", "<=", ("Int", "Int", "Bool"), operator.le),
    Primitive(">", ">", ("Int", "Int", "Bool"), operator.gt),
    Primitive(">=", ">=", ("Int", "Int", "Bool"), operator.ge),
    Primitive("not", "!", ("Bool", "Bool"), operator.not_),
]}
COMPARABLE = ("Int", "Bool", "String")     # the types a ''a stands for: those == can compare


def by_symbol(symbol: str, arity: int) -> Primitive | None:
    """The primitive that L writes as symbol with arity operands, if there is one."""
    for p in PRIMITIVES.values():
        if p.symbol == symbol and p.arity == arity:
            return p
    return None


# %% [markdown]
# The whole table, one row a line, as the stages see it — each operation
# written with operands `a` and `b`:

# %%
# the package's table from here on, the one every stage reads (a row added to it is seen by this notebook too)
from lcompiler.primitives import PRIMITIVES, by_symbol  # noqa: F811


def how_written(p) -> str:
    if p.symbol is None:
        return f"{p.name}({', '.join('ab'[:p.arity])})"
    return f"{p.symbol}a" if p.arity == 1 else f"a {p.symbol} b"


print(f"{'name':5} {'written':8} {'type':22} {'wraps':6} {'pure':5} fails")
for p in PRIMITIVES.values():
    fails = f"{p.fails.message} when {'ab'[p.fails.operand]} is {p.fails.value}" if p.fails else ""
    print(f"{p.name:5} {how_written(p):8} {', '.join(p.type[:-1]) + ' -> ' + p.type[-1]:22} "
          f"{'yes' if p.wraps else '':6} {'yes' if p.pure else 'no':5} {fails}".rstrip())
print(len(PRIMITIVES), "rows;", by_symbol("-", 1).name, by_symbol("-", 2).name, by_symbol("&&", 2))

# %% [markdown]
# Thirteen rows; two of them can fail, and all are pure. `by_symbol` finds
# `neg` for a `-` with one operand and the subtraction for a `-` with two;
# `&&` is not a primitive but a conditional, as the desugaring below makes
# it, and has no row.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: one table, not a case in every stage</p>
#
# OCaml's compiler has one type for the primitive operations of its
# intermediate language Lambda, `Lambda.primitive`, and tables beside it:
# `translprim.ml` maps the names the standard library declares with
# `external` (`"%divint"`) to a primitive and its arity, and the division
# itself, `Pdivint Safe`, records that it tests its divisor. LLVM lists its
# instructions once, in `Instruction.def` — lines such as
# `HANDLE_BINARY_INST(13, Add, BinaryOperator)` — and includes that file
# wherever C++ code needs the list. We do the same, for the same reason.
# The road not taken — a case for each operator in each stage — is the one
# this compiler first took: the meaning of `+` was written in this
# chapter's interpreter, again in chapter 6's and again in chapter 9's
# constant folding, and "`/` and `%` can fail" in several places. A new
# primitive meant finding them all, and a place missed was wrong only on
# the programs that reached it.
#
# The table holds what several stages share, and no more. The LLVM
# instructions of a primitive stay in chapter 10, next to the code that
# makes instructions, in one dictionary from name to lowering; a test
# checks that it has an entry for every row, so that a row without one
# fails a test rather than a program. The precedence of the operators
# stays in [chapter 4a](04a_syntax.ipynb)'s parser, because precedence is
# syntax; a test checks that the operators it accepts are the table's
# symbols.
#
# `print` and `assert` are not rows. `print` takes any number of operands
# of any types, and what it does depends on their types (chapter 10 makes
# a printer per type); `assert` is control, not an operation on values (in
# CPS, a `case` and a `fail`). Each keeps a node of its own in every
# language of the compiler, and a row for them would need columns that
# only they used. Exceptions, when they came, were kept out of the table
# for the same reason: `raise` never returns and `try` is control, so
# each is a node of its own (the section on exceptions, below), not a row
# of an operation on values.
#
# </div>

# %% [markdown]
# ### Printing the core as L
#
# To look at a core program we print it as L. The core is a subset of L (but
# for the fresh names `%n`), so printing it is a matter of turning core nodes
# back into syntax nodes and reusing [chapter 4a](04a_syntax.ipynb)'s
# printer: one case per node. A primitive is written as its row says, with
# its operator — `neg` as `-` — or as a call, `name(a, b)`, if L has no
# operator for it.

# %%
#| export
from lcompiler.primitives import PRIMITIVES, Primitive, by_symbol


def to_syntax(e):
    """A core expression as a syntax tree, for printing."""
    match e:
        case Lit(bool(b)):
            return s.Var("true" if b else "false")
        case Lit(int(n)) if n < 0:
            return s.Unary("-", s.Int(-n))
        case Lit(int(n)):
            return s.Int(n)
        case Lit(str(text)):
            return s.Str(text)
        case Lit(()):
            return s.Unit()
        case Var(name):
            return s.Var(name)
        case Con(name, args):
            return s.Con(name, [to_syntax(a) for a in args] or None)
        case Tuple(items):
            return s.Tuple([to_syntax(i) for i in items])
        case Lambda(param, body):
            return s.Function([s.Clause([PVar(param)], _statements(body))])
        case App(fn, arg):
            return s.Call(to_syntax(fn), [to_syntax(arg)])
        case Prim(op, args):
            return _operation(PRIMITIVES[op], [to_syntax(a) for a in args])
        case If(cond, then, orelse):
            return s.If(to_syntax(cond), to_syntax(then), to_syntax(orelse))
        case Match(scrutinee, clauses):
            return s.Match(to_syntax(scrutinee), [s.Clause([p], _statements(b)) for p, b in clauses])
        case Let() | LetVar() | Seq():
            return s.Block(_statements(e))
        case Assign(target, value):
            return s.Assign(s.Var(target.name), to_syntax(value))
        case While(cond, body):
            return s.While(to_syntax(cond), to_syntax(body))
        case Print(args):
            return s.Call(s.Var("print"), [to_syntax(a) for a in args])
        case Assert(cond):
            return s.Call(s.Var("assert"), [to_syntax(cond)])
        case Raise(arg):
            return s.Call(s.Var("raise"), [to_syntax(arg)])
        case Try(body, clauses):
            return s.Try(s.Block(_statements(body)), [s.Clause([p], _statements(b)) for p, b in clauses])
    raise TypeError(f"not a core expression: {e!r}")


def _operation(p: Primitive, args: list):
    """A primitive applied to its operands (syntax trees): as L writes it, or as a call."""
    if p.symbol is None:
        return s.Call(s.Var(p.name), args)
    return s.Unary(p.symbol, *args) if p.arity == 1 else s.Binary(p.symbol, *args)


# %% [markdown]
# A chain of `let`, `var` and `;` becomes one block, its statements in
# order; and a program is printed item by item.

# %%
#| export
def _statements(e) -> list:
    out = []
    while True:
        match e:
            case Let(name, value, body):
                out.append(s.Let(PVar(name), to_syntax(value)))
            case LetVar(name, value, body):
                out.append(s.VarDecl(s.Var(name), to_syntax(value)))
            case Seq(first, body):
                out.append(to_syntax(first))
            case _:
                return out + [to_syntax(e)]
        e = body


def pretty_core(program: Program) -> str:
    """A core program as L text."""
    lines = []
    for item in program.items:
        match item:
            case Def(name, value):
                lines.append(f"def {name.name} = " + s.pretty_expr(to_syntax(value)))
            case s.Data(name=data) if data == EXN:           # the exceptions the program declares
                lines.extend(s.pretty(s.ExceptionDecl(c.name, c.fields)) for c in item.constructors
                             if c.name not in PREDEFINED_EXCEPTIONS)
            case s.Data():
                lines.append(s.pretty(item))
            case _:
                lines.append(s.pretty_expr(to_syntax(item)))
    return "\n".join(lines) + "\n"


# %% [markdown]
# A core chain built by hand — `let x = 1 + 2`, then `print(x)`, then `x` —
# printed. `_statements` gathers the `Let` and the `Seq` nested inside it into
# one list, so the three statements come out between a single pair of braces,
# as a programmer would have written them.

# %%
print(s.pretty_expr(to_syntax(Let("x", one_plus_two, Seq(Print([Var("x")]), Var("x"))))))

# %% [markdown]
# ## Desugaring
#
# `Desugar` is a class only to hold the counter of fresh names. Each method
# follows one row of the table above. The surface tree is read through the
# module `syntax`, imported as `s`, so that `s.If` (surface) and `If` (core)
# can be told apart at a glance.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: print and assert are forms, not functions</p>
#
# `print(a, b)` prints two values and `print((a, b))` one tuple, a
# difference that a function taking one argument — and every L function
# takes one, once desugared — could not see. So `print` and `assert` are
# built-in *forms*, recognised here, by name, where they are called, and
# this implementation reserves their names, and that of `raise`, the form
# of the section on exceptions: a program cannot bind them (the desugaring
# refuses them as a parameter, a `let` or a `var`, `resolve` as a
# definition or in a pattern), and using them as values is an error. The other
# road, a variadic `print` function, would put functions of several
# arguments back into a core that has just got rid of them.
#
# </div>

# %%
#| export
BUILTIN_FORMS = ("print", "assert", "raise")


def check_bindable(name: str, span: Span):
    """A program may not bind the names of the built-in forms."""
    if name in BUILTIN_FORMS:
        raise CompileError(f"{name} is a built-in form and cannot be bound: choose another name", span)


class Desugar:
    def __init__(self):
        self.counter = 0
        self.uses_exceptions = False     # a try, a raise, an exception declared or named

    def fresh(self) -> str:
        self.counter += 1
        return f"%{self.counter}"


# %% [markdown]
# `fresh` is the counter's only use: each call gives the next name, `%1`,
# `%2`, …, and a new `Desugar` starts again from `%1`.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: fresh names that no program can write</p>
#
# The desugaring needs names of its own, for the parameter of a function
# whose parameter is not a plain variable: several clauses, or one clause
# with a pattern, as in `{ a, b -> a + b }`. The usual alternatives are to pick them from the
# programmer's alphabet (`tmp1`, `tmp2`, …) and check the program for a clash,
# or to rename every variable of the program apart first. Both need a look at
# the whole program before the desugaring starts, and a rule for what to do on
# a clash. A name that begins with `%` cannot be written in L, so no clash is
# possible and nothing needs checking. In the module `lcompiler.core`, the
# only code that tells these names apart is the "did you mean" of the
# resolver, below, which never suggests one.
#
# </div>

# %% [markdown]
# `expr` translates one expression. It takes the simplest cases itself —
# literals, names, constructors and tuples, which map one to one — and hands
# anything else to `operation`, below. A `_` is accepted by the parser
# everywhere an expression may stand (it cannot tell a pattern from an
# expression until it has read the `->` or `=` after it), so this is where
# a `_` used as a value is caught.

# %%
#| export
class Desugar(Desugar):
    def expr(self, e):
        match e:
            case s.Int(v, span):
                return Lit(v, span)
            case s.Str(v, span):
                return Lit(v, span)
            case s.Unit(span):
                return Lit((), span)
            case s.Var(name, span):
                if name in BUILTIN_FORMS:
                    raise CompileError(f"{name} is a built-in form, not a value: call it, as in {name}(x)", span)
                return Var(name, span)
            case s.Wildcard(span):
                raise CompileError("_ can only be used in a pattern", span)
            case s.Con(name, args, span):
                self.uses_exceptions |= name in PREDEFINED_EXCEPTIONS
                return Con(name, [self.expr(a) for a in args or []], span)
            case s.Tuple(items, span):
                return Tuple([self.expr(i) for i in items], span)
        return self.operation(e)


# %% [markdown]
# To try the desugaring on small pieces we need a way in from text:
# `desugar_text` parses one line of L with chapter 4a's parser, desugars its
# first item as an expression, and prints the core as L. Literals,
# constructors and tuples come out as they went in:

# %%
from lcompiler.errors import Source
from lcompiler.syntax import parse


def desugar_text(text: str) -> str:
    """The core of one expression, printed as L."""
    return s.pretty_expr(to_syntax(Desugar().expr(parse(Source("example.l", text)).items[0])))


print(desugar_text('(Cons(1, Nil), "one", ())'))

# %% [markdown]
# Operators: `-5` is a literal, `-e` and `!e` are the primitives `neg` and
# `not`, `&&` and `||` become an `if` (which evaluates its right operand
# only when needed, as the contract says), and every other operator is a
# primitive of two operands — each found in the table by its symbol and
# its number of operands. `_operator` finds where the operator itself is
# written, for the error that a division by zero reports.

# %%
#| export
class Desugar(Desugar):
    def operation(self, e):
        match e:
            case s.Unary("-", s.Int(v), span):
                return Lit(-v, span)
            case s.Unary(op, operand, span):
                op_span = Span(span.source, span.start, span.start + 1)
                return Prim(by_symbol(op, 1).name, [self.expr(operand)], span, op_span=op_span)
            case s.Binary("&&", left, right, span):
                return If(self.expr(left), self.expr(right), Lit(False, span), span, form="&&")
            case s.Binary("||", left, right, span):
                return If(self.expr(left), Lit(True, span), self.expr(right), span, form="||")
            case s.Binary(op, left, right, span):
                return Prim(by_symbol(op, 2).name, [self.expr(left), self.expr(right)], span,
                            op_span=self._operator(left, right, span))
        return self.control(e)

    @staticmethod
    def _operator(left, right, span: Span) -> Span:
        """The span of a binary operator: the text between its operands, trimmed of blanks and of the
        parentheses around an operand (an operand's span leaves out its parentheses: `1 / (1 - 1)`)."""
        text = span.source.text
        start, end = left.span.end, right.span.start
        while start < end and text[start] in " \t\r\n)":
            start += 1
        while end > start and text[end - 1] in " \t\r\n(":
            end -= 1
        return Span(span.source, start, end) if start < end else span


# %% [markdown]
# Two examples: minus signs, then the two logical operators.

# %%
print(desugar_text("-5 + -x"))
print(desugar_text("a && !b || c"))

# %% [markdown]
# In the first line, `-5` and `-x` look alike but are not: the first is the
# literal −5, the second the primitive `neg` applied to `x`, which the printer
# writes back as `-x`. In the second, `&&` binds tighter than `||`, so the
# inner `if` is the `&&`, with `false` as its `else`, and the outer one the
# `||`, with `true` as its `then`.

# %% [markdown]
# The rest: conditionals, matches, loops, assignments, blocks, functions
# and calls. Most are one to one; `if` without `else` gains `else ()`,
# `e.{ … }` becomes a `match`, and a call `e.f(a)` becomes `f(e, a)`, which
# `call` then treats like any other call.

# %%
#| export
class Desugar(Desugar):
    def control(self, e):
        match e:
            case s.If(cond, then, None, span):
                return If(self.expr(cond), self.expr(then), Lit((), span), span, form="if without else")
            case s.If(cond, then, orelse, span):
                return If(self.expr(cond), self.expr(then), self.expr(orelse), span)
            case s.Match(scrutinee, clauses, span):
                return Match(self.expr(scrutinee), self.clauses(clauses), span)
            case s.DotMatch(receiver, clauses, span):
                return Match(self.expr(receiver), self.clauses(clauses), span)
            case s.While(cond, body, span):
                return While(self.expr(cond), self.expr(body), span)
            case s.Assign(target, value, span):
                return Assign(Var(target.name, target.span), self.expr(value), span)
            case s.Block(statements, span):
                return self.block(statements, span)
            case s.Function(clauses, span):
                return self.function(clauses, span)
            case s.Call(fn, args, span):
                return self.call(fn, args, span)
            case s.Dot(receiver, name, args, span):
                return self.call(name, [receiver] + (args or []), span)
            case s.Try(body, clauses, span):
                self.uses_exceptions = True
                return Try(self.expr(body), self.clauses(clauses), span)
        raise TypeError(f"not an expression: {e!r}")


# %% [markdown]
# A call passes exactly one argument: nothing becomes `()`, several become
# a tuple. `print`, `assert` and `raise`, recognised by name, become their
# own nodes instead; `print` keeps its arguments apart.

# %%
#| export
class Desugar(Desugar):
    def call(self, fn, args: list, span: Span):
        if isinstance(fn, s.Var) and fn.name == "print":
            return Print([self.expr(a) for a in args], fn.span)
        if isinstance(fn, s.Var) and fn.name == "assert":
            if len(args) != 1:
                raise CompileError(f"assert takes one condition, given {len(args)}", fn.span)
            return Assert(self.expr(args[0]), fn.span)
        if isinstance(fn, s.Var) and fn.name == "raise":
            if len(args) != 1:
                raise CompileError(f"raise takes one exception, given {len(args)}", fn.span)
            self.uses_exceptions = True
            return Raise(self.expr(args[0]), span)
        arg = (Lit((), span) if not args else self.expr(args[0]) if len(args) == 1
               else Tuple([self.expr(a) for a in args], span))
        return App(self.expr(fn), arg, span)


# %% [markdown]
# Each kind of call, desugared, side by side:

# %%
print(desugar_text("f()"), desugar_text("f(a)"), desugar_text("f(a, b)"), desugar_text("l.map(g)"),
      desugar_text("print(a, b)"), desugar_text("print((a, b))"), sep="    ")

# %% [markdown]
# Read the six results from left to right: no argument becomes the unit value
# `()`, one argument stays itself, two become one tuple, and so does the
# receiver of `l.map(g)`, which becomes the first item of the tuple passed to
# `map`. Only `print` keeps its two arguments apart: `print(a, b)` and
# `print((a, b))` remain two different programs, as the design note above
# requires.

# %% [markdown]
# Functions. A clause with several patterns, `a, b -> e`, has one tuple
# pattern; a clause `p -> q -> e` has a function for its body. A function of
# one clause whose pattern is a variable is already core, `{ x -> e }`; any
# other function takes a fresh parameter and matches on it, so that a value
# no clause accepts fails at the function's `{`.

# %%
#| export
class Desugar(Desugar):
    def clause_pattern(self, clause: s.Clause):
        ps = clause.patterns
        self.uses_exceptions |= any(mentions_exception(p) for p in ps)
        return ps[0] if len(ps) == 1 else PTuple(ps, ps[0].span.to(ps[-1].span))

    def clause_body(self, clause: s.Clause):
        if isinstance(clause.body, s.Clause):          # p -> q -> e: a function returning a function
            return self.function([clause.body], clause.body.span)
        return self.block(clause.body, clause.span)

    def clauses(self, clauses: list) -> list:
        return [(self.clause_pattern(c), self.clause_body(c)) for c in clauses]

    def function(self, clauses: list, span: Span):
        if len(clauses) == 1 and isinstance(p := self.clause_pattern(clauses[0]), PVar):
            check_bindable(p.name, p.span)
            return Lambda(p.name, self.clause_body(clauses[0]), span)
        param = self.fresh()
        return Lambda(param, Match(Var(param, span), self.clauses(clauses), span), span)


# %% [markdown]
# Blocks are built from the end: the last statement is the block's value
# (or `()`, if it is a `let` or a `var`), and each statement before it
# wraps what follows — `let` and `var` bind a name for the rest of the
# block, a `let` with a pattern matches, anything else is a `Seq`.

# %%
#| export
class Desugar(Desugar):
    def block(self, statements: list, span: Span):
        *init, last = statements
        if isinstance(last, (s.Let, s.VarDecl)):
            body = self.bind(last, Lit((), last.span))
        else:
            body = self.expr(last)
        for statement in reversed(init):
            body = self.bind(statement, body)
        return body

    def bind(self, statement, rest):
        """The core of `statement; rest`."""
        match statement:
            case s.Let(PVar(name, name_span), value, span):
                check_bindable(name, name_span)
                return Let(name, self.expr(value), rest, span)
            case s.Let(pattern, value, span):
                self.uses_exceptions |= mentions_exception(pattern)
                return Match(self.expr(value), [(pattern, rest)], Span(span.source, span.start, span.start + 3))
            case s.VarDecl(name, value, span):
                check_bindable(name.name, name.span)
                return LetVar(name.name, self.expr(value), rest, span)
        return Seq(self.expr(statement), rest, statement.span)


# %% [markdown]
# Four examples, one for each road above: a function of two parameters, a
# function of two clauses, a `let` with a pattern, and a block of `var` and
# `:=`.

# %%
print(desugar_text("{ a, b -> a + b }"))
print(desugar_text("{ 0 -> 1; n -> n }"))
print(desugar_text("{ let (a, b) = p; a + b }"))
print(desugar_text("{ var t := 1; t := t * 2; t }"))

# %% [markdown]
# Both functions got the fresh parameter `%1`, since each call of
# `desugar_text` starts a new `Desugar`. The `let (a, b) = p` has become a
# `match` with a single clause, whose body is the rest of the block. The block
# of `var` and `:=` prints as it was written, because `var`, `:=` and `;` are
# in the core too (`LetVar`, `Assign`, `Seq`).
#
# <div class="admonition note">
# <p class="admonition-title">Design note: one kind of function in the core</p>
#
# The core could have kept functions of several clauses, as a `Lambda` with a
# list of patterns. Then every stage after this one — type inference, the
# conversion to CPS, this chapter's interpreter — would handle pattern
# matching in two places, in `Match` and in `Lambda`. Instead a core `Lambda`
# always has a variable for its parameter, and matching exists in one place
# only, `Match`. The price is a fresh name and a `match` for every function
# whose parameter is not a plain variable, even `{ a, b -> a + b }`, whose
# tuple pattern cannot fail once the program is well typed: the first example
# above shows it, and so does the picture of `both` below.
#
# </div>

# %% [markdown]
# Last, the program: its items one by one, each on its own, so that a
# mistake in one item does not hide the mistakes in the others. A subtle
# line: `def f(p) = e` is `{ p -> e }`, but `def f(a, b) = e` is
# `{ (a, b) -> e }` — the parameter list's patterns become a clause with one
# pattern per parameter, which is the tuple sugar, and a clause with no
# pattern at all (`def f() = e`) gets the unit pattern `()`.

# %%
#| export
class Desugar(Desugar):
    def program(self, program: s.Program) -> Program:
        items, errors, exceptions = [], [], []
        for item in program.items:
            try:
                if isinstance(item, s.ExceptionDecl):
                    exceptions.append(self.exception(item))
                else:
                    items.append(self.item(item))
            except CompileError as error:      # one mistake per item; the other items are checked too
                errors.append(error)
        raise_errors(errors)
        if exceptions or self.uses_exceptions:  # one data type Exn, before everything
            items.insert(0, exception_type(exceptions, exceptions[0].span if exceptions else program.span))
        return Program(items, program.span)

    def item(self, item):
        match item:
            case s.Def(name, params, value, span):
                if params is not None:      # def f(p1, …, pn) = e  is  def f = { (p1, …, pn) -> e }
                    value = s.Function([s.Clause(params or [PUnit(name.span)], [value], value.span)],
                                       name.span.to(value.span))
                return Def(Var(name.name, name.span), self.expr(value), isinstance(value, s.Function), span)
            case s.Data():
                return item
        return self.expr(item)


def desugar(program: s.Program) -> Program:
    """The core program of a syntax tree; fresh names are numbered from %1."""
    return Desugar().program(program)


# %% [markdown]
# Exceptions. `raise(e)` became a `Raise` node in `call`, a `try` a `Try`
# node in `control`, its clauses desugared as a `match`'s. An `exception`
# declaration is a constructor of the type `Exn`: `program` gathers them,
# in program order, after the three predefined ones, into one `data Exn`
# item placed before every other item — so that every later stage sees
# exceptions as the constructors of one ordinary data type, whose tags are
# known when the program is compiled. A program that has nothing to do with
# exceptions gets no such item, and so every stage treats it exactly as it
# did before exceptions existed.
#
# An exception's fields are *closed*: `Exn` has no type parameter, so a
# type variable in a field could stand for nothing (the next chapter says
# why it must not be allowed to stand for anything). The mistake is found
# here, at the variable.

# %%
#| export
def type_variables(t) -> list:
    """The type variables (syntax.TVar) of a field's type, left to right."""
    match t:
        case s.TVar():
            return [t]
        case s.TName(_, items) | s.TTuple(items):
            return [v for i in items for v in type_variables(i)]
        case s.TFun(arg, result):
            return type_variables(arg) + type_variables(result)
    return []


def is_exception_type(item) -> bool:
    """Is a data declaration the type Exn that the desugaring made?"""
    first = item.constructors[0]
    return item.name == EXN and first.name == PREDEFINED_EXCEPTIONS[0] and first.span is None


def exception_type(exceptions: list, span: Span) -> s.Data:
    """The data type Exn: the predefined exceptions (with no span), then the declared ones."""
    predefined = [s.Constructor(name, None, None) for name in PREDEFINED_EXCEPTIONS]
    return s.Data(EXN, [], predefined + exceptions, False, span)


class Desugar(Desugar):
    def exception(self, declaration: s.ExceptionDecl) -> s.Constructor:
        """An exception declaration, checked: a constructor of Exn."""
        for f in declaration.fields or []:
            for v in type_variables(f.type):
                raise CompileError(f"an exception's fields cannot have a type variable ({v.name}): "
                                   f"exceptions are of the one type Exn, which has no type parameters", v.span)
        return s.Constructor(declaration.name, declaration.fields, declaration.span)


# %% [markdown]
# A program with two exceptions, desugared: its first item is now the type
# `Exn`, with the predefined exceptions first; `raise` and `try` are nodes
# of their own. `pretty_core` prints `Exn` back as the program's
# `exception` lines (the predefined ones go without saying), so the text
# reads as L again:

# %%
exceptional = desugar(parse(Source("exn.l", """\
exception NotFound
exception Failure(String)
def find(k) = if (k == 0) raise(NotFound) else k
def safe(k) = try { find(k) } catch { NotFound -> 0; Failure(_) -> -1 }""")))
print([c.name for c in exceptional.items[0].constructors])
print(pretty_core(exceptional), end="")


# %% [markdown]
# Here is a program with most of the sugar, and its core:

# %%
sugared = Source("sugar.l", """\
data List<t> { Cons(t, List<t>); Nil }
def length = {
  Cons(_, tail) -> 1 + length(tail)
  Nil -> 0
}
def add(a, b) = a + b
def twice = { f -> x -> f(f(x)) }
def sum_to(n) = {
  var i := 0
  var s := 0
  while (i <= n) { s := s + i; i := i + 1 }
  s
}
let_demo(1)
def let_demo(p) = { let (a, b) = (p, -p); if (a > 0 && b < 0) print(a, b) }
print(Cons(1, Cons(2, Nil)).length, add(1, 2), twice{ x -> x * 2 }(5), sum_to(100))
""")
print(pretty_core(desugar(parse(sugared))))

# %% [markdown]
# Line by line: `length`, a function of two clauses, takes the fresh parameter
# `%1` and matches on it; `add`'s two parameters became one tuple pattern,
# matched on `%2` — the counter runs on through the whole program; `sum_to`,
# whose one parameter is a plain variable, keeps it, with no `match`; `twice`
# is a function returning a function. In `let_demo` the `let (a, b) = (p, -p)`
# has become a `match` on the tuple, and the `if` without `else` has gained
# `else ()`. On the last line `Cons(1, Cons(2, Nil)).length` has become
# `length(Cons(1, Cons(2, Nil)))` and `add(1, 2)` has become `add((1, 2))`.

# %% [markdown]
# Every function now takes one parameter, every call passes one argument,
# every `if` has an `else`, and `&&` has become an `if` whose `else` is the
# literal `false` (which the programmer cannot rebind: it is a literal in the
# core, not the variable `false`).
#
# ## Names: scope analysis
#
# `resolve` walks the core program with a *scope*: which names are visible
# here, and what each one is. Four kinds of name:
#
# | kind | bound by | read as |
# |---|---|---|
# | `local` | a lambda's parameter, `let`, a pattern | its value |
# | `mutable` | `var` | the current content of its cell; the only kind `:=` may change |
# | `global` | a top-level `def` | its value, once the definition has run |
# | `builtin` | nothing: `true` and `false` | their value (a program may rebind them) |
#
# The top level is visible everywhere, in any order, since function
# definitions exist before anything runs. One order rule remains, from the
# contract: a non-function definition or a top-level statement that reads a
# non-function definition *below* it, or itself (`def x = x + 1`) — outside
# any function body — is a compile error, since it would always read it before it has run. (Inside a
# function, the read may or may not come too early depending on when the
# function is called; the interpreter checks at run time.)
#
# Constructors come from the `data` declarations, also visible everywhere.
# A constructor with n fields is applied to exactly n arguments, in
# expressions and in patterns.

# %% [markdown]
# A misspelt name is the most common mistake of all, so the error for an
# unknown name suggests the closest name that exists, when one is close
# enough: `unknown variable sqare; did you mean square?`. "Close" is the edit
# distance of Damerau and Levenshtein — how many characters must be
# inserted, deleted, replaced, or two neighbours swapped, to turn one name
# into the other — and close enough is at most one edit for every three
# characters of the name (at least one), the threshold rustc uses; a name of
# one letter gets no suggestion, since every other one-letter name would be
# as close. The
# candidates are the names that could be meant there: the variables in
# scope, the top-level definitions, `true`, `false`, `print`, `assert`
# and `raise` for a variable; the declared constructors for a constructor.

# %%
#| export
def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, replacements and swaps of neighbours that turn a into b."""
    before, row = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        earlier, before, row = before, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(before[j] + 1, row[j - 1] + 1, before[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], earlier[j - 2] + 1)
    return row[len(b)]


def did_you_mean(name: str, candidates) -> str:
    """'; did you mean NAME?' for the closest candidate within reach, or nothing."""
    if len(name) < 2:                 # any one-letter name is one edit from any other: no guess
        return ""
    reach = max(1, len(name) // 3)
    scored = sorted((edit_distance(name, c), c) for c in set(candidates)
                    if c != name and not c.startswith("%") and abs(len(c) - len(name)) <= reach)
    return f"; did you mean {scored[0][1]}?" if scored and scored[0][0] <= reach else ""


# %% [markdown]
# The distance on four pairs of names, then the suggestion for three
# misspellings:

# %%
print([edit_distance(a, b) for a, b in [("sqare", "square"), ("lenght", "length"), ("x", "y"), ("map", "pam")]])
print(repr(did_you_mean("sqare", ["square", "sum", "print"])), repr(did_you_mean("prnt", ["print", "assert"])),
      repr(did_you_mean("foo", ["bar", "baz"])))

# %% [markdown]
# `map` and `pam` are two edits apart, not one: the swap counts only for two
# *neighbouring* characters, and `m` and `p` are not neighbours, so both must
# be replaced. `x` and `y` are one edit apart, as any two one-letter names
# are, which is why a one-letter name gets no suggestion at all. `foo` gets
# none either: `bar` and `baz` are three edits away, and a name of three
# letters is allowed one.

# %% [markdown]
# The resolver itself. It first *declares* every top-level name — each
# type, constructor and definition — then checks each item's expressions
# against them. Each top-level item is checked on its own, and a mistake in
# one does not stop the others from being checked: `resolve` collects the
# errors and reports them all, in the order of the source. (An item's own
# checking stops at its first mistake, but for unknown variables, which
# are noted and passed, as `var` below shows.)

# %%
#| export
BUILTIN_VALUES = {"true": True, "false": False}


class Resolver:
    def __init__(self, program: Program):
        self.program = program
        self.constructors: dict[str, int] = {}     # name -> number of fields
        self.types: dict[str, Span] = {}
        self.globals: dict[str, int] = {}          # name -> index of its item
        self.functions: set[str] = set()
        self.errors: list[CompileError] = []

    def resolve(self) -> Program:
        self.declare()
        for index, item in enumerate(self.program.items):
            try:
                if isinstance(item, Def):
                    # code outside function bodies runs in order: it may read definitions above it only
                    self.expr(item.value, {}, index if not item.is_function else None)
                elif not isinstance(item, s.Data):
                    self.expr(item, {}, index)
            except CompileError as error:
                self.errors.append(error)
        raise_errors(self.errors)
        return self.program


# %% [markdown]
# Declaring: a type and a constructor may have the same name (`data Box {
# Box(Int) }` is fine); a definition and a constructor cannot clash, since
# one is written in lower case and the other in upper. A name declared twice
# is reported at its second declaration, with a note at the first. A type
# named like a built-in one, `data Int { … }`, is told that the name is
# taken by the language (there is no first declaration to point at), and a
# type named `Exn` that this is the predefined type of exceptions.
# The index of each
# definition is kept, for the order rule.

# %%
#| export
class Resolver(Resolver):
    def declare(self):
        first = {}                                 # name -> where it was declared first
        for index, item, name, what, span in self.declarations():
            key = (what == "the type", name)
            if key in first or what == "the type" and name in ("Int", "Bool", "Unit", "String", EXN):
                if key in first and first[key] is None or what == "the type" and key not in first:
                    predefined = ("the predefined type of exceptions" if name == EXN else
                                  "a built-in type" if what == "the type" else "a predefined exception")
                    message = f"{name} is {predefined}: choose another name"
                    self.errors.append(CompileError(message, span))
                    continue
                notes = [Note("first defined here", first[key])] if key in first else []
                message = f"{what} {name} is declared twice" if what else \
                    f"{name} is defined twice at the top level"
                self.errors.append(CompileError(message, span, notes))
                continue
            first[key] = span
            try:
                if what == "the type":
                    self.types[name] = span
                elif what:
                    self.constructors[name] = len(next(c for c in item.constructors if c.name == name).fields or [])
                else:
                    check_bindable(name, span)
                    self.globals[name] = index
                    if item.is_function:
                        self.functions.add(name)
            except CompileError as error:
                self.errors.append(error)

    def declarations(self) -> list:
        """(index, item, name, what, span) for every name the items declare: the predefined
        exceptions first (their span is None), then the others in the order of the source."""
        found = []
        for index, item in enumerate(self.program.items):
            if isinstance(item, s.Data):
                exn = is_exception_type(item)
                if not exn:
                    found.append((index, item, item.name, "the type", item.span))
                found.extend((index, item, c.name, "the exception" if exn else "the constructor", c.span)
                             for c in item.constructors)
            elif isinstance(item, Def):
                found.append((index, item, item.name.name, "", item.name.span))
        if len({d[4].source for d in found if d[4] is not None}) <= 1:   # the exceptions, in their place
            found.sort(key=lambda d: -1 if d[4] is None else d[4].start)
        return found


# %% [markdown]
# Constructors and patterns: a constructor must be declared and given all
# its fields, in an expression as in a pattern; a pattern may not bind the
# same name twice. `pattern` returns the names a pattern binds, all
# `local`.

# %%
#| export
class Resolver(Resolver):
    def con(self, name: str, count: int, span: Span, what: str = "constructor"):
        if name not in self.constructors:
            raise CompileError(f"unknown {what} {name}{did_you_mean(name, self.constructors)}", span)
        fields_ = self.constructors[name]
        if count != fields_:
            if fields_ == 0:
                raise CompileError(f"{name} has no fields: it is written {name}, without arguments", span)
            raise CompileError(f"{name} takes {fields_} argument{'s' * (fields_ > 1)}, given {count}", span)

    def pattern(self, p, bound: dict, what: str = "constructor") -> dict:
        """Check a pattern; add the names it binds to bound. what: what its constructor is called in
        a message (a catch clause's is an exception)."""
        match p:
            case PVar(name, span):
                check_bindable(name, span)
                if name in bound:
                    raise CompileError(f"{name} is bound twice in this pattern", span)
                bound[name] = "local"
            case PTuple(items):
                for i in items:
                    self.pattern(i, bound)
            case PCon(name, args, span):
                args = args or []
                self.con(name, len(args), span, what)
                for a in args:
                    self.pattern(a, bound)
        return bound


# %% [markdown]
# A variable is looked up in the local scope first, then among the
# top-level definitions, then among the built-in values; its kind is
# written on the node. `position` is the index of the top-level item whose
# code is running, or `None` inside a function body: reading a
# non-function definition at or after that index is the order error. An
# unknown name is not raised but noted, and the walk goes on: several
# misspelt names in one expression, `sqare(x) + prnt(x)`, are all reported,
# not only the first — an unknown name invents no mistake in the names
# after it, since each is looked up on its own.

# %%
#| export
class Resolver(Resolver):
    def var(self, v: Var, scope: dict, position):
        if v.name in scope:
            v.kind = scope[v.name]
        elif v.name in self.globals:
            v.kind = "global"
            index = self.globals[v.name]
            if position is not None and v.name not in self.functions and index >= position:
                where = "below" if index > position else "by this very definition"
                raise CompileError(f"{v.name} is read before its definition has run "
                                   f"(it is defined {where}; only functions may be used before their definition)",
                                   v.span)
        elif v.name in BUILTIN_VALUES:
            v.kind = "builtin"
        else:
            known = [*scope, *self.globals, *BUILTIN_VALUES, *BUILTIN_FORMS]
            # not raised: the names after it in the same expression are checked too, and each
            # unknown one reported (resolve raises them all at the end)
            self.errors.append(CompileError(f"unknown variable {v.name}{did_you_mean(v.name, known)}", v.span))


# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: the kind is written on the node</p>
#
# `resolve` could leave the tree alone and return what it found on the side: a
# dictionary from each `Var` node to its kind, or a new tree with the kinds in
# it. Writing the kind on the `Var` itself, as `var` does above, means the
# interpreter finds it on the node it is translating, with nothing else to
# pass around, and chapter 5 fills each node's `type` the same way. The price
# is that `resolve` changes the tree it is given. The field is declared with
# `compare=False`, like the span and the type, so a tree compares equal to
# itself before and after.
#
# </div>

# %% [markdown]
# The walk over expressions. A scope is a dictionary from names to kinds,
# copied (not changed) when a construct binds a name, so that the name is
# visible in the construct's body and nowhere else. Entering a lambda sets
# `position` to `None`: code in a function body runs only when the function
# is called. Only `var` makes a name `mutable`, and only a `mutable` name
# may be assigned.

# %%
#| export
class Resolver(Resolver):
    def expr(self, e, scope: dict, position):
        """position: the index of the top-level item running this code, or None inside a function."""
        while True:
            match e:
                case Lit():
                    return
                case Var():
                    return self.var(e, scope, position)
                case Con(name, args, span):
                    self.con(name, len(args), span)
                    for a in args:
                        self.expr(a, scope, position)
                    return
                case Tuple(items) | Print(items) | Prim(_, items):
                    for i in items:
                        self.expr(i, scope, position)
                    return
                case Lambda(param, body, span):
                    check_bindable(param, span)
                    scope, position, e = {**scope, param: "local"}, None, body
                case App(fn, arg):
                    self.expr(fn, scope, position)
                    e = arg
                case If(cond, then, orelse):
                    self.expr(cond, scope, position)
                    self.expr(then, scope, position)
                    e = orelse
                case Match(scrutinee, clauses):
                    self.expr(scrutinee, scope, position)
                    for pattern, body in clauses:
                        self.expr(body, {**scope, **self.pattern(pattern, {})}, position)
                    return
                case Let(name, value, body, span) | LetVar(name, value, body, span):
                    check_bindable(name, span)
                    self.expr(value, scope, position)
                    kind = "mutable" if isinstance(e, LetVar) else "local"
                    scope, e = {**scope, name: kind}, body
                case Assign(target, value):
                    self.var(target, scope, position)
                    if target.kind != "mutable":
                        raise CompileError(f"{target.name} is not a var: only variables declared "
                                           f"with var can be assigned with :=", target.span)
                    e = value
                case While(cond, body) | Seq(cond, body):
                    self.expr(cond, scope, position)
                    e = body
                case Assert(cond):
                    e = cond
                case Raise(Con(name, args, span) as arg):
                    self.con(name, len(args), span, "exception")
                    e = Tuple(args)
                case Raise(arg):
                    e = arg
                case Try(body, clauses):
                    self.expr(body, scope, position)
                    for pattern, body in clauses:
                        self.expr(body, {**scope, **self.pattern(pattern, {}, "exception")}, position)
                    return
                case _:
                    raise TypeError(f"not a core expression: {e!r}")


def resolve(program: Program) -> Program:
    """Check the names of a core program; record each variable's kind. Returns the program."""
    return Resolver(program).resolve()


# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: a scope copied at every binder</p>
#
# A scope could be one dictionary, changed in place: add the name on the way
# into a `let`, remove it on the way out. Copying it instead (`{**scope, name:
# kind}`) costs time in proportion to the names in scope at each binder, but
# nothing has to be undone on the way out, so no name can outlive its
# construct through a removal forgotten on some path — an exception, an early
# `return`. And because nothing is undone, `expr` can move on to the body of a
# `let` or a lambda by going round its loop rather than by calling itself,
# which is what the next paragraph relies on.
#
# </div>

# %% [markdown]
# `resolve` loops instead of recursing where it can (a lambda's body, the
# rest of a `let`), so a long block does not cost Python stack. The errors it
# finds, each at the name:

# %%
def errors(name: str, text: str) -> str:
    try:
        resolve(desugar(parse(Source(name, text))))
    except CompileError as error:
        return error.render()
    return "no error!"


for name, text in {
    "unknown.l": "def f(x) = x + y",
    "misspelt.l": "def square(x) = x * x\ndef f(y) = sqare(y) + 1",
    "constructor.l": "data T { A(Int); Bee }\ndef t = Be",
    "arity.l": "data List<t> { Cons(t, List<t>); Nil }\ndef l = Cons(1)",
    "assign.l": "def f(x) = { x := 1 }",
    "exception.l": "exception NotFound\ndef f(x) = try { x } catch { NotFund -> 0 }",
    "exception_twice.l": "data Option<a> { Some(a); None }\nexception None",
    "predefined.l": "exception DivisionByZero",
    "closed.l": "exception Failure(String, List<a>)",
    "raise.l": "exception Stop\ndef f(x) = if (x) raise else raise(Stop)",
    "order.l": "def a = b + 1\ndef b = 2",
    "twice.l": "def f = 1\ndef f = 2",
    "reserved.l": "def g = { print -> 1 }",
}.items():
    print(errors(name, text), end="\n\n")

# %% [markdown]
# Each caret points at the name that is wrong, the `~` underlining the rest of
# it (`sqare`, `Be`), or at the whole constructor application when its
# arguments are wrong in number (`Cons(1)`). A name defined twice gets two
# located lines: the error at the second definition, then a `note` at the
# first.

# %% [markdown]
# Three mistakes in three items, all reported:

# %%
print(errors("three.l", """\
data List<t> { Cons(t, List<t>); Nil }
data Shape { Circle(Int); Square(Int) }
def total(list) = lenght(list) * 2
def length(l) = l.{ Cons(_, t) -> 1 + length(t); Nil -> 0 }
def shape = Circel(3)
print(prnt(shape))
"""))

# %% [markdown]
# The three errors come out in the order of the source, one for each item in
# which `resolve` found a mistake: the misspelt `lenght` in `total` did not
# stop it from checking `shape` and the last line.

# %% [markdown]
# ### One program, from syntax to core
#
# Here are both trees of a small program's definition side by side: on the
# left the syntax tree that chapter 4a's parser builds, on the right its
# core, once desugared and resolved. Each box is a node, with its fields that are not
# nodes; each variable the core reads carries the kind `resolve` gave it
# (`Var both`, the name a `Def` defines, is not read and has none). The
# fresh name the desugaring invented, and the lambda that binds it, are
# yellow.

# %%
from dataclasses import fields, is_dataclass

from lcompiler.drawing import Box, Picture

HIDDEN = {"span", "type", "op_span", "form", "is_function"}   # fields not drawn
EDGE_LABELS = {"cond", "then", "orelse", "pattern", "body"}     # edges drawn with their field's name


def node_label(node) -> str:
    """A node's class and its fields that are not nodes: `Binary &&`, `Var a local`."""
    words = [type(node).__name__]
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name not in HIDDEN and not is_dataclass(v) and not isinstance(v, list):
            words.append(str(v).lower() if isinstance(v, bool) else "()" if v == () else str(v))
    return " ".join(w for w in words if w)


def node_tree(node, style: str, edge: str = "") -> Box:
    """A syntax or core tree as boxes, each node's sub-trees below it; a name made up by the
    desugaring (%n) is yellow."""
    children = []
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name in HIDDEN:
            continue
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, tuple) and item:        # a clause of a core Match: (pattern, body)
                children += [node_tree(item[0], style, "pattern"), node_tree(item[1], style, "body")]
            elif is_dataclass(item):
                children.append(node_tree(item, style, f.name if f.name in EDGE_LABELS else ""))
    label = node_label(node)
    return Box(label, children, "yellow" if "%" in label else style, edge)


both = Source("both.l", "def both(a, b) = a && !b\nprint(both(true, false))\n")
both_core = resolve(desugar(parse(both)))
print(pretty_core(both_core), end="")
Picture([("syntax (chapter 4a)", [node_tree(parse(both).items[0], "blue")]),
         ("core, desugared and resolved", [node_tree(both_core.items[0], "green")])],
        alt="Two trees of the definition 'def both(a, b) = a && !b'. The syntax tree: a Def "
            "with its name, two parameter patterns a and b, and a Binary && of Var a and Unary ! "
            "of Var b. The core tree: a Def whose value is Lambda %1 (yellow, a fresh name) whose "
            "body is a Match of Var %1 (yellow) against the pattern PTuple (a, b), with body an "
            "If: cond Var a local, then Prim not of Var b local, orelse Lit false.")

# %% [markdown]
# Three rows of the table are visible at once: two parameters became one
# tuple pattern matched on a fresh name, `&&` an `if` whose `else` is the
# literal `false`, and `!` the primitive `not`; `resolve` marked `a` and
# `b` local, bound by the pattern. In the printed core, the call's two
# arguments have become one tuple.

# %% [markdown]
# ## The reference interpreter
#
# The interpreter's values are Python values: an L `Int` is a Python `int`
# kept within 64 bits, a `Bool` a `bool`, a `String` a `str`, the unit value
# the empty tuple `()`, a tuple a Python tuple. Three small classes complete
# the set: a data value (a constructor and its fields), a closure (a lambda
# and the environment it was created in), and a cell (the mutable box of a
# `var`, shared by the closures that capture it).
#
# The interpreter is written to be read, and to be the standard every later
# stage is compared with: it follows the core language's definition case by
# case. Three requirements give it its shape — proper tail calls, speed
# enough to run the test corpus's loops of a million iterations, and the
# compiled code's limits on stack and heap — and each is explained where
# the code meets it. Runtime errors are `RunError`s, located and rendered
# like compile errors, with the same caret, but printed as `runtime error`
# and ending `lc` with exit status 2 ([appendix
# A](A_errors.ipynb#mistakes-while-a-program-runs) has the class).
#
# The interpreter is a module of its own, `lcompiler.interp`. Its values
# first: the three classes that Python does not already have.

# %%
#| export interp
"""The reference interpreter of L's core language (chapter 4b)."""

import sys
from dataclasses import dataclass

# (A module of its own imports the core's classes from the package: in the notebook they replace the
# cells' definitions above, which are the same classes, exported to lcompiler.core.)
from lcompiler.core import (  # noqa: F811
    App, Assert, Assign, BUILTIN_VALUES, Con, Def, If, Lambda, Let, LetVar, Lit, Match, Prim, Print,  # noqa: F811
    PREDEFINED_EXCEPTIONS, Program, Raise, Seq, Try, Tuple, Var, While)  # noqa: F811
from lcompiler import syntax
from lcompiler.errors import RunError, Span
from lcompiler.syntax import PCon, PInt, PTuple, PUnit, PVar, PWild, pretty_expr, Str  # noqa: F811


@dataclass(slots=True, eq=False)
class Data:
    """A constructed value: C(v1, …, vn), or C alone."""
    name: str
    fields: tuple


@dataclass(slots=True, eq=False)
class Closure:
    """A function value: its parameter, its body translated into a Python function (below), and the
    locals it was created with."""
    param: str
    body: object
    env: dict
    captures: tuple = ()     # the names in env that the body uses: what chapter 8's closure keeps


@dataclass(slots=True, eq=False)
class Cell:
    """The box of a var."""
    value: object


# %% [markdown]
# How `print` shows a value follows the contract's rules: at the top level
# of `print` a string prints as it is, nested inside a tuple or a
# constructor it prints quoted, with its escapes; a function prints as
# `<function>`.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a printer without recursion</p>
#
# A list of a hundred thousand elements is a value nested a hundred
# thousand deep, `Cons(1, Cons(2, …))`, and an L program builds one easily.
# A printer that called itself on the fields of a value would need a
# hundred thousand Python frames; one that recursed through `", ".join(…)`
# would also recurse in C, inside `join`, and a long enough list would crash
# the process instead of printing. So the printer keeps its own stack of
# what is still to be shown, in a Python list on the heap, and pops one
# thing at a time: its depth is limited by memory only.
#
# </div>
#
# The code: `todo` is a stack of
# values still to show and of pieces of text (marked by `nested` being
# `None`); a tuple or a constructor pushes its closing parenthesis, then its
# fields and the commas between them, last field first, so that the first
# is popped first.

# %%
#| export interp
def show_value(v, nested: bool = False) -> str:
    """How print writes a value."""
    pieces, todo = [], [(v, nested)]
    while todo:                     # a stack of values still to show, and of text (nested is None)
        v, nested = todo.pop()
        if nested is None:
            pieces.append(v)
        elif v is True or v is False:
            pieces.append("true" if v else "false")
        elif type(v) is int:
            pieces.append(str(v))
        elif type(v) is str:
            pieces.append(pretty_expr(Str(v)) if nested else v)
        elif type(v) is Closure:
            pieces.append("<function>")
        elif type(v) is tuple or type(v) is Data:
            items = v if type(v) is tuple else v.fields
            if type(v) is Data:
                pieces.append(v.name)
                if not items:
                    continue
            pieces.append("(")
            todo.append((")", None))
            for i in reversed(range(len(items))):
                todo.append((items[i], True))
                if i:
                    todo.append((", ", None))
        else:
            raise TypeError(f"not an L value: {v!r}")
    return "".join(pieces)


# %% [markdown]
# A tuple holding a string and a list, shown as if nested; then a string, the
# unit value and a closure, each shown at the top level:

# %%
print(show_value(("one", Data("Cons", (1, Data("Nil", ())))), True), show_value("one"), show_value(()),
      show_value(Closure("x", None, {})))


# %% [markdown]
# The string inside the tuple is quoted, the one at the top level is not;
# `Nil`, a constructor without fields, is written without parentheses; and a
# closure shows nothing of its code.
#
# An exception on its way out is a Python exception, `Raised`, that carries
# the L value raised and its *raise site*: where it was raised, and, for a
# predefined exception, the message of the runtime error that reports it if
# nothing catches it — `division by zero`, `assertion failed`, `no clause
# matches the value …`, exactly the messages a program stopped with before L
# had exceptions. A raise of the program's own is reported as `uncaught
# exception`, then the value as `print` shows it. That message is made only
# if it is read: a program that raises a million exceptions of its own and
# catches them all never formats one. (A match failure's message, which
# shows the value, is made when it is raised.) `Raised` is a `RunError`, so that an uncaught
# exception goes where every runtime error goes: to `lc`, which prints it
# and stops with status 2.

# %%
#| export interp
class Raised(RunError):
    """An L exception on its way to a handler: its value, and where it was raised."""

    def __init__(self, value: "Data", span: Span, message: str | None = None):
        self.value, self.span, self.reason = value, span, message

    @property
    def message(self) -> str:
        return self.reason or f"uncaught exception {show_value(self.value)}"


PREDEFINED = {name: Data(name, ()) for name in PREDEFINED_EXCEPTIONS}   # one value each, shared


# %%
failure = Raised(Data("Failure", ("boom",)), Span(Source("boom.l", "raise(Failure(\"boom\"))"), 0, 22))
print(failure.render())

# %% [markdown]
# ### Staging: from expressions to Python functions
#
# The interpreter does not walk the tree each time an expression runs.
# Instead it first translates every core expression, once, into a Python
# function of an environment that computes the expression's value:
# `compile(Prim("+", [a, b]))` is, roughly, `lambda env: a_code(env) +
# b_code(env)`, where `a_code` and `b_code` are the translations of `a` and
# `b`. Running the program is then calling functions. (These functions are
# closures in Python's sense, holding the translations of their parts; an
# L function value, the `Closure` above, holds one of them as its `body`.)
#
# <div class="admonition note">
# <p class="admonition-title">Design note: translate once, then run</p>
#
# The obvious interpreter is one `match` over the tree, run every time an
# expression is evaluated. Each case of the translation here still says, in
# one place, what a construct means; but the questions "which construct is
# this?" and "where are its parts?" are answered once, when the program is
# translated, not at every execution. That makes the interpreter faster
# than a `match` over the tree, which matters: the tests run loops of a
# million iterations through it. The price is one level of
# indirection for the reader: each case returns a function, and the
# function is what runs.
#
# </div>
#
# Patterns are translated the same way, into functions that take a value and
# a dictionary, add the pattern's variables to it, and say whether the value
# matched.

# %%
#| export interp
def compile_pattern(p):
    """A function (value, bindings) -> bool that matches p and records its variables."""
    match p:
        case PVar(name):
            def match_var(v, out):
                out[name] = v
                return True
            return match_var
        case PWild() | PUnit():
            return lambda v, out: True
        case PInt(n):
            return lambda v, out: type(v) is int and v == n
        case PTuple(items):
            matchers, size = [compile_pattern(i) for i in items], len(items)

            def match_tuple(v, out):
                if type(v) is not tuple or len(v) != size:
                    return False
                for m, x in zip(matchers, v):
                    if not m(x, out):
                        return False
                return True
            return match_tuple
        case PCon(name, args):
            matchers = [compile_pattern(a) for a in args or []]

            def match_con(v, out):
                if type(v) is not Data or v.name != name:
                    return False
                for m, x in zip(matchers, v.fields):
                    if not m(x, out):
                        return False
                return True
            return match_con
    raise TypeError(f"not a pattern: {p!r}")


# %% [markdown]
# The pattern `Cons(x, _)`, translated once, then tried on two values, each
# with a dictionary for the names it binds:

# %%
cons_x = compile_pattern(PCon("Cons", [PVar("x"), PWild()]))
bindings = {}
print(cons_x(Data("Cons", (1, Data("Nil", ()))), bindings), bindings, cons_x(Data("Nil", ()), {}))

# %% [markdown]
# On `Cons(1, Nil)` the matcher answers `True` and has written `x = 1` into
# the dictionary it was given; on `Nil` it answers `False`. A pattern that
# fails part of the way through may already have written some of its names,
# which is why `match`, below, gives each clause its own copy of the
# environment.

# %% [markdown]
# ### Tail calls: a trampoline
#
# The contract promises that a call in tail position runs in constant stack:
# a loop written as tail recursion may turn ten million times, or any
# number of times. In our
# translation a call is a Python call, and a Python call grows Python's stack;
# ten million of them would exceed any limit. The standard remedy is a
# **trampoline**. A function body is translated knowing which of its calls are
# in *tail position* — the last thing the body does: in a branch of an `if`,
# the body of a `let` or a `var`, the second half of `;`, a clause of a
# `match` (or of a `try`, below). A tail
# call does not call; it returns a small request, a `TailCall` holding the
# function and the argument. Whoever made the (non-tail) call that started
# this runs a loop: apply the function; if the result is a `TailCall`, apply
# *that* function to *that* argument, and so on, until a real value comes
# back. A chain of ten million tail calls is ten million turns of one loop,
# at constant depth.
#
# The picture sets the two kinds of call side by side, on two small
# programs: `count(2)` with `def count(n) = if (n == 0) 0 else 1 +
# count(n - 1)`, whose recursive call is not in tail position, and
# `loop(2, 0)` with `def loop(i, acc) = if (i == 0) acc else loop(i - 1,
# acc + i)`, whose recursive call is.

# %%
Picture([("count: not a tail call, so calls nest",
          [Box("count(2): computes 1 + count(1)", [
              Box("count(1): computes 1 + count(0)", [
                  Box("count(0) returns 0", edge="calls")], edge="calls")])]),
         ("loop: tail calls, one loop at one depth",
          [Box("the loop of the call loop(2, 0)", [
              Box("loop(2, 0) returns TailCall(loop, (1, 2))", edge="turn 1"),
              Box("loop(1, 2) returns TailCall(loop, (0, 3))", edge="turn 2"),
              Box("loop(0, 3) returns 3", edge="turn 3")], "green")])],
        alt="Two panels. Left, a non-tail recursion: count(2) computes 1 + count(1), which calls "
            "count(1), which calls count(0); each call is drawn below the one that made it, three "
            "levels deep, and count(0) returns 0. Right, a tail recursion: the loop of the call "
            "loop(2, 0) has three turns side by side at one level: loop(2, 0) returns "
            "TailCall(loop, (1, 2)), loop(1, 2) returns TailCall(loop, (0, 3)), and loop(0, 3) "
            "returns 3.")

# %% [markdown]
# On the left every call waits, inside the one that made it, for the
# value it will add 1 to: three levels, and a million for `count(1000000)`.
# On the right each turn has finished before the next begins, so the
# turns sit side by side under the one loop that runs them: a million
# turns are still one level.
#
# Non-tail calls, like the one in `1 + length(tail)`, do grow the stack, as
# they must: each is a few nested Python calls (the code of the call, then
# the functions of the body that lead to the next call). How deep may they
# go? The interpreter has a limit of its own, 2²⁰ = 1,048,576 nested calls
# (`DEPTH_LIMIT`), which [the language reference](../language.md#guarantees)
# states. The compiled code of [chapter 10](10_llvm.ipynb) has another: its
# stack of 256 MiB holds, as the same page says, some sixteen million calls
# of a small function. A recursion between 2²⁰ and sixteen million calls
# deep therefore runs compiled and stops interpreted; the recursions that
# the tests of this book run to their end go a million calls deep at most.
# A program that goes too deep stops with a runtime error, "stack
# overflow", at the last call it made — the same message, at the same place,
# as the compiled code's when its own stack runs out.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a million calls deep, with the stack on the heap</p>
#
# An interpreter for a language with deep recursion has two classic
# choices: keep its own stack of pending work in a data structure (a CPS
# or stack-machine interpreter, which never recurses in the host language),
# or recurse in the host language and make the host's stack big enough. The
# first would turn every case of the translation inside out, and this
# interpreter is meant to be read; so it takes the second, which four
# facts make possible:
#
# - CPython 3.11 runs a call from Python code to Python code without using
#   the C stack: the new frame is a small record on a stack of its own, on
#   the heap. So the interpreter raises Python's recursion limit while it
#   runs, to `STACK_LIMIT` frames — eight million, enough for a million L
#   calls of up to eight Python frames each;
# - the interpreter counts the L calls in progress, and stops at
#   `DEPTH_LIMIT`, 2²⁰ = 1,048,576 of them, whatever the number of frames
#   each takes;
# - CPython keeps that stack of frames in blocks of 16 KiB, which it asks
#   the system for when a call needs one more and gives back as soon as the
#   call returns: a recursion that goes down and up again pays two system
#   calls, and the kernel's page faults, each time it crosses into a new
#   block. `in_frame_room` ([appendix B](B_support.ipynb)) starts the
#   program inside a call whose frame is half a gigabyte of untouched
#   memory: CPython then makes one
#   block of a gigabyte, of which the system gives only the pages that
#   frames touch, and the frames of the program's calls fill the rest of it
#   without asking for more;
# - the translation never lets C code call back into the interpreter (a
#   `tuple(…)` of a generator would: the generator's frame then runs on the
#   C stack, one C frame per level of L recursion), and the program runs on
#   a thread of its own with a C stack of 256 MiB, as the compiled code does,
#   for whatever C recursion remains.
#
# The price is memory and time: frames and environments of a million
# nested calls take hundreds of megabytes, and reporting a runaway
# recursion takes seconds, as Python unwinds every call in progress. Both
# are measured at the end of this chapter. The interpreter is the
# reference, not the fast way.
#
# </div>

# %%
#| export interp
import operator

from lcompiler.support import (
    NESTING_LIMIT, collector_looks_every, collector_paused, in_frame_room, on_big_stack, recursion_limit)

STACK_LIMIT = 8 << 20      # Python frames the interpreter may use
DEPTH_LIMIT = 1 << 20      # nested L calls (non-tail calls still running)
YOUNG_OBJECTS = 1_000_000  # new Python objects between two looks of the garbage collector, while a program runs


class TailCall:
    """What a call in tail position returns instead of calling: the function and its argument."""
    __slots__ = ("fn", "arg")


# %% [markdown]
# A tail call could make a new `TailCall` each time, but it need not: the
# request lives only from the moment the tail call returns it to the moment
# the loop that runs it reads it, and nothing runs in between but returns.
# So each interpreter has one `TailCall`, which every tail call fills in and
# returns: filling in two fields costs less than making an object.
#
# The interpreter holds the output, the limits, the values of the top-level
# definitions, the names of the function definitions with their
# parameters, the number of L calls in progress, the place of the last
# call, and the accounts of its heap (explained in their own section,
# below). The code of a call in non-tail position is made by `calling`:
# evaluate the function and the argument, apply the one to the other, and
# run the tail calls that come back — the trampoline, the one place where
# a function value is applied. `call` applies a given function to a given
# value through the same code.

# %%
#| export interp
class Interpreter:
    """Translates a core program into Python closures, then runs it."""

    def __init__(self, out=None, stack_limit: int = STACK_LIMIT, depth_limit: int = DEPTH_LIMIT,
                 heap_limit: int | None = None):
        self.out = out or sys.stdout
        self.stack_limit, self.depth_limit = stack_limit, depth_limit
        self.heap_limit = heap_limit            # in bytes; None: LC_HEAP_LIMIT's, read when the program runs
        self.globals: dict = {}
        self.functions: dict = {}               # function definition -> the name of its parameter
        self.tail_call = TailCall()             # what every tail call fills in and returns
        self.depth = 0                          # nested calls running
        self.call_site: Span | None = None     # the last call made, for "stack overflow"
        self.program_span: Span | None = None   # where the heap limit is reported
        self.room = self.granted = 0            # words to allocate before the next look at the heap, in all
        self.counted = 0                        # words allocated before the last look
        self.looks = 0                          # how many times measure_heap looked

    def call(self, f, arg, span: Span):
        """Apply a function value, running the tail calls it returns until a value comes."""
        return self.calling(lambda env: f, lambda env: arg, span)({})

    def calling(self, fn, arg, span: Span, known: str | None = None):
        """The code of a call: evaluate the function, then the argument, apply the one to the other
        and run the tail calls that come back until a value comes. known: the name of the function
        definition called, if the call names one."""
        interp, globals_, limit, tail_call = self, self.globals, self.depth_limit, self.tail_call
        if known:                                # its environment is empty, its parameter known
            param = self.functions[known]

            def call_known(env):
                a = arg(env)
                interp.call_site = span
                depth = interp.depth + 1
                if depth > limit:
                    raise RecursionError
                interp.depth = depth
                f, inner = globals_[known], {param: a}
                while True:
                    result = f.body(inner)
                    if result is not tail_call:
                        interp.depth = depth - 1
                        return result
                    f, a = result.fn, result.arg
                    if type(f) is not Closure:
                        raise RunError("this is not a function", span)
                    inner = f.env.copy()
                    inner[f.param] = a
            return call_known

        def call(env):
            f, a = fn(env), arg(env)
            interp.call_site = span
            depth = interp.depth + 1
            if depth > limit:
                raise RecursionError
            interp.depth = depth
            while True:
                if type(f) is not Closure:
                    raise RunError("this is not a function", span)
                inner = f.env.copy()
                inner[f.param] = a
                result = f.body(inner)
                if result is not tail_call:
                    interp.depth = depth - 1
                    return result
                f, a = result.fn, result.arg
        return call


# %% [markdown]
# The two closures are one loop written twice: `call_known` serves a call
# that names a function definition, such as `length(tail)` in
# `1 + length(tail)`, the most common kind. Such a function exists before the program runs and never changes,
# and its environment is empty, so its first application needs neither a
# look at what the function value is nor a copy of its environment.
#
# Neither closure restores the count of calls in progress when an exception
# passes through it — that would take a `finally` in every call, run at
# every return: the `try` of L that catches the exception puts the count back to
# what it was when it began (the section on exceptions, below), and an
# exception that nothing catches ends the program, and the count with it.
#
# A closure whose body asks for the same closure again, ten times, then
# returns, noting at each turn how many calls are in progress:

# %%
ticks, depths = Interpreter(), []


def countdown_body(env):
    depths.append(ticks.depth)
    if env["n"] == 0:
        return "done"
    ticks.tail_call.fn, ticks.tail_call.arg = countdown, env["n"] - 1
    return ticks.tail_call


countdown = Closure("n", countdown_body, {})
print(ticks.call(countdown, 10, None), "after", len(depths), "turns of the loop; calls in progress at each:",
      sorted(set(depths)), "; after it:", ticks.depth)

# %% [markdown]
# The loop went round eleven times — the first call and ten tail calls —
# and the count of calls in progress stayed at one throughout: ten tail
# calls cost no depth, and the one real call gave its depth back when it
# returned.

# %% [markdown]
# Now the translation, one case per construct. `compile(e, tail)` returns a
# function of the local environment `env` (a dictionary from names to values,
# or to cells for `var`s); top-level definitions live in `self.globals`.
# `tail` says whether `e` is in tail position in its function body: only a
# call in tail position returns a `TailCall`, and only the parts of an
# expression that are its last act (the branches of an `if`, the body of a
# `let` or a `var`, the second half of `;`, the clauses of a `match` or of a
# `try`) inherit `tail`.
# A lambda's body is always in tail position in that lambda. Variables,
# primitives, calls, conditionals, matches, functions, constructors and
# tuples have methods of their own, below; `let` and `;` are translated in
# place; the constructs with effects (`var`, `:=`, `while`, `print`,
# `assert`, `raise`, `try`) are handed to `compile_effects`.
#
# A constructor or a tuple is also an *allocation*: the compiled code would
# take words of its heap for it, and the interpreter counts them (`room`
# goes down by the block's size, `measure_heap` looks at the heap when it
# runs out — the section on the heap explains both). A constructor without
# fields, `Nil`, allocates nothing, compiled or interpreted: it is one
# value, made once.

# %%
#| export interp
class Interpreter(Interpreter):
    def compile(self, e, tail: bool = False):
        match e:
            case Lit(value):
                return lambda env: value
            case Var(name, span, kind):
                return self.variable(name, span, kind)
            case Prim(op, args, span, _, op_span):
                return self.primitive(op, args, op_span or span)
            case App(fn, arg, span):
                return self.application(fn, arg, span, tail)
            case If(cond, then, orelse):
                return self.conditional(cond, self.compile(then, tail), self.compile(orelse, tail))
            case Let(name, value, body):
                value, body = self.compile(value), self.compile(body, tail)
                return lambda env: body({**env, name: value(env)})
            case Seq(first, second):
                first, second = self.compile(first), self.compile(second, tail)
                return lambda env: (first(env), second(env))[1]
            case Match(scrutinee, clauses, span):
                return self.match(self.compile(scrutinee),
                                  [(p, compile_pattern(p), self.compile(b, tail)) for p, b in clauses], span)
            case Lambda():
                return self.function(e)
            case Con(name, []):
                value = Data(name, ())
                return lambda env: value
            case Con(name, args):
                return self.construct(name, [self.compile(a) for a in args])
            case Tuple(items):
                return self.make_tuple(items, counted=True)
        return self.compile_effects(e, tail)

    def construct(self, name: str, args: list):
        interp, words = self, len(args) + 1
        if len(args) == 2:
            a, b = args

            def construct_two(env):
                value = Data(name, (a(env), b(env)))
                interp.room -= 3
                if interp.room < 0:
                    interp.measure_heap()
                return value
            return construct_two

        def construct(env):
            value = Data(name, tuple([a(env) for a in args]))   # a list: no C recursion
            interp.room -= words
            if interp.room < 0:
                interp.measure_heap()
            return value
        return construct

    def make_tuple(self, items: list, counted: bool):
        """A tuple; counted: as an allocation (not when it is the argument of a call, which the
        compiled code passes in registers)."""
        items, interp, words = [self.compile(i) for i in items], self, len(items) + 1
        if not counted and len(items) == 2:
            a, b = items
            return lambda env: (a(env), b(env))
        if not counted:
            return lambda env: tuple([i(env) for i in items])

        def tuple_(env):
            value = tuple([i(env) for i in items])
            interp.room -= words
            if interp.room < 0:
                interp.measure_heap()
            return value
        return tuple_


# %% [markdown]
# A call. In tail position it fills in the `TailCall` and returns it; in
# any other position it is `calling`'s code. Its argument, when it is a
# tuple written in the call — `count(i + 1, n)` — is not counted as an
# allocation: the compiled code passes its items in registers. A call that
# names a function definition finds it without a function call of its own.

# %%
#| export interp
class Interpreter(Interpreter):
    def application(self, fn, arg, span: Span, tail: bool):
        tail_call = self.tail_call
        arg = self.make_tuple(arg.items, counted=False) if type(arg) is Tuple else self.compile(arg)
        if type(fn) is Var and fn.kind == "global" and fn.name in self.functions:
            name, globals_ = fn.name, self.globals
            if not tail:
                return self.calling(None, arg, span, known=name)

            def tail_call_known(env):
                tail_call.arg = arg(env)
                tail_call.fn = globals_[name]
                return tail_call
            return tail_call_known
        fn = self.compile(fn)
        if not tail:
            return self.calling(fn, arg, span)

        def any_tail_call(env):
            f, a = fn(env), arg(env)
            tail_call.fn, tail_call.arg = f, a
            return tail_call
        return any_tail_call


# %% [markdown]
# A function. Evaluating a lambda makes a closure of the environment it is
# evaluated in; the closure's *size*, for the heap's accounts, is what
# chapter 8's closure conversion would make of it: a header, the address of
# the code, and a word for each variable of the environment that the body
# uses — `captures`, which `free_variables` (in the section on the heap)
# finds.
#
# A function of several parameters, `def count(i, n) = …`, is desugared
# into a lambda of one parameter that matches it against a tuple of
# variables, `{ %1 -> match (%1) { (i, n) -> … } }`. Translated as it
# stands, each call would copy its environment twice, once for the
# parameter and once for the clause. But the `match` is the first thing
# the body does, in the environment that the call has just made for it and
# that nothing else has seen yet; so the parameters are written into that
# environment, and the pattern needs no code of its own. A value that is
# not a tuple of the right size still fails as the `match` would, at its
# place.

# %%
#| export interp
class Interpreter(Interpreter):
    def function(self, e: Lambda):
        param, body, interp = e.param, e.body, self
        captures = tuple(sorted(free_variables(e)))
        words = 2 + len(captures)

        def closure(code):
            def make_closure(env):
                value = Closure(param, code, env, captures)
                interp.room -= words
                if interp.room < 0:
                    interp.measure_heap()
                return value
            return make_closure

        match body:
            case Match(Var(name), [(PTuple(items), inner)], span) if name == param and \
                    all(type(p) in (PVar, PWild) for p in items):
                names, inner = [p.name if type(p) is PVar else None for p in items], self.compile(inner, tail=True)

                def no_clause(v):
                    return Raised(PREDEFINED["MatchFailure"], span, f"no clause matches the value {show_value(v, True)}")
                if len(names) == 2 and None not in names:
                    first, second = names

                    def parameters(env):
                        v = env[param]
                        if type(v) is not tuple or len(v) != 2:
                            raise no_clause(v)
                        env[first], env[second] = v
                        return inner(env)
                else:
                    def parameters(env):
                        v = env[param]
                        if type(v) is not tuple or len(v) != len(names):
                            raise no_clause(v)
                        for name, x in zip(names, v):
                            if name is not None:        # not a _
                                env[name] = x
                        return inner(env)
                return closure(parameters)
        return closure(self.compile(body, tail=True))


# %% [markdown]
# (Two named parameters, the most common case, get their own version: a
# loop over the names costs more than the two writes it makes.)
#
# The constructs with effects: a `var` puts a new `Cell` in the
# environment (an allocation of two words), `:=` changes what the cell
# holds (every closure that captured the cell sees the change), `while`
# loops in Python, and `print` and `assert` do what they say. A `var` gives
# the value of the rest of its block; the other four give the unit value
# `()`.

# %%
#| export interp
class Interpreter(Interpreter):
    def compile_effects(self, e, tail: bool):
        match e:
            case LetVar(name, value, body):
                value, body, interp = self.compile(value), self.compile(body, tail), self

                def declare(env):
                    inner = {**env, name: Cell(value(env))}
                    interp.room -= 2
                    if interp.room < 0:
                        interp.measure_heap()
                    return body(inner)
                return declare
            case Assign(target, value):
                name, value = target.name, self.compile(value)

                def assign(env):
                    env[name].value = value(env)
                    return ()
                return assign
            case While(cond, body):
                cond, body = self.compile(cond), self.compile(body)

                def loop(env):
                    while cond(env):
                        body(env)
                    return ()
                return loop
            case Print(args):
                args, write = [self.compile(a) for a in args], self.write

                def print_(env):
                    write(" ".join([show_value(a(env)) for a in args]) + "\n")
                    return ()
                return print_
            case Assert(cond, span):
                cond = self.compile(cond)

                def assert_(env):
                    if not cond(env):
                        raise Raised(PREDEFINED["AssertionFailed"], span, "assertion failed")
                    return ()
                return assert_
            case Raise(arg, span):
                return self.raise_(arg, span)
            case Try(body, clauses):
                return self.try_(body, clauses, tail)
        raise TypeError(f"not a core expression: {e!r}")


# %% [markdown]
# Reading a variable depends on its kind, which `resolve` recorded: a local
# is in the environment, a `var` is a cell in the environment, a global may
# not have been defined *yet* — the one runtime check on names the contract
# asks for; a function definition always has been.
#
# A `match` tries its clauses in order; a clause whose pattern binds
# variables gets a copy of the environment to add them to, since a pattern
# that fails half-way may already have written some; a clause that binds
# nothing (`Nil`, `0`, `_`) needs no copy.

# %%
#| export interp
def binds(p) -> bool:
    """Does the pattern bind a variable?"""
    match p:
        case PVar():
            return True
        case PTuple(items) | PCon(_, items):
            return any(binds(i) for i in items or [])
    return False


class Interpreter(Interpreter):
    def variable(self, name: str, span: Span, kind: str):
        if kind == "local":
            return lambda env: env[name]
        if kind == "mutable":
            return lambda env: env[name].value
        if kind == "builtin":
            value = BUILTIN_VALUES[name]
            return lambda env: value
        globals_ = self.globals
        if name in self.functions:
            return lambda env: globals_[name]

        def read_global(env):
            try:
                return globals_[name]
            except KeyError:
                raise RunError(f"{name} is read before its definition has run", span) from None
        return read_global

    def match(self, scrutinee, clauses: list, span: Span):
        clauses = [(matches, body, binds(p)) for p, matches, body in clauses]

        def run_match(env):
            v = scrutinee(env)
            for matches, body, binding in clauses:
                if binding:
                    inner = env.copy()           # the clause's variables are added to a copy
                    if matches(v, inner):
                        return body(inner)
                elif matches(v, env):
                    return body(env)
            raise Raised(PREDEFINED["MatchFailure"], span, f"no clause matches the value {show_value(v, True)}")
        return run_match


# %% [markdown]
# Arithmetic is the table's: `primitive` finds the row of the operation,
# once, when the program is translated, and returns the function that runs
# it. A primitive that can fail tests its `Failure` first, and stops with
# the runtime error at the operator; every operation then applies the
# row's `operation` — a C function of the module `operator`, for all but
# `/` and `%`, so that applying it costs no Python call — and, for a row
# that `wraps`, calls `wrap` only when the result has left 64 bits. The
# interpreter trusts the type checker of [chapter 5](05_types.ipynb) that
# the operands have the right types; should they not (the checker does not
# exist yet in this chapter), Python's own `TypeError` becomes a runtime
# error at the operator instead of escaping.
#
# Two shapes of operands are common enough in loops to get code of their
# own, which reads them in place rather than through a function each: a
# local variable and a number, `i + 1` and `n - 1`, and two local
# variables, `y + i`; any other shape goes through `binary`. When the
# operation of `i + 1` or `n - 1` is Python's own `+` or `-`, wrapped, as
# the table says it is for L's, the code applies it in place, `env[x] + k`,
# without even the call of a C function: most loops count their iterations
# that way.

# %%
#| export interp
from lcompiler.primitives import MAX_INT, MIN_INT, PRIMITIVES, wrap


class Interpreter(Interpreter):
    def primitive(self, op: str, args: list, span: Span):
        row = PRIMITIVES[op]
        f, wraps, failure = row.operation, row.wraps, row.fails
        exception = PREDEFINED[failure.exception] if failure else None

        def wrong_types():
            return RunError(f"the operands of {op} have the wrong types", span)

        if row.arity == 1:
            a = self.compile(args[0])

            def unary(env):
                x = a(env)
                if failure is not None and x == failure.value:
                    raise Raised(exception, span, failure.message)
                try:
                    n = f(x)
                except TypeError:
                    raise wrong_types() from None
                return wrap(n) if wraps and not MIN_INT <= n <= MAX_INT else n
            return unary
        if failure:
            a, b = self.compile(args[0]), self.compile(args[1])
            second, bad, message = failure.operand == 1, failure.value, failure.message

            def checked(env):
                x, y = a(env), b(env)
                if (y if second else x) == bad:
                    raise Raised(exception, span, message)
                try:
                    n = f(x, y)
                except TypeError:
                    raise wrong_types() from None
                return wrap(n) if wraps and not MIN_INT <= n <= MAX_INT else n
            return checked
        match args:
            case [Var(x, kind="local"), Lit(int(k))] if wraps and (f is operator.add or f is operator.sub):
                k = k if f is operator.add else -k             # Python's + itself, in place: no call

                def local_plus_number(env):
                    try:
                        n = env[x] + k
                    except TypeError:
                        raise wrong_types() from None
                    return n if MIN_INT <= n <= MAX_INT else wrap(n)
                return local_plus_number
            case [Var(x, kind="local"), Lit(int(k))]:
                def local_and_number(env):
                    try:
                        n = f(env[x], k)
                    except TypeError:
                        raise wrong_types() from None
                    return wrap(n) if wraps and not MIN_INT <= n <= MAX_INT else n
                return local_and_number
            case [Var(x, kind="local"), Var(y, kind="local")]:
                def two_locals(env):
                    try:
                        n = f(env[x], env[y])
                    except TypeError:
                        raise wrong_types() from None
                    return wrap(n) if wraps and not MIN_INT <= n <= MAX_INT else n
                return two_locals
        a, b = self.compile(args[0]), self.compile(args[1])

        def binary(env):
            try:
                n = f(a(env), b(env))
            except TypeError:
                raise wrong_types() from None
            return wrap(n) if wraps and not MIN_INT <= n <= MAX_INT else n
        return binary


# %% [markdown]
# An `if` whose condition compares a local variable with another or with a
# literal — `if (n == 0)`, `if (i == n)`, the test that ends most loops —
# does the comparison itself, without a function for the condition. A
# comparison, for the table, is a primitive of two operands with a `Bool`
# result that cannot fail.

# %%
#| export interp
class Interpreter(Interpreter):
    def conditional(self, cond, then, orelse):
        match cond:
            case Prim(op, [Var(x, kind="local"), Var(kind="local") | Lit() as right], span, _, op_span) \
                    if comparison(op):
                f, where = PRIMITIVES[op].operation, op_span or span
                local, y, k = type(right) is Var, getattr(right, "name", None), getattr(right, "value", None)

                def compare_and_choose(env):
                    try:
                        chosen = f(env[x], env[y] if local else k)
                    except TypeError:
                        raise RunError(f"the operands of {op} have the wrong types", where) from None
                    return then(env) if chosen else orelse(env)
                return compare_and_choose
        cond = self.compile(cond)
        return lambda env: then(env) if cond(env) else orelse(env)


def comparison(op: str) -> bool:
    """Is the primitive op a comparison: two operands, a Bool, no failure?"""
    row = PRIMITIVES[op]
    return row.arity == 2 and row.type[-1] == "Bool" and row.fails is None


# %% [markdown]
# ### Exceptions: raise and try
#
# `raise(e)` evaluates `e` and raises it: a Python `raise` of a `Raised`
# that carries the value and the span of the `raise(…)` form, its raise
# site. The predefined exceptions are raised the same way, by the code
# above: `primitive` raises the exception its row of the table names
# (`DivisionByZero`), a `match` or a function's clauses `MatchFailure`,
# `assert` `AssertionFailed`, each with its message of old.
#
# `try { block } catch { clauses }` runs the block inside a Python `try`.
# If a `Raised` comes out, the clauses are tried against its value, as a
# `match`'s are, and the first that matches gives the `try` its value.
# When none matches, the *same* Python exception is raised again: it keeps
# the site of the original `raise`, so an exception that passes through
# `try`s that do not want it is reported where it was raised, never as a
# match failure of the `catch`. Four details make it right:
#
# - the block is translated with `tail=False`: a call in the block must
#   return to the `try`, which must still be there to catch what the call
#   raises (a tail call would leave the `try` first, as [the language
#   reference](../language.md#try-and-catch) says), so the block's calls
#   run their own trampoline, inside the Python `try`;
# - the clauses are translated with the `tail` of the `try` itself, and run
#   *after* the Python `try` statement has finished: a call in a clause of a
#   `try` in tail position returns a `TailCall` to the trampoline of the
#   function, whose frame the `try` then leaves. A loop that retries in its
#   handler, `def retry(n) = try { work(n) } catch { Busy -> retry(n + 1) }`,
#   runs in constant stack;
# - an exception leaves every call between the raise and the `try` without
#   the bookkeeping of a return: the count of nested calls, `depth`, is
#   put back to what it was when the `try` began;
# - a `var` lives in a `Cell`, which the block assigns in place, so the
#   clauses see the value it had when the exception was raised.
#
# The caught exception's traceback — the chain of Python frames it went
# through — is dropped at once: it would keep every frame of the calls it
# left alive, and a program that raises a million times would fill the
# memory with them.

# %%
#| export interp
class Interpreter(Interpreter):
    def raise_(self, arg, span: Span):
        arg = self.compile(arg)

        def raise_exception(env):
            raise Raised(arg(env), span)
        return raise_exception

    def try_(self, body, clauses: list, tail: bool):
        body, interp = self.compile(body), self
        clauses = [(compile_pattern(p), self.compile(b, tail), binds(p)) for p, b in clauses]

        def try_catch(env):
            depth = interp.depth
            try:
                return body(env)
            except Raised as raised:
                exception = raised.with_traceback(None)
            interp.depth = depth
            v = exception.value
            for matches, clause, binding in clauses:
                if binding:
                    inner = env.copy()
                    if matches(v, inner):
                        return clause(inner)
                elif matches(v, env):
                    return clause(env)
            raise exception                 # no clause wants it: on, with its first raise site
        return try_catch


# %% [markdown]
# A raise caught, a predefined exception caught, and an exception that no
# clause of the inner `try` wants, caught by the outer one:

# %%
from lcompiler.interp import run_source as run_here

run_here(Source("exceptions.l", """\
exception Failure(String)
exception NotFound
print(try { raise(Failure("boom")) } catch { Failure(why) -> why })
print(try { 1 / 0 } catch { DivisionByZero -> -1 })
print(try { try { raise(NotFound) } catch { Failure(_) -> 1 } } catch { NotFound -> 2 })
"""))

# %% [markdown]
# And one that nothing catches stops the program, reported at the `raise`
# that raised it, after what the program printed before. On its way out it
# passed through a `try` whose one clause, `DivisionByZero`, did not match:
# the report is still at the first `raise`, not at that `try`.

# %%
from lcompiler.errors import RunError

try:
    run_here(Source("uncaught.l", """\
exception Failure(String)
def check(n) = if (n > 2) raise(Failure("too big")) else n
print(check(1))
print(try { check(5) } catch { DivisionByZero -> 0 })
"""))
except RunError as uncaught:             # a Raised, from the package's module
    print(uncaught.render())

# %% [markdown]
# #### Flambda 2's example, in L
#
# OCamlPro's [account of Flambda 2](../bibliography.md#flambda2-snippets) explains its CPS with two small OCaml
# programs: `map`, which is not tail-recursive, and a function `f` whose
# `let` raises `Failure` in one branch of an `if`, the `raise` with which it
# turns to exceptions. Here they are in L,
# with `map` applied to a function that raises on the third element:

# %%
flambda2_program = Source("flambda2.l", """\
exception Failure
data List<a> { Cons(a, List<a>); Nil }

def map(f, xs) = xs.{
  Nil -> Nil
  Cons(x, r) -> Cons(f(x), map(f, r))
}
def f(cond) = {
  let v = if (cond) raise(Failure) else 0
  (v, v)
}
print(f(false))
print(try { f(true) } catch { Failure -> (-1, -1) })
print(try { map({ x -> f(x == 3) }, Cons(1, Cons(2, Cons(3, Cons(4, Nil))))) } catch { Failure -> Nil })
""")
run_here(flambda2_program)

# %% [markdown]
# The last line is the interesting one. When `f(3 == 3)` raises, three
# calls of `map` are in progress — the first, on the whole list, and two
# that it made of itself; none has returned, and each was waiting for a
# value to build its `Cons` with. The raise abandons them all: nothing of
# the half-built list survives, and the `try` gets the exception. In this
# interpreter the three calls are Python frames that a Python exception
# unwinds. In the double-barrelled CPS of the following chapters they are
# three *return* continuations, each of which would have gone on to build a
# `Cons`, that are simply never called: every call of `map` passes on,
# unchanged, the one *exception* continuation it was given, the `try`'s
# handler, and `raise` jumps to it. That is what OCamlPro's account calls
# double-barrelled CPS: a function has two ways out, so it takes two
# continuations, and a `try` is nothing but a local continuation passed as
# the second one.

# %% [markdown]
# ### Running a program, on a stack of its own
#
# `run` translates the program, creates the closures of the function
# definitions, then runs the other items in order. What the design note on
# deep calls asked of the host, it gets from the workshop's
# `lcompiler.support` ([appendix
# B](B_support.ipynb#a-program-on-a-stack-of-its-own) shows how each is
# done):
#
# - `on_big_stack(run, …)` runs the program on a thread of its own, with a
#   C stack of 256 MiB (the main thread's is 8 MiB, Linux's usual
#   `ulimit -s`), as the compiled code has, and hands back its result or
#   its exception. The thread is invisible to the caller: it runs in a copy
#   of the caller's context (Python's `contextvars`), where Jupyter keeps
#   the cell that output belongs to, and an interrupt — Ctrl-C, or the
#   stop button of a notebook — which reaches only the main thread, is
#   passed on to the program's, so that an L program that loops for ever
#   can still be stopped;
# - on that thread, the program starts inside `in_frame_room`, in the frame
#   of a call that claims half a gigabyte, so that the frames of its calls
#   fill one block of memory reserved at once, instead of blocks of 16 KiB
#   asked for and given back as a deep recursion goes down and up;
# - and `collector_looks_every(n)` makes Python's garbage collector look at
#   new objects less often while the program runs, for the reason below.

# %% [markdown]
# The output goes through `write`. When the reader of the output goes away
# early — `lc run --interp fizzbuzz.l | head -1` — writing fails with a
# `BrokenPipeError`; under `lc run`, the compiled code of chapter 10
# carries on in that case, its output discarded, and ends as it would have
# ended ([the reference](../language.md#errors-and-exit-statuses) says so),
# so the interpreter does the same. (`lc run` runs the compiled code in its
# own Python process, which ignores the signal `SIGPIPE`; an executable
# made by `lc build`, run from a shell, is stopped by that signal instead,
# as most Unix programs are.)
#
# Deep recursion, and a heap that grows, have one more cost, in time.
# Python's cyclic garbage collector looks at the youngest objects each time
# 700 more of the objects it tracks (tuples, dictionaries, instances and
# the like) have been made than freed — 700 is Python 3.11's threshold,
# `gc.get_threshold()[0]` — and moves those that survive to an
# older generation, which it walks again, whole, now and then. A recursion
# a million calls deep keeps every frame and environment alive, and a
# growing list every cell, so each look frees nothing: the looks added up
# to most of the time a runaway recursion took to be reported, and to a
# good part of the time a growing list took to fill the heap. While a program
# runs, `execute` lets `YOUNG_OBJECTS` (a million) objects accumulate
# between two looks instead. Cycles are still found (an L program can make
# them: a closure that assigns to a `var` it captures may be stored in it),
# only less often.

# %%
#| export interp
class Discard:
    """Where the output goes once its reader has gone."""

    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


class Interpreter(Interpreter):
    def write(self, text: str) -> None:
        try:
            self.out.write(text)
        except BrokenPipeError:
            self.out = Discard()


# %% [markdown]
# ### A heap of bounded size
#
# Memory is the other resource a program can exhaust. The compiled code has
# a heap of bounded size: [chapter 10b](10b_runtime.ipynb)'s runtime reads its limit from the
# variable `LC_HEAP_LIMIT` when the program starts (bytes, or with `K`, `M`
# or `G`; by default 1 GB, or a quarter of the machine's memory if that is
# less), and when the live data fill fifteen sixteenths of it, the program
# stops with
#
# ```text
# grow.l: runtime error: out of memory: the heap reached its limit (set LC_HEAP_LIMIT to change it)
# ```
#
# and exit status 2 — at the program, not at a line, since the collector
# that finds out does not know which line allocated last. The interpreter's
# values live in Python's heap, which has no limit of its own: a program
# that allocates without end, `def grow(acc) = grow(Cons(1, acc))`, would
# run until the system stopped it, where the compiled code stops in
# seconds. So the interpreter keeps the same accounts as the compiled code,
# in the compiled code's words, and stops at the same limit with the same
# message.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: measuring a heap that Python manages</p>
#
# The compiled code's limit is on its *live* data, what a collection
# keeps; a program may allocate a hundred times the limit in all, as long
# as it keeps little. Python frees most values the moment their last
# reference goes, but it does not say how much of its memory is the L
# program's. Three ways to find out were weighed:
#
# - *the process's memory*, as the system counts it (`resource`,
#   `/proc`): cheap, but it counts Python's own objects — the translated
#   program, the frames — it seldom shrinks when Python frees, and a `Cons`
#   takes several times more of it than of the compiled code's heap (the
#   cell below the note says how much), so the same limit would mean a
#   different program;
# - *Python's allocator*, with `tracemalloc`: exact about bytes, but it
#   slows down every allocation of every Python object, and they are still
#   Python's bytes, not L's;
# - *the L values themselves*, sized as chapter 10 lays them out — a header
#   and a word per field for a constructor or a tuple, a header, a code
#   address and a word per captured variable for a closure, two words for
#   a `var`'s cell — counted as the program allocates them, and measured,
#   when needed, by following the values that the running program can
#   still reach.
#
# The third gives the compiled code's answer, which is the point, and its
# cost can be kept in proportion to the allocation, as a collector's is.
# Counting is cheap: each allocation takes its size off `room`, the words
# the program may allocate before the next look. Only when `room` runs out
# does `measure_heap` look: it follows the values reachable from the
# globals and from the locals of the calls in progress, adding up their
# words. If they fill more than fifteen sixteenths of the limit, as the
# compiled code's collector gives up, the program stops; otherwise `room`
# becomes the limit minus the live words — the program cannot reach the
# limit before it has allocated that much more. A program that keeps little
# is looked at once per limit's worth of allocation, at a small cost each
# time; one that grows is stopped at the first look after it fills the
# heap.
#
# What it does not see: the values that the interpreter holds only in the
# middle of an expression (the first field of a constructor while the
# second is being computed); the compiled code's collector sees those. And
# the interpreter's environments keep whatever is in scope, where the
# compiled code keeps what a closure uses; the measure follows a closure
# only into the variables its body uses. And the compiled code makes a cell
# only for a `var` that a closure captures (chapter 7), where the
# interpreter counts one for every `var`. These differences are small next
# to a heap that fills.
#
# </div>
#
# A `Cons` of two numbers in Python's memory — the object and the tuple of
# its fields, as `sys.getsizeof` counts them — and in the compiled code's:

# %%
cons = Data("Cons", (1, Data("Nil", ())))
print(f"Python: {sys.getsizeof(cons) + sys.getsizeof(cons.fields)} bytes; compiled: {(1 + len(cons.fields)) * 8} bytes")

# %% [markdown]
# First, the limit, read as chapter 10b's C reads it: `env_size` follows
# `strtoull` and the shifts of the C function of the same name (a number too
# large for 64 bits gives the largest, as `strtoull` does, and a `K`, `M` or
# `G` that shifts a size out of 64 bits wraps it, as C's `<<=` does), and
# `default_heap_limit` is the C function's arithmetic.

# %%
#| export interp
import os

HEAP_LIMIT_MESSAGE = "out of memory: the heap reached its limit (set LC_HEAP_LIMIT to change it)"
UINT64 = (1 << 64) - 1


def env_size(name: str, fallback: int) -> int:
    """A size from the environment as chapter 10b's runtime reads it: bytes, with an optional K, M
    or G; anything it cannot read leaves the fallback."""
    text = os.environ.get(name)
    if not text or not "0" <= text[0] <= "9":
        return fallback
    digits = len(text) - len(text.lstrip("0123456789"))
    value, rest = min(int(text[:digits]), UINT64), text[digits:]      # strtoull saturates
    shift = {"k": 10, "K": 10, "m": 20, "M": 20, "g": 30, "G": 30}.get(rest[:1])
    if shift:
        value, rest = (value << shift) & UINT64, rest[1:]
    return value if rest == "" else fallback


def default_heap_limit() -> int:
    """1 GB, or a quarter of the machine's memory if that is less (but not under 64 MB)."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        pages = page = -1
    quarter = pages * page // 4 if pages > 0 and page > 0 else 1 << 30
    return min(max(quarter, 64 << 20), 1 << 30)


def read_heap_limit() -> int:
    """The heap limit in bytes: LC_HEAP_LIMIT, or the default; at most 32 GB, as compiled."""
    return min(env_size("LC_HEAP_LIMIT", default_heap_limit()), 32 << 30)


# %% [markdown]
# Five settings, read with −1 as the fallback:

# %%
def read_setting(text: str) -> int:
    os.environ["LC_EXAMPLE"] = text
    try:
        return env_size("LC_EXAMPLE", -1)
    finally:
        del os.environ["LC_EXAMPLE"]


print({text: read_setting(text) for text in ["64M", "8g", "1000", "2X", "x"]})

# %% [markdown]
# `64M` is 64 MiB, `8g` 8 GiB, `1000` a thousand bytes; `2X` and `x` cannot
# be read, and leave the fallback — in this function; `lc run --interp`, like
# a compiled program, first refuses such a setting with an error and exit
# status 2 ([appendix C](C_cli.ipynb#lc-run)). (The runtime of chapter 10b
# also raises a limit below twice its nursery — the part of its heap where
# new blocks are made, 2 MiB by default — plus a megabyte, 5 MiB in all,
# to that: the interpreter has no nursery, and takes a small limit as it
# is.)
#
# The error. The compiled code reports it at the program, `grow.l:`, with
# no line: so does the interpreter, with a `RunError` that renders without
# a line and a caret.

# %%
#| export interp
class HeapLimitError(RunError):
    """The program's live data filled the heap: reported at the program, not at a line, as the
    compiled code reports it."""

    def render(self) -> str:
        return f"{self.span.source.name}: {self.kind}: {self.message}"


# %% [markdown]
# The sizes. `free_variables` finds what a closure captures: the local
# variables and `var`s that a lambda's body uses and does not bind itself
# (a global is not captured: the compiled code reaches it at a fixed
# address).

# %%
#| export interp
def pattern_variables(p) -> set:
    match p:
        case PVar(name):
            return {name}
        case PTuple(items) | PCon(_, items):
            return set().union(*[pattern_variables(i) for i in items or []])
    return set()


def free_variables(e) -> set:
    """The local variables and vars that e reads or assigns without binding them."""
    match e:
        case Lit():
            return set()
        case Var(name, _, kind):
            return {name} if kind in ("local", "mutable") else set()
        case Con(_, items) | Tuple(items) | Print(items) | Prim(_, items):
            return set().union(*[free_variables(i) for i in items])
        case Lambda(param, body):
            return free_variables(body) - {param}
        case App(a, b) | While(a, b) | Seq(a, b):
            return free_variables(a) | free_variables(b)
        case If(cond, then, orelse):
            return free_variables(cond) | free_variables(then) | free_variables(orelse)
        case Match(scrutinee, clauses):
            return free_variables(scrutinee).union(
                *[free_variables(body) - pattern_variables(p) for p, body in clauses])
        case Let(name, value, body) | LetVar(name, value, body):
            return free_variables(value) | (free_variables(body) - {name})
        case Assign(target, value):
            return {target.name} | free_variables(value)
        case Assert(cond) | Raise(cond):
            return free_variables(cond)
        case Try(body, clauses):
            return free_variables(body).union(*[free_variables(b) - pattern_variables(p) for p, b in clauses])
    raise TypeError(f"not a core expression: {e!r}")


# %% [markdown]
# `adder(n)` of the closures drawn below, `{ n -> { x -> x + n } }` once
# desugared: the outer lambda captures nothing, the inner one `n`, so a
# closure that `adder` returns takes three words.

# %%
adder_lambda = resolve(desugar(parse(Source("adder.l", "def adder(n) = { x -> x + n }")))).items[0].value
print(sorted(free_variables(adder_lambda)), sorted(free_variables(adder_lambda.body)))

# %% [markdown]
# `live_words` adds up the words of the values reachable from a list of
# roots, with a stack of values still to look at, as `show_value` does. A
# value reachable by two paths — a tuple in two lists — must be counted
# once, and a structure shared at every level would otherwise be walked
# once per path, exponentially many; so the walk remembers what it has
# seen. Remembering every value would double the memory a large heap
# takes, but most values — each `Cons` of a list — are held by one
# reference only, and can be reached only once: `sys.getrefcount` says so.
# `ONE_HOLDER` is what it answers for a value held once, looked at the way
# the walk looks at it (the holder, the walk's variable, and the argument
# of `getrefcount`), measured rather than assumed. Closures, cells and
# environments, which are few and may form cycles, are always remembered.

# %%
#| export interp
def one_holder() -> int:
    """sys.getrefcount of a value that one tuple holds, popped from a list as live_words pops it."""
    holder, todo = (object(),), []
    pop, push_all, refcount = todo.pop, todo.extend, sys.getrefcount
    push_all(holder)
    v = pop()
    return refcount(v)


ONE_HOLDER = one_holder()


def live_words(roots) -> int:
    """The words that the L values reachable from roots take in chapter 10's layout."""
    words, seen, todo = 0, set(), list(roots)
    pop, push, push_all, refcount = todo.pop, todo.append, todo.extend, sys.getrefcount
    while todo:
        v = pop()
        t = type(v)
        if t is int:                                # the most common field: no words of its own
            continue
        if t is Data or t is tuple:
            items = v.fields if t is Data else v
            if not items:
                continue
            if refcount(v) > ONE_HOLDER:            # reachable by another path: look at it once
                if id(v) in seen:
                    continue
                seen.add(id(v))
            words += 1 + len(items)
            push_all(items)
        elif t is Closure or t is Cell or t is dict:
            if id(v) in seen:
                continue
            seen.add(id(v))
            if t is Closure:
                words += 2 + len(v.captures)
                push_all([v.env[name] for name in v.captures])
            elif t is Cell:
                words += 2
                push(v.value)
            else:                                   # an environment: the compiled code's registers
                push_all(v.values())
    return words


# %% [markdown]
# A list of three pairs, each the same tuple; a closure capturing a cell;
# and a structure shared at every level, `Pair(x, x)` sixty times over,
# which has 2⁶⁰ paths and sixty blocks:

# %%
pair = (1, 2)
three = Data("Cons", (pair, Data("Cons", (pair, Data("Cons", (pair, Data("Nil", ())))))))
cell = Cell(41)
adder = Closure("x", None, {"n": cell, "unused": three}, ("n",))
shared = Data("Nil", ())
for _ in range(60):
    shared = Data("Pair", (shared, shared))
print(live_words([three]), live_words([adder]), live_words([shared]))

# %% [markdown]
# The list: three `Cons` of three words and one tuple of three, 12. The
# closure: a header, its code and `n`, then the cell, two words: 5 — the
# list in its environment, which its body does not use, is not counted.
# The shared structure: sixty blocks of three words, 180.
#
# The roots. `roots` walks Python's frames from the allocation that ran out
# of room up to `execute`: the locals of each — environments, arguments,
# values just made — and the globals. Python makes a dictionary of a
# frame's locals when asked for them (`f_locals`); emptying it afterwards
# lets the values go when the frame is done with them.

# %%
#| export interp
class Interpreter(Interpreter):
    def allocated(self) -> int:
        """The words allocated so far, as chapter 10 lays values out."""
        return self.counted + self.granted - self.room

    def roots(self) -> list:
        """The values the running program can reach: the globals, and the locals of the Python
        frames of the program's calls in progress."""
        roots, frame, bottom = list(self.globals.values()), sys._getframe(1), Interpreter.execute.__code__
        while frame is not None and frame.f_code is not bottom:
            locals_ = frame.f_locals
            roots.extend(locals_.values())
            locals_.clear()
            frame = frame.f_back
        return roots

    def measure_heap(self) -> None:
        """The program has allocated the words it was granted at the last look: look again, and
        stop the program if its live data fill more than 15/16 of the heap."""
        limit, self.looks = self.heap_limit // 8, self.looks + 1
        live = live_words(self.roots())
        if live > limit - limit // 16:
            raise HeapLimitError(HEAP_LIMIT_MESSAGE, self.program_span)
        self.counted += self.granted - self.room
        self.granted = self.room = limit - live


# %% [markdown]
# `run` first translates every item — with the recursion limit of chapter
# 4a's parser, since the translation recurses on the program's nesting —
# then makes the closures of the function definitions (which the compiled
# code makes once, in its constant data: they are not counted), and hands
# the rest to `execute`, on the big stack, in the room of a big frame.

# %%
#| export interp
class Interpreter(Interpreter):
    def run(self, program: Program) -> None:
        """Run a resolved core program: function definitions first, then everything in order."""
        self.functions = {item.name.name: item.value.param for item in program.items
                          if type(item) is Def and item.is_function}
        if self.heap_limit is None:             # read when the program starts, as compiled code reads it
            self.heap_limit = read_heap_limit()
        self.room = self.granted = self.heap_limit // 8
        with recursion_limit(NESTING_LIMIT):                   # the translation recurses on nesting
            code = [(item, self.compile(item.value if type(item) is Def else item))
                    for item in program.items if not isinstance(item, syntax.Data)]
        for item, run in code:
            if type(item) is Def and item.is_function:
                self.globals[item.name.name] = run({})
        self.program_span, self.counted, self.room = program.span, 0, self.granted
        on_big_stack(in_frame_room, self.execute, code)


# %% [markdown]
# `execute` runs the items in order, under the raised recursion limit, and
# turns the two ways Python itself can run out — of frames, of memory — into
# runtime errors of the L program, at the last call it made (or, for
# memory, at its first item if it made none). Python runs out of memory
# before the heap limit only where the system sets a lower one (`ulimit
# -v`): Python then raises `MemoryError`, which becomes the runtime error
# "out of memory". The output is flushed whatever happens, so that what was
# printed before an error comes before the error.

# %%
#| export interp
def program_span(code: list) -> Span | None:
    """Where the program starts: its first item."""
    return code[0][0].span if code else None


class Interpreter(Interpreter):
    def execute(self, code: list) -> None:
        limit, out_of_memory = sys.getrecursionlimit(), False
        sys.setrecursionlimit(self.stack_limit)
        try:
            with collector_looks_every(YOUNG_OBJECTS):
                for item, run in code:
                    if type(item) is not Def:
                        run({})
                    elif not item.is_function:
                        self.globals[item.name.name] = run({})
        except RecursionError:
            raise RunError("stack overflow: the program nested calls too deeply", self.call_site) from None
        except MemoryError:                     # Python's heap is full: the program's fault, not lc's
            out_of_memory = True                # (reported below, once the program's values are freed)
        finally:
            self.tail_call.fn = self.tail_call.arg = None     # the last tail call keeps nothing alive
            sys.setrecursionlimit(limit)
            try:
                self.out.flush()
            except BrokenPipeError:
                self.out = Discard()
        if out_of_memory:
            raise RunError("out of memory", self.call_site or program_span(code))


# %% [markdown]
# A function definition's right-hand side is a lambda, and evaluating a
# lambda only makes a closure, so creating all of them first cannot run any
# code; their bodies read other globals only when called. That is how
# definitions "exist before anything runs".
#
# A deliberate weakness: `Assign` and `Var` trust `resolve` (a `mutable`
# variable holds a cell), and `Prim` trusts the type checker (the operands of
# `+` are integers). Until chapter 5 exists an ill-typed program can still
# reach the interpreter; it then stops with a runtime error rather than a
# Python exception, or — `1 + true`, since a Python `bool` is an `int` —
# computes something meaningless. The type checker closes that door.
#
# ## Running programs
#
# `run_source` is the whole front end in one call: parse, desugar, resolve,
# interpret. Here is the sugared program from above:

# %%
#| export interp
from lcompiler import pipeline
from lcompiler.core import desugar, pretty_core, resolve
from lcompiler.errors import CompileError, Source  # noqa: F811  (the module's own import)


def core_of(tree) -> Program:
    """Desugar and resolve a syntax tree: its core program, or a CompileError."""
    try:
        with recursion_limit(NESTING_LIMIT), collector_paused():
            return resolve(desugar(tree))
    except RecursionError:
        raise CompileError("the program is nested too deeply for this compiler", tree.span) from None


@pipeline.stage("core", show=lambda program, unit: pretty_core(program).rstrip("\n"),
                interpret=lambda program, unit, out: Interpreter(out).run(program))
def core_stage(tree, unit: pipeline.Unit) -> Program:
    return core_of(tree)


def check(source: Source) -> Program:
    """The front end alone: parse, desugar and resolve a program, through the pipeline's stages up
    to `core` — its core program, or a CompileError."""
    return pipeline.compile_to("core", source)[0]


def run_source(source: Source, out=None) -> None:
    """Run an L program with the reference interpreter; CompileError or RunError on failure."""
    Interpreter(out).run(check(source))


# %% [markdown]
# `core_of` desugars and resolves a tree, with Python's recursion limit
# raised to leave room for `NESTING_LIMIT` more frames, and a program nested
# too deeply even for that turned into a compile error rather than a crash.
# It is the pipeline's stage `core` (see [chapter 4](04_pipeline.ipynb)),
# whose interpreter is this chapter's: `check` is the front end alone,
# the stages `tokens`, `ast` and `core`, and `run_source` adds the
# interpreter. The sugared program from above, run:

# %%
run_source(sugared)

# %% [markdown]
# `let_demo(1)` runs first, since it is the first top-level statement, and
# it can call `let_demo`, which is a function defined below it.
#
# [The blog of the original L compiler](../bibliography.md#the-l-blog)
# shows a piece of that compiler's tests, an assertion in which `true` and
# `false` are rebound to functions; the book keeps it as `examples/seeds.l`,
# which later chapters compile. It runs here, and its assertion holds:

# %%
blog_program = Source("blog.l", """\
assert( { let true = { (x,y) -> x }
          let false = { (x,y) -> y }
          let pair = { (first,second) -> boolean -> boolean( first, second) }
          let first = { p -> p( true)}
          let second = { p -> p( false)}
          let p = pair( 7, 5)
          second( p) * (first( p) + second( p)) } == 60)
print("the sample program of the L blog: its assertion holds")
""")
run_source(blog_program)

# %% [markdown]
# The block rebinds `true` and `false` with `let`: they are values, not
# reserved words, so `resolve` lets a program shadow them, and inside the
# block they are the two local functions. `first(p)` is 7 and `second(p)` is
# 5, so the assertion computes 5 × (7 + 5) = 60 and holds.

# %% [markdown]
# ### What a function value is
#
# A function value is a `Closure`: the lambda's parameter, its body
# translated into a Python function, and the environment the lambda was
# evaluated in — the locals it can see, not a copy of the whole program.
# A `var` captured by two closures is one `Cell` in both environments, so
# what one closure assigns the other reads. To draw the values of a program
# we run it with an interpreter that remembers which core expression each
# piece of translated code came from:

# %%
from lcompiler.core import to_syntax
from lcompiler.interp import Cell, Closure, show_value


class Recording(Interpreter):
    """An interpreter that remembers the core expression each translated function came from."""

    def __init__(self, *args, **limits):
        super().__init__(*args, **limits)
        self.made_from = {}

    def compile(self, e, tail: bool = False):
        code = super().compile(e, tail)
        self.made_from[code] = e
        return code


closures = Source("closures.l", """\
def adder(n) = { x -> x + n }
def add5 = adder(5)
def counter(start) = {
  var count := start
  ({ by -> count := count + by }, { () -> count })
}
def tick_read = counter(0)
tick_read.{ (tick, _) -> { tick(2); tick(3) } }
print(add5(1), tick_read.{ (_, read) -> read() })
""")
recording = Recording()
recording.run(check(closures))

# %% [markdown]
# The program printed `6 5`: `add5(1)` is 6, and `read` saw the 5 that the two
# calls of `tick` added up. `Recording` overrides `compile` only; every other
# part of it is this chapter's interpreter.

# %% [markdown]
# The value of the global `add5`, drawn: a closure (green) with its
# parameter (yellow), the core of its code, and its environment (blue).

# %%
def value_box(v, cells: dict, arrows: list, name: str = "") -> Box:
    """A value as boxes; each Cell is drawn once, in cells, and reached by a dashed arrow."""
    if type(v) is Closure:
        code = pretty_expr(to_syntax(recording.made_from[v.body]))
        env = [value_box(x, cells, arrows, n) for n, x in v.env.items()]
        return Box(f"{name} = closure" if name else "closure",
                   [Box(f"parameter {v.param}", [], "yellow"), Box(f"code: {code}"),
                    Box("environment" if env else "environment: empty", env, "blue")], "green")
    if type(v) is Cell:
        cells.setdefault(id(v), v)
        arrows.append((f"holder {len(arrows)}", f"cell {id(v)}"))
        return Box(f"{name} = a cell", [], "red", name=f"holder {len(arrows) - 1}")
    if type(v) is tuple and v:
        return Box(f"{name} = ( , )" if name else "( , )", [value_box(x, cells, arrows) for x in v])
    return Box(f"{name} = {show_value(v, True)}")


def draw_global(name: str, alt: str) -> Picture:
    cells, arrows = {}, []
    panels = [(f"global {name}", [value_box(recording.globals[name], cells, arrows)])]
    if cells:
        panels.append(("", [Box(f"cell: {show_value(c.value, True)}", [], "red", name=f"cell {i}")
                            for i, c in cells.items()]))
    return Picture(panels, arrows=arrows, alt=alt)


draw_global("add5", alt="The value of the global add5: a closure with parameter x, code x + n, "
                        "and an environment where n = 5.")

# %% [markdown]
# Its environment holds `n`, the argument `adder` was called with, and
# nothing else. The two closures of `tick_read` share a cell (red), drawn
# once, with a dashed arrow from each environment that holds it:

# %%
draw_global("tick_read",
            alt="The value of the global tick_read: a tuple of two closures made by counter(0). "
                "The first has parameter by and code count := count + by; the second has "
                "parameter %1 and code match (%1) { () -> count }. Both environments hold "
                "start = 0 and count, a cell; dashed arrows from both lead to the one cell, "
                "which holds 5.")

# %% [markdown]
# `tick` added 2, then 3, and `read` sees 5: there is one cell, and both
# closures hold it. They also hold `start`, which neither uses: the
# environment is everything in scope where the lambda was evaluated. (The
# compiled code of [chapter 8](08_closure.ipynb) keeps only the variables a
# function uses; each `Closure` names them, in `captures`, for the heap's
# accounts.)

# %% [markdown]
# Runtime errors, each at its place in the source, after what was printed
# before it:

# %%
from lcompiler.errors import RunError
from lcompiler.interp import Interpreter, check


def run_text(name: str, text: str, **limits) -> None:
    try:
        Interpreter(**limits).run(check(Source(name, text)))
    except RunError as error:
        print(error.render())


run_text("div.l", "print(1)\ndef d(x) = 10 / x\nprint(d(0))")
run_text("match.l", "def f = {\n  0 -> \"zero\"\n  1 -> \"one\"\n}\nprint(f(2))")
run_text("assert.l", "assert(1 + 1 == 3)")
run_text("early.l", "def f() = limit + 1\ndef x = f()\ndef limit = 10")
run_text("deep.l", "def down(n) = 1 + down(n + 1)\nprint(down(0))", depth_limit=10_000)

# %% [markdown]
# (The last one ran with the limit on nested calls lowered from a million to
# ten thousand: the message and its place are the same, and it saves the
# seconds that reporting a runaway recursion takes at the full limit — not to
# find it, but because Python then unwinds the calls in progress one by one,
# building a traceback as it goes; it is measured below.) A recursion that
# does end runs however deep it goes, up to 2²⁰ calls — here a million —
# and a long list prints:

# %%
import io

run_text("deep_ok.l", "def count(n) = if (n == 0) 0 else 1 + count(n - 1)\nprint(count(1000000))")
out = io.StringIO()
Interpreter(out).run(check(Source("long.l", """\
data List<a> { Cons(a, List<a>); Nil }
def range(a, b) = if (a > b) Nil else Cons(a, range(a + 1, b))
print(range(1, 30000))
""")))
printed = out.getvalue()
print(f"{len(printed)} characters: {printed[:30]}…{printed[-30:]}", end="")

# %% [markdown]
# The count of a million nested calls prints `1000000`; the list of 30,000
# elements, nested 30,000 deep, prints as 378,898 characters, through
# `show_value`'s own stack of things to show.

# %% [markdown]
# The heap limit, lowered to 8 MiB for the example (the default would take
# the interpreter a while to fill, as measured below): a program that
# allocates without end stops, with the compiled code's message, at its
# file:

# %%
grow = """\
data List<a> { Cons(a, List<a>); Nil }
def grow(acc) = grow(Cons(1, acc))
print("growing")
print(grow(Nil))
"""
run_text("grow.l", grow, heap_limit=8 << 20)

# %% [markdown]
# And a program that allocates far more than the limit in all, but keeps
# little — a hundred lists of ten thousand elements, each measured and
# dropped — runs to its end under a limit of 4 MiB:

# %%
churn = Interpreter(heap_limit=4 << 20)
churn.run(check(Source("churn.l", """\
data List<a> { Cons(a, List<a>); Nil }
def build(n, acc) = if (n == 0) acc else build(n - 1, Cons(n, acc))
def length(l, k) = match (l) { Nil -> k; Cons(_, t) -> length(t, k + 1) }
def rounds(k, total) = if (k == 0) total else rounds(k - 1, total + length(build(10000, Nil), 0))
print(rounds(100, 0))
""")))
print(f"{churn.allocated():,} words allocated, {churn.allocated() * 8 / churn.heap_limit:.1f} times the limit; "
      f"the heap measured {churn.looks} times")

# %% [markdown]
# Three million words — a hundred lists of ten thousand `Cons` of three
# words — are 5.7 times the limit; each time the program had allocated what
# it was granted, `measure_heap` found one list alive, at most, and let it
# go on.

# %% [markdown]
# ### Measured: tail calls and deep calls
#
# A loop of a million iterations written as tail recursion runs in constant
# stack — here with Python's recursion limit lowered to 200 frames for the
# duration, which a non-tail recursion of that length would exceed five
# thousand times over. (The tests run the same loop, of a million
# iterations, under a limit of 300 frames.) The
# cell is a timing, so nbval does not compare its output.

# %% tags=["nbval-ignore-output"]
import io
import time

from lcompiler.interp import Interpreter, check

loop = Source("loop.l", """\
def loop(i, acc) = if (i == 0) acc else loop(i - 1, acc + i)
print(loop(1000000, 0))
""")
out = io.StringIO()
start = time.process_time()
Interpreter(out, stack_limit=200).run(check(loop))
elapsed = time.process_time() - start
print(out.getvalue().strip(), f"in {elapsed:.1f} s of CPU time, {elapsed / 1e6 * 1e6:.2f} µs per iteration")

# %% [markdown]
# The figure above is this machine's, the last time the notebook ran, and
# it moves with the load of the machine; whatever it is, this interpreter is
# a definition to compare with, not a way to run programs fast. It used to
# be slower still, which the benchmark below measures with more care.
#
# ### Measured: calls, before and after
#
# `bench/interp_speed.py calls` runs four loops — a tail-recursive count, a
# non-tail recursion ten thousand calls deep repeated, `fib` and calls
# through closures — each in a fresh process, under this interpreter and
# under the one of the commit before its calls were made faster, in
# alternation, and records the calls per second (CPU time, user and
# system) with the machine and both commits in `bench/interp_speed.json`.
# It also counts how many Python function calls one L call costs, with
# Python's profiler hook: a number that does not depend on the machine.

# %%
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, "../bench")
from machine import lines as machine_lines  # noqa: E402  (bench/machine.py: the machine, in a few lines)

MEASURED = json.loads(Path("../bench/interp_speed.json").read_text())


def measured_on(record: dict) -> str:
    m = record["machine"]
    return "\n".join([*machine_lines(m)[:2],
                      f"Python {m['python']}; before = {record['before']['commit'][:10]}, "
                      f"after = {record['after']['commit'][:10]}"])


calls = MEASURED["calls"]
print(measured_on(calls), f"({calls['command']})")
print(f"{'loop':32} {'L calls':>9} {'calls/s before':>15} {'after':>10} {'ratio (min-max)':>18} "
      f"{'Python calls per L call':>24}")
for name, r in calls["loops"].items():
    print(f"{name:32} {r['calls']:>9,} {r['before']['calls per second']:>15,.0f} {r['after']['calls per second']:>10,.0f}"
          f" {r['after/before']['median']:>6.2f} ({r['after/before']['min']:.2f}-{r['after/before']['max']:.2f})"
          f" {r['before']['python calls per call']:>12.1f} -> "
          f"{r['after']['python calls per call']:.1f}")

# %% [markdown]
# Every loop runs at about twice its former speed or more (the column
# `ratio`: the median of the ratios of runs made in pairs, before then
# after, with the smallest and the largest of them), and the last column
# says why: a turn of the count loop, `tail calls`, made 21 Python calls
# and makes 6. Most of the difference is the specialised code of the
# translation above:
#
# - a function of several parameters binds them in the environment its
#   call made, where the desugared `match` made a second environment and
#   called a matcher per variable;
# - a call that names a function definition finds it without a function
#   call, and the loop of tail calls lives in the code of the call, where a
#   separate `call` method added a frame to every call;
# - an operand that is a local variable or a number is read in place, and
#   an `if` on a comparison makes the comparison itself; the comparisons
#   and the arithmetic are C functions of the module `operator`, and the
#   result is wrapped to 64 bits only when it leaves them;
# - one `TailCall`, filled in, rather than a new one per tail call; and the
#   argument tuple of a call, `count(i + 1, n)`, built at once rather than
#   through a list.
#
# The non-tail recursion had one more reason to gain, which no
# count of calls shows: its frames now sit in the block of memory that
# `in_frame_room` reserves, where CPython used to ask the system for a new
# block of 16 KiB, and give it back, each time the recursion crossed from
# one block into the next, on the way down and on the way up.
#
# And non-tail calls, a million deep, as the design note above promised:
# how long they take and how much memory the process grows by (its peak
# resident size, before and after, as Linux reports it in
# `/proc/self/status`), in a fresh Python process; and how long a runaway
# recursion takes to be reported as a stack overflow — Python unwinds every
# call in progress, building a traceback as it goes. The recursion is
# `n - count(n - 1)` rather than `1 + count(n - 1)`, for the sake of the
# comparison that follows: LLVM's optimiser turns the second into a loop
# and, its argument being a constant, runs the loop itself — `lc show
# llvm-opt` has no `count` left, only the call that prints `1000000` — so
# the compiled code would not nest a single call.

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

from lcompiler.errors import RunError

deep_text = "def count(n) = if (n == 0) 0 else n - count(n - 1)\nprint(count(1000000))\n"
runaway_text = "def down(n) = n - down(n + 1)\nprint(down(0))\n"
measure = f"""
import io, re, time
from pathlib import Path
from lcompiler.errors import Source
from lcompiler.interp import Interpreter, check
peak = lambda: int(re.search(r"VmHWM:\\s*(\\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024
program = check(Source("deep.l", {deep_text!r}))
before, start = peak(), time.perf_counter()
Interpreter(io.StringIO()).run(program)
print(f"interpreted, a million nested calls: {{time.perf_counter() - start:.1f}} s, "
      f"peak memory {{before:.0f}} -> {{peak():.0f}} MB")
"""
print(subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True).stdout, end="")
start = time.perf_counter()
try:
    Interpreter(io.StringIO()).run(check(Source("runaway.l", runaway_text)))
except RunError as error:
    print(f"interpreted, runaway: {error.message}, reported after {time.perf_counter() - start:.1f} s")

# %% [markdown]
# The same two programs compiled into executables by
# [chapter 11](11_running.ipynb)'s `driver.build`, and run with their
# output discarded; the peak memory is the program's resident size as the
# kernel reports it for a finished child:

# %% tags=["nbval-ignore-output"]
import tempfile
from pathlib import Path

from lcompiler import driver

# run from a fresh, small Python process: a child of this notebook's kernel would count, in its
# peak, the kernel's own memory, which it shares until it starts the program
measure_native = """
import resource, subprocess, sys, time
start = time.perf_counter()
status = subprocess.run([sys.argv[1]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{time.perf_counter() - start:.3f} s, peak memory {peak:.0f} MB, exit status {status}")
"""
with tempfile.TemporaryDirectory() as tmp:
    for name, text in [("a million nested calls", deep_text), ("runaway", runaway_text)]:
        executable = str(Path(tmp, "program"))
        driver.build(Source("program.l", text), Path(executable))
        measured = subprocess.run([sys.executable, "-c", measure_native, executable], capture_output=True, text=True)
        print(f"compiled, {name}: {measured.stdout}", end="")

# %% [markdown]
# The better part of a gigabyte for a million nested calls interpreted,
# where the compiled code takes under twenty megabytes; and, in time, many
# times the compiled code's, both to run them and to report a runaway
# recursion, which the compiled code reports once it has filled its stack
# of 256 MiB. (The times above are this machine's, the last time the
# notebook ran, and move with its load.)
#
# ### Measured: the heap limit
#
# `bench/interp_speed.py heap` runs `grow.l`, the program above that
# allocates without end, under a heap limit of 64 MiB and under the
# default: with `lc run --interp`, and as an executable built by `lc build`,
# in alternation; and once with the interpreter of the commit before, which
# had no limit, stopped after a minute. For each, the CPU time of the
# process (user and system), its peak resident memory, its exit status and
# the last line it wrote on its standard error:

# %%
heap = MEASURED["heap"]
print(measured_on(heap), f"({heap['command']})")
for limit, record in heap["limits"].items():
    for side, r in record.items():
        run = r["runs"][-1]
        seconds = statistics.median(x["cpu"] for x in r["runs"])
        peak = statistics.median(x["peak_mb"] for x in r["runs"])
        end = f"status {run['status']}" if run["status"] is not None else f"still running after {run['stopped after']:.0f} s"
        print(f"{limit:>8} {side:19} {seconds:6.1f} s {peak:7,.0f} MB  {end}: {run['stderr'][:44] or '(nothing)'}")
    interpreted, compiled = record["interpreted"], record["compiled"]
    print(f"{limit:>8} interpreted/compiled: {interpreted['median cpu'] / compiled['median cpu']:.0f} times the time, "
          f"{interpreted['median peak_mb'] / compiled['median peak_mb']:.1f} times the memory")

# %% [markdown]
# Both ways stop `grow.l` with the same message and exit status, at either
# limit; the interpreter of before, which had no limit, had taken gigabytes
# after a minute and was still growing. Under the default limit (1 GB, or
# a quarter of the machine's memory if that is less) both
# take many times what they take under 64 MiB, and the interpreter much
# the longer: it has to make, one by one, the tens of millions of `Cons`
# that fill a heap of a gigabyte, each several times larger in Python's
# memory than in the compiled code's (the cell after the design note on
# the heap printed how much), at the interpreter's usual pace, which the
# lines `interpreted/compiled` compare with the compiled code's.
#
# ## Running programs from the shell
#
# `lc run --interp FILE.l` runs a program with this interpreter: it reads
# the file and calls `run_source` on it, or rather — since [chapter
# 5](05_types.ipynb) — type-checks it first and runs the core program
# checked. Plain `lc run` compiles to native code, once [chapter
# 11](11_running.ipynb) exists. Exit status 0 on success, 1 for a compile
# error, 2 for a runtime error, as [the reference
# says](../language.md#errors-and-exit-statuses). The command needs no code
# for errors, since `lc` itself catches a `CompileError` or a `RunError`
# that escapes, prints it and returns its exit status; it is in [appendix
# C](C_cli.ipynb#lc-run), with the rest of the command line.
#
# A program that prints, then divides by zero, run by `lc run --interp`,
# then shown by `lc show core`:

# %%
import contextlib
import tempfile
from pathlib import Path

from lcompiler.cli import lc

with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("fact.l").write_text("def fact = {\n  0 -> 1\n  n -> n * fact(n - 1)\n}\n"
                              "print(fact(20))\nprint(10 / 0)\n")
    print("exit status", lc("run", "--interp", "fact.l"))
    print("exit status", lc("show", "core", "fact.l"))

# %% [markdown]
# `lc run --interp` printed 20 factorial, then the runtime error at the `/`, and
# returned 2. `lc show core` printed the core without running it — so no
# division, and status 0; the `fact` of two clauses has become a lambda of
# `%1` and a `match`.

# %% [markdown]
# ## What the tests check
#
# `tests/test_corpus.py` runs the corpus `tests/corpus/` through this
# chapter: every program of `run/` prints exactly its `.out` file; every
# program of `fail/` prints its `.out` and then stops with a runtime error at
# the line and column its first line names; every program of `reject/` is
# a compile error at its line and column; every program of `types/`, whose
# mistakes are for chapter 5's type checker, passes this front end; every
# example of `examples/` prints what `tests/examples/` says. `lc` itself
# runs the first program of `run/`, of `fail/` and of `reject/`, and must
# end them with the exit statuses 0, 2 and 1 and the messages expected.
# The corpus was written by hand from the language's contract, with its
# expected outputs worked out independently of this interpreter.
# `tests/test_interp.py` adds:
#
# - division and remainder agree with LLVM's `sdiv` and `srem`, run natively
#   through chapter 1's JIT, on random 64-bit operands;
# - a million-iteration tail loop, and mutual tail recursion and tail
#   calls through closures a hundred thousand deep, run with Python's
#   recursion limit at three hundred frames;
# - a non-tail recursion a million calls deep runs; a list of 20,000
#   elements is built by non-tail recursion, and one of 30,000 printed;
#   an infinite recursion is a "stack overflow" runtime error at the
#   recursive call, whether the limit on calls or on Python frames stops it;
#   an interrupt stops a running program; a closed output is left alone;
#   running out of memory, under a limit set as `ulimit -v` would, is a
#   runtime error (the big frame of `in_frame_room` cannot be had then, and
#   the program runs without it);
# - a tail call costs at most six Python function calls, counted by
#   Python's profiler hook (it cost twenty-one);
# - `LC_HEAP_LIMIT` is read as chapter 10b's C reads it: the C functions
#   `env_size` and `default_heap_limit`, taken from the runtime's source
#   and compiled with a C compiler, are the oracle, on fixed and random
#   settings;
# - `live_words` counts random structures with random sharing as a plain
#   walk that remembers every value counts them, and counts a structure
#   with 2²⁰⁰ paths once per block (600 words), which only a walk that
#   remembers can finish; the words that the interpreter counts as
#   allocated equal, to the tenth of a megabyte, those that the compiled
#   code's collector reports (`LC_GC_STATS=1`, without chapter 9's
#   optimiser) for lists of numbers, of tuples, of closures, and of pairs of
#   closures that share a `var`'s cell;
# - a program that allocates without end stops under `lc run --interp`
#   with the standard error and exit status of the compiled program, under
#   `LC_HEAP_LIMIT=64M`; one that keeps 0.8 of the limit alive while it
#   allocates more than two and a half times the limit in all runs to its
#   end; one that keeps 1.1 times the limit alive in two lists, one of them
#   only in a local variable of a call in progress, is stopped;
# - arguments and operands are evaluated left to right;
# - ill-typed programs stop with the runtime error expected, at its place,
#   never with a Python exception;
# - `print` and `assert` cannot be bound, and the core has no sugar left.
#
# `tests/test_primitives.py` checks the table of primitives against the
# stages that read it: every row has a lowering in chapter 10 and nothing
# else has one; the operators chapter 4a's parser accepts are the table's
# symbols; each row's meaning agrees with its lowering, compiled and run
# natively, on random 64-bit operands and on the edges (the smallest and
# largest Int and their neighbours, and −2 to 2); and two primitives that
# the table does not have —
# `max`, without an operator, and `inverse`, of one operand, which fails on
# 0 — added as rows, with their lowerings, while the test runs, go through
# every stage: typed, checked, interpreted before and after each pass,
# printed and parsed back as CPS, folded or kept by the optimiser, and
# compiled and run, with their runtime error at its place, and nothing else
# in the compiler changed.
#
# `tests/test_exceptions.py` runs the corpus of exceptions,
# `tests/corpus/exceptions/` — raise and catch with and without a payload,
# nested `try`s, exceptions through closures and higher-order functions, a
# clause that raises again or raises another, the predefined exceptions
# caught, an exception escaping a recursion 100,000 calls deep, a million
# raises in a loop, a handler that retries a million times, evaluation
# order around a raise, `var`s seen by the clauses, and uncaught exceptions
# at their first raise — each with its exact output, error and exit status
# written by hand and checked against the interpreter (and against the
# compiled code, once chapters 6 to 10 compile exceptions). With small
# limits on nested calls it checks that a call in a clause is a tail call
# when the `try` is one and a call in a block never is, that a caught
# exception leaves `depth` as it was, and that running out of stack or of
# heap inside a `try` is not caught. Each of these fails if the line of
# `try_` it is about is changed.
#
# `tests/test_errors.py` holds the exact messages of the resolver, "did you
# mean" and the notes included, in golden files (`tests/errors/`, the
# mistakes with exceptions among them), and runs
# the programs that used to crash this interpreter — a 20,000-element list
# built by non-tail recursion, a 30,000-element list printed, a recursion a
# hundred thousand calls deep — interpreted and compiled, which must agree.
#
# ## Exercises
#
# 1. Add string concatenation `++` to L: which of the lexer, the parser, the
#    printer, the core and the interpreter change?
# 2. The translated code copies the environment dictionary at every `let`,
#    every call and every `match` clause that binds variables. Replace it
#    with a linked list of frames, or with a list whose slots `resolve`
#    numbers, and measure the loops of `bench/interp_speed.py` again.
# 3. Make the interpreter count the calls of each top-level function and
#    print a profile at the end.
# 4. The picture of `tick_read` shows that a closure's environment holds
#    everything in scope — `start` included, which neither closure uses.
#    Make `Lambda` capture only the variables its body uses (each
#    `Closure` names them already, in `captures`), draw `tick_read` again,
#    and find a program whose memory the change reduces. Why does a
#    million nested calls of `count` not show it?
# 5. Draw, with `node_tree`, the core of the sugared program above. Which
#    sugar makes the most boxes?
# 6. `measure_heap` follows every value the program can reach each time it
#    looks. Make it count, instead, only what was allocated since the last
#    look and is still alive, as a generational collector's minor
#    collection does: what does it need to know about the older values?
# 7. Add a primitive `min`, the smaller of two Ints, for which L has no
#    operator. What do you add, and where? L cannot write it, so try it on
#    the core of `print(3 + 4, 9 + -2)` with its two `+` renamed: print
#    that core, run it with this chapter's interpreter, then through the
#    rest of the pipeline and natively.
# 8. Add `try { … } finally { … }`, whose second block runs whether the
#    first finishes or raises (and then the exception goes on). Write it
#    first as sugar, with `try`, `catch` and `raise`. What does an uncaught
#    exception then report as its place, and how does the interpreter's
#    own `try_` avoid that?
# 9. `try_` puts `depth` back to what it was when the `try` began. Write a
#    program that a correct interpreter runs to its end and that stops with
#    a false stack overflow when that line is removed.
#
# <details><summary>Solutions</summary>
#
# 1. The lexer (`++` among its operators, before `+`, since the longest
#    operator is tried first) and the parser's table of binding powers
#    (`++` with `+`), which the printer reads too; and one row in the
#    table of primitives, `Primitive("++", "++", ("String", "String",
#    "String"), operator.add)`. Neither the core nor the interpreter
#    changes: the desugaring finds the row by its symbol and makes a
#    `Prim` of it, and the interpreter applies the row's operation,
#    Python's `+` on two strings. Until chapter 5's types rule out other
#    operands, that `+` would also add two Ints, and stop with the runtime
#    error "the operands of ++ have the wrong types" on an Int and a
#    String. The compiled code needs more: a lowering in chapter 10, which
#    `tests/test_primitives.py` asks of every row: here a call of a
#    runtime function, yet to be written, that allocates the new string.
# 2. The copies are `f.env.copy()` in `calling` (every call),
#    `{**env, name: …}` in `Let` and `LetVar`, and `env.copy()` for a
#    clause of `match` or `try` that binds. With slots numbered by
#    `resolve` — in each function body, its parameter, then the names its
#    lambda captures, then every `let`, `var` and pattern variable, each
#    its own index — a variable becomes an index, a call makes one list of
#    the body's size, and a `let` is a store into that list: no copy at
#    all, since no two names of a body share a slot. Making a closure
#    copies only the slots it captures, which a call of it puts at the
#    start of its new list (a `var`'s slot holds its `Cell`, so two
#    closures still share it). The loops get faster by what the copies
#    cost; `bench/interp_speed.py calls` measures it, alternating the two
#    versions so that the machine's load falls on both alike.
# 3. In `calling`, when `known` names a top-level function, count the call
#    in a dictionary of the interpreter (`self.calls[known] += 1`), and do
#    the same in `application`'s `tail_call_known` for a tail call that
#    names one (a loop of tail calls never passes through `calling` again);
#    at
#    the end of `run` print the counts, largest first, to standard error so
#    that the program's output is unchanged. Calls through a closure need
#    the closure to carry its function's name: `Lambda` knows where it was
#    defined.
# 4. Where the interpreter makes a `Closure`, give it the environment
#    `{name: env[name] for name in captures}` instead of `env` itself;
#    `start` then leaves the picture, and the environments hold `count`
#    alone. A million nested calls of `count` do not change: `count` is a
#    top-level function, whose closure has an empty environment already,
#    and each call's environment is that and the parameter. What changes
#    is what a closure keeps alive that its body never reads: with
#    `def keeper(n) = { let big = build(n, Nil); { x -> x + 1 } }` (`build`
#    makes a list of n elements) and `def f = keeper(100000)`, the closure
#    `f` held `big` and `n`, and Python's memory kept the list; now it
#    holds nothing, and `tracemalloc` shows the list's megabytes gone once
#    `keeper` has returned. The heap's accounts do not change: `live_words`
#    already follows only `captures`. `tests/test_solutions.py` runs both.
# 5. Counted definition by definition, syntax then core: `add` 7 and 11
#    boxes, `length` 15 and 15, `let_demo` 24 and 24, `twice` 12 and 9,
#    `sum_to` 26 and 24. A function of several parameters makes the most:
#    `add(a, b)` gains a `Lambda` of the fresh `%2`, a `Match`, the `Var %2`
#    it matches and the `PTuple (a, b)`, four boxes the syntax did not
#    have. A function of several clauses, `length`, comes out even: its
#    `Lambda`, `Match` and `Var %1` take the place of the syntax's
#    `Function` and two `Clause`s. So does `let_demo`: its `&&` becomes an
#    `If` and gains a `Lit false`, its `if` gains an `else ()`, its
#    parameter a `Lambda`, and its `let` becomes a `Match`, while its
#    `Block`, the box of `p` and the `Var print` go. `twice` and `sum_to`
#    shrink: a core `Lambda` or `LetVar` holds its name as a field, where
#    the syntax drew a box for it, and the core has no `Clause` or `Block`
#    boxes (though a statement with another after it becomes a `Seq`).
# 6. Which older values point to younger ones: a young value reachable only
#    through an old one is alive, and a minor look that follows only the
#    young would miss it. A generational collector keeps a *remembered set*,
#    filled by a *write barrier* on every assignment into an old value; in
#    L only a `var`'s cell can be assigned, so the barrier is one check in
#    `Assign`. The compiled code has both: chapter 10 calls the barrier,
#    `lc_barrier`, after a store of a pointer into a block, and chapter
#    10b's runtime keeps the remembered set (`lc_remember`).
# 7. A row in the table, and its lowering in chapter 10; no stage changes:
#
# ```python
# from lcompiler import driver, llvm_backend, pipeline
# from lcompiler.primitives import PRIMITIVES, Primitive
#
# PRIMITIVES["min"] = Primitive("min", None, ("Int", "Int", "Int"), min)
# llvm_backend.LOWERING["min"] = lambda backend, b, p, args: b.select(b.icmp_signed("<", *args), *args)
# ```
#
# `min` is Python's, which is right on 64-bit operands and needs no `wrap`;
# it cannot fail, and it is pure. Its lowering is a comparison and a
# `select`, the instruction that picks one of two values. Then the program:
#
# ```python
# source = Source("min.l", "print(3 + 4, 9 + -2)\n")
# program = check(source)
# for prim in program.items[0].args:
#     prim.op = "min"
# print(pretty_core(program), end="")      # print(min(3, 4), min(9, -2))
# Interpreter().run(program)               # 3 -2
# unit, value = pipeline.Unit(source), program
# for stage in pipeline.load()[3:10]:      # types, mono, cps, opt, closure, shrink, llvm
#     value = stage.run(value, unit)
# engine, main = driver.jit(driver.machine_code(value))
# print(driver.run_in_child(main).stdout)  # 3 -2
# ```
#
# Chapter 5 types `min` from its row; chapter 7 converts it into the CPS
# `v_3 = min(c_1, c_2)`; chapter 9 folds both, so that the stage `opt`
# hands on `v_1 = 3` and `v_2 = -2` and no `min` at all; and chapter 10
# would find its lowering in `LOWERING` for operands it does not know. To
# write `min` in L, give it a `symbol`, and teach chapter 4a's lexer the
# symbol and its parser a binding power: precedence is syntax, which the
# table leaves to the parser. `tests/test_primitives.py` does all this for `max`, and for a
# primitive that can fail; `tests/test_solutions.py` runs this solution.
#
# 8. As sugar: `{ let r = try { b } catch { e -> { f; raise(e) } }; f; r }`
#    (with `r` and `e` fresh), where `f` is the `finally` block. It runs `f`
#    once either way and passes the exception on, but the `raise(e)` in the
#    clause is a new raise: an exception that nothing catches is reported
#    at that `raise` — in the desugaring, at no place the programmer wrote —
#    instead of at its first raise. The interpreter's `try_` passes an
#    exception on by raising the *same* Python exception (`raise
#    exception`), which carries its first raise site; a `Finally` core node
#    whose translation runs `f` in a Python `finally:` keeps it the same way.
#    (In CPS, chapter 7's conversion does it with a jump to the outer
#    handler that records no raise site of its own.)
# 9. Raise from a few calls deep, many times, in a loop of tail calls:
#    with `exception Deep`,
#    `def down(n) = if (n == 0) raise(Deep) else 1 + down(n - 1)` and
#    `def many(i) = if (i == 0) 0 else { try { down(50) } catch { Deep -> 0
#    }; many(i - 1) }`, then `many(100000)`. Each raise leaves 51 calls,
#    `down(50)` down to `down(0)`, without their return; without the line,
#    `depth` grows by 51 each time and passes `DEPTH_LIMIT` (2²⁰) after
#    about 20,600 turns, a stack
#    overflow reported at a call that is not deep at all.
#    `tests/test_exceptions.py` runs it, for 1,000 turns, under a limit of
#    200 calls: without the line it stops with a stack overflow.
#
# </details>
