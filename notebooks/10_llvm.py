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
# # Chapter 10. CPS to SSA: LLVM code, data, and the runtime
#
# Chapter 8 left us a CPS program whose functions are all closed and all at
# the top level. This chapter turns it into LLVM IR — the static single
# assignment (SSA) language that LLVM optimises and compiles to machine code
# — and supplies the small C *runtime* the code calls: printing, runtime
# errors, allocation with a garbage collector, and the detection of a stack
# that overflows.
#
# What this chapter promises, in the module `lcompiler.llvm_backend`:
#
# - `to_llvm(source)` compiles a well-typed L program to an LLVM module (an
#   `llvmlite.ir.Module`) that passes LLVM's verifier; `optimise(module)`
#   runs LLVM's O2 pipeline through llvmlite's pass builder and verifies the
#   result again;
# - the module's `main` runs the program on the runtime of this chapter: it
#   prints what chapter 4b's reference interpreter prints, and stops with the
#   same rendered runtime error and exit status 2 where the interpreter does;
# - every call in tail position is a real tail call (constant stack), a
#   program that allocates without end in a loop runs in bounded memory, and
#   a recursion that exhausts the stack is a runtime error, not a crash;
# - `lc show llvm FILE.l` prints the module as the back end makes it, `lc show
#   llvm-opt FILE.l` after LLVM's O2 pipeline, `lc show asm FILE.l` as assembly.
#
# [Chapter 11](11_running.ipynb) runs these modules, in the JIT and as
# native executables, and [chapter 12](12_measuring.ipynb) measures them.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 6](06_cps.ipynb), the CPS language; [chapter
# 8](08_closure.ipynb), closure conversion, after which every function is
# closed and at the top level; [chapter 9](09_shrink.ipynb), the optimiser
# that runs before this chapter; [chapter 5b](05b_mono.ipynb), the types
# without type variables that choose how values are laid out and printed;
# [chapter 1](01_addlang.ipynb), for loading LLVM text and running compiled
# code in a child process.
#
# **Builds:** the module `lcompiler.llvm_backend` (the back end `Backend`,
# `to_llvm`, `optimise`, `call_site_table`, the C runtime `RUNTIME_C` and
# `runtime_library`, and `FlowGraph`, which draws a function's control-flow
# graph), and the pipeline's stages `llvm`, `llvm-opt` and `asm`.
#
# </div>

# %%
#| default_exp llvm_backend

# %% [markdown]
# ## The mapping
#
# Seed 000 (the l-lang compiler) translates its CPS to LLVM with a handful of
# rules, and the reason they are so few is that CPS and SSA are two notations
# for the same thing (Kelsey; Appel, *SSA is functional programming*): a
# continuation bound by `Let_cont` is a basic block, its parameters are the
# block's φ-nodes, and a jump `Apply_cont k(x)` is a branch that feeds `x` to
# those φ-nodes. Our rules, for chapter 6's terms:
#
# | CPS | LLVM |
# |---|---|
# | a top-level `fun ret(x1, …, xn) { body }` | `define linkonce_odr tailcc i64 @f(i64 %x1, …, i64 %xn)` (or `fastcc`: see below) |
# | `v = prim` (`let_prim`) | one or a few instructions defining `%v` |
# | `cont k(y1, …) = handler` (`let_cont`) | a basic block `k:` starting with one `phi` per parameter |
# | `k(a1, …)` (`apply_cont`), `k` a block | `br label %k`, adding `a1, …` to the φ-nodes |
# | `ret(a)`, `ret` the function's return continuation | `ret i64 %a` |
# | `call f(a…) -> ret` (the function's own return) | `%r = tail call tailcc i64 @f(…)` then `ret i64 %r` |
# | `call f(a…) -> k` (any other continuation) | `%r = call tailcc i64 @f(…)` then `br label %k` with `%r` for its φ |
# | `case x [0: k0, 1: k1] default kd` | `switch i64 %x, label %kd [i64 0, label %k0 …]` |
# | `halt(a)` | `ret i64 %a` from the definition's initialiser |
#
# A *direct* call names its LLVM function; a *closure* call loads the code
# pointer from field 0 of the closure and calls it with the closure as the
# first argument, as chapter 8 arranged. A `case` without a default gets a
# default block holding LLVM's `unreachable`: the converter covers every tag,
# so that block is never reached, and saying so lets LLVM drop the test.
#
# ### The seed's example
#
# Seed 000 explains its translation with one small CPS term, a loop that
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
# Chapter 9's optimiser turns the function `k`, called from one place and
# returning to it, into a continuation: the seed's term again, but for the
# dead `v = 3`. Here it is at each stage of its way to machine code: the CPS
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
import re
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
# The seed's loop, before and after O2:
#
# On the left, the back end's two blocks: `entry`, which jumps to `k_2`,
# and `k_2`, whose arrow goes back to itself, the loop of the seed. On the
# right, what is left after O2: the same two blocks, `k_2` renamed `k_2.i`
# by the inlining, and empty but for its branch to itself.

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
# promise for one calling convention, `tailcc`: "a call marked `tail` in tail
# position with the `tailcc` convention is always a tail call", even when
# caller and callee have different parameter lists (the callee pops its own
# arguments). So the L functions that make tail calls are declared
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
#   know (the section on the collector, below, explains why, and the
#   flags). A closure is a block whose field 0 is the address of its code.
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

# %%
#| export
import llvmlite.ir as ir

from lcompiler import closure, cps, cps_convert, syntax as s, types
from lcompiler.mono import data_declarations, field_type, monomorphise
from lcompiler import core as c
from lcompiler.errors import RunError, Source
from lcompiler.types import TCon, show_type

# %% [markdown]
# ## The back end, from the top
#
# `Backend(program, datas, name)` translates one closure-converted CPS program
# into one LLVM module; `datas` gives each `data` type's constructors and
# field types, which the printers need. It starts by declaring what the code
# will call in the runtime (below): the slow path of allocation and the
# allocation of wide blocks, the write barrier's `lc_remember`, the printing
# functions, string equality and the two functions that stop the program
# with a runtime error — and the two words of the allocator that the code
# reads and bumps inline, `lc_hp` and `lc_hl`.
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
# LLVM names are the names `lc show closure` prints (chapter 6's `Namer`),
# so the two listings can be read side by side.
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
CONSERVATIVE, OLD, REMEMBERED = 1 << 59, 1 << 60, 1 << 61     # flags (the runtime's section 1)


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
        raise ValueError("a data type of more than 65,536 constructors, or a block of more than 2^24 fields:"
                         " the header of a block has no room for it")
    if len(types) > LAYOUT_FIELDS:
        return len(types) | tag << TAG_SHIFT | CONSERVATIVE | OLD
    pointers = sum(1 << LAYOUT_SHIFT + i for i, t in enumerate(types) if may_point(t) and not (code and i == 0))
    return len(types) | tag << TAG_SHIFT | pointers | (OLD if old else 0)

# %% [markdown]
# The header of a `Cons` of a `List<Int>`: two fields, tag 0, and bit 41 of
# the layout for field 1, the rest of the list (the worked example at the
# end of the chapter finds this number in the code):

# %%
header_of_cons = header([TCon("Int"), TCon("List", (TCon("Int"),))])
print(header_of_cons, "=", f"2 | 1 << 41 = {2 | 1 << 41}", "| fields:", header_of_cons & 0xFFFFFF,
      "| layout:", bin(header_of_cons >> LAYOUT_SHIFT))

# %% [markdown]
# The *linkage* of L functions is `linkonce_odr`. With `internal` linkage
# ("static" in C) LLVM could drop a function that nothing calls, but it
# would also inline every function called once, whatever its size, and a
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
# and names LLVM values as `lc show closure` names CPS variables.

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
        printer = cps.Printer()                  # LLVM names = the names `lc show closure` prints
        for d in program.definitions:
            printer.definition(d)
        self.name = printer.name
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
        self.globals = ir.GlobalVariable(self.module, ir.ArrayType(I64, max(1, len(dynamic))), "lc_globals")
        self.globals.initializer = ir.Constant(self.globals.type.pointee, None)
        for i, d in enumerate(dynamic):
            self.slots[d.var] = i
        for d in self.program.definitions:
            if type(d.value) is cps.Lambda:
                lam = d.value
                words = sum(arity(p) for p in lam.params)
                f = ir.Function(self.module, ir.FunctionType(I64, [I64] * words), self.name(d.var))
                f.linkage = LINKAGE
                f.calling_convention = "fastcc" if d.var in fast else "tailcc"
                self.subprogram(f)
                if f.calling_convention == "fastcc":
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
        args = list(f.args)
        if me is not None:
            start, args = self.recur(f, start, args, blocks, me)
        self.parameters(params, args, values)
        work = [(start, term)]
        while work:
            block, t = work.pop()
            self.chain(f, ir.IRBuilder(block), t, values, blocks, work, ret)

    def chain(self, f: ir.Function, b: ir.IRBuilder, t, values: dict, blocks: dict, work: list, ret):
        """Emit a chain of let_prims and let_conts into b's block, up to and including its jump;
        each continuation gets its block, and its handler goes on work."""
        while True:
            if type(t) is cps.LetPrim and self.virtual(t.var, t.prim):
                values[t.var] = Fields([self.value(b, o, values) for o in t.prim.fields])
                t = t.body
            elif type(t) is cps.LetPrim:
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
        tail = t.cont.var is ret
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
        result = b.call(callee, args, cconv=cc, tail=tail and cc == "tailcc")
        self.locate(result, None if tail else t.loc)
        if tail:
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
# re-adjusts the stack after every call — a few instructions and a
# microcoded return per call, which weigh on programs that do little but
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
#    that tail-calls a closure, and each one on a cycle of tail calls, like
#    `even` and `odd` calling each other — is `tailcc`, and its tail calls
#    are `tail call tailcc`: the loops that go through closures or through
#    mutual recursion run in constant stack.
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
        if type(node) is cps.Apply and node.cont.var is lam.cont:
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
# ### Registers and the conservative collector
#
# One more attribute, on the `fastcc` functions, and the reason for it is
# the garbage collector of the runtime (below), which finds the heap
# blocks that the stack refers to by scanning the stack *conservatively*:
# every word on it that looks like a pointer keeps a block alive (and, in
# the nursery, pins it where it is). Normally a function saves, in its own
# stack frame, the *callee-saved* registers it wants to use, holding
# whatever its caller had left in them — often a value the caller no
# longer needs. The `primes` benchmark of chapter 12 shows where that
# leads: the recursive `sieve` leaves its dead input list in a callee-saved
# register, each deeper call saves it again, and the collector takes every
# one of those words for a live pointer (the table below counts the
# blocks they pin). LLVM's function attribute
# `"no_callee_saved_registers"` turns the convention around: the function
# saves no register for its caller, so a caller keeps what it needs across
# a call in its *own* frame, and only that.
#
# The attribute goes on the `fastcc` functions and the initialisers, which
# make no `tail call` in LLVM's sense, and not on the `tailcc` ones: on a
# function that tail-calls a closure it broke the tail-call guarantee — the
# `fold` benchmark, which loops through composed closures, overflowed its
# stack — presumably because a tail call cannot hand over to a callee that
# does preserve registers on behalf of a caller that does not. Deep
# non-tail recursion, where stale registers pile up, happens in functions of
# the first kind.
#
# Does it still pay, with the generational collector below, now that a
# stale pointer costs a pinned block rather than a whole list kept until
# the next full collection? And what does it cost the calls? The script
# `bench/calls.py` builds seven benchmarks of chapter 12 with and without
# the attribute and runs the two in alternation (`python bench/calls.py
# --json bench/calls.json`: seven runs each, user and system CPU time);
# here are its figures, with the collector's own statistics:

# %%
import json
from pathlib import Path

calls = json.loads(Path("../bench/calls.json").read_text())
print(f"{'benchmark':10} {'with s':>7} {'without s':>9} {'without/with':>13} {'pinned with':>12} {'without':>8}"
      f" {'heap MB with':>13} {'without':>8}")
for name, r in calls.items():
    w, wo = r["with"], r["without"]
    print(f"{name:10} {w['median']:7.3f} {wo['median']:9.3f} {r['ratio']['median']:13.3f} {w['pinned']:12,}"
          f" {wo['pinned']:8,} {w['max_heap_mb']:13.1f} {wo['max_heap_mb']:8.1f}")

# %% [markdown]
# On the calls themselves the attribute costs nothing that can be told
# from the noise: a few percent either way, `fib` and `fold` a little
# faster with it, `ack` a little slower. On `primes`, without it, stale
# pointers in saved registers pin almost eight hundred times as many
# blocks, and what those blocks point to is kept with them: the heap grows
# from 10 MB to more than 400, and the program is eight times slower. It
# stays.

# %%
#| export
def saves_no_registers(f: ir.Function) -> None:
    """Mark f "no_callee_saved_registers" (llvmlite checks named attributes only: add it raw)."""
    set.add(f.attributes, '"no_callee_saved_registers"')

# %% [markdown]
# ## Primitives, and allocation inline
#
# Most primitives are one instruction: a projection `x[i]` loads word `i + 1`
# of the block (`inttoptr` turns the word into an address first), `tag x`
# loads the header, shifts and masks it, arithmetic is `add`, `sub`, `mul`,
# a comparison is `icmp` widened to a word with `zext`.
#
# Allocation is the one that matters for speed. The runtime keeps the
# current free *run* of its nursery (below) in two words, `lc_hp` (the next
# free address) and `lc_hl` (the end of the run). Allocating `n` words is,
# in the generated code, *bump the pointer*: load `lc_hp`, add `8n`,
# compare with `lc_hl`; if it fits, store the new pointer back and the
# block is ours; if not, call the runtime's `lc_alloc_slow(n)`, which finds
# the next run or collects garbage. Those instructions live in one function
# of the module, `lc_alloc`, marked `alwaysinline`: every allocation is a
# call of it in the code the back end writes (short to read, and quick to
# build), and LLVM inlines it at every call before it optimises, so the
# machine code has the instructions of the common path in place.
#
# `lc_hp` and `lc_hl` are declared `dso_local`: defined in the same
# executable as the code that uses them (the runtime is linked into it).
# Without that promise, position-independent code must assume they might
# live in a shared library and find their addresses in a table first (the
# GOT): a load that LLVM then keeps in a register for the whole function,
# two registers that the rest of the code cannot use. With it, the
# instructions name them relative to the instruction pointer,
# `mov rax, [rip + lc_hp]`. (Code compiled for `lc run`, in memory, uses
# absolute addresses, which are just as direct.)

# %%
#| export
class Backend(Backend):
    def field(self, b: ir.IRBuilder, block: ir.Value, i: int) -> ir.Value:
        """The address of field i of a heap block (word i + 1: word 0 is the header)."""
        return b.gep(b.inttoptr(block, I64.as_pointer()), [word(i + 1)])

    def allocator(self) -> ir.Function:
        """lc_alloc(words), made once per module: bump lc_hp, or call the runtime's slow path."""
        if "lc_alloc" in self.module.globals:
            return self.module.globals["lc_alloc"]
        f = ir.Function(self.module, ir.FunctionType(I64, [I64]), "lc_alloc")
        f.linkage = "internal"
        f.attributes.add("alwaysinline")              # inlined at every call, then constants fold
        b = ir.IRBuilder(f.append_basic_block("entry"))
        words = f.args[0]
        words.name = "words"
        hp = b.load(self.rt["lc_hp"], "hp")
        new = b.add(hp, b.mul(words, word(WORD)), "new")
        with b.if_then(b.icmp_unsigned(">", new, b.load(self.rt["lc_hl"], "hl")), likely=False):
            if SAVING_SLOW_PATH:
                b.ret(b.call(self.slow_path(), [words], cconv="preserve_mostcc"))
            else:
                b.ret(b.call(self.rt["lc_alloc_slow"], [words]))
        b.store(new, self.rt["lc_hp"])
        b.ret(hp)
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
# `perf annotate` on `cpstak` (chapter 12) found six pushes and six pops
# in almost every function.
#
# So the allocator does not call `lc_alloc_slow` itself. It calls
# `lc_alloc_slow_saving`, a function of the module with LLVM's
# `preserve_mostcc` calling convention: it promises its callers to leave
# every register as it found it but `r11` (and `rax`, its result). LLVM
# writes that promise into its code — push the nine registers a C call
# may overwrite, call `lc_alloc_slow`, pop them — so the generated
# functions keep their values in any register, and the pushes happen only
# on the slow path. The registers it pushes land on the stack, in the
# slow path's frame, where the collector's conservative scan of the stack
# (below) finds them: a pointer held only in a register is still seen, and
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
# The difference, counted in the machine code of `cpstak` (every function
# of it but the runtime's, `lc show asm`): the `push` instructions, with
# the direct call and with `lc_alloc_slow_saving`.

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
            p = b.call(self.allocator(), [word(len(fields) + 1)])
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
# `var`s that a function captures are ever written — and the test is two
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
# constructor) or 0, and the `switch`. For any other type, `header_tag`
# loads the header, shifts it right by 24 and keeps 16 bits.

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
                    b.call(self.rt["lc_fail"], [self.cstring(b, render(RunError(failure.message, p.loc)))])
        return LOWERING[p.op](self, b, p, args)

# %% [markdown]
# ## Arguments in registers: flattening tuples
#
# An L function of several parameters, `def ack(m, n) = …`, is a function
# of *one* tuple (chapter 4: `{ (m, n) -> … }`), and a call `ack(m - 1, 1)`
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
# LLVM puts in registers). At a call, a tuple argument is passed as its
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
# its one parameter, the tuple `x_5`, is two LLVM parameters, `x_5.0` and
# `x_5.1`, its calls pass two words, and nothing is allocated:

# %%
ACK = Source("ack.l", open("../bench/programs/ack.l").read())
ack = llvm_function(pipeline.show("llvm", ACK, False), "ack_3")
print(ack)
print("allocations in ack:", ack.count("@\"lc_alloc\""))

# %% [markdown]
# Read `recur`'s φ-nodes: each has three incoming values, one per way into
# the loop. From `entry` come the arguments of the call; from `then_16`,
# the tail call `ack(m - 1, 1)`, with the constant 1 as the second word;
# from `k_27`, the tail call `ack(m - 1, ack(m, n - 1))`, whose second word
# is the result `r_28` of the one real `call` left, made in `else_21`. No
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
# time (`text`): every data type that is matched gets a printer (a failed
# match prints the value), so a program with a thousand data types has a
# thousand printers, and the fewer instructions they take, the sooner LLVM
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
# the overflow in a signal handler (below), so the handler must find out
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
#    unit says `emissionKind: NoDebug`.
# 2. **After optimisation, each call that belongs to a call site gets a
#    label on either side**, written as inline assembly (`771:` before,
#    `772:` after, LLVM's local numeric labels), and the second one adds an
#    entry *(before, after, call site)* to a section `lc_sites`. Between the
#    two labels lies that one call and nothing else that calls (moves of its
#    arguments and result), so a return address in (before, after] is that
#    call's. The labels come after optimisation, not before, because an
#    assembly statement is opaque to LLVM: one after each call would stop,
#    for one, the tail-recursion elimination that turns half of `fib`'s
#    calls into a loop (shown below). They cost nothing at run
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
# design of their own (below). A line table (DWARF `.debug_line`) would
# have to be parsed by the runtime, and the JIT does not load it.
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
SITE_TABLE = "lc_sites.{}"         # the symbol of the table of call sites of part k of a program


class Backend(Backend):
    def debug_info(self):
        """The compile unit that the locations of calls hang from. It emits no debugging
        information (emissionKind: NoDebug): the locations are for `call_site_table` only."""
        m = self.module
        self.file = m.add_debug_info("DIFile", {"filename": self.source_name, "directory": ""})
        self.unit = m.add_debug_info("DICompileUnit", {
            "language": ir.DIToken("DW_LANG_C"), "file": self.file, "producer": "lcompiler",
            "isOptimized": True, "runtimeVersion": 0, "emissionKind": ir.DIToken("NoDebug")}, is_distinct=True)
        m.add_named_metadata("llvm.dbg.cu", self.unit)
        m.add_named_metadata("llvm.module.flags", m.add_metadata(
            [ir.Constant(I32, 2), ir.MetaDataString(m, "Debug Info Version"), ir.Constant(I32, 3)]))
        self.no_type = m.add_debug_info("DISubroutineType", {"types": m.add_metadata([])})
        self.scopes, self.site_numbers = {}, {}

    def subprogram(self, f: ir.Function):
        """f's scope, which the locations of its calls name."""
        self.scopes[f] = self.module.add_debug_info("DISubprogram", {
            "name": f.name, "scope": self.file, "file": self.file, "line": 0, "type": self.no_type,
            "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"), "unit": self.unit}, is_distinct=True)
        f.set_metadata("dbg", self.scopes[f])

    def locate(self, call: ir.CallInstr, loc):
        """Give a call its location: line n + 1 for call site n (a call that is not a tail
        call, at loc), line 0 for a call whose frame is not a call site of its own."""
        line = 0
        if loc is not None:
            text = render(RunError(OVERFLOW, loc))
            if text not in self.site_numbers:
                self.site_numbers[text] = len(self.call_sites)
                self.call_sites.append(text)
            line = self.site_numbers[text] + 1
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
                saves_no_registers(f)
                self.subprogram(f)
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
        sites = ir.GlobalVariable(self.module, ir.ArrayType(I8P, max(1, len(self.call_sites))), "lc_call_sites")
        texts = [self.string(s).bitcast(I8P) for s in self.call_sites] or [ir.Constant(I8P, None)]
        sites.initializer, sites.global_constant = ir.Constant(sites.type.pointee, texts), True
        first = b.gep(sites, [ir.Constant(I32, 0), ir.Constant(I32, 0)])
        table = ir.GlobalVariable(self.module, ir.ArrayType(I64, 2), SITE_TABLE.format(0))
        table.initializer = ir.Constant(table.value_type, None)     # empty, until call_site_table
        table.linkage = "weak"
        b.ret(b.call(lc_run, [program, roots, n, self.cstring(b, overflow), self.cstring(b, memory),
                              first, word(len(self.call_sites)),
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
# `speed_level=2`: inlining, SROA, instruction combining, GVN, loop
# optimisations, tail-call elimination of self-recursion into loops…), and
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
from lcompiler.syntax import collector_paused


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
        passes = llvm.create_pass_builder(addlang.target_machine(), options)
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


def call_sites(text: str) -> dict:
    """The call site of each location of an optimised module (LLVM text), or None: its own
    (its line - 1), else that of the call it was inlined at."""
    lines, parents = {}, {}
    for node, fields in LOCATION.findall(text):
        line = re.search(r"\bline: (\d+)", fields)
        lines[node] = int(line.group(1)) if line else 0
        inlined = re.search(r"\binlinedAt: (!\d+)", fields)
        parents[node] = inlined.group(1) if inlined else None
    sites = {}
    for node in lines:
        at = node
        while at is not None and not lines[at]:
            at = parents[at]
        sites[node] = None if at is None else lines[at] - 1
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
        if n is None or "@llvm." in call or (TAIL_CALL.search(call) and text.startswith(" ret", m.end() + 1)):
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
                        + f'\n@"lc_sites.end" = internal global i64 0, section "lc_sites"\n'
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
    machine = llvm.Target.from_default_triple().create_target_machine(reloc="pic", codemodel="small", opt=2)
    assembly = machine.emit_assembly(call_site_table(optimised))
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
# The generated code calls a small runtime written in C: the slow path
# of allocation and the garbage collector, printing, the delivery of runtime
# errors, and the entry point `lc_run`, which also catches stack overflow.
# It was written against the interface the code generator needs — the block
# layout above, `lc_hp`/`lc_hl`, and the functions declared in
# `RUNTIME_FUNCTIONS`. Its first version was tested on its own in C before it
# met the generated code; its collector is now tested through L programs
# that check their own results (`tests/test_gc.py`), in a *stress mode* of
# the runtime (`LC_GC_STRESS=n`: collect at every allocation) where a
# forgotten pointer shows at once rather than in a long run.

# %% [markdown]
# The runtime is one C file, shown here whole, in seven numbered sections,
# each cut into pieces with the reason for its choices. In the package it is
# the string `RUNTIME_C`, compiled when first needed (the section after
# it). First, the file's head: what it is for, how it is compiled, and what
# it includes.

# %%
#| export
RUNTIME_C = r"""
/* runtime.c -- the run-time system of L.
 *
 * Compiled L code calls this file for four things: allocation when its
 * inline bump allocator runs out of room, printing, runtime errors, and
 * starting the program (lc_run).  Everything else is generated code.
 *
 *   gcc -O2 -Wall -Wextra -shared -fPIC -pthread runtime.c -o lcrt.so
 *   gcc -O2 -Wall -Wextra -c -fPIC -pthread runtime.c -o runtime.o
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>              /* snprintf, for the statistics line only */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
"""

# %% [markdown]
# Section 1 is the layout of values and heap blocks, which the code
# generator above and the collector below must agree on: the header's
# fields and flags, and the size of a block from its header.
#
# Take the header of a `Cons` of a `List<Int>`, 2199023255554, which the
# back end computed earlier in the chapter (`header_of_cons`). Read with
# this section's masks: `FIELDS_MASK` keeps its low 24 bits, 2 fields; the
# tag, bits 24 to 39, is 0, the first constructor; `layout` shifts it right
# by 40 and keeps 19 bits, `0b10`: field 1, the rest of the list, may be a
# pointer, and field 0, the `Int`, may not. None of the five flags is set:
# a block that the program allocates starts young. `block_words` gives 3,
# the header and two fields; for a filler it reads the size from the
# header's free bits, and for a copied block from the header of the copy,
# since the old header now holds the copy's address.

# %%
#| export
RUNTIME_C += r"""
/* ==== 1. Values and the heap-block layout ============================
 *
 * Every L value is one 64-bit word.  An Int uses all 64 bits, so a word
 * alone does not say whether it is an Int or a pointer.  A heap block
 * says it for its own fields: the compiler knows the type of every field
 * it stores, and writes into each block's header which fields may hold
 * pointers (its *layout*).  A word on the stack or in a register has no
 * header: there the collector must stay conservative.
 *
 * A heap block is a header word followed by n fields.  The header holds
 *     bits  0..23  n, the number of fields (the block is n + 1 words)
 *     bits 24..39  the tag: the constructor number, 0 for tuples, closures
 *     bits 40..58  the layout: bit 40 + i set if field i may be a pointer
 *     bit  59      CONSERVATIVE: more than 19 fields, no layout; any field
 *                  may be a pointer
 *     bit  60      OLD: not in the nursery (promoted, pinned, or static)
 *     bit  61      REMEMBERED: in the remembered set (section 5)
 *     bit  62      FREE: not a block but free space (a "filler"), whose
 *                  size - 1 is in bits 0..58
 *     bit  63      FORWARDED: a nursery block that was copied; the rest of
 *                  the header is the address of the copy
 * Free space has a header of its own, so the heap can always be walked
 * from its first word to its end, one block or filler at a time.
 */
#define FIELDS_MASK      0xFFFFFFull
#define LAYOUT_SHIFT     40
#define LAYOUT_FIELDS    19
#define CONSERVATIVE_BIT (1ull << 59)
#define OLD_BIT          (1ull << 60)
#define REMEMBERED_BIT   (1ull << 61)
#define FREE_BIT         (1ull << 62)
#define FORWARDED_BIT    (1ull << 63)
#define FREE_MASK        (CONSERVATIVE_BIT - 1)

/* Compiled code holds addresses as int64_t; the runtime as word pointers. */
static inline uint64_t *as_ptr(int64_t address) { return (uint64_t *)(uintptr_t)address; }
static inline int64_t as_int(const uint64_t *p) { return (int64_t)(uintptr_t)p; }

static inline uint64_t filler_header(uint64_t words) { return FREE_BIT | (words - 1); }

/* The size in words of the block, filler or copied block with this header. */
static inline uint64_t block_words(uint64_t header)
{
    if (header & FORWARDED_BIT) header = *as_ptr((int64_t)(header & ~FORWARDED_BIT));
    return (header & FREE_BIT ? header & FREE_MASK : header & FIELDS_MASK) + 1;
}

/* The fields of a block that may hold pointers: a bit per field. */
static inline uint64_t layout(uint64_t header) { return header >> LAYOUT_SHIFT & ((1ull << LAYOUT_FIELDS) - 1); }
"""

# %% [markdown]
# Output is buffered by the runtime itself, not by C's stdio, for one
# reason: when the stack overflows, the signal handler must still write out
# what the program printed before, and only `write` may be called there.
#
# The buffer is 64 KB, and `out_bytes` writes it out when the next piece
# would not fit, or writes a piece larger than the buffer directly. A
# program that prints a line per iteration of a long loop thus makes one
# system call per 64 KB, not one per line.

# %%
#| export
RUNTIME_C += r"""
/* ==== 2. Output buffering and printing ===============================
 *
 * Program output goes into our own buffer, written to fd 1 with write(2)
 * when it is full and at the end.  Not stdio: the stack-overflow signal
 * handler must flush the output, and write(2) -- unlike fflush -- may be
 * called from a signal handler.
 */
static char out_buf[1 << 16];
static size_t out_len;
static int out_fd = 1;                  /* 2 after lc_fail_begin */

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, s, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return;              /* nowhere left to report it */
        s += k, n -= (size_t)k;
    }
}

static void write_str(int fd, const char *s) { write_all(fd, s, strlen(s)); }

static void flush_output(void)
{
    write_all(out_fd, out_buf, out_len);
    out_len = 0;
}

static void out_bytes(const char *s, size_t n)
{
    if (n > sizeof out_buf - out_len) {
        flush_output();
        if (n > sizeof out_buf) { write_all(out_fd, s, n); return; }
    }
    memcpy(out_buf + out_len, s, n);
    out_len += n;
}
"""

# %% [markdown]
# The printing functions that the generated code calls put their text in
# that buffer. An `Int` is written digit by digit, from the right, with the
# most negative number handled as an unsigned magnitude; a string nested in
# a value is written quoted, with its escapes.
#
# So a string printed on its own appears as its text, while a string inside
# a tuple or a constructor appears between quotes, its newlines, tabs,
# backslashes and quotes escaped, as it would be written in L. The printers
# of structured values are not here: the back end generates one per type
# (`print.List<Int>` in the worked example below), and they call these
# functions for the leaves.

# %%
#| export
RUNTIME_C += r"""
void lc_print_int(int64_t v)
{
    char digits[24], *p = digits + sizeof digits;
    uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;  /* unsigned: -INT64_MIN overflows */
    do *--p = (char)('0' + u % 10); while ((u /= 10) != 0);
    if (v < 0) *--p = '-';
    out_bytes(p, (size_t)(digits + sizeof digits - p));
}

void lc_print_bool(int64_t b) { if (b) out_bytes("true", 4); else out_bytes("false", 5); }
void lc_print_unit(int64_t u) { (void)u; out_bytes("()", 2); }
void lc_print_char(int64_t c) { char b = (char)c; out_bytes(&b, 1); }
void lc_print_str(int64_t s) { out_bytes((const char *)s, strlen((const char *)s)); }

void lc_print_quoted(int64_t s)
{
    out_bytes("\"", 1);
    for (const char *t = (const char *)s; *t; t++) {
        switch (*t) {
        case '\n': out_bytes("\\n", 2); break;
        case '\t': out_bytes("\\t", 2); break;
        case '\\': out_bytes("\\\\", 2); break;
        case '"':  out_bytes("\\\"", 2); break;
        default:   out_bytes(t, 1);
        }
    }
    out_bytes("\"", 1);
}

int64_t lc_str_eq(int64_t a, int64_t b) { return strcmp((const char *)a, (const char *)b) == 0; }
"""

# %% [markdown]
# Runtime errors: the compiler rendered the message; the runtime writes it
# after the program's output and exits with status 2.
#
# A message that shows a value, such as a match failure, which shows the
# argument of the function, is delivered in three steps: `lc_fail_begin`
# flushes the program's output and switches printing to stderr, writing the
# start of the message; the compiled code prints the value with the
# printing functions above; and `lc_fail` writes the rest of the message
# and exits. `out_of_memory` is a runtime error like the others, with its
# own message, preceded by the collector's statistics when `LC_GC_STATS=1`
# asks for them.

# %%
#| export
RUNTIME_C += r"""
/* ==== 3. Runtime errors ==============================================
 *
 * The compiler renders the messages; we deliver them: program output
 * first (flushed to stdout), then the message on stderr, then exit
 * status 2.  We call _exit, not exit: lc_run may run in a child forked
 * from Python, whose atexit handlers and stdio buffers are the parent's.
 */
static const char *stack_overflow_text, *out_of_memory_text;

_Noreturn void lc_fail(const char *text)
{
    flush_output();                     /* to stdout, or stderr after lc_fail_begin */
    write_str(2, text);
    _exit(2);
}

/* The start of a message that shows a value: the compiled code then
 * prints the value with lc_print_* (now to stderr) and calls lc_fail
 * with the rest of the message. */
void lc_fail_begin(const char *prefix)
{
    flush_output();
    out_fd = 2;
    write_str(2, prefix);
}

static void statistics(void);

static _Noreturn void out_of_memory(void)
{
    statistics();                       /* with LC_GC_STATS=1, how the heap got there */
    lc_fail(out_of_memory_text);
}
"""

# %% [markdown]
# ### The heap: a nursery and an old generation
#
# The contract asks that a program allocating 10^8 short-lived cells run in
# bounded memory, and the seed's runtime — `malloc` and never `free` — does
# not. The first collector of this runtime was a *conservative, non-moving
# mark-and-sweep*, the design of Boehm, Demers and Weiser: any word anywhere
# — stack, registers, globals, fields of blocks — that pointed into a block
# kept it alive, and free space was reused in place, between live blocks. It
# allocated by bumping a pointer through at least 16 MB of heap between two
# collections, and the allocation-heavy benchmarks paid for it: every new
# block went to memory that had left the cache since it was last used,
# where OCaml's minor heap of 2 MB stays in the cache.
#
# Most blocks die young — a `Cons` made to be matched at once, a closure
# made to be called once — and a *generational* collector (Lieberman and
# Hewitt; Ungar) is built on that: the program allocates in a small
# *nursery*; when it is full, a *minor collection* copies the few blocks
# still alive out of it, into the *old generation*, and the whole nursery is
# free again — the same memory, still in the cache. A minor collection costs
# the survivors, not the garbage: ten million dead `Cons` cost nothing to
# collect. The old generation is collected rarely, by a *major collection*:
# the mark-and-sweep of before.
#
# Copying needs two things the first collector did without.
#
# - **Precise fields.** To move a block is to update every pointer to it,
#   so the collector must know which words are pointers: update an `Int`
#   that happens to look like an address, and the program computes with a
#   wrong number. A word alone cannot say, but its block can, since the
#   compiler knows the type of every field it stores: that is the *layout*
#   in the header (the section on data, above). After monomorphisation no
#   field has a type that the compiler does not know.
# - **Roots.** The words on the stack and in registers have no header. We
#   keep the stack *conservative*, with **Bartlett's mostly-copying**
#   collection: a young block that a word of the stack points into is
#   *pinned* — it does not move, and becomes old where it stands — and
#   every other survivor is copied. The stack holds the few blocks that the
#   running functions work on, so few blocks are pinned: the figures are
#   below.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: why not precise roots</p>
#
# LLVM can describe the roots on the stack: *stack maps* at every call
# that may collect (`gc.statepoint`), which a precise collector reads to
# find and update the pointers of every frame. But they need a pass of
# their own (`RewriteStatepointsForGC`) that llvmlite's pass builder does
# not offer, and they have a price paid by every call: each pointer live
# across it goes through a stack slot, and is reloaded after. A
# conservative stack costs the calls nothing, and the collector pays with
# a few pinned blocks.
#
# </div>
#
# One more problem is particular to generations. A minor collection must
# find every pointer into the nursery without looking at the old
# generation — not looking at it is the whole point. An old block points to
# a young one only if the program stored the young block into it after it
# became old, and L stores into blocks in one place: `x[i] := y`, on the
# cells of the `var`s that a function captures. After such a store the
# compiled code runs the *write barrier* (above), which adds `x` to the
# *remembered set* if it is old; a minor collection takes the fields of the
# remembered blocks as roots, as it takes the stack and the globals.
#
# The heap is one virtual region the size of the heap limit. The nursery is
# a few *chunks* of it, 64 KB each, 2 MB in all by default (`LC_NURSERY`;
# the size is measured below), reused from one minor collection to the next;
# a chunk that pinned blocks fill more than half is given to the old
# generation and replaced by a fresh one. The old generation is the rest,
# filled in *regions*: gaps that the last major collection left, or fresh
# memory. The flags in each header say where a block stands: `OLD`
# (promoted, pinned, or made by the compiler), `REMEMBERED`, `FORWARDED` (a
# nursery block already copied, whose header now holds the address of its
# copy), `FREE` (not a block but free space, a *filler*: the heap can always
# be walked, block after block), and `CONSERVATIVE` (no layout).
#
# This part of the runtime is the allocator: the slow path behind the
# inline bump allocation, in the nursery, and allocation in the old
# generation, for survivors and for blocks of more than 19 fields.

# %%
#| export
RUNTIME_C += r"""
/* ==== 4. The heap and allocation =====================================
 *
 * The heap lives in one virtual region the size of the heap limit,
 * reserved at start-up with MAP_NORESERVE, so that pages cost memory only
 * once touched.  The used part is [heap_start, heap_end); it grows by
 * moving heap_end up.  It has two generations:
 *
 * - the *nursery*, where the program allocates: a few chunks of 64 KB
 *   (LC_NURSERY bytes in all, 2 MB by default: it stays in the cache),
 *   aligned on 64 KB, reused after every minor collection (section 5);
 * - the *old generation*, everything else: the blocks that survived a
 *   minor collection, copied there.
 *
 * Compiled code allocates inline by bumping lc_hp towards lc_hl, the ends
 * of the current *run*: free space in a nursery chunk.  After a
 * collection a chunk is one run, unless blocks were pinned in it (section
 * 5): then its runs are the spaces between them.  The free space of a run
 * not yet allocated in starts with a filler header, so that the nursery,
 * like the rest of the heap, can be walked block by block.  When a
 * request does not fit, the code calls lc_alloc_slow, which moves to the
 * next run, in this chunk or the next; when there is none, it collects.
 *
 * The old generation is filled in *regions*, some free stretch of the
 * heap: the next gap (in address order) that the last major collection
 * left between live blocks, else fresh memory at heap_end, up to the
 * limit.  The collector copies survivors into the current region, promo.
 * A large request (over LARGE_WORDS) is carved out of the first gap that
 * holds it, or from heap_end; gaps of LARGE_WORDS or more are kept in a
 * list of their own, so that this search does not crawl through the
 * small ones.  Blocks of more than 19 fields -- too many for a layout in
 * the header -- are allocated in the old generation at once (lc_alloc_old).
 */
int64_t lc_hp, lc_hl;
"""

# %% [markdown]
# The state of the heap: the sizes of chunks and regions, the bounds of the
# heap and its side tables (the bitmap of block starts, the map of nursery
# chunks), and the collector's counters.
#
# Nearly all of it is plain global variables: there is one heap per
# process, and one L thread that uses it at a time. Two of these tables
# answer the question the collector asks most often, about a bare address.
# `nursery_map` has one 16-bit entry per 64 KB of heap, non-zero where that
# stretch is a nursery chunk, so "is this address young?" is a subtraction,
# a shift and a load, with no search. `start_bits` has one bit per word of
# the heap, set where a block is known to start; the collector uses it to
# go from an address inside a block to the block's header.

# %%
#| export
RUNTIME_C += r"""
#define CHUNK_SHIFT   16                        /* nursery chunks: 64 KB */
#define CHUNK_WORDS   ((uint64_t)1 << (CHUNK_SHIFT - 3))
#define REGION_WORDS  CHUNK_WORDS               /* regions: 64 KB, up to 128 KB from gaps */
#define LARGE_WORDS   1024
#define NURSERY_BYTES (2ull << 20)
#define MIN_OLD_BYTES (8ull << 20)              /* the old generation's size before a major collection */
#define MIN_MAJOR_COST (64ull << 10)            /* words: the least a major collection is taken to cost */

static uint64_t *heap_start, *heap_end, *heap_limit_end;
static uint64_t *small_gaps, *big_gaps;     /* linked through each gap's word 1 */
static uint64_t *start_bits;                /* known block starts: see section 5 */
static uint16_t *nursery_map;               /* per 64 KB of heap: k + 1 if it is nursery chunk k */
static uint64_t **nursery;                  /* the nursery's chunks */
static uint64_t (*old_bits)[CHUNK_WORDS / 64];  /* per nursery chunk: a bit per word that starts an old block */
static size_t nursery_chunks, next_chunk;   /* how many; the next one to look for runs in */
static size_t base_chunks, room_chunks;     /* LC_NURSERY in chunks; room in nursery and old_bits */
static uint64_t *cursor, *chunk_end;        /* where to look for the next run, in the current chunk */
static int64_t run_start;                   /* for the statistics */
static struct region { uint64_t *hp, *hl; } promo;
static uint64_t gc_stress;                  /* LC_GC_STRESS = n: collect at every allocation, fully every nth */
static uint64_t old_bytes, old_threshold;   /* about the old generation's size; when to collect it */
static uint64_t kept_blocks, rent, major_cost;  /* old blocks in the nursery; what they have cost; a major's cost */
static uint64_t minor_count, major_count, max_heap_bytes, allocated_bytes, promoted_bytes;
static uint64_t pinned_count, stack_scanned;    /* blocks pinned, stack words scanned by minor collections */
static double minor_seconds, major_seconds;
"""

# %% [markdown]
# A few helpers: record a block's start in the bitmap, clear a stretch of
# it, move the end of the heap, and tell whether an address is in the
# nursery.
#
# `make_free` is how the heap stays walkable: free space is never left
# blank, but covered by a *filler*, a header with the `FREE` bit and the
# size of the space, so that a walk from any block start can step over it
# as it steps over a block. `in_nursery` is the test that the collector
# applies to every word it suspects of being a pointer: two comparisons
# with the heap's bounds and a look in `nursery_map`.

# %%
#| export
RUNTIME_C += r"""
static void collect(bool full);

static void note_block_start(const uint64_t *p)
{
    uint64_t i = (uint64_t)(p - heap_start);
    start_bits[i / 64] |= 1ull << (i % 64);
}

/* Forget the recorded starts in [from, to), both multiples of 64 words apart from the heap's start. */
static void clear_starts(const uint64_t *from, const uint64_t *to)
{
    memset(start_bits + (from - heap_start) / 64, 0, (size_t)(to - from) / 64 * 8);
}

static void set_heap_end(uint64_t *end)
{
    uint64_t bytes = (uint64_t)(end - heap_start) * 8;
    heap_end = end;
    if (bytes > max_heap_bytes) max_heap_bytes = bytes;
}

static inline bool in_nursery(uint64_t v)
{
    return v >= (uintptr_t)heap_start && v < (uintptr_t)heap_end
           && nursery_map[(v - (uintptr_t)heap_start) >> CHUNK_SHIFT];
}

/* Free space in the heap: a filler, and its start recorded. */
static void make_free(uint64_t *p, uint64_t words)
{
    *p = filler_header(words);
    note_block_start(p);
}
"""

# %% [markdown]
# The nursery's side. A minor collection leaves each chunk as free *runs*
# between the blocks that stayed (those the stack pinned), each covered by
# a filler. `next_run` finds the next run that is large enough, in this
# chunk or the next; `lc_alloc_slow`, the slow path of the inline bump
# allocation, moves to it, and collects when there is none. In stress mode
# (`LC_GC_STRESS`) every allocation collects.
#
# The fast path is not in this cell: it is the few instructions that the
# back end compiles inline at every allocation, which bump `lc_hp` towards
# `lc_hl`. Only a request that does not fit calls `lc_alloc_slow`. It first
# closes the current run (it counts what was used of it and covers the
# unused rest with a filler), then looks for the next free run that is
# large enough, and collects only when the nursery has none left.
#
# <div class="admonition note">
#
# <p class="admonition-title">Design note: bump allocation, not `malloc`</p>
#
# The obvious alternative is the C library's `malloc` for each block and
# `free` for each dead one. But `malloc` must find a free block of the
# right size, and `free` must be told which blocks are dead, one at a time,
# which is the very question a collector exists to answer. A functional
# program allocates a block for nearly every constructor and closure, and
# most of them die young. With a bump allocator, allocating is an addition
# and a comparison; and since the nursery is emptied by copying out the
# survivors, a dead young block costs nothing at all: no one ever looks at
# it again.
#
# </div>

# %%
#| export
RUNTIME_C += r"""
/* -- The nursery ---------------------------------------------------- */

/* Leave the current run: count what was used of it, and cover the rest
 * with a filler. */
static void close_run(void)
{
    allocated_bytes += (uint64_t)(lc_hp - run_start);
    if (lc_hl > lc_hp) *as_ptr(lc_hp) = filler_header((uint64_t)(lc_hl - lc_hp) / 8);
    lc_hp = lc_hl = run_start = 0;
}

/* The next run that holds `words`, after the cursor: in this chunk, else
 * in the chunks not yet allocated in since the last collection. */
static bool next_run(uint64_t words)
{
    for (;;) {
        while (cursor < chunk_end) {
            uint64_t header = *cursor, n = block_words(header);
            if ((header & FREE_BIT) && n >= words) {
                lc_hp = run_start = as_int(cursor);
                lc_hl = as_int(cursor + n);
                cursor += n;
                return true;
            }
            cursor += n;
        }
        if (next_chunk == nursery_chunks) return false;
        cursor = nursery[next_chunk++];
        chunk_end = cursor + CHUNK_WORDS;
    }
}

/* The address of `words` fresh words in the nursery.  The caller must
 * write the header at once, before it allocates again: a collection needs
 * every block in the heap to have its header. */
int64_t lc_alloc_slow(int64_t words)
{
    uint64_t w = words < 1 ? 1 : (uint64_t)words;
    close_run();
    if (gc_stress || !next_run(w)) {
        collect(false);
        if (!next_run(w)) out_of_memory();
    }
    int64_t p = lc_hp;
    lc_hp += 8 * (int64_t)w;
    if (gc_stress) close_run();            /* so that the next allocation comes here too */
    return p;
}
"""

# %% [markdown]
# The old generation's side. Survivors are copied into a *region*: a gap
# that the last major collection left, or fresh memory at the end of the
# heap. Large blocks get a gap of their own, from a list of the big gaps.
# `old_alloc` is the common case, inline in the collector's copy loop.
#
# A region is to the old generation what a run is to the nursery: a stretch
# of free memory, filled by bumping a pointer (`promo.hp` towards
# `promo.hl`). `take_gap_region` takes gaps off a free list until one is
# large enough. A gap that is too small is dropped from the list but not
# lost: it stays in the heap as a filler, and the next major sweep merges
# it with the dead blocks around it. A gap more than twice the size of a
# region is cut: one region is handed out, and the rest goes back on the
# list. `grow`, fresh memory at the end of the heap up to the limit, is the
# last resort.

# %%
#| export
RUNTIME_C += r"""
/* -- The old generation --------------------------------------------- */

/* Take gaps off *list until one holds `words`, as the new region.  The
 * ones too small are dropped: they stay in the heap as fillers, and the
 * next sweep merges them with their neighbours.  A big gap is handed out
 * one region at a time, the rest going back to the list. */
static bool take_gap_region(uint64_t **list, uint64_t words)
{
    while (*list != NULL) {
        uint64_t *gap = *list, size = block_words(gap[0]);
        *list = as_ptr((int64_t)gap[1]);
        if (size < words) continue;
        if (size > 2 * REGION_WORDS) {
            uint64_t *rest = gap + REGION_WORDS;
            make_free(rest, size - REGION_WORDS);
            rest[1] = (uint64_t)as_int(*list);
            *list = rest;
            size = REGION_WORDS;
        }
        promo.hp = gap, promo.hl = gap + size;
        return true;
    }
    return false;
}

/* Leave the current region, its rest covered with a filler. */
static void close_region(void)
{
    if (promo.hl > promo.hp) make_free(promo.hp, (uint64_t)(promo.hl - promo.hp));
    promo.hp = promo.hl = NULL;
}

/* Fresh memory at heap_end, up to the limit: `words`, or a region if more. */
static uint64_t *grow(uint64_t words)
{
    if ((uint64_t)(heap_limit_end - heap_end) < words) return NULL;
    uint64_t *p = heap_end;
    set_heap_end(heap_end + words);
    return p;
}
"""

# %% [markdown]
# A block larger than `LARGE_WORDS` takes the first big gap that holds
# it, the rest of the gap staying in its list.
#
# This is *first fit*: the first gap that is large enough, not the smallest
# one. The list it searches holds only the gaps of `LARGE_WORDS` (1,024
# words) or more, so the many small gaps never slow it down. What remains
# of the gap after the block becomes a filler, and stays on the list if it
# has room for the link: a free gap is linked to the next through its word
# 1, so it needs two words.

# %%
#| export
RUNTIME_C += r"""
/* A large block from the first big gap that holds it.  The rest of the
 * gap stays in the list, in the same place. */
static uint64_t *take_gap_block(uint64_t words)
{
    for (uint64_t *prev = NULL, *gap = big_gaps; gap != NULL; prev = gap, gap = as_ptr((int64_t)gap[1])) {
        uint64_t size = block_words(gap[0]);
        if (size < words) continue;
        uint64_t *next = as_ptr((int64_t)gap[1]), *rest = gap + words;
        if (size - words >= 1) make_free(rest, size - words);
        if (size - words >= 2) {               /* room for a link: keep it listed */
            rest[1] = (uint64_t)as_int(next);
            next = rest;
        }
        if (prev) prev[1] = (uint64_t)as_int(next); else big_gaps = next;
        return gap;
    }
    return NULL;
}
"""

# %% [markdown]
# `old_alloc_slow` puts a block in the current region, taking a new one
# when it is full: a gap from the lists, or fresh memory.
#
# The pair `old_alloc` / `old_alloc_slow` repeats, for the collector, the
# split of the program's own allocation: a fast path small enough for the C
# compiler to inline into the loop that copies survivors, and a slow path,
# called only when the region is full or the block is large. Every block
# allocated here has its start recorded in `start_bits`: old blocks are the
# ones an ambiguous root may point into later.

# %%
#| export
RUNTIME_C += r"""
/* `words` words in the old generation, or NULL if the heap is at its
 * limit.  The block's start is recorded. */
static uint64_t *old_alloc_slow(uint64_t words)
{
    uint64_t *p;
    if (words > LARGE_WORDS) {
        if ((p = take_gap_block(words)) == NULL && (p = grow(words)) == NULL) return NULL;
    } else {
        if ((uint64_t)(promo.hl - promo.hp) < words) {
            close_region();
            if (!take_gap_region(&small_gaps, words) && !take_gap_region(&big_gaps, words)) {
                uint64_t n = (uint64_t)(heap_limit_end - heap_end) < REGION_WORDS ? words : REGION_WORDS;
                if ((promo.hp = grow(n)) == NULL) return NULL;
                promo.hl = promo.hp + n;
            }
        }
        p = promo.hp;
        promo.hp += words;
    }
    note_block_start(p);
    old_bytes += words * 8;
    return p;
}

static inline uint64_t *old_alloc(uint64_t words)      /* the common case inline */
{
    if (words > LARGE_WORDS || (uint64_t)(promo.hl - promo.hp) < words) return old_alloc_slow(words);
    uint64_t *p = promo.hp;
    promo.hp += words;
    note_block_start(p);
    old_bytes += words * 8;
    return p;
}
"""

# %% [markdown]
# A fresh nursery chunk is carved out of fresh memory, aligned on 64 KB so
# that `nursery_map` can tell, from an address alone, whether it is in the
# nursery. `lc_alloc_old` allocates a block too wide for a layout in the old
# generation at once, and remembers it: its fields may come to point into
# the nursery.
#
# The header that `lc_alloc_old` writes is a placeholder until the compiled
# code writes the real one: it says that the block is old and has no layout
# (`CONSERVATIVE`), so that anything that reads it meanwhile treats each of
# its fields as a possible pointer, which is always safe.

# %%
#| export
RUNTIME_C += r"""
/* Nursery chunk k from fresh memory, aligned on 64 KB, free: one run. */
static uint64_t *fresh_chunk(size_t k)
{
    uint64_t *aligned = heap_start + (((uint64_t)(heap_end - heap_start) + CHUNK_WORDS - 1) & ~(CHUNK_WORDS - 1));
    if (aligned > heap_limit_end || (uint64_t)(heap_limit_end - aligned) < CHUNK_WORDS) return NULL;
    if (aligned > heap_end) make_free(heap_end, (uint64_t)(aligned - heap_end));
    set_heap_end(aligned + CHUNK_WORDS);
    nursery_map[(uint64_t)(aligned - heap_start) >> (CHUNK_SHIFT - 3)] = (uint16_t)(k + 1);
    memset(old_bits[k], 0, sizeof old_bits[k]);
    make_free(aligned, CHUNK_WORDS);
    return aligned;
}

static void remember(uint64_t *block);

/* A block of more than 19 fields: in the old generation, and remembered,
 * as its fields may be made to point into the nursery. */
int64_t lc_alloc_old(int64_t words)
{
    uint64_t w = (uint64_t)words, *p;
    if (old_bytes > old_threshold) collect(true);
    if ((p = old_alloc(w)) == NULL) {
        collect(true);
        if ((p = old_alloc(w)) == NULL) out_of_memory();
    }
    *p = CONSERVATIVE_BIT | OLD_BIT | (w - 1);   /* until the compiled code writes the header */
    allocated_bytes += 8 * w;
    remember(p);
    return as_int(p);
}
"""

# %% [markdown]
# ### The garbage collector
#
# A minor collection runs when the nursery has no run left for a request,
# in three phases:
#
# 1. *pin*: every word of the stack (registers included: the collector
#    first spills them into its own frame), of the globals array, and of the
#    remembered blocks without a layout, that points into a young block —
#    anywhere into it: LLVM may keep the address of a field rather than of
#    the block — marks it `OLD` where it stands;
# 2. *copy*: every young block that a precise root points to — a field of a
#    remembered block or of a pinned block — is copied into the old
#    generation, its old header replaced by the address of the copy
#    (`FORWARDED`) so that the other pointers to it find the copy, and the
#    fields of each copy are treated the same way in turn, until no copy is
#    left to scan (Cheney's algorithm, with a stack instead of a queue);
# 3. *sweep the nursery*: each chunk becomes free runs between its old
#    blocks — found in a small bitmap per chunk, so the sweep never walks
#    the dead blocks either.
#
# A major collection runs after a minor one when the old generation has
# doubled since the last: mark from the roots, sweep the old generation into
# gaps, and the old blocks in the nursery into runs. To find the block
# around an address that a root points into, both keep a bitmap of known
# block starts and walk from the nearest one below, block by block, as the
# comments explain.
#
# A major collection also runs when the pinned blocks have cost as much as
# one would. A block pinned once stays in its nursery chunk, as an old
# block, until a major collection finds it dead; and a program that
# allocates fast but keeps little, like `cpstak` in chapter 12, pins two or
# three blocks at every minor collection and promotes almost nothing, so
# its old generation never doubles. Each such block costs every later minor
# collection a little: the sweep reads its header, and it cuts a free run
# in two, so the allocator leaves its fast path once more. So the collector
# keeps a *rent*: the old blocks that each sweep of the nursery met, added
# up. When the rent exceeds what a major collection would cost — the live
# words it marks plus an eighth of the heap's words for its sweep, and at
# least 64 K — a major collection runs, and the rent starts again from
# zero. It is the rule for renting skis: rent until what you have paid
# equals the price, then buy; it never pays more than twice the best choice
# made knowing the future. On `cpstak` at ten times chapter 12's size
# (`def n = 2000`) it took the run from 0.54 s to 0.43 s: ten major
# collections where there had been none, and the sweep and the search for
# runs went from 18 % of the samples of `perf record` to 7 %.
#
# A minor collection scans the whole stack, as OCaml 4's does on x86-64.
# When the stack is deep — a recursion that builds a list on its way back,
# like `range` in `primes` — that scan, not the survivors, becomes its cost,
# so the nursery grows with the stack: to twice the stack's size, up to 64
# MB, and back to its own size when the stack is shallow again.
#
# Two terms from the literature come up in every cell below. A root is
# *precise* when the collector knows it holds a pointer (a field whose
# layout bit says so), and may then move the block and rewrite the field;
# it is *ambiguous* (or *conservative*) when it may be an `Int` that merely
# looks like an address (a word of the stack), and then the block must stay
# where it is. Bartlett's idea is to treat the two kinds differently in one
# collection: pin for the ambiguous, copy for the precise.
#
# <div class="admonition note">
#
# <p class="admonition-title">Design note: two generations, not one mark-sweep</p>
#
# The runtime began with a single mark-sweep of the whole heap, and it is
# still here, as the major collection. Its cost is every live block, at
# every collection, although most of the blocks that a functional program
# allocates are dead by the next one. A nursery emptied by copying costs
# the roots and the survivors only. The price of generations is the write
# barrier and the remembered set, and L pays it in one place: the stores
# into the cells of captured `var`s.
#
# </div>
#
# <div class="admonition note">
#
# <p class="admonition-title">Design note: a stack of copies, not Cheney's scan pointer</p>
#
# Cheney's copying collector needs no list of work: the copies lie one
# after the other in to-space, and a scan pointer walks through them behind
# the allocation pointer. Here the copies go into regions of the old
# generation, which need not be next to each other (a region may be a gap
# anywhere in the heap), so an explicit stack of copies still to scan,
# `to_scan`, takes the place of the scan pointer.
#
# </div>

# %%
#| export
RUNTIME_C += r"""
/* ==== 5. The garbage collector =======================================
 *
 * Generational, with a nursery that is copied and an old generation that
 * is marked and swept.  The roots are the registered globals array and
 * every word on the stack of the thread that runs L code, from the
 * current stack pointer to the top, registers included: *ambiguous*
 * roots, any of which may be an Int.  Fields of blocks are precise: the
 * layout in the header says which may be pointers.
 *
 * A minor collection empties the nursery into the old generation, in
 * three phases (Bartlett's mostly-copying collection):
 *   1. pin: a young block that an ambiguous root points into -- anywhere
 *      into it: compiled code may hold interior pointers -- cannot move,
 *      as the root cannot be updated if it is not a pointer.  It stays
 *      where it is, and becomes old there (OLD_BIT).  The fields of
 *      remembered blocks without a layout are ambiguous too.
 *   2. copy: every young block that a precise root points to is copied
 *      into the old generation, and the root updated: the fields of
 *      remembered blocks and of pinned blocks, then the fields of each
 *      copy, until there is none left to scan.  The block left behind is
 *      marked FORWARDED, with the address of its copy, for the other
 *      pointers to it.
 *   3. sweep the nursery: every chunk becomes free runs around the pinned
 *      blocks.  A chunk that pinned blocks fill more than half is given
 *      to the old generation, and a fresh chunk takes its place.
 * The old generation's blocks that may point into the nursery are the
 * *remembered set*: compiled code, after it stores into a block whose
 * header says OLD (and not yet REMEMBERED), calls lc_remember (the write
 * barrier), and blocks allocated old are remembered at once.  A minor
 * collection costs the stack, the globals, the remembered set and the
 * survivors, not the garbage: most of the nursery is never looked at.
 *
 * A major collection, when the old generation has doubled since the
 * last one, or when the old blocks met by the sweeps of the nursery since
 * then add up to more than a major collection costs, is the mark-sweep of the whole heap that this runtime had
 * before it had a nursery: marking follows pointers from the roots with
 * an explicit stack (recursion would overflow the C stack on a long
 * list), and the sweep turns what is not marked into gaps, for the
 * regions of the old generation.  It comes right after a minor
 * collection, when the nursery holds no young block.
 *
 * To find the block around an address (an ambiguous root), the collector
 * keeps a bitmap of block starts, start_bits, with one bit per heap word.
 * Not every start is recorded -- the mutator's inline fast path does not
 * record the blocks it allocates -- but every recorded one is a real block
 * start: after a sweep, the live blocks and the gaps; since then, the
 * start of each run, region and copy.  Since blocks and gaps tile the
 * heap, the block around an address can be found by walking forward,
 * block by block, from the nearest recorded start below it, recording the
 * starts it passes.
 */
static uint64_t *mark_bits;                /* one bit per heap word */
struct stack { uint64_t **items; size_t len, cap; };
static struct stack to_scan, remembered, pinned;
static int64_t *global_roots, n_global_roots;
static uintptr_t stack_top;                /* top of the L thread's stack */
"""

# %% [markdown]
# The stacks grow by doubling; `now_seconds` times the collections for the
# statistics.
#
# The collector keeps its lists of work in these arrays rather than
# recursing, because the structures it follows can be as deep as they are
# long: a list of a million cells is a chain of a million blocks, and
# following it by recursion in C would overflow the C stack. Doubling the
# array when it is full makes a push cost a constant on average.

# %%
#| export
RUNTIME_C += r"""
static void grow_stack(struct stack *s)
{
    s->cap = s->cap ? 2 * s->cap : 1024;
    s->items = realloc(s->items, s->cap * sizeof *s->items);
    if (s->items == NULL) out_of_memory();
}

static inline void push(struct stack *s, uint64_t *block)
{
    if (s->len == s->cap) grow_stack(s);
    s->items[s->len++] = block;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
"""

# %% [markdown]
# The collector's helpers. `find_block` finds the block around an address
# that a word of the stack holds, from the bitmap of block starts: the
# nearest recorded start below it, then block by block. `lc_remember` is the
# slow path of the write barrier.
#
# An example: a word of the stack points three words into a block whose
# start was never recorded (the inline allocator records nothing).
# `find_block` masks off the bits above the address in its word of
# `start_bits`, and takes the highest bit left (`__builtin_clzll` counts
# the zero bits above it in the 64-bit word),
# moving to lower words if there is none. From that start it steps forward,
# reading each header for the block's size, until the next step would pass
# the address; it records the starts it passes, so a later search nearby is
# shorter. `lc_remember` sets the `REMEMBERED` bit, which the compiled code
# tests before it calls, so that a block is added to the remembered set
# once between two collections, however often the program stores into it.

# %%
#| export
RUNTIME_C += r"""
/* The block (or filler) that contains address v, or NULL if v is outside
 * the heap.  When v points at a recorded start -- the usual case, as L
 * values point at headers -- there is no walk, and no header to read. */
static inline uint64_t *find_block(uint64_t v)
{
    if (v < (uintptr_t)heap_start || v >= (uintptr_t)heap_end) return NULL;
    uint64_t i = (v - (uintptr_t)heap_start) / 8, w = i / 64;
    uint64_t bits = start_bits[w] & ((2ull << (i % 64)) - 1);   /* bits 0..i%64 */
    while (bits == 0) bits = start_bits[--w];    /* ends: word 0 starts a block */
    uint64_t s = w * 64 + 63 - (uint64_t)__builtin_clzll(bits), next;
    for (; s < i && (next = s + block_words(heap_start[s])) <= i; s = next)
        note_block_start(heap_start + next);
    return heap_start + s;
}

/* The write barrier's slow path. */
static void remember(uint64_t *block)
{
    *block |= REMEMBERED_BIT;
    push(&remembered, block);
}

void lc_remember(int64_t block) { remember(as_ptr(block)); }

static void pin(uint64_t v);
static void mark_value(uint64_t v);
"""

# %% [markdown]
# The stack is scanned word by word, from the collector's own frame (where
# the registers were spilled) to the top of the L thread's stack. In a
# minor collection a word pins what it points to in the nursery; in a
# major one it marks.
#
# The test `v - low < size` is one unsigned comparison doing the work of
# two: a value below `heap_start` wraps around to a huge number, and fails
# it as a value above `heap_end` does. The scan starts at the frame of
# `scan_thread_stack` itself, which lies below the frame of the collection
# where the registers were spilled (`__builtin_unwind_init`, in
# `minor_collection` below); this is why the function must not be inlined.

# %%
#| export
RUNTIME_C += r"""
/* Scan the stack from this function's frame up to the top: pin (in a
 * minor collection) or mark what its words point to, and return its size
 * in words.  Not inlined, so that its frame lies below that of the
 * collection, where the registers were put.  The loop is the cost of a
 * minor collection when the stack is deep: it tests a word in a few
 * instructions, and looks further only at a word that points into the
 * nursery. */
static __attribute__((noinline)) uint64_t scan_thread_stack(bool minor)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0) & ~(uintptr_t)7;
    uint64_t low = (uintptr_t)heap_start, size = (uintptr_t)heap_end - low;
    for (const uint64_t *p = (const uint64_t *)sp; p < (const uint64_t *)stack_top; p++) {
        uint64_t v = *p;
        if (!minor) mark_value(v);
        else if (v - low < size && nursery_map[(v - low) >> CHUNK_SHIFT]) pin(v);
    }
    return (stack_top - sp) / 8;
}
"""

# %% [markdown]
# A minor collection's first two phases: `pin` marks a young block `OLD`
# where it stands, and records it in its chunk's row of `old_bits`;
# `forward` copies a young block that a precise field points to, leaves the
# address of the copy in its header, and updates the field.
#
# A word that only looks like a pointer (an `Int` that happens to fall
# inside the nursery) pins a block that may well be dead: the block
# survives one collection more. That wastes a little memory, and is never
# wrong; it is the whole price of a conservative stack. `forward` handles
# the precise case, in three steps that read in order: a block already
# copied has its new address in its header, and the field is made to point
# there; a pinned block stays, and so does the field; any other block is
# copied, a forwarding address left in its old header, and the copy pushed
# on `to_scan`, to have its own fields forwarded in turn.

# %%
#| export
RUNTIME_C += r"""
/* -- Minor collections ---------------------------------------------- */

/* Phase 1: a word that may be a pointer pins the young block it points into. */
static void pin(uint64_t v)
{
    if (!in_nursery(v)) return;
    uint64_t *block = find_block(v);
    if (*block & (OLD_BIT | FREE_BIT)) return;      /* old already, or free space */
    *block |= OLD_BIT;
    push(&pinned, block);
    uint64_t i = (uint64_t)(block - heap_start), k = nursery_map[i / CHUNK_WORDS] - 1u;
    old_bits[k][i % CHUNK_WORDS / 64] |= 1ull << (i % 64);
}

/* Phase 2: a field that holds a pointer into the nursery is made to point
 * to the block's copy, made first if need be. */
static void forward(uint64_t *field)
{
    uint64_t v = *field;
    if (!in_nursery(v)) return;
    uint64_t *block = as_ptr((int64_t)v), header = *block;
    if (header & FORWARDED_BIT) {
        *field = header & ~FORWARDED_BIT;
        return;
    }
    if (header & OLD_BIT) return;                    /* pinned: it stays */
    uint64_t words = (header & FIELDS_MASK) + 1, *copy = old_alloc(words);
    if (copy == NULL) out_of_memory();
    memcpy(copy, block, words * 8);
    *copy = header | OLD_BIT;
    *block = FORWARDED_BIT | (uint64_t)as_int(copy);
    *field = (uint64_t)as_int(copy);
    promoted_bytes += words * 8;
    push(&to_scan, copy);
}

static void forward_fields(uint64_t *block)
{
    for (uint64_t m = layout(*block); m != 0; m &= m - 1) forward(block + 1 + __builtin_ctzll(m));
}
"""

# %% [markdown]
# The third phase sweeps each chunk into free runs around its old blocks,
# which `old_bits` lists, so the dead blocks are never read. A chunk that
# pinned blocks fill more than half goes to the old generation, and a
# fresh chunk replaces it.
#
# `sweep_chunk` returns the words that stay, and that number decides a
# chunk's fate: with more than half of it pinned, the runs left between the
# pinned blocks are few and small, so the chunk leaves the nursery, its
# free runs going onto the old generation's gap lists, and a fresh chunk
# takes its place. If the heap has no room for a fresh chunk, the full one
# stays.

# %%
#| export
RUNTIME_C += r"""
/* Phase 3, for nursery chunk k: free runs around its old blocks (pinned
 * now or before), which its row of old_bits lists -- so the sweep does not
 * walk the young blocks, dead or copied; in a major collection, the old
 * blocks that are not marked go too.  Returns how many words stay. */
static bool is_marked(const uint64_t *p);

static uint64_t sweep_chunk(size_t k, bool major)
{
    uint64_t *chunk = nursery[k], *end = chunk + CHUNK_WORDS, *free_from = chunk, kept = 0;
    clear_starts(chunk, end);
    for (uint64_t w = 0; w < CHUNK_WORDS / 64; w++)
        for (uint64_t bits = old_bits[k][w]; bits != 0; bits &= bits - 1) {
            uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(bits), *p = chunk + i, n = block_words(*p);
            if (major && !is_marked(p)) {
                old_bits[k][w] &= ~(1ull << (i % 64));
                continue;
            }
            if (p > free_from) make_free(free_from, (uint64_t)(p - free_from));
            note_block_start(p);
            kept += n, free_from = p + n, kept_blocks++;
        }
    if (end > free_from) make_free(free_from, (uint64_t)(end - free_from));
    return kept;
}

static void add_free_to_lists(uint64_t *chunk);

static void sweep_nursery(void)
{
    kept_blocks = 0;
    for (size_t c = 0; c < nursery_chunks; c++) {
        if (sweep_chunk(c, false) > CHUNK_WORDS / 2) {
            uint64_t *full = nursery[c];          /* too full: the chunk goes to the old generation */
            nursery_map[(uint64_t)(full - heap_start) >> (CHUNK_SHIFT - 3)] = 0;
            if ((nursery[c] = fresh_chunk(c)) == NULL) {
                nursery_map[(uint64_t)(full - heap_start) >> (CHUNK_SHIFT - 3)] = (uint16_t)(c + 1);
                nursery[c] = full;                 /* no room for another: keep it */
                continue;
            }
            add_free_to_lists(full);
        }
    }
    next_chunk = 0;
    cursor = chunk_end = NULL;
}
"""

# %% [markdown]
# The nursery grows with a deep stack, and shrinks back when the stack is
# shallow again (the section's introduction above says why).
#
# `want` is twice the stack's size counted in chunks, capped at 1,024
# chunks (`MAX_NURSERY_CHUNKS`, 64 MB) and at an eighth of the heap, and
# never less than `LC_NURSERY`. Chunks are added from fresh memory, and a
# chunk that leaves, when the nursery shrinks, becomes old-generation
# memory like a chunk too full of pinned blocks.

# %%
#| export
RUNTIME_C += r"""
/* A minor collection costs at least the stack it scans.  When the stack
 * is deep, the nursery grows to twice its size (up to 64 MB, and an
 * eighth of the heap limit), so that
 * scanning costs at most half a word per word allocated; when the stack
 * is shallow again, the nursery shrinks back to LC_NURSERY.  A chunk that
 * leaves the nursery goes to the old generation, with its free runs. */
#define MAX_NURSERY_CHUNKS 1024

static void resize_nursery(uint64_t stack_words)
{
    uint64_t want = 2 * stack_words / CHUNK_WORDS, most = (uint64_t)(heap_limit_end - heap_start) / CHUNK_WORDS / 8;
    if (want > MAX_NURSERY_CHUNKS) want = MAX_NURSERY_CHUNKS;
    if (want > most) want = most;                 /* and at most an eighth of the heap */
    if (want < base_chunks) want = base_chunks;
    if (want > room_chunks) {
        room_chunks = want;
        nursery = realloc(nursery, room_chunks * sizeof *nursery);
        old_bits = realloc(old_bits, room_chunks * sizeof *old_bits);
        if (nursery == NULL || old_bits == NULL) out_of_memory();
    }
    while (nursery_chunks < want && (nursery[nursery_chunks] = fresh_chunk(nursery_chunks)) != NULL)
        nursery_chunks++;
    while (nursery_chunks > want) {
        uint64_t *chunk = nursery[--nursery_chunks];
        nursery_map[(uint64_t)(chunk - heap_start) >> (CHUNK_SHIFT - 3)] = 0;
        add_free_to_lists(chunk);
    }
}
"""

# %% [markdown]
# `LC_GC_DUMP` describes the nursery block by block: the picture of a minor
# collection later in this chapter is drawn from it.

# %%
#| export
RUNTIME_C += r"""
/* LC_GC_DUMP = n: describe the nursery, block by block, on stderr, at the
 * start of the nth minor collection, after its tracing, and at its end:
 * the data of the pictures in chapter 10.  A line per block: the stage,
 * the chunk, the block's offset and size in words, what it is, and for a
 * copied block, the offset of its copy from the start of the heap. */
static uint64_t dump_at;

static void dump_nursery(const char *stage)
{
    char line[128];
    for (size_t k = 0; k < nursery_chunks; k++)
        for (uint64_t *p = nursery[k], n; p < nursery[k] + CHUNK_WORDS; p += n) {
            uint64_t h = *p;
            n = block_words(h);
            const char *what = h & FORWARDED_BIT ? "copied" : h & FREE_BIT ? "free" : h & OLD_BIT ? "old" : "young";
            int length = snprintf(line, sizeof line, "%s %zu %llu %llu %s %lld\n", stage, k,
                                  (unsigned long long)(p - nursery[k]), (unsigned long long)n, what,
                                  h & FORWARDED_BIT ? (long long)(as_ptr((int64_t)(h & ~FORWARDED_BIT)) - heap_start) : -1ll);
            write_all(2, line, (size_t)length);
        }
}
"""

# %% [markdown]
# The minor collection itself: pin from the globals, the stack and the
# remembered blocks without a layout; copy from the remembered and pinned
# blocks, then from the copies; sweep; resize.
#
# Read it against the three phases. The first loops pin: the globals, the
# stack (registers included, spilled by `__builtin_unwind_init`) and the
# remembered blocks without a layout. The next ones copy: from the fields
# of the remembered blocks (whose `REMEMBERED` bit is cleared: the
# remembered set starts empty again), from the fields of the pinned blocks,
# then from the copies until `to_scan` is empty. Then the sweep and the
# resize. The order matters: every pin must be made before anything is
# copied, or a block that a word of the stack points into could be moved,
# and that word left pointing at the block's old place.

# %%
#| export
RUNTIME_C += r"""
static __attribute__((noinline)) void minor_collection(void)
{
    double t0 = now_seconds();
    bool dump = minor_count + 1 == dump_at;
    if (dump) dump_nursery("start");
    /* Spill the callee-saved registers into this frame, where the stack
     * scan sees them: L code may keep a pointer only in a register.
     * (setjmp would not do: glibc scrambles the saved rbp, which LLVM may
     * use as an ordinary register.) */
    __builtin_unwind_init();
    for (int64_t i = 0; i < n_global_roots; i++) pin((uint64_t)global_roots[i]);
    uint64_t stack_words = scan_thread_stack(true);
    stack_scanned += stack_words;
    for (size_t i = 0; i < remembered.len; i++) {
        uint64_t *block = remembered.items[i];
        if (*block & CONSERVATIVE_BIT)
            for (uint64_t f = 1; f <= (*block & FIELDS_MASK); f++) pin(block[f]);
    }
    for (size_t i = 0; i < remembered.len; i++) {
        forward_fields(remembered.items[i]);
        *remembered.items[i] &= ~REMEMBERED_BIT;
    }
    for (size_t i = 0; i < pinned.len; i++) {
        forward_fields(pinned.items[i]);
        old_bytes += 8 * block_words(*pinned.items[i]);
    }
    while (to_scan.len > 0) forward_fields(to_scan.items[--to_scan.len]);
    if (dump) dump_nursery("traced");
    pinned_count += pinned.len;
    remembered.len = pinned.len = 0;
    sweep_nursery();
    resize_nursery(stack_words);
    if (dump) dump_nursery("swept");
    minor_count++;
    minor_seconds += now_seconds() - t0;
}
"""

# %% [markdown]
# A major collection marks from the roots with an explicit stack, and reads
# each block's header only when it is its turn to be scanned, a few blocks
# after it was pushed and prefetched: the misses of the cache overlap.
#
# `mark_value` and `mark_field` are the ambiguous and the precise case
# again. A word of the stack may point anywhere into a block, so it goes
# through `find_block`; a field whose layout says "pointer" holds the start
# of a block, so its block is marked at once, without a search. A block
# without a layout (`CONSERVATIVE`) has all its fields treated as words of
# the stack.

# %%
#| export
RUNTIME_C += r"""
/* -- Major collections ---------------------------------------------- */

/* Mark the block v points into, and push it to have its fields scanned.
 * We do not read its header here: that read is likely to miss the cache,
 * and drain_mark_stack overlaps such misses.  So a stray word that points
 * into free space marks the filler too; scan_block and sweep ignore it. */
static inline void mark_block(uint64_t *block)
{
    uint64_t i = (uint64_t)(block - heap_start), bit = 1ull << (i % 64);
    if (mark_bits[i / 64] & bit) return;
    mark_bits[i / 64] |= bit;
    push(&to_scan, block);
}

static void mark_value(uint64_t v)
{
    uint64_t *block = find_block(v);
    if (block != NULL) mark_block(block);
}

/* A field that the layout says may be a pointer holds an L value: the
 * start of a block, if it is in the heap at all.  No search. */
static inline void mark_field(uint64_t v)
{
    if (v - (uintptr_t)heap_start < (uintptr_t)heap_end - (uintptr_t)heap_start) mark_block(as_ptr((int64_t)v));
}

static void scan_block(const uint64_t *block)
{
    uint64_t header = *block;
    if (header & FREE_BIT) return;
    if (header & CONSERVATIVE_BIT)
        for (uint64_t f = 1; f <= (header & FIELDS_MASK); f++) mark_value(block[f]);
    else
        for (uint64_t m = layout(header); m != 0; m &= m - 1) mark_field(block[1 + __builtin_ctzll(m)]);
}
"""

# %% [markdown]
# `drain_mark_stack` scans the pushed blocks with a small prefetch queue.
#
# For a reader new to caches: reading a header that is not in the
# processor's cache means waiting for main memory, which takes far longer
# than the few instructions that scan a block. `__builtin_prefetch` asks
# for the memory without waiting for it. Popping up to eight blocks ahead
# of the one being scanned lets up to eight of these waits overlap, instead
# of taking them one after the other.

# %%
#| export
RUNTIME_C += r"""
/* Scan pushed blocks until none is left.  A block popped off the stack is
 * prefetched and waits in a small queue while the blocks before it are
 * scanned, so that its header is in the cache when its turn comes; this
 * makes marking nearly twice as fast as waiting for one miss at a time. */
#define PREFETCH_QUEUE 8

static void drain_mark_stack(void)
{
    uint64_t *queue[PREFETCH_QUEUE];
    unsigned first = 0, count = 0;
    for (;;) {
        if (to_scan.len > 0 && count < PREFETCH_QUEUE) {
            uint64_t *block = to_scan.items[--to_scan.len];
            __builtin_prefetch(block);
            queue[(first + count++) % PREFETCH_QUEUE] = block;
        } else if (count > 0) {
            scan_block(queue[first]);
            first = (first + 1) % PREFETCH_QUEUE, count--;
        } else {
            return;
        }
    }
}
"""

# %% [markdown]
# The sweep turns the space between live blocks into gaps, walking the mark
# bits rather than the heap, so it never touches a dead block either.
#
# The gaps go onto two lists, in address order: small gaps for the regions
# of survivors, and gaps of `LARGE_WORDS` or more for large blocks. A gap
# of a single word has no room for a link, and stays a filler only, until a
# later sweep merges it into a larger one.

# %%
#| export
RUNTIME_C += r"""
/* Append a gap to its free list; the sweep finds gaps in address order. */
static uint64_t *small_tail, *big_tail;

static void add_gap(uint64_t *gap, uint64_t words)
{
    make_free(gap, words);
    if (words < 2) return;                 /* no room for a link: filler only */
    gap[1] = 0;
    bool big = words >= LARGE_WORDS;
    uint64_t **tail = big ? &big_tail : &small_tail;
    if (*tail) (*tail)[1] = (uint64_t)as_int(gap); else *(big ? &big_gaps : &small_gaps) = gap;
    *tail = gap;
}

/* The free runs of a chunk that leaves the nursery, for the old generation. */
static void add_free_to_lists(uint64_t *chunk)
{
    for (uint64_t *p = chunk, n; p < chunk + CHUNK_WORDS; p += n) {
        n = block_words(*p);
        if ((*p & FREE_BIT) && n >= 2) {
            uint64_t **list = n >= LARGE_WORDS ? &big_gaps : &small_gaps;
            p[1] = (uint64_t)as_int(*list);
            *list = p;
        }
    }
}

static bool is_marked(const uint64_t *p)
{
    uint64_t i = (uint64_t)(p - heap_start);
    return (mark_bits[i / 64] >> (i % 64) & 1) && !(*p & FREE_BIT);
}
"""

# %% [markdown]
# `sweep` walks the mark bits of the whole heap.
#
# It goes 64 heap words at a time, one word of `mark_bits`: each set bit is
# the start of a live block, and everything between the end of one live
# block and the start of the next becomes one gap, however many dead blocks
# and old gaps it held. A nursery chunk is skipped as a whole and swept by
# `sweep_chunk`, as in a minor collection. Free space at the very end of
# the heap is not made a gap: `heap_end` moves back down instead.

# %%
#| export
RUNTIME_C += r"""
/* The space between the end of one live block and the start of the next
 * becomes one gap, whatever dead blocks and old gaps it held; free space
 * at the very end goes back to heap_end instead.  Walking the mark bits,
 * not the heap, the sweep never touches a dead block: its cost is the
 * live blocks plus a bitmap word per 64 heap words.  It also resets the
 * recorded starts to the live blocks and the new gaps.  A nursery chunk
 * is swept as in a minor collection, its marked blocks kept, and gives
 * no gap.  Returns the number of live words. */
static uint64_t sweep(void)
{
    uint64_t n = (uint64_t)(heap_end - heap_start), live = 0, free_from = 0;
    small_gaps = big_gaps = small_tail = big_tail = NULL;
    for (uint64_t w = 0; w < (n + 63) / 64; w++) {
        uint64_t first = w * 64;
        if (first % CHUNK_WORDS == 0 && nursery_map[first / CHUNK_WORDS]) {
            if (first > free_from) add_gap(heap_start + free_from, first - free_from);
            live += sweep_chunk(nursery_map[first / CHUNK_WORDS] - 1u, true);
            free_from = first + CHUNK_WORDS;
            w += CHUNK_WORDS / 64 - 1;
            continue;
        }
        start_bits[w] = mark_bits[w];
        for (uint64_t bits = mark_bits[w]; bits != 0; bits &= bits - 1) {
            uint64_t i = first + (uint64_t)__builtin_ctzll(bits), header = heap_start[i];
            if (header & FREE_BIT) {           /* a filler, marked by a stray word */
                start_bits[w] &= ~(1ull << (i % 64));
                continue;
            }
            if (i > free_from) add_gap(heap_start + free_from, i - free_from);
            live += block_words(header);
            free_from = i + block_words(header);
        }
    }
    heap_end = heap_start + free_from;
    return live;
}
"""

# %% [markdown]
# `major_collection` marks and sweeps, then sets the size the old
# generation may reach before the next one; `collect` runs a minor
# collection, then a major one when it is due.
#
# <div class="admonition note">
#
# <p class="admonition-title">Design note: a threshold that grows with the live data</p>
#
# The simplest policy would run a major collection each time the old
# generation grows by a fixed amount. But a major collection costs the live
# data it marks, and frees at most that fixed amount: a program with a
# large live heap would mark it again and again for little gain. Letting
# the old generation reach twice the live data (plus the stack) before the
# next collection makes each collection free at least as much as it had to
# mark, so the collector's time stays in proportion to the allocation. Near
# the limit, this promise can no longer be kept, and the runtime reports
# that it is out of memory rather than collect ever more often.
#
# </div>

# %%
#| export
RUNTIME_C += r"""
static __attribute__((noinline)) void major_collection(void)
{
    double t0 = now_seconds();
    __builtin_unwind_init();               /* as in minor_collection */
    close_region();                        /* now the whole heap is parseable */
    memset(mark_bits, 0, (size_t)(heap_end - heap_start + 63) / 64 * 8);
    note_block_start(heap_start);          /* a start below every address */
    for (int64_t i = 0; i < n_global_roots; i++) mark_value((uint64_t)global_roots[i]);
    uint64_t stack_words = scan_thread_stack(false);
    drain_mark_stack();
    /* A collection takes time in proportion to the live data and stack it
     * traces.  Letting the old generation grow to 2 * live + stack words
     * before the next one leaves live + stack words to promote meanwhile,
     * so each collection is paid for by at least that much. */
    uint64_t live = sweep(), limit = (uint64_t)(heap_limit_end - heap_start);
    /* Near the limit, each collection would free less than the one before:
     * rather than thrash, give up once live data fill 15/16 of the limit. */
    if (live > limit - limit / 16) out_of_memory();
    old_bytes = live * 8;
    old_threshold = (2 * live + stack_words) * 8;
    if (old_threshold < MIN_OLD_BYTES) old_threshold = MIN_OLD_BYTES;
    rent = 0, major_cost = live + (uint64_t)(heap_end - heap_start) / 8;
    if (major_cost < MIN_MAJOR_COST) major_cost = MIN_MAJOR_COST;
    major_count++;
    major_seconds += now_seconds() - t0;
}

/* A minor collection, then a major one if it is due (or full). */
static void collect(bool full)
{
    close_run();                           /* now the nursery is parseable */
    minor_collection();
    rent += kept_blocks;
    if (full || old_bytes > old_threshold || rent > major_cost || (gc_stress && minor_count % gc_stress == 0))
        major_collection();
}
"""

# %% [markdown]
# ### Stack overflow
#
# A deep non-tail recursion must end in a runtime error, not a segmentation
# fault. The program runs on a thread of its own whose stack is large
# (256 MiB by default, `LC_STACK_SIZE`) and ends in a guard zone of 1 MB;
# touching the guard zone raises `SIGSEGV`, which a handler running on an
# *alternative* signal stack (the normal one is full) recognises by the
# faulting address, and turns into the runtime error. No check is compiled
# into the functions: the overflow costs nothing until it happens. Then the
# handler finds the call under way in the tables of call sites, as the
# section on call sites above explains: `lc_run` sorts each part's entries
# by address once (they come sorted, in the order of the code, unless LLVM
# moved a function), and the handler searches them by halves for the
# faulting instruction and for each word up the stack.
#
# Why a signal at all: on Linux, touching memory that is mapped without
# access stops the thread with `SIGSEGV`, and a program may install a
# *handler*, a C function that the kernel runs instead of killing the
# process. The handler cannot run on the stack that just overflowed, so it
# gets a small stack of its own (`alt_stack`, 64 KB); it must also be
# careful, since the program was stopped at an arbitrary instruction: it
# only flushes the output, writes one message and exits.
#
# <div class="admonition note">
#
# <p class="admonition-title">Design note: a guard zone, not a check at every call</p>
#
# The alternative is a test in the prologue of every function: compare the
# stack pointer with a limit, and report the overflow if it is below. It
# is simple and portable, but it costs
# a load, a comparison and a branch at every call, in every program, to
# catch an error that almost no run meets. The guard zone costs nothing
# until the overflow happens; its price is paid in this section's
# complexity: a signal handler, and the tables of call sites to find out
# where the program was.
#
# </div>

# %%
#| export
RUNTIME_C += r"""
/* ==== 6. Stack overflow detection ====================================
 *
 * L code runs on a thread whose stack we map ourselves, with a 1 MB
 * guard zone without access below it.  Too deep a recursion runs into the
 * guard zone and gets a SIGSEGV there.  The handler runs on an alternate
 * signal stack (the normal one is exhausted), sees that the faulting
 * address is in the guard zone, and reports a stack overflow like any
 * runtime error.  Any other fault is a bug in the compiler or here.
 */
#define GUARD_BYTES (1ul << 20)

static char *stack_map;                    /* the guard zone, then the stack */
static _Alignas(16) char alt_stack[64 * 1024];
static int64_t (*l_program)(void);

/* Where: the compiler put a label on each side of every call that is not
 * a tail call, and the labels in a table, one per part of the program:
 *     word 0: the end of the entries, word 1: the next part's table or 0,
 *     then one entry of three words per call: before, after, call site.
 * Between the two labels lies one call instruction and nothing else that
 * calls, so a return address in (before, after] is that call's, and a
 * fault at an address in [before, after) happened while making it.  The
 * handler looks at the faulting instruction, then up the stack from the
 * faulting stack pointer, for the innermost call that is under way: the
 * last call made, where the reference interpreter reports the overflow.
 * lc_run receives the first part's table and one rendered message per
 * call site; it sorts each part's entries, so that the handler can
 * search them by halves. */
static const char *const *call_site_texts;
static int64_t n_call_sites;
static uint64_t *site_tables;

struct site { uint64_t before, after, number; };

static int by_address(const void *a, const void *b)
{
    const struct site *x = a, *y = b;
    return x->before < y->before ? -1 : x->before > y->before;
}
"""

# %% [markdown]
# The tables of call sites: a part's entries, sorted once by address by
# `lc_run`.
#
# A table is three words per call (before, after, call site), after a
# header of two words, so the entries of a part are an array of `struct
# site` starting at word 2. `sort_site_tables` checks first whether a
# part's entries are already in order, and sorts them only if they are not:
# they are emitted in the order of the code, so the usual cost is one pass
# over the table.

# %%
#| export
RUNTIME_C += r"""
/* The entries of a part's table: none in the empty table that a module
 * has until call_site_table gives it its own. */
static size_t site_entries(uint64_t *table, struct site **first)
{
    *first = (struct site *)(table + 2);
    uint64_t end = table[0], start = (uint64_t)as_int(table + 2);
    return end > start ? (size_t)(end - start) / sizeof **first : 0;
}

static void sort_site_tables(void)
{
    for (uint64_t *t = site_tables; t != NULL; t = as_ptr((int64_t)t[1])) {
        struct site *first;
        size_t n = site_entries(t, &first);
        for (size_t i = 1; i < n; i++)
            if (first[i].before < first[i - 1].before) { qsort(first, n, sizeof *first, by_address); break; }
    }
}
"""

# %% [markdown]
# `site_at` searches the tables by halves for the call whose interval holds
# an address; `faulting_call_site` looks at the faulting instruction first,
# then up the stack from the faulting stack pointer.
#
# The search by halves finds the first entry whose `before` label lies
# after the address; the call, if any, is among the entries just below it.
# It looks up to eight of them back, because LLVM may copy one call
# site, and the copies may share a label.
# The two intervals differ by one end: a return address is the `after`
# label itself, so it lies in (before, after]; a fault while the call is
# being made is at an instruction from `before` up to, not including,
# `after`. The scan of the stack starts at the faulting stack pointer, or
# at the top of the guard zone if the stack pointer is inside it: that is
# the case of a function that has just made its frame and faults on its
# first store into it.

# %%
#| export
RUNTIME_C += r"""
/* The call site whose call returns to address a (returning: a in
 * (before, after]) or is being made at address a (a in [before, after)). */
static int64_t site_at(uint64_t a, bool returning)
{
    for (uint64_t *t = site_tables; t != NULL; t = as_ptr((int64_t)t[1])) {
        struct site *first;
        size_t lo = 0, hi = site_entries(t, &first);  /* the first entry that starts after a */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (first[mid].before < a || (!returning && first[mid].before == a)) lo = mid + 1; else hi = mid;
        }
        /* Copies of one call site made by LLVM may share a label: look a few back. */
        for (size_t i = lo; i > 0 && lo - i < 8; i--) {
            struct site *s = &first[i - 1];
            if (returning ? a <= s->after : a < s->after) return (int64_t)s->number;
        }
    }
    return -1;
}

/* The call site under way at a fault: the faulting instruction's, else
 * that of the innermost return address on the stack that has one. */
static int64_t faulting_call_site(void *context)
{
    uint64_t pc, sp;
#if defined(__x86_64__)
    pc = (uint64_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
    sp = (uint64_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    pc = ((ucontext_t *)context)->uc_mcontext.pc;
    sp = ((ucontext_t *)context)->uc_mcontext.sp;
#else
    return -1;
#endif
    int64_t site = site_at(pc, false);
    /* A function that made its frame (sp moved down) and then faulted at its
     * first store has sp inside the guard zone: the scan starts above it. */
    uint64_t start = sp & ~7ull, usable = (uint64_t)(uintptr_t)(stack_map + GUARD_BYTES);
    for (uint64_t *p = as_ptr((int64_t)(start > usable ? start : usable)); site < 0 && (uintptr_t)p < stack_top; p++)
        site = site_at(*p, true);
    return site;
}
"""

# %% [markdown]
# The handler: a fault in the guard zone is a stack overflow, reported at
# its call site, with exit status 2; any other fault is a bug of the
# compiler or of this runtime, with exit status 3. The L thread sets up the
# alternate stack the handler runs on.
#
# The exit statuses are those of the contract for `lc`: 2 for a runtime
# error in the L program, 3 for a bug of the compiler. `_exit`, not `exit`,
# because `exit` would run the C library's clean-up functions, which are
# not safe to call from a signal handler; `flush_output` writes out first
# what the program printed before the overflow, so that the output stops
# where the program stopped.

# %%
#| export
RUNTIME_C += r"""
static void on_fault(int sig, siginfo_t *info, void *context)
{
    char *addr = info->si_addr;
    flush_output();
    if (addr >= stack_map && addr < stack_map + GUARD_BYTES) {
        int64_t site = faulting_call_site(context);
        write_str(2, site >= 0 && site < n_call_sites ? call_site_texts[site] : stack_overflow_text);
        _exit(2);
    }
    write_str(2, sig == SIGBUS ? "internal error: bus error\n" : "internal error: segmentation fault\n");
    _exit(3);
}

/* The L thread.  An alternate signal stack belongs to one thread, so it
 * is set up here. */
static void *l_thread(void *unused)
{
    (void)unused;
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    l_program();
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    return NULL;
}

static _Noreturn void internal_error(const char *what)
{
    write_str(2, what);
    _exit(3);
}
"""

# %% [markdown]
# `run_on_big_stack` maps the stack with its guard zone, installs the
# handler, and runs the program on a thread of its own.
#
# One `mmap` reserves the guard zone and the stack together, and `mprotect`
# takes all access away from the guard zone, its lowest megabyte: stacks
# grow downwards, so an overflow runs into it. `MAP_NORESERVE` means that
# the 256 MiB cost memory only as the recursion touches them. The handlers
# are installed for `SIGSEGV` and `SIGBUS`, and the previous ones put back
# after the thread ends: the process may be a Python kernel that runs more
# than one program, and may have handlers of its own.

# %%
#| export
RUNTIME_C += r"""
/* Run l_program on a fresh thread with a stack of stack_bytes. */
static void run_on_big_stack(size_t stack_bytes)
{
    stack_map = mmap(NULL, GUARD_BYTES + stack_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (stack_map == MAP_FAILED || mprotect(stack_map, GUARD_BYTES, PROT_NONE) != 0)
        internal_error("internal error: cannot allocate the stack\n");
    stack_top = (uintptr_t)(stack_map + GUARD_BYTES + stack_bytes);

    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);

    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack_map + GUARD_BYTES, stack_bytes);
    if (pthread_create(&thread, &attr, l_thread, NULL) != 0)
        internal_error("internal error: cannot start the program thread\n");
    pthread_join(thread, NULL);
    pthread_attr_destroy(&attr);

    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    munmap(stack_map, GUARD_BYTES + stack_bytes);
}
"""

# %% [markdown]
# ### Starting the program
#
# `lc_run` is what the generated `main` calls: it sets up the heap and the
# handler, runs the program on its big-stack thread, and cleans up, so that
# it can be called again in the same process — as the notebooks and the
# tests do.
#
# `env_size` reads the sizes that a user may set in the environment
# (`LC_STACK_SIZE`, `LC_NURSERY`, `LC_HEAP_LIMIT`), with an optional suffix
# `K`, `M` or `G`; anything it cannot read leaves the default.
# `map_noreserve` is the one way this runtime takes memory for its heap and
# tables: a reservation of address space that costs nothing until it is
# touched.

# %%
#| export
RUNTIME_C += r"""
/* ==== 7. The entry point =============================================
 *
 * lc_run may be called several times in one process (the JIT does so,
 * one call at a time), so it sets up all the state afresh each time and
 * releases the memory at the end.
 */

/* A size from the environment: bytes, with an optional K, M or G. */
static uint64_t env_size(const char *name, uint64_t fallback)
{
    const char *s = getenv(name);
    char *end;
    if (s == NULL || *s < '0' || *s > '9') return fallback;
    uint64_t v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    }
    return *end == '\0' ? v : fallback;
}

static void *map_noreserve(uint64_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The default heap limit: 1 GB, or a quarter of the machine's memory if
 * that is less (but not under 64 MB).  A program that allocates without
 * end reaches it in seconds, in memory that any machine can spare. */
static uint64_t default_heap_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    uint64_t quarter = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 4 : 1ull << 30;
    return quarter > (1ull << 30) ? 1ull << 30 : quarter < (64ull << 20) ? 64ull << 20 : quarter;
}
"""

# %% [markdown]
# `heap_init` reserves the heap and its side tables, and resets every
# counter, so that `lc_run` can run again in the same process;
# `heap_free` gives it all back.
#
# It also clamps the sizes to what the representation allows: the heap at
# most 32 GB (the comment says why), and the nursery rounded up to whole 64
# KB chunks. When the system refuses to reserve the whole limit, the limit
# is halved until it accepts, down to 64 MB.

# %%
#| export
RUNTIME_C += r"""
/* The limit is at most 32 GB: a filler's size must fit in its header,
 * the nursery map is two bytes per 64 KB.  It is at least the nursery and
 * as much again. */
static void heap_init(void)
{
    uint64_t nursery_bytes = (env_size("LC_NURSERY", NURSERY_BYTES) + (CHUNK_WORDS * 8 - 1)) & ~(CHUNK_WORDS * 8 - 1);
    if (nursery_bytes == 0) nursery_bytes = CHUNK_WORDS * 8;
    if (nursery_bytes > (256ull << 20)) nursery_bytes = 256ull << 20;
    uint64_t limit = env_size("LC_HEAP_LIMIT", default_heap_limit());
    if (limit > (32ull << 30)) limit = 32ull << 30;
    if (limit < 2 * nursery_bytes + (1u << 20)) limit = 2 * nursery_bytes + (1u << 20);
    limit &= ~(CHUNK_WORDS * 8 - 1);
    /* Where the system will not reserve that much (strict overcommit),
     * settle for less rather than fail at once. */
    while ((heap_start = map_noreserve(limit)) == NULL)
        if ((limit /= 2) < (64u << 20)) out_of_memory();
    start_bits = map_noreserve(limit / 64 + 8);
    mark_bits = map_noreserve(limit / 64 + 8);
    nursery_map = map_noreserve(limit / (CHUNK_WORDS * 8) * 2 + 2);
    nursery_chunks = room_chunks = base_chunks = nursery_bytes / (CHUNK_WORDS * 8);
    nursery = malloc(nursery_chunks * sizeof *nursery);
    old_bits = malloc(nursery_chunks * sizeof *old_bits);
    if (start_bits == NULL || mark_bits == NULL || nursery_map == NULL || nursery == NULL || old_bits == NULL)
        out_of_memory();
    heap_end = heap_start;
    heap_limit_end = heap_start + limit / 8;
    small_gaps = big_gaps = NULL;
    promo.hp = promo.hl = NULL;
    lc_hp = lc_hl = run_start = 0;         /* no run: the first allocation is slow */
    minor_count = major_count = max_heap_bytes = allocated_bytes = promoted_bytes = 0;
    pinned_count = stack_scanned = 0;
    minor_seconds = major_seconds = 0;
    old_bytes = 0, old_threshold = MIN_OLD_BYTES;
    kept_blocks = rent = 0, major_cost = MIN_MAJOR_COST;
    gc_stress = env_size("LC_GC_STRESS", 0);
    dump_at = env_size("LC_GC_DUMP", 0);
    to_scan.len = remembered.len = pinned.len = 0;
    for (size_t c = 0; c < nursery_chunks; c++) nursery[c] = fresh_chunk(c);
    next_chunk = 0, cursor = chunk_end = NULL;
}
"""

# %% [markdown]
# `heap_free` gives back everything `heap_init` took.
#
# Every table is unmapped and every work list freed, and the allocation
# pointers set back to zero, so that a second `lc_run` in the same process
# starts from a clean state, and a program that ended cannot leave memory
# behind in the Jupyter kernel that ran it.

# %%
#| export
RUNTIME_C += r"""
static void heap_free(void)
{
    uint64_t limit = (uint64_t)(heap_limit_end - heap_start) * 8;
    munmap(heap_start, limit);
    munmap(start_bits, limit / 64 + 8);
    munmap(mark_bits, limit / 64 + 8);
    munmap(nursery_map, limit / (CHUNK_WORDS * 8) * 2 + 2);
    free(nursery), free(old_bits);
    free(to_scan.items), free(remembered.items), free(pinned.items);
    to_scan = remembered = pinned = (struct stack){NULL, 0, 0};
    lc_hp = lc_hl = run_start = 0;
}
"""

# %% [markdown]
# `LC_GC_STATS=1` prints what the collector did, and the peak resident
# memory of the process, at the end of the run (and at an out-of-memory
# error).
#
# These are the counters kept by the cells above: collections of each kind,
# the largest the heap grew, the bytes allocated and promoted, the time
# spent collecting, the blocks pinned and the stack words scanned. The
# bytes allocated are also printed exactly, in bytes: they depend only on
# the program and the compiler, not on the machine or the moment, so a
# test can compare two builds of a program by them (chapter 9 does). The
# section on the collector at work, below, runs a program with
# `LC_GC_STATS=1`: the lines that start with `gc:` in its output are
# printed here.

# %%
#| export
RUNTIME_C += r"""
/* With LC_GC_STATS=1: what the collector did, on stderr. */
static void statistics(void)
{
    const char *wanted = getenv("LC_GC_STATS");
    if (wanted != NULL && strcmp(wanted, "1") == 0) {
        char line[320];
        uint64_t allocated = allocated_bytes + (uint64_t)(lc_hp - run_start);
        int n = snprintf(line, sizeof line,
                         "gc: %llu minor and %llu major collections, max heap %.1f MB, allocated %.1f MB "
                         "(%llu bytes), promoted %.1f MB, gc time %.3f s (minor %.3f s, major %.3f s)\n",
                         (unsigned long long)minor_count, (unsigned long long)major_count,
                         (double)max_heap_bytes / (1 << 20), (double)allocated / (1 << 20),
                         (unsigned long long)allocated,
                         (double)promoted_bytes / (1 << 20), minor_seconds + major_seconds, minor_seconds,
                         major_seconds);
        write_all(2, line, (size_t)n);
        n = snprintf(line, sizeof line, "gc: %llu blocks pinned, %.1f MB of stack scanned by minor collections\n",
                     (unsigned long long)pinned_count, (double)stack_scanned * 8 / (1 << 20));
        write_all(2, line, (size_t)n);
        /* The peak resident memory of this process since it started (Linux):
         * VmHWM counts this program's own memory, not the parent it was
         * forked from, as getrusage's ru_maxrss would. */
        FILE *status = fopen("/proc/self/status", "r");
        if (status != NULL) {
            while (fgets(line, sizeof line, status) != NULL)
                if (strncmp(line, "VmHWM:", 6) == 0)
                    write_str(2, "gc: peak resident memory"), write_str(2, line + 6);
            fclose(status);
        }
    }
}
"""

# %% [markdown]
# `lc_run`, called by `main`, puts it all together.
#
# In order: it resets the output buffer, keeps the messages that the
# compiler rendered for it (the stack overflow, the out-of-memory error,
# one message per call site), sorts the tables of call sites, registers the
# globals as roots, sets up the heap, runs the program on its big stack
# (256 MiB unless `LC_STACK_SIZE` says otherwise, and never less than 256
# KiB), flushes the output, prints the statistics if asked, and gives the
# heap back. The messages come from the compiler, not from the runtime, so
# that they carry the file, line and column of the L program, in the words
# of the reference interpreter.

# %%
#| export
RUNTIME_C += r"""
int lc_run(int64_t (*program)(void), int64_t *globals, int64_t nglobals,
           const char *stack_overflow_message, const char *out_of_memory_message,
           const char *const *call_site_messages, int64_t ncall_sites, uint64_t *call_site_tables)
{
    out_len = 0, out_fd = 1;
    stack_overflow_text = stack_overflow_message, out_of_memory_text = out_of_memory_message;
    call_site_texts = call_site_messages, n_call_sites = ncall_sites, site_tables = call_site_tables;
    sort_site_tables();
    global_roots = globals, n_global_roots = nglobals;
    l_program = program;
    heap_init();
    uint64_t stack_bytes = (env_size("LC_STACK_SIZE", 256u << 20) + 4095) & ~4095ull;
    run_on_big_stack(stack_bytes < (256u << 10) ? 256u << 10 : stack_bytes);
    flush_output();

    statistics();
    heap_free();
    return 0;
}
"""

# %% [markdown]
# ## Compiling the runtime
#
# The runtime is C, compiled by the system's C compiler (`cc`, or `$CC`) in
# two forms: a shared library for the JIT of chapter 11, which loads it into
# the Python process, and an object file that `lc build` links into
# executables. Both are cached in a directory named after a hash of the C
# text (under `$LC_CACHE`, by default `~/.cache/lcompiler`), so they are
# compiled once per version of this chapter, and a change to the C above is
# picked up the next time.

# %%
#| export
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def c_compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler found: the runtime of L needs one (set CC, or install gcc)")
    return cc


def cache_directory() -> Path:
    base = os.environ.get("LC_CACHE") or Path.home() / ".cache" / "lcompiler"
    try:
        Path(base).mkdir(parents=True, exist_ok=True)
        return Path(base)
    except OSError:                      # a read-only home: a private directory in /tmp
        fallback = Path(tempfile.gettempdir()) / f"lcompiler-{os.getuid()}"
        fallback.mkdir(exist_ok=True)
        return fallback


def runtime_library(kind: str = "shared") -> Path:
    """The runtime compiled as a shared library ("shared") or an object file ("object")."""
    digest = hashlib.sha256(RUNTIME_C.encode()).hexdigest()[:16]
    folder = cache_directory() / digest
    target = folder / ("lcrt.so" if kind == "shared" else "lcrt.o")
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "runtime.c"
    source.write_text(RUNTIME_C)
    flags = ["-shared", "-fPIC"] if kind == "shared" else ["-c", "-fPIC"]
    partial = folder / f"{target.name}.{os.getpid()}"
    done = subprocess.run([c_compiler(), "-O2", "-pthread", *flags, str(source), "-o", str(partial)],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the C compiler failed on the runtime:\n{done.stderr}")
    partial.replace(target)              # atomic: a concurrent build never sees half a file
    return target

# %% [markdown]
# ## Showing LLVM from the command line
#
# The back end is the pipeline's stage `llvm`; two more stages follow it,
# both LLVM's work: `llvm-opt`, the module after the verifier and the O2
# pipeline, and `asm`, the machine code it becomes, as assembly text. So
# `lc show llvm FILE.l` prints the module as the back end makes it, `lc
# show llvm-opt FILE.l` as LLVM's O2 pipeline leaves it, and `lc show asm
# FILE.l` the instructions of the executable that `lc build` writes. (To
# run a program, chapter 11 does the last two stages part by part, in
# parallel.)
#
# The JIT of chapter 1 and an executable want different machine code.
# MCJIT may load the code anywhere in the 64-bit address space, so its
# target machine uses the *large* code model: a direct call is a `movabs`
# of the callee's address into a register, then a `call` through it. An
# executable is linked at one place, so `lc build` asks for the *small*
# code model and position-independent code: a direct call is one `call`
# instruction. `target_machine(executable)` makes either; `asm` shows the
# executable's, labels of the call-site table included, which is what
# a reader comparing L's machine code with gcc's wants to see.

# %%
#| export
def target_machine(executable: bool) -> llvm.TargetMachine:
    """LLVM's target machine for this host: the JIT's (large code model), or an executable's
    (position independent, small code model)."""
    machine = addlang.target_machine()            # chapter 1's: MCJIT's defaults (and LLVM initialised)
    if not executable:
        return machine
    return llvm.Target.from_default_triple().create_target_machine(reloc="pic", codemodel="small", opt=2)


# %%
from lcompiler.cli import lc

# %% [markdown]
# The next cell registers the three stages with [chapter
# 4](04_pipeline.ipynb)'s pipeline. `@pipeline.stage(name, show=…)` names a
# stage and says how `lc show` prints its result: the module as LLVM text
# for `llvm` and `llvm-opt`, the assembly as it is for `asm`. Each stage
# receives the result of the stage before it, and the `unit` that carries
# the source and what earlier stages left for it (here the `data`
# declarations, which the printers need). The checker of the two LLVM
# stages is LLVM's verifier. The back end runs with Python's cyclic
# garbage collector paused (`collector_paused`, from the syntax module),
# as the lexer and the parser do: a pass that makes many small Python
# objects and frees none until it ends would only make that collector walk
# them again and again.

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
# would have moved `sum_to` and `count`, each called once, into their
# caller: here we want to see each function as the back end translates it.

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
# cycles: `sum_to`'s `while` loop is the cycle between `loop_6` and
# `body_12`, and `count`'s tail call to itself the cycle between `recur`
# and `else_38`. `length` has none: its recursion is a `call` instruction
# inside `next_21`, which returns to the next instruction, so it is no
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
# above), allocates its `Cons` with a call of `lc_alloc`, and its tail call
# to itself is a jump back to `recur`, where two φ-nodes receive the new
# arguments. None of the three makes a tail call to another function, so
# all three are `fastcc`.
#
# That is naive code, and LLVM's O2 pipeline makes short work of it. After
# optimisation, the module has four functions left: `lc_program`, the
# initialiser of the `print` statement, the printer of `List<Int>` and
# `main`. Here are the first three:

# %%
optimised = optimise(module)
text = str(optimised)
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
# operation and introduced an accumulator (`%accumulator.tr`). The program
# runs in chapter 11; here, chapter 1's `run_in_child`, the runtime and the
# table of call sites suffice to check its output:
#
# Two more things to read in the listing. Each of the five `Cons` is the
# allocator `lc_alloc` of the section on allocation, inlined: load `lc_hp`,
# add 24 (three words of 8 bytes: the header and two fields), load `lc_hl`,
# and, only if the block would pass the end of the run, call
# `lc_alloc_slow(3)`. The `!prof` on that branch is what `likely=False`
# left: it tells LLVM to make the fast path the straight line. The suffixes
# `.i` on the names are LLVM's, one for each level of inlining that a value
# went through. And the printer of `List<Int>` finds a value's constructor
# as `tag` does: it shifts the header right by 24, keeps 16 bits (`trunc …
# to i16`), and switches on the result, 0 for `Cons` and 1 for `Nil`.

# %%
import ctypes

llvm.load_library_permanently(str(runtime_library("shared")))
engine = llvm.create_mcjit_compiler(call_site_table(optimised), addlang.target_machine())
engine.finalize_object()
main = ctypes.CFUNCTYPE(ctypes.c_int)(engine.get_function_address("main"))
print(addlang.run_in_child(main))

# %% [markdown]
# ## The seeds' program
#
# The program of seed 000, which builds a pair out of functions alone, and
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
# ## The collector at work
#
# ### A minor collection, seen from the nursery
#
# The runtime describes its nursery, block by block, when asked
# (`LC_GC_DUMP=n`: at the n-th minor collection, before it, after its
# tracing, and after its sweep). Here is a program that inserts 3,000 keys
# into a persistent search tree — each insertion copies the path from the
# root to the new leaf, so the old path dies, the new one lives — run with a
# nursery of one chunk (`LC_NURSERY=64K`), and its third minor collection.

# %%
import subprocess

from lcompiler import driver

TREE = """data Tree { Leaf; Node(Tree, Int, Tree) }
def insert(t, k) = match (t) {
  Leaf -> Node(Leaf, k, Leaf)
  Node(l, x, r) -> if (k < x) Node(insert(l, k), x, r) else if (k > x) Node(l, x, insert(r, k)) else t
}
def size(t) = match (t) { Leaf -> 0; Node(l, _, r) -> size(l) + 1 + size(r) }
def build(i, t) = if (i == 0) t else build(i - 1, insert(t, i * 7919 % 1000))
print(size(build(3000, Leaf)))
"""
with tempfile.TemporaryDirectory() as tmp:
    exe = driver.build(Source("tree.l", TREE), Path(tmp) / "tree")
    done = subprocess.run([str(exe)], capture_output=True, text=True,
                          env={**os.environ, "LC_NURSERY": "64K", "LC_GC_DUMP": "3"})
dump = {}                          # stage -> [(offset, words, kind, offset of the copy)], in words
for line in done.stderr.splitlines():
    stage, chunk, offset, words, kind, copy = line.split()
    dump.setdefault(stage, []).append((int(offset), int(words), kind, int(copy)))
traced = {offset: kind for offset, _, kind, _ in dump["traced"]}
fates = [(offset, words, kind if kind != "young" else {"copied": "copied", "old": "pinned"}.get(traced[offset], "dead"))
         for offset, words, kind, _ in dump["start"]]
count = lambda what: sum(1 for *_, fate in fates if fate == what)
words = lambda what: sum(n for _, n, fate in fates if fate == what)
print(f"before: {len(fates)} blocks and fillers, {sum(1 for *_, k, _ in dump['start'] if k == 'young')} young;"
      f" {count('old')} old, pinned by earlier collections")
for what in ("dead", "copied", "pinned"):
    print(f"  {what:7}{count(what):5} young blocks, {words(what):5} words")
runs = [n for _, n, kind, _ in dump["swept"] if kind == "free"]
print(f"after: {sum(1 for *_, k, _ in dump['swept'] if k == 'old')} old blocks, {len(runs)} free runs,"
      f" {sum(runs)} of {64 * 1024 // 8} words free, the longest {max(runs)} words")

# %% [markdown]
# Three quarters of the young blocks are dead, and cost the collection
# nothing; about a quarter are copied; a handful (seven here) are pinned by
# the stack — nodes that the running `insert` holds, or that a register
# saved on the stack still points to — and stay, next to the few pinned by
# the collections before. Drawn to scale, the 64 KB of the chunk before
# and after the collection, and where the copies went in the old
# generation (on the right, the end of the chunk, where the blocks the
# stack held were allocated last):

# %%
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

COLOURS = {"dead": "#d9d9d9", "copied": "#4c78a8", "pinned": "#f58518", "old": "#9d2b2b", "free": "white"}
fate = {offset: what for offset, _, what in fates}
after = [(o, n, "free" if k == "free" else "pinned" if fate.get(o) == "pinned" else "old") for o, n, k, _ in dump["swept"]]
copies = sorted(c for _, _, k, c in dump["traced"] if k == "copied")
rows = {2: fates, 1: after, 0: [(c - copies[0], 4, "copied") for c in copies]}
fig, axes = plt.subplots(1, 2, figsize=(10, 2.8), gridspec_kw={"width_ratios": [3, 1]}, sharey=True)
for ax, (left, right) in zip(axes, ((0, 64), (56, 64))):
    for row, blocks in rows.items():
        for what, colour in COLOURS.items():
            bars = [(o * 8 / 1024, n * 8 / 1024) for o, n, k in blocks if k == what]
            ax.broken_barh(bars, (row - 0.35, 0.7), facecolors=colour, edgecolor="black" if what == "free" else "none",
                           linewidth=0.4)
    ax.set_xlim(left, right)
    ax.set_xlabel("KB" if left else "KB from the start of the chunk (of the first copy, below)")
axes[0].set_yticks([2, 1, 0], ["nursery before", "nursery after", "old generation"])
axes[1].set_title("the last 8 KB", fontsize=9)
fig.legend(handles=[Patch(facecolor=c, edgecolor="black", linewidth=0.4, label=k) for k, c in COLOURS.items()],
           ncol=5, loc="upper center", frameon=False)
plt.tight_layout(rect=(0, 0, 1, 0.9))
display(fig, metadata={"alt": f"The 64 KB nursery chunk drawn to scale before its minor collection, with "
                              f"{count('dead')} dead, {count('copied')} copied and {count('pinned')} pinned young "
                              f"blocks among {count('old')} old ones; after it, free runs around the old and pinned "
                              f"blocks; and the copies side by side in the old generation. A second panel enlarges "
                              f"the last 8 KB of the chunk, where the pinned blocks are."})
plt.close(fig)

# %% [markdown]
# After the collection the nursery is free again but for its old blocks,
# and the program allocates in the runs between them; the survivors sit
# side by side in the old generation, in the order the copying reached
# them.
#
# ### A hundred million cells in two megabytes
#
# The contract's test of the collector: a loop that allocates 10^8
# short-lived cells. This one makes a two-field `Cons` per iteration, a
# hundred million times, and keeps only a running sum. It is compiled to an
# executable (chapter 11) without chapter 9's optimiser, which would see
# that the `match` takes apart the `Cons` just built, and would build
# none. It is run with `LC_GC_STATS=1`, which makes the
# runtime report its collections and the peak resident memory of the
# process. (The output of this cell is not compared by the tests: times and
# memory sizes vary a little from run to run.)

# %% tags=["nbval-ignore-output"]
CELLS = """data List<a> { Cons(a, List<a>)
  Nil }
def loop(i, total) = if (i == 0) total else match (Cons(i, Nil)) {
  Cons(x, _) -> loop(i - 1, total + x)
  Nil -> 0 }
print(loop(100000000, 0))
"""
with tempfile.TemporaryDirectory() as tmp:
    exe = driver.build(Source("cells.l", CELLS), Path(tmp) / "cells", optimiser=False)
    done = subprocess.run([str(exe)], capture_output=True, text=True, env={**os.environ, "LC_GC_STATS": "1"})
print(done.stdout, done.stderr, f"exit status {done.returncode}", sep="")

# %% [markdown]
# Every cell dies before the next minor collection: nothing is promoted,
# nothing is pinned, and the heap is the nursery.
#
# ### Sizes and limits
#
# The script `bench/gc_speed.py` measures the collector on five questions
# (`python bench/gc_speed.py --repeat 5 --json bench/gc_speed.json`; user
# and system CPU time of executables). First, the size of the nursery,
# every size in alternation with the others, on the four allocation-heavy
# benchmarks of chapter 12:

# %%
speed = json.loads(Path("../bench/gc_speed.json").read_text())
sizes = list(next(iter(speed["nursery"].values())))
print(f"{'benchmark':10}" + "".join(f"{n:>14}" for n in sizes) + "   (CPU seconds, and relative to 2M)")
for name, r in speed["nursery"].items():
    print(f"{name:10}" + "".join(f"{r[n]['median']:7.3f} ({r[n]['ratio']:.2f})" for n in sizes))

# %% [markdown]
# Below 1 MB the minor collections come too often, and each one promotes
# blocks that would have died with a little more time; from 2 MB on, the
# gains are within a few percent, and a bigger nursery leaves the cache (2
# MB is the second-level cache of one core of the machine this book was
# built on, and OCaml's default minor heap). `nqueens` allocates little
# that lives, and does not care. The default is 2 MB.
#
# Second, the promise of the issue that asked for this collector: a large
# structure that stays live while the program allocates must not make each
# allocation dearer. A list of S cells is built, then 3 × 10^7 short-lived
# cells are allocated; the time per short-lived cell is the difference
# between that program and the one that only builds the list:

# %%
print(f"{'S':>10} {'ns per cell':>12} {'minor':>6} {'major':>6} {'heap MB':>8}")
for r in speed["live"]:
    print(f"{r['size']:>10,} {r['ns_per_cell']:12.2f} {r['minor']:6} {r['major']:6} {r['max_heap_mb']:8.1f}")

# %% [markdown]
# Flat: the minor collections never look at the live list, and the major
# ones, a few, are paid for by the growth of the list itself. (The first
# collector traced the whole live list at every collection, so that every
# short-lived cell cost more, the more cells were live.)
#
# Third, the other promises of the contract — ten million cells in one
# list, and a clean runtime error at the heap limit — and the default of
# that limit. A program that allocates without end stops when the heap
# reaches its limit, with "out of memory", status 2; the question is how
# long it takes to get there, and how much memory the machine gives up
# meanwhile:

# %%
for name, title in (("cells", "10^8 short-lived cells"), ("list", "a list of 10^7 cells")):
    r = speed[name]
    print(f"{title}: {r['cpu']:.2f} s, heap {r['max_heap_mb']:.1f} MB, peak resident memory {r['rss_mb']:.1f} MB,"
          f" {r['minor']} minor and {r['major']} major collections")
for r in speed["limit"]:
    print(f"until the limit of {r['limit']}: {r['cpu']:.2f} s, peak resident memory {r['rss_mb']:.0f} MB,"
          f" status {r['status']}")

# %% [markdown]
# The limit was 4 GB: a program that allocates without end took over ten
# seconds to fail, and took 4 GB of memory from the machine while it did — a
# laptop with 8 GB would swap, one with 4 GB would not survive it. The
# default is now **1 GB**, or a quarter of the machine's memory if that is
# less: the list of ten million cells fits in it four times over, and a
# runaway program fails in about two seconds. `LC_HEAP_LIMIT` sets another
# (`LC_HEAP_LIMIT=8G`; at most 32 GB). The stack has its own limit, 256 MB
# by default (`LC_STACK_SIZE`, above).

# %% [markdown]
# ## The promises, tested
#
# `tests/test_native.py` checks this chapter and the next one together:
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
# a flow graph has the blocks and branches of its function.
# `tests/test_primitives.py` checks that `LOWERING` has an entry for every
# row of chapter 4b's table of primitives and for nothing else, and that
# each lowering, compiled and run, computes what its row's `meaning` says
# on random and extreme operands.
# `tests/test_gc.py` checks the collector with programs that would go wrong
# if it lost a block: an old cell written with young lists (the write
# barrier), blocks of more than 19 fields that are the only way to young
# lists (no layout: pinned neighbours), deep recursions that allocate
# (pinning, chunks given to the old generation, major collections), each
# with a small nursery and in the runtime's stress mode, and programs of
# the corpus and the benchmarks under stress. Taking out the barrier, the
# pinning through blocks without a layout, or the forwarding of the fields
# of pinned blocks, makes these tests fail.

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
# - **Stress the collector.** A block that the collector frees while it is
#   still in use shows up much later as a wrong value or a crash. With
#   `LC_GC_STRESS=1` the runtime collects at every allocation (and fully
#   every n-th with `LC_GC_STRESS=n`), so a forgotten pointer shows at
#   once. `LC_NURSERY=64K` makes minor collections frequent,
#   `LC_GC_STATS=1` reports what the collector did, `LC_GC_DUMP=n` lists
#   the nursery at the n-th minor collection, and `LC_HEAP_LIMIT` and
#   `LC_STACK_SIZE` change the two limits.
# - **A crash of the runtime.** The signal handler turns a fault in the
#   stack's guard zone into the runtime error "stack overflow". Any other
#   fault prints `internal error: segmentation fault` and exits with status
#   3, which is always a bug of the compiler or the runtime. `lc build
#   prog.l -o prog` makes an executable to run under `gdb`, whose backtrace
#   names the L functions (`f_12`, as `lc show closure` names them).
# - **llvmlite's own traps**, as the seed found with the OCaml bindings: a
#   call whose arguments do not match the callee's type, and a φ-node
#   without incoming values, make a module that the verifier rejects (this
#   is why a continuation that nothing jumps to gets no block); and LLVM
#   must be initialised (chapter 1's `target_machine`) before anything is
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
#    interpreter report its overflow. Why can no implementation agree with
#    the interpreter on every such program?
# 4. The nursery promotes every block that is alive at a minor collection,
#    even one made just before it, which would have died a moment later.
#    Give the nursery an *age*: copy a survivor of its first collection into
#    the nursery again (to the runs of the other chunks), and promote it at
#    its second. Measure `primes` and `fold` with `bench/gc_speed.py`: does
#    copying twice cost less than promoting too early?
# 5. A minor collection scans the whole stack, though the frames below the
#    deepest point the stack has returned to since the last collection
#    cannot have changed, and point only to old blocks. Find that point
#    without a check in the generated code: replace a return address on the
#    stack, at a collection, by that of a function of the runtime that
#    records the return and jumps to the saved address (a *stack
#    barrier*), and scan only the frames above it.
# 6. LLVM's verifier checks that every use of a value is *dominated* by its
#    definition: every path from the entry to the use passes through it.
#    Compute the dominators of a `FlowGraph`'s blocks (Cooper, Harvey and
#    Kennedy's "A simple, fast dominance algorithm" fits in a page), and
#    check the rule yourself on the functions of the worked example, before
#    and after O2.
