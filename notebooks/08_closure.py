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
# # Chapter 8. Closure conversion
#
# After chapter 7, an L function is a CPS `fun` that may mention any variable
# in scope where it is written. A machine function cannot: LLVM code sees its
# parameters and the globals, nothing else. **Closure conversion** makes every
# function *closed* — free of free variables — by passing it explicitly the
# values it used to find in its surroundings, and by hoisting every function
# to the top level, where the back end expects it.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 6](06_cps.ipynb), the CPS language, its Build
# functions (`Seq`, `lam`, `apply`, `proj`, `closure`, `const`), its
# Traverse functions (`free_variables`, `occurrences`, `all_occurrences`,
# `is_global`) and its Change operations (`redirect`, `swap_prim`,
# `substitute`, `delete_binding`, `take`); [chapter 7](07_cps_convert.ipynb),
# which makes the CPS this chapter converts.
#
# **Builds:** the module `lcompiler.closure`, and the pipeline's stage
# `closure`. Its output is the input of [chapter 10](10_llvm.ipynb)'s back
# end (after [chapter 9](09_shrink.ipynb)'s last shrinking).
#
# </div>

# %%
#| default_exp closure

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.closure`:
#
# - `closure_convert(program)` changes a CPS program in place so that
#   `check(program, closed=True)` holds — no function has a free variable or a
#   free continuation variable (the precondition of chapter 10, as in the
#   [blog of the L compiler](../bibliography.md#the-l-blog)'s translation
#   to LLVM) — and every function is a top-level definition;
# - the program means the same: chapter 6's interpreter prints the same
#   output, before and after;
# - a function with free variables becomes a *closure*: a tuple of its code
#   and the values of its free variables; a function without free variables
#   stays a plain (`direct`) function and its known calls are direct calls,
#   with no closure built unless the function is also used as a value;
# - `lc show closure FILE.l` prints the result.

# %% [markdown]
# ## Closures, flat
#
# Take `def adder(n) = { x -> x + n }`. The inner function uses `n`, a
# parameter of `adder`: after `adder(1)` has returned, the function it
# returned must still know that `n` was 1. The standard answer is a
# **closure**: a heap tuple holding a pointer to the function's code and the
# values of its free variables. The CPS writes it `closure(code, …)`: a
# `tuple` in all but name, a heap block whose field 0 is the code, marked so
# that the interpreter can print it as `<function>`. For `adder`, this
# chapter makes (the whole program is printed below, with `adder`):
#
# ```text
#   f_5 = closure(f_code_6, n_4)                         # where the function was: build the closure
# …
# private f_code_6 = fun ret_19 exn_20 (env_21, x_22) {  # the code: a closed function
#   n_23 = env_21[1]                                     # its free variable, from the tuple
#   v_24 = x_22 + n_23
#   ret_19(v_24)
# }
# ```
#
# The code receives the closure itself as an extra first parameter, its
# *environment*, and reads its free variables out of it. Like every function,
# the code takes the two continuations of chapter 6, where it returns and
# where it raises; they are not values, so they are not in the closure: the
# caller passes them at each call. A call of an unknown function
# `call f(a) -> k / h` — `f` may be any closure — becomes, in the back end,
# "load `f[0]`, call it with `(f, a)`", returning to `k` and raising to `h`;
# the CPS keeps writing it `call f(a) -> k / h`, of the `closure` kind, and
# chapter 6's interpreter does exactly that when `f` is a tuple.
#
# These are *flat* closures: each holds copies of all its free variables.
# Copies are safe because CPS variables never change; a mutable `var` that
# a function captures is a heap cell since [chapter 7](07_cps_convert.ipynb),
# and the closure copies the pointer to that cell.
#
# Exceptions add nothing to the closure, and that is the point of
# second-class continuations. A function made in the block of a `try` does
# not capture the `try`'s handler: the handler is a continuation, never a
# value, so it cannot be a free variable stored in a record. Where a
# closure's code raises is its second continuation, which each call passes:
# a closure called in the block of a `try` raises to that block's handler,
# wherever it was made — the handler is in force while its block runs, as
# in OCaml. So closure code is `fun ret exn (env, x…)` like any function,
# and a call through a closure, `call f(a) -> k / h`, passes both. After
# this chapter, chapter 6's checker still holds every program to
# second-classness (no continuation in a record, a tuple or an argument);
# `tests/test_exceptions.py` checks it on the corpus of exception programs,
# closure-converted and run.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: flat closures, not linked ones</p>
#
# The alternative, *linked* closures, point to the enclosing function's
# environment instead of copying what they use from it. They share more —
# a closure copies only the values that the function building it binds
# itself, and one pointer reaches all the others — but
# they keep whole environments alive as long as any inner function lives
# (a space leak the flat scheme cannot have), and every access to a variable
# of an outer function is a chain of loads. With CPS variables immutable,
# flat closures are the simple and safe choice; exercise 2 measures the
# other.
#
# </div>
#
# <div class="admonition note">
# <p class="admonition-title">Design note: closures, not lambda lifting</p>
#
# The other classic way to close a function is *lambda lifting*
# ([Johnsson, 1985](../bibliography.md#johnsson)): add each free variable
# as an extra parameter, and at every call pass the values along, so that
# no environment is ever built. It works where every call of the function
# is known — the caller can supply the extra arguments — which is the
# case of a local function that never escapes. But an L function is a
# value: it can be passed to `map`, stored in a list, returned, and
# whoever calls it then knows nothing of its free variables. Those functions need a closure whatever the
# compiler does, so this chapter closes everything with closures, and gets
# lambda lifting's benefit where it matters by other means: a function
# with no free variables calls and is called directly (next section), and
# chapter 9's contification turns a local function whose calls all return
# to the same place into a continuation, which needs no environment at
# all.
#
# </div>
#
# ## Direct functions and known calls
#
# A closure costs an allocation and an indirect call. Most functions of an
# L program do not need one: a top-level `def` uses, besides its
# parameters and its own local names, only globals, which are in scope
# everywhere. Such a
# function with no free variables becomes a **direct** function
# (`No_environment` in the L compiler's
# [Cpsast](../bibliography.md#cpsast)), and every call that names it — `call f(a)` where `f` is
# the variable bound to it — becomes `call direct f(a) -> k`: a plain call
# instruction, no tuple, no load.
#
# A direct function may still be used as a value (`map(square, l)`): there,
# the caller of the value expects a closure. For those uses only, the pass
# makes one static closure per such function — a closure holding an *entry*
# code that takes the environment parameter and tail-calls the direct
# function — and redirects those uses to it. Known calls stay direct.
#
# ## The pass
#
# The functions are processed inside out (in post-order), so that when a
# function is processed, the functions nested in it have already become
# closures built in its body, and its free variables include theirs; and
# earlier functions before later ones, so that a function that only uses a
# local function defined before it finds that one already hoisted — a
# global, hence not a free variable.
# For each function `L`, bound to `f`:
#
# 1. compute its free variables (globals excepted) with the framework's
#    `free_variables`;
# 2. if there are none: make it `direct`; hoist it to a definition of its own
#    (if it was local); turn each call of `f` into a direct call of it; send
#    the other uses of `f` to its static closure;
# 3. otherwise: add the parameter `env`; at the start of the body bind
#    `v' = env[i]` for each free variable `v` and redirect the body's uses
#    of `v` to `v'`; hoist the function to a definition `code`; and put
#    `closure(code, v1, …, vn)` where it was.
#
# Each step is made with chapter 6's Change operations (`redirect`,
# `swap_prim`, `substitute`, `delete_binding`, `take`) and its Build
# functions (`Seq`, `lam`, `closure`), with, to put a function's new body
# in place, `_attach`, the helper of chapter 6 with which they link a
# child to its parent; so the links stay right, and
# the cost is linear in the size of each function body outside the
# functions nested in it.
#
# First, the order: a walk of the program with a stack, in which a function
# is appended after everything under it.

# %%
#| export
from lcompiler.cps import (
    Var, Lambda, Apply, Definition, Program, Seq, lam, apply, proj, closure, const,
    children, all_occurrences, free_variables, occurrences, is_global, substitute, redirect,
    swap_prim, delete_binding, take, _attach)
from lcompiler.support import collector_paused


def functions_inside_out(program: Program) -> list:
    """The Lambdas of a program in post-order: nested functions before the function holding
    them, and earlier functions before later ones."""
    order, stack = [], [(program, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if type(node) is Lambda:
            stack.append((node, True))
        parts = children(node)
        stack.extend((p, False) for p in reversed(parts) if p is not None)
    return order

# %% [markdown]
# In a function `f` that returns a function of `y` that returns a function
# of `z`, the innermost comes first. Functions are named here by their
# return continuations, as the printer names them:

# %%
import io
from lcompiler import cps, interp, types
from lcompiler.cps_convert import convert
from lcompiler.errors import Source, RunError


def to_cps(text: str) -> cps.Program:
    """The CPS of an L program, as chapter 7 makes it."""
    return convert(types.check_types(Source("example.l", text))[0])


NESTED = "def f(x) = { y -> { z -> x + y + z } }"
nested = to_cps(NESTED)
printer = cps.Printer()
for d in nested.definitions:
    printer.definition(d)
print("\n".join(printer.lines))
print("inside out:", [printer.name(f.cont) for f in functions_inside_out(nested)])

# %% [markdown]
# The pass is a class, whose instance remembers the static closures it has
# made. A function without free variables becomes direct and, if local,
# is hoisted: its local variable is substituted by a new global, and the
# binding is deleted; one with free variables gets its environment and is
# replaced by the building of its closure.

# %%
#| export
class ClosureConverter:
    def __init__(self, program: Program):
        self.program = program
        self.entries = {}          # direct function's global -> its static closure

    def run(self) -> Program:
        for f in functions_inside_out(self.program):
            self.function(f)
        return self.program

    def function(self, f: Lambda) -> None:
        free = [v for v in free_variables(f) if not v.is_cont and not is_global(v)]
        site = f.enclosing
        if not free:
            f.kind = "direct"
            if type(site) is Definition:
                code = site.var
            else:                                # hoist: the local binding goes
                code = Var(site.var.hint)
                code.type = site.var.type
                substitute(site.var, code)
                swap_prim(site, const(()))
                delete_binding(site)
                self.program.define(f, "private", code)
            self.calls(code)
        else:
            self.environment(f, free)
            code = Var(site.var.hint + "_code")
            swap_prim(site, closure(code, *free))
            self.program.define(f, "private", code)

# %% [markdown]
# The uses of a direct function: the call of it is a known call, made
# direct; any other use — the function passed or stored as a value — goes to
# its static closure, made on first need by `closure_of`.

# %%
#| export
class ClosureConverter(ClosureConverter):
    def calls(self, code: Var) -> None:
        """Known calls of a direct function become direct; other uses get its static closure."""
        for o in list(occurrences(code)):
            node = o.enclosing
            if type(node) is Apply and node.func is o:
                node.kind = "direct"
            else:
                redirect(o, self.closure_of(code))

    def closure_of(self, code: Var) -> Var:
        """The static closure of a direct function: closure(entry), entry(env, x…) = code(x…)."""
        if code not in self.entries:
            arity = len(code.binder.value.params)
            entry = lam(lambda ret, exn, env, *xs: apply(code, ret, exn, *xs, kind="direct"),
                        ["env"] + ["x"] * arity, "closure")
            for x, param in zip(entry.params[1:], code.binder.value.params):
                x.type = param.type              # the back end (chapter 10) reads parameter types
            entry_var = self.program.define(entry, "private", name=code.hint + "_entry")
            self.entries[code] = self.program.define(closure(entry_var), "private",
                                                      name=code.hint + "_closure")
            self.entries[code].type = code.type
        return self.entries[code]

# %% [markdown]
# The environment: a new first parameter `env`, and at the start of the body
# one projection `env[i]` per free variable (field 0 is the code); then each
# use of a free variable in the body is redirected to the projection —
# `redirect`, not `substitute`, since the variable keeps its uses outside
# the function.

# %%
#| export
class ClosureConverter(ClosureConverter):
    def environment(self, f: Lambda, free: list) -> None:
        """Add the env parameter; read each free variable from it at the start of the body."""
        env = Var("env")
        env.binder = f
        f.params.insert(0, env)
        wanted = set(free)
        uses = [o for o in all_occurrences(f.body) if o.var in wanted]
        s = Seq()
        inner = {}
        for i, v in enumerate(free, 1):
            inner[v] = s.let(proj(i, env), v.hint)
            inner[v].type = v.type
        body = s.end(take(f.body))
        _attach(f, "body", body)
        for o in uses:
            redirect(o, inner[o.var])

# %%
#| export
def closure_convert(program: Program) -> Program:
    """Make every function of a CPS program closed and top-level, in place; return it."""
    with collector_paused():
        return ClosureConverter(program).run()

# %% [markdown]
# The nested functions above, converted. The innermost function, of `z`,
# uses `x` and `y`: it becomes `f_code_7`, reading both from its
# environment. The function of `y` has one free variable, `x`, which it
# needs to build the closure of the innermost (with its own `y`): it
# becomes `f_code_6`, reading `x` from its environment. `f` has no free
# variable and stays direct; it builds the closure of the function of `y`.

# %%
closure_convert(nested)
cps.check(nested, closed=True)
print(cps.show(nested), end="")

# %% [markdown]
# ## Closure conversion at work
#
# `to_closed` runs the front end, chapter 7 and this chapter, checks the
# back end's precondition, and returns the program; `run_all` runs a
# program three ways — chapter 4b's reference interpreter, and chapter 6's
# interpreter before and after this chapter — and requires the same output.

# %%
def to_closed(text: str) -> cps.Program:
    program, _ = types.check_types(Source("example.l", text))
    p = convert(program)
    closure_convert(p)
    cps.check(p, closed=True)
    return p


def run_all(text: str) -> str:
    """The output of the reference interpreter, checked equal to the CPS interpreter's
    before and after closure conversion."""
    outputs = []
    def reference(src, out):
        interp.Interpreter(out).run(types.check_types(src)[0])
    def converted(src, out):
        cps.run(convert(types.check_types(src)[0]), out)
    def closed(src, out):
        cps.run(to_closed(src.text), out)
    for runner in (reference, converted, closed):
        out = io.StringIO()
        try:
            runner(Source("example.l", text), out)
        except RunError as e:
            out.write(e.render() + "\n")
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] == outputs[2], outputs
    return outputs[0]

# %% [markdown]
# **A closure.** `adder`'s inner function uses `n`: it becomes the code
# `f_code_6` (a function literal has no name; chapter 7 calls its value `f`)
# with an `env` parameter, reading `n` from field 1, and `adder` builds
# `closure(f_code_6, n_4)`. `adder` itself has no free variable: it is
# direct, and the call `adder(1)` is a direct call; the call of the closure
# `inc(41)` is not, since nothing tells which function `inc` is.

# %%
ADDER = "def adder(n) = { x -> x + n }\ndef test() = { let inc = adder(1); inc(41) }\nprint(test())\n"
print(cps.show(to_closed(ADDER)), end="")

# %%
print(run_all(ADDER), end="")

# %% [markdown]
# What `closure(…)` builds in memory is one heap block. Here it is for a
# real closure, the one `scale` returns in the small program below, whose
# `lc show -O0 closure` output comes first: `f_7 = closure(f_code_8, n_6,
# f_5)`. The block is a header word (its layout is [chapter
# 10b](10b_runtime.ipynb)'s, computed here by chapter 10's `header`), then
# field 0, the address of the code, then the captured values in the order
# the code reads them, `env_20[1]` and `env_20[2]`.

# %%
import contextlib
import tempfile
from pathlib import Path

from lcompiler import pipeline
from lcompiler.cli import lc
from lcompiler.drawing import Box, Picture
from lcompiler.llvm_backend import LAYOUT_SHIFT, header

SCALE = "def scale(f, n) = { x -> f(x) * n }\nprint(scale({ y -> y + 1 }, 10)(4))\n"
printed = io.StringIO()
with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp), contextlib.redirect_stdout(printed):
    Path("scale.l").write_text(SCALE)
    status = lc("show", "-O0", "closure", "scale.l")
print(printed.getvalue(), end="")
closed, _ = pipeline.compile_to("closure", Source("scale.l", SCALE), optimise=False)  # as lc show -O0 makes it
assert status == 0 and cps.show(closed) in printed.getvalue()      # the program drawn is the one printed

made = next(n for d in closed.definitions for n in cps.walk(d)
            if type(n) is cps.LetPrim and type(n.prim) is cps.MakeClosure)
printer = cps.Printer()                    # the names lc show printed
for d in closed.definitions:
    printer.definition(d)
name = printer.name
fields = [o.var for o in made.prim.fields]
word0 = header([v.type for v in fields], code=True)
layout = word0 >> LAYOUT_SHIFT
pointers = [i for i in range(len(fields)) if layout >> i & 1]
print(f"{name(made.var)}: {len(fields) + 1} words; header {word0} = {len(fields)} fields, tag 0, "
      f"layout {layout:#b} (fields that may be pointers: {pointers})")


def what(i: int, v) -> str:
    if i == 0:
        return f"field 0: the address of the code {name(v)}"
    return (f"field {i}: {name(v)}, of type {types.show_type(v.type)}, "
            + ("a pointer" if i in pointers else "not a pointer"))


words = [Box(f"word 0, the header: {word0} ({len(fields)} fields, tag 0, layout {layout:#b})", style="yellow")]
for i, v in enumerate(fields):
    words.append(Box(what(i, v), style="green" if i == 0 else "blue" if i in pointers else "plain",
                     edge=f"+{8 * (i + 1)} bytes", name=f"field{i}"))
for upper, lower in zip(words, words[1:]):
    upper.children.append(lower)
code = Box(f"{name(fields[0])}, a top-level function of (env, x)", style="green", name="code")
alt = (f"The heap block of {name(made.var)} = closure({', '.join(name(v) for v in fields)}): "
       f"{len(fields) + 1} words, one below the other. Word 0 is the header, {word0}: {len(fields)} fields, "
       f"tag 0, layout {layout:#b}, so that only field {', '.join(map(str, pointers))} may hold a pointer. "
       + "; ".join(what(i, v) for i, v in enumerate(fields)).replace("field", "Field", 1)
       + f". An arrow leads from field 0 to the code {name(fields[0])}, drawn beside the block.")
Picture([(f"{name(made.var)} = closure(…): {len(fields) + 1} words on the heap", [words[0]]),
         ("the code it points at", [code])], arrows=[("field0", "code")], alt=alt)

# %% [markdown]
# The same transformation drawn, on a function with two free variables:
# `line(a, b)` returns the function `{ x -> a * x + b }`. Before, the inner
# function sits inside `line` and reads `a` and `b` from it (coloured).
# After, it is a top-level definition of its own, `f_code_8`, which reads
# them from its environment, fields 1 and 2; in their place, `line` builds
# the closure that holds them — in the same colours.

# %%
from IPython.display import SVG, display

LINE = "def line(a, b) = { x -> a * x + b }"
program = to_cps(LINE)
inner = functions_inside_out(program)[0]
free = [v for v in cps.free_variables(inner) if not v.is_cont and not cps.is_global(v)]
colours = dict(zip(free, ("#dc2626", "#2563eb")))
before = cps.diagram(program, marks=colours)
closure_convert(program)
cps.check(program, closed=True)
read = inner.body                          # the projections env[1], env[2] that start its body now
for v in free:
    colours[read.var] = colours[v]
    read = read.body
after = cps.diagram(program, marks=colours)
alt = ("A function before and after closure conversion. Before: the definition line_1 holds, inside "
       "its box, the function f_7, whose body uses a_5 (red) and b_6 (blue), variables of line_1. "
       "After: line_1 is a direct function that builds f_7 = closure(f_code_8, a_5, b_6), with a_5 in "
       "red and b_6 in blue; below it, the hoisted definition f_code_8, a function of env_11 and x_12, "
       "begins with a_13 = env_11[1] in red and b_14 = env_11[2] in blue, and uses those.")
display(SVG(cps.beside([("before: a function inside a function", before),
                        ("after: a closure, and its code at the top level", after)], alt)),
        metadata={"alt": alt})

# %% [markdown]
# **A direct function used as a value.** `square` is called directly by
# `twice_square`, and passed to `twice` as a value: only the second use goes
# through the static closure `square_closure`, whose entry tail-calls
# `square`.

# %%
SQUARE = ("def square(x) = x * x\ndef twice(f, x) = f(f(x))\n"
          "def twice_square(x) = square(square(x))\nprint(twice(square, 3), twice_square(3))\n")
print(cps.show(to_closed(SQUARE)), end="")

# %%
print(run_all(SQUARE), end="")

# %% [markdown]
# **A local function without free variables** is hoisted and becomes
# direct, like a top-level one; **a captured `var`** travels as its cell:

# %%
LOCAL = ("def counter() = { var n := 0; let next = { u -> n := n + 1; n }; "
         "let double = { x -> x * 2 }; next(()); double(next(())) }\nprint(counter())\n")
print(cps.show(to_closed(LOCAL)), end="")

# %%
print(run_all(LOCAL), end="")

# %% [markdown]
# ## The seeds' program, closure-converted
#
# Every function of the seeds' program is a local function — `true`,
# `false`, `pair` and the rest are `let`-bound inside the `assert` — and
# only `pair`'s inner function `{ boolean -> boolean(first, second) }`
# keeps free variables: it is the one closure the program allocates.
# (`first` and `second` use `true` and `false`, but those come earlier and
# are hoisted first, into globals.) The others are hoisted as direct
# functions; those used as values (passed to `p`) get static closures,
# made once, at the top level.

# %%
SEEDS = open("../examples/seeds.l").read()
print(cps.show(to_closed(SEEDS)), end="")

# %%
print("output:", repr(run_all(SEEDS)), "— the assertion held in all three interpreters")

# %% [markdown]
# ## Showing closure-converted CPS from the command line
#
# Closure conversion is the pipeline's stage `closure`, after `cps` and
# after [chapter 9](09_shrink.ipynb)'s optimiser, which puts its stage
# `opt` in between. The optimiser leaves nothing to convert in this small
# example: it inlines `twice` and the function passed to it, and computes
# `7 * 3 * 3`. `lc show closure` prints what closure conversion hands on:

# %%
#| export
from lcompiler import cps, pipeline


@pipeline.stage("closure", show=lambda program, unit: cps.show(program).rstrip("\n"),
                check=lambda program, unit: cps.check(program, closed=True),
                interpret=lambda program, unit, out: cps.run(program, out))
def closure_stage(program: cps.Program, unit: pipeline.Unit) -> cps.Program:
    return closure_convert(program)

# %%
from lcompiler.cli import lc

# %%
import contextlib
import tempfile
from pathlib import Path

TWICE = "def twice(f, x) = f(f(x))\nprint(twice({ y -> y * 3 }, 7))\n"
with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("twice.l").write_text(TWICE)
    print("exit status", lc("show", "closure", "twice.l"))

# %% [markdown]
# Without the optimiser (`-O0`), the stage sees chapter 7's CPS: `twice`
# becomes a direct function, and the function passed to it, which has no
# free variable, a direct function with a static closure.

# %%
with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("twice.l").write_text(TWICE)
    print("exit status", lc("show", "-O0", "closure", "twice.l"))

# %% [markdown]
# ## The promises, tested
#
# `tests/test_convert.py` runs every corpus program and random well-typed
# programs through chapter 4b's interpreter and through the CPS interpreter
# after chapters 7 and 8, and requires the same output and runtime errors; it
# checks `check(p, closed=True)` after this chapter, that every function is a
# top-level definition, that calls of top-level functions are direct, and
# that a function with free variables becomes a `closure(…)`.
# `bench/convert_speed.py` times this pass next to chapter 7's, on the same
# generated programs; its last run, read from `bench/convert_speed.json`:

# %%
import json

SPEED = json.loads(Path("../bench/convert_speed.json").read_text())
print(SPEED["command"], "—", SPEED["settings"]["clock"], "clock, best of", SPEED["settings"]["repeat"], "runs")
where = SPEED.get("machine", {})
print(f"measured {where.get('date', '?')} on {where.get('cpu', 'a machine not recorded')}, "
      f"{where.get('cores', '?')} cores, load average {where.get('load')} at the start")
print(f"{'source nodes':>12} {'CPS nodes':>10} {'closure s':>10} {'µs/node':>8}")
for row in SPEED["sizes"]:
    n = row["source nodes"]
    print(f"{n:>12} {row['cps nodes']:>10} {row['closure s']:>10.3f} {1e6 * row['closure s'] / n:>8.2f}")
first, last = SPEED["sizes"][0], SPEED["sizes"][-1]
print(f"time per source node, largest / smallest: "
      f"{(last['closure s'] / last['source nodes']) / (first['closure s'] / first['source nodes']):.2f}"
      " (1.00 is linear)")

# %% [markdown]
# The time per source node, the last column, grows by about two fifths
# over the hundredfold growth of the program (the ratio printed last). The
# timings are the best of a few runs on a shared machine (the load
# average printed, for two cores), and a timing cannot say by itself
# whether the growth is the algorithm's. As [chapter 7](07_cps_convert.ipynb) did for its
# conversion, count the work instead: the Python function calls closure
# conversion makes per source node, on two of the benchmark's programs, the
# second ten times the size of the first. A count does not depend on the
# machine or its load.

# %%
import cProfile
import pstats
import sys

sys.path.insert(0, "../bench")
import convert_speed                      # the benchmark's generator of programs

for definitions in (30, 300):
    core_n, _ = types.check_types(convert_speed.program(definitions))
    nodes_n = convert_speed.source_nodes(core_n)
    converted_n = convert(core_n)
    profile = cProfile.Profile()
    profile.enable()
    closure_convert(converted_n)
    profile.disable()
    print(f"{nodes_n:>6} source nodes: {pstats.Stats(profile).total_calls / nodes_n:.2f} calls per node")

# %% [markdown]
# The count is the same at both sizes, to within 0.1 %, as the section on
# the pass said it would be: each function's body is walked a fixed number of times, and
# the functions nested in it are not walked again once hoisted. So the
# slow growth of the timings is not the algorithm's. Chapter 7 found the
# same on its conversion, and chapter 6 on its framework, which it put
# down to the cost of each lookup once the tables no longer fit in the
# processor's caches.

# %% [markdown]
# ## Exercises
#
# 1. A call of a known closure (`f(1)` and `f(2)` in
#    `def g(n) = { let f = { x -> x + n }; f(1) + f(2) }`) still loads
#    the code from the closure. Make it a direct call of the code, passing the
#    closure as its environment. How many calls does that change in
#    `examples/closures.l`?
# 2. Implement *linked* closures (an environment that points to the
#    enclosing function's environment) and compare the number of words
#    allocated on the seeds' program and on a function nested five deep.
# 3. Every closure and every cell is allocated on the heap. Which closures of
#    the corpus never outlive the call of the function that makes them (so
#    that the back end could put them on the stack)? Write the analysis with
#    the framework's Traverse functions.
#
# <details><summary>Solutions</summary>
#
# 1. After closure conversion, a call `call f(a) -> k / h` whose `f` is
#    bound in the same function by `f = closure(f_code, …)` calls a known
#    code: `call_known_closures`, below, replaces it by `call direct
#    f_code(f, a) -> k / h`, the closure passed as the `env` its code
#    reads. The closure is still built (the code reads its free variables
#    from it); a next step would pass those as arguments instead, which is
#    lambda lifting. In `examples/closures.l` it changes no call at all,
#    with or without the optimiser, as the cell below prints: no function
#    there both builds a closure and calls it — `adder(1)(2)` calls the
#    closure that `adder` returned, which `adder`'s caller does not know.
#    On the exercise's own example it changes both calls at `-O0`; the
#    optimiser (chapter 9) leaves no call of a closure to change.
# 2. A linked closure holds the code, a link to the closure of the
#    function that builds it (when that function has one), and only the
#    values that function binds itself; a variable of a function further
#    out is reached through the links, one load per level. The pass
#    changes in `environment`: a free variable that the building function
#    itself reads from its `env` is not copied but reached through the
#    link, and the code's projections become chains `env[1][1]…`. The cell
#    below counts the words of every `closure(…)` both ways, from the
#    closure-converted program (a count of the layout, not the pass):
#    on the seeds' program the one closure, `pair`'s inner function, is
#    the same size either way — `pair` is direct, so there is nothing to
#    link to, and both copy `first` and `second`; on a function nested
#    five deep, linked closures save a few words, and the innermost
#    function then reads `a` through three links and a load instead of
#    one load. And a linked closure keeps every enclosing closure alive as
#    long as it lives, the space leak of the design note.
# 3. A closure can live in the frame of the function that builds it if
#    it is dead when that function returns. `stays_on_stack`, below, finds
#    the simple, local case with the Traverse functions alone: every
#    occurrence of the closure's variable (`occurrences`) is the function
#    of a call (`enclosing`) that returns to the builder — not a tail call,
#    after which the builder's frame is gone — and no occurrence is an
#    argument, a field of a tuple or of another closure, or a value
#    returned. On the corpus (`tests/corpus/run` and `examples`) it finds
#    the few printed below at `-O0`, and none in the optimised programs,
#    where chapter 9's inlining has already removed such closures. A closure
#    passed to a function that only calls it (`map(f, l)`) also stays on
#    the stack, but proving that needs an interprocedural analysis, of
#    what every callee does with its parameters.
#
# </details>
#
# The three solutions' code follows; `tests/test_solutions.py` runs it
# too, and checks the counts it prints.
#
# Exercise 1: known closures called directly, counted on
# `examples/closures.l` and on the exercise's example, and run before and
# after by chapter 6's interpreter, with the same output:

# %%
from lcompiler.cps import Apply, LetPrim, MakeClosure, Proj, apply, replace, walk  # noqa: F811  (the cell imports what it uses, as a module would)


def known_closure_calls(program: cps.Program) -> list:
    """The calls of a closure that the same function builds with closure(code, …)."""
    return [n for d in program.definitions for n in walk(d)
            if type(n) is Apply and n.kind == "closure"
            and type(b := n.func.var.binder) is LetPrim and type(b.prim) is MakeClosure]


def call_known_closures(program: cps.Program) -> int:
    """Make each call of a known closure a direct call of its code, the closure as its env."""
    calls = known_closure_calls(program)
    for call in calls:
        f = call.func.var
        code = f.binder.prim.fields[0].var
        direct = apply(code, call.cont.var, call.exn.var, f, *[a.var for a in call.args], kind="direct")
        direct.loc = call.loc
        replace(call, direct)
    return len(calls)


KNOWN = "def g(n) = { let f = { x -> x + n }; f(1) + f(2) }\nprint(g(10))\n"
for name, text in (("closures.l", Path("../examples/closures.l").read_text()), ("the example", KNOWN)):
    for optimise in (False, True):
        p, _ = pipeline.compile_to("closure", Source(name, text), optimise=optimise)
        before = io.StringIO()
        cps.run(p, before)
        unknown = sum(type(n) is Apply and n.kind == "closure" for d in p.definitions for n in walk(d))
        changed = call_known_closures(p)
        cps.check(p, closed=True)
        after = io.StringIO()
        cps.run(p, after)
        assert after.getvalue() == before.getvalue()
        print(f"{name}, {'optimised' if optimise else '-O0'}: {unknown} calls of closures, {changed} known")

# %% [markdown]
# Exercise 2: the words of the closures, flat and linked, on the seeds'
# program and on a function nested five deep:

# %%
def builder(node):
    """The function whose body holds node (None at the top level)."""
    node = node.enclosing
    while node is not None and type(node) is not Lambda:
        node = node.enclosing
    return node


def closure_words(text: str) -> tuple:
    """Words of every closure(…) of the closure-converted program, flat (header, code, each captured
    value) and linked: header, code, a link to the closure of the function that builds it if that one
    has an environment, and the captured values that function does not itself read from it."""
    flat = linked = 0
    for d in to_closed(text).definitions:
        for n in walk(d):
            if type(n) is LetPrim and type(n.prim) is MakeClosure:
                b = builder(n)
                env = b.params[0] if b is not None and b.kind == "closure" else None
                inherited = [o for o in n.prim.fields[1:] if type(o.var.binder) is LetPrim
                             and type(o.var.binder.prim) is Proj and o.var.binder.prim.arg.var is env]
                flat += len(n.prim.fields) + 1
                linked += 2 + (env is not None) + len(n.prim.fields) - 1 - len(inherited)
    return flat, linked


DEEP = "def deep(a) = { b -> { c -> { d -> { e -> a + b + c + d + e } } } }\nprint(deep(1)(2)(3)(4)(5))\n"
for name, text in (("the seeds' program", SEEDS), ("deep, five functions nested", DEEP)):
    flat, linked = closure_words(text)
    print(f"{name}: flat closures {flat} words, linked {linked} words")
assert closure_words(DEEP) == (3 + 4 + 5 + 6, 3 + 4 + 4 + 4)    # closures of 1, 2, 3, 4 free variables

# %% [markdown]
# Exercise 3: the closures that could live on the stack, in the corpus.

# %%
def stays_on_stack(f: Var) -> bool:
    """Is the closure bound to f dead when the function that builds it returns? Yes if every use
    of f is as the function of a call that returns to that function (not a tail call)."""
    home = builder(f.binder)
    for o in occurrences(f):
        call = o.enclosing
        if home is None or type(call) is not Apply or call.func is not o or call.cont.var is home.cont:
            return False
    return True


corpus = sorted(Path("../tests/corpus/run").glob("*.l")) + sorted(Path("../examples").glob("*.l"))
for optimise in (False, True):
    made, found = 0, []
    for path in corpus:
        p, _ = pipeline.compile_to("closure", Source(path.name, path.read_text()), optimise=optimise)
        closures = [n.var for d in p.definitions for n in walk(d)
                    if type(n) is LetPrim and type(n.prim) is MakeClosure]
        made += len(closures)
        on_stack = sum(map(stays_on_stack, closures))
        if on_stack:
            found.append(f"{path.name} ({on_stack} of {len(closures)})")
    print(f"{'optimised' if optimise else '-O0'}: {len(corpus)} programs, {made} closures built, "
          f"on the stack: {', '.join(found) or 'none'}")
