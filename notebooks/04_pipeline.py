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
# # Chapter 4. The compiler on one page
#
# The chapters from here to [chapter 10](10_llvm.ipynb) build the stages
# of a compiler for L, and each stage hands its output to the next:
# characters become tokens, tokens a tree, the tree a smaller core
# language, the core a program in continuation-passing style, and that, in
# the end, machine code. This short chapter writes the whole chain down
# before any of it is built, on one page, in the order it runs — the way
# the `main.ml` of MinCaml (Eijiro Sumii's small compiler of a subset of
# OCaml, written for teaching) shows every pass of its compiler in one
# expression.
# Each chapter that builds a stage fills in its names on that page — one
# or two, three for chapter 10 — and nothing else can: a stage whose name
# is not on the page is an error.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** from [appendix A](A_errors.ipynb), a `Source` (a text with
# its name), `raise_errors` (which raises the mistakes found, one or
# several) and the drawings. The cells that run a program through the
# stages, near the end, use the stages that the later chapters register:
# the whole package.
#
# **Builds:** the module `lcompiler.pipeline`: the list of stages
# `PIPELINE`, the decorator `stage` with which a chapter registers its
# stage, the compilation `Unit`, `compile_to`, `show`, and `stages_of`,
# which runs a program through the stages and yields what each one hands
# on, checked by the stage's checker when asked.
#
# </div>

# %%
#| default_exp pipeline

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.pipeline`:
#
# - `PIPELINE` lists every stage of the compiler, in the order they run,
#   each with the module that registers it and what it hands to the next.
#   It is the only place where the order is written.
# - `stage(NAME, …)` registers the function that runs the stage NAME, and
#   may give it a *checker* (a function that raises if its output breaks
#   the invariants of its language) and an *interpreter* (a function that
#   runs its output, printing what the program prints). A NAME that is not
#   in `PIPELINE` is an error, which names the nearest stage, if one is
#   near, and lists them all.
# - `compile_to(NAME, source)` runs the stages from the source up to NAME
#   and returns NAME's output and the `Unit` of the compilation, whose
#   typed fields carry what a stage leaves for a later one. `show(NAME,
#   source)` is that output as text: `lc show NAME FILE`.
# - `stages_of(source)` runs a program through the pipeline and yields,
#   after each stage, its output — with `checked=True`, first checked by
#   the stage's checker; a test runs every stage's interpreter on it and
#   compares what it prints.
# - The module imports no other stage of the compiler: each stage's module
#   imports this one to register itself, and this one imports the stages'
#   modules by name, when it first runs them. So there is no import cycle.

# %% [markdown]
# ## The page
#
# Here is the compiler. Each line is a stage: its name (the name `lc show`
# takes), the module of the package that registers it, the chapter that
# module comes from, and what it hands to the next stage.

# %%
#| export
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from lcompiler.errors import Source, raise_errors

# name        module           chapter  what it hands to the next stage
PIPELINE = [
    ("tokens",   "syntax",       "4a", "the tokens, each with its separation from its neighbours"),
    ("ast",      "syntax",       "4a", "the syntax tree"),
    ("core",     "interp",       "4b", "the core program: sugar gone, every name resolved"),
    ("types",    "types",        "5",  "the core program with a type on every node"),
    ("mono",     "mono",         "5b", "a monomorphic core program: no type variables left"),
    ("cps",      "cps_convert",  "7",  "a program in continuation-passing style"),
    ("opt",      "shrink",       "9",  "the CPS program, optimised"),
    ("closure",  "closure",      "8",  "closed CPS: every function at the top level"),
    ("shrink",   "shrink",       "9",  "the closed CPS program, shrunk again"),
    ("llvm",     "llvm_backend", "10", "an LLVM module"),
    ("llvm-opt", "llvm_backend", "10", "the LLVM module after LLVM's own optimiser"),
    ("asm",      "llvm_backend", "10", "the machine code of an executable, as assembly"),
]
OPTIMISATIONS = ("opt", "shrink")      # the stages that `-O0` leaves out


def names() -> list[str]:
    return [name for name, *_ in PIPELINE]


# %% [markdown]
# Drawn, with the two optimisations in yellow: `-O0` (the option of `lc
# run`, `lc build` and `lc show` that turns chapter 9's optimiser off)
# leaves them out, and the program goes straight from one side of each to
# the other.

# %%
from lcompiler.drawing import Box, Picture

chain = None
for name, _module, chapter, _ in reversed(PIPELINE):
    chain = Box(f"{name}  (chapter {chapter})", [chain] if chain else [],
                "yellow" if name in OPTIMISATIONS else "blue")
Picture([("the compiler, from source to machine code", [Box("source text", [chain])])],
        alt="A chain of boxes from the source text down through the stages tokens, ast, core, types, "
            "mono, cps, opt, closure, shrink, llvm, llvm-opt and asm, each labelled with its chapter; "
            "opt and shrink, the optimisations, are yellow.")

# %% [markdown]
# (A second picture, in the section "Every stage, checked and run" below,
# adds what passes from each stage to the next, and which stages have a
# checker and an interpreter.)
# Two things in that order are worth a remark. The optimiser of chapter 9
# runs *before* closure conversion (chapter 8) although it is taught after
# it. A *closure* is a function value together with the variables it uses
# from around it, and closure conversion turns each one into a record of
# its code and those values; a call through such a record no longer says
# which function it calls, and the optimiser needs to see that. And the
# types of chapter 5 are checked once more, in stage `mono`, after
# monomorphisation (chapter 5b makes a copy of each polymorphic function
# for each type it is used at): a hole in the inference becomes a
# compile-time error there, not a crash at run time.

# %% [markdown]
# ## A stage, and a compilation
#
# A `Stage` is what a chapter registers: the function that runs it, from
# the previous stage's output and the `Unit` to its own output; how to show
# that output as text; and, when the stage's language has them, its
# checker and its interpreter.

# %%
#| export
@dataclass
class Stage:
    """One stage of PIPELINE, as its chapter registered it."""
    name: str
    run: Callable                       # run(previous output, unit) -> output
    show: Callable                      # show(output, unit) -> text
    check: Callable | None = None       # check(output, unit): raises if output breaks its invariants
    interpret: Callable | None = None   # interpret(output, unit, out): runs it, printing to out


# %% [markdown]
# A `Unit` is one compilation. Besides the source and the options, a stage
# sometimes leaves something for a later one, and each such thing has its
# own field, named and typed, rather than a key in a dictionary that a
# misspelling would silently miss. There are three: the mistakes the lexer
# went on after, which the parser reports with its own (the section
# "Running the stages" says how); the type of each definition that
# chapter 5 infers, its *type scheme* (which `lc show types` prints); and
# the data declarations that chapter
# 5b hands over to the back end, which lays out their values.

# %%
#| export
@dataclass
class Unit:
    """One compilation: its source, its options, and what a stage leaves for a later one."""
    source: Source
    optimise: bool = True
    errors: list = field(default_factory=list)   # mistakes a stage went on after, for a later one to report
    typing: Any = None                           # set by `types`: each definition's type scheme (chapter 5)
    datas: Any = None                            # set by `mono`: the data declarations (chapter 5b)


# %% [markdown]
# ## Registering a stage
#
# `stage` is a decorator: a chapter writes `@stage("types", show=…)` above
# the function that runs its stage. The name must be one of the page's;
# anything else — a new stage nobody added to the page, a misspelling — is
# an error at once, when the module is imported, with a suggestion when a
# name on the page is near. Running
# a chapter's cell again registers its stage again, which replaces it.

# %%
#| export
STAGES: dict[str, Stage] = {}


def stage(name: str, show: Callable = lambda value, unit: str(value), check: Callable | None = None,
          interpret: Callable | None = None):
    """Register the decorated run(previous output, unit) as the stage NAME of PIPELINE."""
    if name not in names():
        from difflib import get_close_matches
        near = get_close_matches(name, names(), n=1)
        raise ValueError(f"{name!r} is not a stage of the pipeline"
                         + (f" (did you mean {near[0]!r}?)" if near else "")
                         + f"; the stages are {', '.join(names())}")

    def register(run: Callable) -> Callable:
        STAGES[name] = Stage(name, run, show, check, interpret)
        return run
    return register


# %%
try:
    @stage("type")
    def misspelt(value, unit):
        return value
except ValueError as error:
    print(error)

# %% [markdown]
# ## Running the stages
#
# The page names each stage's module, and `load` imports those modules, in
# order, the first time the pipeline runs: importing a stage's module is
# what registers its stage. This is also why the module needs no import of
# the stages at its top, and why there is no cycle — `lcompiler.types`
# imports `lcompiler.pipeline` to register itself, never the other way
# round. A stage that no chapter registered is an error too.

# %%
#| export
def load() -> list[Stage]:
    """The registered stages, in the order of PIPELINE (importing the modules that register them)."""
    for _, module, _, _ in PIPELINE:
        importlib.import_module(f"lcompiler.{module}")
    missing = [name for name in names() if name not in STAGES]
    if missing:
        raise RuntimeError(f"no chapter registered the stage{'s' * (len(missing) > 1)} {', '.join(missing)}")
    return [STAGES[name] for name in names()]


# %% [markdown]
# `compile_to` runs the stages in order, each on the output of the one
# before, leaving out the optimisations under `-O0`, up to the stage NAME.
# A stage that meets a mistake raises a `CompileError`, and the compilation
# stops there — with one exception, so that one run reports every mistake
# it safely can: the lexer goes on after a lexical mistake and leaves it in
# the unit's `errors`, and the parser reports it with its own (or
# `compile_to` does, if it stops at `tokens`). `show` returns the output of
# one stage as text. `compile_to` runs the stages with Python's cycle
# collector paused, from the first to the last ([appendix
# B](B_support.ipynb#the-garbage-collector-paused) says why a compiler's
# many small objects make it worth pausing); `stages_of`, which hands each
# output to its caller between two stages, leaves that to the caller.

# %%
#| export
def stages_of(source: Source, upto: str | None = None, optimise: bool = True,
              checked: bool = False) -> Iterator[tuple[Stage, Any, Unit]]:
    """Run the stages from the source up to UPTO (all, if None), yielding (stage, its output, the
    unit) after each one; with checked, each output first passes its stage's checker."""
    if upto is not None and upto not in names():
        raise KeyError(upto)
    unit, value = Unit(source, optimise), source
    for s in load():
        if optimise or s.name not in OPTIMISATIONS:
            value = s.run(value, unit)
            if checked and s.check is not None:
                s.check(value, unit)
            yield s, value, unit
        if s.name == upto:
            break
    raise_errors(unit.errors)           # those that no later stage has reported with its own


def compile_to(name: str | None, source: Source, optimise: bool = True) -> tuple[Any, Unit]:
    """Run the stages from the source up to NAME (all, if None): (NAME's output, the unit)."""
    from lcompiler.support import collector_paused   # here: the pipeline imports no stage at load time
    result = source, None
    with collector_paused():            # over all the stages, not each: appendix B says why
        for _, value, unit in stages_of(source, name, optimise):
            result = value, unit
    return result


def show(name: str, source: Source, optimise: bool = True) -> str:
    """What the stage NAME hands to the next, as text."""
    value, unit = compile_to(name, source, optimise)
    return STAGES[name].show(value, unit)


# %% [markdown]
# ## Every stage, checked and run
#
# Each language of the compiler from the core language to LLVM has a
# checker or an interpreter, or both: the core language of chapter 4b has a
# reference interpreter (which runs the typed and the monomorphic core
# too), the monomorphic core a checker of its typing rules (chapter 5b),
# the CPS language both (chapter 6), and the LLVM module is verified by
# LLVM (chapter 10). The LLVM stages register no interpreter: running LLVM
# means compiling it to machine code, which [chapter 11](11_running.ipynb)
# does. The tokens, the syntax tree and the assembly have neither.
# `stages_of(source, checked=True)` checks each stage's output as it goes;
# a test of the package (`tests/test_pipeline.py`) also runs every
# interpreter on the output of its stage and compares what it prints, and
# the runtime error it stops with, with those of chapter 4b's reference
# interpreter — for the programs of the test corpus, of the corpus of
# exceptions and the examples, with the optimiser and without (all but a
# few programs too long or too deep to interpret seven times over, which
# tests of their own run), so that a new stage is tested the day it is
# registered.
# This is the test driver of *Essentials of Compilation* (Jeremy Siek's
# textbook, which builds a compiler in Python a pass at a time), whose
# `test_pass` runs the program after every pass.
#
# Here is a small program taken through every stage, with the size of what
# each one hands on (the lines of its text, as `lc show` prints it), and
# whether it has a checker and an interpreter. The
# stages are registered with the package's `lcompiler.pipeline`, the module
# this chapter's cells are exported to, by the modules of the later
# chapters; so these cells run the package's functions, not the ones this
# notebook has just defined:

# %%
from lcompiler import pipeline

SMALL = Source("small.l", "def double(x) = 2 * x\nprint(double(21))\n")

for s, value, unit in pipeline.stages_of(SMALL, checked=True):
    text = s.show(value, unit)
    print(f"{s.name:9} {len(text.splitlines()):4} lines   checker: {'yes' if s.check else 'no ':3}"
          f"  interpreter: {'yes' if s.interpret else 'no'}")

# %% [markdown]
# The line counted for `types` is not the program again: `lc show types`
# prints each definition with its type, and this program has one, `double`.
#
# The same run, drawn. Between the source text at the top and what the
# last stage hands on at the bottom, each box is a stage, in the order of
# `pipeline.PIPELINE`, with its chapter, and with a mark for a checker
# (✓) and for an interpreter (▶) when the stage that `pipeline.STAGES`
# holds has one; the two optimisations are yellow, since `-O0` leaves them
# out. Each edge is labelled with the class of the value that goes down
# it, as the run handed it on. `pipeline_picture` reads all of this from
# the tables and from the run; only the label of the first box, the source
# text, is written by hand.

# %%
def value_class(value) -> str:
    """The class of a value a stage hands on, with the module it comes from (lcompiler's prefix left
    out): core.Program, llvmlite.ir.Module…"""
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = ".".join(kind.__module__.split(".")[:2] + [name]).removeprefix("lcompiler.")
    if kind is list and value:
        name += f" of {type(value[0]).__qualname__}"
    return name


def pipeline_picture(source: Source) -> Picture:
    """The stages a program goes through, top to bottom, each labelled with its chapter and the marks
    of its checker and interpreter, each edge with the class of what passes down it."""
    chapters = {name: chapter for name, _, chapter, _ in pipeline.PIPELINE}
    boxes, received, marked = [Box("source text")], value_class(source), []
    for s, value, _ in pipeline.stages_of(source, checked=True):
        marks = "".join(mark for mark, has in (("  ✓ checker", s.check), ("  ▶ interpreter", s.interpret)) if has)
        boxes.append(Box(f"{s.name} (chapter {chapters[s.name]}){marks}", edge=received,
                         style="yellow" if s.name in pipeline.OPTIMISATIONS else "blue"))
        received = value_class(value)
        facts = [fact for fact, has in (("an optimisation", s.name in pipeline.OPTIMISATIONS),
                                        ("with a checker", s.check), ("with an interpreter", s.interpret)) if has]
        marked.append(", ".join([f"{s.name}, of chapter {chapters[s.name]}", *facts, f"receiving {boxes[-1].edge}"]))
    *_, last = pipeline.PIPELINE
    boxes.append(Box(last[3], edge=received))
    for upper, lower in zip(reversed(boxes[1:]), reversed(boxes[:-1])):
        lower.children = [upper]
    return Picture([(f"{source.name} through the stages, top to bottom (yellow: left out at -O0)", boxes[:1])],
                   alt=f"A column of boxes, from the source text of {source.name} down through the stages: "
                       + "; ".join(marked) + f"; the last hands on {received}, {last[3]}.")


pipeline_picture(SMALL)

# %% [markdown]
# Three stages in a row hand on the same class, `core.Program`: the core
# program, the same program with a type on every node, and the same again
# with no type variable left. The class does not tell them apart; their
# invariants do, and the checker of `mono` is the one that tests them.
#
# Here is what the interpreters of the stages that have one print, each
# on the output of its own stage — the same line every time:

# %%
import io

for s, value, unit in pipeline.stages_of(SMALL):
    if s.interpret is not None:
        out = io.StringIO()
        s.interpret(value, unit, out)
        print(f"{s.name:9} {out.getvalue()!r}")

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: a list on one page, filled in by the chapters</p>
#
# MinCaml writes its compiler as one expression, `Emit.f outchan (RegAlloc.f
# (Simm.f (Virtual.f (Closure.f (… (Typing.f …))))))`: a reader sees every
# pass and its order at once, and a pass left out or put in the wrong
# place is there to see. Its price is that the file that holds the
# expression names every pass's module, so it compiles only once they all
# exist. An
# earlier version of this book went the other way: each chapter registered
# its stage with `@stage(name, before=…)`, so each stage's code stayed in
# its chapter, but the order existed nowhere but in the order the modules
# happened to run, a misspelt `before` silently put a stage last, and
# stages passed data through a dictionary of strings. We keep the
# registration — a chapter still adds its own stage where the stage is
# taught — and take the list from MinCaml: the names and their order are
# written here, once; a chapter can fill in a name, not invent one; and
# what a stage leaves for a later one is a field of the `Unit`.
#
# </div>

# %% [markdown]
# ## Exercises
#
# 1. Add a stage `lines` after `tokens` that hands on the tokens unchanged
#    and shows how many lines the program has. What do you change, and
#    where? What happens if you register it without adding it to the page?
# 2. `stages_of` checks each output only when asked. Measure what checking
#    every stage costs on a program of a few hundred lines (`time` around
#    `list(stages_of(source, checked=True))` against `compile_to`): would
#    you turn it on in `lc run`?
# 3. Why does the optimiser come before closure conversion, and the second
#    shrinking after it? Look at what `lc show opt`, `lc show closure` and
#    `lc show -O0 closure` print for the example of exercise 1 of [chapter
#    8](08_closure.ipynb), made a program: `def g(n) = { let f = { x -> x +
#    n }; f(1) + f(2) }` and `print(g(10))`.
#
# <details><summary>Solutions</summary>
#
# 1. One line in `PIPELINE`, `("lines", "syntax", "4a", "the tokens,
#    counted")`, between `tokens` and `ast`, and in chapter 4a a function
#    registered with `@stage("lines", show=lambda tokens, unit:
#    f"{unit.source.text.count(chr(10))} lines")` that returns its input
#    (it counts the newlines, so a last line without one is not counted:
#    `len(unit.source.text.splitlines())` counts it too).
#    Registered without the line in `PIPELINE`, `stage` raises at once:
#    `'lines' is not a stage of the pipeline; the stages are …`.
# 2. Each checker walks its stage's output once, so checking every stage
#    adds a fraction to the time of the compilation, which your
#    measurement gives for your machine. That is a price worth paying in
#    the tests, which look for bugs of the compiler, more than in every
#    `lc run`. Two checkers run on every compilation all the same, asked
#    or not. Chapter 5b's runs inside the stage `mono`, because it guards
#    the one promise a user cannot check for themselves — that a
#    well-typed program does not crash — and chapter 5b measures its cost.
#    LLVM's verifier (the checker of the stages `llvm` and `llvm-opt`)
#    runs inside chapter 10's `optimise`, before LLVM's optimiser and
#    after it: a module that breaks LLVM's rules is a bug of this
#    compiler, better reported there than as a crash later. So with
#    `checked=True` those two stages verify their module twice.
# 3. With the optimiser, `lc show opt` already prints `v_1 = 23` and the
#    `print` of it, and `lc show closure` the same: before closure
#    conversion `f` is a function in the middle of `g`, and each call names
#    it, so the optimiser copies `f` into its two calls and `g` into its
#    one, and folds the sum; no closure is ever made. `lc show -O0 closure`
#    shows what the optimiser would meet after closure conversion: `f_5 =
#    closure(f_code_6, n_4)`, a record, and calls `call f_5(…)` that go
#    through it, which hides which code they call. Closure conversion also
#    makes work of its own for the shrinker — a call of a closure built in
#    sight can call its code directly, and the small wrappers it makes for
#    direct functions used as values can move into their one call
#    ([chapter 9](09_shrink.ipynb#in-the-pipeline)) — which is why a second
#    shrinking runs after it.
#
# </details>
