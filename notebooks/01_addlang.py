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

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** Python, and nothing from earlier chapters: this is the first.
# LLVM comes with the package llvmlite.
#
# **Builds:** the module `lcompiler.addlang` (the compiler of this chapter);
# `lcompiler.errors`, the error format of the whole book; the command `lc`
# with its first sub-command, `lc add`; and `lcompiler.drawing`, which draws
# the book's pictures.
#
# </div>
#
# This chapter re-tells, in Python, a short literate Idris post, *Writing an
# LLVM compiler using continuation passing* (seed 003 of this book; see the
# [bibliography](../bibliography.md)). Its language is tiny on purpose: the
# one idea it carries, that a compiler can take a **continuation** — "what to
# do next with the value you compute" — instead of returning a result, is the
# idea the whole book is built on, as it is the idea of Appel's *Compiling
# with Continuations*. The A-normal form of [chapter 3](03_anf.ipynb) and the
# conversion of L to CPS in [chapter 7](07_cps_convert.ipynb) are this
# chapter's `compile`, grown up.
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
# | `Box`, `Picture` | the book's drawings: trees of boxes, as SVG |
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
# examples, pictures, checks — stays in the book. The
# [preface](../preface.md#how-the-code-gets-from-the-notebooks-into-the-package)
# explains the mechanism.

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
# We choose what L itself will use ([the language reference](../language.md#arithmetic)):
# **signed 64-bit integers that wrap around** on overflow, so 2⁶³ − 1 + 1 is
# −2⁶³.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: one meaning, tested both ways</p>
#
# The seed's interpreter used Idris's `Int` while its LLVM used 32-bit `i32`
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
# the program can see it, and nowhere else. We add a fourth ending to the
# seed's three: `Ret`, which returns a value from a function, so the same
# compiler can produce functions as well as whole programs. (In the book's
# later chapters the chain grows into the CPS language of
# [chapter 6](06_cps.ipynb): `Add` becomes a `Let_prim`, the lambda a
# continuation, `Halt` the same `Halt`.)

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
# program is needed on two paths, and calling `k` twice would copy it;
# [chapter 3](03_anf.ipynb) is about what to do then (*join points*).
#
# ### A picture of the chain
#
# A program is now a chain of instructions, each holding the rest. The book
# draws such structures — chains, trees, forests — with a small module of its
# own, `lcompiler.drawing`, written here once and used by the later chapters.
# A `Box` has a label, the boxes below it, a colour, and a label for the edge
# that comes down to it:

# %%
#| export drawing
"""Pictures of the book's data: trees of labelled boxes, drawn as SVG."""

from dataclasses import dataclass, field
from html import escape

# fill and stroke of each style of box: the colours of chapter 6's diagrams
STYLES = {
    "plain": ("#f1f5f9", "#64748b"),
    "blue": ("#dbeafe", "#3b82f6"),
    "yellow": ("#fef9c3", "#ca8a04"),
    "green": ("#dcfce7", "#16a34a"),
    "red": ("#fee2e2", "#dc2626"),
}


@dataclass
class Box:
    """A node of a drawing: its label, the boxes below it, its style, and the label of
    the edge that comes down to it from its parent. A name lets an arrow point at it."""
    label: str
    children: list = field(default_factory=list)
    style: str = "plain"
    edge: str = ""
    name: str | None = None


# %% [markdown]
# A picture lays its trees out the classic way: a leaf takes the width of its
# label; a parent is centred over its children, whose subtrees sit side by
# side in bands that never overlap — a parent wider than its children makes
# its band wider, not its neighbours' boxes hidden. Every position is
# computed from the data, with no randomness, so the picture is the same on
# every run and the tests can compare it like any other output
# (`tests/test_drawing.py` checks the layout on random trees).

# %%
#| export drawing
CHAR_W, BOX_H, GAP, LEVEL = 7.2, 22, 14, 46     # pixels: a character, a box, between boxes, between levels


def _width(box: Box) -> float:
    return len(box.label) * CHAR_W + 14


def _layout(box: Box, left: float, depth: int, places: dict) -> float:
    """Place box and its subtree in a band of the picture that starts at x = left; return the
    band's width. places[id(box)] = (x of the box's centre, depth)."""
    w = _width(box)
    if not box.children:
        places[id(box)] = (left + w / 2, depth)
        return w
    x = 0.0                                        # the children's bands side by side, from 0
    for child in box.children:
        x += _layout(child, x, depth + 1, places) + GAP
    inner = x - GAP
    centre = (places[id(box.children[0])][0] + places[id(box.children[-1])][0]) / 2
    shift = max(0.0, w / 2 - centre)               # room on the left for a parent wider than them
    _move(box.children, left + shift, places)
    places[id(box)] = (left + shift + centre, depth)
    return max(inner + shift, shift + centre + w / 2)


def _move(boxes: list, dx: float, places: dict) -> None:
    """Move the boxes and everything below them dx to the right."""
    stack = list(boxes)
    while stack:
        box = stack.pop()
        x, depth = places[id(box)]
        places[id(box)] = (x + dx, depth)
        stack += box.children


# %% [markdown]
# `_draw` turns laid-out trees into SVG shapes: a rectangle and a label per
# box, a line per edge, under the boxes.

# %%
#| export drawing
def _draw(roots: list, places: dict, top: float, edges: str, shapes: list, named: dict) -> float:
    """SVG shapes for laid-out trees: a rectangle and a label per box, a line per edge (its
    arrow pointing "down" to the child, "up" to the parent, or "none"), the edge's label
    beside it. Records in named where the boxes with a name are; returns the lowest y."""
    bottom = 0
    stack = [(r, None) for r in roots]
    while stack:
        box, parent = stack.pop()
        cx, depth = places[id(box)]
        y = top + depth * LEVEL
        bottom = max(bottom, y + BOX_H)
        if box.name:
            named[box.name] = (cx + _width(box) / 2, y)     # arrows meet a box's right side
        fill, stroke = STYLES[box.style]
        w = _width(box)
        shapes.append(f'<rect x="{cx - w / 2:.1f}" y="{y}" width="{w:.1f}" height="{BOX_H}" rx="5" '
                      f'fill="{fill}" stroke="{stroke}"/>')
        shapes.append(f'<text x="{cx:.1f}" y="{y + 15}" text-anchor="middle">{escape(box.label)}</text>')
        if parent is not None:
            px, py = parent
            line = f'M{cx:.1f},{y} L{px:.1f},{py + BOX_H}' if edges == "up" else f'M{px:.1f},{py + BOX_H} L{cx:.1f},{y}'
            marker = '' if edges == "none" else ' marker-end="url(#arrow)"'
            shapes.insert(0, f'<path d="{line}" stroke="#475569" fill="none"{marker}/>')   # under the boxes
            if box.edge:
                shapes.append(f'<text x="{(px + cx) / 2 + 6:.1f}" y="{(py + BOX_H + y) / 2 + 4:.1f}" '
                              f'fill="#7c3aed">{escape(box.edge)}</text>')
        stack += [(c, (cx, y)) for c in reversed(box.children)]
    return bottom


# %% [markdown]
# A `Picture` holds panels of trees side by side, each with a caption, adds
# dashed arrows between named boxes, and becomes SVG text. Jupyter shows it
# as an image: `_repr_mimebundle_` gives the SVG, and a description in words,
# `alt`, as its plain-text form and as metadata, where the book's site finds
# it (for readers who do not see the picture).

# %%
#| export drawing
@dataclass
class Picture:
    """Panels of trees side by side, each with a caption; edges from parent to child
    (arrows "down", "up" towards the parent, or "none"); extra dashed arrows between
    named boxes. Shown in Jupyter as SVG, with alt, a description in words, for the site."""
    panels: list                   # [(caption, [root Box, ...]), ...]
    alt: str
    edges: str = "down"
    arrows: list = field(default_factory=list)   # [(name of the box it leaves, name of the box it reaches)]

    def svg(self) -> str:
        places, shapes, x0 = {}, [], 10
        named = {}
        height = 0
        for caption, roots in self.panels:
            x, top = x0, 34 if caption else 10
            for root in roots:
                x += _layout(root, x, 0, places) + 2 * GAP
            right = max(x - 2 * GAP, x0 + len(caption) * CHAR_W)
            if caption:
                shapes.append(f'<text x="{(x0 + right) / 2:.1f}" y="18" text-anchor="middle" '
                              f'font-weight="bold">{escape(caption)}</text>')
            height = max(height, _draw(roots, places, top, self.edges, shapes, named))
            x0 = right + 4 * GAP
        widest = 0
        for source, target in self.arrows:
            (x1, y1), (x2, y2) = named[source], named[target]
            bend = max(x1, x2) + 30 + abs(y1 - y2) / 5
            shapes.append(f'<path d="M{x1:.1f},{y1 + BOX_H / 2} C{bend:.1f},{y1 + BOX_H / 2} '
                          f'{bend:.1f},{y2 + BOX_H / 2} {x2 + 1:.1f},{y2 + BOX_H / 2}" stroke="#dc2626" '
                          f'stroke-dasharray="5,3" fill="none" marker-end="url(#arrow)"/>')
            widest = max(widest, bend)
        width, height = max(x0 - 4 * GAP, widest) + 10, height + 10
        return "\n".join(
            [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
             f'viewBox="0 0 {width:.0f} {height}" font-family="monospace" font-size="12" fill="#0f172a">',
             f'<title>{escape(self.alt)}</title>',
             '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
             '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>',
             f'<rect width="{width:.0f}" height="{height}" fill="#ffffff"/>', *shapes, '</svg>'])

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/svg+xml": self.svg(), "text/plain": self.alt}, {"alt": self.alt}


# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: why draw by hand</p>
#
# Graphviz draws graphs better than eighty lines of Python, but it is a
# program to install, its SVG changes with its version, and the book must
# build on a machine that has only Python. Matplotlib is installed, but a
# plot is a poor way to show boxes and arrows. Writing the SVG ourselves costs
# one page of code, keeps every picture deterministic (the tests compare the
# stored pictures with fresh ones, text for text) and lets a picture carry
# its description.
#
# </div>
#
# To draw a program we walk it as the printer below will: an `Add` is called
# with the name of its result, and its box gets a child, the rest of the
# program, on an edge labelled with that name; a `Print` holds the rest of
# the program directly, so its edge has no name.

# %%
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
# one exception the compiler raises for a mistake in its input;
# [chapter 4b](04b_meaning.ipynb) adds a second subclass for errors that
# happen while an L program runs, printed as `runtime error` instead of
# `error`, and [chapter 4a](04a_syntax.ipynb) builds L's front end on them.

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


# %% [markdown]
# A `Source` numbers its lines once, when it is made, so that finding the
# line and column of an offset is a binary search. A `Span` is a stretch of
# a source, and prints as the place it starts, `FILE:LINE:COL`:

# %%
#| export errors
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


# %% [markdown]
# A `Diagnostic` is an exception with a span. It knows how to show itself in
# the format above, and which exit status `lc` should stop with:

# %%
#| export errors
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
# in [chapter 4a](04a_syntax.ipynb) has the same concern at a larger scale.
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
# The command line is a small registry, in the module `lcompiler.cli`:
# `COMMANDS` maps each sub-command to its help text, its arguments and the
# function that runs it, and `ENVIRONMENT` lists the environment variables
# `lc` reads, for its help. A `UsageError` is a mistake in how `lc` was
# called rather than in a program: a file that cannot be read, say.

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


# %% [markdown]
# A sub-command is registered by decorating the function that runs it with
# `command`, which records its help and its arguments; each argument is
# written `arg(...)`, with exactly what `argparse`'s `add_argument` takes,
# so that the registry needs no parser until `lc` runs.

# %%
#| export cli
def arg(*names, **options) -> tuple:
    """One argument of a sub-command, as argparse's add_argument takes it."""
    return names, options


def command(name: str, help: str, *arguments: tuple) -> Callable:
    """Register `lc NAME`, run by the decorated function(args) -> exit status."""
    def register(run: Callable) -> Callable:
        COMMANDS[name] = (help, arguments, run)
        return run
    return register


# %%
print(arg("--llvm", action="store_true", help="print the LLVM module instead of running it"))


# %% [markdown]
# `argparse` exits with status 2 when the arguments are wrong, which for
# `lc` would mean a runtime error; our parser says 1, a usage error. And
# `lc --version` names the package's version and Python's.

# %%
#| export cli
class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):      # argparse's status is 2, a runtime error's for lc: use 1
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def version() -> str:
    try:
        return f"lc {metadata.version('lcompiler')} (Python {sys.version.split()[0]})"
    except metadata.PackageNotFoundError:
        return "lc (not installed)"


# %% [markdown]
# A program's output goes to standard output, which may be a pipe whose
# reader has gone (`lc run p.l | head -1`) or a full disk. `flush_output`
# flushes it at the end, or before an error message, so that what the
# program printed comes first; if it cannot, it sends the rest nowhere and
# says why — except for a closed pipe, which is no error of anyone's.

# %%
#| export cli
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


# %% [markdown]
# `main` builds the parser from the registry, with the environment
# variables that later chapters declare listed under `lc --help`, then runs
# the sub-command. Everything that can go wrong becomes a message and an
# exit status: a `Diagnostic` — a mistake in the L program, or a runtime
# error — is shown with its place and its own status (1 or 2); a
# `UsageError` or a failure of the system (a full disk, no C compiler) is
# `lc: error: …` with status 1; an interrupt is 130; and any other
# exception is a bug in `lc`, reported in one line as an internal compiler
# error with status 3, never as a traceback.

# %%
#| export cli
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


# %% [markdown]
# The first sub-command, `lc add`, compiles and runs an expression of this
# chapter. An expression with a variable in it has no value to print, so
# it is an error, at the variable.

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
#    the program is big? ([Chapter 3](03_anf.ipynb) answers.)
# 5. Draw the chain of `compile(x_y, Llvm.Ret)` with `chain` and `Picture`.
#    Which box has the most boxes below it, and why is it the first?
