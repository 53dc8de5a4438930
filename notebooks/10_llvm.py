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
# # Chapter 10. CPS to SSA: LLVM code and data
#
# Chapter 8 left us a CPS program whose functions are all closed and all at
# the top level. This chapter turns it into LLVM IR — the static single
# assignment (SSA) language that LLVM optimises and compiles to machine code
# — for the small C *runtime* of [chapter 10b](10b_runtime.ipynb) to run:
# the code calls it for printing, runtime errors, allocation when its
# inline allocator runs out of room, and the garbage collector, and the
# runtime catches a stack that overflows.
#
# [Chapter 10b](10b_runtime.ipynb) is the runtime, [chapter
# 11](11_running.ipynb) runs these modules, in the JIT and as native
# executables, and [chapter 12](12_measuring.ipynb) measures them.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 6](06_cps.ipynb), the CPS language; [chapter
# 8](08_closure.ipynb), closure conversion, after which every function is
# closed and at the top level; [chapter 9](09_shrink.ipynb), the optimiser
# that runs before this chapter; [chapter 5b](05b_mono.ipynb), the types
# without type variables that choose how values are laid out and printed;
# [chapter 1](01_addlang.ipynb), for loading LLVM text; [appendix
# B](B_support.ipynb), for LLVM's target machines and running compiled code
# in a child process.
#
# **Builds:** the module `lcompiler.llvm_backend` (the back end `Backend`,
# `to_llvm`, `optimise`, `call_site_table`, `RUNTIME_FUNCTIONS` — what the
# code calls in the runtime of [chapter 10b](10b_runtime.ipynb) —
# `FlowGraph`, which draws a function's control-flow graph, and `split`
# and `split_picture`, which draw the kinds of a program's functions and
# their calls), and the
# pipeline's stages `llvm`, `llvm-opt` and `asm`.
#
# </div>

# %%
#| default_exp llvm_backend

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.llvm_backend`:
#
# - `to_llvm(source)` compiles a well-typed L program to an LLVM module (an
#   `llvmlite.ir.Module`) that passes LLVM's verifier; `optimise(module)`
#   runs LLVM's O2 pipeline through llvmlite's pass builder and verifies the
#   result again;
# - the module's `main` runs the program on the runtime of chapter 10b: it
#   prints what chapter 4b's reference interpreter prints, and stops with the
#   same rendered runtime error and exit status 2 where the interpreter does;
# - every chain of calls in tail position runs in constant stack: a jump
#   back to the start of the function, a real tail call, or, into a
#   function whose chains of tail calls are short, an ordinary call that
#   adds at most one frame per function of the program (the section on
#   tail calls); with
#   the runtime's collector, which reads the layouts that this chapter
#   writes into every block, a program that allocates without end in a loop
#   runs in bounded memory; and with its signal handler, which reads the
#   table of call sites that this chapter makes, a recursion that exhausts
#   the stack is a runtime error, not a crash;
# - an exception raised and not caught stops the program with the report of
#   the reference interpreter, located at its first raise; one caught runs
#   the handler, with a flag tested after the calls that may raise (or
#   trap frames, with `LC_EXCEPTIONS=traps`); a program that catches
#   nothing compiles to the code it had before L had exceptions;
# - `lc show llvm FILE.l` prints the module as the back end makes it, `lc show
#   llvm-opt FILE.l` after LLVM's O2 pipeline, `lc show asm FILE.l` as assembly.

# %% [markdown]
# ## The mapping
#
# The l-lang compiler's [blog](../bibliography.md#the-l-blog), in its post
# "CPS to LLVM SSA conversion in literate programming" (one of the sources
# this book grew from: *the seed* of this chapter, below), translates its
# CPS to LLVM with a handful of rules, and the reason they are so few is
# that CPS and SSA are two notations for the same thing (Kelsey; Appel,
# *SSA is functional programming*): a continuation bound by `Let_cont` is
# a *basic block* (a straight run of instructions, entered only at its
# top), its parameters are the block's φ-nodes (a φ-node, `phi` in LLVM,
# sits at the top of a block and takes one value or another according to
# the block that control came from: the section on terms shows one at
# work), and a jump `Apply_cont k(x)` is a branch that feeds `x` to those
# φ-nodes. Our rules, for chapter 6's terms, in its printed form:
#
# | CPS | LLVM |
# |---|---|
# | a top-level `fun ret exn (x1, …, xn) { body }` | `define linkonce_odr tailcc i64 @f(i64 %x1, …, i64 %xn)` (or `fastcc`: see below) |
# | `v = prim` (`let_prim`) | one or a few instructions defining `%v` |
# | `cont k(y1, …) { handler }` (`let_cont`) | a basic block `k:` starting with one `phi` per parameter |
# | `k(a1, …)` (`apply_cont`), `k` a block | `br label %k`, adding `a1, …` to the φ-nodes |
# | `ret(a)`, `ret` the function's return continuation | `ret i64 %a` |
# | `call f(a…) -> ret / exn` (the function's own two continuations) | `%r = tail call tailcc i64 @f(…)` then `ret i64 %r` (`f` a `tailcc` function: the section on tail calls has the other cases) |
# | `call f(a…) -> k / exn` (any other return continuation) | `%r = call tailcc i64 @f(…)` (or `fastcc`) then `br label %k` with `%r` for its φ |
# | `case x { 0 -> k0; 1 -> k1; _ -> kd }` | `switch i64 %x, label %kd [i64 0, label %k0 …]` |
# | `halt(a)` | `ret i64 %a` from the definition's initialiser |
#
# A *direct* call names its LLVM function; a *closure* call loads the code
# pointer from field 0 of the closure and calls it with the closure as the
# first argument, as chapter 8 arranged.
#
# The exception continuations have no line in the table: `exn` is not a
# parameter of the LLVM function and a call passes nothing for it. In a
# program that catches nothing, every raise ends at `uncaught`, so a raise
# or a failing operation (`q = a / b @2:7 / exn`) reports at once, as
# before exceptions, with a test and a call of the runtime's error report
# (`lc_fail`): the machine code of such a program is what it was before
# the CPS had a second continuation. A program that catches gets a flag,
# tested after the calls that may raise, or trap frames: the section on
# exceptions, below.
# The second continuation also counts in the tail call, which must name
# the function's own `ret` *and* `exn` (a call in a `try` block names a
# local handler, so its frame must stay). A `case` without a default gets a
# default block holding LLVM's `unreachable`: the converter covers every tag,
# so that block is never reached, and saying so lets LLVM drop the test.
#
# ### The seed's example
#
# Its author explains the translation with one small CPS term, a loop that
# never ends:
#
# ```text
# let v = 3;
# let k(x) = k(2 + x);
# k(11)
# ```
#
# It translates the continuation `k` to a basic block whose parameter `x`
# is a φ-node, fed by the two jumps to `k`: the first, from the entry, with
# 11, and the one at the end of `k` itself, with `2 + x`. The closest L
# program is a function that calls itself in tail position for ever:
#
# ```text
# def k(x) = k(2 + x)
# k(11)
# ```
#
# Chapter 9's optimiser turns the function `k`, whose calls all return to
# the same place (its call to itself is a tail call), into a continuation
# — it *contifies* it — and gives the seed's term again, but for the dead
# `v = 3`. Here it is at each stage of its way to machine code: the CPS
# handed to the back end (`lc show shrink k.l`), the LLVM the back end makes
# of it (`lc show llvm`), the same after LLVM's O2 pipeline (`lc show
# llvm-opt`), and the x86 assembly LLVM makes of that (`lc show asm`), each
# cut down to the code of the program's one statement:

# %%
import re

from IPython.display import SVG, display

from lcompiler import cps, pipeline
from lcompiler.errors import Source


class Listings:
    """Texts side by side, each under its caption: an HTML table in Jupyter and on the site."""

    def __init__(self, *columns):
        self.columns = columns             # (caption, text)

    def _repr_html_(self):
        escape = lambda x: x.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        head = "".join(f"<th>{escape(caption)}</th>" for caption, _ in self.columns)
        cells = "".join(f'<td style="vertical-align: top; padding: 0 1em 0 0"><pre>{escape(text)}</pre></td>'
                        for _, text in self.columns)
        return f"<table><tr>{head}</tr><tr>{cells}</tr></table>"

    def __repr__(self):
        return "\n\n".join(f"{caption}:\n{text}" for caption, text in self.columns)


def llvm_function(text: str, name: str) -> str:
    """The definition of the LLVM function @name in a module's text, without metadata and comments."""
    start = re.search(rf'^define .*@"?{re.escape(name)}"?\(', text, re.M).start()
    body = text[start:text.index("\n}\n", start) + 2]
    return re.sub(r"(,? !(dbg|prof) !\d+|\s+;.*)", "", body)


def asm_function(text: str, name: str) -> str:
    """The instructions of the function name in assembly text, without directives."""
    body = text[text.index(f"\n{name}:\n") + 1:text.index(".Lfunc_end", text.index(f"\n{name}:\n"))]
    return "\n".join(line if not line.startswith("\t") else "  " + " ".join(line.split())
                     for line in body.splitlines() if not line.strip().startswith((".p2align", ".cfi")))


K = Source("k.l", "def k(x) = k(2 + x)\nk(11)\n")
k_llvm = llvm_function(pipeline.show("llvm", K), "init.statement.0")
k_optimised = llvm_function(pipeline.show("llvm-opt", K), "lc_program")
Listings(("CPS (lc show shrink)", pipeline.show("shrink", K)), ("LLVM (lc show llvm)", k_llvm),
         ("after O2 (lc show llvm-opt)", k_optimised),
         ("x86-64 (lc show asm)", asm_function(pipeline.show("asm", K), "lc_program")))

# %% [markdown]
# Read the first two columns against the seed's SSA. The continuation
# `k_2` is the block `k_2`. Its parameter `x_3` is the φ-node `%x_3`,
# which takes 11 when control comes from `entry` and `%.3` when it comes
# from `k_2` itself. The jump `k_2(v_5)` is `br label %k_2`. The constant
# `c_4 = 2` is no instruction at all: a constant in CPS is a constant
# operand in LLVM. After O2, nothing reads `x`, because the loop never ends
# and prints nothing. So LLVM deleted the addition and the φ-node, inlined
# the statement into `lc_program`, and kept a block that jumps to itself.
# The machine code is one instruction, `jmp` to itself.
#
# ### Control-flow graphs
#
# The blocks of a function and the branches between them form its
# *control-flow graph*, which is the shape that LLVM's optimisations work
# on. `FlowGraph` draws one from a function's LLVM text. Each block is a
# box around its instructions, and each branch is an arrow from the
# branch to the block it goes to. The entry block is blue, a block that
# returns is green, a block that ends in `unreachable` is red, and every
# other block is yellow. The description in words that comes with the
# picture is made from the same graph.

# %%
#| export
import re  # noqa: F811  (the cell imports what it uses, as a module would)
from dataclasses import dataclass
from html import escape as _escape

LABEL = re.compile(r'^"?([-\w.$]+)"?:')
SUCCESSOR = re.compile(r'\blabel %"?([-\w.$]+)"?')


@dataclass
class FlowGraph:
    """The control-flow graph of one LLVM function, from its text: shown as SVG in Jupyter,
    blocks as boxes around their instructions and branches as arrows, described in words."""
    text: str
    title: str = ""

    def blocks(self) -> list:
        """[(label, instructions, successors)] in the order of the text."""
        found = []
        for line in self.text.strip("\n").splitlines()[1:]:
            line = re.sub(r"\s+;.*$", "", line).rstrip()
            if line.strip() in ("", "{", "}"):
                continue
            if (m := LABEL.match(line)) is not None:
                found.append((m.group(1), [], []))
                continue
            if not found:
                found.append(("entry", [], []))
            found[-1][1].append(line.strip())
            for target in SUCCESSOR.findall(line):
                if target not in found[-1][2]:
                    found[-1][2].append(target)
        return found

    @property
    def alt(self) -> str:
        parts = []
        for label, code, successors in self.blocks():
            ends = code[-1].split()[0] if code else ""
            goes = ("returns" if ends == "ret" else "cannot be reached" if ends == "unreachable"
                    else "jumps to " + ", ".join(successors))
            parts.append(f"block {label}, {len(code)} instruction{'s' if len(code) != 1 else ''}, {goes}")
        return f"{self.title}: " + "; ".join(parts)

# %% [markdown]
# The drawing follows chapter 6's diagrams of CPS (`cps.diagram`): the
# text, boxes around its blocks, and the branches as arrows in a gutter on
# the right, one lane per arrow, on a white card with dark text, so that it
# reads the same in the site's dark mode.

# %%
#| export
class FlowGraph(FlowGraph):
    def svg(self, width_chars: int = 0) -> str:
        ch, lh, left = 7.2, 17, 8                       # character width, line height, margin
        rows, heads, ends = [], {}, []                  # text lines; block -> row of its label; branch rows
        for label, code, successors in self.blocks():
            if rows:
                rows.append(("", "gap"))              # a little room between two blocks
            heads[label] = len(rows)
            rows.append((label + ":", "label"))
            rows += [("  " + (line if len(line) <= 88 else line[:87] + "…"), "code") for line in code]
            ends.append((label, len(rows) - 1, successors, code[-1].split()[0] if code else ""))
        text_w = max([len(r) for r, _ in rows] + [width_chars])
        gutter = left + text_w * ch + 14
        edges = [(row, heads[s]) for _, row, successors, _ in ends for s in successors if s in heads]
        width, height = gutter + 14 * len(edges) + 20, lh * len(rows) + 14
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
               f'font-family="monospace" font-size="12" fill="#0f172a">',
               f"<title>{_escape(self.alt)}</title>",
               '<defs><marker id="cfg" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
               '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>',
               f'<rect width="{width:.0f}" height="{height}" fill="#ffffff"/>']
        colours = {"entry": ("#dbeafe", "#3b82f6"), "ret": ("#dcfce7", "#16a34a"),
                   "unreachable": ("#fee2e2", "#dc2626"), "other": ("#fef9c3", "#ca8a04")}
        for n, (label, last, _, ends_with) in enumerate(ends):
            kind = "entry" if n == 0 else ends_with if ends_with in ("ret", "unreachable") else "other"
            fill, stroke = colours[kind]
            top = heads[label] * lh + 4
            out.append(f'<rect x="{left - 4}" y="{top}" width="{gutter - left - 2:.1f}" '
                       f'height="{(last - heads[label] + 1) * lh + 2}" rx="5" fill="{fill}" stroke="{stroke}"/>')
        for i, (line, kind) in enumerate(rows):
            weight = ' font-weight="bold"' if kind == "label" else ""
            out.append(f'<text x="{left}" y="{i * lh + 17}" xml:space="preserve"{weight}>{_escape(line)}</text>')
        for lane, (source, target) in enumerate(edges):
            x, y1, y2 = gutter + 8 + 14 * lane, source * lh + 12, target * lh + 12
            out.append(f'<path d="M{gutter - 6:.1f},{y1} L{x:.1f},{y1} L{x:.1f},{y2} L{gutter - 4:.1f},{y2}" '
                       f'stroke="#7c3aed" fill="none" marker-end="url(#cfg)"/>')
        return "\n".join(out + ["</svg>"])

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/svg+xml": self.svg(), "text/plain": self.alt}, {"alt": self.alt}

# %% [markdown]
# The seed's loop, before and after O2. On the left, the back end's two
# blocks: `entry`, which jumps to `k_2`, and `k_2`, whose arrow goes back
# to itself, the loop of the seed. On the right, what is left after O2:
# the same two blocks, `k_2` renamed `k_2.i` by the inlining, and empty
# but for its branch to itself.

# %%
def flow_graphs(graphs: list, title: str) -> None:
    """Control-flow graphs side by side (chapter 6's cps.beside), described by title and by each graph."""
    alt = title + ". " + ". ".join(g.alt for g in graphs)
    display(SVG(cps.beside([(g.title, g.svg()) for g in graphs], alt)), metadata={"alt": alt})


flow_graphs([FlowGraph(k_llvm, "k.l: the back end's LLVM"), FlowGraph(k_optimised, "after O2")],
            "The control-flow graph of the seed's loop")

# %% [markdown]
# ### Tail calls are guaranteed, not hoped for
#
# The contract of L says every
# call in tail position runs in constant stack — direct, mutual, or through a
# closure whose code has a different number of parameters from the caller.
# A C compiler may or may not turn such calls into jumps. LLVM makes the
# promise for one *calling convention* (the rules by which a call passes
# its arguments and its result, and which registers it may overwrite),
# `tailcc`, which, its reference manual says, "ensures that calls in tail
# position will always be tail call optimized" (a call marked `tail`,
# followed by `ret`). On x86-64 a `tailcc` function pops its own
# arguments, so this holds even when caller and callee have different
# parameter lists. So the L functions that make tail calls are declared
# `tailcc`, calls to them use `tailcc`, and the calls in tail position carry
# the `tail` marker. (Which functions can do without, and what they get
# instead, is the subject of a section below.) The tests run ten million
# iterations of a mutual recursion and of a loop through a closure in a
# stack of 256 KiB.

# %% [markdown]
# ## Data: one word per value
#
# Every L value is one 64-bit word, an `i64`:
#
# - an `Int` is itself — unboxed, always, with the full 64 bits the contract
#   asks for (so nothing in a word says whether it is an integer or a
#   pointer: keep that in mind for the garbage collector);
# - a `Bool` is 0 or 1, the unit value `()` is 0;
# - a `String` is the address of a NUL-terminated constant (L builds no
#   strings at run time: they are all literals);
# - a tuple, a closure and a constructor with fields are the address of a
#   **heap block**:
#
# ```text
#   word 0: header = number of fields | tag << 24 | layout << 40 | flags   (bits 59-63)
#   word 1: field 0
#   …
#   word n: field n-1
# ```
#
#   The tag is the constructor's number in its `data` declaration (0 for a
#   tuple or a closure); `tag x` shifts the header right by 24 and keeps 16
#   bits. The *layout* has a bit per field (up to 19 fields) that says
#   whether the field may hold the address of a block: the words themselves
#   cannot say it (an `Int` uses all its 64 bits), but the compiler knows
#   the type of every field it stores, and the garbage collector needs to
#   know ([chapter 10b](10b_runtime.ipynb) explains why, and the flags). A
#   closure is a block whose field 0 is the address of its code.
# - A constructor without fields (`Nil`, `None`) is the address of one
#   constant block per tag, made once in the module: it has no fields to
#   fill, and L cannot tell two `Nil`s apart, so nothing needs allocating.
#   Since that address is the only one a `Nil` can have, a type of two
#   constructors, one of them without fields — `List`, `Option`, a tree
#   with a `Leaf` — needs no load to find a value's tag: it is `Nil`'s when
#   the word is `Nil`'s address, and the other constructor's otherwise.
#   Walking a list then reads only its fields, as C reads a linked list
#   that ends in `NULL`.
#
# One word for every value is the *uniform representation* of ML
# implementations: a polymorphic function such as `length` works on lists of
# anything because every element is a word. One part of the language must
# still know what a word means: `print`, which writes `3` for an `Int` and
# `Cons(1, Nil)` for a list. The back end finds out from the types, and it
# can because [chapter 5b](05b_mono.ipynb) has *monomorphised* the program:
# each polymorphic definition was copied once per type it is used at, so
# that every variable of the program has a type without type variables.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: addresses as integers</p>
#
# Every value is an `i64`, the address of a block too, and a field is read
# by turning the word into a pointer (`inttoptr`) and loading from it. That
# keeps the back end uniform — one type for every value, no conversions
# where functions, closures and constructors meet — but it tells LLVM less
# than it could use. A pointer made by `inttoptr` comes from nowhere LLVM
# can see, so its *alias analysis* — its reasoning about which addresses
# may name the same memory — cannot tell two blocks apart: a store
# into one (`x[i] := y` in the CPS, the only store the code makes into a
# block after filling it: the cell of a captured `var`, or a `ready` flag
# of chapter 7) makes LLVM read again any field it had read from any block before.
# Nothing says that the address can be read at all, either, so LLVM will
# not move a load above the test that guards it (a `match` reads a field
# only in the arm that needs it). LLVM has ways to be told more: values of
# pointer type (`ptr`, or a pointer in an address space of its own for a
# heap that a collector manages), `nonnull` and `dereferenceable(n)` on
# parameters and the metadata `!nonnull` and `!dereferenceable` on loads,
# `!invariant.load` on the loads of fields that are never written after
# the block is made (all but the cells of `var`s), and type-based alias
# analysis (`!tbaa`) to keep headers, fields and cells apart (the back end
# uses it for one distinction so far, the allocator's two words from
# everything else, for a reason of [its own](#the-heap-pointer-in-a-register)).
# What they would gain here has not been measured. They would remove
# loads that a store separates from an earlier load or store of the same
# field: LLVM already merges two loads with no store or call between
# them, and chapter 9, which does no common subexpressions, removes loads
# where it knows the block (it folds `P(20, 1)` of the program below
# away). Exercise 5 at the end of the chapter tries finer tags on that
# program.
#
# </div>
#
# What LLVM does not know shows in a small program, compiled without
# chapter 9's optimiser (which would have folded the pair away, both
# `match`es with it) and
# then by LLVM's O2 pipeline, which inlines `twice` and the closure into
# `main`. Printed below are the loads and stores of `main` other than the
# allocator's. The cell of `total` is written (its header, 1, and 0), then
# the block `P(20, 1)` (its header, 2, then 20 at `%.11`, and 1), then the
# closure's block (its header, its code, the cell). Then LLVM loads the 20
# back from `%.11`, the field it has just written. Two things lie between
# the store and the load: the closure's allocation, whose slow path calls
# the runtime, which may collect, and a collection does write into blocks
# (it updates the fields that point to blocks it moves); and the stores
# into the closure's block, which for all LLVM knows may be the same
# memory. It adds the 20 to `total`, stores the sum into the cell, and
# loads the 20 from `%.11` once more: this time only the store into the
# cell lies between, and LLVM cannot tell the cell from the field.

# %%
from lcompiler.llvm_backend import optimise, to_llvm   # the package's, defined below

ALIAS = """data Pair { P(Int, Int) }
def twice(p, f) = {
  let a = match (p) { P(x, _) -> x }
  f(a)
  let b = match (p) { P(x, _) -> x }
  a + b
}
def main() = {
  var total := 0
  let r = twice(P(20, 1), { x -> total := total + x })
  print(r, total)
}
main()
"""
alias_o2 = str(optimise(to_llvm(Source("alias.l", ALIAS), optimiser=False)))
alias_main = llvm_function(alias_o2, re.search(r"define .*@(main_\d+)\(", alias_o2).group(1))
print(*(line.strip() for line in alias_main.splitlines() if re.search(r"(load i64|store i64 .*), ptr %", line)),
      sep="\n")

# %% [markdown]
# Of the ways of telling LLVM more, two do not fit this back end as it
# is: `nonnull` and `dereferenceable` (and their metadata on loads) are
# said of values of pointer type, and LLVM's verifier refuses them on a
# word. Asked with a one-line function, as the back end would write it,
# then with a pointer:

# %%
import llvmlite.binding as llvm

for signature in ("i64 nonnull %x", "i64 dereferenceable(16) %x", "ptr nonnull dereferenceable(16) %x"):
    value = "%x" if signature.startswith("i64") else "0"
    try:
        llvm.parse_assembly(f"define i64 @f({signature}) {{\n  ret i64 {value}\n}}\n").verify()
        print(f"{signature}: accepted")
    except RuntimeError as error:
        print(f"{signature}: {str(error).strip().splitlines()[0]}")

# %% [markdown]
# So using them means giving the addresses of blocks a pointer type first,
# a change to every function of the back end. `!tbaa` and
# `!invariant.load` are said of the loads and stores instead, and can be
# added as the back end is — it already tags each load and store with one
# of two TBAA types, `allocator` or `word`; exercise 5 refines them on
# `ALIAS`.

# %%
#| export
import llvmlite.ir as ir

from lcompiler import cps, types  # noqa: F811  (the cell imports what it uses, as a module would)
from lcompiler.mono import field_type
from lcompiler.errors import RunError, Source
from lcompiler.types import TCon, show_type

# %% [markdown]
# ## The back end, from the top
#
# `Backend(program, datas, name)` translates one closure-converted CPS program
# into one LLVM module; `datas` gives each `data` type's constructors and
# field types, which the printers need. It starts by declaring what the code
# will call in the runtime ([chapter 10b](10b_runtime.ipynb)): the slow
# path of allocation and the allocation of wide blocks, the write
# barrier's `lc_remember` (the section on allocation says what a write
# barrier is), the printing functions, string equality and the
# two functions of a runtime error's report (`lc_fail_begin` starts a
# report that shows a value, `lc_fail` ends it and stops the program) — and the two
# words of the allocator that the code reads and bumps inline, `lc_hp` and
# `lc_hl`.
#
# The top-level definitions come in three kinds (chapter 6):
#
# - a static `fun` becomes an LLVM function, with the linkage
#   `linkonce_odr` (below) and the calling convention `tailcc` or `fastcc`
#   (a section of its own, below);
# - any other static value (a literal, or a tuple, closure or constructor of
#   static values) becomes an LLVM constant: a literal is its word, a block
#   is a global array of words laid out as above, made by the compiler — the
#   static closures of chapter 8 cost nothing at run time;
# - a dynamic definition (a term that must run) gets a slot in the global
#   array `lc_globals`, and its term becomes an initialiser function run in
#   program order. The collector treats `lc_globals` as roots.
#
# LLVM names come from the names that `lc show shrink` prints (chapter 6's
# `Namer`) for the CPS the back end is handed — `lc show closure` at
# `-O0`, where the last shrinking is left out — so the two listings can be
# read side by side: a function, a parameter, a continuation's block and
# its φ-nodes carry their CPS names (`k_2`, `%x_3`). The result of a
# primitive does not: llvmlite numbers it as it is made (`%.3` for `v_5`
# in the seed's loop above), and a constant is no instruction at all.
#
# First, the words. Everything is an `i64`; a heap block's header is
# computed by the compiler from the types of its fields (`header`), with
# the layout described above: a field of type `Int`, `Bool`, `Unit` or
# `String` never holds the address of a heap block (`may_point`), any
# other may — but not field 0 of a closure, its code. A block of more than
# 19 fields has no room for a layout: it is marked `CONSERVATIVE`, and the
# collector treats each of its fields as it treats the stack.

# %%
#| export
I64, I32, I8 = ir.IntType(64), ir.IntType(32), ir.IntType(8)
I8P, VOID = I8.as_pointer(), ir.VoidType()
WORD = 8                       # bytes per word
TAG_SHIFT, TAG_BITS = 24, 16   # a block's tag sits above its field count in the header
LAYOUT_SHIFT, LAYOUT_FIELDS = 40, 19     # then which fields may hold pointers: its layout
CONSERVATIVE, OLD, REMEMBERED = 1 << 59, 1 << 60, 1 << 61     # flags (the runtime's lc.h, chapter 10b)


def word(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def may_point(t) -> bool:
    """May a value of type t be the address of a heap block? Not an Int, Bool, Unit or String."""
    return not (type(t) is TCon and t.name in ("Int", "Bool", "Unit", "String"))


def header(types: list, tag: int = 0, old: bool = False, code: bool = False) -> int:
    """The first word of a heap block whose fields have these types: their number, the tag,
    the layout (if code, field 0 is a function's code: no pointer), and the flag OLD for a
    block made by the compiler. A block of more than LAYOUT_FIELDS fields has no layout: it is
    CONSERVATIVE, and old from the start."""
    if tag >> TAG_BITS or len(types) >> TAG_SHIFT:
        raise ValueError("a data type of more than 65,536 constructors, or a block of 2^24 fields or more:"
                         " the header of a block has no room for it")
    if len(types) > LAYOUT_FIELDS:
        return len(types) | tag << TAG_SHIFT | CONSERVATIVE | OLD
    pointers = sum(1 << LAYOUT_SHIFT + i for i, t in enumerate(types) if may_point(t) and not (code and i == 0))
    return len(types) | tag << TAG_SHIFT | pointers | (OLD if old else 0)

# %% [markdown]
# The header of a `Cons` of a `List<Int>`: two fields, tag 0, and bit 1 of
# the layout, bit 41 of the header, for field 1, the rest of the list (the worked example
# near the end of the chapter finds this number in the code):

# %%
header_of_cons = header([TCon("Int"), TCon("List", (TCon("Int"),))])
print(header_of_cons, "=", f"2 | 1 << 41 = {2 | 1 << 41}", "| fields:", header_of_cons & 0xFFFFFF,
      "| layout:", bin(header_of_cons >> LAYOUT_SHIFT))

# %% [markdown]
# The same word drawn, its four parts from bit 63 on the left to bit 0 on
# the right, each with its bits and its value in this header:

# %%
def header_picture(h: int, title: str) -> None:
    """The four parts of a header word h, as boxes as wide as their bits, with their values (an SVG)."""
    parts = [("flags", 59, 64, f"{h >> 59:05b}"), ("layout", LAYOUT_SHIFT, 59, bin(h >> LAYOUT_SHIFT & (1 << 19) - 1)),
             ("tag", TAG_SHIFT, LAYOUT_SHIFT, str(h >> TAG_SHIFT & (1 << TAG_BITS) - 1)),
             ("number of fields", 0, TAG_SHIFT, str(h & (1 << TAG_SHIFT) - 1))]
    bit, x = 9, 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{64 * bit + 20}" height="92" font-family="monospace"'
           f' font-size="12" fill="#0f172a"><title>{_escape(title)}</title>',
           f'<rect width="{64 * bit + 20}" height="92" fill="#ffffff"/>']
    said = []
    for name, low, high, value in parts:
        w = (high - low) * bit
        out += [f'<rect x="{x}" y="22" width="{w}" height="40" fill="#fef9c3" stroke="#ca8a04"/>',
                f'<text x="{x + w / 2}" y="38" text-anchor="middle" font-weight="bold">{name}</text>',
                f'<text x="{x + w / 2}" y="55" text-anchor="middle">{value}</text>',
                f'<text x="{x}" y="15">{high - 1}</text>', f'<text x="{x + w}" y="78" text-anchor="end">{low}</text>']
        said.append(f"{name}, bits {low} to {high - 1}, {value}")
        x += w
    alt = f"{title}: " + "; ".join(said)
    display(SVG("\n".join(out + ["</svg>"])), metadata={"alt": alt})


header_picture(header_of_cons, f"The header of a Cons of a List<Int>, {header_of_cons}, from bit 63 to bit 0")

# %% [markdown]
# The *linkage* of L functions is `linkonce_odr`. With `internal` linkage
# ("static" in C) LLVM could drop a function that nothing calls, but it
# would also inline nearly every function called once, large or small
# (its inliner gives the last call of a local function a bonus many times
# its usual threshold, since the function can then be deleted), and a
# chain of such calls grows into one huge function, on which the optimiser
# takes time that grows faster than its size. `linkonce_odr` functions may
# still be dropped when unused, and they are inlined on their merits.
# `RUNTIME_FUNCTIONS` lists what the generated code calls in the runtime,
# and `written` finds the static blocks that the program writes into.

# %%
#| export
LINKAGE = "linkonce_odr"            # not internal: see above

RUNTIME_FUNCTIONS = {                        # name: (result, parameters), all in the C runtime
    "lc_alloc_slow": (I64, [I64]),
    "lc_alloc_old": (I64, [I64]),
    "lc_remember": (VOID, [I64]),
    "lc_print_int": (VOID, [I64]),
    "lc_print_bool": (VOID, [I64]),
    "lc_print_unit": (VOID, [I64]),
    "lc_print_str": (VOID, [I64]),
    "lc_print_quoted": (VOID, [I64]),
    "lc_print_char": (VOID, [I64]),
    "lc_str_eq": (I64, [I64, I64]),
    "lc_fail_begin": (VOID, [I8P]),
    "lc_fail": (VOID, [I8P]),
}


def written(var) -> bool:
    """Is var the target of a `x[i] := y` somewhere?"""
    return any(type(o.enclosing) is cps.SetField and o is o.enclosing.target for o in cps.occurrences(var))

# %% [markdown]
# A `Backend` starts by declaring the runtime's functions and the two words
# of the allocator, `lc_hp` and `lc_hl`, then the compile unit that the
# locations of calls hang from (the section on call sites explains them),
# and names LLVM values as `lc show shrink` names CPS variables (those that
# llvmlite lets it name: see above).
#
# Those names are numbered in the order the printer meets the variables.
# `namer` numbers them in that order without printing: the printer meets
# the nodes in `walk`'s order, and at each node names what it binds, then
# what it uses, in the order of the node's fields. So the back end gets
# the printer's names without making a text of the whole program only to
# throw it away.

# %%
#| export
def namer(program: cps.Program) -> cps.Namer:
    """The names `lc show` gives the variables of program (chapter 6's `Namer`), without the text."""
    name = cps.Namer()
    for node in cps.walk(program):
        t = type(node)
        if t is cps.LetPrim:                     # most nodes: a binding, then its primitive
            name(node.var)
        elif t is cps.LetCont or t is cps.Lambda or t is cps.Definition:
            for x in node.bound():
                if x is not None:                # an unused definition binds nothing
                    name(x)
        elif t is cps.Case:                      # its arms are not a field of occurrences
            for o in node.occs():
                name(o.var)
        elif t is not cps.Program:
            for f in t.OCC_FIELDS:               # a field holds an occurrence, a list of them, or None
                v = getattr(node, f)
                if type(v) is list:
                    for o in v:
                        name(o.var)
                elif v is not None:
                    name(v.var)
    return name

# %%
#| export
class Backend:
    """Translate one closure-converted CPS program (chapter 8) into one LLVM module."""

    def __init__(self, program: cps.Program, datas: dict, source_name: str = "program"):
        self.program, self.datas, self.source_name = program, datas, source_name
        self.module = ir.Module(name=source_name)
        self.rt = {}
        for name, (result, params) in RUNTIME_FUNCTIONS.items():
            self.rt[name] = ir.Function(self.module, ir.FunctionType(result, params), name)
        self.rt["lc_fail"].attributes.add("noreturn")
        self.rt["lc_fail"].attributes.add("cold")
        for name in ("lc_hp", "lc_hl"):                # words owned by the runtime
            self.rt[name] = ir.GlobalVariable(self.module, I64, name)
            self.rt[name].storage_class = "dso_local"   # linked into the same executable: see lc_alloc
        self.strings, self.printers, self.call_sites = {}, {}, []
        self.debug_info()
        self.name = namer(program)               # LLVM names = the names `lc show shrink` prints
        self.declare()

# %% [markdown]
# `declare` makes the module's globals before any code: the array
# `lc_globals`, with a slot per dynamic definition; an LLVM function per
# `fun`, its parameters named and counted in words (a tuple parameter takes
# one word per component: the section on flattening explains why), its
# calling convention chosen by `short_tail_chains` (the section on tail
# calls); and the constants of the static values, in program order, since a
# static value may refer to an earlier one.

# %%
#| export
class Backend(Backend):
    def declare(self):
        self.functions, self.statics, self.slots = {}, {}, {}
        fast = short_tail_chains(self.program)
        dynamic = [d for d in self.program.definitions if d.body is not None and d.var is not None]
        self.catching = catches(self.program)          # the section on exceptions: two more roots
        self.lowering = lowering()
        self.traps = self.catching and self.lowering == "traps"
        self.raising = raising(self.program) if self.catching else set()
        size = len(dynamic) + (len(EXCEPTION_SLOTS) if self.catching else 0)
        self.globals = ir.GlobalVariable(self.module, ir.ArrayType(I64, max(1, size)), "lc_globals")
        self.globals.initializer = ir.Constant(self.globals.type.pointee, None)
        for i, d in enumerate(dynamic):
            self.slots[d.var] = i
        self.exception_slots = {name: len(dynamic) + i for i, name in enumerate(EXCEPTION_SLOTS)}
        self.site_records, self.trap_records = {}, {}
        for d in self.program.definitions:
            if type(d.value) is cps.Lambda:
                lam = d.value
                words = sum(arity(p) for p in lam.params)
                f = ir.Function(self.module, ir.FunctionType(I64, [I64] * words), self.name(d.var))
                f.linkage = LINKAGE
                f.calling_convention = "fastcc" if d.var in fast else "tailcc"
                self.subprogram(f, lam)
                if f.calling_convention == "fastcc" and not self.traps:    # traps: see exceptions
                    saves_no_registers(f)
                names = [self.name(p) + (f".{i}" if arity(p) > 1 else "")
                         for p in lam.params for i in range(arity(p))]
                for a, name in zip(f.args, names):
                    a.name = name
                self.functions[d.var] = f
        for d in self.program.definitions:      # in order: a static value refers to earlier ones
            if d.value is not None and type(d.value) is not cps.Lambda:
                self.statics[d.var] = self.static(d.var, d.value)

# %% [markdown]
# A static value is a constant: a literal is its word, `Nil` is the address
# of its one constant block, and a tuple, closure or constructor of static
# values is a global array of words — its header, flagged `OLD`, then its
# fields — made by the compiler. It is constant unless the program writes
# into it (chapter 7's `ready` cells are static and written). Strings are
# private constants, one per text; a dynamic definition's value is loaded
# from its slot.

# %%
#| export
class Backend(Backend):
    def static(self, var, p) -> ir.Constant:
        """The word of a static value: a literal, or the address of a block made by the compiler."""
        if type(p) is cps.Const:
            return self.const(p.value)
        if type(p) is cps.Inject and not p.fields:     # `def empty = Nil`: Nil's one block
            return self.nullary(p.tag)
        if type(p) in (cps.TupleValue, cps.MakeClosure, cps.Inject):
            tag = p.tag if type(p) is cps.Inject else 0
            fields = [self.constant_of(o.var) for o in p.fields]
            first = header([o.var.type for o in p.fields], tag, old=True, code=type(p) is cps.MakeClosure)
            g = ir.GlobalVariable(self.module, ir.ArrayType(I64, len(fields) + 1), self.name(var))
            g.initializer = ir.Constant(g.type.pointee, [word(first)] + fields)
            g.linkage = "internal"
            g.global_constant = not written(var)   # a static cell (chapter 7's `ready`) is written
            return g.ptrtoint(I64)
        raise TypeError(f"not a static value: {p!r}")

    def constant_of(self, var) -> ir.Constant:
        if var in self.functions:
            return self.functions[var].ptrtoint(I64)
        return self.statics[var]

    def const(self, value) -> ir.Constant:
        if type(value) is str:
            return self.string(value).ptrtoint(I64)
        return word(0 if value == () else int(value))

    def string(self, text: str) -> ir.GlobalVariable:
        if text not in self.strings:
            data = bytearray(text.encode()) + b"\0"
            g = ir.GlobalVariable(self.module, ir.ArrayType(I8, len(data)), f"str.{len(self.strings)}")
            g.initializer = ir.Constant(g.type.pointee, data)
            g.global_constant, g.linkage, g.unnamed_addr = True, "private", True
            self.strings[text] = g
        return self.strings[text]

    def cstring(self, b: ir.IRBuilder, text: str) -> ir.Value:
        return b.bitcast(self.string(text), I8P)

    def slot(self, b: ir.IRBuilder, var) -> ir.Value:
        return b.gep(self.globals, [ir.Constant(I32, 0), ir.Constant(I32, self.slots[var])])

# %% [markdown]
# ## Terms: blocks, φ-nodes, calls
#
# A function body is a chain of `let_prim`s and `let_cont`s ending in a jump.
# `body` walks the chain with a loop, emitting each primitive into the
# current block; at a `let_cont` it creates the continuation's block with its
# φ-nodes and puts the handler on a worklist, to be emitted into that block
# later (no recursion: a function may be deeply nested). A continuation that
# nothing jumps to gets no block at all — LLVM rejects a φ-node without
# incoming values, and the block would be dead anyway.
#
# A variable's value is its LLVM value if the function defined it (a
# parameter, a primitive's result, a φ-node), a load from its slot if it is
# a dynamic global, and a constant otherwise (a function or a static value).

# %%
#| export
class Backend(Backend):
    def body(self, f: ir.Function, term, values: dict, ret, params: list = (), me=None):
        """Translate term into the blocks of f; ret is f's return continuation (None: a definition).

        me is the variable naming f, if f calls itself in tail position: such calls become jumps
        back to a block `recur` whose phis stand for the parameters."""
        blocks = {}                                    # continuation -> (its block, its phis)
        start = f.append_basic_block("entry")
        if self.catching:                              # the section on exceptions: a trap record
            self.frame_trap(f, start, term)
        args = list(f.args)
        if me is not None:
            start, args = self.recur(f, start, args, blocks, me)
        self.parameters(params, args, values)
        self.here = (blocks, ret)                      # for a raise inside a primitive (exceptions)
        work = [(start, term)]
        while work:
            block, t = work.pop()
            self.chain(f, ir.IRBuilder(block), t, values, blocks, work, ret)
        if LOCAL_HEAP_POINTER:                         # the section on the heap pointer
            keep_heap_pointer(f, self.rt["lc_hp"], self.module.globals.get("lc_alloc"))
            tell_apart(f, self.allocator_words(), self.alias_tags())

    def chain(self, f: ir.Function, b: ir.IRBuilder, t, values: dict, blocks: dict, work: list, ret):
        """Emit a chain of let_prims and let_conts into b's block, up to and including its jump;
        each continuation gets its block, and its handler goes on work."""
        while True:
            if type(t) is cps.LetPrim and self.virtual(t.var, t.prim):
                values[t.var] = Fields([self.value(b, o, values) for o in t.prim.fields])
                t = t.body
            elif type(t) is cps.LetPrim:
                if self.debug is not None:             # lc build -g: see "Debug information"
                    self.debug.place(b, t)
                v = self.prim(b, t.prim, values)
                values[t.var] = v
                if t.var.count and not isinstance(v, ir.Constant) and not v.name:
                    v.name = self.name(t.var)
                t = t.body
            elif type(t) is cps.LetCont:
                if t.cont.count:                   # a continuation nobody jumps to has no block
                    handler = f.append_basic_block(self.name(t.cont))
                    hb = ir.IRBuilder(handler)
                    phis = [hb.phi(I64, self.name(x)) for x in t.params]
                    values.update(zip(t.params, phis))
                    blocks[t.cont] = (handler, phis)
                    work.append((handler, t.handler))
                t = t.body
            else:
                if self.debug is not None:
                    self.debug.place(b, t)
                self.jump(b, t, values, blocks, ret)
                return

    def value(self, b: ir.IRBuilder, o: cps.Occ, values: dict) -> ir.Value:
        v = o.var
        if v in values:
            if type(values[v]) is Fields:              # a flattened tuple needed whole: build it
                return self.alloc(b, values[v], v.type.args)
            return values[v]
        if v in self.slots:
            return b.load(self.slot(b, v), self.name(v))
        return self.constant_of(v)

# %% [markdown]
# A function that calls itself in tail position gets one more block: its
# parameters become φ-nodes of a block `recur` after the entry, and the
# self tail call is a jump back to it (the section on tail calls explains
# why). `recur` makes that block.
#
# For a reader new to SSA: `%x = phi i64 [a, %b1], [c, %b2]` at the top of
# a block means that `x` is `a` when control came from block `b1`, and `c`
# when it came from `b2`. `recur` gives each φ-node one incoming value, the
# function's own argument, from the entry block; each self tail call adds
# its own arguments later, through `goto`, which is how the loop's
# variables change from one iteration to the next.

# %%
#| export
class Backend(Backend):
    def recur(self, f: ir.Function, start, args: list, blocks: dict, me) -> tuple:
        """The block `recur` after start, with a phi per argument of f, jumped to by the calls of
        f to itself (me) in tail position: (the block, the phis, which stand for the arguments)."""
        recur = f.append_basic_block("recur")
        ir.IRBuilder(start).branch(recur)
        phis = [ir.IRBuilder(recur).phi(I64, a.name) for a in args]
        for phi, a in zip(phis, args):
            phi.add_incoming(a, start)
        blocks[me] = (recur, phis)
        return recur, list(phis)

# %% [markdown]
# The end of a chain is a jump, in one of four forms. A jump to a
# continuation `k(a…)` is a `ret` if `k` is the function's return
# continuation, and otherwise a branch to `k`'s block that adds `a…` to its
# φ-nodes (`goto`). A call, a `case` and a `halt` follow.
#
# `goto` labels each value it adds to a φ-node with `b.block`, the block
# that the branch leaves from: that is how the φ-node knows which value to
# take. `jump` chooses among the four forms, and raises `TypeError` on
# anything else, rather than emit nothing for a term it does not know.

# %%
#| export
class Backend(Backend):
    def goto(self, b: ir.IRBuilder, k, args: list, blocks: dict):
        block, phis = blocks[k]
        for phi, a in zip(phis, args):
            phi.add_incoming(a, b.block)
        b.branch(block)

    def jump(self, b: ir.IRBuilder, t, values: dict, blocks: dict, ret):
        if type(t) is cps.ApplyCont:
            args = [self.value(b, o, values) for o in t.args]
            if t.cont.var is ret:
                b.ret(args[0])
            elif t.raises or t.cont.var not in blocks:    # a raise, or to an exception continuation
                self.raise_to(b, t, args[0], t.cont.var, blocks, ret)
            else:
                self.goto(b, t.cont.var, args, blocks)
        elif type(t) is cps.Apply:
            self.call(b, t, values, blocks, ret)
        elif type(t) is cps.Case:
            self.case(b, t, values, blocks)
        elif type(t) is cps.Halt:
            b.ret(self.value(b, t.arg, values))
        else:
            raise TypeError(f"not a term: {t!r}")

# %% [markdown]
# A call passes its arguments in words (a tuple as its components). A
# direct call in tail position to the function itself is the jump back to
# `recur`. Otherwise the callee is the LLVM function of a direct call, or
# for a closure the code pointer loaded from field 0 of the closure, called
# with the closure as its first argument. A call in tail position is a
# `tail call` followed by `ret`; any other call is followed by a branch to
# its continuation's block, with the result for its φ-node. Each call gets
# its location (`locate`, in the section on call sites).

# %%
#| export
class Backend(Backend):
    def call(self, b: ir.IRBuilder, t: cps.Apply, values: dict, blocks: dict, ret):
        args = [w for o in t.args for w in self.words(b, o, values)]
        tail = t.cont.var is ret and t.exn.var is ret.binder.exn   # both continuations the function's own
        if t.kind == "direct" and tail and t.func.var in blocks:
            self.goto(b, t.func.var, args, blocks)  # a loop: jump back to the start
            return
        if t.kind == "direct":
            callee = self.functions[t.func.var]
        else:                                      # a closure: its code is its field 0
            record = self.value(b, t.func, values)
            code = b.load(self.field(b, record, 0), "code")
            fty = ir.FunctionType(I64, [I64] * (len(args) + 1))
            callee, args = b.inttoptr(code, fty.as_pointer()), [record] + args
        cc = callee.calling_convention if t.kind == "direct" else "tailcc"
        trap = self.push_trap(b, t, blocks) if self.catching and not tail else None   # exceptions: traps
        result = b.call(callee, args, cconv=cc, tail=tail and cc == "tailcc")
        self.locate(result, t.loc, site=not tail)
        if tail:
            b.ret(result)
            return
        if trap is not None:
            b.store(trap, self.trap_global())
        elif self.catching and not self.traps:     # the section on exceptions: test the flag
            self.test_flag(b, t, blocks, ret)
        if t.cont.var is ret:                      # returns to ret, raises to a handler: not a tail call
            b.ret(result)
        else:
            self.goto(b, t.cont.var, [result], blocks)

# %% [markdown]
# A `case` on a Bool — an `if` — is a conditional branch `br i1` on the
# comparison itself when the Bool was just computed by one (the `zext`
# that widened it to a word is then dead, and LLVM deletes it). Any other
# `case` is a `switch` on the tag. Without a default, the default is a
# block holding `unreachable`.

# %%
#| export
class Backend(Backend):
    def case(self, b: ir.IRBuilder, t: cps.Case, values: dict, blocks: dict):
        x = self.value(b, t.scrutinee, values)
        if sorted(n for n, _ in t.arms) == [0, 1] and t.default is None:
            if isinstance(x, ir.CastInstr) and x.opname == "zext":
                test = x.operands[0]                   # the i1 of a comparison, before widening
            else:
                test = b.icmp_unsigned("!=", x, word(0))
            arms = dict(t.arms)
            b.cbranch(test, blocks[arms[1].var][0], blocks[arms[0].var][0])
            return
        if t.default is not None:
            default = blocks[t.default.var][0]
        else:
            default = b.function.append_basic_block("impossible")
            ir.IRBuilder(default).unreachable()
        switch = b.switch(x, default)
        for n, k in t.arms:
            switch.add_case(word(n), blocks[k.var][0])

# %% [markdown]
# ## Tail calls: three kinds, three translations
#
# `tailcc` has a price. To pop its own arguments and keep the stack aligned
# for any caller, a `tailcc` function returns with `ret $8` and its caller
# re-adjusts the stack after every call (the `subq $8, %rsp` after the
# `callq` in the machine code of `f_code` further down) — a few
# instructions per call, which weigh on programs that do little but
# call, such as `fib` and Ackermann's function. So the back end pays it
# only where the guarantee needs it:
#
# 1. **a tail call of a function to itself** is a loop, and the back end
#    writes it as one: the function's parameters become φ-nodes of a block
#    `recur` after the entry, and the self tail call is a jump back to it —
#    guaranteed constant stack, at any optimisation level;
# 2. **a direct function from which every chain of tail calls is short**
#    gets LLVM's `fastcc` (arguments in registers, an ordinary return).
#    "Short" means: the function makes tail calls only to itself and to
#    direct functions that are short in the same sense, and no cycle of tail
#    calls passes through it — `fib`, which makes none, or `solutions` in
#    chapter 12's `nqueens`, which tail-calls `columns`, which only loops.
#    Calling such a function, even from a tail position, is an ordinary
#    `call` then `ret`: the caller's frame stays during the call, but the
#    chain of tail calls it starts visits each function at most once, so at
#    most one frame per function of the program is added, not one per
#    iteration;
# 3. **every other function** — every closure's code, each direct function
#    that tail-calls a closure, each one on a cycle of tail calls, like
#    `even` and `odd` calling each other, and each one that tail-calls one
#    of those — is `tailcc`, and its tail calls of closures and of `tailcc`
#    functions are `tail call tailcc` (one of a `fastcc` function is the
#    `call` then `ret` of the second kind): the loops that go through
#    closures or through mutual recursion run in constant stack.
#
# `short_tail_chains` finds the functions of the second kind with a
# depth-first search of the graph of direct tail calls, iterative (a
# program may chain thousands of functions): a function is short once all
# its successors are known to be short, and it is not if it reaches a
# closure call or a function still on the search path — a cycle.

# %%
#| export
def tail_calls(var, lam: cps.Lambda):
    """The calls in tail position (to lam's own return continuation) in lam, bound to var."""
    for node in cps.walk(lam.body):
        if type(node) is cps.Apply and node.cont.var is lam.cont and node.exn.var is lam.exn:
            yield node


def self_tail_calls(var, lam: cps.Lambda) -> bool:
    return any(a.kind == "direct" and a.func.var is var for a in tail_calls(var, lam))


def short_tail_chains(program: cps.Program) -> set:
    """The direct functions from which every chain of tail calls is finite: they can be fastcc."""
    successors = {}
    for d in program.definitions:
        if type(d.value) is cps.Lambda and d.value.kind == "direct":
            calls = list(tail_calls(d.var, d.value))
            if all(a.kind == "direct" for a in calls):     # a tail call of a closure: unknown
                successors[d.var] = {a.func.var for a in calls} - {d.var}
    short, state = set(), {}                      # state: "open" while on the search path, then "done"
    for root in successors:
        if root in state:
            continue
        state[root] = "open"
        stack = [(root, iter(successors[root]))]
        while stack:
            var, todo = stack[-1]
            nxt = next(todo, None)
            if nxt is None:                       # every successor examined
                stack.pop()
                state[var] = "done"
                if successors[var] <= short:
                    short.add(var)
            elif nxt in successors and nxt not in state:
                state[nxt] = "open"
                stack.append((nxt, iter(successors[nxt])))
            # a successor that is open (a cycle), done but not short, or not direct
            # keeps var out of `short`, since then successors[var] <= short fails
    return short

# %% [markdown]
# ### The split, drawn
#
# Which functions of a program fall into which kind is easiest to see on a
# picture of its calls. `split` reads it off the back end itself: the
# convention that `declare` gave each LLVM function (from
# `short_tail_chains`), whether the function got its loop block `recur`
# (`self_tail_calls`), and every call of the closure-converted program,
# in tail position or not by the rule that `call` applies (both
# continuations the caller's own). `split_picture` draws that: a box per
# function, green for `fastcc`, yellow for `tailcc`, blue for the
# initialisers (which are `tailcc`, and save no registers, as the section
# below explains); a solid grey arrow for a call that returns to its caller, a
# dashed red one for a tail call; an arrow from a box to itself for a
# function that calls itself. A call through a closure has no known
# target: its arrow goes to one box that stands for any closure's code.

# %%
#| export
from lcompiler.drawing import Box, Picture

UNKNOWN = "a closure's code"       # the target of a call through a closure, in `split`


def split(backend) -> tuple[list, list]:
    """The kinds of the functions of a back end's module, after compile(): ([(LLVM name, "fastcc" or
    "tailcc" or "initialiser", a loop?)], [(caller, callee or UNKNOWN, in tail position?)]), in
    program order; the calls are those of the closure-converted program, each pair once."""
    functions, calls = [], []
    for i, d in enumerate(backend.program.definitions):
        if type(d.value) is cps.Lambda:
            name, term, ret = backend.name(d.var), d.value.body, d.value.cont
            f = backend.functions[d.var]
            recur = any(block.name == "recur" for block in f.blocks)
            functions.append((name, f.calling_convention, recur))
        elif d.body is not None:
            name = "init." + (backend.name(d.var) if d.var is not None else f"statement.{i}")
            term, ret = d.body, None
            functions.append((name, "initialiser", False))
        else:
            continue
        for node in cps.walk(term):
            if type(node) is cps.Apply:
                callee = backend.name(node.func.var) if node.kind == "direct" else UNKNOWN
                tail = ret is not None and node.cont.var is ret and node.exn.var is ret.binder.exn
                if (name, callee, tail) not in calls:
                    calls.append((name, callee, tail))
    return functions, calls


def split_picture(backend, title: str) -> Picture:
    """The functions of a compiled back end as boxes coloured by kind, one below the other, with their
    calls as arrows: solid for a call that returns, dashed for a tail call (split gives the facts)."""
    functions, calls = split(backend)
    style = {"fastcc": "green", "tailcc": "yellow", "initialiser": "blue"}
    boxes = [Box(f"{name}: {'tailcc, an initialiser' if kind == 'initialiser' else kind}"
                 + (", a loop (recur)" if recur else ""), style=style[kind], name=name)
             for name, kind, recur in functions]
    if any(callee == UNKNOWN for _, callee, _ in calls):
        boxes.append(Box(f"{UNKNOWN}: tailcc, known only at run time", name=UNKNOWN))
    for upper, lower in zip(boxes, boxes[1:]):
        upper.children.append(lower)
    arrows = [(caller, callee, "dashed" if tail else "solid") for caller, callee, tail in calls]
    words = [f"{name} is {'an initialiser, tailcc' if kind == 'initialiser' else kind}"
             + (", with a loop for its self tail call" if recur else "") for name, kind, recur in functions]
    said = [f"{caller} {'tail-calls' if tail else 'calls'} {callee}" for caller, callee, tail in calls]
    alt = (f"{title}. The functions, one below the other: {'; '.join(words)}. Green is fastcc, yellow tailcc, "
           f"blue an initialiser. Solid arrows are calls that return, dashed arrows tail calls: {'; '.join(said)}.")
    return Picture([(title, boxes[:1])], alt=alt, edges="hidden", arrows=arrows)

# %% [markdown]
# The program drawn is small, and printed first; it is compiled without
# chapter 9's optimiser, which would inline or contify most of its
# functions (a function called once, or only with a known return, becomes a
# block of its caller) and leave little to draw. It has each kind:
# `fib`, `range` and `map` make no tail call and `sum` only one to itself
# (its loop), so all four are `fastcc`; `even` and `odd` tail-call each
# other, a cycle, and `apply` tail-calls a closure, so those three are
# `tailcc`. Each `{ x -> … }` here has no free variables, so chapter 8
# made it two functions: a direct function `f_…` holding the body,
# `fastcc` here since its chains of tail calls are short, and the code of
# its static closure, `f_entry_…`, called through the closure and so
# `tailcc`, which tail-calls `f_…`.

# %%
from lcompiler import llvm_backend      # the package: this notebook's Backend is not complete yet

SPLIT = """data List<a> { Cons(a, List<a>); Nil }
def fib(n) = if (n < 2) n else fib(n - 1) + fib(n - 2)
def even(n) = if (n == 0) true else odd(n - 1)
def odd(n) = if (n == 0) false else even(n - 1)
def range(i, n) = if (i == n) Nil else Cons(i, range(i + 1, n))
def sum(l, s) = match (l) { Nil -> s; Cons(x, rest) -> sum(rest, s + x) }
def map(f, l) = match (l) { Nil -> Nil; Cons(x, rest) -> Cons(f(x), map(f, rest)) }
def apply(f, x) = f(x)
print(sum(map({ x -> fib(x) }, range(0, 20)), 0), even(1001), apply({ x -> x + 1 }, 41))
"""
print(SPLIT)
closed, unit = pipeline.compile_to("shrink", Source("split.l", SPLIT), False)   # -O0: no shrink, up to closure
split_backend = llvm_backend.Backend(closed, unit.datas, "split.l")
split_backend.compile()
llvm_backend.split_picture(split_backend, "split.l: the functions of the back end, by kind, and their calls")

# %% [markdown]
# ### Registers and the conservative collector
#
# One more attribute, on the `fastcc` functions, and the reason for it is
# the garbage collector of the runtime ([chapter 10b](10b_runtime.ipynb)),
# which finds the heap blocks that the stack refers to by scanning the
# stack *conservatively*:
# every word on it that looks like a pointer keeps a block alive. That
# collector is *generational*: new blocks are made in a small region, the
# *nursery*, and a *minor collection* copies the few that survive out of
# it. A young block that a word of the stack points into is not copied —
# the word may be an `Int` that only looks like an address, and cannot be
# updated — but *pinned*: it stays where it is, and becomes old there.
# Normally a function saves, in its own
# stack frame, the *callee-saved* registers it wants to use, holding
# whatever its caller had left in them — often a value the caller no
# longer needs. `primes`, one of the benchmark programs of chapter 12
# (`bench/programs/primes.l`), shows where that leads: the recursive
# `sieve` leaves its dead input list in a callee-saved register, each
# deeper call saves it again, and the collector takes every one of those
# words for a live pointer (the table below counts the blocks they pin).
# LLVM's function attribute `"no_callee_saved_registers"` turns the
# convention around: the function saves no register for its caller, so a
# caller keeps what it needs across a call in its *own* frame, and only
# that.
#
# The attribute goes on the `fastcc` functions and the initialisers, which
# are only ever called directly, and not on the `tailcc` ones, which
# include the code of every closure, called through a pointer. LLVM
# honours the attribute at a call only where it can see it, on the
# function called: a direct call of a marked function counts every
# register as overwritten, but a call through a closure does not know
# which function it calls, and counts on the callee to keep `rbx`, `rbp`
# and `r12`–`r15`, as the calling convention promises. A closure's code
# marked `no_callee_saved_registers` breaks that promise (an experiment
# below shows what follows). Deep non-tail recursion, where stale
# registers pile up, is mostly in `fastcc` functions anyway (a function
# is `tailcc` only if it is a closure's code or its tail calls lead to a
# closure or round a cycle): `primes`'s `sieve` is one.
#
# Does it still pay with the generational collector of chapter 10b, where
# a stale pointer pins one young block (and keeps alive what that block
# points to)? And what does it cost the calls? The script
# `bench/calls.py` builds seven of the benchmark programs that chapter 12
# measures (its `bench/programs/`), each with and without the attribute,
# and runs the two in alternation (`python bench/calls.py --json
# bench/calls.json`: seven runs each, user and system CPU time). Its
# figures, read from the file, which records the machine they were taken
# on, with the collector's own statistics (`LC_GC_STATS`):

# %%
import json
import sys
from pathlib import Path

sys.path.insert(0, "../bench")
from machine import lines as machine_lines   # noqa: E402  (bench/machine.py: the machine, in a few lines)

calls = json.loads(Path("../bench/calls.json").read_text())
print("\n".join(machine_lines(calls["fib"]["machine"])))
print(f"{'benchmark':10} {'with s':>7} {'without s':>9} {'without/with':>13} {'its range':>14} {'pinned with':>12}"
      f" {'without':>8} {'heap MB with':>13} {'without':>8}")
for name, r in calls.items():
    w, wo, ratio = r["with"], r["without"], r["ratio"]
    print(f"{name:10} {w['median']:7.3f} {wo['median']:9.3f} {ratio['median']:13.3f}"
          f" {'[' + format(ratio['min'], '.3f') + ', ' + format(ratio['max'], '.3f') + ']':>14} {w['pinned']:12,}"
          f" {wo['pinned']:8,} {w['max_heap_mb']:13.1f} {wo['max_heap_mb']:8.1f}")
others = [r["ratio"]["median"] for n, r in calls.items() if n != "primes"]
print(f"without/with, the six others: from {min(others):.3f} to {max(others):.3f}")
for verdict, test in (("slower with the attribute in every pair", lambda r: r["max"] < 1),
                      ("faster with it in every pair", lambda r: r["min"] > 1)):
    print(f"{verdict}: {', '.join(n for n, r in calls.items() if test(r['ratio'])) or 'none'}")
for name in ("primes", "fold"):
    w, wo = calls[name]["with"], calls[name]["without"]
    print(f"{name} without the attribute: {wo['pinned'] / w['pinned']:,.1f} times the pinned blocks,"
          f" {wo['max_heap_mb'] / w['max_heap_mb']:.1f} times the heap, {calls[name]['ratio']['median']:.2f} times the time")

# %% [markdown]
# The range beside each ratio is that of its seven paired runs, and the
# lines under the table read the table. In this measurement the attribute
# costs the calls nothing: no program is slower with it in every pair,
# the medians of the six programs other than `primes` lie in the range of
# the first line under the table (the highest is `ack`'s), and the
# programs of the third line are faster with it in every pair. On `primes`, without it, stale pointers
# in saved registers pin hundreds of times as many blocks, and what those
# blocks point to is kept with them: the heap is larger and the program
# slower, by the factors of the next line. `fold`'s heap is larger without
# it too, with about as many pinned blocks (the last line). It stays.

# %%
#| export
def saves_no_registers(f: ir.Function) -> None:
    """Mark f "no_callee_saved_registers" (llvmlite checks named attributes only: add it raw)."""
    set.add(f.attributes, '"no_callee_saved_registers"')

# %% [markdown]
# The experiment: the `fold` benchmark of chapter 12, which loops through
# composed closures, compiled without chapter 9's optimiser, as the back
# end marks its functions and with every `tailcc` function marked too; run
# (in a child process, as in chapter 1), then the machine code of the
# second:

# %%
import ctypes
import os

import llvmlite.binding as llvm

from lcompiler.llvm_backend import call_site_table, optimise, to_llvm   # defined below
from lcompiler.runtime import runtime_library                            # chapter 10b
from lcompiler.support import run_in_child, target_machine              # appendix B

FOLD = Source("fold.l", Path("../bench/programs/fold.l").read_text())


def fold_module(all_marked: bool):
    """fold without chapter 9's optimiser, optimised by LLVM, with its tailcc functions marked too or not."""
    module = to_llvm(FOLD, optimiser=False)
    for f in module.functions:
        if all_marked and f.calling_convention == "tailcc" and f.blocks:
            saves_no_registers(f)
    return optimise(module)


llvm.load_library_permanently(str(runtime_library("shared")))
for all_marked, stack in ((False, "256K"), (True, "64M")):
    module = call_site_table(fold_module(all_marked))
    engine = llvm.create_mcjit_compiler(module, target_machine())
    engine.finalize_object()
    fold_main = ctypes.CFUNCTYPE(ctypes.c_int)(engine.get_function_address("main"))
    os.environ["LC_STACK_SIZE"] = stack
    run = run_in_child(lambda: (os.dup2(1, 2), fold_main())[1])     # its stderr with its output  # noqa: B023  (called in this iteration)
    print(f"{'every function marked' if all_marked else 'as the back end marks them'}, LC_STACK_SIZE={stack}: {run}")
del os.environ["LC_STACK_SIZE"]
assembly = target_machine(executable=True).emit_assembly(call_site_table(fold_module(True)))
for name, keep in (("map", "rbx|call"), ("f_code", "")):
    label, body = re.search(rf"\n({name}_\d+):\n(.*?)\.Lfunc_end", assembly, re.S).groups()
    print(label + ":", *(line for line in body.splitlines() if re.search(keep or r"^\t[a-z]", line)), sep="\n")

# %% [markdown]
# Marked as the back end marks them, the program runs in a stack of 256
# KiB; with every function marked, it runs out of one of 64 MiB. The
# machine code says why. `map` keeps the rest of its list in `rbx` during
# the call `f(x)`, a call through a closure, and passes it to its own
# recursive call. `f` is the closure that `compose` made, whose code,
# marked, puts its own `f` in `rbx` without saving the caller's value
# first (its `push` only aligns the stack). So `map`, when `f(x)` returns,
# finds in `rbx` not the rest of its list but `compose`'s `f`, an `adder`
# closure, and recurses on it as if it were the rest of the list; there
# the call `f(x)` puts the same closure in `rbx` again, and so on, level
# after level, until the stack runs out, whatever its size. The same
# promise would be broken by a tail call from an unmarked function to a
# marked one: the callee returns straight to its caller's caller, which
# counts on registers the callee did not keep.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: LLVM's optimisations and a conservative stack</p>
#
# A collector that scans the stack conservatively trusts that every block
# the program still uses is pointed to by some word of the stack or of a
# register — not necessarily at its start. LLVM promises nothing of the
# kind: after its optimisations a function may keep, in place of a block's
# address `x`, only `x + 16`, the address of the one field it still reads,
# or a pointer that a loop advances from one element to the next (*strength
# reduction*), and in principle one that points *outside* the block,
# before its header or past its last field. It is an old problem of
# conservative collectors under optimising compilers: Boehm's "Simple
# garbage-collector-safety" (1996) describes it for C, and the compiler
# changes that would prevent it.
#
# What this runtime does with each kind of derived pointer, read from its
# code (chapter 10b):
#
# - A pointer *into* a block is safe. Both phases that read the stack
#   look for the block *around* an address, not only at one: `pin`, in a
#   minor collection, and `mark_value`, in a major one, both start with
#   `find_block`, which walks from the nearest recorded block start below
#   the address. The block is pinned or marked as if the word pointed at
#   its header, and a pinned block does not move, so `x + 16` stays right;
#   old blocks never move at all. LLVM does make such pointers: the cell
#   after this note finds them in the machine code of `rbtree`, one of
#   chapter 12's benchmark programs, where a loop that walks down the tree
#   adds a field's offset to a node's address, and loads through the sum.
# - A pointer *outside* its block is not safe. It would pin or mark
#   whatever lies there — a neighbour, a filler, nothing — and the block
#   itself, if no other word points to it, would not survive: copied
#   elsewhere if a field of another survivor points to it, freed if none
#   does, and the program would then read through a stale address.
#
# What keeps the second kind from happening is the shape of the code this
# back end writes, not a promise of LLVM's. Every field address it computes
# is that of a word 0 to n of a block of n fields, a constant offset from
# the block's start, and L has no arrays to loop over, which is what
# strength reduction turns into pointers that end past an object. One
# address it computes is outside a block: the allocator's `new`, the end of
# the block just allocated, which it stores into `lc_hp`. In the fast path
# the block's address is `new` minus the block's size, and LLVM could in
# principle keep only `new` across a call and subtract; after the merge
# with the slow path the address is a φ-node of the two paths, no longer
# an offset of `new`. We know of no LLVM pass that does this, but that is
# an observation, not a proof: the tests that collect at every allocation
# (`LC_GC_STRESS=1`, chapter 10b) would show a block freed or moved from
# under a derived pointer as a wrong result or a crash, in the programs
# they run. A precise collector, with LLVM's statepoints, would have LLVM
# keep every base pointer itself.
#
# </div>

# %%
RBTREE = Source("rbtree.l", Path("../bench/programs/rbtree.l").read_text())
rbtree_asm = pipeline.show("asm", RBTREE).splitlines()
derived = [(rbtree_asm[i].strip(), rbtree_asm[i + k].strip()) for i in range(len(rbtree_asm) - 2)
           for k in (1, 2) if (m := re.fullmatch(r"\taddq\t\$(\d+), (%r\w+)", rbtree_asm[i]))
           and rbtree_asm[i + k].strip() == f"movq\t({m.group(2)}), {m.group(2)}"]
print(f"{len(derived)} places in rbtree's machine code where a register becomes a field's address and is loaded"
      " through, in place of the node's:")
for add, load in derived:
    print(" ", add.replace("\t", " "), "|", load.replace("\t", " "))

# %% [markdown]
# ## Primitives, and allocation inline
#
# Most primitives are one instruction: a projection `x[i]` loads word `i + 1`
# of the block (`inttoptr` turns the word into an address first), `tag x`
# loads the header, shifts and masks it, arithmetic is `add`, `sub`, `mul`,
# a comparison is `icmp` widened to a word with `zext`.
#
# Allocation is the one that matters for speed. The runtime keeps the
# current free *run* of its nursery (chapter 10b) in two words, `lc_hp` (the next
# free address) and `lc_hl` (the end of the run). Allocating `n` words is,
# in the generated code, *bump the pointer*: load `lc_hp`, add `8n`,
# compare with `lc_hl`; if it fits, store the new pointer back and the
# block is ours; if not, call the runtime's `lc_alloc_slow(n)` (through a
# function of the module that the next section explains), which finds
# the next run or collects garbage. Those instructions live in one function
# of the module, `lc_alloc`, marked `alwaysinline`: every allocation is a
# call of it in the code the back end writes (short to read, and quick to
# build), and LLVM inlines it at every call before it optimises, so the
# machine code has the instructions of the common path in place. Its second
# argument is the address of the heap pointer to bump: `lc_hp` as `alloc`
# below writes the call, a copy of `lc_hp` private to the function once the
# section [The heap pointer in a register](#the-heap-pointer-in-a-register)
# has passed over it. Each bump is also stored into `lc_hp` itself, so
# the runtime always finds the pointer there; after the slow path, the
# pointer is read again from `lc_hp`, where the runtime left the new one.
#
# `lc_hp` and `lc_hl` are declared `dso_local`: defined in the same
# executable as the code that uses them (the runtime is linked into it).
# Without that promise, position-independent code must assume they might
# live in a shared library and find their addresses in a table first (the
# GOT): a load that LLVM then keeps in a register for the whole function,
# two registers that the rest of the code cannot use. With it, the
# instructions name them relative to the instruction pointer,
# `mov rax, [rip + lc_hp]`. (Code that `lc run` compiles in memory, with
# the JIT's *large* code model of the section on the command line, cannot
# do that either: each address is a 64-bit constant put in a register
# with `movabs`, and LLVM keeps those registers for the function as it
# keeps the GOT's. `lc build`, and `lc show asm`, are what this section
# is about.)

# %%
#| export
class Backend(Backend):
    def field(self, b: ir.IRBuilder, block: ir.Value, i: int) -> ir.Value:
        """The address of field i of a heap block (word i + 1: word 0 is the header)."""
        return b.gep(b.inttoptr(block, I64.as_pointer()), [word(i + 1)])

    def allocator(self) -> ir.Function:
        """lc_alloc(words, heap), made once per module: bump the heap pointer that heap points
        to (lc_hp itself, or a function's copy of it), or call the runtime's slow path."""
        if "lc_alloc" in self.module.globals:
            return self.module.globals["lc_alloc"]
        f = ir.Function(self.module, ir.FunctionType(I64, [I64, I64.as_pointer()]), "lc_alloc")
        f.linkage = "internal"
        f.attributes.add("alwaysinline")              # inlined at every call, then constants fold
        b = ir.IRBuilder(f.append_basic_block("entry"))
        words, heap = f.args
        words.name, heap.name = "words", "heap"
        hp = b.load(heap, "hp")
        new = b.add(hp, b.mul(words, word(WORD)), "new")
        with b.if_then(b.icmp_unsigned(">", new, b.load(self.rt["lc_hl"], "hl")), likely=False):
            if SAVING_SLOW_PATH:
                block = b.call(self.slow_path(), [words], cconv="preserve_mostcc")
            else:
                block = b.call(self.rt["lc_alloc_slow"], [words])
            b.store(b.load(self.rt["lc_hp"]), heap)   # the runtime moved lc_hp
            b.ret(block)
        b.store(new, heap)
        b.store(new, self.rt["lc_hp"])                # lc_hp itself is always up to date
        b.ret(hp)
        if LOCAL_HEAP_POINTER:                         # the section on the heap pointer
            tell_apart(f, self.allocator_words() | {heap}, self.alias_tags())
        return f

# %% [markdown]
# ### A slow path that saves every register
#
# The slow path runs once in thousands of allocations, but where it is
# called matters to every one of them. By the C calling convention a call
# may overwrite nine registers (`rax`, `rcx`, `rdx`, `rsi`, `rdi`,
# `r8`–`r11`), so a value that lives across the call of `lc_alloc_slow` —
# the fields of the block about to be written, the arguments of the tail
# call that follows — must sit in one of the six registers a call keeps
# (`rbx`, `rbp`, `r12`–`r15`). And a function that uses one of those
# must save it on entry and restore it before it returns or tail-calls:
# a `push` and a `pop` on every call of the function, for the sake of a
# call that almost never happens. In continuation-passing code, where a
# typical function allocates a closure and tail-calls the next one,
# that is a `push` and a `pop` per register in almost every function: the
# count below, on `cpstak`, one of chapter 12's benchmark programs.
#
# So the allocator does not call `lc_alloc_slow` itself. It calls
# `lc_alloc_slow_saving`, a function of the module with LLVM's
# `preserve_mostcc` calling convention: it promises its callers to leave
# every register as it found it but `r11` (and `rax`, its result). LLVM
# writes that promise into its code — push the seven of the nine
# registers a C call may overwrite that it must keep (all but `rax` and
# `r11`), call `lc_alloc_slow`, pop them — so the generated
# functions keep their values in any register, and the pushes happen only
# on the slow path. The registers it pushes land on the stack, in the
# slow path's frame, where the collector's conservative scan of the stack
# (chapter 10b) finds them: a pointer held only in a register is still seen, and
# its block pinned, as before. `SAVING_SLOW_PATH = False` puts back the
# direct call, to compare.

# %%
#| export
SAVING_SLOW_PATH = True        # call lc_alloc_slow through lc_alloc_slow_saving (preserve_mostcc)


class Backend(Backend):
    def slow_path(self) -> ir.Function:
        """lc_alloc_slow_saving(words), made once per module: lc_alloc_slow, called with every
        register but r11 kept (LLVM's preserve_mostcc), so that its callers need not save any."""
        if "lc_alloc_slow_saving" in self.module.globals:
            return self.module.globals["lc_alloc_slow_saving"]
        f = ir.Function(self.module, ir.FunctionType(I64, [I64]), "lc_alloc_slow_saving")
        f.linkage = "internal"
        f.calling_convention = "preserve_mostcc"
        f.attributes.add("noinline")                  # its prologue is the point: it stays a call
        f.attributes.add("cold")
        b = ir.IRBuilder(f.append_basic_block("entry"))
        b.ret(b.call(self.rt["lc_alloc_slow"], [f.args[0]]))
        return f

# %% [markdown]
# The difference, counted in the machine code of `cpstak` (`lc show
# asm`), in the code of its three closures (`f_code_…`), where its work
# is done: the `push` instructions, with the direct call and with
# `lc_alloc_slow_saving`.

# %%
from lcompiler import llvm_backend

CPSTAK = Source("cpstak.l", Path("../bench/programs/cpstak.l").read_text())
for saving in (False, True):
    llvm_backend.SAVING_SLOW_PATH = saving
    listing = pipeline.show("asm", CPSTAK)
    bodies = re.findall(r"\n((?:tak|f_code)\w*):\n(.*?)\.Lfunc_end", listing, re.S)
    pushes = sum(body.count("\tpushq") for _, body in bodies)
    print(f"{'lc_alloc_slow_saving' if saving else 'lc_alloc_slow directly':24}: {len(bodies)} functions, "
          f"{pushes} pushes")
llvm_backend.SAVING_SLOW_PATH = True

# %% [markdown]
# In `cpstak` as chapter 9 leaves it, `tak` is inlined into the code of
# the closures, each of them a loop that allocates; the saving path takes
# two thirds of the pushes away (21 to 7, above, in the machine code of the
# executable, which is what `lc show asm` shows). The pushes that remain
# save, once per call of the function, the registers its loop keeps values
# in.

# %% [markdown]
# `alloc` allocates a block and writes its header and fields. The header
# is a constant (`header`, above). A block of more than 19 fields, which has
# no room for a layout, is allocated by `lc_alloc_old` in the old
# generation, as the collector requires.
#
# The header is stored first, then the fields, right after the allocation
# and with no allocation in between: the runtime asks that a block have its
# header before anything else is allocated, since a collection walks the
# nursery block by block and reads each header for its size.

# %%
#| export
class Backend(Backend):
    def alloc(self, b: ir.IRBuilder, fields: list, types: list, tag: int = 0, code: bool = False) -> ir.Value:
        """A new heap block with its header and fields, of these types (code: field 0 is code)."""
        first = header(types, tag, code=code)
        if first & OLD:                               # too many fields for a layout: old at once
            p = b.call(self.rt["lc_alloc_old"], [word(len(fields) + 1)])
        else:
            p = b.call(self.allocator(), [word(len(fields) + 1), self.rt["lc_hp"]])
        ptr = b.inttoptr(p, I64.as_pointer())
        b.store(word(first), ptr)
        for i, v in enumerate(fields, 1):
            b.store(v, b.gep(ptr, [word(i)]))
        return p

# %% [markdown]
# `x[i] := y` stores, and when `y` may be a pointer, calls `lc_barrier(x)`
# after the store, made once per module and inlined like `lc_alloc`: the
# *write barrier* of the generational collector. It loads the header of `x`
# and, if the flags say that `x` is old and not yet remembered, calls the
# runtime's `lc_remember(x)`. Stores are rare in L — only the cells of the
# `var`s that a function captures, and the `ready` flags of chapter 7, are
# ever written — and the test is two
# instructions on a header that the store has just brought into the cache.
#
# In `barrier` the two instructions are an `and` of the header with the two
# flags `OLD | REMEMBERED`, and a comparison of the result with `OLD`
# alone: the call happens only for a block that is old and not yet
# remembered, and the branch to it is marked unlikely (`likely=False`), as
# in `lc_alloc`.

# %%
#| export
class Backend(Backend):
    def barrier(self) -> ir.Function:
        """lc_barrier(block), made once per module, called after a store of a pointer into a
        block: if the block is old and not yet remembered, remember it (the write barrier)."""
        if "lc_barrier" in self.module.globals:
            return self.module.globals["lc_barrier"]
        f = ir.Function(self.module, ir.FunctionType(VOID, [I64]), "lc_barrier")
        f.linkage = "internal"
        f.attributes.add("alwaysinline")
        b = ir.IRBuilder(f.append_basic_block("entry"))
        block = f.args[0]
        block.name = "block"
        flags = b.and_(b.load(b.inttoptr(block, I64.as_pointer()), "header"), word(OLD | REMEMBERED))
        with b.if_then(b.icmp_unsigned("==", flags, word(OLD)), likely=False):
            b.call(self.rt["lc_remember"], [block])
        b.ret_void()
        return f

# %% [markdown]
# ### The heap pointer in a register
#
# As written so far, every allocation reads `lc_hp` from memory and writes
# it back: the runtime must find it there when the slow path calls it. In a
# loop that allocates, that is a chain through memory. The next allocation
# cannot add to `lc_hp` before the load has returned what the previous
# allocation stored, and a load that waits for a store to the same address
# waits for the store to be forwarded to it: several cycles on the
# AMD processor of this book's measurements and on others. (Agner Fog's
# microarchitecture manual ([bibliography](../bibliography.md#papers-and-books)) gives the figures for each processor, and the
# conditions under which recent AMD processors can hide the wait by
# mirroring a memory operand in a register.) A loop that conses once per
# iteration runs no faster than that chain. OCaml's native code has no such chain:
# it gives its allocation pointer a register of its own (`r15` on x86-64)
# for the whole program.
#
# LLVM cannot reserve a register, but it keeps a function's local variables
# in registers, and that is enough. `keep_heap_pointer` passes over a
# function after the back end has written it, and if the function
# allocates, it gives the function a local copy of `lc_hp`:
#
# - on entry, the copy is read from `lc_hp`;
# - every allocation bumps the copy instead (its `lc_alloc` gets the
#   copy's address as its `heap` argument), and writes the new value
#   through to `lc_hp` as well, as before: a store, which nothing waits
#   for, where the chain was a store and then a load;
# - after every call that returns, the copy is read again, since the
#   callee may have allocated or collected; so does the slow path inside
#   `lc_alloc`, after the runtime has found the next run.
#
# So `lc_hp` itself is always up to date, and the copy is a cache of it in
# a register: nothing needs writing back before a call or a return, and
# the runtime, a callee or a caller finds the pointer where it always did.
# A first version of this section wrote the copy back only before calls
# and returns, which saves the store in a loop; but the store then came
# after the fields of the block, just before a return that the caller
# follows with a load of `lc_hp`, and `primes` ran slower with chapter 9's
# optimiser than without it, in the measurements of that version (which
# were not kept): a cost of where the store lands in the pipeline of the
# processor, which we measured but did not take apart. The store at the
# bump has no such case.
#
# The copy is an `alloca`, a word of the function's stack frame, and the
# program is correct as written, with loads and stores of it. LLVM's first
# optimisations (SROA, *mem2reg*) then replace a local whose address never
# escapes by SSA values and φ-nodes, which the register allocator keeps in
# a register: in a loop, the heap pointer becomes a φ-node of the loop's
# header, and the load of `lc_hp` leaves the loop for its calls. Calls that
# neither read nor move `lc_hp` are not followed by a read
# (`QUIET_CALLEES`): the allocator itself, the write barrier, which only
# remembers a block, and the two intrinsics of the trap records. Nor is a
# tail call, since nothing follows it but the return; a `setjmp` of a trap
# record is a call like any other, so the handler that it returns to a
# second time starts from `lc_hp`, which the raise's callee kept up to
# date.
#
# Nothing in the runtime moves `lc_hp` but functions the code calls — the
# slow path, and `lc_alloc_old` (the allocation of wide blocks), which
# may collect — after which the copy is read again, as after any call;
# the signal handlers of chapter 10b only flush the output and leave.
# `LOCAL_HEAP_POINTER = False` builds the code of the earlier sections, to
# compare: no copy, and none of the alias tags of the next paragraphs,
# which come with it.

# %%
#| export
LOCAL_HEAP_POINTER = True      # each function that allocates bumps a copy of lc_hp (False: lc_hp itself)
QUIET_CALLEES = ("lc_alloc", "lc_barrier", "llvm.frameaddress.p0", "llvm.stacksave.p0")   # leave lc_hp be


def calls_out(ins) -> bool:
    """Whether ins is a call that may read or move lc_hp: any call but one of QUIET_CALLEES."""
    return type(ins) is ir.CallInstr and not (type(ins.callee) is ir.Function
                                               and ins.callee.name in QUIET_CALLEES)


def keep_heap_pointer(f: ir.Function, lc_hp: ir.GlobalVariable, allocator):
    """If f allocates (calls allocator, lc_alloc), give it a copy of lc_hp that its allocations
    bump: read from lc_hp on entry and after each call. (lc_alloc writes every bump through to
    lc_hp as well, so the copy is only ever a register's cache of it.)"""
    allocates = lambda ins: type(ins) is ir.CallInstr and ins.callee is allocator
    if not any(allocates(ins) for block in f.blocks for ins in block.instructions):
        return
    b = ir.IRBuilder()
    for block in f.blocks:
        old, block.instructions = block.instructions, []
        b.position_at_end(block)
        if block is f.entry_basic_block:
            hp = b.alloca(I64, name="hp")
            b.store(b.load(lc_hp), hp)
        for i, ins in enumerate(old):
            block.instructions.append(ins)
            if allocates(ins):
                ins.replace_usage(lc_hp, hp)          # bump the copy
            elif calls_out(ins) and type(old[i + 1]) not in (ir.Ret, ir.Unreachable):   # not a tail call
                b.position_at_end(block)
                b.store(b.load(lc_hp), hp)            # the callee may have moved it

# %% [markdown]
# One more thing stands between the allocator and its registers. The
# store of the new pointer into `lc_hp` is a store into memory that LLVM
# cannot tell from the fields of blocks: both are addresses it knows
# nothing about, a global and an `inttoptr` of a word (the design note
# [addresses as integers](#data-one-word-per-value) says why). So after each
# block's fields are stored, LLVM loads `lc_hl` again — the limit, which
# nothing but the runtime writes — for the next allocation, in case one of
# those stores changed it; and a field written before a bump and read
# after it is read again from memory.
#
# LLVM can be told, with its *type-based alias analysis* (TBAA). Each load
# and store may carry a tag naming the type of what it reads or writes,
# and two accesses whose types are different (neither contains the other)
# never touch the same memory. The back end uses two types under one
# root: `allocator`, for the words `lc_hp` and `lc_hl` (and the copy), and
# `word`, for everything else the code reads or writes — fields, headers,
# the cells of `var`s, the slots of top-level values. That is true of this
# back end's code: nothing it writes reads or writes `lc_hp` or `lc_hl`
# except the accesses tagged `allocator` (the runtime does, but inside
# calls, which TBAA does not describe). `tell_apart` tags every load and
# store of a function after the copy's pass, and those of `lc_alloc` when
# it is made; consecutive allocations then read `lc_hl` once, and a loop
# reads it before it starts.

# %%
#| export
class Backend(Backend):
    def allocator_words(self) -> set:
        return {self.rt["lc_hp"], self.rt["lc_hl"]}

    def alias_tags(self) -> dict:
        """The two access tags of LLVM's type-based alias analysis, made once per module:
        "allocator" for lc_hp and lc_hl, "word" for every other word the code reads or writes
        (and the root of their types, for finer ones: exercise 5)."""
        if getattr(self, "tags", None) is None:
            m = self.module
            root = m.add_metadata([ir.MetaDataString(m, "lc")])
            self.tags = {"root": root}
            for name in ("allocator", "word"):
                kind = m.add_metadata([ir.MetaDataString(m, name), root, word(0)])
                self.tags[name] = m.add_metadata([kind, kind, word(0)])
        return self.tags


def tell_apart(f: ir.Function, allocator_words: set, tags: dict):
    """Tag each load and store of f that has no tag yet for LLVM's TBAA: "allocator" if it reads
    or writes one of allocator_words or a local of f's frame (the copy of lc_hp), "word" otherwise."""
    for block in f.blocks:
        for ins in block.instructions:
            if (type(ins) is ir.LoadInstr or type(ins) is ir.StoreInstr) and "tbaa" not in ins.metadata:
                pointer = ins.operands[0] if type(ins) is ir.LoadInstr else ins.operands[1]
                allocator = pointer in allocator_words or type(pointer) is ir.AllocaInstr
                ins.set_metadata("tbaa", tags["allocator" if allocator else "word"])

# %% [markdown]
# Here is the difference in machine code, on the loop of `append_rev`,
# which conses the elements of one list onto another, with and without the
# copy (`lc show asm`; chapter 9 inlines `append_rev` into the statement
# that calls it, and the loop is printed from its label to the jump back,
# as LLVM lays it out):

# %%
APPEND_REV = Source("append_rev.l", """\
data List<t> { Cons(t, List<t>); Nil }
def append_rev(a, b) = match (a) {
  Cons(x, rest) -> append_rev(rest, Cons(x, b))
  Nil -> b
}
def range(a, b) = if (a > b) Nil else Cons(a, range(a + 1, b))
def length(l, n) = match (l) { Cons(_, rest) -> length(rest, n + 1); Nil -> n }
print(length(append_rev(range(1, 1000000), Nil), 0))
""")


def allocating_loop(listing: str) -> str:
    """The instructions of the first loop of an `lc show asm` listing that allocates a Cons (adds
    24 to the heap pointer: `leaq 24(…)`): from a label to the jump back to it, without
    directives and comments."""
    lines = [line.strip() for line in listing.splitlines()
             if not line.lstrip().startswith((".cfi", ".p2align", "#"))]
    for i, line in enumerate(lines):
        back = re.match(r"j\w+\s+(\.LBB\w+)$", line)
        if back and back.group(1) + ":" in lines[:i]:
            loop = lines[lines.index(back.group(1) + ":"):i + 1]
            if any(instruction.startswith("leaq\t24(") for instruction in loop):
                return "\n".join(loop)


for local in (False, True):
    llvm_backend.LOCAL_HEAP_POINTER = local
    print(("a copy of lc_hp" if local else "lc_hp itself") + ":")
    print(allocating_loop(pipeline.show("asm", APPEND_REV)))
llvm_backend.LOCAL_HEAP_POINTER = True

# %% [markdown]
# Without the copy, the loop loads `lc_hp`, adds 24, and stores the sum
# back, every iteration, and the next iteration's load waits for that
# store. With it, the pointer lives in a register: a `leaq 24(…)` computes
# the next one from it, a `movq` at the bottom of the loop carries that to
# the next iteration, and no load of `lc_hp` remains in the loop — only the
# store that writes the new pointer through, which nothing in the loop
# waits for. Nor a load of `lc_hl`: the tags tell LLVM that the stores of
# the fields do not change it, so it is read once before the loop and
# compared from a register (and read again after the slow path, which may
# change it).
#
# What it is worth, program by program: `bench/heap_pointer.py` builds
# every benchmark of chapter 12 both ways — as `lc build` does, with the
# copy and the alias tags, and with `LOCAL_HEAP_POINTER = False`, with
# neither — and times the two executables in alternation, five runs each,
# and prints the median of the paired ratios (the build with the copy over
# the build without) with its 95 % bootstrap interval:

# %%
heap_pointer = json.loads(Path("../bench/heap_pointer.json").read_text())
print("\n".join(machine_lines(heap_pointer["machine"])), "|", heap_pointer["command"])
ordered = sorted(heap_pointer["benchmarks"].items(), key=lambda item: item[1]["L/L-global"]["ratio"])
for name, r in ordered:
    ratio = r["L/L-global"]
    print(f"{name:12} {ratio['ratio']:5.2f} [{ratio['ci'][0]:.2f}, {ratio['ci'][1]:.2f}]")
mean = heap_pointer["geometric mean"]
print(f"{'geometric mean':12} {mean['ratio']:.2f} [{mean['ci'][0]:.2f}, {mean['ci'][1]:.2f}]")
by_rule = {}                    # chapter 12's rule: faster or slower only when the whole interval says so
for name, r in ordered:
    low, high = r["L/L-global"]["ci"]
    by_rule.setdefault("faster" if high < 1 else "slower" if low > 1 else "within noise", []).append(name)
for verdict in ("faster", "slower"):
    names = by_rule.get(verdict, [])
    moved = [abs(1 - heap_pointer["benchmarks"][n]["L/L-global"]["ratio"]) for n in names]
    by = f", by {min(moved):.0%} to {max(moved):.0%} by the median" if names else ""
    print(f"{verdict} with the copy ({len(names)}): {', '.join(names) or 'none'}{by}")

# %% [markdown]
# By chapter 12's rule (a program is faster or slower only when its whole
# interval says so), the copy makes the programs of the next-to-last line
# faster and those of the last line slower, by the percentages printed
# there; in this measurement the one faster is the exception benchmark
# `raisesearch`, and the slower ones are `binarytrees`, `perm` and
# `change`, a program whose time moves from one session to the next
# (chapter 12). The seven programs
# that do not allocate (`fib`, `tak`, `ack`, `mandel`, `gcd`, `loop`,
# `states`) have the same machine code both ways, so their ratios show
# only the noise of the measurement; the rest are within noise.
# The geometric mean is close to 1. So the gain is smaller than
# the chain of the first paragraph suggests: most of these programs' time
# goes elsewhere — into the collector, into loads that miss the cache, and
# into the calls, before each of which the copy is gone, to be read again
# after. And on some programs the copy costs (the last line): more values live in
# registers across a loop, and one more register to save in a closure's
# code (chapter 12 shows one). It stays for the loops, where the chain was
# the whole cost.

# %% [markdown]
# A value's tag is in its header, but for the types of two constructors one
# of which has no fields — `List`, `Option` — it is found without a load:
# the value is `Nil` exactly when it is the address of `Nil`'s one constant
# block, `nullary.1` (made once per module, and shared by the parts of a
# module that chapter 11 splits).
#
# `tag` then turns the comparison into the number that the `switch` of a
# `case` expects, with a `select`: the tag of the constructor without
# fields when the value is its block's address, the other constructor's
# tag otherwise. The worked example below shows it in `length`: an `icmp
# eq` with the address of `@nullary.1`, a `select` of 1 (`Nil`, the second
# constructor) or 0, and the `switch`. For any other type, `tag` loads the
# header and `header_tag` shifts it right by 24 and keeps 16 bits.

# %%
#| export
class Backend(Backend):
    def header_tag(self, b: ir.IRBuilder, h: ir.Value) -> ir.Value:
        return b.and_(b.lshr(h, word(TAG_SHIFT)), word((1 << TAG_BITS) - 1))

    def nullary(self, tag: int) -> ir.Constant:
        """The one constant block of a constructor without fields (its address is its identity:
        not internal, so that a module split into parts (chapter 11) still has only one)."""
        name = f"nullary.{tag}"
        if name not in self.module.globals:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I64, 1), name)
            g.initializer = ir.Constant(g.type.pointee, [word(header([], tag, old=True))])
            g.global_constant, g.linkage = True, LINKAGE
        return self.module.globals[name].ptrtoint(I64)

    def tag(self, b: ir.IRBuilder, x: ir.Value, t) -> ir.Value:
        """The tag of x, of type t: a comparison with the address of the nullary constructor
        when t has two constructors and one has no fields, else the header's upper half."""
        constructors = self.datas[t.name][1] if type(t) is TCon and t.name in self.datas else ()
        if len(constructors) == 2 and sum(not fields for _, fields in constructors) == 1:
            empty = 0 if not constructors[0][1] else 1
            is_empty = b.icmp_unsigned("==", x, self.nullary(empty))
            return b.select(is_empty, word(empty), word(1 - empty))
        return self.header_tag(b, b.load(b.inttoptr(x, I64.as_pointer())))

# %% [markdown]
# `prim` translates one primitive of chapter 6 into instructions, and
# returns its value.
#
# It is one test per kind of primitive. A constant is its word. A tuple, a
# closure or a constructor with fields is an allocation (`alloc`, above); a
# constructor without fields is the address of its constant block. A
# projection is a load, or no instruction at all when the tuple was
# flattened (`Fields`, in the section on flattening below). A store `x[i]
# := y` is followed by the write barrier when `y` may be a pointer. `print`
# calls the printer of each argument's type, with spaces between them and a
# newline at the end. A primitive that the back end does not know raises
# `TypeError`, rather than being skipped.

# %%
#| export
class Backend(Backend):
    def prim(self, b: ir.IRBuilder, p, values: dict) -> ir.Value:
        t = type(p)
        get = lambda o: self.value(b, o, values)
        if t is cps.Const:
            return self.const(p.value)
        if t in (cps.TupleValue, cps.MakeClosure):
            return self.alloc(b, [get(o) for o in p.fields], [o.var.type for o in p.fields],
                              code=t is cps.MakeClosure)
        if t is cps.Inject:
            if not p.fields:
                return self.nullary(p.tag)
            return self.alloc(b, [get(o) for o in p.fields], [o.var.type for o in p.fields], p.tag)
        if t is cps.Proj:
            fields = values.get(p.arg.var)
            if type(fields) is Fields:                 # a flattened tuple: no load
                return fields[p.index]
            return b.load(self.field(b, get(p.arg), p.index))
        if t is cps.Tag:
            return self.tag(b, get(p.arg), p.arg.var.type)
        if t is cps.SetField:
            target = get(p.target)
            b.store(get(p.value), self.field(b, target, p.index))
            if may_point(p.value.var.type):
                b.call(self.barrier(), [target])
            return word(0)
        if t is cps.Op:
            return self.op(b, p, [get(o) for o in p.args])
        if t is cps.Print:
            for n, o in enumerate(p.args):
                if n:
                    b.call(self.rt["lc_print_char"], [word(ord(" "))])
                b.call(self.printer(o.var.type), [get(o), word(0)])
            b.call(self.rt["lc_print_char"], [word(ord("\n"))])
            return word(0)
        if t is cps.Fail:
            if self.raises_here(p.exn):                # the section on exceptions
                self.raise_failure(b, p.exn.var, p.message, p.loc, [get(o) for o in p.args],
                                   [o.var.type for o in p.args])
                b.position_at_end(b.function.append_basic_block("after.raise"))    # never reached
                return word(0)
            self.fail(b, p, [get(o) for o in p.args])
            return word(0)
        raise TypeError(f"not a primitive the back end knows: {p!r}")

# %% [markdown]
# Arithmetic and comparisons: the operations of [chapter 4b](04b_meaning.ipynb)'s
# table of primitives. What each computes is said there; which instructions
# compute it is said here, in one dictionary, `LOWERING`, from a
# primitive's name to a function that makes its instructions — its
# *lowering*, given the back end, the builder, the `Op` and its operands as
# words. A test checks that every row of the table has one. Most are one
# instruction: `add`, `sub`, `mul`, `neg`, `xor` with 1 for `not`, and a
# comparison is `icmp` widened to a word with `zext`. Strings are compared
# by the runtime's `lc_str_eq`.
#
# A primitive that can fail is tested first, by `op`, from its row's
# `Failure`: if the operand it names has the failing value, the runtime's
# `lc_fail` stops the program with the error, rendered at the operation's
# location — "division by zero" at the operator. An operand that is a
# constant other than the failing value needs no test, and gets none: LLVM
# would remove it, but only after spending time on it, and the time LLVM
# takes grows with the size of the IR it is handed. Division itself has
# one more case: `min / -1` — which traps in the x86 instruction — is
# computed as the contract says (`-min`, which wraps to `min`, and 0 for
# `%`) by dividing by 1 instead and selecting the right answer, unless the
# divisor is a constant other than 0 and −1.

# %%
#| export
from lcompiler.primitives import PRIMITIVES


def division(instruction: str):
    """The lowering of / (sdiv) or % (srem); the divisor is not 0 (op has tested it)."""
    def lower(backend, b: ir.IRBuilder, p: cps.Op, args: list) -> ir.Value:
        x, y = args
        if isinstance(y, ir.Constant) and y.constant not in (0, -1):
            return getattr(b, instruction)(x, y)                # a constant divisor: one instruction
        minus_one = b.icmp_signed("==", y, word(-1))
        q = getattr(b, instruction)(x, b.select(minus_one, word(1), y))
        return b.select(minus_one, b.neg(x) if instruction == "sdiv" else word(0), q)
    return lower


def comparison(predicate: str):
    """The lowering of a comparison: icmp, widened to a word; == and != on strings call lc_str_eq."""
    def lower(backend, b: ir.IRBuilder, p: cps.Op, args: list) -> ir.Value:
        if predicate in ("==", "!=") and p.args[0].var.type == types.STRING:
            eq = b.call(backend.rt["lc_str_eq"], args)
            return eq if predicate == "==" else b.xor(eq, word(1))
        return b.zext(b.icmp_signed(predicate, *args), I64)
    return lower


LOWERING = {
    "+": lambda backend, b, p, args: b.add(*args),
    "-": lambda backend, b, p, args: b.sub(*args),
    "*": lambda backend, b, p, args: b.mul(*args),
    "/": division("sdiv"),
    "%": division("srem"),
    "neg": lambda backend, b, p, args: b.neg(args[0]),
    "==": comparison("=="),
    "!=": comparison("!="),
    "<": comparison("<"),
    "<=": comparison("<="),
    ">": comparison(">"),
    ">=": comparison(">="),
    "not": lambda backend, b, p, args: b.xor(args[0], word(1)),
}


class Backend(Backend):
    def op(self, b: ir.IRBuilder, p: cps.Op, args: list) -> ir.Value:
        failure = PRIMITIVES[p.op].fails
        if failure:
            x = args[failure.operand]
            if not (isinstance(x, ir.Constant) and x.constant != failure.value):
                with b.if_then(b.icmp_signed("==", x, word(failure.value)), likely=False):
                    if self.raises_here(p.exn):        # the section on exceptions
                        self.raise_failure(b, p.exn.var, failure.message, p.loc, [], [])
                    else:
                        b.call(self.rt["lc_fail"], [self.cstring(b, render(RunError(failure.message, p.loc)))])
        return LOWERING[p.op](self, b, p, args)

# %% [markdown]
# ## Arguments in registers: flattening tuples
#
# An L function of several parameters, `def ack(m, n) = …`, is a function
# of *one* tuple (chapter 4b: `{ (m, n) -> … }`), and a call `ack(m - 1, 1)`
# builds that tuple. Translated as it is, every call allocates three words
# on the heap, and the callee loads its parameters back from them: on a
# benchmark such as Ackermann's function, which does little but call
# itself, the allocation would cost more than the work.
#
# Types fix it. After monomorphisation, the type of a function's parameter
# is known wherever the function is called — directly or through a closure —
# because the argument has the same type. So the back end adopts one
# calling convention for every function: **a parameter whose type is a
# tuple of n components is passed as n words**, in n LLVM parameters (which
# LLVM passes in registers, the first six of a call's words on x86-64, the
# rest on the stack). At a call, a tuple argument is passed as its
# components; inside the function, a projection `x[i]` of such a parameter
# is just the i-th of those words.
#
# And the tuple itself is only built when it is needed whole. A `let_prim
# t = tuple(a, b)` whose every use is a projection or an argument of a call
# is *virtual*: the back end records its components (`Fields`) and emits
# nothing; each use takes the component it needs. A tuple used otherwise —
# stored in a list, printed, returned — is allocated as before. A tuple
# parameter is always kept as its components, and built only where it is
# used whole (`value`, above): typically on the cold path of a match failure,
# which prints the argument of the function.
#
# <div class="admonition note">
#
# <p class="admonition-title">Design note: flattening in the back end, not left to LLVM</p>
#
# Why not allocate every tuple, and count on LLVM's optimiser to remove the
# ones that are only taken apart? It cannot remove them: an allocation
# moves `lc_hp`, a global that the runtime reads, so to LLVM it has an
# effect that must be kept even when the block is never read. The seeds'
# program, later in this chapter, shows one such allocation surviving O2.
# The back end knows what LLVM does not, that a block nobody reads is
# garbage, so the decision is taken here, from the types.
#
# </div>

# %%
#| export
class Fields(list):
    """The components of a tuple the back end keeps in registers instead of allocating it."""


def arity(var) -> int:
    """How many words a value of var's type takes as an argument: n for an n-tuple, else 1."""
    t = var.type
    return len(t.args) if isinstance(t, TCon) and t.name == "*" and len(t.args) > 1 else 1


def only_taken_apart(var) -> bool:
    """Is every use of var a projection, or an argument of a call (which flattens it)?"""
    for o in cps.occurrences(var):
        node = o.enclosing
        if not (type(node) is cps.Proj or (type(node) is cps.Apply and o is not node.func)):
            return False
    return True

# %% [markdown]
# `virtual` says whether a tuple can stay in registers; `parameters` binds a
# function's parameters to its LLVM arguments, and `words` gives an
# argument of a call as the words it is passed in, loading them from the
# block of a tuple that was built.

# %%
#| export
class Backend(Backend):
    def virtual(self, var, prim) -> bool:
        return (type(prim) is cps.TupleValue and len(prim.fields) == arity(var) > 1
                and only_taken_apart(var))

    def parameters(self, params, args: list, values: dict):
        """Bind a function's parameters to its LLVM arguments, n of them for an n-tuple."""
        for p in params:
            n = arity(p)
            mine, args[:n] = args[:n], []
            values[p] = mine[0] if n == 1 else Fields(mine)

    def words(self, b: ir.IRBuilder, o: cps.Occ, values: dict) -> list:
        """An argument of a call, as the words it is passed in."""
        n = arity(o.var)
        if n == 1:
            return [self.value(b, o, values)]
        if type(values.get(o.var)) is Fields:
            return list(values[o.var])
        block = self.value(b, o, values)
        return [b.load(self.field(b, block, i)) for i in range(n)]

# %% [markdown]
# `ack`, as the back end translates it (without chapter 9's optimiser):
# its one parameter, the tuple `x_6`, is two LLVM parameters, `x_6.0` and
# `x_6.1`, its calls pass two words, and nothing is allocated:

# %%
ACK = Source("ack.l", open("../bench/programs/ack.l").read())
ack = llvm_function(pipeline.show("llvm", ACK, False), "ack_3")
print(ack)
print("allocations in ack:", ack.count("@\"lc_alloc\""))

# %% [markdown]
# Read `recur`'s φ-nodes: each has three incoming values, one per way into
# the loop. From `entry` come the arguments of the call; from `then_17`,
# the tail call `ack(m - 1, 1)`, with the constant 1 as the second word;
# from `k_28`, the tail call `ack(m - 1, ack(m, n - 1))`, whose second word
# is the result `r_29` of the one real `call` left, made in `else_22`. No
# tuple is built on any of these paths, which is why the count of
# allocations is 0.

# %% [markdown]
# ## Runtime errors, rendered by the compiler
#
# A runtime error must look exactly like the interpreter's: `FILE:LINE:COL:
# runtime error: message`, the source line, a caret. Everything in it but
# one thing is known at compile time, so the compiler renders it — with
# chapter 4b's `RunError.render` — into a string constant, and the code
# calls `lc_fail(text)`, which flushes what the program printed, writes the
# text to stderr and exits with status 2. The one thing not known is the
# value in "no clause matches the value V": for that error the code calls
# `lc_fail_begin(first part)`, which sends the printing functions to stderr,
# prints V with the printer of its type (nested, so a string is quoted), then
# `lc_fail(rest)`.

# %%
#| export
OVERFLOW = "stack overflow: the program nested calls too deeply"     # the reference interpreter's words


def render(error: RunError) -> str:
    return error.render() + "\n"


class Backend(Backend):
    def fail(self, b: ir.IRBuilder, p: cps.Fail, args: list):
        text = render(RunError(p.message, p.loc))
        if not args:
            b.call(self.rt["lc_fail"], [self.cstring(b, text)])
            return
        first, rest = text.split("\n", 1)
        b.call(self.rt["lc_fail_begin"], [self.cstring(b, first + " ")])
        b.call(self.printer(p.args[0].var.type), [args[0], word(1)])
        b.call(self.rt["lc_fail"], [self.cstring(b, "\n" + rest)])

# %% [markdown]
# ## Exceptions: a flag tested after each call that may raise
#
# A raise in CPS is a jump to a continuation, and three kinds of
# continuation can be its target. A *handler* bound in the same function
# (the clauses of a `try` around the raise) is a block, and the raise is a
# branch to it, like any jump. The program's `uncaught` reports and stops.
# The hard one is the function's own exception continuation `exn`: the
# handler is in some caller, how many frames up nobody knows at compile
# time, and it must be reached *with that caller's stack*, the frames in
# between abandoned. Machine code has three ways of doing that:
# *trap frames*, as OCaml's native code does — a
# `try` pushes a record holding the handler's address and the stack
# pointer, and a raise restores the stack pointer and jumps, in one step
# whatever the depth; *zero-cost unwinding*, C++'s `invoke` and
# `landingpad`, which costs nothing until a raise and then walks tables
# frame by frame; and a
# *flag*, as Swift (its `swifterror` register) and Koka's C code (a
# `yielding` flag in the thread's context) do: a raise stores the exception
# in a known place — here a global — and returns normally, and every call
# that may raise is followed by a test of that place — if it is set, the
# caller goes to its handler, or returns at once to its own caller, which
# tests it in turn.
#
# This back end builds two of them, the flag and trap frames, measures
# both, and chooses the flag (the end of the section says why); trap
# frames stay selectable. The flag came first because it needs no new
# machinery: no `setjmp`, no unwinder, nothing the collector must learn
# (every frame is left by an ordinary return, so the conservative scan of
# the stack sees exactly the frames that are live, as always). Its rules:
#
# | CPS | LLVM (a program that catches) |
# |---|---|
# | `h(e) raise @l:c`, `h` a handler of this function | record the raise site, then `br label %h` |
# | `exn(e) raise @l:c`, `exn` the function's own | record the site, store `e` in the flag, `ret i64 0` |
# | `uncaught(e) raise @l:c` | report at once (`lc_fail`), as before exceptions |
# | `h(e)` without `raise` (no clause matched: pass it on) | the same without recording: the first raise's site stays |
# | `call f(…) -> k / h`, not a tail call, `f` may raise | the call, then `if flag != 0`: clear it and `br %h` (a handler), or `ret` (the function's own), or report (`uncaught`) |
# | `call f(…) -> ret / exn`, a tail call | as before: the callee's flag is the caller's |
# | `q = a / b @l:c / h`, `fail "…" @l:c / h` | the test of before, its failure raising `DivisionByZero` (`MatchFailure`, `AssertionFailed`) to `h` by the rules above |
#
# Three details keep it cheap, and free where nothing is caught:
#
# - **A program that catches nothing compiles as before.** If no raise, no
#   failure and no call names a handler as where it raises to, every
#   exception ends at `uncaught`, however many frames it would cross: the
#   raise itself can report, at once. `catches` decides this for the whole
#   program; when it says no, the back end emits exactly the code of
#   before exceptions —
#   no flag, no record, no test — and a raise is a call of `lc_fail`
#   with its message rendered by the compiler, like a division by zero.
# - **Only a call that may raise is tested.** `raising` finds the direct
#   functions that may raise to their own exception continuation: a raise,
#   a failure or a pass-on there, or a call of a closure (unknown) or of
#   such a function that names it; the least fixed point of that rule. A
#   call of `fib` that can never raise is followed by no test.
# - **A tail call needs no test**: the callee's flag, if set, is returned
#   to this function's caller, which tests it.
#
# The flag is a word of `lc_globals`, the array of the program's dynamic
# definitions that the collector takes as roots (chapter 10b): the back end
# adds two words at its end, `pending` (the exception, 0 when none: no heap
# block has address 0) and the value of the raise site.
#
# **The raise site.** The report of an uncaught exception needs the place of
# the *first* raise, and for a `MatchFailure` the value that no clause
# matched, but the exception that travels is only the constructor. So a
# raise that something may catch records its site before it jumps: the
# address of a constant of three words, made by the compiler — the text of
# the report up to the value, after it (0: no value), the value's printer —
# in the global `lc_site`, and the value (the exception itself, or a match
# failure's unmatched value) in its word of `lc_globals`, where the collector
# finds it. A pass-on leaves the record alone. `lc_uncaught`, a function of
# the module, prints the report from the record, as `lc_fail_begin`, the
# printer and `lc_fail` print one at a raise.

# %%
#| export
import os

EXCEPTION_SLOTS = ("pending", "site value")    # two words at the end of lc_globals: roots
PENDING, SITE_VALUE = EXCEPTION_SLOTS
LOWERINGS = ("flag", "traps")                   # the first is the default


def lowering() -> str:
    """The lowering of exceptions: LC_EXCEPTIONS=traps chooses trap frames, else the flag."""
    chosen = os.environ.get("LC_EXCEPTIONS", LOWERINGS[0])
    if chosen not in LOWERINGS:
        raise ValueError(f"LC_EXCEPTIONS={chosen}: the lowerings are {', '.join(LOWERINGS)}")
    return chosen


def is_exception_continuation(k) -> bool:
    """Is k a function's exception continuation, or the program's `uncaught`?"""
    return type(k.binder) is cps.Program or type(k.binder) is cps.Lambda and k is k.binder.exn


def raised_to(node):
    """The occurrence of the continuation that node raises to, if it may raise."""
    t = type(node)
    if t is cps.Apply or t is cps.Op or t is cps.Fail:
        return node.exn
    if t is cps.ApplyCont and (node.raises or is_exception_continuation(node.cont.var)):
        return node.cont
    return None


def catches(program: cps.Program) -> bool:
    """Does anything in the program catch an exception: does a raise, a failure or a call name a
    handler (a local continuation) as where it raises to, or a handler pass one on? If not, every
    raise reaches `uncaught`, and the code is exactly what it was before L had exceptions."""
    for node in cps.walk(program):
        h = raised_to(node)
        if h is not None and type(h.var.binder) is cps.LetCont:
            return True
        if type(node) is cps.ApplyCont and not node.raises and is_exception_continuation(node.cont.var):
            return True
    return False


def raising(program: cps.Program) -> set:
    """The direct functions that may raise to their own exception continuation: a raise or a
    failure there, or a call of a closure or of such a function that raises there too. The least
    fixed point: a function is added when one of these is found, until none is."""
    lambdas = {d.var: d.value for d in program.definitions if type(d.value) is cps.Lambda}
    sites = {}
    for var, lam in lambdas.items():
        sites[var] = [node for node in cps.walk(lam.body)
                      if (h := raised_to(node)) is not None and h.var is lam.exn]
    found, changed = set(), True
    while changed:
        changed = False
        for var, nodes in sites.items():
            if var not in found and any(type(n) is not cps.Apply or n.kind != "direct" or n.func.var in found
                                        for n in nodes):
                found.add(var)
                changed = True
    return found

# %% [markdown]
# In the `Backend`, first the places: the flag's word and the site value's
# in `lc_globals` (`exception_slot`), the record of a site (a constant of
# three words, `site_record`, made once per site) and the global that
# points to the last one recorded (`site_global`); then the two things a
# raise site does — `record` it for later, or `report_now`, where nothing
# can catch.

# %%
#| export
class Backend(Backend):
    def exception_slot(self, b: ir.IRBuilder, name: str) -> ir.Value:
        return b.gep(self.globals, [ir.Constant(I32, 0), ir.Constant(I32, self.exception_slots[name])])

    def own_exception(self, ret):
        """The exception continuation of the function being translated (ret None: a definition)."""
        return self.program.uncaught if ret is None else ret.binder.exn

    def raises_here(self, exn) -> bool:
        """Does a failure raising to exn raise (rather than report at once, as before exceptions)?"""
        if exn is None or not self.catching:
            return False
        return exn.var is not self.program.uncaught

    def site_record(self, prefix: str, rest: str | None, printer) -> ir.Constant:
        """A raise site, made by the compiler: the uncaught report's text before the value, after
        it (None: no value), and the value's printer; one constant per text, shared."""
        key = (prefix, rest, printer.name if printer is not None else None)
        records = self.site_records
        if key not in records:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I64, 3), f"site.{len(records)}")
            null = word(0)
            g.initializer = ir.Constant(g.type.pointee, [
                self.string(prefix).ptrtoint(I64),
                self.string(rest).ptrtoint(I64) if rest is not None else null,
                printer.ptrtoint(I64) if printer is not None else null])
            g.global_constant, g.linkage = True, "private"
            records[key] = g.ptrtoint(I64)
        return records[key]

    def site_global(self) -> ir.GlobalVariable:
        if "lc_site" not in self.module.globals:
            g = ir.GlobalVariable(self.module, I64, "lc_site")
            g.initializer, g.linkage = word(0), "internal"
        return self.module.globals["lc_site"]

    def record(self, b: ir.IRBuilder, message: str, loc, value, value_type):
        """Record the raise site: the report's texts (value: shown after the message) in lc_site,
        the value in its slot of lc_globals, where the collector finds it."""
        text = render(RunError(message, loc))
        if value is None:
            site = self.site_record(text, None, None)
        else:
            first, rest = text.split("\n", 1)
            site = self.site_record(first + " ", "\n" + rest, self.printer(value_type))
            b.store(value, self.exception_slot(b, SITE_VALUE))
        b.store(site, self.site_global())

    def report_now(self, b: ir.IRBuilder, message: str, loc, value, value_type):
        """Report an uncaught exception at its raise, as before exceptions (lc_fail)."""
        text = render(RunError(message, loc))
        if value is None:
            b.call(self.rt["lc_fail"], [self.cstring(b, text)])
        else:
            first, rest = text.split("\n", 1)
            b.call(self.rt["lc_fail_begin"], [self.cstring(b, first + " ")])
            b.call(self.printer(value_type), [value, word(1)])
            b.call(self.rt["lc_fail"], [self.cstring(b, "\n" + rest)])
        b.unreachable()

# %% [markdown]
# Then the rules of the table, a method each: `pass_on` is a jump to an
# exception continuation that records nothing (a handler's block, or set
# the flag and return, or report from the record); `raise_to` is a raise
# (record, then pass on — or report at once where nothing can catch);
# `raise_failure` is a failing primitive raising its predefined exception;
# `test_flag` is the test after a call that may raise.

# %%
#| export
class Backend(Backend):
    def pass_on(self, b: ir.IRBuilder, h, exception, blocks: dict, ret):
        """Jump to the exception continuation h with an exception already recorded: a handler's
        block; the function's own (set the flag, return: the caller tests it); or uncaught."""
        if h in blocks:
            self.goto(b, h, [exception], blocks)
        elif h is self.program.uncaught:
            b.call(self.uncaught_report(), [])
            b.unreachable()
        elif self.lowering == "traps":
            b.store(exception, self.exception_slot(b, PENDING))
            b.call(self.thrower(), [])
            b.unreachable()
        else:
            b.store(exception, self.exception_slot(b, PENDING))
            b.ret(word(0))

    def raise_to(self, b: ir.IRBuilder, t: cps.ApplyCont, exception, h, blocks: dict, ret):
        """A jump to an exception continuation h: a raise (t.raises) records its site first."""
        direct = h is self.program.uncaught or not self.catching
        if t.raises and direct:                  # nothing can catch it: report at the raise
            self.report_now(b, "uncaught exception", t.loc, exception, t.args[0].var.type)
            return
        if t.raises:
            self.record(b, "uncaught exception", t.loc, exception, t.args[0].var.type)
        self.pass_on(b, h, exception, blocks, ret)

    def raise_failure(self, b: ir.IRBuilder, h, message: str, loc, args: list, types: list):
        """A failing primitive raising its predefined exception (the tag of PREDEFINED) to h."""
        blocks, ret = self.here
        self.record(b, message, loc, args[0] if args else None, types[0] if types else None)
        self.pass_on(b, h, self.nullary(cps.PREDEFINED[message][0]), blocks, ret)

    def test_flag(self, b: ir.IRBuilder, t: cps.Apply, blocks: dict, ret):
        """After a call that may raise: if the flag is set, clear it and go to the handler, or
        return at once to the caller (which tests it in turn), or report (uncaught)."""
        if t.kind == "direct" and t.func.var not in self.raising:
            return
        slot = self.exception_slot(b, PENDING)
        pending = b.load(slot, "pending")
        raised = b.function.append_basic_block("raised")
        returned = b.function.append_basic_block("returned")
        b.cbranch(b.icmp_unsigned("!=", pending, word(0)), raised, returned)
        b.position_at_end(raised)
        h = t.exn.var
        if h in blocks:                            # caught here: clear the flag
            b.store(word(0), slot)
            self.goto(b, h, [pending], blocks)
        elif h is self.program.uncaught:
            self.pass_on(b, h, pending, blocks, ret)
        else:                                      # the flag stays set for the caller
            b.ret(word(0))
        b.position_at_end(returned)

# %% [markdown]
# Last, what only the second lowering uses (`LC_EXCEPTIONS=traps`, whose
# section follows): the global `lc_trap` that points to the innermost trap
# record, LLVM's `setjmp`/`longjmp` intrinsics, a trap record in the frame
# of a function that calls with a handler of its own (`frame_trap`), filled
# before such a call (`push_trap`), and `lc_throw`, which jumps to it. And
# `lc_uncaught`, which both lowerings use: the report, printed from the
# record of the first raise.

# %%
#| export
class Backend(Backend):
    def trap_global(self) -> ir.GlobalVariable:
        """lc_trap: the address of the innermost trap record (0: none)."""
        if "lc_trap" not in self.module.globals:
            g = ir.GlobalVariable(self.module, I64, "lc_trap")
            g.initializer, g.linkage = word(0), "internal"
        return self.module.globals["lc_trap"]

    def intrinsic(self, name: str, result, params: list) -> ir.Function:
        if name not in self.module.globals:
            ir.Function(self.module, ir.FunctionType(result, params), name)
        return self.module.globals[name]

    def frame_trap(self, f: ir.Function, entry, term):
        """With traps, a function that calls with a handler of its own gets one trap record in
        its frame, at the start of its entry block: its calls are never nested in one frame."""
        if self.lowering == "traps" and any(type(n) is cps.Apply and type(n.exn.var.binder) is cps.LetCont
                                            for n in cps.walk(term)):
            self.trap_records[f] = ir.IRBuilder(entry).alloca(ir.ArrayType(I8P, 6), name="trap")

    def push_trap(self, b: ir.IRBuilder, t: cps.Apply, blocks: dict):
        """Before a call that raises to a handler of this function: fill the frame's trap record
        (LLVM's setjmp buffer: frame address, resume address, stack pointer; then the previous
        record) and make it the innermost. The resumed path restores the previous record and goes
        to the handler with the exception. Returns the previous record, which the caller restores
        after the call; None for a call that needs no trap."""
        if self.lowering != "traps" or t.exn.var not in blocks:
            return None
        if t.kind == "direct" and t.func.var not in self.raising:     # it cannot raise: no trap
            return None
        f = b.function
        record = self.trap_records[f]
        slot = lambda i: b.gep(record, [ir.Constant(I32, 0), ir.Constant(I32, i)])
        b.store(b.call(self.intrinsic("llvm.frameaddress.p0", I8P, [I32]), [ir.Constant(I32, 0)]), slot(0))
        b.store(b.call(self.intrinsic("llvm.stacksave.p0", I8P, []), []), slot(2))
        buffer = b.bitcast(record, I8P)
        resumed = b.call(self.intrinsic("llvm.eh.sjlj.setjmp", I32, [I8P]), [buffer])
        landing = f.append_basic_block("trapped")
        go = f.append_basic_block("protected")
        b.cbranch(b.icmp_unsigned("!=", resumed, ir.Constant(I32, 0)), landing, go, )
        b.position_at_end(landing)
        b.store(b.ptrtoint(b.load(slot(5)), I64), self.trap_global())
        pending = self.exception_slot(b, PENDING)
        exception = b.load(pending, "pending")
        b.store(word(0), pending)
        self.goto(b, t.exn.var, [exception], blocks)
        b.position_at_end(go)
        previous = b.load(self.trap_global(), "previous")
        b.store(b.inttoptr(previous, I8P), slot(5))
        b.store(b.ptrtoint(buffer, I64), self.trap_global())
        return previous


# %% [markdown]
# A raise under this lowering calls `lc_throw`. With a trap record in
# `lc_trap`, it jumps there: the `setjmp` of `push_trap` returns a second
# time, now with a value other than 0, and its `trapped` block puts back
# the previous record, takes the exception from `pending` and goes to the
# handler. With none, the raise is uncaught, and `lc_uncaught` reports it
# from the site recorded at the raise: the message's beginning, then, for
# an exception with a value, the value (printed by the function the site
# names) and the message's end.

# %%
#| export
class Backend(Backend):
    def thrower(self) -> ir.Function:
        """lc_throw(), made once per module: jump to the innermost trap record, or report."""
        if "lc_throw" in self.module.globals:
            return self.module.globals["lc_throw"]
        f = ir.Function(self.module, ir.FunctionType(VOID, []), "lc_throw")
        f.linkage = "internal"
        for attribute in ("noreturn", "noinline", "cold"):
            f.attributes.add(attribute)
        b = ir.IRBuilder(f.append_basic_block("entry"))
        trap = b.load(self.trap_global())
        none, jump = f.append_basic_block("none"), f.append_basic_block("jump")
        b.cbranch(b.icmp_unsigned("==", trap, word(0)), none, jump)
        b.position_at_end(none)
        b.call(self.uncaught_report(), [])
        b.unreachable()
        b.position_at_end(jump)
        b.call(self.intrinsic("llvm.eh.sjlj.longjmp", VOID, [I8P]), [b.inttoptr(trap, I8P)])
        b.unreachable()
        return f

    def uncaught_report(self) -> ir.Function:
        """lc_uncaught(), made once per module: report the recorded raise site and stop."""
        if "lc_uncaught" in self.module.globals:
            return self.module.globals["lc_uncaught"]
        f = ir.Function(self.module, ir.FunctionType(VOID, []), "lc_uncaught")
        f.linkage = "internal"
        f.attributes.add("noreturn")
        f.attributes.add("cold")
        b = ir.IRBuilder(f.append_basic_block("entry"))
        site = b.inttoptr(b.load(self.site_global()), I64.as_pointer())
        prefix, rest, printer = (b.load(b.gep(site, [word(i)])) for i in range(3))
        no_value = f.append_basic_block("no.value")
        value = f.append_basic_block("value")
        b.cbranch(b.icmp_unsigned("==", rest, word(0)), no_value, value)
        b.position_at_end(no_value)
        b.call(self.rt["lc_fail"], [b.inttoptr(prefix, I8P)])
        b.unreachable()
        b.position_at_end(value)
        b.call(self.rt["lc_fail_begin"], [b.inttoptr(prefix, I8P)])
        show = b.inttoptr(printer, ir.FunctionType(VOID, [I64, I64]).as_pointer())
        b.call(show, [b.load(self.exception_slot(b, SITE_VALUE)), word(1)])
        b.call(self.rt["lc_fail"], [b.inttoptr(rest, I8P)])
        b.unreachable()
        return f

# %% [markdown]
# A function that may raise, and a caller that catches: `risky` raises
# to its own exception continuation (it records the site, stores the
# exception in `pending`, returns), and the call in the `try` is followed
# by the test, whose `raised` block clears the flag and branches to the
# handler. `pure` cannot raise: its call has no test.

# %%
catching = Source("catching.l", """exception Big(Int)
def pure(n) = n * 2
def risky(n) = if (n > 5) raise(Big(n)) else n
print(try { pure(3) + risky(7) } catch { Big(k) -> k })
""")


def defined(module, name: str) -> str:
    """The text of one function of a module."""
    text = str(module)
    start = text.index(f'define linkonce_odr fastcc i64 @"{name}') if name != "init" else text.index('define linkonce_odr tailcc i64 @"init')
    return text[start:text.index("\n}", start) + 2]


catching_module = to_llvm(catching, optimiser=False)
print(defined(catching_module, "risky"))
print(defined(catching_module, "init"))

# %% [markdown]
# ### The second lowering: trap frames
#
# With `LC_EXCEPTIONS=traps` (an environment variable read as the module is
# made, so that tests and benchmarks can choose), the same CPS gets OCaml's
# lowering instead. A call that may raise to a handler of its own function
# is *protected*: before it, the function fills a *trap record* in its
# frame — LLVM's `setjmp` buffer of five words (the frame address, the
# resume address that `llvm.eh.sjlj.setjmp` writes, the stack pointer),
# then the address of the previous record — and makes it the innermost, in
# the global `lc_trap`; after it, it puts the previous one back. A raise to
# the function's own exception continuation records its site, stores the
# exception in `pending` and calls `lc_throw`, which `longjmp`s to the
# innermost record (`llvm.eh.sjlj.longjmp`) — or, if there is none, reports
# the exception as uncaught. At the record, `setjmp` returns a second
# time, not 0: the function restores the previous record, takes the
# exception and goes to its handler. No test follows any call.
#
# Three decisions, each for a reason:
#
# - **A record per protected call, not per `try`.** In CPS a `try` is not
#   a region: it is a handler that some calls name. Pushing at each such
#   call needs nothing but the call, and one record per frame suffices,
#   since two calls of one frame are never in progress at once; a `try`
#   whose block makes one call (the common case) pays the same either way.
#   A call of a direct function that cannot raise (`raising`) needs no
#   record.
# - **Values live across `setjmp` are in memory.** LLVM's lowering of the
#   intrinsic treats every register as clobbered when `setjmp` returns the
#   second time, so whatever the handler uses is reloaded from the frame —
#   where the conservative scan of the collector finds it. The frames a
#   `longjmp` jumps over are below the restored stack pointer and are not
#   scanned again, which is right: they are dead. The tests run a raise
#   through frames holding the only pointers to young blocks under both
#   lowerings and the stress mode of the collector.
# - **A program that catches keeps its callee-saved registers.** The
#   record holds the frame address, so a function with a record has a
#   frame pointer, and LLVM cannot keep one across calls of functions that
#   save no register (the attribute of the section on registers): it fails
#   with "Interference usage of base pointer/frame pointer". Under traps,
#   the functions of a program that catches keep their callee-saved
#   registers — the price being the stale pointers that the attribute
#   exists to avoid.
#
# ### Measured, and chosen
#
# What each costs, measured by `bench/exceptions.py` (`python
# bench/exceptions.py --json bench/exceptions.json`: pairs of programs that
# differ in one thing, built under each lowering as executables and run in
# alternation, five times each, the median of the user and system CPU
# time; the cost is the difference of the two medians divided by how many
# times the thing happens):
#
# - **a call**: `fib(37)`, whose guard `if (n < 0) raise(Negative)` is
#   never taken, without any `try` (so, by the rule above, no test and no
#   trap: the code of a program without exceptions) and inside one `try`
#   (every call of `fib` is then followed by the test of the flag);
# - **a `try` entered** without a raise: a loop that calls a function that
#   may raise, inside a `try` and outside, built without chapter 9's
#   optimiser (which would inline the function, leaving no call to protect);
# - **a raise caught at depth 1, 20 and 100,000**: a loop around a `try`
#   whose block calls a recursion of that depth, raising at the bottom,
#   against the same recursion returning normally. LLVM turns the returning
#   recursion into a loop, or into its result, so the difference is the cost
#   of the descent and the raise together, which is the price a program
#   pays; the last column divides the raising program's whole time by the
#   number of raises.

# %%
measured = json.loads(Path("../bench/exceptions.json").read_text())
print("\n".join(machine_lines(measured["machine"])))
print(f"{'lowering':8} {'what':22} {'without s':>9} {'with s':>8} {'count':>11} {'ns each':>11} {'with/count ns':>14}"
      f" {'runs apart':>11}")
for kind, rows in measured["lowerings"].items():
    for name, r in rows.items():
        apart = r["with"]["min"] > r["without"]["max"] or r["with"]["max"] < r["without"]["min"]
        print(f"{kind:8} {name:22} {r['without']['median']:9.3f} {r['with']['median']:8.3f} {r['count']:11,}"
              f" {r['ns_each']:11.2f} {r['with_ns_each']:14.2f} {'yes' if apart else 'no':>11}")
flag, traps = measured["lowerings"]["flag"], measured["lowerings"]["traps"]
for kind, rows in (("the flag's test after each call of fib", flag), ("traps, the same calls", traps)):
    print(f"{kind}: {rows['call']['with']['median'] / rows['call']['without']['median'] - 1:+.0%} on its time")
for depth in (20, 100000):
    r = flag[f"raise at depth {depth}"]
    print(f"the flag, a raise at depth {depth}, descent included: {r['ns_each'] / depth:.1f} ns per frame")
print(f"traps, a try entered: {traps['try']['ns_each']:.2f} ns; the flag: {flag['try']['ns_each']:.2f} ns")

# %% [markdown]
# And the machine code of the `call` line's program that catches
# (`bench/exceptions.py`'s): the `push` instructions in `fib` under each
# lowering, which the reading below explains.

# %%
from exceptions import PAIRS as EXCEPTION_PAIRS   # bench/exceptions.py: its programs  # noqa: E402

FIB_TRY = Source("fib_try.l", EXCEPTION_PAIRS["call"][2])
for chosen in LOWERINGS:
    os.environ["LC_EXCEPTIONS"] = chosen
    fib_code = re.search(r"\nfib_\d+:\n(.*?)\.Lfunc_end", pipeline.show("asm", FIB_TRY), re.S).group(1)
    print(f"{chosen}: {fib_code.count('pushq')} pushes in fib")
del os.environ["LC_EXCEPTIONS"]

# %% [markdown]
# Reading the table. **A program without `try` pays nothing** under
# either lowering: its code is what it was before L had exceptions (the
# tests check, for every program of the corpus and the examples, that its
# module has no flag, no raise site and no extra root). In a program that
# catches, the flag puts a load, a compare and a branch after each call of
# a function that may raise: on `fib`, which does nothing but call, the
# fraction of its time printed above. Trap frames put no test there, but
# in this measurement their `call` line is not noise either (the last
# column says whether the five runs of the two programs of a line overlap
# at all): under traps a
# program that catches loses the attribute of the section on registers,
# and `fib` saves six callee-saved registers in every call (the six
# `push`es counted just above), the fraction printed for traps.
# **Entering a `try`** costs the flag nothing of its own, and costs a trap
# a `setjmp` and a few stores (the trap record's words, and `lc_trap` set
# before the call and put back after it). **A raise** costs the flag a return and a
# test per frame it crosses (the nanoseconds per frame printed above), so
# its price grows with the depth; under traps it is one `longjmp` at any
# depth. Here,
# since nothing is tested after the calls, LLVM did more: it inlined
# `down` where `loop` calls it, made its recursion a loop, and deleted
# the loop, whose only way out was the raise — so under traps the
# programs raise at once, with no descent at all, and the traps' lines
# for depths 20 and 100,000 time the raise alone (`lc show llvm-opt`
# shows it: the protected call is gone, the block after `setjmp`
# allocates `Bottom(0)` and calls `lc_throw`). At depth 1, both are a
# branch: LLVM inlined the raise into the handler's function.
#
# **The default is the flag.** Its costs fall on programs that catch and
# call raising functions in their hot loops; those of the traps fall on
# every `try`, and on every program that catches through the lost
# attribute, whose absence the section on registers showed costs
# `primes` hundreds of times the pinned blocks and a larger heap. The flag
# also asks nothing of the collector or of LLVM's frame layout, and keeps
# a raise an ordinary sequence of returns,
# which debuggers and the stack-overflow handler of chapter 10b understand.
# A program that raises deep and often would choose `LC_EXCEPTIONS=traps`.
#
# The stack, before and after a raise in `down(0)` caught in `loop`, four
# frames up, under trap frames: on the left, `loop` has filled its trap record and called
# `down(3)`; `down(0)` raises: it records the site, stores the exception
# in `pending` and jumps to the record `lc_trap` points to. On the right,
# the stack pointer is back in `loop`'s frame, which runs its handler; the
# frames of `down` are below it, dead, and the collector no longer scans
# them. Under the flag, the same frames would be left one by one, each
# `down` returning at once after its test.

# %%
def stack_picture(title: str) -> str:
    """Two stacks, before and after a raise caught four frames up, with trap frames (an SVG)."""
    frames = ["main (lc_run)", "loop: trap record ← lc_trap", "down(3): 1 + down(2)", "down(2): 1 + down(1)",
              "down(1): 1 + down(0)", "down(0): raise(Bottom(0))"]
    w, h, gap = 250, 26, 70
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w + gap + 20}" height="{(len(frames) + 3) * h + 20}"'
           f' font-family="monospace" font-size="12" role="img" aria-label="{_escape(title)}">',
           f"<title>{_escape(title)}</title>"]
    for column, (caption, live, flag) in enumerate([("at the raise", len(frames), "pending = Bottom(0)"),
                                                    ("after the longjmp", 2, "pending = 0, lc_trap = previous")]):
        x = 10 + column * (w + gap)
        out.append(f'<text x="{x}" y="16" font-weight="bold">{caption}</text>')
        for i, frame in enumerate(frames):
            y = 26 + i * h
            alive = i < live
            fill = "#e0f2fe" if alive else "#f3f4f6"
            stroke = "#0369a1" if alive else "#d1d5db"
            text = frame if alive else "(below the stack pointer: dead)"
            if column == 1 and i == 1:
                text = "loop: handler Bottom(k) -> k"
            out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h - 4}" fill="{fill}" stroke="{stroke}"/>')
            out.append(f'<text x="{x + 6}" y="{y + 15}" fill="{"#111827" if alive else "#9ca3af"}">{_escape(text)}</text>')
        if column == 0:
            y1, y0 = 26 + (len(frames) - 1) * h + 11, 26 + h + 11
            out.append(f'<path d="M{x + w},{y1} C{x + w + 50},{y1} {x + w + 50},{y0} {x + w},{y0}" stroke="#b45309"'
                       ' fill="none"/>')
            out.append(f'<text x="{x + w + 6}" y="{(y0 + y1) // 2}" fill="#b45309">longjmp</text>')
        y = 26 + (len(frames) + 1) * h
        out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h - 4}" fill="#fef3c7" stroke="#b45309"/>')
        out.append(f'<text x="{x + 6}" y="{y + 15}">{_escape(flag)}</text>')
    return "\n".join(out + ["</svg>"])


stack_alt = ("Two stacks of frames, top of the program first. At the raise: main; loop, whose frame holds the trap"
             " record that lc_trap points to; down(3), down(2), down(1); and down(0), which raises, sets pending to"
             " Bottom(0) and jumps back to loop's record. After the longjmp: only main and loop are live, loop runs"
             " its handler, pending is 0 and lc_trap the previous record; the frames of down are below the stack"
             " pointer, dead.")
display(SVG(stack_picture(stack_alt)), metadata={"alt": stack_alt})

# %% [markdown]
# ## Printing, directed by types
#
# After monomorphisation every CPS variable has a type without variables, so
# `print(x)` knows what `x` is. The back end makes one LLVM function per type
# printed, `print.T(value, nested)`, once per module: for the base types a
# call into the runtime; for a function the text `<function>`; for a tuple,
# the printers of its components between parentheses. `nested` says
# whether the value is inside a tuple or a data value, where a string
# prints quoted. Fixed text — `Circle(`, `, `, `)` — goes out in one call
# of `lc_print_str` on a constant string rather than a character at a
# time (`text`): every data type that is printed, or matched by a `match`
# that can fail, gets a printer (a failed match prints the value), so a
# program with a thousand such data types has a thousand printers, and the fewer instructions they take, the sooner LLVM
# is done with them.

# %%
#| export
class Backend(Backend):
    def printer(self, t) -> ir.Function:
        key = show_type(t)
        if key in self.printers:
            return self.printers[key]
        f = ir.Function(self.module, ir.FunctionType(VOID, [I64, I64]), f"print.{key}")
        f.linkage = "internal"
        self.printers[key] = f
        b = ir.IRBuilder(f.append_basic_block("entry"))
        v, nested = f.args
        v.name, nested.name = "value", "nested"
        if t.name in ("Int", "Bool", "Unit"):
            b.call(self.rt["lc_print_" + t.name.lower()], [v])
        elif t.name == "String":
            with b.if_else(b.icmp_signed("!=", nested, word(0))) as (quoted, plain):
                with quoted:
                    b.call(self.rt["lc_print_quoted"], [v])
                with plain:
                    b.call(self.rt["lc_print_str"], [v])
        elif t.name == "->":
            self.text(b, "<function>")
        elif t.name == "*":
            self.text(b, "(")
            for i, ft in enumerate(t.args):
                if i:
                    self.text(b, ", ")
                b.call(self.printer(ft), [b.load(self.field(b, v, i)), word(1)])
            self.text(b, ")")
        else:
            self.print_data(f, b, v, t)
        b.ret_void()
        return f

    def text(self, b: ir.IRBuilder, chars: str):
        """Print constant text: a character, or a whole constant string."""
        if len(chars) == 1:
            b.call(self.rt["lc_print_char"], [word(ord(chars))])
        else:
            b.call(self.rt["lc_print_str"], [self.const(chars)])

# %% [markdown]
# For a data type, the printer is a `switch` on the tag with one arm per
# constructor, each printing the constructor's name and its fields with the
# printers of the field types. These come from the `data` declaration with
# the type's arguments put in for its parameters (chapter 5b's
# `field_type`: in a `List<Int>`, the fields of `Cons` are `Int` and
# `List<Int>`). A recursive type gets a recursive printer.

# %%
#| export
class Backend(Backend):
    def print_data(self, f: ir.Function, b: ir.IRBuilder, v: ir.Value, t):
        params, constructors = self.datas[t.name]
        subst = dict(zip(params, t.args))
        done = f.append_basic_block("done")
        switch = b.switch(self.header_tag(b, b.load(b.inttoptr(v, I64.as_pointer()))), done)
        for tag, (name, fields) in enumerate(constructors):
            arm = f.append_basic_block(name)
            switch.add_case(word(tag), arm)
            b.position_at_end(arm)
            self.text(b, name + "(" if fields else name)
            if fields:
                for i, st in enumerate(fields):
                    if i:
                        self.text(b, ", ")
                    b.call(self.printer(field_type(st, subst)), [b.load(self.field(b, v, i)), word(1)])
                self.text(b, ")")
            b.branch(done)
        b.position_at_end(done)

# %% [markdown]
# ## Where a stack overflow happened: call sites
#
# A recursion that exhausts the stack is a runtime error, reported — as the
# reference interpreter reports it — at the last call made: the innermost
# call that is not a tail call and is still under way. The runtime catches
# the overflow in a signal handler (chapter 10b), so the handler must find out
# which call that was. The first version of this back end stored the
# number of the call site in a global word before every call: one store per
# call, paid millions of times for an event that almost never happens.
#
# Debuggers answer the same question for free: the *return addresses* on
# the stack say which calls are under way, and a table the compiler emits
# maps addresses to source lines. We do the same, in three steps.
#
# 1. **Every call gets a location**, LLVM's debug location `!dbg`: line
#    n + 1 for call site n — a call that is not a tail call, at a place in
#    the source — and line 0 for any other call (a tail call, whose frame
#    replaces its caller's and is no call site of its own; the calls of the
#    initialisers). Why debug locations rather than metadata of our own:
#    LLVM keeps them through its optimisations, and when it inlines a
#    function into a call, the inlined instructions record where
#    (`inlinedAt`). A tail call `f(x)` in `def apply(f, x) = f(x)`,
#    inlined into `deep` at the call site `apply(deep, n + 1)`, is now an
#    ordinary call of `deep`'s, whose frame stands for the call site where
#    `apply` was called — exactly what the interpreter reports, and found by
#    following `inlinedAt` from a line 0 to a line that is a call site. None
#    of this becomes debugging information in the object file: the compile
#    unit says `emissionKind: NoDebug` (unless `lc build -g` asks for real
#    lines: section "Debug information" near the end of the chapter).
# 2. **After optimisation, each call that belongs to a call site gets a
#    label on either side**, written as inline assembly (`771:` before,
#    `772:` after: the assembler's local numeric labels, which the
#    assembly listing below shows renamed `.Ltmp0` and `.Ltmp1`), and the
#    second one adds an entry *(before, after, call site)* to a section
#    `lc_sites`. Between the
#    two labels lies that one call and nothing else that calls (moves of its
#    arguments and result), so a return address in (before, after] is that
#    call's. The labels come after optimisation, not before, because an
#    assembly statement is opaque to LLVM: one after each call would stop,
#    for one, the tail-recursion elimination that turns one of `fib`'s
#    two recursive calls into a loop (shown below). They cost nothing at run
#    time: a label is not an instruction.
# 3. **The signal handler** looks at the faulting instruction — a fault
#    while making the call, when pushing the return address or an argument,
#    is a pc in [before, after) — then up the stack from the faulting stack
#    pointer for the first word in an interval: the innermost call under
#    way. No store, no check, in the generated code.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: LLVM's own ways to find a call</p>
#
# LLVM has mechanisms of its own that we considered, and that do not fit
# as well. `llvm.experimental.stackmap` placed after a call records the
# address after the call *and* the moves that follow it, and lives in a
# section, `.llvm_stackmaps`, that the JIT gives us no way to find.
# Statepoints (`gc.statepoint`) record exact return addresses, but a
# statepoint call cannot be inlined, so they too would have to be made
# after optimisation, and they bring precise stack maps — a collector
# design of their own (chapter 10b's design note "why not precise
# roots"). A line table (DWARF `.debug_line`) would have to be parsed by
# the runtime, and the JIT does not load it.
#
# </div>
#
# Finding the tables. A program compiled in parts (chapter 11) has one
# table per part, each at the start of its part's `lc_sites` section: a
# header of two words — the end of the entries and the address of the next
# part's table — written by module-level assembly (which LLVM emits before
# the functions), the entries of the functions, then a marker of the end (a
# global variable in the same section, which LLVM emits after the
# functions). Part k's table is named `lc_sites.k`; `main` passes
# `lc_sites.0` to the runtime, and each header names the next, so the
# JIT's loader (chapter 11) or the linker joins them.

# %%
#| export
from types import SimpleNamespace

SITE_TABLE = "lc_sites.{}"         # the symbol of the table of call sites of part k of a program
DEBUG_INFO = SimpleNamespace(on=False, optimised=True)    # `lc build -g`: section "Debug information"


def l_name(function: str) -> str:
    """The L name of the function that holds a call site, for backtraces (chapter 10b): `fib` for
    `fib_1`, `x` for the initialiser `init.x_3`, "" for a top-level statement's."""
    name = function.removeprefix("init.")
    return "" if name.startswith("statement.") else re.sub(r"_\d+$", "", name)


class Backend(Backend):
    def debug_info(self):
        """The compile unit that the locations of calls hang from. It emits no debugging
        information (emissionKind: NoDebug): the locations are for `call_site_table` only
        (unless `lc build -g` asked for full debug information: section "Debug information")."""
        m = self.module
        self.debug = DebugInfo(self) if DEBUG_INFO.on else None
        if self.debug is None:
            self.file = m.add_debug_info("DIFile", {"filename": self.source_name, "directory": ""})
            self.unit = m.add_debug_info("DICompileUnit", {
                "language": ir.DIToken("DW_LANG_C"), "file": self.file, "producer": "lcompiler",
                "isOptimized": True, "runtimeVersion": 0, "emissionKind": ir.DIToken("NoDebug")},
                is_distinct=True)
        m.add_named_metadata("llvm.dbg.cu", self.unit)
        m.add_named_metadata("llvm.module.flags", m.add_metadata(
            [ir.Constant(I32, 2), ir.MetaDataString(m, "Debug Info Version"), ir.Constant(I32, 3)]))
        self.no_type = m.add_debug_info("DISubroutineType", {"types": m.add_metadata([])})
        self.scopes, self.site_numbers, self.site_functions = {}, {}, []

    def subprogram(self, f: ir.Function, node=None):
        """f's scope, which the locations of its calls name (node: the CPS f is made from)."""
        if self.debug is not None:
            self.scopes[f] = self.debug.subprogram(f, node)
            return
        self.scopes[f] = self.module.add_debug_info("DISubprogram", {
            "name": f.name, "scope": self.file, "file": self.file, "line": 0, "type": self.no_type,
            "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"), "unit": self.unit}, is_distinct=True)
        f.set_metadata("dbg", self.scopes[f])

    def locate(self, call: ir.CallInstr, loc, site: bool = True):
        """Give a call its location: line n + 1 for call site n (a call at loc that is a site:
        not a tail call), line 0 for a call whose frame is not a call site of its own."""
        line = 0
        if loc is not None and site:
            text = render(RunError(OVERFLOW, loc))
            if text not in self.site_numbers:
                self.site_numbers[text] = len(self.call_sites)
                self.call_sites.append(text)
                self.site_functions.append(l_name(call.parent.parent.name))   # for backtraces (10b)
            line = self.site_numbers[text] + 1
        if self.debug is not None:
            self.debug.locate(call, loc, line - 1 if line else None)
            return
        scope = self.scopes[call.parent.parent]
        call.set_metadata("dbg", self.module.add_debug_info("DILocation", {"line": line, "column": 0, "scope": scope}))

# %% [markdown]
# ## The whole module
#
# `compile()` emits every function, then one initialiser function per
# dynamic definition and top-level statement, and `lc_program`, which calls
# the initialisers in program order and stores each definition's value in its
# slot. Last comes `main`, the C entry point, which hands `lc_program` to the
# runtime's `lc_run` together with the roots (`lc_globals`) and the messages
# the runtime prints itself: memory exhaustion, which has no source
# location, and stack overflow, which is reported at the last call made —
# the reference interpreter's choice: `lc_run` receives the messages
# `lc_call_sites`, rendered by the compiler, one per call site, and the
# first part's table of call sites, `lc_sites.0`. The back end defines an
# empty one (`weak`: `call_site_table` replaces it), so that a module
# compiled without the table still runs, and reports an overflow without
# its location.
#
# The method reads in three steps. First the body of every function, with
# `me` set when the function calls itself in tail position, so that `body`
# makes its `recur` block. Then an initialiser `init.…` per dynamic
# definition or statement, called from `lc_program` (with `tailcc`, the
# initialisers' convention), its result stored into the definition's slot.
# Last `main`. The two messages that `main` passes are whole lines,
# rendered at compile time with the file's name and `runtime error:`: the
# runtime writes these messages as they are, and never builds one itself.

# %%
#| export
class Backend(Backend):
    def compile(self) -> ir.Module:
        for d in self.program.definitions:
            if type(d.value) is cps.Lambda:
                f = self.functions[d.var]
                me = d.var if self_tail_calls(d.var, d.value) else None
                self.body(f, d.value.body, {}, d.value.cont, d.value.params, me)
        entry = ir.Function(self.module, ir.FunctionType(I64, []), "lc_program")
        self.subprogram(entry)
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        for i, d in enumerate(self.program.definitions):
            if d.body is not None:
                name = self.name(d.var) if d.var is not None else f"statement.{i}"
                f = ir.Function(self.module, ir.FunctionType(I64, []), "init." + name)
                f.calling_convention, f.linkage = "tailcc", LINKAGE
                if not self.traps:
                    saves_no_registers(f)
                self.subprogram(f, d.body)
                self.body(f, d.body, {}, None)
                result = b.call(f, [], cconv="tailcc")
                self.locate(result, None)
                if d.var is not None:
                    b.store(result, self.slot(b, d.var))
        b.ret(word(0))
        self.main(entry)
        return self.module

    def main(self, program: ir.Function):
        """int main(): the runtime's lc_run starts the program on a big stack, with its roots."""
        run_type = ir.FunctionType(I32, [program.type, I64.as_pointer(), I64, I8P, I8P, I8P.as_pointer(), I64,
                                         I64.as_pointer()])
        lc_run = ir.Function(self.module, run_type, "lc_run")
        main = ir.Function(self.module, ir.FunctionType(I32, []), "main")
        b = ir.IRBuilder(main.append_basic_block("entry"))
        where = f"{self.source_name}: runtime error: "
        overflow = where + OVERFLOW + "\n"
        memory = where + "out of memory: the heap reached its limit (set LC_HEAP_LIMIT to change it)\n"
        roots = b.gep(self.globals, [ir.Constant(I32, 0), ir.Constant(I32, 0)])
        n = word(self.globals.type.pointee.count)
        named = self.call_sites + (self.site_functions if self.debug is not None else [])   # -g: with names
        sites = ir.GlobalVariable(self.module, ir.ArrayType(I8P, max(1, len(named))), "lc_call_sites")
        texts = [self.string(s).bitcast(I8P) for s in named] or [ir.Constant(I8P, None)]
        sites.initializer, sites.global_constant = ir.Constant(sites.type.pointee, texts), True
        first = b.gep(sites, [ir.Constant(I32, 0), ir.Constant(I32, 0)])
        table = ir.GlobalVariable(self.module, ir.ArrayType(I64, 2), SITE_TABLE.format(0))
        table.initializer = ir.Constant(table.value_type, None)     # empty, until call_site_table
        table.linkage = "weak"
        b.ret(b.call(lc_run, [program, roots, n, self.cstring(b, overflow), self.cstring(b, memory),
                              first, word(len(self.call_sites) * (1 if self.debug is None else -1)),
                              b.gep(table, [ir.Constant(I32, 0), ir.Constant(I32, 0)])]))

# %% [markdown]
# ## From source to module, verified and optimised
#
# The whole pipeline of the compiler, so far: parse, name, type (chapters
# 4a, 4b and 5), monomorphise (5b), convert to CPS (7), optimise (9),
# closure-convert (8), shrink again (9), translate. `to_llvm` runs those stages and returns the
# module as llvmlite builds it: a Python object that prints as LLVM
# assembly. `optimise` hands the text to LLVM, runs the
# *verifier* (a module that breaks an SSA rule — a use not dominated by its
# definition, a φ-node that disagrees with the predecessors of its block, a
# type mismatch — is a bug of this compiler, and we want to hear about it
# here, not as a crash later), then LLVM's standard O2 pipeline through the
# new pass manager that llvmlite exposes (`create_pass_builder` with
# `speed_level=2`: inlining, SROA (memory in a function's frame turned
# into values in registers), instruction combining, GVN (a value computed
# twice computed once), loop optimisations, tail-call elimination of self-recursion into loops…), and
# verifies again.
#
# The back end, like every stage since chapter 4a, builds its objects with
# Python's cycle collector paused (`collector_paused`): a compilation makes
# millions of small objects that live until it ends, and the collector
# would walk them again and again to find no cycle. It was the last stage
# to run without the pause, and the one that needed it most: llvmlite
# makes an object for every instruction, operand and name of the module.
#
# <div class="admonition note">
#
# <p class="admonition-title">Design note: LLVM text between llvmlite's two halves</p>
#
# llvmlite has two halves: `llvmlite.ir`, a builder written in pure Python
# that makes the module as Python objects and prints it as LLVM's text, and
# `llvmlite.binding`, which hands that text to the real LLVM library to
# parse, verify, optimise and compile. So the module crosses from one to
# the other as text, in `verified`. Building it directly in LLVM's memory
# would save the printing and the parsing, but llvmlite's binding offers no
# instruction builder; the text is also what `lc show llvm` prints, so what
# the reader sees is exactly what LLVM reads.
#
# </div>

# %%
#| export
import llvmlite.binding as llvm

from lcompiler import addlang, pipeline
from lcompiler.support import collector_paused, target_machine


def to_llvm(source: Source, optimiser: bool = True) -> ir.Module:
    """The LLVM module of a well-typed L program (CompileError if it is not one): the pipeline of
    chapter 4 up to its stage `llvm` (below), with chapter 9's optimiser or without it."""
    return pipeline.compile_to("llvm", source, optimiser)[0]


def verified(module) -> llvm.ModuleRef:
    """LLVM's own form of a module (text or llvmlite.ir), checked by LLVM's verifier."""
    with collector_paused():
        text = str(module)
    ref = addlang.load(text)                    # parses and verifies (chapter 1)
    ref.name = getattr(module, "name", "module")
    return ref


def optimise(module, level: int = 2) -> llvm.ModuleRef:
    """Verify, run LLVM's O<level> pipeline, verify again."""
    ref = verified(module)
    if level:
        options = llvm.create_pipeline_tuning_options(speed_level=level)
        passes = llvm.create_pass_builder(target_machine(), options)
        passes.getModulePassManager().run(ref, passes)
        ref.verify()
    return ref

# %% [markdown]
# ## Labels, and the table of call sites
#
# `call_site_table` takes an optimised module and returns the module that
# is compiled to machine code. It reads the locations (`call_sites`: for
# each, its call site, found through `inlinedAt` if its line is 0), then
# labels every call whose location has one. It edits LLVM's text, because
# llvmlite cannot insert an instruction into a parsed module; LLVM's
# printer writes one instruction per line, with the attachment `!dbg` last
# but for other attachments, which the pattern keeps. A `tail call tailcc`
# followed by its `ret` stays untouched: it is a jump, and nothing may come
# between it and the `ret`.

# %%
#| export
import re

SITE_SECTION = 'lc_sites,"aw",@progbits'
CALL = re.compile(r"^( +)(.*\bcall\b.*?), !dbg (!\d+)(.*)$", re.M)
LOCATION = re.compile(r"^(!\d+) = (?:distinct )?!DILocation\((.*)\)$", re.M)
TAIL_CALL = re.compile(r"\b(tail call tailcc|musttail call)\b")


def asm_string(text: str) -> str:
    """text as an LLVM string constant."""
    return '"' + text.replace("\\", "\\5C").replace('"', "\\22").replace("\n", "\\0A") + '"'


SITES = re.compile(r"^!lc\.sites = !\{(.*)\}$", re.M)
RUNTIME_CALLEE = re.compile(r'@"?(print\.[^"(]*|lc_[A-Za-z_]+)"?\(')


def debug_sites(text: str) -> dict | None:
    """With full debug information (`lc build -g`, below), the call site of each (line, column)
    that is one, as the named metadata `!lc.sites` lists them; None without it."""
    found = SITES.search(text)
    if found is None:
        return None
    nodes = {n: (int(site), int(line), int(column)) for n, site, line, column in
             re.findall(r"^(!\d+) = !\{i32 (\d+), i32 (\d+), i32 (\d+)\}$", text, re.M)}
    return {(line, column): site for site, line, column in (nodes[n.strip()] for n in found.group(1).split(","))}


def calls_runtime(call: str) -> bool:
    """Is call (LLVM text) a call of the runtime or of a printer? Never a call site; only with
    full debug information do such calls carry a location."""
    callee = RUNTIME_CALLEE.search(call)
    return callee is not None and (callee.group(1).startswith("print.") or callee.group(1) in RUNTIME_FUNCTIONS
                                   or callee.group(1) in ("lc_alloc", "lc_alloc_slow_saving", "lc_barrier"))


def call_sites(text: str) -> dict:
    """The call site of each location of an optimised module (LLVM text), or None: its own
    (its line - 1), else that of the call it was inlined at."""
    numbered = debug_sites(text)         # with full debug information: the lines are real
    own, parents = {}, {}
    for node, fields in LOCATION.findall(text):
        line = re.search(r"\bline: (\d+)", fields)
        line = int(line.group(1)) if line else 0
        if numbered is None:
            own[node] = line - 1 if line else None
        else:
            column = re.search(r"\bcolumn: (\d+)", fields)
            own[node] = numbered.get((line, int(column.group(1)) if column else 0))
        inlined = re.search(r"\binlinedAt: (!\d+)", fields)
        parents[node] = inlined.group(1) if inlined else None
    sites = {}
    for node in own:
        at = node
        while at is not None and own[at] is None:
            at = parents[at]
        sites[node] = None if at is None else own[at]
    return sites

# %% [markdown]
# `call_site_table` labels the calls, then adds the table's header, as
# module-level assembly, and the marker of its end. Part 0's table replaces
# the empty one that the back end defined (`weak`), which the assembly now
# defines.

# %%
#| export
def call_site_table(module, part: int = 0, parts: int = 1) -> llvm.ModuleRef:
    """An optimised module made ready for machine code: a label on each side of every call that
    belongs to a call site, and the table of those labels for the runtime (part k of parts:
    the table links to part k + 1's)."""
    llvm.initialize_native_asmparser()          # the labels are written in assembly
    with collector_paused():
        text = str(module)
    sites = call_sites(text)

    def labelled(m):
        indent, call, node, rest = m.groups()
        n = sites.get(node)
        if n is None or "@llvm." in call or (TAIL_CALL.search(call) and text.startswith(" ret", m.end() + 1)) \
                or calls_runtime(call):
            return m.group(0)                   # not a call site, or a tail call that stays one
        before = asm_string(f"771: # call site {n}")
        after = asm_string(f"772:\n.pushsection {SITE_SECTION}\n.quad 771b, 772b, {n}\n.popsection")
        return (f"{indent}call void asm sideeffect {before}, \"\"()\n{indent}{call}, !dbg {node}{rest}\n"
                f"{indent}call void asm sideeffect {after}, \"\"()")

    name = SITE_TABLE.format(part)
    following = SITE_TABLE.format(part + 1) if part + 1 < parts else "0"
    head = "\n".join([f".pushsection {SITE_SECTION}", ".p2align 3", f".globl {name}", f"{name}:",
                      f".quad lc_sites.end, {following}", ".popsection"])
    empty = re.compile(rf'^@"?{re.escape(SITE_TABLE.format(0))}"? = (weak|external) global .*$', re.M)
    text = empty.sub(f'@"{SITE_TABLE.format(0)}" = external global [2 x i64]', text)   # the asm defines it
    return addlang.load(CALL.sub(labelled, text)
                        + '\n@"lc_sites.end" = internal global i64 0, section "lc_sites"\n'
                        + f"module asm {asm_string(head)}\n")

# %% [markdown]
# The example of step 1: `deep` calls `apply`, which tail-calls its
# argument. Compiled without chapter 9's optimiser (which would inline
# `apply` itself, in the CPS, keeping the same location for the call that
# is left), after LLVM's optimisation (`optimise`, above), `apply` and
# the entry of `deep`'s closure are inlined into `deep`, and
# the one call left carries a location of line 0 in the closure's entry,
# inlined at line 0 in `apply` (a tail call), inlined at line 1 in `deep`:
# call site 0, `apply(deep, n + 1)`. `call_site_table` labels that call,
# and the assembly LLVM makes (for an executable: position-independent
# code) shows the two labels around the `call` and the entry they add to
# `lc_sites`.

# %%
DEEP = """def apply(f, x) = f(x)
def deep(n) = 1 + apply(deep, n + 1) * 2
print(deep(0))
"""


def call_site_example(source):
    optimised = optimise(to_llvm(source, optimiser=False))
    text = str(optimised)
    start = text.index("define linkonce_odr fastcc i64 @deep_")
    deep = text[text.index("@", start) + 1:text.index("(", start)]
    print(text[start:text.index("}\n", start) + 2])
    print("\n".join(line for line in text.splitlines() if "DILocation" in line), "\n")
    assembly = target_machine(executable=True).emit_assembly(call_site_table(optimised))
    start = assembly.index(f"{deep}:\n")
    print(assembly[start:assembly.index(".Lfunc_end", start)])


call_site_example(Source("deep.l", DEEP))

# %% [markdown]
# And why after optimisation: here is `fib` optimised as it is, then with a
# label after each of its calls *before* optimisation. With the labels in
# the way, LLVM no longer turns the second recursive call into a loop.
# (Without chapter 9, whose inliner copies `fib` into itself: this is
# about what LLVM does with the two calls.)

# %%
FIB = Source("fib.l", open("../bench/programs/fib.l").read())
text = str(to_llvm(FIB, optimiser=False))
early = re.sub(r'^(\s+)(%\S+ = call fastcc i64 @"fib_\d+"\(.*)$', r'\1\2\n\1call void asm sideeffect "772:", ""()',
               text, flags=re.M)
for title, module in (("labels after optimisation", text), ("labels before optimisation", early)):
    optimised = str(optimise(module))
    start = optimised.index("define linkonce_odr fastcc i64 @fib_")
    body = optimised[start:optimised.index("\n}\n", start)]
    print(f"{title}: {body.count('call fastcc i64 @fib_')} recursive call(s) in fib")

# %% [markdown]
# The two counts are the point: with the labels placed after optimisation,
# one recursive call is left in `fib`, since LLVM turned the other into a
# loop; with the labels placed before, both calls are still there. An
# assembly statement is a wall that LLVM's optimisations do not see
# through, so it goes in last.

# %% [markdown]
# ## The runtime
#
# The code this chapter generates calls a small runtime written in C: the
# slow path of allocation and the garbage collector, printing, the
# delivery of runtime errors, and the entry point `lc_run`, which runs the
# program on a big stack and catches its overflow. It was written against
# the interface the code generator needs — the block layout above,
# `lc_hp`/`lc_hl`, and the functions declared in `RUNTIME_FUNCTIONS` — and
# it is the next chapter, [chapter 10b](10b_runtime.ipynb): its C is in the
# cells of that notebook, which the export writes to the package's
# `lcompiler/runtime/*.c` and `*.h`, and its module `lcompiler.runtime`
# compiles it (`runtime_library`), for the JIT of chapter 11 and for `lc
# build`. The rest of this chapter uses it to run what it compiles.

# %% [markdown]
# ## Showing LLVM from the command line
#
# The back end is the pipeline's stage `llvm`; two more stages follow it,
# both LLVM's work: `llvm-opt`, the module after the verifier and the O2
# pipeline, and `asm`, the machine code it becomes, as assembly text. So
# `lc show llvm FILE.l` prints the module as the back end makes it, `lc
# show llvm-opt FILE.l` as LLVM's O2 pipeline leaves it, and `lc show asm
# FILE.l` the instructions of the executable that `lc build` writes. (To
# run a program, chapter 11 does the last two stages itself: a small
# module whole, a big one split into parts, in parallel.)
#
# The JIT of chapter 1 and an executable want different machine code.
# MCJIT may load the code anywhere in the 64-bit address space, so its
# target machine uses the *large* code model: a direct call is a `movabs`
# of the callee's address into a register, then a `call` through it. An
# executable is linked in one piece: wherever the system loads it, its code
# and data lie within 2 GB of one another, so `lc build` asks for the
# *small* code model and position-independent code, and a direct call is
# one `call` instruction, relative to the instruction pointer. `target_machine(executable)` makes either — the JIT and
# `lc build` share it, so it lives in the workshop's support module, with
# its code in [appendix B](B_support.ipynb#llvms-description-of-the-machine);
# `asm` shows the executable's, labels of the call-site table included,
# which is what a reader comparing L's machine code with gcc's wants to see.
# Both ask LLVM to start every innermost loop at a multiple of 32 bytes
# rather than its usual 16, so that a small loop never straddles two
# 64-byte lines of code: [chapter 12](12_measuring.ipynb) found `takl`'s
# loop cut in two that way, and measures the rule on every benchmark.

# %% [markdown]
# The next cell registers the three stages with [chapter
# 4](04_pipeline.ipynb)'s pipeline. `@pipeline.stage(name, show=…)` names a
# stage and says how `lc show` prints its result: the module as LLVM text
# for `llvm` and `llvm-opt`, the assembly as it is for `asm`. Each stage
# receives the result of the stage before it, and the `unit` that carries
# the source and what earlier stages left for it (here the `data`
# declarations, which the printers need). The checker of the two LLVM
# stages is LLVM's verifier, and the back end runs with Python's cycle
# collector paused, for the reason given with `to_llvm` above.

# %%
#| export
@pipeline.stage("llvm", show=lambda module, unit: str(module).rstrip("\n"),
                check=lambda module, unit: verified(module))
def llvm_stage(program, unit: pipeline.Unit) -> ir.Module:
    with collector_paused():
        return Backend(program, unit.datas, unit.source.name).compile()


@pipeline.stage("llvm-opt", show=lambda module, unit: str(module).rstrip("\n"),
                check=lambda module, unit: module.verify())
def llvm_opt_stage(module: ir.Module, unit: pipeline.Unit) -> llvm.ModuleRef:
    return optimise(module)


@pipeline.stage("asm", show=lambda text, unit: text.rstrip("\n"))
def asm_stage(module: llvm.ModuleRef, unit: pipeline.Unit) -> str:
    return target_machine(executable=True).emit_assembly(call_site_table(module))

# %% [markdown]
# ## A worked example: a loop, a recursion, a list
#
# Here is a program with a `while` loop, a non-tail recursion and a list,
# and the LLVM the back end makes for its functions (`main`, the printers
# and the initialisers are left out here; `lc show llvm` shows everything).
# The program is compiled without chapter 9's optimiser (`-O0`), which
# would have moved `sum_to`, called once, and `count`, small enough to
# copy into each of its two calls, into the statement that calls them:
# here we want to see each function as the back end translates it.

# %%
EXAMPLE = """data List<a> { Cons(a, List<a>)
  Nil }
def sum_to(n) = {
  var i := 0
  var total := 0
  while (i < n) { i := i + 1; total := total + i }
  total
}
def length(l) = match (l) { Nil -> 0
  Cons(_, rest) -> 1 + length(rest) }
def count(n, acc) = if (n == 0) acc else count(n - 1, Cons(n, acc))
print(sum_to(100), length(count(3, Nil)), count(2, Nil))
"""
module = to_llvm(Source("example.l", EXAMPLE), optimiser=False)


def show_functions(module, names):
    """The LLVM text of the functions of a module whose L names are given."""
    text = str(module)
    for name in names:
        start = re.search(rf"@\"?{name}_\d+\"?\(", text).start()
        start = text.rindex("\ndefine", 0, start) + 1
        print(text[start:text.index("\n}\n", start) + 3])


show_functions(module, ["sum_to", "length", "count"])

# %% [markdown]
# Their control-flow graphs:
#
# Each box is a basic block, a straight run of instructions entered only at
# its top, and each arrow a branch from one block to another. Look for the
# cycles: `sum_to`'s `while` loop is the cycle between `loop_7` and
# `body_13`, and `count`'s tail call to itself the cycle between `recur`
# and `else_41`. `length` has none: its recursion is a `call` instruction
# inside `next_23`, which returns to the next instruction, so it is no
# arrow in the graph of one function.

# %%
text = str(module)
flow_graphs([FlowGraph(llvm_function(text, re.search(rf'@"?({name}_\d+)"?\(', text).group(1)), name)
             for name in ("sum_to", "length", "count")],
            "The control-flow graphs of sum_to, length and count, as the back end translates them")

# %% [markdown]
# Read `sum_to` against the rules: the `while` loop of chapter 7 is a
# recursive continuation, so it is a block (`loop_…`) whose φ-nodes are the
# two variables the loop assigns — SSA construction without an algorithm of
# its own, because the continuation parameters *are* the φ-nodes. The loop
# jumps back to its own block; the test `i < n` is a Bool, and `if` on a
# Bool is a conditional branch on the comparison (the `zext` that widened
# it to a word is dead, and left for LLVM to delete).
#
# `length` tests the tag of its argument once. A `List` has two
# constructors, one without fields, so the test is a comparison with the
# address of `Nil`'s constant block (`@nullary.1`), then a `switch` on the
# result, whose one case is `Nil` and whose default is the `Cons` arm
# (`next_…`). The `match` names every constructor, so there is no path
# for a failed match. The recursive call is not in tail position: a
# `call`, then a branch to the continuation block that adds one.
#
# `count`, whose parameter is a pair, takes two words (the flattening
# above), allocates its `Cons` with a call of `lc_alloc` that bumps the
# function's copy of the heap pointer (`%hp`, read from `lc_hp` in the
# entry block; `lc_alloc` writes each bump through to `lc_hp`), and its tail call
# to itself is a jump back to `recur`, where two φ-nodes receive the new
# arguments. None of the three makes a tail call to another function, so
# all three are `fastcc`.
#
# That is naive code, and LLVM's O2 pipeline makes short work of it. After
# optimisation, the module defines five functions (the first line below):
# the slow path of allocation `lc_alloc_slow_saving` (shown further down),
# `lc_program`, the initialiser of the `print` statement, the printer of
# `List<Int>` and `main`. Here are `lc_program`, the initialiser and the
# printer:

# %%
optimised = optimise(module)
text = str(optimised)
print("defined after O2:", ", ".join(f.name for f in optimised.functions if not f.is_declaration), "\n")
print(text[text.index("define noundef i64 @lc_program"):text.index("define i32 @main")])

# %% [markdown]
# Every function is small or called once, so LLVM inlined them all into
# the initialiser of the `print` statement, and dropped them. The loop
# of `sum_to(100)` was run at compile time: the program prints the constant
# 5050. `count(3, Nil)` and `count(2, Nil)` were unrolled into five inline
# allocations of a `Cons` (the header 2199023255554 is 2 fields and bit 41,
# the layout's bit for field 1, the rest of the list, which is a pointer;
# then the two fields; `Nil` is the address of `@nullary.1`). And `length`,
# whose recursive call is *not* a tail call, became a loop anyway: LLVM's
# tail-recursion elimination saw that the pending `1 + …` is an associative
# operation and introduced an accumulator (`%accumulator.tr`).
#
# Two more things to read in the listing. Each of the five `Cons` is the
# allocator `lc_alloc` of the section on allocation, inlined, bumping the
# copy of `lc_hp` of the function it came from ([the heap pointer in a
# register](#the-heap-pointer-in-a-register)): `lc_hp` and `lc_hl` are
# loaded where the copy starts (once for the three `Cons` of `count(3,
# Nil)`, again for the two of `count(2, Nil)`), each `Cons` adds 24 (three
# words of 8 bytes: the header and two fields) to the pointer the one
# before left (`%hp.1…`, a φ-node of the fast and the slow path), compares
# the sum with `lc_hl`, and on the fast path stores it to `lc_hp`; only if
# the block would pass the end of the run does it call
# `lc_alloc_slow_saving()`, the slow path that saves the registers — with
# no argument — and then read `lc_hp` and
# `lc_hl` again. Every allocation of the module asks for three words, so
# LLVM's interprocedural constant propagation moved the 3 into the
# function itself, which the listing above leaves out:

# %%
print(llvm_function(text, "lc_alloc_slow_saving"))

# %% [markdown]
# The `!prof` on the branch to the slow path is what `likely=False` left:
# it tells LLVM to make the fast path the straight line. The suffixes
# `.i` on the names are LLVM's, one for each level of inlining that a value
# went through. And the printer of `List<Int>` finds a value's constructor
# in its header, as `header_tag` does (not by comparing the value with
# `Nil`'s address, as `tag` does for a `List`: `Nil`'s constant block has
# a header too): it loads the header, shifts it right by 24, keeps 16 bits
# (`trunc … to i16`), and switches on the result, 0 for `Cons` and 1 for `Nil`.
#
# The program runs in chapter 11; here, `run_in_child` (of the support
# module, [appendix B](B_support.ipynb#running-in-a-child)), the runtime of
# chapter 10b (`runtime_library`) and the table of call sites suffice to
# check its output:

# %%
import ctypes

from lcompiler.support import run_in_child

llvm.load_library_permanently(str(runtime_library("shared")))
engine = llvm.create_mcjit_compiler(call_site_table(optimised), target_machine())
engine.finalize_object()
main = ctypes.CFUNCTYPE(ctypes.c_int)(engine.get_function_address("main"))
print(run_in_child(main))

# %% [markdown]
# ## The seeds' program
#
# The program of the L compiler's blog, which builds a pair out of functions alone, and
# its assertion `second(p) * (first(p) + second(p)) == 60`. Chapter 9's
# optimiser reduces it to nothing before it reaches the back end — its CPS
# is one unit value and a `halt` — so the module's `lc_program` calls an
# initialiser that only returns, and LLVM's O2 pipeline inlines that too.
# No allocation, no call, no test:

# %%
SEEDS = Source("seeds.l", open("../examples/seeds.l").read())


def lc_program(module) -> str:
    text = str(module)
    return text[text.index("define noundef i64 @lc_program"):text.index("define i32 @main")]


print(lc_program(optimise(to_llvm(SEEDS))))

# %% [markdown]
# Without chapter 9 (`lc … -O0`), LLVM does most of that work itself: the
# static closures of `true` and `false` are constant globals, so it knows
# their code, calls it directly, inlines it and folds the arithmetic. What
# it cannot remove is the allocation of the closure `pair` returns (header
# 3: three fields, none of them a pointer; then the code, 7 and 5):
# allocating moves `lc_hp`, a global the runtime reads.

# %%
print(lc_program(optimise(to_llvm(SEEDS, optimiser=False))))

# %% [markdown]
# ## Debug information, for gdb
#
# The locations that find a call site are debug locations with made-up
# lines and no debugging information behind them. `lc build -g` makes
# them real, so that `gdb` can stop at an L line, step from line to line,
# and show a backtrace of L functions. DWARF, the format that gdb reads,
# records three things that matter here:
#
# - a **compile unit** per object file: the source file, its directory,
#   the producer, whether the code was optimised;
# - a **subprogram** per function: its name in the source, its symbol (the
#   *linkage name*, `fib_1`), the line where it starts;
# - a **line table** (`.debug_line`): for each machine instruction, the
#   file, line and column it comes from. `break fib.l:5` looks line 5 up
#   in it, `next` runs until the line changes, and `bt` maps each return
#   address back to a line.
#
# LLVM builds all three from the metadata of the module: the compile unit
# (`DICompileUnit`, now with `emissionKind: FullDebug` and a `DIFile`
# naming the directory), a `DISubprogram` attached to each function, and a
# `DILocation` on each instruction. `DebugInfo` makes them, and the back
# end calls it at four places: where it makes the compile unit
# (`debug_info`), where it declares a function (`subprogram`), where a
# term becomes instructions (`place`, from `chain`, for each primitive and
# each jump), and where a call gets its location (`locate`). `place` sets
# the `IRBuilder`'s `debug_metadata`, so that every instruction it emits
# afterwards carries the location, until the next located node. A call of
# an L function must have a location
# (LLVM's verifier rejects "inlinable function call in a function with
# debug info" without one), which `locate` gives it, tail call or not.
#
# The call sites need one more thing: their number can no longer be the
# line. `locate` lists each call site's number, line and column in a named
# metadata node of our own, `!lc.sites`, which LLVM's optimisations leave
# alone; `call_sites` (above) reads it when it is there, and takes a
# location whose line and column are a call site's for that call site. So
# the table of call sites, and the messages of a stack overflow, are the
# same with and without `-g`. One thing is added for chapter 10b's
# backtraces: `main` passes, after the call sites' messages, the names of
# the functions that hold them (`l_name`: `fib` for `fib_1`), and the
# count of call sites negated, to say that the names are there.
#
# **Optimisation and stepping.** `-g` does not change the optimisation
# level, as `gcc -g -O2` does not: debug information must not change the
# code (`tests/test_debug.py` compares the machine code of every example
# with and without `-g`: the same, but for the count that `main` passes).
# The price is paid in the debugger: LLVM inlines functions, turns
# self-calls into loops, merges and moves instructions, so `next` may go
# back to a line it has left, a function inlined into its caller has no
# frame of its own, and a breakpoint on a line whose code was folded into
# another moves to the next line that has code. `lc build -g -O0` turns off
# both optimisers, chapter 9's and LLVM's, for stepping that follows the
# source. The CPS nodes that carry a location are the calls, the raises
# and the primitives that can fail; the other instructions take the location of
# the nearest such node before them in their block (or, at the start of
# a block, of the first one after: `next_place`), so a line with neither
# (`if (n < 2) n`) has no code of its own. Variables are not
# described: gdb shows the L functions and lines, not their values.

# %%
#| export
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def debug_information(optimised: bool = True):
    """Within it, the back end emits full debug information (`lc build -g`); optimised says
    whether the code is optimised (`-g -O0`: not), which the compile unit records."""
    DEBUG_INFO.on, DEBUG_INFO.optimised = True, optimised
    try:
        yield
    finally:
        DEBUG_INFO.on, DEBUG_INFO.optimised = False, True


def first_line(node) -> int:
    """The first source line of the CPS under node (a term, or a lambda), 0 if none has one."""
    lines = [n.loc.source.line_col(n.loc.start)[0] for n in cps.walk(node) if getattr(n, "loc", None) is not None]
    return min(lines, default=0)


def next_place(t):
    """The first source location met running the term t (None if none is met before a jump)."""
    while type(t) in (cps.LetPrim, cps.LetCont):
        if type(t) is cps.LetPrim and getattr(t.prim, "loc", None) is not None:
            return t.prim.loc
        t = t.body
    return getattr(t, "loc", None)


# %% [markdown]
# `DebugInfo` writes the metadata itself, with llvmlite's
# `add_debug_info`: per module, the file and the compile unit (which
# records whether the code is optimised); per function, a subprogram at
# the line of its first located node (`first_line`); per place, a
# `DILocation`, which `place` attaches to the instructions the builder
# emits next. A call site gets its real line and column (`locate`), and
# the named metadata `!lc.sites` pairs each site's number with them: in
# this mode a location's line is the source's, no longer the site's number
# plus one, and the table of call sites (below) finds the sites again by
# their line and column.

# %%
#| export
class DebugInfo:
    """The DWARF of one module, for `lc build -g`: the compile unit, a subprogram per function, a
    location per located node, and the list `!lc.sites` of the call sites' lines and columns."""

    def __init__(self, backend):
        m = self.module = backend.module
        path = Path(backend.source_name)
        self.file = backend.file = m.add_debug_info("DIFile", {
            "filename": path.name, "directory": str(path.resolve().parent)})
        self.unit = backend.unit = m.add_debug_info("DICompileUnit", {
            "language": ir.DIToken("DW_LANG_C"), "file": self.file, "producer": "lcompiler",
            "isOptimized": DEBUG_INFO.optimised, "runtimeVersion": 0, "emissionKind": ir.DIToken("FullDebug")},
            is_distinct=True)
        m.add_named_metadata("llvm.module.flags", m.add_metadata(
            [ir.Constant(I32, 2), ir.MetaDataString(m, "Dwarf Version"), ir.Constant(I32, 4)]))
        self.scopes, self.listed = {}, set()
        self.no_type = m.add_debug_info("DISubroutineType", {"types": m.add_metadata([])})

    def subprogram(self, f: ir.Function, node) -> ir.DIValue:
        line = first_line(node) if node is not None else 0
        flags = "DISPFlagDefinition" + (" | DISPFlagOptimized" if DEBUG_INFO.optimised else "")
        scope = self.module.add_debug_info("DISubprogram", {
            "name": l_name(f.name) or f.name, "scope": self.file, "file": self.file,
            "line": line, "scopeLine": line, "type": self.no_type, "spFlags": ir.DIToken(flags),
            "unit": self.unit}, is_distinct=True)
        self.scopes[f] = scope
        f.set_metadata("dbg", scope)
        return scope

    def location(self, f: ir.Function, loc) -> ir.DIValue:
        line, column = loc.source.line_col(loc.start) if loc is not None else (0, 0)
        return self.module.add_debug_info("DILocation", {"line": line, "column": column, "scope": self.scopes[f]})

    def place(self, b: ir.IRBuilder, t):
        """The instructions b emits for the term t from now on come from its place in the source, if
        it has one; a block's first instructions without one, from the next place on the way."""
        f = b.block.parent
        loc = getattr(t.prim if type(t) is cps.LetPrim else t, "loc", None)
        if loc is not None:
            b.debug_metadata = self.location(f, loc)
        elif b.debug_metadata is None:
            b.debug_metadata = self.location(f, next_place(t))

    def locate(self, call: ir.CallInstr, loc, site: int | None):
        """call's real location; if it is call site number site, list its line and column."""
        at = self.location(call.parent.parent, loc)
        call.set_metadata("dbg", at)
        if site is not None and site not in self.listed:
            self.listed.add(site)
            line, column = loc.source.line_col(loc.start)
            self.module.add_named_metadata("lc.sites", self.module.add_metadata(
                [ir.Constant(I32, site), ir.Constant(I32, line), ir.Constant(I32, column)]))

# %% [markdown]
# A session. The program prints three Fibonacci numbers from a function
# `show`; built with `lc build -g -O0`, gdb stops at line 6 (`show`'s
# first), steps over two lines with `next`, stops in `fib` at line 3 and
# shows the calls under way. The cell runs gdb in batch mode and shows
# what it prints, without the addresses and the frames of the runtime's
# thread below `lc_program`; `tests/test_debug.py` drives the same
# session.

# %%
import shutil
import subprocess
import sys
import tempfile

FIB = """\
def fib(n) =
  if (n < 2) n
  else fib(n - 1) + fib(n - 2)

def show(n) = {
  print(fib(n))
  print(fib(n + 1))
  fib(n + 2)
}

print(show(10))
"""
KEEP = re.compile(r"^(Breakpoint|Thread \d+ .* hit|\d+\t|#\d|Current source|Producer|Source language)")


def gdb_session(program: str, *commands: str) -> str:
    """What gdb prints on program, built with `lc build -g -O0` as fib.l, running commands."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "fib.l").write_text(program)
        subprocess.run([str(Path(sys.executable).parent / "lc"), "build", "-g", "-O0", "fib.l", "-o", "fib"],
                       cwd=tmp, check=True)
        gdb = [a for c in commands for a in ("-ex", c)]
        out = subprocess.run(["gdb", "-nx", "-batch", *gdb, "./fib"], cwd=tmp, capture_output=True, text=True).stdout
    lines, below = [], False
    for line in out.splitlines():
        below = below or line.startswith("#") and "lc_program" in line
        if KEEP.match(line) and not (line.startswith("#") and below and "lc_program" not in line):
            lines.append(re.sub(r"0x[0-9a-f]+", "0x…", re.sub(r"^Thread \d+ \"\w+\" hit ", "", line)))
    return "\n".join(lines)


if shutil.which("gdb"):
    print(gdb_session(FIB, "break fib.l:6", "run", "next", "next", "break fib.l:3", "continue", "bt",
                      "info source"))
else:
    print("gdb is not installed: the session is not shown")

# %% [markdown]
# The breakpoint's address is in `show`, at line 6; `next` goes to lines
# 7 and 8, over the calls of `fib` (which print 55 and 89 — into the
# runtime's buffer, so they appear when the program ends); the second
# breakpoint stops in `fib` called from line 8, and `bt` shows the L
# functions with their lines, down to the initialiser of the statement at
# line 11 (`init.statement.2`, a function of the back end's) and
# `lc_program`. gdb calls the language C: DWARF has no code for L, and
# C's is the one whose expressions and types gdb can use on our words.

# %% [markdown]
# ## The promises, tested
#
# `tests/test_native.py` checks this chapter, its runtime (chapter 10b)
# and chapter 11 together:
# every corpus program and example, and random well-typed programs, give the
# same output, errors and exit status compiled as interpreted; mutual
# recursion and a loop through a closure run ten million times in a stack
# of 256 KiB; ten million short-lived lists run in a heap of 8 MiB
# (compiled without chapter 9, which would build none); a heap limit and a
# runaway recursion are runtime errors; recursions of several shapes
# (through a closure, through an inlined tail call, allocating in every
# frame) overflow at the call site the interpreter names, in the JIT, in
# executables, and compiled in parts; one call and only one lies between
# the two labels of every call site; the verifier catches a broken module;
# a flow graph has the blocks and branches of its function. The tests of
# the collector and of the runtime's C are chapter 10b's.
# `tests/test_primitives.py` checks that `LOWERING` has an entry for every
# row of chapter 4b's table of primitives and for nothing else, and that
# each lowering, compiled and run, computes what its row's `meaning` says
# on random and extreme operands. `tests/test_drawing.py` checks the
# picture of the split against the LLVM text the back end makes, for the
# program of that section and three of chapter 12's, with and without
# chapter 9: a box per function, its colour and label the convention of
# its `define` and a loop exactly where a jump to `recur` is, and an arrow
# per call, dashed exactly where the call's result is returned at once or
# the call became that jump.
#
# `tests/test_exceptions.py` runs the corpus of exception programs compiled
# (the JIT, executables, without chapter 9) against their golden outputs;
# `tests/test_exceptions_native.py` checks the section on exceptions, each
# test under both lowerings (the corpus too, under trap frames): a
# program that catches nothing gets no flag, no record and no extra root
# (every program of the corpus and the examples); only the calls of
# functions that may raise are followed by a test, or protected by a trap
# (counted in the module);
# and against the reference interpreter, random programs that raise and
# catch, a match failure passed on through a `try` reported with its value,
# a division by zero raised deep, a raise through frames holding the only
# pointers to young blocks under the collector's stress mode, stack overflow
# and out of memory inside a `try` still fatal and located, and a loop that
# retries in its handler in a stack of 256 KiB.

# %% [markdown]
# ## When something goes wrong: debugging hints
#
# The seed's back end ends with the mistakes that made it crash; ours ends
# with how to find which stage of the compiler broke a program. The
# compiler is a pipeline, and each stage can be looked at on its own.
#
# - **Compare with the reference.** `lc run --interp prog.l` runs chapter
#   4b's interpreter, which defines what the program means. If `lc run
#   prog.l` prints something else, the compiler is wrong.
# - **Turn the optimiser off.** `lc run -O0 prog.l` skips chapter 9. If the
#   program is right at `-O0`, look at the optimiser first: `lc show cps`
#   and `lc show opt` show its input and its output.
# - **Walk the stages.** `lc show tokens|ast|core|types|mono|cps|opt|closure|shrink|llvm|llvm-opt|asm
#   prog.l` prints what each stage hands to the next. Each intermediate
#   language has a checker: chapter 5b's `mono.check(program)` for the
#   types after monomorphisation, chapter 6's `cps.check(program,
#   closed=True)` for the CPS after closure conversion. A stage whose input
#   passes the checker and whose output does not is the culprit.
# - **Run the CPS.** The text `lc show cps` (or `opt`, `closure`, `shrink`)
#   prints is chapter 6's concrete syntax: `cps.parse(text)` reads it back
#   and `cps.run(program)` interprets it, so the output of any CPS stage
#   can be run, and edited by hand to make a smaller failing example.
# - **Verify the LLVM.** `optimise` runs LLVM's verifier before and after
#   the O2 pipeline, and `verified(text)` runs it on any text. A module
#   that breaks a rule of SSA is this back end's fault, and the verifier
#   says which instruction and why (below). `lc show llvm` before O2 and
#   `lc show llvm-opt` after it tell apart a mistake of the back end from a
#   surprise of LLVM's; a picture of the function's `FlowGraph` helps with
#   a function of many blocks.
# - **Stress the collector** (chapter 10b). A block that the collector
#   frees while it is still in use shows up much later as a wrong value or
#   a crash. With
#   `LC_GC_STRESS=1` the runtime collects at every allocation (and fully
#   every n-th with `LC_GC_STRESS=n`), so a forgotten pointer shows at
#   once. `LC_NURSERY=64K` makes minor collections frequent,
#   `LC_GC_STATS=1` reports what the collector did, `LC_GC_TRACE=1` writes
#   a line per minor collection, `LC_GC_DUMP=n` lists
#   the nursery at the n-th minor collection, and `LC_HEAP_LIMIT` and
#   `LC_STACK_SIZE` change the two limits.
# - **A crash of the runtime.** The signal handler (chapter 10b) turns a
#   fault in the stack's guard zone into the runtime error "stack
#   overflow". Any other fault prints `internal error: segmentation fault`
#   and exits with status 3, which is always a bug of the compiler or the
#   runtime. `lc build -g prog.l -o prog` makes an executable to run under
#   `gdb`, whose backtrace names the L functions and their lines (section
#   "Debug information" above); without `-g`, gdb knows only the symbols
#   (`f_12`, as `lc show shrink` names them). `LC_BACKTRACE=1` makes a
#   runtime error print the calls that led to it (chapter 10b).
# - **llvmlite's own traps**, as the seed found with the OCaml bindings: a
#   call whose arguments do not match the callee's type, and a φ-node
#   without incoming values, make a module that the verifier rejects (this
#   is why a continuation that nothing jumps to gets no block); and LLVM
#   must be initialised (`target_machine`, appendix B) before anything is
#   parsed or compiled.
#
# One trap is ours: a module with debug metadata (our call sites' `!dbg`
# locations) is verified by LLVM's parser itself, which on a broken
# module does not raise but stops the whole process with `LLVM ERROR:
# Broken module found`. So a suspect module is best verified with its
# metadata taken out, or in a child process. Here is the verifier on the
# seed's loop, with one incoming value removed from its φ-node, and the
# metadata taken out:

# %%
broken = str(to_llvm(K)).replace('[11, %"entry"], ', "")
broken = re.sub(r"(,? !dbg !\d+|^!.*$)", "", broken, flags=re.M)      # no debug metadata
try:
    verified(broken)
except RuntimeError as error:
    print("\n".join(str(error).splitlines()[:3]))

# %% [markdown]
# ## Exercises
#
# 1. Every projection converts its word to a pointer again (`inttoptr`).
#    Cache the pointer of each block per LLVM basic block, and measure the
#    size of the IR and the compile time (chapter 12's `compile_speed.py`).
# 2. Flattening stops at one level: a parameter of type `((Int, Int), Int)`
#    takes two words, the first a pointer. Flatten nested tuples, and find
#    a program of the corpus where it matters.
# 3. The handler reports the innermost call site under way. Write a program
#    that recurses through two call sites in turn (`f` calls `g` calls `f`,
#    neither a tail call), and compare where the compiled program and the
#    interpreter report its overflow. Why can no implementation that stops
#    when its stack's bytes run out agree with the interpreter on every
#    such program?
# 4. LLVM's verifier checks that every use of a value is *dominated* by its
#    definition: every path from the entry to the use passes through it.
#    Compute the dominators of a `FlowGraph`'s blocks (Cooper, Harvey and
#    Kennedy's "A simple, fast dominance algorithm",
#    [bibliography](../bibliography.md#papers-and-books), fits in a page), and
#    check the rule yourself on the functions of the worked example, before
#    and after O2.
# 5. In the program `ALIAS` of the design note on addresses as integers,
#    LLVM loads a field twice that it has just written. Refine the back
#    end's `!tbaa` tags (`tell_apart`): in place of its one type `word`,
#    one type for the fields of blocks the program never writes after
#    making them, another for the cells of `var`s, another for headers
#    — and see which of the two
#    loads O2 then removes, and why not the other. Would
#    `!invariant.load` on the first kind be correct, given that the
#    program writes a block's fields once, right after allocating it, and
#    that the collector rewrites the fields that point to blocks it moves?
# 6. Before running anything, say which kind each function of this program
#    gets — `fastcc`, `fastcc` with a loop, or `tailcc` — compiled as the
#    program of the section on the split is (without chapter 9), and why;
#    then check with `llvm_backend.split` or `split_picture`:
#
#    ```text
#    def twice(f, x) = f(f(x))
#    def down(n) = if (n == 0) 0 else down(n - 1)
#    def ping(n) = if (n == 0) 0 else pong(n - 1)
#    def pong(n) = ping(n)
#    def wrap(n) = twice({ x -> x + 1 }, n)
#    print(wrap(1), down(10), ping(5))
#    ```
#
# <details><summary>Solutions</summary>
#
# 1. The cache is a dictionary in the translation of one LLVM basic block,
#    from the word to the pointer made of it: `field` (and the loads of a
#    header in `tag` and the printers) asks it before emitting `inttoptr`, and it is
#    emptied whenever the builder moves to a new block — a pointer made in
#    one block is not usable in a sibling, and one made in a dominating
#    block would need the dominator tree (exercise 4). Counting in the
#    output of `lc show llvm` (no O2) the `inttoptr`s whose word was already
#    converted earlier in the same basic block, over `examples/` and
#    `bench/programs/`, finds some in most programs (the most, 125, in
#    `rbtree`'s 3,363 lines) and none in those that never read a block
#    (`ack`, `fib`, `tak`): the IR shrinks by a few per cent at most, which
#    is about the most the compile time can gain. After
#    O2 nothing changes at all: `inttoptr` has no effect, so LLVM's
#    EarlyCSE and GVN merge two conversions of the same word in the same
#    block before any other pass sees them. The saving is in the back end's
#    output and in the first passes' work, and chapter 12's
#    `compile_speed.py`, which times each stage of the compiler on
#    generated programs of growing size, run with the change and without
#    it, is the place to see whether it is measurable; the fraction of
#    instructions removed says to expect it within noise.
# 2. `arity` becomes the number of leaves of the tuple type (a component
#    that is itself a tuple counts its own leaves), `parameters` binds a
#    nested `Fields` of `Fields`, `words` flattens recursively (a
#    projection of a nested `Fields` is the inner `Fields`, still no load),
#    and `value`, where a flattened tuple is needed whole, builds the inner
#    tuples first. Where it matters: a program whose functions take a
#    tuple among their arguments, such as `def f(p, n)` called with a pair
#    `p`. Walking the parameters of every `Lambda` after the stage
#    `shrink` (`pipeline.compile_to("shrink", source)`, then `cps.walk`) for
#    the programs of `examples/`, `bench/programs/` and
#    `tests/corpus/run/`, none has a nested tuple parameter with chapter
#    9's optimiser, which inlines the functions that take them; without it
#    (`optimise=False`) two corpus programs do, `func_tuple_sugar.l`
#    (`((Int, Int), (Int, Int))`) and `unit_tuples.l`
#    (`((Int, Int), Int)`), and no benchmark. So the change would save an
#    allocation per call in two small test programs at `-O0` and nothing a
#    benchmark measures: one level is where the calls of real programs are.
# 3. Mutual recursion that no pass can turn into a loop, since each call's
#    result goes into a block built after it returns:
#
#    ```text
#    data List { Cons(Int, List); Nil }
#    def f(n) = Cons(n, g(n + 1))
#    def g(n) = Cons(n, f(n + 1))
#    print(f(0))
#    ```
#
#    Both `lc run` and `lc run --interp` report the overflow at line 3,
#    column 20, the call `f(n + 1)` in `g`. That agreement is luck of
#    parity. The interpreter stops at a *count* of nested calls (chapter
#    4b's `DEPTH_LIMIT`), so the site it names is decided by the parity of
#    that count; the compiled program stops when the stack's *bytes* run
#    out (`LC_STACK_SIZE`), after a number of calls that depends on the
#    sizes of `f`'s and `g`'s frames, which depend on the register
#    allocator and on what LLVM inlined. Start the recursion from a third
#    function that recurses k times first, and as k grows the two parities
#    flip at different values of k: no byte budget matches a call budget
#    for every k. To agree on every program an implementation would have to
#    count calls as the interpreter does — a counter incremented and tested
#    at every call, the cost this chapter's call sites were designed to
#    avoid. (Write the recursion as `1 + g(n + 1)` instead, and LLVM turns
#    it into a loop with an accumulator: `lc show llvm-opt` of `def d(n) = 1
#    + d(n + 1)` has a block `tailrecurse`, and the compiled program runs
#    for ever where the interpreter reports an overflow.)
# 4. `tests/test_solutions.py` holds it. From `FlowGraph.blocks()`: number
#    the blocks reachable from the entry in postorder; the immediate
#    dominator of the entry is itself; then, until nothing changes, for
#    each other block in reverse postorder, its new immediate dominator is
#    the `intersect` of its processed predecessors, where `intersect(a, b)`
#    climbs from whichever of the two has the smaller postorder number to
#    its immediate dominator until they meet. The dominators of a block
#    are then its chain of immediate dominators. The rule checked: every
#    value named `%x = …` in block D and used in block B needs D among B's
#    dominators (and, when D is B, the definition before the use); a use in
#    a φ counts as a use at the end of the block it comes from, so
#    `phi [%v, %b]` needs `%v`'s block to dominate `%b`. The test checks the
#    algorithm against dominance computed from its definition (B cannot be
#    reached from the entry without D), then the rule on every function of
#    the worked example's module, before and after O2: it holds everywhere,
#    as LLVM's verifier promised, and it catches a use in a join block of
#    a value defined in only one branch, the mistake a back end makes when
#    it forgets a φ.
# 5. Three type nodes in place of "word", under the same root: "field"
#    (the fields of blocks that the program writes once, at allocation),
#    "cell" (the field of a `var`'s cell, written by `x := …`) and
#    "header", each load and store
#    of the back end tagged with the kind it touches. In `main` of `ALIAS`,
#    the second load of `%.11` has only the store into the cell `%.6`
#    between it and the first: with the tags, LLVM knows a "cell" store
#    cannot change a "field" and GVN can reuse the first load's value. The
#    first load stays: between the store of 20 and it lie the stores into
#    the closure's block — its fields are of the kind "field" too, so they
#    may be the same memory — and the call of the allocator's slow path,
#    about which TBAA says nothing, and which may collect.
#    `tests/test_solutions.py` tags the back end's loads and stores so,
#    and O2 removes the second load and keeps the first. `!invariant.load`
#    would not be correct: it says the location holds the same value
#    wherever it can be read, and two things write these fields after the
#    block exists — the initialising stores right after the allocation
#    (LLVM could then move a load above them), and the collector, which
#    rewrites a field that points to a block it moves, so that a load
#    reused across a collection could give the block's old address. The
#    precise tool is `llvm.invariant.start` after the initialising stores,
#    and it would hold only for fields that are not pointers to blocks the
#    collector may move, such as the `Int` fields of `P`.
# 6. `twice` is `tailcc`: its outer call `f(…)` is a tail call of a
#    closure, whose target is known only at run time (the inner `f(x)`
#    returns to `twice`, and does not count). `down` is `fastcc` with a
#    loop: its one tail call is to itself, a jump back to `recur`. `ping`
#    and `pong` are `tailcc`: they tail-call each other, a cycle. `wrap`
#    is `tailcc` too, though it calls no closure itself: it tail-calls
#    `twice`, whose chains of tail calls are not short — the closure that
#    `twice` calls could tail-call `wrap` again, and a `fastcc` `wrap`
#    would leave a frame on the stack at every turn of that loop. The
#    closure `{ x -> x + 1 }` is two functions, as in the section: `f_…`,
#    `fastcc`, which makes no tail call, and its code `f_entry_…`,
#    `tailcc`, which tail-calls it. The initialiser of the `print` is
#    `tailcc`, as every initialiser. `split` says exactly this, and
#    `tests/test_solutions.py` checks it.
#
# </details>
#
# The exercises on the collector are [chapter 10b](10b_runtime.ipynb)'s,
# with the runtime that the code of this chapter calls: its C, its
# collector and its stack, next.
