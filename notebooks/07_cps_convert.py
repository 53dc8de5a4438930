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
# # Chapter 7. From L to CPS
#
# This chapter translates a typed L program (the core of chapter 4b, with the
# types of chapter 5 on every node) into the CPS language of chapter 6, in one
# pass (after a small pre-pass that decides where each mutable variable
# lives). It is chapter 3's compiler C5 grown up: the same higher-order style,
# where the translation of an expression is handed "what to do with its
# value", so that no *administrative redex* is built (a continuation made
# only to be applied at once to a value: [chapter 1](01_addlang.ipynb)'s
# useless step), and the rest of the computation is bound by `cont` only
# where a call must return to it or where two branches would otherwise each
# get a copy of it.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 6](06_cps.ipynb), the CPS language and its Build
# functions; [chapter 4b](04b_meaning.ipynb), the core language it
# translates, its table of primitives (which says which operations can
# fail, and so carry a location) and the reference interpreter it is
# tested against;
# [chapter 5](05_types.ipynb), the types on every node; the plan of
# [chapter 3](03_anf.ipynb)'s compiler C5.
#
# **Builds:** the module `lcompiler.cps_convert`, and the pipeline's stage
# `cps`. [Chapter 8](08_closure.ipynb) closes the functions it makes,
# [chapter 9](09_shrink.ipynb) optimises them.
#
# </div>

# %%
#| default_exp cps_convert

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.cps_convert`:
#
# - `convert(program)` returns a CPS `Program` that means what the L
#   program means: run by chapter 6's interpreter, it prints the same output
#   and stops with the same runtime error, at the same place, as chapter 4b's
#   reference interpreter. The result passes `check`.
# - A call in tail position is an `Apply` to the enclosing function's return
#   continuation; `if`, `match`, `&&` and `||` make a join point only when
#   their context is not already a continuation variable; `while` is a
#   recursive continuation; a `var` that no function captures lives in
#   continuation parameters, a captured one in a heap cell.
# - `raise(e)` is a jump to the exception continuation in force, recording
#   its raise site; `try` binds a local handler continuation, whose clauses
#   pass an exception they do not match on to the enclosing exception
#   continuation without a new site. A call in a `try`'s block is never a
#   tail call; a call in a clause is one when the `try` is in tail position.
#   A `var` assigned in a block and declared outside it lives in a cell, so
#   the clauses see its value at the raise. A program without `raise` and
#   `try` converts exactly as it did before L had exceptions.
# - Every CPS variable bound for an L value carries that value's type
#   (`var.type`), for the back end's choice of representation.
# - `lc show cps FILE.l` prints the result.

# %% [markdown]
# ## Contexts: what to do with a value
#
# The translation of an expression `e` is a function `expr(e, env, store,
# ctx)` that returns a CPS term. Its last argument, the *context*, says what
# the term must do with the value of `e` once it is in a variable. There are
# two kinds, as in [chapter 3](03_anf.ipynb)'s C5, where `Cont.Let` carries
# the rest of the program (our `Then`) and `Cont.Return` and `Cont.Join`
# name a place to jump to (our `Return`):
#
# - `Then(fn)`: a Python function that, given the CPS variable holding the
#   value, builds the rest of the term. The translation of `a + b` in
#   `Then(fn)` is "translate `a` in a context that translates `b` in a context
#   that binds `x = a + b` and calls `fn(x)`" — no continuation is built for
#   the intermediate steps, so none has to be reduced away later.
# - `Return(k)`: a continuation variable. The value is passed by a jump
#   `k(x)`. The body of a function is translated in `Return(ret)`, so a call
#   in that context becomes `call f(a) -> ret / exn`: a tail call.
#
# This is the one-pass transformation of [Danvy and
# Filinski](../bibliography.md#danvy-filinski) ("Representing Control: A
# Study of the CPS Transformation", 1992), and it takes from it exactly
# this: during the conversion a continuation is a function of the
# translator — their static, meta-level continuation, our `Then` — applied
# while the term is built, so the intermediate steps leave no
# administrative redex to reduce later; and a continuation is reified,
# written into the term, only where the term needs one, as the return
# point of a call (`k_7` in the picture below). The other place where this
# converter writes the rest of the computation into the term, a join
# point where two branches would each need it, is chapter 3's C5, below.
#
# Here is one context, drawn. In `def h(g, x) = g(x) + 1`, the
# subexpression `g(x)` (blue) has a context (yellow): the rest of the
# computation, what happens to `g(x)`'s value next — add 1 to it, and
# return the sum from `h`. Written with a hole `□` where the value goes, the
# context is `□ + 1`, returned. The converter translates `g(x)` in a
# `Then` whose Python function builds exactly that rest. A call cannot
# hand its result to a Python function — the callee returns by jumping to
# a continuation — so the rule of calls turns the context into one: the
# continuation `k_7` (yellow, on the right), whose body is the `□ + 1` and
# the return, with the hole now its parameter `r_8`. The picture is drawn
# from the converter's own record of the contexts: the package's
# `Converter` (the code of this chapter, which follows), noting the
# context of each expression it translates, and chapter 6's diagram of the
# CPS it returns.

# %%
from IPython.display import SVG, display

from lcompiler import core as c, cps, cps_convert, syntax as s, types
from lcompiler.drawing import Box, Picture
from lcompiler.errors import Source
from lcompiler.primitives import PRIMITIVES as OPERATORS


class Noting(cps_convert.Converter):
    """This chapter's converter, from the package, noting the context each expression is translated in."""

    def __init__(self, program):
        super().__init__(program)
        self.contexts = {}

    def expr(self, e, env, store, ctx, hint=None):
        self.contexts[id(e)] = ctx
        return super().expr(e, env, store, ctx, hint)


def with_hole(e, hole, show_hole: bool, style: str = "yellow") -> Box:
    """The core tree under e: the subexpression hole and its operands in blue (or a box □ in its
    place, if show_hole), the rest in style."""
    t = type(e)
    if e is hole:
        if show_hole:
            return Box("□")
        style = "blue"
    label = OPERATORS[e.op].symbol if t is c.Prim else "call" if t is c.App else s.pretty_expr(c.to_syntax(e))
    return Box(label, [with_hole(x, hole, show_hole, style) for x in cps_convert._children(e)], style)


def context_picture(text: str) -> None:
    """The body of the one function of text, the context of its one call, and the CPS it becomes."""
    core_program, _ = types.check_types(Source("example.l", text))
    noting = Noting(core_program)
    program = noting.program(core_program)
    (_, body), = core_program.items[0].value.body.clauses          # under the match of the parameters
    call, = [x for x in body.args if type(x) is c.App]                  # the call under the +
    given, around = noting.contexts[id(call)], noting.contexts[id(body)]
    apply_, = [t for t in cps.subterms(program.definitions[0].value.body) if type(t) is cps.Apply]
    printer = cps.Printer()
    printer.definition(program.definitions[0])
    k, ret = printer.name(apply_.cont.var), printer.name(around.cont)
    assert type(given) is cps_convert.Then and type(around) is cps_convert.Return
    tree = Box(f"return to {ret}", [with_hole(body, call, False)], "yellow")
    context = Box(f"return to {ret}", [with_hole(body, call, True)], "yellow")
    trees = Picture([(f"{s.pretty_expr(c.to_syntax(body))}", [tree]), ("its context", [context])], alt="").svg()
    alt = (f"Left, the tree of {s.pretty_expr(c.to_syntax(body))}, the body of h, under a box 'return to {ret}': "
           f"the call g(x) and its operands in blue, the rest in yellow. Middle, the context of the call, the "
           f"same tree with □ in place of the call. Right, the CPS of h: a function box holding the continuation "
           f"{k} (yellow), whose body adds 1 to its parameter and jumps to {ret}, and the call of g that returns "
           f"to {k}.")
    diagram = cps.diagram(program, marks={apply_.cont.var: "#ca8a04"})
    display(SVG(cps.beside([("L: the call, and its context", trees),
                            (f"CPS: the context is the continuation {k}", diagram)], alt)), metadata={"alt": alt})


context_picture("def h(g, x) = g(x) + 1")

# %% [markdown]
# Where a value is not the result of a call, no continuation is made. The
# constant `1`, the second operand of `+`, is translated in a `Then` too,
# whose function is simply called: it builds `v_10 = r_8 + c_9` right after
# `c_9 = 1`, in the same block. The sum is in the body's context,
# `Return(ret_2)`, and is handed on by the jump `ret_2(v_10)`. Had `h` been
# `g(x)` alone, the call itself would have been in that `Return`: a tail
# call, returning to `ret` directly, with no `k` at all (the function `f`
# in "The rules at work", below, is one).
#
# Besides the context, the translation keeps one more thing: the *exception
# continuation* of the code it is in (chapter 6's second barrel). It is the
# function's own `exn` inside a function, and the program's `uncaught` in a
# top-level definition; every call names it (`-> k / exn`), and so does every
# operation that raises a predefined exception when it fails (`/`, `%`, an
# unmatched `match`, `assert`). (One check fails without raising: a
# function that reads a definition before it has run stops the program
# ([the language reference](../language.md#the-order-of-top-level-definitions);
# "Programs", below), so its `fail` names no exception continuation.) A call is a tail call only when
# *both* its continuations are the function's own: inside the block of a
# `try`, the exception continuation is a local handler instead (the section
# on exceptions, below), and a call there is not a tail call.
#
# A `Then` context may be used once only — using it twice copies the rest of
# the term. Where an expression has two ways to finish (the branches of `if`,
# the clauses of `match`) and its context is a `Then`, the translation binds
# the context once as a continuation, the *join point*, and gives each branch
# a `Return` to it. When the context is already a `Return`, the branches
# simply jump there: that is C5's lesson, that no join point is needed in
# tail position.
#
# The two other arguments are the environment `env` (which CPS variable holds
# each L variable in scope) and the `store`, explained with `var` below.

# %%
#| export
from lcompiler import core as c, syntax as s  # noqa: F811  (the cell imports what it uses, as a module would)
from lcompiler.cps import (
    Var, Program, Lambda, let_prim, let_cont, lam, apply, apply_cont, case, halt,
    const, tuple_, inject, proj, tag, op, set_field, print_, fail, raise_)
from lcompiler.primitives import PRIMITIVES
from lcompiler.support import NESTING_LIMIT, collector_paused, recursion_limit
from lcompiler.syntax import PCon, PInt, PTuple, PUnit, PVar, PWild
from lcompiler.types import EXN


class Then:
    """A meta-continuation: fn(value variable, store) builds the rest of the term."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


class Return:
    """A continuation variable, and the mutable variables it also receives (see var, below)."""
    __slots__ = ("cont", "carried")

    def __init__(self, cont, carried=()):
        self.cont, self.carried = cont, tuple(carried)


def give(ctx, x: Var, store: dict):
    """The term that hands the value in x to the context."""
    if type(ctx) is Then:
        return ctx.fn(x, store)
    return apply_cont(ctx.cont, x, *[store[r] for r in ctx.carried])


class Mutable:
    """An uncaptured var: the key of its current value in the store."""
    __slots__ = ("name", "type")

    def __init__(self, name: str, type_):
        self.name, self.type = name, type_


class Scope:
    """The environment: a linked list of L names and what holds them."""
    __slots__ = ("name", "kind", "var", "parent")

    def __init__(self, name, kind, var, parent):
        self.name, self.kind, self.var, self.parent = name, kind, var, parent

    def find(self, name: str):
        scope = self
        while scope is not None:
            if scope.name == name:
                return scope
            scope = scope.parent
        raise KeyError(name)

# %% [markdown]
# An L variable is held in one of three ways, the `kind` of its scope entry:
#
# - `value`: an immutable variable (`let`, a parameter, a pattern variable)
#   is a CPS variable, `var`;
# - `ssa`: a `var` that no function captures; its current value is in the
#   store (below), under the key `var`, a `Mutable` record made for it;
# - `cell`: a `var` that some function captures; `var` is the CPS variable of
#   its one-field cell.

# %% [markdown]
# ## Mutable variables: continuation parameters or cells
#
# `var x := 0; while (x < 10) x := x + 1` assigns `x`. CPS variables are
# assigned once, like the registers of LLVM's code (its *static single
# assignment* form, SSA, which [chapter 10](10_llvm.ipynb) targets), so an
# assignment cannot change the CPS
# variable holding `x`; it changes *which* CPS variable holds `x` from then
# on. That is what the **store** records: a dictionary from each uncaptured
# `var` in scope to the CPS variable holding its current value. `x := e`
# translates `e` into some `v` and continues with a store where `x` is `v`.
#
# The store is threaded through the contexts (a `Then` receives it with the
# value), and where control flow merges, the values of the variables
# assigned on the way become *continuation parameters*: a join point after an
# `if` that assigns `x` is `cont join(r, x2)`, and each branch jumps to it with
# its own value of `x`; a loop is `cont loop(x1) { … loop(x2) }`. This is
# exactly SSA construction. Where paths meet, SSA merges the values that
# arrive along them with a *φ-node* (one value per incoming path); here a
# continuation's parameters play that part, and chapter 10 turns them into
# φ-nodes. Which variables
# a merge carries is decided by a pass before the translation: the names
# assigned inside each `if`, `match`, `while` and `try`.
#
# A function that captures `x` cannot see the store: it may run after `x`
# has been assigned again, and an assignment it makes to `x` must reach the
# code around it, which a store local to the function's body cannot do. So
# a captured `var` is translated differently, as a heap **cell** — a one-field
# tuple — read with `x[0]` and written with `x[0] := v`, and the function
# captures the cell. Deciding which `var`s are captured is the same
# pre-pass: a use of `x` inside a `Lambda` nested in `x`'s `var` is a
# capture. Only captured variables pay for a heap cell; loop counters and
# accumulators stay in registers. (There is one more reason for a cell, an
# assignment in the block of a `try`: the section on exceptions explains
# it, and the pre-pass records it too.)

# %%
#| export
def _children(e) -> list:
    """The core sub-expressions of e, in evaluation order."""
    t = type(e)
    if t is c.Con:
        return list(e.args or [])
    if t is c.Tuple:
        return list(e.items)
    if t is c.Lambda:
        return [e.body]
    if t is c.App:
        return [e.fn, e.arg]
    if t is c.Prim or t is c.Print:
        return list(e.args)
    if t is c.If:
        return [e.cond, e.then, e.orelse]
    if t is c.Match:
        return [e.scrutinee] + [body for _, body in e.clauses]
    if t is c.Let or t is c.LetVar:
        return [e.value, e.body]
    if t is c.Assign:
        return [e.value]
    if t is c.While:
        return [e.cond, e.body]
    if t is c.Seq:
        return [e.first, e.second]
    if t is c.Assert:
        return [e.cond]
    if t is c.Raise:
        return [e.arg]
    if t is c.Try:
        return [e.body] + [body for _, body in e.clauses]
    return []

# %% [markdown]
# `_children` lists the sub-expressions of a core node in the order L
# evaluates them; the pre-pass walks core trees with it, and so does
# `bench/convert_speed.py`, to count a program's nodes. The pre-pass, `Analysis`, walks each definition once, keeping the
# `var`s in scope with the depth of functions at which each was declared: a
# use at a greater depth is a capture. It also keeps how many `try` blocks
# surround each declaration: an assignment inside more of them than its
# `var` is a capture too. On the way back up it returns the
# names each expression assigns, and records them for every `if`, `match`,
# `while` and `try`.

# %%
#| export
class Analysis:
    """Which vars are captured by a function (or assigned in a try's block); which names each
    if/match/while/try assigns; which non-function definitions are read inside functions."""

    def __init__(self, program: c.Program):
        self.captured = set()        # ids of LetVar nodes that live in a cell
        self.assigned = {}           # id(If/Match/While/Try) -> names assigned inside, outside lambdas
        self.late_globals = set()    # names of non-function definitions read inside functions
        self.blocks = 0              # how many try blocks the walk is in
        self.functions = {d.name.name for d in program.items if type(d) is c.Def and d.is_function}
        for item in program.items:
            if type(item) is c.Def:
                self.expr(item.value, 0, {})
            elif not isinstance(item, s.Data):
                self.expr(item, 0, {})

    def expr(self, e, depth: int, mutables: dict) -> set:
        """Names assigned in e (outside functions); records captures. mutables: name -> (node, depth)."""
        t = type(e)
        if t is c.Var:
            if e.kind == "mutable":
                self.capture(e.name, depth, mutables)
            elif e.kind == "global" and depth > 0 and e.name not in self.functions:
                self.late_globals.add(e.name)
            return set()
        if t is c.Assign:
            self.capture(e.target.name, depth, mutables, assigned=True)
            names = self.expr(e.value, depth, mutables)
            names.add(e.target.name)
            return names
        if t is c.Lambda:
            self.expr(e.body, depth + 1, mutables)
            return set()
        if t is c.LetVar:
            names = self.expr(e.value, depth, mutables)
            inner = dict(mutables)
            inner[e.name] = (e, depth, self.blocks)
            return names | self.expr(e.body, depth, inner)
        if t is c.Try:
            self.blocks += 1
            names = self.expr(e.body, depth, mutables)
            self.blocks -= 1
            for _, body in e.clauses:
                names |= self.expr(body, depth, mutables)
            self.assigned[id(e)] = frozenset(names)
            return names
        names = set()
        for part in _children(e):
            names |= self.expr(part, depth, mutables)
        if t is c.If or t is c.Match or t is c.While:
            self.assigned[id(e)] = frozenset(names)
        return names

    def capture(self, name: str, depth: int, mutables: dict, assigned: bool = False) -> None:
        node, bound_at, blocks = mutables.get(name, (None, depth, 0))
        if node is not None and (bound_at < depth or assigned and blocks < self.blocks):
            self.captured.add(id(node))

# %% [markdown]
# In this function, `i` is assigned in the loop and never captured; `c` is
# read by the function `g`, hence captured; the `while` assigns `i`, the
# `if` in it assigns `i` too:

# %%
from lcompiler import types  # noqa: F811  (the cell imports what it uses, as a module would)
from lcompiler.errors import Source  # noqa: F811  (the cell imports what it uses, as a module would)


def core_nodes(e):
    """The core expression e and all those under it."""
    stack = [e]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(_children(e))


ANALYSED = ("def f(n) = { var i := 0; var c := 0; let g = { u -> c };\n"
            "  while (i < n) { if (i % 2 == 0) i := i + 1 else i := i + 3 }; g(()) }")
core_program, _ = types.check_types(Source("example.l", ANALYSED))
analysis = Analysis(core_program)
nodes = list(core_nodes(core_program.items[0].value))
print("captured:", [e.name for e in nodes if type(e) is c.LetVar and id(e) in analysis.captured])
print("assigned:", [(type(e).__name__, sorted(analysis.assigned[id(e)])) for e in nodes if id(e) in analysis.assigned])

# %% [markdown]
# ## The rules
#
# Each rule is a case of `expr`. Sub-expressions are translated left to
# right (L's order of evaluation), each in a `Then` context that translates
# the next. The table says what each form becomes; the section after it
# prints each on an example.
#
# | L (core) | CPS |
# |---|---|
# | literal `42`, `"s"`, `()`, `true` | `x = 42`, given to the context |
# | variable | its CPS variable (no code); a `var`: its current value in the store, or `cell[0]` |
# | `C(e1, …, en)`, `(e1, …, en)` | the fields, then `x = inj tag C(…)` / `x = tuple(…)` |
# | `e1 op e2`, `-e`, `!e` | the operands, then `x = a op b`, the same primitive (with `@line:col / exn` if it can fail: `/` and `%`) |
# | `{ p -> e }` (a function) | `f = fun ret exn (p) { e in Return(ret) }`, `exn` the exception continuation inside |
# | `f(a)` | `f`, `a`, then `call f(a) -> k / exn`: `k` is the context if it is a `Return`, else a new `cont k(r) { context(r) }` — the return point; `exn` is the exception continuation here |
# | `if (c) a else b`, `&&`, <code>&#124;&#124;</code> | `c`, then a join point if needed, `cont then() {…}`, `cont else() {…}`, `case c { 0 -> else; 1 -> then }` |
# | `match (e) { p1 -> b1 … }` | `e`, a join point if needed, then one test per clause, each falling back to the next clause's continuation; the last is `fail "no clause matches the value" x @line:col / exn` |
# | `let x = e; b` | `e` in a context that translates `b` with `x` bound to `e`'s variable |
# | `var x := e; b` | `e`, then `b` with `x` in the store — or `cell = tuple(v)` if captured |
# | `x := e` | `e`, then a new store (or `cell[0] := v`); the value is `()` |
# | `while (c) b` | `cont loop(vars…) { c; case … }`, the body jumping back to `loop` with the new values of the vars it assigned |
# | `e1; e2` | `e1` in a context that ignores its value and translates `e2` |
# | `print(e1, …)` | the arguments, then `u = print(…)` |
# | `assert(c)` | `c`, then `case` to `ok` or to `bad`, where `bad` is `fail "assertion failed" @line:col / exn` |
# | `raise(e)` | `e`, then `exn(x) raise @line:col`: a jump to the exception continuation in force; the context is dropped |
# | `try { b } catch { clauses }` | a join point if needed, `cont handler(e) { clauses… }`, `cont done(r) {…}`, then `b` in `Return(done)` raising to `handler` |
#
# A call in a `Return` context whose continuation receives extra values
# (a join point carrying `var`s) cannot be the call's return point, because
# a function returns one value; it gets a return point of its own, which
# then jumps to the join point with the values.

# %%
#| export
UNIT = ()


class Converter:
    def __init__(self, program: c.Program, join_points: bool = True):
        self.analysis = Analysis(program)
        self.join_points = join_points       # False: copy contexts instead (to measure the difference)
        self.constructors = {}               # name -> (tag, number of constructors of its type)
        for item in program.items:
            if isinstance(item, s.Data):
                for i, con in enumerate(item.constructors):
                    self.constructors[con.name] = (i, len(item.constructors))
        self.globals = {}                    # L name -> CPS global variable
        self.ready = {}                      # L name -> the cell that says its definition has run
        self.depth = 0                       # how many functions we are inside
        self.exn = None                      # the exception continuation here: the function's, or uncaught

    # --- small helpers
    def let(self, prim, hint: str, type_, rest):
        """x = prim, with x typed, then rest(x)."""
        def body(x):
            x.type = type_
            return rest(x)
        return let_prim(prim, body, hint)

    def unit(self, type_, rest):
        """u = (), of the L type Unit (type_, the node's type), then rest(u)."""
        return self.let(const(UNIT), "u", type_, rest)

    def exprs(self, es: list, env, store, rest):
        """Translate es left to right; rest(variables, store) builds what follows."""
        def step(i, store, done):
            if i == len(es):
                return rest(list(done), store)
            def got(x, store2):                  # may run more than once (join_points=False)
                return step(i + 1, store2, done + (x,))
            return self.expr(es[i], env, store, Then(got))
        return step(0, store, ())

    def join(self, e, ctx, store, build, hint: str = "join"):
        """build(ctx2) for an expression with several ends: bind a join point if ctx is a Then."""
        if type(ctx) is Return or not self.join_points:
            return build(ctx)
        names = self.analysis.assigned.get(id(e), ())
        carried = [r for r in store if r.name in names]
        def handler(j, r, *values):
            r.type = e.type
            inner = dict(store)
            for rec, v in zip(carried, values):
                v.type = rec.type
                inner[rec] = v
            return ctx.fn(r, inner)
        return let_cont(handler, lambda j: build(Return(j, carried)),
                        ["r"] + [r.name for r in carried], hint)

# %% [markdown]
# `expr` itself, one case per core form:

# %%
#| export
class Converter(Converter):
    def expr(self, e, env, store, ctx, hint: str = None):
        t = type(e)
        if t is c.Lit:
            return self.let(const(e.value), hint or "c", e.type, lambda x: give(ctx, x, store))
        if t is c.Var:
            return self.variable(e, env, store, ctx)
        if t is c.Con:
            tag_, _ = self.constructors[e.name]
            return self.exprs(e.args or [], env, store, lambda xs, st:
                self.let(inject(tag_, e.name, *xs), hint or e.name.lower(), e.type,
                         lambda x: give(ctx, x, st)))
        if t is c.Tuple:
            return self.exprs(e.items, env, store, lambda xs, st:
                self.let(tuple_(*xs), hint or "t", e.type, lambda x: give(ctx, x, st)))
        if t is c.Prim:
            loc = (e.op_span or e.span) if PRIMITIVES[e.op].fails else None
            return self.exprs(e.args, env, store, lambda xs, st:
                self.let(op(e.op, *xs, loc=loc, exn=self.exn if loc else None), hint or "v", e.type,
                         lambda x: give(ctx, x, st)))
        if t is c.Lambda:
            return self.let(self.function(e, env), hint or "f", e.type, lambda f: give(ctx, f, store))
        if t is c.App:
            return self.exprs([e.fn, e.arg], env, store, lambda xs, st: self.call(e, xs, st, ctx, hint))
        if t is c.If:
            return self.expr(e.cond, env, store, Then(lambda cond, st:
                self.join(e, ctx, st, lambda ctx2: self.branches(e, cond, env, st, ctx2))))
        if t is c.Match:
            return self.expr(e.scrutinee, env, store, Then(lambda x, st:
                self.join(e, ctx, st, lambda ctx2: self.clauses(e, x, 0, env, st, ctx2))))
        if t is c.Let:
            return self.expr(e.value, env, store, Then(lambda x, st:
                self.expr(e.body, Scope(e.name, "value", x, env), st, ctx, hint)), e.name)
        if t is c.LetVar:
            return self.expr(e.value, env, store, Then(lambda x, st: self.declare(e, x, env, st, ctx)),
                             e.name)
        if t is c.Assign:
            return self.expr(e.value, env, store, Then(lambda x, st: self.assign(e, x, env, st, ctx)),
                             e.target.name)
        if t is c.While:
            return self.loop(e, env, store, ctx)
        if t is c.Seq:
            return self.expr(e.first, env, store, Then(lambda _, st:
                self.expr(e.second, env, st, ctx, hint)))
        if t is c.Print:
            return self.exprs(e.args, env, store, lambda xs, st:
                self.let(print_(*xs), "u", e.type, lambda u: give(ctx, u, st)))
        if t is c.Assert:
            return self.expr(e.cond, env, store, Then(lambda cond, st:
                self.guard(cond, "assertion failed", e.span,
                           lambda: self.unit(e.type, lambda u: give(ctx, u, st)), self.exn)))
        if t is c.Raise:
            h = self.exn
            return self.expr(e.arg, env, store, Then(lambda x, st: raise_(h, x, loc=e.span)))
        if t is c.Try:
            return self.join(e, ctx, store, lambda ctx2: self.handle(e, env, store, ctx2))
        raise TypeError(f"not a core expression: {e!r}")

# %% [markdown]
# `guard` writes the shape shared by `assert` and the check of a definition
# read too early: `cont ok() {…} cont bad() { u = fail …; ok() } case c {0 ->
# bad; 1 -> ok}`. The jump after `fail` is never taken (`fail` stops the
# program, or raises its exception to `exn`); it is there because every
# block must end with a jump, and it keeps the continuation used once by
# each path.

# %%
#| export
class Converter(Converter):
    def guard(self, cond: Var, message: str, span, rest, exn=None):
        """If cond is true continue with rest(), else fail with message at span (raising to exn)."""
        return let_cont(lambda ok: rest(), lambda ok:
            let_cont(lambda bad: let_prim(fail(message, loc=span, exn=exn), lambda u: apply_cont(ok), "u"),
                     lambda bad: case(cond, {0: bad, 1: ok}), 0, "bad"), 0, "ok")

# %% [markdown]
# Variables, calls and functions:

# %%
#| export
class Converter(Converter):
    def variable(self, e: c.Var, env, store, ctx):
        if e.kind == "builtin":
            return self.let(const(c.BUILTIN_VALUES[e.name]), e.name, e.type, lambda x: give(ctx, x, store))
        if e.kind == "global":
            g = self.globals[e.name]
            if self.depth > 0 and e.name in self.ready:          # may run before the definition
                def read(st=store):
                    return give(ctx, g, st)
                return self.let(proj(0, self.ready[e.name]), "ready", None, lambda r:
                    self.guard(r, f"{e.name} is read before its definition has run", e.span, read))
            return give(ctx, g, store)
        scope = env.find(e.name)
        if scope.kind == "value":
            return give(ctx, scope.var, store)
        if scope.kind == "ssa":
            return give(ctx, store[scope.var], store)
        return self.let(proj(0, scope.var), e.name, e.type, lambda x: give(ctx, x, store))

    def call(self, e: c.App, xs: list, store, ctx, hint):
        f, a = xs
        h = self.exn
        if type(ctx) is Return and not ctx.carried:
            return apply(f, ctx.cont, h, a, loc=e.span)
        def after(k, r):
            r.type = e.type
            return give(ctx, r, store)
        return let_cont(after, lambda k: apply(f, k, h, a, loc=e.span), [hint or "r"], "k")

    def function(self, e: c.Lambda, env) -> Lambda:
        self.depth += 1
        outer = self.exn
        def body(ret, exn, x):
            x.type = e.type.args[0] if e.type is not None else None
            self.exn = exn                          # what the body raises goes to the caller's
            return self.expr(e.body, Scope(e.param, "value", x, env), {}, Return(ret))
        f = lam(body, [e.param], "closure")
        self.exn = outer
        self.depth -= 1
        return f

# %% [markdown]
# Conditionals and loops. `branches` is the body of an `if` once its
# condition is in a variable; `loop` builds the recursive continuation of a
# `while`, with one parameter per `var` its condition or body assigns.

# %%
#| export
class Converter(Converter):
    def branches(self, e: c.If, cond: Var, env, store, ctx):
        return let_cont(lambda kt: self.expr(e.then, env, store, ctx),
            lambda kt: let_cont(lambda ke: self.expr(e.orelse, env, store, ctx),
                lambda ke: case(cond, {0: ke, 1: kt}), 0, "else"), 0, "then")

    def loop(self, e: c.While, env, store, ctx):
        names = self.analysis.assigned.get(id(e), ())
        carried = [r for r in store if r.name in names]
        def handler(loop_k, *values):
            inner = dict(store)
            for rec, v in zip(carried, values):
                v.type = rec.type
                inner[rec] = v
            def test(cond, st):
                def body(kb):
                    return self.expr(e.body, env, st, Then(lambda _, st2:
                        apply_cont(loop_k, *[st2[r] for r in carried])))
                def leave(kx):
                    return self.unit(e.type, lambda u: give(ctx, u, st))
                return let_cont(leave, lambda kx: let_cont(body, lambda kb:
                    case(cond, {0: kx, 1: kb}), 0, "body"), 0, "exit")
            return self.expr(e.cond, env, inner, Then(test))
        return let_cont(handler, lambda k: apply_cont(k, *[store[r] for r in carried]),
                        [r.name for r in carried], "loop")

    def declare(self, e: c.LetVar, x: Var, env, store, ctx):
        if id(e) in self.analysis.captured:
            return self.let(tuple_(x), e.name + "_cell", None, lambda cell:
                self.expr(e.body, Scope(e.name, "cell", cell, env), store, ctx))
        rec = Mutable(e.name, e.value.type)
        inner = dict(store)
        inner[rec] = x
        return self.expr(e.body, Scope(e.name, "ssa", rec, env), inner, ctx)

    def assign(self, e: c.Assign, x: Var, env, store, ctx):
        scope = env.find(e.target.name)
        if scope.kind == "cell":
            return self.let(set_field(0, scope.var, x), "u", e.type, lambda u: give(ctx, u, store))
        inner = dict(store)
        inner[scope.var] = x
        return self.unit(e.type, lambda u: give(ctx, u, inner))

# %% [markdown]
# ## Pattern matching
#
# A `match` tries its clauses top to bottom. We translate it as a
# *backtracking automaton*: each clause becomes a sequence of tests on the
# scrutinee, and every failing test jumps to one continuation, `next`, that
# tries the following clause; the last clause's `next` fails with "no clause
# matches the value". A test is a `case`: on the tag of a constructor (read
# with `tag x`), or directly on an integer for an integer pattern; tuple
# and constructor fields are read with projections, only for sub-patterns
# that look at them.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: an automaton, not a decision tree</p>
#
# The other classic scheme is a *decision tree* (Maranget's "Compiling
# pattern matching to good decision trees"): it examines each part of the
# value at most once, choosing at every node which column to test, and
# copies the clauses that remain possible into every branch. It never tests anything
# twice, but its size can grow exponentially with the number of columns in
# the worst case. The automaton is the opposite trade: its size is linear in
# the size of the patterns — each clause is translated once — while a value
# may be tested more than once (clauses `Cons(0, _)` then `Cons(x, r)` both
# read the tag). For a compiler whose later chapters count code size, and for
# L's typical matches (a few clauses, one column), linear size wins; the
# repeated tests are cheap comparisons on values already in registers.
# The original l-lang compiler took a road between the two: it matches
# column by column, as Philip Wadler's chapter "Efficient compilation of
# pattern matching" in Simon Peyton Jones's *The Implementation of
# Functional Programming Languages* (1987) describes, sharing one test
# among neighbouring clauses with the same constructor; where a column
# mixes constructors with irrefutable patterns, it splits the clauses into
# blocks tried one after the other (Wadler's "mixture rule").
# Exercise 1 asks for the decision tree.
#
# </div>
#
# A clause whose pattern cannot fail (a variable, `_`, `()`, a tuple of such
# patterns, a constructor of a one-constructor type) makes the clauses after
# it unreachable; they are not translated at all.
#
# The automaton also remembers one thing along its chain of `next`s: when a
# clause `C(p, q)` whose field patterns cannot fail is passed over, the
# value's tag is not `C`. Once every constructor but one has been passed
# over that way, the last needs no test: `Rect(w, h)` after `Circle(r)`
# reads its fields directly. A match that names every constructor of its
# type like this — the usual match — then has no failing path at all. That
# is worth more than one comparison: a failing path prints the value, so it
# pulls the printer of the value's type, and the printers of the types
# inside it, into the compiled program ([chapter 10](10_llvm.ipynb)).

# %%
#| export
class Converter(Converter):
    def clauses(self, e: c.Match, x: Var, i: int, env, store, ctx, excluded=frozenset()):
        """Clauses i, i+1, … of e; excluded: tags x cannot have, as the clauses before failed."""
        if i == len(e.clauses):
            if type(e) is c.Try:                     # no clause matches: on to the enclosing handler
                return apply_cont(self.exn, x)
            return self.let(fail("no clause matches the value", x, loc=e.span, exn=self.exn), "u", e.type,
                            lambda u: give(ctx, u, store))
        pattern, body = e.clauses[i]
        success = lambda env2: self.expr(body, env2, store, ctx)
        test = lambda nxt: self.pattern(pattern, x, nxt, env, success)
        if type(pattern) is PCon:
            tag_, count = self.constructors[pattern.name]
            args = pattern.args or []
            if len(excluded | {tag_}) == count:      # the one constructor left: no tag to test
                test = lambda nxt: self.fields(args, x, nxt, env, success)
                if all(self.irrefutable(q) for q in args):
                    return test(None)
            elif all(self.irrefutable(q) for q in args):
                excluded = excluded | {tag_}          # past this clause, x's tag is not tag_
        elif self.irrefutable(pattern):
            return test(None)
        return let_cont(lambda nxt: self.clauses(e, x, i + 1, env, store, ctx, excluded), test, 0, "next")

    def irrefutable(self, p) -> bool:
        t = type(p)
        if t is PVar or t is PWild or t is PUnit:
            return True
        if t is PTuple:
            return all(self.irrefutable(q) for q in p.items)
        if t is PCon:
            return self.constructors[p.name][1] == 1 and all(self.irrefutable(q) for q in p.args or [])
        return False

# %% [markdown]
# One pattern is one chain of tests: `pattern` tests a value against a
# pattern, jumping to the clause's `next` on the first mismatch and
# building the clause's body, with the pattern's variables in scope, when
# all tests pass; `fields` reads the fields that a sub-pattern looks at and
# tests each in turn.

# %%
#| export
class Converter(Converter):
    def pattern(self, p, x: Var, fail_k, env, success):
        """Test x against p; jump to fail_k if it does not match, else success(env with p's variables)."""
        t = type(p)
        if t is PVar:
            return success(Scope(p.name, "value", x, env))
        if t is PWild or t is PUnit:
            return success(env)
        if t is PInt:
            return let_cont(lambda ok: success(env), lambda ok: case(x, {p.value: ok}, fail_k), 0, "ok")
        if t is PTuple:
            return self.fields(p.items, x, fail_k, env, success)
        if t is PCon:
            tag_, count = self.constructors[p.name]
            fields = lambda: self.fields(p.args or [], x, fail_k, env, success)
            if count == 1:
                return fields()
            return self.let(tag(x), "tag", None, lambda t_:
                let_cont(lambda ok: fields(), lambda ok: case(t_, {tag_: ok}, fail_k), 0, p.name))
        raise TypeError(f"not a pattern: {p!r}")

    def fields(self, patterns: list, x: Var, fail_k, env, success, i: int = 0):
        """Match field i, i+1, … of x against patterns."""
        if i == len(patterns):
            return success(env)
        p = patterns[i]
        rest = lambda env2: self.fields(patterns, x, fail_k, env2, success, i + 1)
        if type(p) is PWild or type(p) is PUnit:
            return rest(env)
        hint = p.name if type(p) is PVar else "y"
        return self.let(proj(i, x), hint, p.type, lambda y: self.pattern(p, y, fail_k, env, rest))

# %% [markdown]
# ## Exceptions: raise and try
#
# Chapter 6 gave every function a second continuation, the one it raises
# to, and the conversion has passed it along from the start (`self.exn`):
# the function's own `exn` in a function, the program's `uncaught` at top
# level. Exceptions themselves now take two rules, and one change in how
# `var`s are kept.
#
# **`raise(e)`** converts `e` and jumps to the exception continuation in
# force: `exn_3(x) raise @2:35`. The jump carries its *raise site*, the
# location of the `raise(…)`, which chapter 6's interpreter (and later the
# runtime) records in one place when the jump is taken: an exception that
# nothing catches is reported there. The context is not used at all —
# nothing follows a raise — so a `raise` in a branch makes that branch end
# with a jump, like a `return` would.
#
# **`try { b } catch { clauses }`** binds two continuations and converts
# the block between them:
#
# - `cont handler(e) { … }`, the local handler: its body is the clauses
#   matched against `e`, exactly as the clauses of a `match` (the automaton
#   of the previous section), each clause's body converted in the `try`'s
#   own context and raising to the *enclosing* exception continuation. The
#   end of the automaton, where `match` fails with "no clause matches", is
#   here a plain jump `exn(e)` to the enclosing exception continuation —
#   without a raise site, since the exception is not raised anew: its
#   original site stays the one the runtime recorded, and an exception
#   that goes through `try`s whose clauses do not match is reported where
#   it was first raised ([the language
#   reference](../language.md#uncaught-exceptions)).
# - `cont done(r) { … }`, the block's return point: it hands the block's
#   value to the `try`'s context.
# - the block, converted in `Return(done)` with `handler` as its exception
#   continuation: every call in it is `call f(x) -> … / handler`, and every
#   operation that fails with a predefined exception (`/`, `%`, a `match`,
#   an `assert`) raises it to `handler` too.
#
# When the `try` is an operand (its context a `Then`), a join point for its
# value is bound first, as for an `if`; both `done` and the clauses go to
# it.
#
# **Tail calls.** A call is a tail call only when both its continuations
# are the function's own (chapter 6). A call in the block names `handler`,
# so it is never one, whatever its position in the block: the handler must
# still be there when the callee raises, so the caller's frame must stay.
# The clauses run after the handler has done its work: they are converted
# in the `try`'s own context with the enclosing exception continuation, so
# a call in a clause of a `try` in tail position is `call f(x) -> ret /
# exn` — a tail call. A loop that retries in its handler runs in constant
# stack space.
#
# **`var`s seen by the handler.** L promises that assignments made in the
# block before the raise are visible in the clauses. An uncaptured `var`
# lives in continuation parameters: its current value is whatever CPS
# variable the store names at each point, and a jump passes the values to
# the continuation it goes to. A raise *in the block itself* could pass
# them to the handler the same way. But a raise from a function called in
# the block reaches the handler through the callee's exception
# continuation, which takes one value, the exception — and the callee
# cannot know, let alone pass, its caller's continuation parameters. A
# failing `/` deep in a loop of the block is no better: the `loop`
# continuation's parameters hold the counter, and the handler was bound
# outside the loop. So a `var` that is assigned in a block and declared
# outside it lives in a heap cell, exactly like a `var` a function
# captures: the block writes the cell, the handler reads it, and whatever
# raised, the handler sees the last value written. The pre-pass makes that
# decision (`Analysis` counts the `try` blocks around each `var` and each
# assignment); a `var` declared inside the block, or only read there, or
# assigned only in a clause, stays in parameters.
#
# `handle` converts a `try` once its context is a `Return` (`expr` has
# bound the join point if one was needed). The handler is built first, with
# `self.exn` still the enclosing exception continuation; `self.exn` is the
# handler only while the block is converted.

# %%
#| export
class Converter(Converter):
    def handle(self, e: c.Try, env, store, ctx):
        """try { body } catch { clauses } in ctx, a Return: a handler, then the block returning to done."""
        outer = self.exn
        def handler(h, x):
            x.type = EXN
            return self.clauses(e, x, 0, env, store, ctx)       # raising to outer, in the try's context
        def block(h):
            def done(k, r):
                r.type = e.type
                return give(ctx, r, store)
            def body(k):
                self.exn = h
                term = self.expr(e.body, env, store, Return(k))
                self.exn = outer
                return term
            return let_cont(done, body, ["r"], "done")
        return let_cont(handler, block, ["e"], "handler")


# %% [markdown]
# ## Programs
#
# Following [`Cpsast`](../bibliography.md#cpsast), each top-level item becomes a definition:
#
# - a function definition (`def f(x) = …`) becomes a **static** definition
#   holding a `fun`: it exists before anything runs, so the functions of a
#   program may call each other in any order — mutual recursion costs
#   nothing, since every global is in scope everywhere;
# - any other definition (`def limit = 10 * 10`) becomes a **dynamic**
#   definition, a term run in program order, whose `halt` gives the value;
# - a top-level statement becomes an `unused` dynamic definition, run for its
#   effect.
#
# The named definitions are all `private` (the statements are `unused`):
# an L program is one compilation unit, and nothing is exported. A function may be called before a non-function definition it
# reads has run (L's contract makes that a runtime error); for each
# non-function definition read inside a function, the translation adds a
# static cell
# `ready = tuple(false)`, set to `true` at the end of the definition's term,
# and the read checks it with a `guard`.

# %%
#| export
class Converter(Converter):
    def program(self, program: c.Program) -> Program:
        out = Program()
        self.exn = out.uncaught                 # the top level raises to the program's uncaught
        defs = [item for item in program.items if type(item) is c.Def]
        for d in defs:
            self.globals[d.name.name] = g = out.declare(d.name.name)
            g.type = d.value.type
        late = [d.name.name for d in defs if d.name.name in self.analysis.late_globals]
        if late:
            false = out.define(const(False), "private", name="false")
            for name in late:
                self.ready[name] = out.define(tuple_(false), "private", name="ready_" + name)
        for item in program.items:
            if type(item) is c.Def:
                name = item.name.name
                if item.is_function:
                    out.define(self.function(item.value, None), "private", self.globals[name])
                else:
                    out.define(self.expr(item.value, None, {}, Then(lambda x, st, name=name:
                        self.finish(name, x)), name), "private", self.globals[name])
            elif not isinstance(item, s.Data):
                out.define(self.expr(item, None, {}, Then(lambda x, st: halt(x))), "unused")
        return out

    def finish(self, name: str, x: Var):
        """The end of a dynamic definition: mark it ready if a function reads it, give its value."""
        if name not in self.ready:
            return halt(x)
        return self.let(const(True), "true", None, lambda t:
            let_prim(set_field(0, self.ready[name], t), lambda u: halt(x), "u"))


NESTING = 1_000_000      # Python frames the higher-order translation may nest


def convert(program: c.Program, join_points: bool = True) -> Program:
    """The CPS program of a typed core program (chapter 5 has recorded its types)."""
    with recursion_limit(max(NESTING, 50 * NESTING_LIMIT)), collector_paused():
        return Converter(program, join_points).program(program)

# %% [markdown]
# ## The rules at work
#
# `to_cps` takes L text through the front end
# ([chapters 4a](04a_syntax.ipynb), [4b](04b_meaning.ipynb) and
# [5](05_types.ipynb)) and this chapter; `rule` prints the CPS, after
# chapter 6's `check`; `run_both` runs it on chapter 6's interpreter next to
# the reference interpreter of chapter 4b.

# %%
import io
from lcompiler import cps, interp, types  # noqa: F811  (the cell imports what it uses, as a module would)
from lcompiler.errors import Source, RunError


def to_cps(text: str, **options) -> cps.Program:
    program, _ = types.check_types(Source("example.l", text))
    return convert(program, **options)


def run_both(text: str) -> str:
    """The output of the reference interpreter, checked equal to the CPS interpreter's."""
    outputs = []
    for runner in (lambda src, out: interp.Interpreter(out).run(types.check_types(src)[0]),
                   lambda src, out: cps.run(convert(types.check_types(src)[0]), out)):
        out = io.StringIO()
        try:
            runner(Source("example.l", text), out)
        except RunError as e:
            out.write(e.render() + "\n")
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1], outputs
    return outputs[0]


def rule(text: str) -> None:
    p = to_cps(text)
    cps.check(p)
    print(cps.show(p), end="")

# %% [markdown]
# **Arithmetic and calls.** Operands are evaluated left to right, each
# constant is bound once, and no continuation appears for the intermediate
# values. The call in tail position jumps straight to `ret`; the one that is
# not gets a return point `k`:

# %%
rule("def f(g, x) = g(x * 2 + 1)\ndef h(g, x) = g(x) + 1")

# %% [markdown]
# **Conditionals.** In tail position the two branches return by themselves;
# as an operand (`+ 1`), the `if` needs a join point `join` with one
# parameter, the `if`'s value:

# %%
CONDITIONALS = "def f(x) = if (x > 0) 1 else 2\ndef g(x) = (if (x > 0) 1 else 2) + 1"
rule(CONDITIONALS)

# %% [markdown]
# The same two functions, drawn. On the left, the core tree of each L
# function, each node marked with the context it is translated in —
# recorded while converting, by a converter that notes the context of each
# call of `expr`. A node in a `Return(k)` context is green and says where
# its value goes, `⇒ k`; a node in a `Then` context is grey; a yellow node
# binds continuations (an `if`'s `then` and `else`, a call's return point).
# On the right, chapter 6's diagram of the CPS. In `f` the `if` and both
# its branches are in `Return(ret_2)`: the branches return by themselves.
# In `g` the `if` is an operand of `+`, in a `Then`; so its branches are
# given `Return(join_17)`, the join point, whose handler holds the rest of
# `g` — the `+ 1` and the return.

# %%
from IPython.display import SVG, display  # noqa: F811  (the cell imports what it uses, as a module would)
from lcompiler.drawing import Box, Picture  # noqa: F811  (the cell imports what it uses, as a module would)


class Recording(Converter):
    """The converter of this chapter, noting the context each core expression is translated in."""

    def __init__(self, program):
        super().__init__(program)
        self.contexts = {}

    def expr(self, e, env, store, ctx, hint=None):
        self.contexts[id(e)] = ctx
        return super().expr(e, env, store, ctx, hint)

# %% [markdown]
# A tree of boxes ([chapter 1](01_addlang.ipynb)'s `lcompiler.drawing`) is made from the core
# tree: each node's label, its context, and its colour.

# %%
def label(e) -> str:
    """A core node in a few characters."""
    t = type(e)
    if t is c.Lit or t is c.Var:
        return s.pretty_expr(c.to_syntax(e))
    if t is c.Prim:
        return PRIMITIVES[e.op].symbol or e.op
    if t is c.If:
        return e.form
    words = {c.App: "call", c.Match: "match", c.While: "while", c.Seq: ";", c.Tuple: "( , )",
             c.Print: "print", c.Assert: "assert"}
    if t in words:
        return words[t]
    if t is c.Con:
        return e.name
    if t is c.Lambda:
        return "fun " + e.param
    if t is c.Assign:
        return e.target.name + " :="
    return ("let " if t is c.Let else "var ") + e.name


def context_tree(e, contexts: dict, name) -> Box:
    """The core tree under e, each node marked with the context it is translated in."""
    ctx = contexts[id(e)]
    returns = type(ctx) is Return
    binds = type(e) in (c.If, c.Match, c.While) or (type(e) is c.App and not (returns and not ctx.carried))
    style = "yellow" if binds else "green" if returns else "plain"
    text = label(e) + (f" ⇒ {name(ctx.cont)}" if returns else "")
    return Box(text, [context_tree(x, contexts, name) for x in _children(e)], style)

# %% [markdown]
# The continuations are named as the printer names them, so that the two
# halves of the picture agree; `beside` ([chapter 6](06_cps.ipynb)) puts the halves side
# by side.

# %%
def converted(text: str, alt: str) -> None:
    """Show each function of text as a core tree with its contexts, beside the CPS diagram."""
    core_program, _ = types.check_types(Source("example.l", text))
    recording = Recording(core_program)
    program = recording.program(core_program)
    printer = cps.Printer()                    # names as show(program) and diagram(program) give them
    for d in program.definitions:
        printer.definition(d)
    panels = []
    for item in core_program.items:
        fun = item.value
        body = context_tree(fun.body, recording.contexts, printer.name)
        panels.append(("", [Box(f"def {item.name.name}({fun.param})", [body], "blue")]))
    trees = Picture(panels, alt="").svg()
    display(SVG(cps.beside([("L, and the contexts", trees), ("CPS", cps.diagram(program))], alt)),
            metadata={"alt": alt})


converted(CONDITIONALS, "Two L functions beside their CPS. Left, the core tree of f: under def f(x), "
          "the if, yellow, marked as returning to ret_2; its condition x > 0 in grey (a Then context); its "
          "branches 1 and 2 in green, each marked as returning to ret_2. The core tree of g: under "
          "def g(x), the +, green, returning to ret_12; below it the if, yellow, in a Then context, whose "
          "branches 1 and 2 are green and return to join_17; and the constant 1, grey. Right, the CPS "
          "diagram: f_1's box holds the continuations then_7 and else_9, both returning through ret_2; "
          "g_11's box holds join_17, then_21 and else_23, and then_21 and else_23 jump to join_17.")

# %% [markdown]
# `&&` and `||` are `if`s (chapter 4b): their right operand is in tail
# position when the whole is.

# %%
rule("def f(a, b) = a > 0 && b > 0")

# %% [markdown]
# **Pattern matching.** One `case` per constructor test, a `next` per clause
# that can fail, projections for the fields that are used, and, since no
# clause matches a list of one element, a located failure at the end (the
# match is at line 2, column 17). The match of `zero` ends with a clause
# that cannot fail, so it has no failing path:

# %%
rule("data List<a> { Cons(a, List<a>); Nil }\ndef second(l) = match (l) { Cons(_, Cons(x, _)) -> x; Nil -> 0 }\n"
     "def zero(n) = n.{ 0 -> true; _ -> false }")

# %% [markdown]
# **Mutable variables.** `i` and `s` are assigned in the loop, so the loop
# continuation takes them as parameters; the body jumps back with their new
# values, and the exit sees the parameters. No heap:

# %%
rule("def sum_to(n) = { var i := 0; var s := 0; while (i < n) { i := i + 1; s := s + i }; s }")

# %% [markdown]
# A `var` captured by a function is a cell (`tuple(…)` of one field), made
# where the `var` is declared; the function that captured it reads it with
# `[0]` and writes it with `[0] :=` (code outside the function would do the
# same):

# %%
rule("def counter() = { var n := 0; let next = { u -> n := n + 1; n }; next(()); next(()) }")

# %% [markdown]
# **Definitions.** A function definition is static, any other definition a
# dynamic term, a statement an `unused` term. `limit` is read inside a
# function, so it gets its `ready` flag and the read its `guard`:

# %%
rule("def limit = 10 * 10\ndef below(x) = x < limit\nprint(below(5))")

# %% [markdown]
# **Exceptions.** OCamlPro's [account](../bibliography.md#flambda2-snippets) shows Flambda 2's CPS on a small OCaml function,
# `let f cond = let v = if cond then raise Failure else 0 in (v, v)`. In L:

# %%
FLAMBDA_EXAMPLE = "exception Failure\ndef f(cond) = { let v = if (cond) raise(Failure) else 0; (v, v) }\n"
rule(FLAMBDA_EXAMPLE)

# %% [markdown]
# This is the account's "step 1": the `if` is an operand of the `let`, so
# it gets a join point (the account's `k_after_if`), whose handler builds
# the pair and returns it; the `then` branch jumps to `exn_3`, the
# function's exception continuation (the account's `k_raise_exception`),
# recording the raise site `@2:35`; the `else` branch jumps to the join
# point with `0`. The raise does not use the context at all, so the join
# point is jumped to once, from `else`. [Chapter 9](09_shrink.ipynb)'s
# optimiser inlines a continuation used once — the account's "step 2,
# after graph compaction". (A private function that nothing calls is dead,
# and the optimiser would remove it; we make `f` public for the listing
# below.)

# %%
from lcompiler.shrink import optimise

flambda_program = to_cps(FLAMBDA_EXAMPLE)
flambda_program.definitions[0].visibility = "public"
optimise(flambda_program)
cps.check(flambda_program)
print(cps.show(flambda_program), end="")

# %% [markdown]
# As in the account, the result reads as `if cond then raise Failure else (0,
# 0)`: the pair is built on the one path that returns.
#
# A `try`: the handler `handler` matches the exception against the clauses
# (`Stop` is tag 3 of `Exn`, after the three predefined exceptions) and
# passes anything else on to `exn`, the function's own, with a plain jump;
# the block's call `g(x)` returns to `k` and raises to `handler` — not a
# tail call; the clause's call `g(1)` returns to `ret` and raises to
# `exn` — a tail call, because the `try` is in tail position. The `done`
# continuation, the block's return point, only returns here; the optimiser
# will remove it.

# %%
TRY = ("exception Stop\ndef g(x) = if (x > 3) raise(Stop) else x\n"
       "def h(x) = try { g(x) + 1 } catch { Stop -> g(1) }\nprint(h(2), h(5))")
rule(TRY)
print(run_both(TRY), end="")

# %% [markdown]
# A `var` assigned in the block and declared outside it is a cell. Here the
# loop raises out of the `while` and the clause reads `i`: the value the
# block wrote last. `i` is assigned in the loop, but the loop continuation
# does not carry it: the cell does (`i_cell`, read and written with `[0]`).

# %%
WHILE = ("exception Stop\ndef above(n) = {\n  var i := 0\n"
         "  try { while (true) { i := i + 1; if (i * i > n) raise(Stop) }; 0 } catch { Stop -> i }\n}\n"
         "print(above(10), above(99))")
rule(WHILE)
print(run_both(WHILE), end="")

# %% [markdown]
# ## The sample program of the L blog
#
# The sample program of [the blog of the original L
# compiler](../bibliography.md#the-l-blog), whose assertion must hold, is in
# `examples/seeds.l`: one `assert`, whose functions are all `let`-bound
# inside it. Its CPS is one `unused` definition, with the functions local
# to it:

# %%
SEEDS = open("../examples/seeds.l").read()
p = to_cps(SEEDS)
cps.check(p)
print(cps.show(p), end="")

# %%
print("output:", repr(run_both(SEEDS)), "— the assertion held in both interpreters")

# %% [markdown]
# ## How much the join points save
#
# Chapter 3 measured C3, which copies the context into both branches of every
# conditional, against C5, which binds a join point: on a chain of n
# conditionals, C3's output doubled with each one. The same experiment on real
# L: a function of n `let`s, each bound to an `if` (not in tail position), so
# that the rest of the function is the context of each. `convert(…,
# join_points=False)` copies contexts, as C3 did.

# %%
def chain(n: int) -> str:
    lets = "".join(f"  let a{i} = if (x > {i}) a{i - 1} + 1 else {i}\n" for i in range(1, n + 1))
    return f"def f(x) = {{\n  let a0 = x\n{lets}  a{n}\n}}\nprint(f(3))\n"

print(chain(2))
sizes = []
for n in range(1, 13):
    with_joins, copying = cps.size(to_cps(chain(n))), cps.size(to_cps(chain(n), join_points=False))
    sizes.append((n, with_joins, copying))
    run_both(chain(n))                       # both interpreters agree on every version
for n, a, b in sizes:
    print(f"n = {n:2}: {a:6} nodes with join points, {b:7} copying the context")

# %%
import matplotlib.pyplot as plt

ns = [n for n, _, _ in sizes]
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.plot(ns, [a for _, a, _ in sizes], "o-", label="join points (C5's discipline)")
ax.plot(ns, [b for _, _, b in sizes], "s-", label="copying contexts (C3)")
ax.set_yscale("log")
ax.set_xlabel("conditionals in a row")
ax.set_ylabel("CPS nodes")
ax.legend()
fig.tight_layout()
display(fig, metadata={"alt": "CPS nodes against the number of conditionals in a row, on a logarithmic "
                              "scale; with join points: " + ", ".join(str(a) for _, a, _ in sizes)
                              + "; copying the context: " + ", ".join(str(b) for _, _, b in sizes) + "."})
plt.close(fig)

# %% [markdown]
# With join points, each conditional adds the same number of nodes; copying,
# each doubles the total. Both programs print the same.
#
# ## Showing the CPS from the command line
#
# The conversion is the pipeline's stage `cps` (the pipeline is
# [chapter 4](04_pipeline.ipynb)'s list of stages; `lc show STAGE` prints
# what a stage hands to the next), with chapter 6's checker and
# interpreter as its own. In the whole compiler it receives the
# core program *after* [chapter 5b](05b_mono.ipynb)'s monomorphisation,
# which makes one copy of each polymorphic function per type it is used at:
# that is the program the later stages compile, so that is what
# `lc show cps` prints — before the optimiser of
# [chapter 9](09_shrink.ipynb), whose stage `opt` comes next.
#
# Every stage runs exceptions: up to the shrinker on chapter 6's
# interpreter, and [chapter 10](10_llvm.ipynb)'s back end lowers the
# second continuation to machine code (a flag tested after a call that can
# raise, by default).

# %%
#| export
from lcompiler import cps, pipeline


@pipeline.stage("cps", show=lambda program, unit: cps.show(program).rstrip("\n"),
                check=lambda program, unit: cps.check(program),
                interpret=lambda program, unit, out: cps.run(program, out))
def cps_stage(core_program: c.Program, unit: pipeline.Unit) -> cps.Program:
    return convert(core_program)


# %%
from lcompiler.cli import lc

# %%
import contextlib
import tempfile
from pathlib import Path

with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("twice.l").write_text("def twice(f, x) = f(f(x))\nprint(twice({ y -> y * 3 }, 7))\n")
    print("exit status", lc("show", "cps", "twice.l"))

# %% [markdown]
# ## The promises, tested
#
# `tests/test_convert.py` checks this chapter and the next:
#
# - **Differential**: for every program of the corpus (chapter 4b's 50
#   programs that run, 16 that fail at run time: counted below) and the 8
#   examples, and for random well-typed programs generated by Hypothesis,
#   the reference interpreter's output and runtime error equal the CPS
#   interpreter's, after this chapter and after
#   [chapter 8](08_closure.ipynb); `check` holds after each.
# - **Printing**: the converted program prints, parses back and prints the
#   same, and the parsed program runs the same.
# - **Shape**: a tail call is an `Apply` to the function's own return
#   continuation; an `if` in tail position binds no join point and one as an
#   operand binds exactly one; an uncaptured `var` allocates no cell and a
#   captured one does; a parameter carries its L type.
# - **Exceptions**: the calls in the blocks of `try`s, counted, none a tail
#   call; a call in a clause of a `try` in tail position is one, and a loop
#   that retries in its handler runs a million times on chapter 6's
#   interpreter with a stack of two frames (and overflows a stack of 100
#   when the retry is in the block of an outer `try`); a loop that raises
#   out of a `while` shows the clauses the block's last assignments, with
#   cells for exactly the `var`s the rule names; an exception through two
#   `try`s that do not match keeps its raise site, after this chapter and
#   after the optimiser; the predefined exceptions raise to the handler of
#   their block; closure code takes both continuations.
#   `tests/test_exceptions.py` runs the corpus of exception programs
#   (`tests/corpus/exceptions/`) on chapter 6's interpreter after this
#   chapter, and after the optimiser, closure conversion and the shrinker,
#   against golden outputs; `tests/test_pipeline.py` walks them through
#   every stage; random programs that raise and catch go through every
#   interpreter.

# %%
import json
from pathlib import Path

corpus = {kind: len(list(Path("../tests/corpus", kind).glob("*.l"))) for kind in ("run", "fail")}
print(corpus["run"], "programs that run,", corpus["fail"], "that fail at run time,",
      len(list(Path("../examples").glob("*.l"))), "examples")

# %% [markdown]
# `bench/convert_speed.py` measures the conversion on generated programs of
# 10³ to 10⁵ source nodes (each definition a loop, a closure, a match and
# calls), and writes what it measures to `bench/convert_speed.json`. The
# last run on this book's machine, read from that file:
#
# %%
SPEED = json.loads(Path("../bench/convert_speed.json").read_text())
print(SPEED["command"], "—", SPEED["settings"]["clock"], "clock, best of", SPEED["settings"]["repeat"], "runs")
where = SPEED.get("machine", {})
print(f"measured {where.get('date', '?')} on {where.get('cpu', 'a machine not recorded')}, "
      f"{where.get('cores', '?')} cores, load average {where.get('load')} at the start")
print(f"{'source nodes':>12} {'CPS nodes':>10} {'CPS/src':>8} {'convert s':>10} {'µs/node':>8}")
for row in SPEED["sizes"]:
    n = row["source nodes"]
    print(f"{n:>12} {row['cps nodes']:>10} {row['cps nodes'] / n:>8.2f} {row['convert s']:>10.3f} "
          f"{1e6 * row['convert s'] / n:>8.2f}")
first, last = SPEED["sizes"][0], SPEED["sizes"][-1]
print(f"time per source node, largest / smallest: "
      f"{(last['convert s'] / last['source nodes']) / (first['convert s'] / first['source nodes']):.2f}"
      " (1.00 is linear)")

# %% [markdown]
# The CPS has the same number of nodes per source node at every size (the
# `CPS/src` column). The time per node, the last column, grows by about
# three fifths over the hundredfold growth of the program (the ratio
# printed last), all of it by 30,000 nodes and none over the last threefold: far
# from the hundredfold of a quadratic pass, but not flat either. As
# [chapter 6](06_cps.ipynb) did for its framework, count the work instead
# of timing it: the Python function calls the conversion makes per source
# node, on two of the same generated programs, the second ten times the
# size of the first. A count does not depend on the machine or its load.

# %%
import cProfile
import pstats
import sys

sys.path.insert(0, "../bench")
import convert_speed                      # the benchmark's generator of programs

for definitions in (30, 300):
    core_n, _ = types.check_types(convert_speed.program(definitions))
    nodes_n = convert_speed.source_nodes(core_n)
    profile = cProfile.Profile()
    profile.enable()
    convert(core_n)
    profile.disable()
    print(f"{nodes_n:>6} source nodes: {pstats.Stats(profile).total_calls / nodes_n:.2f} calls per node")

# %% [markdown]
# The count is the same at both sizes: nothing in the conversion visits a
# node more than a fixed number of times, so the slow growth of the
# timings is not the algorithm's. Chapter 6 saw the same on its own
# framework (calls per node constant, time per node growing a little) and
# put it down to the cost of each lookup once the tables no longer fit in
# the processor's caches. What is not linear is what the conversion keeps
# of the names in scope: a name is found by walking the environment, a linked list of
# them, and the store of uncaptured `var`s is copied or scanned whole by
# `declare`, `assign`, a join point and a loop; so a block of n `let`s
# that each read a parameter, or of n `var`s, costs time in n². These
# programs bind a handful of names per definition, and on them the
# conversion is linear.

# %% [markdown]
# ## Exercises
#
# 1. Compile `match` to a decision tree instead of the backtracking
#    automaton, and compare the two on `examples/queens.l` and on a `match`
#    over a tuple of three lists: code size (`cps.size`) and the number of
#    `tag` reads executed.
# 2. A join point that carries a `var` nobody assigned in the branches
#    receives the same value from every jump. Find such a case in the
#    generated code, and make the pre-pass precise enough to avoid it.
# 3. `print(if (c) a else b)` binds a join point for the `if`'s value. When is
#    copying the context cheaper than the join point? Write the rule and
#    measure with the `chain` programs above.
# 4. Translate `&&` and `||` directly, without going through `if`. Is the
#    result any different?
# 5. A `var` assigned in a `try`'s block lives in a cell. When the block
#    makes no call, every raise that reaches the handler is a jump written
#    in this function. Could the handler then take the `var`s as extra
#    parameters instead? What would each kind of raise in the block have to
#    do?
# 6. Convert the block of a `try` whose context is `Return(ret)` in that
#    context itself, without `done`. What changes in the CPS of `TRY`, in
#    what chapter 6's interpreter counts, and after the optimiser?
# 7. A `try` whose block cannot raise (`try { x + 1 } catch { _ -> 0 }`)
#    binds a handler that nothing jumps to. Should the conversion leave the
#    `try` out? Look at what the optimiser makes of it.
#
# <details><summary>Solutions</summary>
#
# 1. A decision tree tests one column at a time and copies into each
#    branch the clauses still possible there: for the match of a tuple of
#    three lists `(a, b, c)` with the clauses `(Nil, _, _)`, `(_, Nil, _)`,
#    `(_, _, Nil)`, `(Cons(x, _), Cons(y, _), Cons(z, _))`, the tree reads
#    `a`'s tag (`Nil` → clause 1), then `b`'s (`Nil` → clause 2), then
#    `c`'s (`Nil` → clause 3, `Cons` → clause 4): at most three `tag`
#    reads on a path and no failing path, since every leaf has a clause. The
#    automaton (`rule` on that function, or `lc show cps`) reads each
#    list's tag in two places and ends with a `fail "no clause matches the
#    value"`: after the third clause fails, the fourth reads the three
#    tags again. Its memory of excluded tags is about the scrutinee's own
#    tag, not about the components of a tuple, so it does not know that
#    `a`, `b` and `c` are all `Cons` there. On `(Cons, Cons, Cons)` it
#    executes twice as many tag reads as the tree, and it keeps a failing
#    path (with a printer of the tuple) that cannot be taken. To implement the tree,
#    `clauses` becomes a function of a *matrix* (rows of patterns, one
#    column per sub-value read so far): pick the first column with a
#    constructor in its first row, `case` on its tag, and for each
#    constructor specialise the matrix (rows with that constructor or a
#    wildcard, its fields as new columns); the default is the rows with a
#    wildcard. On `examples/queens.l` nothing changes: its matches have one
#    column, and the automaton's excluded tags already make the last
#    constructor test-free, so both translations read each tag once. The
#    tree is the larger one when wildcard rows survive into many branches
#    and are copied into each (Maranget's worst case); on this match it is
#    the smaller, since each `Nil` branch ends at once.
# 2. The pre-pass records, for an `if`, the names assigned anywhere under
#    it — its condition included — and the join point carries every `var`
#    of the store with one of those names. A `var` assigned only in the
#    condition then travels through the join point with the same value from
#    both branches: in `def f(n) = { var x := 0; let r = if ({ x := n; x >
#    0 }) 1 else 2; r + x }` the join point is `cont join(r, x2)` and both
#    branches jump with `n`. (The scrutinee of a `match` is the same case.)
#    The value the condition leaves is already in the store when the
#    branches start, so the join point needs only what the *branches*
#    assign: `Analysis.expr` records, for an `if` or a `match`, the union of
#    its branches' sets, and still returns the condition's names too, for
#    the enclosing nodes:
#
#    ```python
#    first, *branches = _children(e)
#    before = self.expr(first, depth, mutables)
#    names = set()
#    for part in branches:
#        names |= self.expr(part, depth, mutables)
#    self.assigned[id(e)] = frozenset(names)
#    return before | names
#    ```
#
#    The join point of the example then takes `r` alone. A second,
#    rarer imprecision is by name: a `var x` declared inside a branch
#    that shadows an outer `x` makes the outer one carried too; recording
#    the binding `LetVar` instead of the name fixes it. `tests/test_solutions.py`
#    runs this pre-pass: on the example, and on random programs, where the
#    CPS means what the reference interpreter says and is never larger.
# 3. Copying the context costs its size once per branch; the join point
#    costs it once, plus the `cont` binding and one jump per branch. With
#    *s* the number of nodes the context builds (as `cps.size` counts: a
#    `let` and its primitive are two) and *m* ends, copying is no larger
#    when *m·s ≤ s + 1 + m*; for an `if` (*m* = 2), when *s* ≤ 3 — a lone
#    jump such as `ret(r)`, or one primitive and a jump. The table above
#    shows it at n = 1: the one `if`'s context is `ret(a1)`, one node, and
#    copying is smaller by two nodes; from n = 2 on, the first `if`'s
#    context holds the rest of the chain and the join point wins, by more
#    at each step. The rule: bind a join point unless the context, built
#    once, is a jump or a primitive then a jump. The converter cannot
#    measure a `Then` context without building it (the context is a Python
#    function), and building it to measure it would, in a chain, build the
#    rest of the chain again at each step; so the rule is best applied
#    after the conversion, where chapter 9 already applies it for the
#    smallest case: a join point whose body is `ret(r)` is η-reduced away
#    (solution 6 relies on the same rule). The
#    `print(if (c) a else b)` of the question is the same count: its
#    context is the `print`, then the rest of the function.
# 4. `a && b` is `if (a) b else false` (chapter 4b), and translated
#    directly as a value — convert `a`, `case` on it, `b` in the context on
#    one side, the constant `false` on the other, a join point if the
#    context is a `Then` — it gives exactly the CPS that `rule` shows above
#    for `def f(a, b) = a > 0 && b > 0`, up to the name of the constant.
#    The difference is in a *condition*: `if (a > 0 && b > 0) 1 else 0` as
#    an operand converts the `&&` into a join point whose parameter is the
#    boolean, then `case`s on that boolean, so the `else` path of the `&&`
#    jumps with the constant `false` only to have it tested again. A direct
#    translation gives `&&` and `||` a third kind of context, a *test*
#    (two continuations, true and false): `a && b` in a test converts `a`
#    in a test whose true side converts `b` in the same test and whose
#    false side jumps straight to the false continuation; `||` is the
#    mirror. No boolean is built and no join point is
#    bound. Chapter 9's optimiser does not do this for us when the values
#    are unknown: in a loop calling that function, `lc show opt` still has
#    the join point for the boolean and the second `case` on it (LLVM's
#    jump threading may still remove the second test later).
# 5. Yes for some raises, not all. An explicit `raise(e)` in the block is
#    an `ApplyCont` to the handler: it can pass the store's current values
#    along with the exception, as a jump to a join point does. A failing
#    operation (`/`, `%`, a `match`, an `assert`) names the continuation it
#    raises to, and chapter 6 gives that continuation one value, the
#    exception: it would need to carry the values too, or be made explicit
#    as a test and a jump (`if b == 0 raise DivisionByZero`). A call cannot:
#    the callee raises through its own exception continuation, which takes
#    one value. So the handler may take parameters only when the block has
#    no call, a rule the pre-pass can check (it would walk the block for
#    `App` nodes); the gain is the cell's allocation and its reads and
#    writes, which for a loop counter in a block are in the loop.
# 6. `call g_1(x_13) -> k_22 / handler_14` does not change (the call is an
#    operand of `+`); the `+ 1` then jumps to `ret_11` instead of `done_20`,
#    and `done_20` is gone. A call that ended the block would become `call
#    g(x) -> ret / handler`: it returns through the function's own return
#    continuation, but raises to a local handler, so it is still no tail
#    call — chapter 6's interpreter counts a frame for it, since its test
#    looks at both continuations. Chapter 9's η-reduction of `cont done(r)
#    { ret(r) }` reaches the same term from ours, so after the optimiser the
#    two conversions agree. Keeping `done` keeps one rule for every `try`.
# 7. The conversion need not: the optimiser removes a continuation that no
#    jump names, as for any dead code. For `def k(x) = try { x + 1 } catch
#    { _ -> 0 }`, made public as `f` was above (a private `k` called once is
#    inlined into its caller and folded away), the optimised `k` is
#    `c = 1; v = x + c; ret(v)`: no handler. The conversion stays simple and the
#    case is handled once, where dead code is.
#
# </details>
