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
# # Chapter 5b. Monomorphisation: one copy per type
#
# Chapter 5 recorded a type on every node of the core program, and some of
# those types still have type variables: `def show(x) = print(x)` has the
# type `a -> Unit`, for any `a`. The back end of [chapter 10](10_llvm.ipynb)
# cannot work with that. It represents every value as one machine word and
# prints a value by looking at its type, so it must know, at every `print`,
# whether `x` is an `Int`, a `String` or a list. This chapter makes every
# type known: it copies each polymorphic definition once for every type it
# is used at, and gives each copy its own type. Compilers call this
# *monomorphisation*. The pass turns a core program into another core
# program, and runs between the types of chapter 5 and the CPS conversion
# of [chapter 7](07_cps_convert.ipynb). This chapter also builds a
# *checker*, which verifies the typing rules on the program the pass
# returns, and which the pipeline runs on every compilation.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 4b](04b_meaning.ipynb), for the core language and its
# reference interpreter; [chapter 5](05_types.ipynb), for the types recorded
# on every node (`TCon`, `TParam`) and for the value restriction
# (`is_value`); [chapter 4](04_pipeline.ipynb), for the pipeline of stages;
# [appendix A](A_errors.ipynb), for located errors (`Diagnostic`) and
# pictures (`lcompiler.drawing`).
#
# **Builds:** the module `lcompiler.mono` (`monomorphise`, its checker
# `check`, and `measure`), and the pipeline's stage `mono` (`lc show mono`).
#
# </div>

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.mono`:
#
# - `monomorphise(program)` returns a *new* core program and leaves its
#   input as it was. No type in the result contains a type variable: not
#   the type of an expression, of a pattern or of a variable. The result
#   means the same as the input: it prints the same output, and it stops
#   with the same runtime errors at the same places.
# - A polymorphic binding is a top-level `def`, or a `let`, whose type still
#   has generalised type variables (a weak one, `_a`, stands for one type,
#   and is treated as the next promise says). Each one is replaced by one
#   copy per type it is used at (an unused `def` by none, an unused `let`
#   by one, at the type the next promise gives it). We call these copies its *instances*. The first instance keeps the
#   name; the others are called `name_1`, `name_2`, …, skipping any such
#   name that the program already uses.
# - A type variable that nothing fixes becomes `Unit`. An example is
#   `print(Nil)`: the element type of a list that stays empty. No value has
#   such a type, so any choice is right. A list of it is always `Nil`, and
#   `Nil` prints the same at every type.
# - `check(program)` verifies the typing rules of the core language on the
#   types that a monomorphic program records. It returns nothing if they
#   hold. Otherwise it raises `IllTyped` at the first node that breaks one,
#   with that node's location in the source. Such an error is a bug of the
#   compiler, not of the L program.
# - `measure(program)` returns the result together with its size before and
#   after the pass.
# - The pipeline's stage `mono` runs the pass, then the checker on its
#   result, on every compilation: a mistake of the type checker that makes
#   the copies disagree stops the compiler with a located internal error
#   (exit status 3), never reaches the back end. `lc show mono FILE.l`
#   prints the program it returns.
# - Exceptions add nothing to copy: `Exn` has no type parameter, and
#   `check` knows the rules of `raise` and `try`.

# %%
#| default_exp mono

# %% [markdown]
# ## Why copy: one word per value
#
# Chapter 10 represents every L value as one 64-bit word. An `Int` is the
# word itself, with all 64 bits. A tuple, a closure or a list is the
# address of a block: a block in the heap, or, for a constructor without
# fields such as `Nil`, one constant block made once. This is the
# *uniform representation* of ML implementations (Leroy 1992 weighs it
# against unboxed values; see the
# [bibliography](../bibliography.md#papers-and-books)). A polymorphic function such as `length` works on lists
# of anything because every element is one word, and its code never needs
# to know what the word means.
#
# One part of the language does need to know: `print`. It must write `3`
# for an `Int`, `true` for a `Bool` and `Cons(1, Nil)` for a list. The
# error "no clause matches the value …" needs to know too, since it prints
# the value. Inside `def show(x) = print(x)`, the type of `x` is a type
# variable, and nothing in the word tells the cases apart.
#
# There are two ways out:
#
# 1. *Runtime type information.* Every word could carry a tag that says
#    what it is. OCaml already steals one bit from its integers, to tell
#    them from pointers, so its integers have 63 bits; a tag that told an
#    `Int` from a `Bool` would take more bits, and the contract of L, which
#    gives an `Int` all 64, forbids even one. Alternatively, each
#    polymorphic function that may print could receive a description of
#    the type as a hidden argument. This is *dictionary passing*, which
#    Haskell uses for type classes. The hidden argument then spreads: a
#    function that calls `show` at a type variable of its own needs the
#    description too, and so do its callers, up to the place where the
#    type is known.
# 2. *Monomorphisation.* Make one copy of each polymorphic definition for
#    each type it is used at. After the copying, every type is known. MLton
#    (Weeks 2006, in the bibliography) and Rust work this way.
#
# (A third way is to have no `print` that works at every type. OCaml has
# none: its `Printf.printf` takes a format whose `%d` or `%s` names the type
# of each argument, so the code never has to find it out, and a match that
# fails raises `Match_failure` with a place in the source, not the value.
# L's `print` and its error messages are part of its contract, so this way
# is closed to us.)
#
# We monomorphise. Every type is then known at compile time, and printing is
# directed by types at no cost at run time. The price is more code, and the
# section "What it costs" measures it on the whole corpus.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: what the copies cost, and what they give up</p>
#
# Dictionary passing would cost something at run time: an extra argument
# on every call of a polymorphic function that needs a description, a
# lookup at every `print` of a type variable, and, wherever such a function
# is passed as a value, a closure that carries its description with it.
# Monomorphisation adds no work at run time, only code. It gives up two
# things instead. First, separate compilation: the pass must see the whole
# program, which `lc` always does. Second, in theory, size: a function used
# at k types is copied k times, and a chain of such functions multiplies
# the copies. The corpus below shows how much of that happens in practice.
#
# Monomorphisation brings one more benefit. Once every type is known, the
# back end can choose a representation per type. Chapter 10 uses this to
# pass a tuple argument as separate words in registers, and to tell the
# garbage collector which fields of a block may hold pointers.
#
# </div>

# %% [markdown]
# ## A worked example
#
# The program below uses `show` at four types and the polymorphic `pair`
# at two, and it prints an empty list. Chapter 5 gives its two definitions
# these types:

# %%
from lcompiler import pipeline
from lcompiler.errors import Source

SHOW = Source("show.l", """data List<a> { Cons(a, List<a>)
  Nil }
def show(x) = print(x)
def pair(x) = (x, x)
show(3)
show(Cons("a", Nil))
show(pair(true))
show(pair(Nil))
print(Nil)
""")
print(pipeline.show("types", SHOW))

# %% [markdown]
# `lc show mono show.l` prints the program after the pass. `show` has become
# four definitions, one per type it is used at, and `pair` has become two:

# %%
print(pipeline.show("mono", SHOW))

# %% [markdown]
# Working it out by hand goes as follows. The top-level statements are
# monomorphic, so copying starts from them. The statement `show(3)` uses
# `show` at `Int -> Unit`. Matching `show`'s type `a -> Unit` against it
# gives `a = Int`: this is the first instance, and it keeps the name `show`.
# `show(Cons("a", Nil))` asks for `a = List<String>`, a new instance named
# `show_1`. `show(pair(true))` asks for `show` at `(Bool, Bool)` and for
# `pair` at `Bool`. The fourth, `show(pair(Nil))`, asks for `show` at `(List<b>,
# List<b>)` and `pair` at `List<b>`, where nothing fixes `b`: `b` becomes
# `Unit`. The `print(Nil)` at the end keeps its single `Nil`, now a
# `List<Unit>`. Each copy is the definition's body, copied with its types
# under the instance's substitution: inside `show_1`, `x` has type
# `List<String>`. The back end can then print it without asking anything at
# run time.

# %% [markdown]
# ## Types under a substitution
#
# Chapter 5's types after inference are trees of `TCon` (a name and its
# arguments) whose leaves may be `TParam`s: the type variables that
# inference left open. Most are *generic*, those a polymorphic definition
# is generic in; a weak one (`generic=False`, printed `_a`) stands for one
# type that nothing in the program fixed. A *substitution* maps the numbers of
# those variables to *ground* types, types without any variable left in
# them. `substitute` applies one. A variable that the
# substitution does not map becomes `Unit` by default, as promised above.
# A caller can also ask for it to stay as it is (`default=None`), which the
# pass does to find out which variables are still open. The constants
# `EXPRESSIONS` and `PATTERNS` list the classes of core nodes, for the
# functions below that walk them.

# %%
#| export
from collections import deque
from dataclasses import dataclass, field, fields

from lcompiler import core as c, syntax as s
from lcompiler.support import NESTING_LIMIT, collector_paused, recursion_limit
from lcompiler.types import TCon, TParam, is_value, show_type

UNIT = TCon("Unit")
EXPRESSIONS = (c.Lit, c.Var, c.Con, c.Tuple, c.Lambda, c.App, c.Prim, c.If, c.Match, c.Let,
               c.LetVar, c.Assign, c.While, c.Seq, c.Print, c.Assert, c.Raise, c.Try)
PATTERNS = (s.PVar, s.PWild, s.PInt, s.PUnit, s.PTuple, s.PCon)
NODES = EXPRESSIONS + PATTERNS
NODE_CLASSES = frozenset(NODES)     # `type(v) in NODE_CLASSES` is a quicker test than isinstance
_FIELD_NAMES = {}


def field_names(cls) -> tuple:
    """The names of a dataclass's fields, looked up once per class (`fields` is slow)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def substitute(t, subst: dict, default=UNIT):
    """t with each TParam replaced by its image in subst (TParam number -> ground type);
    a TParam subst does not map becomes default, or stays if default is None."""
    if type(t) is TParam:
        return subst.get(t.number, t if default is None else default)
    if type(t) is TCon and t.args:
        args = tuple(substitute(a, subst, default) for a in t.args)
        return t if all(a is b for a, b in zip(args, t.args)) else TCon(t.name, args)
    return t

# %% [markdown]
# `show`'s type is `a -> Unit`. Under `a = Int` it becomes `Int -> Unit`;
# and in the type `(a, List<b>)`, the `b` that nothing maps becomes `Unit`:

# %%
a, b = TParam(0), TParam(1)
print(show_type(substitute(TCon("->", (a, UNIT)), {0: TCon("Int")})))
print(show_type(substitute(TCon("*", (a, TCon("List", (b,)))), {0: TCon("Int")})))

# %% [markdown]
# `match_type` works in the other direction. Given a binding's general type
# and the ground type of one use, it finds the substitution that turns the
# first into the second. This substitution says which instance the use
# needs. If there is none, chapter 5 recorded types that contradict each
# other: `match_type` raises `NotAnInstance`, and the pass reports it at the
# use (further down, with the checker's error). `params` lists the variables
# of a type.

# %%
#| export
def params(t) -> list:
    """The TParams of a type."""
    if type(t) is TParam:
        return [t]
    return [p for a in t.args for p in params(a)] if type(t) is TCon else []


class NotAnInstance(Exception):
    """A use whose type is not an instance of its binding's type: a bug of the type checker."""


def match_type(general, ground, out: dict) -> dict:
    """Extend out so that substitute(general, out) == ground: how a use instantiates a scheme."""
    if type(general) is TParam:
        if out.setdefault(general.number, ground) != ground:
            raise NotAnInstance("a type variable at two types")
    elif type(ground) is not TCon or general.name != ground.name or len(general.args) != len(ground.args):
        raise NotAnInstance(f"{show_type(ground)} where {show_type(general)} is wanted")
    else:
        for g, x in zip(general.args, ground.args):
            match_type(g, x, out)
    return out

# %% [markdown]
# The use `show(pair(true))` needs `show : (Bool, Bool) -> Unit`:

# %%
BOOL = TCon("Bool")
print(match_type(TCon("->", (a, UNIT)), TCon("->", (TCon("*", (BOOL, BOOL)), UNIT)), {}))

# %% [markdown]
# ## Copying a node
#
# Copying a core node is the same for almost every class of node. We make
# a new node of the same class, put its type under the substitution, and
# copy its sub-nodes. The other fields are shared: names, spans, and the
# resolver's `kind`s. `rebuild` does this for any dataclass, so the pass
# only has to say where a node differs from the rule (keyword arguments
# give a field its value directly). `pattern` copies a pattern, which is
# always done by the rule.

# %%
#| export
def rebuild(node, subst: dict, copy, **given):
    """A new node of node's class: the fields in given as given, its type under subst, its
    sub-nodes (alone or in a list) passed through copy, and the rest (names, spans, kinds,
    forms, literal values) shared."""
    parts = []
    for name in field_names(type(node)):
        if name in given:
            parts.append(given[name])
            continue
        v = getattr(node, name)
        if name == "type":
            v = substitute(v, subst)
        elif type(v) is list:
            v = [copy(x) for x in v]
        elif type(v) in NODE_CLASSES:
            v = copy(v)
        parts.append(v)
    return type(node)(*parts)       # the fields in their order: quicker than by keyword


def pattern(p, subst: dict):
    return rebuild(p, subst, lambda q: pattern(q, subst))

# %% [markdown]
# Here `pattern` copies the pattern `(x, Nil)` of type `(a, List<b>)`
# under `a = Int`. The pattern itself does not change, but its type and
# the types of its parts do:

# %%
pair_pattern = s.PTuple([s.PVar("x", type=a), s.PCon("Nil", None, type=TCon("List", (b,)))],
                        type=TCon("*", (a, TCon("List", (b,)))))
copied = pattern(pair_pattern, {0: TCon("Int")})
print(show_type(pair_pattern.type), "->", show_type(copied.type), "| parts:",
      [show_type(q.type) for q in copied.items])

# %% [markdown]
# Scopes need care. The pass carries an environment `env` of the
# polymorphic `let`s in scope, and a variable that a pattern, a function
# parameter or an inner binding binds *shadows* the `let` of the same
# name. `bound_by` lists the variables a pattern binds, and `hide` removes
# the shadowed names from the environment.

# %%
#| export
def bound_by(p) -> set:
    """The variables a pattern binds."""
    if type(p) is s.PVar:
        return {p.name}
    return set().union(*map(bound_by, getattr(p, "items", None) or getattr(p, "args", None) or []))


def hide(env: dict, names) -> dict:
    """env without the polymorphic lets that names shadow."""
    return {k: v for k, v in env.items() if k not in names} if any(n in env for n in names) else env

# %%
print(sorted(bound_by(pair_pattern)), hide({"x": "a let", "f": "another"}, bound_by(pair_pattern)))

# %% [markdown]
# ## Polymorphic bindings and their instances
#
# A polymorphic binding is a `Poly`. It records its right-hand side, its
# type (the type variables left in it are its parameters), the substitution
# in force where it is bound, and the polymorphic `let`s in scope there. An
# `Instance` is one of its copies: its name, its ground type, and, once
# made, the copied definition or expression. A `Poly` keeps its instances
# in a dictionary, by their *key*: the values of its own parameters at that
# instance.

# %%
#| export
@dataclass(eq=False)
class Instance:
    name: str
    type: object             # the binding's type at this instance: ground
    value: object = None     # the copy: a Def for a top-level binding, an expression for a let


@dataclass(eq=False)
class Poly:
    """A polymorphic binding: a top-level def, or a let met while copying."""
    name: str
    value: object            # its right-hand side in the input program
    scheme: object           # its type under `subst`: the TParams left are its parameters
    subst: dict              # the substitution in force where it is bound
    env: dict                # the polymorphic lets in scope there
    definition: c.Def = None     # the Def, for a top-level binding
    span: object = None
    instances: dict = field(default_factory=dict)    # key -> Instance, in order of creation

# %% [markdown]
# ## The monomorphiser
#
# The pass is a copy driven by a *worklist*, a queue of the copies still
# to make. Copying starts at the monomorphic *roots*, which are the
# top-level statements and the monomorphic definitions, with an empty
# substitution. Each use of a
# polymorphic binding asks for the instance at the type of the use. Each
# pair of a binding and an instance is copied once, under the substitution
# extended with the instance's key, and the copy may ask for more
# instances. The worklist ends because Hindley–Milner has no *polymorphic
# recursion*: no definition uses itself at a type other than its own.
# Chapter 5 types the definitions one component at a time (a
# group of definitions that use each other), and inside its component a
# definition is used at one type only: the very type that is being copied.
# So a copy asks, inside its own component, only for the copies that go
# with its own type; it asks for copies at new types only of definitions
# of earlier components, and every chain of requests goes down through the
# components and stops. (Exercise 1 shows that it can still make many copies.)
#
# A fresh name must avoid every name of the program: `names_in` collects
# them all, bound or used. It visits every node, so which fields of a class
# hold names and which may hold nodes is worked out once per class.

# %%
#| export
_NAME_PLANS = {}    # a node class -> (its fields that hold a name, its fields that may hold nodes)


def names_in(program: c.Program) -> set:
    """Every name bound or used in a program."""
    names, todo = set(), list(program.items)
    while todo:
        x = todo.pop()
        t = type(x)
        if t is list or t is tuple:
            todo.extend(x)
        elif t in NODE_CLASSES or t is c.Def:
            plan = _NAME_PLANS.get(t)
            if plan is None:
                fs = field_names(t)
                plan = _NAME_PLANS[t] = (tuple(n for n in fs if n in ("name", "param")),
                                         tuple(n for n in fs if n not in ("name", "param", "span", "type", "op_span")))
            for name in plan[0]:
                v = getattr(x, name)
                if type(v) is str:
                    names.add(v)
                else:
                    todo.append(v)
            for name in plan[1]:
                v = getattr(x, name)
                if type(v) is not str:      # a kind, an operator: no name inside
                    todo.append(v)
    return names

# %% [markdown]
# The `Monomorphiser` keeps the program, every name the program uses, the
# polymorphic top-level definitions, the worklist, and every `Poly` it
# met, for the statistics. `fresh` makes the names of the instances after
# the first.

# %%
#| export
class Monomorphiser:
    def __init__(self, program: c.Program):
        self.program = program
        self.taken = names_in(program)       # fresh names avoid every name of the program
        self.globals = {}                    # name -> Poly, the polymorphic top-level defs
        self.todo = deque()                  # (Poly, Instance, substitution) of defs to copy
        self.bindings = []                   # every Poly, for statistics

    def fresh(self, name: str) -> str:
        k = 1
        while f"{name}_{k}" in self.taken:
            k += 1
        self.taken.add(f"{name}_{k}")
        return f"{name}_{k}"

# %% [markdown]
# Which bindings are polymorphic? A binding is polymorphic when its type,
# under the substitution in force, still has a *generic* type variable,
# and when its right-hand side is a syntactic value. Chapter 5's value
# restriction generalises only values, such as a function or a constructor
# applied to values. This is what makes copying safe: building a value has
# no effect, so copying it cannot duplicate an effect. (One exception: a
# value that reads a definition which has not run yet stops the program;
# the section on variables below keeps that error as it was.) `scheme` returns the
# type to instantiate, or `None` for a monomorphic binding.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def scheme(self, value, t, subst: dict):
        """The type to instantiate if a binding of value, of type t, is polymorphic under
        subst, else None. A non-value is never generalised: it is computed once and shared."""
        if not is_value(value):
            return None
        t = substitute(t, subst, None)
        return t if any(p.generic for p in params(t)) else None

# %% [markdown]
# `instance` finds the instance of a binding that a use at the ground type
# `t` needs, and makes it on first demand. The first instance of a binding
# keeps its name. A top-level definition may use itself, so its copy is
# put on the worklist and made later. A `let` cannot use itself (L's `let`
# is not recursive), so its copy is made at once.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def instance(self, poly: Poly, t) -> Instance:
        """poly's instance at the ground type t, made on first demand."""
        own = match_type(poly.scheme, t, {})
        key = tuple(sorted(own.items()))
        if key not in poly.instances:
            name = self.fresh(poly.name) if poly.instances else poly.name
            inst = poly.instances[key] = Instance(name, t)
            subst = {**poly.subst, **own}
            if poly.definition is not None:          # a def may use itself: copy it later
                self.todo.append((poly, inst, subst))
            else:                                    # a let cannot: copy it now
                inst.value = self.expr(poly.value, subst, poly.env)
        return poly.instances[key]

# %% [markdown]
# ## The whole program
#
# Before the cases of `expr`, the frame around them. `definition` copies
# one top-level definition under a substitution, under a given name. `run` copies the program, with the recursion limit raised
# and Python's cycle collector paused, as every stage since chapter 4a does.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def definition(self, d: c.Def, name: str, subst: dict) -> c.Def:
        var = rebuild(d.name, subst, None, name=name)
        return c.Def(var, self.expr(d.value, subst, {}), d.is_function, d.span)

    def run(self) -> c.Program:
        with recursion_limit(50 * NESTING_LIMIT), collector_paused():   # as chapter 7
            return self.program_copy()

# %% [markdown]
# `program_copy` finds the polymorphic definitions, copies the roots, then
# empties the worklist. Then it lays out the result: each root at its place,
# and each polymorphic definition's instances at the place of the
# definition. An unused polymorphic definition has no instance, and is gone:
# building it would have no effect, since at the top level a value can
# read only definitions that are already there, the functions and the
# definitions above it (chapter 4b rejects any other read).

# %%
#| export
class Monomorphiser(Monomorphiser):
    def program_copy(self) -> c.Program:
        items = self.program.items
        for d in items:
            if type(d) is c.Def and (scheme := self.scheme(d.value, d.name.type, {})) is not None:
                poly = Poly(d.name.name, d.value, scheme, {}, {}, definition=d, span=d.span)
                self.globals[d.name.name] = poly
                self.bindings.append(poly)
        roots = {}                   # index of a monomorphic item -> its copy
        for i, item in enumerate(items):
            if type(item) is c.Def and item.name.name not in self.globals:
                roots[i] = self.definition(item, item.name.name, {})
            elif not isinstance(item, (c.Def, s.Data)):
                roots[i] = self.expr(item, {}, {})
        while self.todo:             # the instances of polymorphic defs, and those they use
            poly, inst, subst = self.todo.popleft()
            inst.value = self.definition(poly.definition, inst.name, subst)
        out = []                     # each def's instances at its place; an unused one is gone
        for i, item in enumerate(items):
            if i in roots:
                out.append(roots[i])
            elif isinstance(item, s.Data):
                out.append(item)
            else:
                out.extend(inst.value for inst in self.globals[item.name.name].instances.values())
        return c.Program(out, self.program.span)

# %% [markdown]
# `monomorphise` is the pass.

# %%
#| export
def monomorphise(program: c.Program) -> c.Program:
    """A copy of a typed core program where no type has a type variable, meaning the same."""
    return Monomorphiser(program).run()

# %% [markdown]
# ## Expressions, case by case
#
# `expr` copies an expression under a substitution. Five kinds of node need
# more than `rebuild`: a variable, which may name a polymorphic binding; a
# `let`, which may bind one; and a function, a `var` and a `match` (or a
# `try`, whose clauses are a `match`'s), which bind names that shadow the
# polymorphic `let`s of `env`. Every other node
# is copied by the rule.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def expr(self, e, subst: dict, env: dict):
        """A copy of the expression e, its types under subst; env maps the names of the
        polymorphic lets in scope to their Poly."""
        t = type(e)
        if t is c.Var:
            return self.var(e, subst, env)
        if t is c.Let:
            return self.let(e, subst, env)
        if t is c.Lambda:
            return self.scoped(e, subst, env, [e.param])
        if t is c.LetVar:
            return self.scoped(e, subst, env, [e.name])
        if t is c.Match or t is c.Try:
            return self.match(e, subst, env)
        return rebuild(e, subst, lambda x: self.expr(x, subst, env))

# %% [markdown]
# ### A variable
#
# A variable that names a monomorphic binding is copied by the rule, with
# its type under the substitution. A variable that names a polymorphic
# binding (a `let` in `env` for a local, a `def` for a global) asks for the
# instance at its own type, and becomes a use of that instance's name.
#
# One subtlety concerns definitions that are not functions, such as `def
# empty = Nil`. A function may read such a definition before the
# definition has run, and the runtime error then names it: "`empty` is
# read before its definition has run". If a copy of that function read
# `empty_1` instead, the error would name `empty_1`. So a read of any
# instance other than the first is preceded by a read of the first one, the
# one that kept the name. Since all the instances of a definition run at
# the same place in the program, the error, if there is one, comes from the
# first read and names the definition as the programmer wrote it.
#
# A use whose type is not an instance of its binding's type (`match_type`
# raised `NotAnInstance`) cannot be copied. Only a mistake of chapter 5
# can cause it, and the pass reports it as the checker below reports a
# broken rule: an `IllTyped` error, a compiler bug, at the variable.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def var(self, v: c.Var, subst: dict, env: dict):
        poly = (env.get(v.name) if v.kind == "local" else
                self.globals.get(v.name) if v.kind == "global" else None)
        if poly is None:                                 # a monomorphic binding
            return rebuild(v, subst, None)
        t = substitute(v.type, subst)
        try:
            inst = self.instance(poly, t)
        except NotAnInstance as error:                   # chapter 5 recorded contradictory types
            raise IllTyped(f"the variable {v.name}: {error}", v.span) from None
        use = c.Var(inst.name, v.span, v.kind, t)
        if poly.definition is not None and not poly.definition.is_function and inst.name != poly.name:
            # A function may read a non-function definition before it has run, and the error
            # names it: read the instance that kept its name first. All instances run together.
            first = next(iter(poly.instances.values()))
            return c.Seq(c.Var(poly.name, v.span, "global", first.type), use, v.span, t)
        return use

# %% [markdown]
# ### A let
#
# A `let` whose value is polymorphic becomes one `let` per instance, all
# with the same body. First the body is copied with the new `Poly` in the
# environment, and its uses ask for instances. Then one `let` is wrapped
# around it for each instance. An unused polymorphic `let` keeps one copy,
# at the default type, because its value may still read a definition that
# has not run yet (and so raise the same error). The instance that keeps
# the name `x` is the innermost one, so that the values of the others still
# see an outer `x` wherever the original value did. A monomorphic `let` is
# copied by the rule, its name hiding any outer polymorphic `let` of that
# name in its body.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def let(self, e: c.Let, subst: dict, env: dict):
        scheme = self.scheme(e.value, e.value.type, subst)
        if scheme is not None:
            return self.poly_let(e, scheme, subst, env)
        return self.scoped(e, subst, env, [e.name])

    def poly_let(self, e: c.Let, scheme, subst: dict, env: dict):
        """let x = v; body  becomes  let x_2 = v2; let x_1 = v1; let x = v0; body."""
        poly = Poly(e.name, e.value, scheme, subst, env, span=e.span)
        self.bindings.append(poly)
        body = self.expr(e.body, subst, {**env, e.name: poly})
        if not poly.instances:       # unused: its value may still read a def not yet run
            self.instance(poly, substitute(scheme, {}))
        # The instance keeping the name x is innermost, so the other values still see an
        # outer x where the original value did.
        for inst in poly.instances.values():
            body = c.Let(inst.name, inst.value, body, e.span, body.type)
        return body

# %% [markdown]
# ### A function, a var
#
# A function literal `{ x -> body }` and a `var x := v; body` bind a name
# in their body, and that name shadows any polymorphic `let` of the same
# name. `scoped` copies such a node by the rule, except that its body is
# copied with those names hidden from the environment. The body is copied
# first, as in every case of the pass. The order matters only for the
# names of the instances: a binding's instances are numbered in the order
# in which the copy meets their uses.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def scoped(self, e, subst: dict, env: dict, names: list):
        """A copy of e (a function, a let or a var) whose body sees names bound."""
        body = self.expr(e.body, subst, hide(env, names))
        return rebuild(e, subst, lambda x: self.expr(x, subst, env), body=body)

# %% [markdown]
# ### A match
#
# Each clause of a `match` binds the variables of its pattern in its body.
# Its pattern is copied with its types under the substitution, and its body
# with those variables hidden.

# %%
#| export
class Monomorphiser(Monomorphiser):
    def match(self, e, subst: dict, env: dict):
        """A match, or a try: its clauses' bodies see the names their patterns bind."""
        clauses = [(pattern(p, subst), self.expr(body, subst, hide(env, bound_by(p))))
                   for p, body in e.clauses]
        return rebuild(e, subst, lambda x: self.expr(x, subst, env), clauses=clauses)

# %% [markdown]
# ## The cases at work
#
# The subtlety of variables, on a program of the test suite: `f` reads
# `empty` at two types before `empty` is defined. The copy at `List<String>` reads
# `empty_1`, after a read of `empty` (`{ empty; empty_1 }`):

# %%
from lcompiler.core import pretty_core
from lcompiler.types import check_types

EARLY = Source("early.l", """data List<a> { Cons(a, List<a>); Nil }
def f() = (Cons(1, empty), Cons("a", empty))
print(f())
def empty = Nil
""")
typed, _ = check_types(EARLY)
print(pretty_core(Monomorphiser(typed).run()), end="")

# %% [markdown]
# Here a polymorphic `let` is used at two types inside a function, and an
# inner function's parameter named `pair` hides it:

# %%
LOCAL = Source("local.l", """def main() = {
  let pair = { y -> (y, y) }
  let other = { pair -> pair + 1 }
  print(pair(1), pair("s"), other(2))
}
main()
""")
typed, _ = check_types(LOCAL)
print(pretty_core(Monomorphiser(typed).run()), end="")

# %% [markdown]
# `pair` has two instances, and the one that keeps the name is the
# innermost `let`. `other`'s parameter `pair` is an `Int`: it is not a
# use of the `let`, and is copied as it is.

# %% [markdown]
# ## The instances, drawn
#
# After a run, the monomorphiser's `bindings` hold every polymorphic binding
# it met, with its instances. Here are those of the worked example. Each
# binding (blue) is shown with its type, and below it are its instances
# (green), each with its name and its key, the substitution that made it:

# %%
from lcompiler.drawing import Box, Picture


def instances_picture(program: c.Program, alt: str) -> Picture:
    """The polymorphic bindings of a typed program, each above its instances."""
    m = Monomorphiser(program)
    m.run()
    roots = []
    for poly in m.bindings:
        letters = {}
        scheme = show_type(poly.scheme, letters)
        copies = [Box(f"{inst.name}: " + ", ".join(f"{letters.get(n, '?')} = {show_type(t)}" for n, t in key),
                      style="green")
                  for key, inst in poly.instances.items()]
        roots.append(Box(f"{poly.name} : {scheme}", copies, style="blue"))
    return Picture([("polymorphic bindings and their instances", roots)], alt)


typed, _ = check_types(SHOW)
instances_picture(typed, "show, of type a -> Unit, above its four instances: show where a = Int, show_1 where "
                         "a = List<String>, show_2 where a = (Bool, Bool), show_3 where a = (List<Unit>, "
                         "List<Unit>); pair, of type a -> (a, a), above its two instances, pair where a = "
                         "Bool and pair_1 where a = List<Unit>")

# %% [markdown]
# That picture says which copies there are; the next says who calls them.
# On the left are the worked example's polymorphic definitions (blue), each
# with its type scheme; in the middle, the copies the monomorphiser made of
# them (green), each with its ground type; on the right, every call of a
# copy in the program the pass returns, as its text reads in `show.l`. A
# grey arrow goes from a definition to each of its copies, a red dashed one
# from each call to the copy it now calls. Like chapter 5's picture of
# components, it is drawn with the sizes and colours of `lcompiler.drawing`
# by a function of its own (the arrows of a `Picture` leave and reach a box
# on its right side, which suits one column, not three), and each shape
# says what it stands for in its
# attributes (`data-name`, `data-from`, `data-to`), which
# `tests/test_drawing.py` reads back from the picture stored here.
#
# `calls_of` finds the calls: it walks the program the pass returns, as
# `names_in` does, and keeps every application of a variable that names a
# copy.

# %%
from html import escape
from xml.etree import ElementTree

from lcompiler.drawing import BOX_H, CHAR_W, GAP, STYLES


@dataclass
class SVGText:
    """An SVG text that Jupyter shows as a picture, with its description (its title) as its plain-text
    form and in its metadata. (Not a subclass of str: IPython prints a str as its text, whatever else it offers.)"""
    svg: str

    def _repr_mimebundle_(self, include=None, exclude=None):
        alt = ElementTree.fromstring(self.svg).findtext("{http://www.w3.org/2000/svg}title")
        return {"image/svg+xml": self.svg, "text/plain": alt}, {"alt": alt}


def calls_of(program: c.Program, names: set) -> list:
    """The calls in program of a function named in names, in the order of the source."""
    found, todo = [], list(program.items)
    while todo:
        x = todo.pop()
        if type(x) is list or type(x) is tuple:
            todo.extend(x)
        elif type(x) in NODE_CLASSES or type(x) is c.Def:
            if type(x) is c.App and type(x.fn) is c.Var and x.fn.name in names:
                found.append(x)
            todo.extend(getattr(x, name) for name in field_names(type(x)) if name not in ("span", "type", "op_span"))
    return sorted(found, key=lambda call: (call.span.start, -call.span.end, call.fn.name))


# %% [markdown]
# A `Sketch` collects the shapes of such a picture. `box` draws a rounded
# box with a centred label, in one of the styles of `lcompiler.drawing`,
# and returns its width; `arrow` draws a curve from the middle of a box's
# right side, at `(x1, y1)`, to the middle of another's side, at `(x2, y2)`
# (both `y`s are the tops of the boxes); `svg` puts the arrows under the
# boxes and gives the picture its description as its title. Each shape
# carries its `data-` attributes.

# %%
@dataclass
class Sketch:
    shapes: list = field(default_factory=list)
    arrows: list = field(default_factory=list)

    def box(self, kind: str, x: float, y: float, label: str, style: str, **data) -> float:
        w = len(label) * CHAR_W + 14
        fill, stroke = STYLES[style]
        self.shapes.append(f'<rect class="{kind}"{attributes(data)} x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
                           f'height="{BOX_H}" rx="5" fill="{fill}" stroke="{stroke}"/>')
        self.shapes.append(f'<text x="{x + w / 2:.1f}" y="{y + 15:.1f}" text-anchor="middle">{escape(label)}</text>')
        return w

    def arrow(self, kind: str, x1: float, y1: float, x2: float, y2: float, look: str, **data) -> None:
        middle, y1, y2 = (x1 + x2) / 2, y1 + BOX_H / 2, y2 + BOX_H / 2
        self.arrows.append(f'<path class="{kind}"{attributes(data)} d="M{x1:.1f},{y1:.1f} C{middle:.1f},{y1:.1f} '
                           f'{middle:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" {look} fill="none" marker-end="url(#arrow)"/>')

    def svg(self, width: float, height: float, alt: str) -> SVGText:
        return SVGText("\n".join(
            [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="12" fill="#0f172a">',
             f'<title>{escape(alt)}</title>',
             '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
             '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>',
             f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>', *self.arrows, *self.shapes, '</svg>']))


def attributes(data: dict) -> str:
    return "".join(f' data-{key}="{escape(value)}"' for key, value in data.items())


# %% [markdown]
# `calls_picture` runs the monomorphiser on the typed program, and lays out
# its polymorphic top-level definitions, their instances and the calls
# `calls_of` finds, in three columns, a box per row:

# %%
def calls_picture(source: Source) -> SVGText:
    """A program's polymorphic definitions, left; their copies, middle; the calls of the copies in the
    monomorphic program, right, with the source text of each; arrows from a definition to its copies,
    and from a call to the copy it calls."""
    typed, _ = check_types(source)
    m = Monomorphiser(typed)
    mono = m.run()
    polys = [poly for poly in m.bindings if poly.definition is not None]
    copies = [(poly, inst) for poly in polys for inst in poly.instances.values()]
    calls = calls_of(mono, {inst.name for _, inst in copies})
    row = lambda i: 34 + i * (BOX_H + 16)
    sketch = Sketch()
    labels = {poly.name: f"{poly.name} : {show_type(poly.scheme)}" for poly in polys}
    middle_x = 10 + max(len(label) * CHAR_W + 14 for label in labels.values()) + 6 * GAP
    where, right_x = {}, middle_x                       # where[copy] = (its left, right, top)
    for i, (_, inst) in enumerate(copies):
        w = sketch.box("copy", middle_x, row(i), f"{inst.name} : {show_type(inst.type)}", "green",
                       name=inst.name, type=show_type(inst.type))
        where[inst.name] = (middle_x, middle_x + w, row(i))
        right_x = max(right_x, middle_x + w + 6 * GAP)
    for poly in polys:
        tops = [where[inst.name][2] for inst in poly.instances.values()]
        y = (min(tops) + max(tops)) / 2
        w = sketch.box("definition", 10, y, labels[poly.name], "blue", name=poly.name, type=show_type(poly.scheme))
        for inst in poly.instances.values():
            left, _, top = where[inst.name]
            sketch.arrow("copied", 10 + w, y, left - 1, top, 'stroke="#475569"', **{"from": poly.name, "to": inst.name})
    widest = right_x
    for j, call in enumerate(calls):
        text = source.text[call.span.start:call.span.end]
        w = sketch.box("call", right_x, row(j), text, "plain", text=text)
        _, right, top = where[call.fn.name]
        sketch.arrow("calls", right_x, row(j), right + 1, top, 'stroke="#dc2626" stroke-dasharray="5,3"',
                     **{"from": text, "to": call.fn.name})
        widest = max(widest, right_x + w)
    captions = [(10, "polymorphic definitions"), (middle_x, "their copies"), (right_x, f"the calls in {source.name}")]
    sketch.shapes += [f'<text x="{x:.1f}" y="18" font-weight="bold">{escape(words)}</text>' for x, words in captions]
    width, height = max(widest, right_x + len(captions[-1][1]) * CHAR_W) + 10, row(max(len(copies), len(calls))) - 6
    alt = (f"Three columns: the polymorphic definitions of {source.name}, their copies, and the calls of the "
           "copies. " + " ".join(f"{poly.name}, of type {show_type(poly.scheme)}, is copied to "
                                  + ", ".join(f"{i.name} at {show_type(i.type)}" for i in poly.instances.values())
                                  + "." for poly in polys)
           + " " + " ".join(f"{source.text[call.span.start:call.span.end]} calls {call.fn.name}." for call in calls))
    return sketch.svg(width, height, alt)


calls_picture(SHOW)

# %% [markdown]
# Read it from the right. `show(pair(true))` holds two calls, and each went
# to a copy of its own: the outer one to `show_2`, at `(Bool, Bool) ->
# Unit`, the inner one to `pair`, the copy at `Bool`, which kept the name.
# Each copy is called from exactly one place here, since the program uses
# each definition at a different type each time; two calls at the same
# type would point at the same copy.

# %% [markdown]
# ## Checking the result
#
# The result of the pass is a core program whose every node records a
# ground type. Are these types right? For each kind of node, the typing
# rules of the core language say how its type relates to the types of its
# parts. Chapter 5 *infers* types by these rules. Here we only *check* them:
# every type is already written on the nodes, so checking is a single walk
# with an environment Γ of the variables in scope and their types. In the
# usual notation, Γ ⊢ e : τ reads "under Γ, e has type τ", and a rule
# says which judgements over the parts (above the line, here before the
# ⟹) give the judgement for the whole:
#
# | node | rule |
# |---|---|
# | literal | Γ ⊢ 3 : Int, Γ ⊢ true : Bool, Γ ⊢ "s" : String, Γ ⊢ () : Unit |
# | variable | x : τ ∈ Γ ⟹ Γ ⊢ x : τ (a global's type is its definition's) |
# | constructor | K of `data D<a…>` has fields σ1 … σn, Γ ⊢ ei : σi[a… := τ…] ⟹ Γ ⊢ K(e1, …, en) : D<τ…> |
# | tuple | Γ ⊢ ei : τi ⟹ Γ ⊢ (e1, …, en) : (τ1, …, τn) |
# | function | Γ, x : τ1 ⊢ e : τ2 ⟹ Γ ⊢ { x -> e } : τ1 -> τ2 |
# | call | Γ ⊢ f : τ1 -> τ2, Γ ⊢ a : τ1 ⟹ Γ ⊢ f(a) : τ2 |
# | arithmetic | Γ ⊢ a : Int, Γ ⊢ b : Int ⟹ Γ ⊢ a + b : Int (and `<`, … : Bool) |
# | equality | Γ ⊢ a : τ, Γ ⊢ b : τ, τ ∈ {Int, Bool, String} ⟹ Γ ⊢ a == b : Bool |
# | `if` | Γ ⊢ c : Bool, Γ ⊢ a : τ, Γ ⊢ b : τ ⟹ Γ ⊢ if (c) a else b : τ |
# | `match` | Γ ⊢ e : σ, each pattern pi : σ binding Γi, Γ, Γi ⊢ ei : τ ⟹ Γ ⊢ match (e) { pi -> ei } : τ |
# | `let`, `var` | Γ ⊢ v : σ, Γ, x : σ ⊢ e : τ ⟹ Γ ⊢ let x = v; e : τ |
# | assignment | x : τ ∈ Γ, Γ ⊢ v : τ ⟹ Γ ⊢ x := v : Unit |
# | `while` | Γ ⊢ c : Bool, Γ ⊢ e : τ ⟹ Γ ⊢ while (c) e : Unit |
# | sequence | Γ ⊢ a : σ, Γ ⊢ b : τ ⟹ Γ ⊢ { a; b } : τ |
# | `print`, `assert` | Γ ⊢ ei : τi ⟹ Γ ⊢ print(e1, …) : Unit; Γ ⊢ c : Bool ⟹ Γ ⊢ assert(c) : Unit |
# | `raise` | Γ ⊢ e : Exn ⟹ Γ ⊢ raise(e) : τ, for any τ |
# | `try` | Γ ⊢ e : τ, each pattern pi : Exn binding Γi, Γ, Γi ⊢ ei : τ ⟹ Γ ⊢ try { e } catch { pi -> ei } : τ |
#
# In the constructor's rule, σi[a… := τ…] is the field's declared type σi
# with the declaration's parameters a… replaced by the type's arguments τ…:
# the fields of `Cons` in a `List<Int>` are `Int` and `List<Int>`.
#
# There are no type schemes in these rules. After monomorphisation every
# binding has exactly one type, so the rules are those of the simply typed
# core language, and a rule fails only if the compiler made a mistake.
# Such a mistake is reported as an `IllTyped` error, located at the node
# that breaks the rule, in the format of every other diagnostic of the
# compiler ([appendix A](A_errors.ipynb)'s `Diagnostic`, whose first
# examples are chapter 4a's syntax errors). Its exit status is 3, a
# compiler bug.

# %%
#| export
from lcompiler.errors import Diagnostic

INT, BOOL, STRING = TCon("Int"), TCon("Bool"), TCon("String")


class IllTyped(Diagnostic):
    """A typing rule broken by a program that the compiler made: a bug of the compiler."""
    kind = "internal compiler error: ill-typed after monomorphisation"
    status = 3

# %% [markdown]
# A constructor's field types are written in the `data` declaration, in
# L's syntax, over the declaration's parameters: `Cons(a, List<a>)`.
# `field_type` turns one into a type at given type arguments: the
# σi[a… := τ…] of the constructor's rule. Chapter 10's printers need the
# same function.

# %%
#| export
def field_type(t, subst: dict):
    """A constructor's field type, written in L, at the type arguments subst: a resolved type."""
    if isinstance(t, s.TVar):
        return subst[t.name]
    if isinstance(t, s.TName):
        return TCon(t.name, tuple(field_type(a, subst) for a in t.args))
    if isinstance(t, s.TTuple):
        return TCon("*", tuple(field_type(i, subst) for i in t.items))
    if isinstance(t, s.TFun):
        return TCon("->", (field_type(t.arg, subst), field_type(t.result, subst)))
    raise TypeError(f"not a field type: {t!r}")

# %% [markdown]
# The `Checker` knows each constructor's type and fields, and the type of
# each global. `fail` raises the located error at a node. Every node of
# the corpus has a span, but a span is optional in chapter 4b's classes:
# a node without one would be reported at the last node checked before it
# that has one (`where`), usually the node around it.
# `ground` reads a node's type, and fails if there is none or if it has a
# type variable.

# %%
#| export
class Checker:
    """The typing rules of the core language, checked on a monomorphic program's recorded types."""

    def __init__(self, program: c.Program):
        self.constructors = {k.name: (d.name, [p.name for p in d.params], [f.type for f in k.fields or []])
                             for d in program.items if isinstance(d, s.Data) for k in d.constructors}
        self.globals = {d.name.name: d.name.type for d in program.items if type(d) is c.Def}
        self.where = program.span             # the innermost span met so far

    def fail(self, node, message: str):
        raise IllTyped(message, getattr(node, "span", None) or self.where)

    def ground(self, node):
        t = node.type
        if t is None:
            self.fail(node, f"no type recorded on {type(node).__name__}")
        if params(t):
            self.fail(node, f"the type {show_type(t)} has a type variable")
        return t

    def same(self, found, wanted, node, what: str):
        """Fail unless found == wanted."""
        if found != wanted:
            self.fail(node, f"{what}: {show_type(found)} where {show_type(wanted)} is wanted")

    def fields(self, name: str, t, node) -> list:
        """The field types of constructor name in a value of type t."""
        data, parameters, written = self.constructors[name]
        if type(t) is not TCon or t.name != data or len(t.args) != len(parameters):
            self.fail(node, f"{name} has the type {show_type(t)}, not a {data}")
        return [field_type(f, dict(zip(parameters, t.args))) for f in written]

# %% [markdown]
# `expr` checks one expression: its type is ground, and its rule holds.
# It dispatches on the class of the node with a `match` statement, and a
# node of an unknown class is an error too. `program` checks each
# definition (its value has the definition's type) and each statement.

# %%
#| export
class Checker(Checker):
    def expr(self, e, env: dict) -> None:
        """Check e under env (variable -> type)."""
        if getattr(e, "span", None) is not None:
            self.where = e.span
        t = self.ground(e)
        match e:
            case c.Lit() | c.Var() | c.Con() | c.Tuple():
                self.value(e, t, env)
            case c.Lambda() | c.App():
                self.function(e, t, env)
            case c.Prim() | c.If() | c.Print() | c.Assert():
                self.operation(e, t, env)
            case c.Let() | c.LetVar() | c.Assign() | c.While() | c.Seq():
                self.binding(e, t, env)
            case c.Match():
                self.match(e, t, env)
            case c.Raise() | c.Try():
                self.exceptions(e, t, env)
            case _:
                self.fail(e, f"not a core expression: {type(e).__name__}")

    def program(self, program: c.Program) -> None:
        with recursion_limit(50 * NESTING_LIMIT):
            for item in program.items:
                if type(item) is c.Def:
                    self.where = item.span or self.where
                    self.same(item.value.type, item.name.type, item, f"the value of {item.name.name}")
                    self.expr(item.value, {})
                elif not isinstance(item, s.Data):
                    self.expr(item, {})

# %% [markdown]
# The rules for values. A builtin variable (`true`, `false`) is a `Bool`;
# a global has its definition's type; a local has the type its binder gave
# it in Γ.

# %%
#| export
class Checker(Checker):
    def value(self, e, t, env: dict) -> None:
        match e:
            case c.Lit(value=v):
                self.same(t, BOOL if type(v) is bool else INT if type(v) is int else
                          STRING if type(v) is str else UNIT, e, "a literal")
            case c.Var(name=name, kind=kind):
                bound = BOOL if kind == "builtin" else self.globals.get(name) if kind == "global" else env.get(name)
                if bound is None:
                    self.fail(e, f"{name} is not bound here")
                self.same(t, bound, e, f"the variable {name}")
            case c.Con(name=name, args=args):
                for arg, wanted in zip(args, self.fields(name, t, e)):
                    self.same(arg.type, wanted, arg, f"a field of {name}")
                    self.expr(arg, env)
            case c.Tuple(items=items):
                self.same(t, TCon("*", tuple(i.type for i in items)), e, "a tuple")
                for i in items:
                    self.expr(i, env)

# %% [markdown]
# A function's body is checked with its parameter added to Γ; a call's
# callee must be a function from the argument's type to the call's type.

# %%
#| export
class Checker(Checker):
    def function(self, e, t, env: dict) -> None:
        match e:
            case c.Lambda(param=x, body=body):
                if t.name != "->":
                    self.fail(e, f"a function of type {show_type(t)}")
                self.expr(body, {**env, x: t.args[0]})
                self.same(body.type, t.args[1], body, "the body of a function")
            case c.App(fn=fn, arg=arg):
                self.same(fn.type, TCon("->", (arg.type, t)), e, "the callee of a call")
                self.expr(fn, env)
                self.expr(arg, env)

# %% [markdown]
# Primitive operations, conditionals, `print` and `assert`. A primitive's
# operands and result must fit the type of its row in
# [chapter 4b](04b_meaning.ipynb)'s table of primitives, the one that
# chapter 5's inference reads: a base type where the row names one, one
# type wherever the row repeats a type variable, and, for a `''a`, one of
# the types `==` can compare. An `if` records how it was written (`form`):
# `&&` and `||` are `if`s on Booleans, and an `if` without `else` has the
# type `Unit`.

# %%
#| export
from lcompiler.primitives import COMPARABLE, PRIMITIVES
from lcompiler.types import BASE_TYPES


def fits(notation: tuple, found: list) -> bool:
    """Do these types fit a primitive's type, written in the notation of chapter 4b's table?"""
    if len(notation) != len(found):
        return False
    variables = {}
    for wanted, t in zip(notation, found):
        if not wanted.startswith("'"):
            if t != BASE_TYPES[wanted]:
                return False
        elif variables.setdefault(wanted, t) != t:
            return False
        elif wanted.startswith("''") and t not in [BASE_TYPES[name] for name in COMPARABLE]:
            return False
    return True


class Checker(Checker):
    def operation(self, e, t, env: dict) -> None:
        match e:
            case c.Prim(op=op, args=args):
                for a in args:
                    self.expr(a, env)
                kinds = [a.type for a in args]
                if not fits(PRIMITIVES[op].type, kinds + [t]):
                    self.fail(e, f"{op} on {', '.join(map(show_type, kinds))} giving {show_type(t)}")
            case c.If(cond=cond, then=then, orelse=orelse, form=form):
                wanted = {"if": t, "if without else": UNIT, "&&": BOOL, "||": BOOL}[form]
                self.same(t, wanted, e, f"the result of {form}")
                self.same(cond.type, BOOL, cond, "a condition")
                self.same(then.type, t, then, "a branch")
                self.same(orelse.type, t, orelse, "a branch")
                for part in (cond, then, orelse):
                    self.expr(part, env)
            case c.Print(args=args):
                self.same(t, UNIT, e, "print")
                for a in args:
                    self.expr(a, env)
            case c.Assert(cond=cond):
                self.same(t, UNIT, e, "assert")
                self.same(cond.type, BOOL, cond, "an assertion")
                self.expr(cond, env)

# %% [markdown]
# Bindings and sequences. A `let` and a `var` add their name to Γ for
# their body; an assignment stores a value of the variable's own type.

# %%
#| export
class Checker(Checker):
    def binding(self, e, t, env: dict) -> None:
        match e:
            case c.Let(name=x, value=v, body=body) | c.LetVar(name=x, value=v, body=body):
                self.expr(v, env)
                self.same(body.type, t, body, f"the body of the binding of {x}")
                self.expr(body, {**env, x: v.type})
            case c.Assign(target=target, value=v):
                self.same(t, UNIT, e, "an assignment")
                self.same(v.type, env.get(target.name), v, f"the value assigned to {target.name}")
                self.same(target.type, env.get(target.name), target, f"the variable {target.name}")
                self.expr(v, env)
            case c.While(cond=cond, body=body):
                self.same(t, UNIT, e, "a while loop")
                self.same(cond.type, BOOL, cond, "a loop's condition")
                self.expr(cond, env)
                self.expr(body, env)
            case c.Seq(first=first, second=second):
                self.same(t, second.type, e, "a sequence")
                self.expr(first, env)
                self.expr(second, env)

# %% [markdown]
# A `match` checks the scrutinee, then each clause: the pattern against
# the scrutinee's type, which adds the pattern's variables to a copy of Γ,
# then the body under it, at the `match`'s type. A pattern records its
# type too, and the parts of a tuple or constructor pattern are checked
# against the component or field types.

# %%
#| export
class Checker(Checker):
    def match(self, e: c.Match, t, env: dict) -> None:
        self.expr(e.scrutinee, env)
        for p, body in e.clauses:
            inner = dict(env)
            self.pattern(p, e.scrutinee.type, inner)
            self.same(body.type, t, body, "a clause")
            self.expr(body, inner)

    def pattern(self, p, t, env: dict) -> None:
        """Check pattern p against the type t, adding the variables it binds to env."""
        self.same(self.ground(p), t, p, "a pattern")
        match p:
            case s.PVar(name=x):
                env[x] = t
            case s.PInt():
                self.same(t, INT, p, "an integer pattern")
            case s.PUnit():
                self.same(t, UNIT, p, "a unit pattern")
            case s.PTuple(items=items):
                if t.name != "*" or len(t.args) != len(items):
                    self.fail(p, f"a tuple pattern of {len(items)} against {show_type(t)}")
                for q, u in zip(items, t.args):
                    self.pattern(q, u, env)
            case s.PCon(name=name, args=args):
                for q, u in zip(args or [], self.fields(name, t, p)):
                    self.pattern(q, u, env)


# %% [markdown]
# Exceptions: `raise`'s argument is an `Exn`, and its result any type, which
# the copy has made ground like every other; a `try`'s block and clauses
# have the `try`'s type, and its clauses' patterns the type `Exn`. `Exn`
# has no parameter (chapter 5 says why), so there is nothing to copy for
# exceptions: `exception Failure(String)` is one constructor at one type,
# and a program with exceptions gets exactly the copies it would get
# without them.

# %%
#| export
from lcompiler.types import EXN


class Checker(Checker):
    def exceptions(self, e, t, env: dict) -> None:
        match e:
            case c.Raise(arg=arg):
                self.same(arg.type, EXN, arg, "the argument of raise")
                self.expr(arg, env)
            case c.Try(body=body, clauses=clauses):
                self.same(body.type, t, body, "the block of a try")
                self.expr(body, env)
                for p, clause in clauses:
                    inner = dict(env)
                    self.pattern(p, EXN, inner)
                    self.same(clause.type, t, clause, "a clause of a catch")
                    self.expr(clause, inner)

# %% [markdown]
# `check` runs the checker over a program.

# %%
#| export
def check(program: c.Program) -> None:
    """Verify the typing rules on the types a monomorphic program records; IllTyped at the first
    node that breaks one."""
    Checker(program).program(program)

# %% [markdown]
# The worked example passes the check. To see it fail, we break its
# result by hand: the first statement's call `show(3)` is made to call
# `show_1`, the instance for lists of strings:

# %% tags=["raises-exception"]
result = monomorphise(check_types(SHOW)[0])
check(result)
print("the worked example: well typed")

call = next(item for item in result.items if type(item) is c.App)
call.fn.name, call.fn.type = "show_1", result.items[2].name.type
try:
    check(result)
except IllTyped as error:
    print(error.render())

# %% [markdown]
# ### The leak the checker found: a hole in chapter 5
#
# The checker found a real problem in chapter 5 before anyone else did,
# and the first edition of this chapter called it harmless. It was not: it
# was a soundness hole in chapter 5's levels, the one that
# [chapter 5](05_types.ipynb)'s section "A weak type read by a later
# definition" tells, and chapter 5 has closed it. The program below is the one the checker found. `xs =
# id(Nil)` is not a value, so its type `List<_a>` is weak. The later
# definition `f` reads `xs`, and chapter 5 used to let `f`'s
# generalisation take `xs`'s unknown too: the program was accepted, with
# `f(2)` reading `xs` as a `List<Int>` and `f(3)` as a `List<String>`. This
# one still ran correctly, since the only list `xs` can hold is `Nil`,
# which is the same at every type. But a cell instead of `Nil` (chapter
# 5's `swap`) stored an `Int` and read it back as a `String`, and the
# compiled program crashed. Chapter 5 now rejects this program, where the
# second use contradicts the first:

# %%
from lcompiler.errors import CompileError

LEAK = Source("leak.l", """data List<a> { Cons(a, List<a>); Nil }
def id(x) = x
def xs = id(Nil)
def f(y) = (y, xs)
def a = f(2)
match (a) { (n, Cons(s, _)) -> print(s + 1); (n, Nil) -> print("nil") }
match (f(3)) { (n, Cons(s, _)) -> print(s == "x"); (n, Nil) -> print(n) }
""")
try:
    check_types(LEAK)
except CompileError as error:
    print(error.render())

# %% [markdown]
# What did the checker see? To look, we put chapter 5's first edition back
# for a moment: `levels_not_lowered` makes its `lower` do nothing, which was
# the bug. The pass then shares `xs` at `List<Unit>`, while the copies of
# `f` read it at `List<Int>` and `List<String>`, and the checker says where
# the types recorded on the program stop agreeing:

# %% tags=["raises-exception"]
from contextlib import contextmanager

from lcompiler.types import Inference


@contextmanager
def levels_not_lowered():
    """Chapter 5's inference as its first edition had it: a weak definition's unknowns stay one
    level too deep, and a later definition that reads it generalises them."""
    lower = Inference.lower
    Inference.lower = lambda self, t: None
    try:
        yield
    finally:
        Inference.lower = lower


with levels_not_lowered():
    leaked = monomorphise(check_types(LEAK)[0])
try:
    check(leaked)
except IllTyped as error:
    print(error.render())

# %% [markdown]
# ## What it costs
#
# `measure` counts three things before and after the pass: the
# definitions, the function literals and the core nodes. It also counts the
# instances of each polymorphic binding. A `let` is labelled with its place
# in the source, and its instances are summed over all the copies of the
# function it is in.

# %%
#| export
@dataclass
class Statistics:
    definitions: tuple       # top-level definitions (before, after)
    functions: tuple         # function literals, top-level or not (before, after)
    nodes: tuple             # core expression nodes (before, after)
    instances: dict          # polymorphic binding -> how many copies of it the result holds


def census(program: c.Program) -> tuple:
    """(definitions, function literals, expression nodes) of a core program."""
    counts, todo = [0, 0, 0], list(program.items)
    while todo:
        x = todo.pop()
        if type(x) is list or type(x) is tuple:
            todo.extend(x)
        elif isinstance(x, c.Def):
            counts[0] += 1
            todo.append(x.value)
        elif isinstance(x, EXPRESSIONS):
            counts[1] += type(x) is c.Lambda
            counts[2] += 1
            todo.extend(getattr(x, f.name) for f in fields(x) if f.name not in ("span", "type", "op_span"))
    return tuple(counts)

# %%
#| export
def measure(program: c.Program) -> tuple:
    """monomorphise(program), and its Statistics."""
    mono = Monomorphiser(program)
    result = mono.run()
    instances = {}
    for poly in mono.bindings:       # a let's instances, summed over the copies of its function
        line, col = poly.span.source.line_col(poly.span.start)
        label = poly.name if poly.definition is not None else f"{poly.name} (let, {line}:{col})"
        instances[label] = instances.get(label, 0) + len(poly.instances)
    before, after = census(program), census(result)
    return result, Statistics(*zip(before, after), instances)

# %% [markdown]
# On the worked example:

# %%
print(measure(check_types(SHOW)[0])[1])

# %% [markdown]
# Over the programs of the test corpus that type-check and run
# (`tests/corpus/run`, and `tests/corpus/fail`, whose programs stop with a
# runtime error) and the examples, the programs `tests/test_mono.py` runs,
# the pass adds this much code:

# %%
from collections import Counter
from pathlib import Path

corpus = sorted(Path("../tests/corpus/run").glob("*.l")) + sorted(Path("../tests/corpus/fail").glob("*.l")) \
    + sorted(Path("../examples").glob("*.l"))
totals, copies, grown, monomorphic = Counter(), Counter(), 0, 0
for path in corpus:
    typed, _ = check_types(Source(path.name, path.read_text()))
    _, stats = measure(typed)
    for what in ("definitions", "functions", "nodes"):
        before, after = getattr(stats, what)
        totals[what, "before"] += before
        totals[what, "after"] += after
    copies.update(stats.instances.values())
    grown += stats.nodes[1] > stats.nodes[0]
    monomorphic += not stats.instances
print(f"{len(corpus)} programs: {monomorphic} without a polymorphic binding, {grown} that grow")
for what in ("definitions", "functions", "nodes"):
    b, a = totals[what, "before"], totals[what, "after"]
    print(f"{what:12} {b:5} -> {a:5}  (+{100 * (a - b) / b:.1f}%)")
print("instances per polymorphic binding:", dict(sorted(copies.items())))
print(f"bindings used at one type or two: {copies[1] + copies[2]} of {copies.total()}")

# %% [markdown]
# Most programs have no polymorphic binding at all, and most polymorphic
# bindings are used at one type or two. The corpus grows by about five
# per cent in core nodes (the line `nodes` above), and the copies add no
# work at run time. That measurement is what the choice rests on.

# %% [markdown]
# ## The pipeline's stage
#
# Monomorphisation is the pipeline's stage `mono`, between the types of
# chapter 5 and the CPS of chapter 7. The stage also notes the program's
# `data` declarations for the back end: each type's parameters, and its
# constructors with their field types. Chapter 10's printers and tag tests
# need them, and after CPS conversion they are no longer in the program.
# And it runs the checker on the program it returns, every time (the next
# section says why).

# %%
#| export
def data_declarations(core_program: c.Program) -> dict:
    """Each data type's parameters and constructors (name, field types), from the core program."""
    datas = {}
    for item in core_program.items:
        if isinstance(item, s.Data):
            datas[item.name] = ([p.name for p in item.params],
                                [(k.name, [f.type for f in k.fields or []]) for k in item.constructors])
    return datas

# %%
print({name: (parameters, [k for k, _ in constructors])
       for name, (parameters, constructors) in data_declarations(check_types(SHOW)[0]).items()})

# %% [markdown]
# The stage hands on the monomorphic program, and leaves the declarations
# in the unit's field `datas`. Its checker is this chapter's `check`, which it
# runs on every compilation (see below); its interpreter is still chapter 4b's.

# %%
#| export
from lcompiler import pipeline
from lcompiler.core import pretty_core
from lcompiler.interp import Interpreter


@pipeline.stage("mono", show=lambda program, unit: pretty_core(program).rstrip("\n"),
                check=lambda program, unit: check(program),
                interpret=lambda program, unit, out: Interpreter(out).run(program))
def mono_stage(program: c.Program, unit: pipeline.Unit) -> c.Program:
    unit.datas = data_declarations(program)
    result = monomorphise(program)
    check(result)          # an ill-typed result is a located internal error (IllTyped, status 3)
    return result


# %% [markdown]
# ### The checker on every compilation, and what it costs
#
# The checker was written to test this pass, and it found a bug of chapter
# 5 instead. That is the reason to run it on every compilation, not only in
# the tests: a type checker can be wrong in ways no test has thought of,
# and the back end trusts the types it records — it prints a `String` by
# following a pointer. With the checker in the stage, a program typed
# wrongly stops the compiler with exit status 3, a compiler bug, at the
# place where the types stop agreeing, before any code is generated. (GHC
# has the same kind of check, its "Core Lint", behind a flag.) Here is
# chapter 5's first edition again, on the reader's program of chapter 5
# ("A weak type read by a later definition"), which the first edition compiled into a program that died of a segmentation fault:

# %% tags=["raises-exception"]
import contextlib
import tempfile

from lcompiler.cli import lc

READER = """data List<t> { Cons(t, List<t>); Nil }
def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
def swap = make_cell()
def g(y) = swap
g(1)(Cons(1, Nil))
g(2)(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
"""
with levels_not_lowered(), tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("reader.l").write_text(READER)
    print("exit status", lc("run", "reader.l"))

# %% [markdown]
# The error points at `swap` in `def g(y) = swap`. The copy of `g` for the
# first call reads `swap` as a `List<Int> -> List<Int>`; but `swap` is not a
# value, so there is one `swap`, and its recorded type still has the
# variable that `g` took from it, which nothing fixed: the pass made it
# `Unit`, as it does for every such variable. Nothing ran. (With chapter 5
# as it is, the program is a type error at its second use, exit status 1.) The pass itself reports the other way
# such a bug can show: a use whose type is not an instance of its binding's
# type at all, which `match_type` cannot match, is the same `IllTyped`
# error, at the use.
#
# What does it cost? `bench/mono_check.py` takes the 10,000-line program
# of `bench/compile_speed.py` and times, in turn, seven times each, three
# things: its whole compilation as `lc` runs it (the stage `mono` timed
# within it), monomorphisation alone, and the checker alone on the
# monomorphised program; it records every run, the medians and the
# machine in `bench/mono_check.json`:

# %%
import json

cost = json.loads(Path("../bench/mono_check.json").read_text())
machine, seconds, runs = cost["machine"], cost["seconds"], cost["runs"]
print(f"{cost['lines']} lines, {cost['repeat']} runs: the median [the fastest, the slowest]; "
      f"{machine['cpu']}, {machine['cores']} cores")
for key, label in [("compile", "the whole compilation"), ("mono stage", "the stage mono"),
                   ("monomorphise", "  monomorphisation"), ("check", "  the checker")]:
    times = [run[key] for run in runs]
    print(f"  {label:23} {seconds[key]:5.2f} s  [{min(times):.2f}, {max(times):.2f}]")
slowest_check, fastest_mono = max(run["check"] for run in runs), min(run["monomorphise"] for run in runs)
print(f"the checker: {100 * seconds['check'] / seconds['compile']:.1f} % of the whole compilation; its slowest run, "
      f"{slowest_check:.3f} s, {'is quicker' if slowest_check < fastest_mono else 'is not quicker'} than "
      f"monomorphisation's fastest, {fastest_mono:.3f} s")

# %% [markdown]
# The checker takes less time than the pass it checks, in every run, and a
# few per cent of the whole compilation: a small price for a compiler that cannot turn a
# mistake of its own type checker into a program that crashes.

# %% [markdown]
# ## The promises, tested
#
# `tests/test_mono.py` runs the pass on every program of the corpus and
# every example, and checks four things. No type variable is left anywhere.
# `check` accepts the result. The input is unchanged. And three
# interpreters agree with the original program: the reference interpreter,
# an interpreter whose `print` works from the static types (as the back
# end's does), and the CPS interpreter after chapters 7 and 8. It then
# checks the cases that matter one by one: a function at four types, a
# polymorphic `let` inside a polymorphic function, mutually recursive
# polymorphic definitions, a polymorphic function passed as an argument, a
# type fixed by nothing, non-function definitions read too early, match
# failures inside copies, names that could collide, shadowing. It runs the
# same checks on random programs. It also checks that `check` fails, at
# the right place and with the right message, on one program broken by
# hand in one place at a time: a literal, a variable, a call, a primitive,
# a branch, a pattern, a definition, a type variable left behind. Last,
# with chapter 5's first edition put back, it checks that the
# checker finds the leak above, and that the pipeline stops the reader's
# program of chapter 5 and the leak at compile time with the checker's error (status 3),
# while with chapter 5 as it is the leak is a type error. The programs of
# `tests/corpus/exceptions/` go through the pass too (the reference
# interpreter and the one driven by types must agree before and after it;
# the two that raise a million times are left to `tests/test_exceptions.py`),
# and the checker is shown to catch a
# `raise` of a non-exception, a `try` whose block or clause has another
# type than the `try`, and a clause whose pattern is not an `Exn`.

# %% [markdown]
# ## Exercises
#
# 1. `def twice(f) = { x -> f(f(x)) }` used as `twice(twice)(g)` asks for
#    `twice` at two types, one built from the other. When `g` is an
#    `Int -> Int`, `lc show mono` shows two copies and the call
#    `twice(twice_1)(g)`: the outer `twice` is at
#    `((Int -> Int) -> Int -> Int) -> …`, `twice_1` at
#    `(Int -> Int) -> Int -> Int` (`lc show mono` prints no types; the
#    monomorphiser's `bindings` have them, as `instances_picture` shows). Write a
#    chain of such definitions where the number of instances grows
#    exponentially with the length of the program, and measure it with
#    `measure`. What does Hindley–Milner's lack of polymorphic recursion
#    guarantee, and what does it not?
# 2. Two instances of a function whose types differ only in what they
#    never look at (`length` on `List<Int>` and on `List<String>`) compile
#    to the same machine code. Merge instances whose bodies are equal once
#    every type that only `print` and the match failures look at is erased.
#    Measure the corpus again.
# 3. `check` reports the first broken rule. Make it collect every broken
#    rule in the program instead. `tests/test_mono.py` breaks its program
#    `BROKEN` in eight ways, one at a time. Which of them give more than
#    one error, and why?
# 4. Run `python tools/soundness.py --bug --no-compiled` (`--bug` puts
#    chapter 5's first edition back, as `levels_not_lowered` does above), then without
#    `--no-compiled`. Which findings does only OCaml see, which does only
#    this chapter's checker see, and why can the checker see a mistake in a
#    program that OCaml accepts? (Look at `leak.l`.)
# 5. `def protect(f, x, d) = try { f(x) } catch { _ -> d }` used at two
#    types makes two copies. How many copies of its `catch` clause are
#    there, and of the type `Exn`? Check with `measure`.
#
# <details><summary>Solutions</summary>
#
# 1. Let each definition use the one before at two types, its argument's
#    and a bigger one: `def p0(x) = (x, 1)`, then
#    `def p{i}(x) = p{i-1}(p{i-1}(x))` for i = 1 … n, and `print(pn(0))`.
#    `p{i}` at a type τ needs `p{i-1}` at τ and at the type that
#    `p{i-1}` returns for τ (`(τ, Int)` for `p0`, τ paired with more
#    `Int`s further up), so `pn`
#    used once needs 2 instances of `p{n-1}`, 4 of `p{n-2}`, and 2ⁿ of
#    `p0`, all at different types: the program grows by one line per step,
#    the copies double. The cell below builds the chain for n = 1 … 8 and
#    prints `measure`'s definitions and nodes before and after, and the
#    instances of `p0`. What Hindley–Milner guarantees is that this
#    *terminates*: without polymorphic recursion a function is used at one
#    type inside its own component, so every instance of a definition asks
#    only for instances of definitions of earlier components, at types
#    made of its own, and the requests form a finite tree over the
#    program's components. What it does not guarantee is that the tree is
#    small: its size, and the size of the types in it (the last `p0`
#    takes a tuple nested 2ⁿ − 1 deep), can be exponential in the length
#    of the program — just as inferring an ML type can take exponential
#    time on programs written to make it (Mairson 1990; Kfoury, Tiuryn and
#    Urzyczyn 1990, as chapter 5 tells). Real programs are not written
#    that way, which is what the corpus measurement of "What it costs"
#    says.
# 2. The back end looks at a type in five places: `print`, a match that
#    can fail (its error prints the value), the layout of a block it
#    allocates (chapter 10's `may_point`: is the word a pointer or not?),
#    its calling convention (a parameter whose type is a tuple is
#    passed as its components, a word each), and `==` and `!=`, which
#    compare two `String`s by their characters. The last cannot tell two
#    copies apart: chapter 5 never leaves `==` at a type variable (it
#    defaults it to `Int`), so every copy compares at the same types.
#    Everywhere else a word is a word. So erase every node's type to its *shape* — a tuple's to the
#    shapes of its components, any other to "pointer or not" — keep the
#    full type of the arguments of a `print` and of the value matched by a
#    match whose clauses are not exhaustive (chapter 5's
#    `Patterns.missing` says which), and compare the
#    instances of a binding by their code with every instance name read
#    as its binding's name: `length` on a `List<Int>` and on a
#    `List<String>` then have the same key, and `zip` of
#    `tests/corpus/fail/clauses_fn_no_match_tuple.l` keeps its two
#    instances, since its match can fail and print the pair it met, a
#    `(List<Int>, List<Int>)` in one instance and a
#    `(List<Int>, List<Unit>)` in the other. The cell below
#    counts, over the corpus and the examples, the top-level instances of
#    bindings used at two types or more, and how many keys they have. Two
#    cautions. Reading every instance of a callee as the same is right only
#    if they are merged too; the exact answer refines the groups until
#    they are stable, as the minimisation of an automaton does, and may
#    merge fewer. And the merged copies are only code: `lc` would gain a
#    smaller binary, not a faster one.
# 3. Let `fail` record the error instead of raising it, and go on. Going
#    on needs a type, so the checker goes on with the one the rule
#    *wants* — a pattern binds its variable at the type of the value
#    matched, not the broken type recorded on it — and `fields`, which
#    cannot list the fields of a constructor at a type not its own, gives
#    none. `Collecting` in `tests/test_mono.py` does
#    this, and runs every damage of the test suite's `BROKEN` program. One
#    broken type is read by two rules, the rule of the node that has it
#    and the rule of the node that uses it, so a damaged type can give two
#    errors where the damage to a name or to a call's type gives one: the
#    literal `1` made a `Bool` breaks "a literal" and the `+` over it; the
#    `x` of a branch made a `String` breaks the `if` and the variable rule
#    (x is an `Int` in Γ); `n` declared a `String` breaks its definition
#    and its use in `Cons(n, Nil)`; and the type variable left on `"s"`
#    is reported, then compared with `String`. The broken pattern gives one,
#    because the checker binds `x` at the type it wants; so does the
#    literal `0` of `x > 0` changed whole into `true`, value and type,
#    which only the `>` over it breaks.
# 4. Without `--no-compiled` each program L accepts is also compiled, and
#    the stage `mono` runs this chapter's checker on it. (Each run prints
#    its counts; `--programs 300` makes it shorter than the default.) The
#    first run finds programs that the buggy L accepts and OCaml rejects:
#    a weak type read at two types through a definition. The second,
#    which compiles, stops every such program it meets with the checker's
#    internal error (status 3), and stops more: programs that OCaml
#    *accepts*. None is seen by OCaml alone, since a weak binding read
#    at two types is one copy read at two types, which the checker sees.
#    The run that chapter 5 records in `tests/soundness.json` shows it; the
#    last cell below reads it, and checks that every program with a
#    finding is one that the compiled run stopped. `leak.l` shows why the
#    checker sees more. OCaml accepts it, and is right to: its value
#    restriction is the relaxed one, and `xs = id(Nil)` gets `'a list`,
#    generalised, since `'a` occurs only where no value of it can be
#    stored, and the program prints `nil`, then `3`. L's first edition
#    accepts it too, but with *wrong types*: it generalised `xs`'s unknown
#    inside `f` while `xs` itself stayed one copy. OCaml judges
#    whether the program can be typed; the checker judges the types this
#    compiler recorded, its proof, and a wrong proof of a true statement is
#    still a bug, one that the next program, with a cell in place of
#    `Nil`, turns into a crash.
# 5. Two copies of `protect`, so two of its `try` and of its clause — each
#    copy is a whole function body — but `Exn` is one data type, never
#    copied: it has no parameter, so the clause's pattern `_` has the type
#    `Exn` in both copies, and `data_declarations` lists `Exn` once.
#    `measure` reports `protect` with two instances, and the program's one
#    `data Exn` item is the same after the pass as before; the last cell
#    below shows both.
#
# </details>
#
# Exercise 1's chain, for n = 1 … 8: definitions and nodes before and after
# the pass, and the instances of `p0`:

# %%
print(f"{'n':>2} {'definitions':>12} {'nodes':>12} {'copies of p0':>13}")
for n in range(1, 9):
    chain = "def p0(x) = (x, 1)\n" + "".join(f"def p{i}(x) = p{i - 1}(p{i - 1}(x))\n" for i in range(1, n + 1))
    _, stats = measure(check_types(Source("chain.l", chain + f"print(p{n}(0))\n"))[0])
    print(f"{n:>2} {stats.definitions[0]:>5} -> {stats.definitions[1]:<4} {stats.nodes[0]:>5} -> {stats.nodes[1]:<4}"
          f" {stats.instances['p0']:>13}")

# %% [markdown]
# Exercise 2's keys: an instance's code as the back end sees it, and the
# instances of the corpus's polymorphic definitions that the keys would
# merge:

# %%
from lcompiler.types import Patterns


def shape(t):
    """How the back end holds a value of type t: a tuple as its components (chapter 10 passes a
    tuple parameter as its words), anything else as one word that may or may not be a pointer."""
    if type(t) is TCon and t.name == "*":
        return tuple(shape(a) for a in t.args)
    return t is not None and not (type(t) is TCon and t.name in ("Int", "Bool", "Unit", "String"))


def erased_key(value, base: dict, patterns: Patterns) -> tuple:
    """The code of an instance with every instance named after its binding, the full type where print
    or a match that can fail reads it, and elsewhere only its shape."""
    keys, todo = [], [value]
    while todo:
        x = todo.pop()
        if isinstance(x, (list, tuple)):
            todo.extend(reversed(x))
            continue
        if not hasattr(x, "__dataclass_fields__"):
            keys.append(repr(x))
            continue
        if type(x) is c.Print:
            keys.append(("print", tuple(show_type(a.type) for a in x.args)))
        elif type(x) is c.Match and patterns.missing([[p] for p, _ in x.clauses], 1) is not None:
            keys.append(("match that can fail", show_type(x.scrutinee.type)))
        held = shape(getattr(x, "type", None))
        keys.append(("var", base.get(x.name, x.name), held) if type(x) is c.Var else (type(x).__name__, held))
        todo.extend(getattr(x, f.name) for f in fields(x) if f.name not in ("span", "type", "op_span", "name"))
    return tuple(keys)


copies, kept = 0, 0
for path in corpus:
    typed, _ = check_types(Source(path.name, path.read_text()))
    patterns = Patterns([d for d in typed.items if isinstance(d, s.Data)])
    mono = Monomorphiser(typed)
    mono.run()
    base = {i.name: poly.name for poly in mono.bindings for i in poly.instances.values()}
    for poly in mono.bindings:
        if poly.definition is not None and len(poly.instances) > 1:
            keys = {erased_key(i.value.value, base, patterns) for i in poly.instances.values()}
            copies, kept = copies + len(poly.instances), kept + len(keys)
            if len(keys) < len(poly.instances):
                print(f"{path.name:28} {poly.name:12} {len(poly.instances)} -> {len(keys)}")
print(f"instances of definitions used at two types or more: {copies}; once merged: {kept}")

# %% [markdown]
# Exercise 4's longer run, with the bug put back and every program L
# accepts compiled, as chapter 5 records it. A program counts once among
# the programs with findings, whatever it was found by; so if that count is
# the number of compiled programs that stopped with a status other than 0,
# OCaml found no program that the compiled run let through:

# %%
bug_run = json.loads(Path("../tests/soundness.json").read_text())["with the bug of the first edition put back"]
figures = bug_run["figures"]
stopped, found = figures["compiled: status not 0"], figures["programs with findings"]
print(f"`{bug_run['command']}`; {bug_run['machine']['cpu']}, {bug_run['machine']['cores']} cores")
print(f"  accepted by L and rejected by OCaml {figures['accepted by L only']}, outputs that differ "
      f"{figures['outputs that differ']}; compiled and stopped {stopped}, crashed "
      f"{figures['compiled: crash (killed by a signal)']}; programs with findings {found}")
print("every program with a finding is one that the compiled run stopped:", found == stopped,
      f"({stopped - figures['accepted by L only']} of them programs that OCaml accepts)")

# %% [markdown]
# Exercise 5's program: the instances of `protect`, the `try`s before and
# after the pass, and the program's `data` items, the same objects after the
# pass as before:

# %%
PROTECT = Source("protect.l", """def protect(f, x, d) = try { f(x) } catch { _ -> d }
print(protect({ n -> n + 1 }, 1, 0), protect({ s -> s }, "a", "b"))
""")


def count(program: c.Program, cls) -> int:
    """How many nodes of class cls a core program holds."""
    n, todo = 0, list(program.items)
    while todo:
        x = todo.pop()
        if type(x) is list or type(x) is tuple:
            todo.extend(x)
        elif type(x) in NODE_CLASSES or type(x) is c.Def:
            n += type(x) is cls
            todo.extend(getattr(x, name) for name in field_names(type(x)) if name not in ("span", "type", "op_span"))
    return n


typed, _ = check_types(PROTECT)
result, stats = measure(typed)
datas = [item for item in typed.items if isinstance(item, s.Data)]
print("instances:", stats.instances, "| try before and after:", count(typed, c.Try), count(result, c.Try))
print("data items:", [d.name for d in datas], "| the same objects after the pass:",
      all(any(d is item for item in result.items) for d in datas), "| data_declarations:", list(data_declarations(result)))
