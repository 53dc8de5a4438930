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
# # Chapter 5. Types: Hindley–Milner inference on union-find
#
# L is statically typed, and its programmers write no types except in `data`
# declarations: the compiler *infers* every type. This chapter builds that
# inference — the classic algorithm of Hindley and Milner, as ML compilers do
# it — on the union-find structure of chapter 2. A program that passes it
# cannot go wrong for a reason of types when it runs: no `1 + true`, no call
# of a number, no `match` of a list against a tuple pattern. The back end will
# also read the types it records on every node to choose how to represent
# values in memory.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 2](02_union_find.ipynb), union-find (`Safe`), which
# holds the type variables; [chapter 4b](04b_meaning.ipynb), the resolved
# core program that inference walks, its front end (`check`) and its table
# of primitives, whose types the operators are checked against; the
# language's typing contract in [the language reference](../language.md).
#
# **Builds:** the module `lcompiler.types`: `infer_program`, `Typing`,
# `show_type`, and the pipeline's stage `types`
# ([chapter 4](04_pipeline.ipynb)'s `lcompiler.pipeline`), which
# `lc show types` prints; `lc run` now refuses an ill-typed program. The
# types recorded on the nodes are read by monomorphisation
# ([chapter 5b](05b_mono.ipynb)) and the back end
# ([chapter 10](10_llvm.ipynb)).
#
# </div>

# %%
#| default_exp types

# %% [markdown]
# ## What this chapter promises
#
# - `infer_program(core)` checks a resolved core program (chapter 4b), records
#   on every expression and pattern node its type (in the field `type`), and
#   returns the *type scheme* of every top-level definition — or raises a
#   `CompileError` with the type errors of the program, one per ill-typed
#   definition (or group of definitions that use each other) or statement,
#   each saying what type was expected and what type was found, in L's
#   syntax, and, when the expected type comes from another piece of the
#   program, pointing at that piece with a note.
# - `show_type` prints a type or scheme as L would write it: `List<a> -> Int`.
# - `lc show types FILE.l` prints every definition with its scheme, and
#   `lc run` now refuses an ill-typed program before running anything.
# - `raise(e)` needs an `e` of type `Exn` and has any type; a `try`'s block
#   and clauses have one type, its clauses' patterns the type `Exn`; `==` on
#   `Exn` is a type error, as on any data type.
# - `pattern_warnings(core)`, on a typed program, returns its warnings: a
#   `match`, function or `let` that misses values (naming one), a clause
#   that can never match, a pattern that binds `true` or `false`; the stage
#   `types` reports them (`lc` on standard error, `-Werror` as errors).

# %% [markdown]
# ## What the types of L are
#
# ```text
# τ ::= Int | Bool | Unit | String           base types
#     | (τ1, …, τn)                          tuples, n ≥ 2
#     | τ1 -> τ2                             functions (one argument: several make a tuple)
#     | Name<τ1, …, τn>                      data types, with their parameters
#     | Exn                                  exceptions: one data type, no parameter
#     | a, b, …                              type variables
# σ ::= ∀ a1 … an. τ                         type schemes: the types of polymorphic definitions
# ```
#
# (`Exn` is an ordinary data type to this chapter: chapter 4b made the
# program's exceptions its constructors. Only `raise` and `try` need rules
# of their own, in a section after the statements.)
#
# A type is a tree of *constructors* — `Int`, `->`, `List` — with type
# variables at some leaves. We represent the constructors uniformly, as a name
# and a tuple of arguments (`TCon("->", (a, b))`, `TCon("*", (a, b))` for a
# pair), so that unification needs a single case for all of them. A type
# variable is an element of a union-find structure, chapter 2's `Safe`:
# variables that must be equal are merged into one partition, and
# the *description* of the partition says what they stand for — a type
# constructor, once inference has learnt it, or "still unknown" (with a
# *level*, explained below).
#
# <div class="admonition note">
# <p class="admonition-title">Design note: union-find, not substitutions</p>
#
# Textbooks present unification as computing a *substitution*, a map from
# variables to types, which the algorithm composes and applies to the
# environment and to the types it has built so far. That is clear on paper
# and slow in practice: applying a substitution copies types. Union-find
# records the same knowledge in place — a variable's partition says what it
# stands for, and every variable of the partition sees it at once — so
# unification costs a few finds, nearly constant each, per pair of type
# nodes it compares, and copies nothing. What it gives up is
# persistence: an inference cannot be undone by dropping a substitution, which
# is why `program`, below, restores only the level and the pending
# requirements after an error, and gives the failed definitions a fresh type.
#
# </div>

# %%
#| export
from contextlib import contextmanager
from dataclasses import dataclass, fields, is_dataclass

from lcompiler import core as c
from lcompiler import syntax as s
from lcompiler.core import did_you_mean
from lcompiler.errors import CompileError, Note, Span, raise_errors
from lcompiler.support import NESTING_LIMIT, collector_paused, recursion_limit
from lcompiler.union_find import Safe


@dataclass(frozen=True, slots=True)
class TCon:
    """A type constructor applied to its arguments: Int, (a, b), a -> b, List<a>."""
    name: str            # "Int", "Bool", "Unit", "String", "->", "*" for tuples, or a data type
    args: tuple = ()


class TVar:
    """A type variable: an element of the union-find structure of its inference."""
    __slots__ = ("link",)

    def __init__(self):
        self.link = None


class Unknown:
    """The description of a partition of variables that stand for a type not known yet."""
    __slots__ = ("level",)

    def __init__(self, level: int):
        self.level = level


GENERIC = 1 << 62        # the level of a quantified ("for all") variable
INT, BOOL, UNIT, STRING = TCon("Int"), TCon("Bool"), TCon("Unit"), TCon("String")
BASE_TYPES = {"Int": INT, "Bool": BOOL, "Unit": UNIT, "String": STRING}


def fn(param, result) -> TCon:
    return TCon("->", (param, result))


def tuple_of(items) -> TCon:
    return TCon("*", tuple(items))


# %% [markdown]
# ## How inference works, on small examples
#
# Inference walks the program once. It gives every expression a type, using
# *fresh* variables where nothing is known yet, and it **unifies** — makes
# equal — the types that the program's structure says must be equal:
#
# - in `{ x -> x + 1 }`, `x` gets a fresh variable `a`; `+` needs an `Int`
#   on each side, so `a` is unified with `Int`; the result of `+` is `Int`; the
#   function's type is `Int -> Int`;
# - in `{ f -> f(1) }`, `f` gets `a`; a call needs a function, so `a` is
#   unified with `b -> c` for fresh `b`, `c`; the argument `1` makes `b` be
#   `Int`; the result is `c`: the type is `(Int -> c) -> c`, and `c` is still
#   unknown. It stays a variable: this function works for every `c`;
# - in `{ x -> x(x) }`, `x` gets `a`, and the call makes `a = a -> b`: `a`
#   would have to contain itself. The **occurs check** refuses, and the
#   program is ill-typed.
#
# Unification is the union-find operation of [chapter 2](02_union_find.ipynb). To make a variable
# equal to a type constructor, set the description of its partition; to make
# two variables equal, `union` their partitions; to make two constructors
# equal, check that they are the same constructor and unify their arguments
# pairwise. When the constructors differ — `Int` against `Bool` — the program
# is ill-typed, and the error says where.
#
# **Let-polymorphism.** `def id(x) = x` has type `a -> a` *for every* `a`: it
# may be used as `Int -> Int` in one place and `Bool -> Bool` in another.
# After inferring a definition, its remaining unknown variables are
# **generalised** — turned into quantified variables of a scheme
# `∀a. a -> a` — and each *use* of the name **instantiates** the scheme with
# fresh variables. But not every unknown variable may be generalised: in
# `{ x -> { let y = x; y } }`, `y`'s type is `x`'s type, which is still being
# worked out by the enclosing function; generalising it would let `y` be used
# at two different types while `x` has only one.
#
# **Levels** say which variables may be generalised, cheaply. Inference
# counts how deeply it is nested in definitions being inferred: the *level*.
# A fresh variable is born at the current level. When a variable is unified
# with a type, every unknown variable in that type has its level lowered to
# the variable's level, if it was higher — it is now tied to something that
# lives that far out. When the right-hand side of a `let` at level n + 1 has
# been inferred, its unknown variables still at level n + 1 or deeper are
# exactly those that appear nowhere in the enclosing scope: those are
# generalised. And when a right-hand side may *not* be generalised (the
# value restriction, below), its unknown variables go back to level n: from
# then on they are part of the enclosing scope, free in its environment, and
# no later generalisation at level n + 1 may take them. The first edition
# of this chapter forgot that step: an ill-typed program passed the type
# checker, and its compiled code crashed; the section "A weak type read by
# a later definition" tells the story.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: levels, not free variables</p>
#
# The textbook rule generalises the variables of a type that are not free in
# the environment, and the textbook algorithm (Algorithm W) computes the free
# variables of the whole environment at every `let`: time proportional to
# the size of the environment each time, which makes inference quadratic on
# long programs. Levels make generalisation proportional to the size of the
# type generalised (Rémy 1992; it is how OCaml does it), at the price of one
# integer per partition kept up to date by `bind` — and by `lower`, for a
# definition that is not generalised. The measurement near the end of
# the chapter grows the programs sixty-four-fold: the time per definition
# grows by a small factor at most, where quadratic inference would multiply
# it by sixty-four too; exercise 2 asks what the textbook test would do.
#
# </div>
#
# ## Unification on union-find
#
# An `Inference` holds one `Safe` union-find structure for its type
# variables (chapter 2's checked variant: a mistake in this chapter would be
# reported where it happens), the current level, and the names in scope.
# `shallow` looks through a variable: it returns the type constructor the
# variable stands for, or the variable itself if it is still unknown.

# %%
#| export
class Mismatch(Exception):
    """Two types that cannot be made equal (occurs: one would contain the other)."""

    def __init__(self, occurs: bool = False):
        self.occurs = occurs


class Inference:
    def __init__(self):
        self.uf = Safe()
        self.level = 1

    def fresh(self) -> TVar:
        v = TVar()
        self.uf.singleton(v, Unknown(self.level))
        return v

    def shallow(self, t):
        """The constructor a type is, or the variable if it is still unknown."""
        if type(t) is TVar:
            known = self.uf.description(self.uf.find(t))
            if type(known) is TCon:
                return known
        return t


# %% [markdown]
# `unify` is the union-find recipe above, case by case: two unknowns are
# merged, their level the lower of the two; an unknown meets a constructor,
# and `bind` makes it stand for it; two constructors must agree, and their
# arguments are unified pairwise. It keeps a list of pairs still to equate
# instead of recursing, so a deep type cannot exhaust Python's stack.

# %%
#| export
class Inference(Inference):
    def unify(self, a, b) -> None:
        """Make two types equal, or raise Mismatch."""
        pairs = [(a, b)]
        while pairs:
            a, b = pairs.pop()
            a, b = self.shallow(a), self.shallow(b)
            if type(a) is TVar and type(b) is TVar:
                pa, pb = self.uf.find(a), self.uf.find(b)
                if pa is not pb:
                    level = min(self.uf.description(pa).level, self.uf.description(pb).level)
                    self.uf.union(pa, pb, Unknown(level))
            elif type(a) is TVar:
                self.bind(a, b)
            elif type(b) is TVar:
                self.bind(b, a)
            elif a.name != b.name or len(a.args) != len(b.args):
                raise Mismatch()
            else:
                pairs.extend(zip(a.args, b.args))


# %% [markdown]
# `bind` walks the type once, doing the occurs check — the unknown must not
# appear in the type it is to stand for — and lowering the levels of the
# unknowns it meets to the unknown's own level, together.

# %%
#| export
class Inference(Inference):
    def bind(self, v: TVar, t: TCon) -> None:
        """Make the unknown v stand for t: the occurs check, and the levels."""
        p = self.uf.find(v)
        level = self.uf.description(p).level
        todo = [t]
        while todo:
            x = self.shallow(todo.pop())
            if type(x) is TVar:
                px = self.uf.find(x)
                if px is p:
                    raise Mismatch(occurs=True)
                unknown = self.uf.description(px)
                unknown.level = min(unknown.level, level)
            else:
                todo.extend(x.args)
        self.uf.set_description(p, t)


# %% [markdown]
# Generalising and instantiating: a generalised variable keeps its partition
# but gets the level `GENERIC`; `instantiate` copies a type, replacing each
# generic variable by a fresh one — the same fresh one for every occurrence of
# the same generic variable. `lower` is the other outcome of a definition:
# not generalised, its unknowns come back to the current level.

# %%
#| export
class Inference(Inference):
    def generalize(self, t) -> None:
        """Quantify the unknown variables of t born deeper than the current level."""
        todo = [t]
        while todo:
            x = self.shallow(todo.pop())
            if type(x) is TVar:
                unknown = self.uf.description(self.uf.find(x))
                if self.level < unknown.level < GENERIC:
                    unknown.level = GENERIC
            else:
                todo.extend(x.args)

    def lower(self, t) -> None:
        """Bring the unknown variables of t born deeper than the current level back to it: t is
        not generalised, so they belong to the scope around it, and no later generalisation at
        this level may quantify them."""
        todo = [t]
        while todo:
            x = self.shallow(todo.pop())
            if type(x) is TVar:
                unknown = self.uf.description(self.uf.find(x))
                if self.level < unknown.level < GENERIC:
                    unknown.level = self.level
            else:
                todo.extend(x.args)

    def instantiate(self, t):
        """A copy of t with fresh variables for its generic ones."""
        copies = {}

        def copy(t):
            x = self.shallow(t)
            if type(x) is TVar:
                p = self.uf.find(x)
                if self.uf.description(p).level != GENERIC:
                    return x
                if p not in copies:
                    copies[p] = self.fresh()
                return copies[p]
            return TCon(x.name, tuple(copy(a) for a in x.args)) if x.args else x
        return copy(t)


# %% [markdown]
# ## Types in L's syntax
#
# Types are printed as the programmer would write them. In an error message,
# variables are named `a`, `b`, `c`, … in order of appearance within the
# message. (After inference, schemes are printed by `show_type`, further down,
# which also marks *weak* variables — unknown but not generalised, see the
# value restriction — with a leading underscore: `_a`.)

# %%
#| export
class Namer:
    """Names the type variables of the types it prints, in order of appearance."""

    def __init__(self, inference: Inference):
        self.inference, self.names = inference, {}

    def name(self, v: TVar) -> str:
        p = self.inference.uf.find(v)
        if p not in self.names:
            n = len(self.names)
            self.names[p] = chr(ord("a") + n % 26) + (str(n // 26) if n >= 26 else "")
        return self.names[p]

    def show(self, t) -> str:
        x = self.inference.shallow(t)
        if type(x) is TVar:
            return self.name(x)
        if x.name == "->":
            param, result = x.args
            left = self.show(param)
            if type(self.inference.shallow(param)) is TCon and self.inference.shallow(param).name == "->":
                left = f"({left})"
            return f"{left} -> {self.show(result)}"
        if x.name == "*":
            return "(" + ", ".join(self.show(a) for a in x.args) + ")"
        if x.args:
            return f"{x.name}<" + ", ".join(self.show(a) for a in x.args) + ">"
        return x.name


# %% [markdown]
# ## Errors a programmer can act on
#
# Every check in inference is "this expression, here, must have that type".
# `unify_at` makes the two types equal or raises a `CompileError` at the
# expression: `expected T1, found T2`, where T1 is what the context requires
# and T2 the expression's own type, both printed in full with one naming of
# their variables. The conventions (the corpus `tests/corpus/types/` checks
# where each error lands and what it expected and found; the golden files
# of `tests/errors/` check the notes too):
#
# | situation | reported at | expected | a note at |
# |---|---|---|---|
# | an operand of `+`, `&&`, `!`, … | the operand | what the operator needs | |
# | `a == b` | `b` | the type of `a` | `a` |
# | an argument of a call | the argument (for several, the one that is wrong) | the parameter's type | the definition of a top-level function |
# | a branch of `if` | the `else` branch | the `then` branch's type | the `then` branch |
# | `if` without `else` | the branch | `Unit` | |
# | clauses of a `match` or a function | the later clause's pattern or body | the scrutinee's type, the first body's type | the scrutinee (for a function, its first pattern), the first body |
# | `x := e` | `e` | the `var`'s type | |
# | a constructor's argument | the argument | the field's type | the constructor's declaration |
#
# In a call, the message also says which argument of which function it is.
#
# An error shows one place, but a conflict of types has two sides: in
# `if (n > 0) "pos" else 0`, the `0` is wrong only because the other branch
# is a `String`. Where the expected type comes from another piece of the
# program, the error carries a **note** at that piece, with its type (the
# last column above): `unify_at` takes the piece as its `origin`.

# %%
#| export
class Inference(Inference):
    def unify_at(self, expected, found, span: Span, context: str = "", origin: tuple | None = None) -> None:
        """Make found (the type of the code at span) equal to expected; origin: (what, where, its type),
        the code the expected type comes from, shown in a note."""
        try:
            self.unify(expected, found)
        except Mismatch as mismatch:
            namer = Namer(self)
            message = f"expected {namer.show(expected)}, found {namer.show(found)}"
            remarks = [context] if context else []
            if mismatch.occurs:
                remarks.append("a type that would have to contain itself")
            if remarks:
                message += f" ({'; '.join(remarks)})"
            notes = []
            if origin is not None:
                what, where, whole = origin
                notes.append(Note(f"{what} has type {namer.show(whole)}", where))
            raise CompileError(message, span, notes) from None


# %% [markdown]
# ## Inferring expressions
#
# `infer(e, env)` returns the type of `e` and records it in `e.type`; `env`
# maps the names in scope to pairs (type, generalised?). `check(e, expected)`
# is `infer` followed by `unify_at` — except for a tuple checked against a
# tuple type, which is checked component by component, so that the error in
# `f(1, true)` lands on the `true`.
#
# Each construct of the core language (chapter 4b, [the core](04b_meaning.ipynb))
# has one **typing rule**, written as the textbooks write it: above the line,
# what must hold of the parts; below it, what then holds of the whole.
# `Γ ⊢ e : τ` reads "in the environment Γ, the expression `e` has type τ";
# `Γ, x : τ` is Γ with `x` bound to τ. Inference runs the rules backwards:
# given `e`, it picks the one rule whose conclusion has `e`'s shape, gives
# every τ it cannot know yet a fresh variable, and unifies wherever the rule
# writes the same τ twice. `_infer` is that choice, one line per rule, and
# each rule is a method of its own, below with the rule it implements.

# %%
#| export
def is_value(e) -> bool:
    """A syntactic value: the right-hand sides that may be generalised."""
    match e:
        case c.Lambda() | c.Lit() | c.Var():
            return True
        case c.Con(_, args) | c.Tuple(args):
            return all(map(is_value, args))
    return False


def _callee(fn) -> str:
    return fn.name if isinstance(fn, c.Var) and not fn.name.startswith("%") else "the function"


class Inference(Inference):
    globals: dict
    constructors: dict          # name -> (result type, field types), with generic parameters
    declarations: dict          # constructor name -> its span in its data declaration, for notes
    definitions: dict           # top-level name -> the span of its name in its def, for notes

    def check(self, e, expected, env: dict, context: str = "", origin: tuple | None = None) -> None:
        x = self.shallow(expected)
        if type(e) is c.Tuple and type(x) is TCon and x.name == "*" and len(x.args) == len(e.items):
            for item, t in zip(e.items, x.args):
                self.check(item, t, env, context, origin)
            e.type = expected
            return
        self.unify_at(expected, self.infer(e, env), e.span, context, origin)

    def infer(self, e, env: dict):
        t = self._infer(e, env)
        e.type = t
        return t


# %% [markdown]
# The dispatch: one case per construct of the core, each handing the node to
# the method of its rule.

# %%
#| export
class Inference(Inference):
    def _infer(self, e, env: dict):
        match e:
            case c.Lit():
                return self.literal(e)
            case c.Var():
                return self.variable(e, env)
            case c.Con(name, args):
                return self.construction(name, args, env)
            case c.Tuple(items):
                return tuple_of(self.infer(i, env) for i in items)
            case c.Lambda(param, body):
                return self.function(param, body, env)
            case c.App(callee, arg):
                return self.application(callee, arg, env)
            case c.Prim(op, args):
                return self.primitive(op, args, env)
            case c.If():
                return self.conditional(e, env)
            case c.Match(scrutinee, clauses):
                return self.match(scrutinee, clauses, env)
            case c.Let(name, value, body):
                return self.infer(body, {**env, name: self.let_bound(value, env)})
            case c.LetVar() | c.Assign() | c.While() | c.Seq() | c.Print() | c.Assert():
                return self.statement(e, env)
            case c.Raise() | c.Try():
                return self.exceptions(e, env)
        raise TypeError(f"not a core expression: {e!r}")


# %% [markdown]
# To try each rule as soon as it is written, `type_of` infers the type of
# one expression, in an empty environment, with the cases defined so far,
# and prints it in L's syntax (or the error):

# %%
from lcompiler.errors import Source
from lcompiler.interp import check as check_names


def type_of(text: str) -> None:
    program = check_names(Source("example.l", text))
    inference = Inference()
    inference.globals, inference.pending_equalities, inference.definitions = {}, [], {}
    inference.constructors, inference.declarations = {}, {}
    if any(isinstance(i, s.Data) for i in program.items):
        inference.declare_data([i for i in program.items if isinstance(i, s.Data)])
    try:
        print(f"{text.splitlines()[-1]}  :  {Namer(inference).show(inference.infer(program.items[-1], {}))}")
    except CompileError as error:
        print(error.render())


# %% [markdown]
# ### Literals, variables, tuples
#
# ```text
#                                            Γ(x) = ∀a1…an. τ
# ──────────── (Int)   ──────────── (Bool)   ───────────────────────────────── (Var)
#  Γ ⊢ n : Int          Γ ⊢ true : Bool       Γ ⊢ x : τ[a1 := τ1, …, an := τn]
#
#  Γ ⊢ e1 : τ1   …   Γ ⊢ en : τn
# ─────────────────────────────── (Tuple)      and likewise String for "…", Unit for ()
#  Γ ⊢ (e1, …, en) : (τ1, …, τn)
# ```
#
# A literal's type is its kind. A variable's type is what the environment
# says — for a local, the pair (type, generalised?) that its binder stored;
# for a top-level name, its scheme — and a generalised type is
# *instantiated*: the τ1 … τn of the rule are fresh variables, which later
# unifications choose. `true` and `false`, when the program does not rebind
# them, are builtins of type `Bool`. A tuple's type is the tuple of its
# items' types (the case is the one line in `_infer` above).

# %%
#| export
class Inference(Inference):
    def literal(self, e: c.Lit):
        value = e.value
        return (BOOL if type(value) is bool else INT if type(value) is int
                else STRING if type(value) is str else UNIT)

    def variable(self, v: c.Var, env: dict):
        if v.kind == "builtin":
            return BOOL
        t, generic = env[v.name] if v.kind in ("local", "mutable") else self.globals[v.name]
        return self.instantiate(t) if generic else t


# %%
type_of("(42, true, \"hi\", ())")

# %% [markdown]
# ### Operators
#
# ```text
#  Γ ⊢ e1 : Int   Γ ⊢ e2 : Int              Γ ⊢ e1 : Int   Γ ⊢ e2 : Int             Γ ⊢ e : Bool
# ───────────────────────────── (+ - * / %)  ──────────────────────────── (< <= > >=)  ────────────── (!)
#  Γ ⊢ e1 + e2 : Int                          Γ ⊢ e1 < e2 : Bool                       Γ ⊢ !e : Bool
#
#  Γ ⊢ e1 : τ   Γ ⊢ e2 : τ   τ ∈ {Int, Bool, String}
# ─────────────────────────────────────────────────── (== !=)
#  Γ ⊢ e1 == e2 : Bool
# ```
#
# Arithmetic and `<`, `<=`, `>`, `>=` need `Int` operands (and `-x`, `neg`
# in the core, one); `!` a `Bool`. `==` and `!=` need two operands of the
# same type, and the contract allows only `Int`, `Bool` and `String` there.
# That side condition is the one part of a rule that inference cannot always
# check on the spot: a type may not be known yet when the comparison is met
# (`def same(a, b) = a == b`), so the requirement is remembered in
# `pending_equalities` and checked when the enclosing definition is
# generalised (further down): if the type is still unknown then, it becomes
# `Int`, as the contract says; if it is another type, the comparison is an
# error.
#
# These rules are not written out one by one in the code. Each is the
# `type` of the primitive's row in [chapter 4b](04b_meaning.ipynb)'s table of
# primitives — `("Int", "Int", "Bool")` for `<`, `("''a", "''a", "Bool")`
# for `==` — and `primitive` reads it: an operand whose type is a base type
# is checked against it; the first operand of a type variable gives the
# variable its type, by inference, and a later one is checked against that,
# with a note at the first (`the left operand`); and a variable written
# `''a` adds its type to `pending_equalities`. The result is the last type
# of the row. A new primitive is typed by its row, with nothing to add here.

# %%
#| export
from lcompiler.primitives import COMPARABLE, PRIMITIVES

OPERANDS = {1: ("the operand",), 2: ("the left operand", "the right operand")}


class Inference(Inference):
    pending_equalities: list     # (type, span) of the operands of == and != (''a), checked at generalisation

    def primitive(self, op: str, args: list, env: dict):
        """The type of the primitive op on args, from its row of chapter 4b's table."""
        *operands, result = PRIMITIVES[op].type
        variables = {}                          # 'a -> (its type, the number of the operand that fixed it)
        for i, (a, wanted) in enumerate(zip(args, operands)):
            if not wanted.startswith("'"):
                try:
                    self.check(a, BASE_TYPES[wanted], env)
                except CompileError as error:
                    if op == "+" and error.message.startswith("expected Int, found String") and not error.notes:
                        error.notes.append(Note("+ adds Ints; L has no operator that joins strings: to show "
                                                "them together, give print several arguments, as in "
                                                'print("n is", n)', a.span))
                    raise
            elif wanted in variables:
                t, first = variables[wanted]
                self.check(a, t, env, origin=(OPERANDS[len(args)][first], args[first].span, t))
            else:
                variables[wanted] = (self.infer(a, env), i)
        for name, (t, first) in variables.items():
            if name.startswith("''"):
                self.pending_equalities.append((t, args[first].span))
        if not result.startswith("'"):
            return BASE_TYPES[result]
        return variables[result][0] if result in variables else self.fresh()


# %%
type_of("(1 + 2 * 3, 1 < 2, !true, \"a\" == \"b\")")
type_of("1 + (2 < 3)")

# %% [markdown]
# ### Conditionals
#
# ```text
#  Γ ⊢ c : Bool   Γ ⊢ e1 : τ   Γ ⊢ e2 : τ             Γ ⊢ c : Bool   Γ ⊢ e : Unit
# ─────────────────────────────────────── (If)       ──────────────────────────── (If without else)
#  Γ ⊢ if (c) e1 else e2 : τ                           Γ ⊢ if (c) e : Unit
# ```
#
# The condition is a `Bool`; without `else`, the branch must be `Unit`; with
# it, the `else` branch must have the `then` branch's type, and the error,
# if any, carries a note at the `then` branch. `a && b` and `a || b` are
# `if`s in the core (`if (a) b else false`, `if (a) true else b`); the rule
# is the same, and checking `b` against `Bool` directly gives the clearer
# message.

# %%
#| export
class Inference(Inference):
    def conditional(self, e: c.If, env: dict):
        self.check(e.cond, BOOL, env)
        if e.form == "if without else":
            self.check(e.then, UNIT, env, "an if without else")
            self.infer(e.orelse, env)
            return UNIT
        if e.form == "&&":
            self.check(e.then, BOOL, env)
            self.infer(e.orelse, env)
            return BOOL
        if e.form == "||":
            self.infer(e.then, env)
            self.check(e.orelse, BOOL, env)
            return BOOL
        t = self.infer(e.then, env)
        self.check(e.orelse, t, env, origin=("the then branch", e.then.span, t))
        return t


# %%
type_of("if (1 < 2) \"yes\" else \"no\"")
type_of("if (1 < 2) \"yes\" else 0")

# %% [markdown]
# ### Patterns and match
#
# A pattern does not have a type so much as *accept* one, and bind
# variables: `⊢ p : τ ⇒ Γ'` reads "the pattern `p` matches values of type τ
# and binds the variables Γ'".
#
# ```text
# ──────────────────── (PVar)   ──────────────── (PWild)   ───────────────── (PInt)
#  ⊢ x : τ ⇒ {x : τ}             ⊢ _ : τ ⇒ {}               ⊢ n : Int ⇒ {}
#
#  ⊢ p1 : τ1 ⇒ Γ1  …  ⊢ pn : τn ⇒ Γn                  C : ∀a. (σ1, …, σk) -> T<a>    ⊢ pi : σi[a := τ] ⇒ Γi
# ─────────────────────────────────────── (PTuple)   ────────────────────────────────────────────────────── (PCon)
#  ⊢ (p1, …, pn) : (τ1, …, τn) ⇒ Γ1 ∪ … ∪ Γn           ⊢ C(p1, …, pk) : T<τ> ⇒ Γ1 ∪ … ∪ Γk
#
#  Γ ⊢ e : τ    ⊢ pi : τ ⇒ Γi    Γ, Γi ⊢ ei : τ'   (for each clause i)
# ──────────────────────────────────────────────────────────────────── (Match)
#  Γ ⊢ match (e) { p1 -> e1; …; pn -> en } : τ'
# ```
#
# `pattern` checks a pattern against the type of the value it matches and
# collects its variables. `match` checks every pattern against the
# scrutinee's type, and every body after the first against the first body's
# type; a function written with clauses, `{ Cons(x, _) -> …; Nil -> … }`,
# is a `match` on a parameter named `%…` in the core, and its errors then
# point at the first pattern rather than at a scrutinee the programmer never
# wrote.

# %%
#| export
class Inference(Inference):
    def pattern(self, p, expected, bound: dict, origin: tuple | None = None) -> dict:
        """Check a pattern against the type of the value it matches; add its variables to bound."""
        p.type = expected
        match p:
            case s.PVar(name):
                bound[name] = (expected, False)
            case s.PWild():
                pass
            case s.PInt():
                self.unify_at(expected, INT, p.span, origin=origin)
            case s.PUnit():
                self.unify_at(expected, UNIT, p.span, origin=origin)
            case s.PTuple(items):
                x = self.shallow(expected)
                if not (type(x) is TCon and x.name == "*" and len(x.args) == len(items)):
                    x = tuple_of(self.fresh() for _ in items)
                    self.unify_at(expected, x, p.span, origin=origin)
                for item, t in zip(items, x.args):
                    self.pattern(item, t, bound, origin)
            case s.PCon(name, args):
                result, field_types = self.instantiate_constructor(name)
                self.unify_at(expected, result, p.span, origin=origin)
                for item, t in zip(args or [], field_types):
                    self.pattern(item, t, bound, origin)
            case _:
                raise TypeError(f"not a pattern: {p!r}")
        return bound


# %%
#| export
class Inference(Inference):
    def match(self, scrutinee, clauses: list, env: dict):
        t = self.infer(scrutinee, env)
        origin = ("the value matched", scrutinee.span, t)
        if type(scrutinee) is c.Var and scrutinee.name.startswith("%"):    # a function's clauses
            origin = ("the first pattern", clauses[0][0].span, t)
        result, first = None, None
        for pattern, body in clauses:
            bound = self.pattern(pattern, t, {}, origin if pattern is not clauses[0][0] or
                                 origin[0] == "the value matched" else None)
            if result is None:
                result, first = self.infer(body, {**env, **bound}), body
            else:
                self.check(body, result, {**env, **bound}, origin=("the first clause", first.span, result))
        return result


# %%
type_of("(1, true).{ (n, b) -> if (b) n + 1 else n }")
type_of("(1, true).{ (0, b) -> b; (n, _) -> n }")

# %% [markdown]
# ### Functions and calls
#
# ```text
#  Γ, x : τ1 ⊢ e : τ2                         Γ ⊢ f : τ1 -> τ2    Γ ⊢ e : τ1
# ─────────────────────────── (Fun)          ──────────────────────────────── (App)
#  Γ ⊢ { x -> e } : τ1 -> τ2                  Γ ⊢ f(e) : τ2
# ```
#
# A function's parameter gets a fresh variable, τ1 of the rule, not
# generalised: inside the body it has one type, which the body's uses
# decide. (A function of several parameters takes one tuple in the core, and
# a function with clauses a parameter that is then matched.)

# %%
#| export
class Inference(Inference):
    def function(self, param: str, body, env: dict):
        v = self.fresh()
        return fn(v, self.infer(body, {**env, param: (v, False)}))


# %%
type_of("{ x -> x + 1 }")
type_of("{ (a, b) -> (b, a) }")

# %% [markdown]
# A call infers the function first. If its type is not yet known, it
# becomes `a -> b` for fresh `a` and `b`; if it is known and is not a
# function, the error says so at the callee. Then the argument is checked
# against the parameter's type — component by component when both are
# tuples, so that the message names the argument that is wrong — with a note
# at the definition of the callee when it is a top-level function.

# %%
#| export
class Inference(Inference):
    def application(self, callee, arg, env: dict):
        f = self.shallow(self.infer(callee, env))
        if type(f) is TVar:
            param, result = self.fresh(), self.fresh()
            self.unify(f, fn(param, result))
        elif f.name == "->":
            param, result = f.args
        else:
            raise CompileError(f"expected a function, found {Namer(self).show(f)}", callee.span)
        name = _callee(callee)
        origin = None
        if type(callee) is c.Var and callee.kind == "global":     # a note at its definition
            origin = (name, self.definitions[name], fn(param, result))
        p = self.shallow(param)
        if type(arg) is c.Tuple and type(p) is TCon and p.name == "*" and len(p.args) == len(arg.items):
            for i, (item, t) in enumerate(zip(arg.items, p.args), 1):
                self.check(item, t, env, f"argument {i} of {name}", origin)
            arg.type = param
        else:
            self.check(arg, param, env, f"the argument of {name}", origin)
        return result


# %%
type_of("{ f -> f(1) }")
type_of("{ (f, x) -> f(f(x)) }")
type_of("{ x -> x(x) }")

# %% [markdown]
# The last is the occurs check at work: `x : a`, and the call makes
# `a = a -> b`.

# %% [markdown]
# ### The partitions, drawn
#
# What does inference do to its union-find structure? `Recording` is an
# `Inference` that names its variables `a`, `b`, `c`, … in the order it
# creates them, and keeps a snapshot of the partitions before and after each
# unification. `partitions` draws a snapshot as chapter 2 drew its forests
# ([the union-find forests](02_union_find.ipynb)): one tree per partition,
# its description on top — yellow while the partition is still unknown, green
# once it stands for a type constructor — and its variables below it, in blue.

# %%
from lcompiler.drawing import Box, Picture


class Recording(Inference):
    """An Inference that names its variables and records the partitions around each unify."""

    def __init__(self):
        super().__init__()
        self.variables, self.moments = [], []

    def fresh(self) -> TVar:
        v = super().fresh()
        self.variables.append(v)
        return v

    def unify(self, a, b) -> None:
        before, call = self.snapshot(), f"unify({self.label(a)}, {self.label(b)})"
        super().unify(a, b)
        self.moments.append((call, before, self.snapshot()))

    def label(self, t) -> str:
        """A variable by its own name, a constructor as it stands now."""
        return chr(ord("a") + self.variables.index(t)) if type(t) is TVar else self.show(t)

    def name(self, v: TVar) -> str:
        p = self.uf.find(v)
        return chr(ord("a") + next(i for i, w in enumerate(self.variables) if self.uf.find(w) is p))

    def show(self, t) -> str:
        x = self.shallow(t)
        if type(x) is TVar:
            return self.name(x)
        if x.name == "->":
            return f"{self.show(x.args[0])} -> {self.show(x.args[1])}"
        return "(" + ", ".join(map(self.show, x.args)) + ")" if x.name == "*" else x.name

    def snapshot(self) -> list:
        """[(description, [names of its variables])], one per partition, in order of creation."""
        groups = {}
        for i, v in enumerate(self.variables):
            groups.setdefault(self.uf.find(v), []).append(chr(ord("a") + i))
        return [(self.describe(p), names) for p, names in groups.items()]

    def describe(self, p) -> str:
        known = self.uf.description(p)
        if type(known) is TCon:
            return "= " + self.show(known)
        return f"unknown, level {known.level}"


def partitions(snapshot: list) -> list:
    return [Box(what, [Box(n, style="blue") for n in names], "yellow" if what.startswith("unknown") else "green")
            for what, names in snapshot]


# %% [markdown]
# The program is the function `{ (f, x) -> f(f(x)) }`. Its parameter gets
# `a`, which the pattern makes a pair `(b, c)`: `f : b`, `x : c`. The inner
# call makes `b = d -> e` and unifies its parameter `d` with `x`'s `c`. The
# outer call then passes the inner call's result, of type `e`, where `f`
# takes a `d`: `unify(d, e)`, the last unification, drawn here before and
# after. It merges two unknown partitions, and `b`'s description, which
# names them, now reads `c -> c`: `f` must return what it takes.

# %%
recording = Recording()
expression = check_names(Source("twice.l", "{ (f, x) -> f(f(x)) }")).items[0]
whole = recording.infer(expression, {})
for call, _, after in recording.moments:
    print(f"{call:20}" + "  ".join("{" + ", ".join(names) + "} " + what for what, names in after))
print("the type:", recording.show(whole))

# %%
call, before, after = recording.moments[-1]


def in_words(snapshot: list) -> str:
    return "; ".join(f"{', '.join(names)}: {what}" for what, names in snapshot)


Picture([(f"before {call}", partitions(before)), (f"after {call}", partitions(after))],
         edges="up", alt=f"The partitions of the type variables while inferring {{ (f, x) -> f(f(x)) }}. "
                         f"Before {call}: {in_words(before)}. After: {in_words(after)}.")

# %% [markdown]
# A partition is named by its first variable: after the third
# unification, `d` prints as `c`. The last one changed one thing, a union of
# `{c, d}` with `{e}`, and every variable of the merged partition now finds
# the same description. Nothing was rewritten in `a`'s or `b`'s description:
# they still name the variables they named, and printing follows each to
# its partition. That is why the function's type, read at the end, is
# `(c -> c, c) -> c`, which `type_of` printed above as `(a -> a, a) -> a`.

# %% [markdown]
# ### Statements: var, :=, while, sequences, print, assert
#
# ```text
#  Γ ⊢ e1 : τ1   Γ, x : τ1 ⊢ e2 : τ2           Γ(x) = τ   Γ ⊢ e : τ            Γ ⊢ c : Bool   Γ ⊢ e : τ
# ───────────────────────────────── (LetVar)  ──────────────────── (Assign)   ───────────────────────── (While)
#  Γ ⊢ var x := e1; e2 : τ2                     Γ ⊢ x := e : Unit               Γ ⊢ while (c) e : Unit
#
#  Γ ⊢ e1 : τ1   Γ ⊢ e2 : τ2          Γ ⊢ ei : τi (each i)                  Γ ⊢ c : Bool
# ───────────────────────── (Seq)    ─────────────────────────── (Print)   ───────────────────── (Assert)
#  Γ ⊢ e1; e2 : τ2                     Γ ⊢ print(e1, …, en) : Unit            Γ ⊢ assert(c) : Unit
# ```
#
# A `var` is bound to its initial value's type, never generalised (see the
# value restriction, next); an assignment must store a value of that type.
# The statements that are done for their effect have type `Unit`; a
# sequence has the type of its last expression, and the first may have any
# type — its value is dropped.

# %%
#| export
class Inference(Inference):
    def statement(self, e, env: dict):
        match e:
            case c.LetVar(name, value, body):
                return self.infer(body, {**env, name: (self.infer(value, env), False)})
            case c.Assign(target, value):
                target_type = self.variable(target, env)
                target.type = target_type
                self.check(value, target_type, env, f"the assignment to {target.name}")
                return UNIT
            case c.While(cond, body):
                self.check(cond, BOOL, env)
                self.infer(body, env)
                return UNIT
            case c.Seq(first, second):
                self.infer(first, env)
                return self.infer(second, env)
            case c.Print(args):
                for a in args:
                    self.infer(a, env)
                return UNIT
            case c.Assert(cond):
                self.check(cond, BOOL, env)
                return UNIT
        raise TypeError(f"not a core statement: {e!r}")


# %%
type_of("{ var n := 0; while (n < 3) { n := n + 1 }; n }")
type_of("{ var n := 0; n := \"three\"; n }")

# %% [markdown]
# ### Exceptions: raise and try
#
# ```text
#        Γ ⊢ e : Exn                    Γ ⊢ b : τ      ⊢ pi : Exn ⇒ Γi    Γ, Γi ⊢ ei : τ  (each i)
# ───────────────────── (Raise)      ──────────────────────────────────────────────────────── (Try)
#  Γ ⊢ raise(e) : τ  (any τ)          Γ ⊢ try { b } catch { p1 -> e1 … pn -> en } : τ
# ```
#
# Exceptions are the values of one data type, `Exn` — chapter 4b made it, a
# `data Exn` whose constructors are the predefined exceptions and the
# program's own — so `raise`'s argument must be an `Exn`, and each clause
# of a `catch` is a pattern of type `Exn`, checked as a `match`'s clauses
# are. `raise` never returns, so its result may be given any type: a fresh
# variable, which the context fixes (`if (n < 0) raise(Negative) else n` is
# an `Int`). The block of a `try` and its clauses have one type, as the
# clauses of a `match` do: each clause is checked against the block, with
# a note at the block when it does not fit.
#
# Why the fields of an exception must be closed — no type variable in
# them, which chapter 4b enforces — is a matter of soundness. If
# `exception Box(a)` were allowed, `raise(Box(1))` would raise a `Box` of an
# `Int`, and a `catch { Box(s) -> s + "!" }` far away could take it for a
# `Box` of a `String`: the type of the field is forgotten by `Exn`, which
# has no parameter to remember it. That is OCaml's rule too, for the same
# reason: `exception Box of 'a` is an error there, "the type variable 'a is
# unbound" (its GADT syntax admits a variable only as an *existential* one,
# which a handler can never take back out at a type of its choosing).
# A data type can have parameters because its type says what they are, for
# every value; `Exn` cannot, since one `Exn` holds the exceptions of every
# part of the program. And since `Exn` has no parameter, chapter 5b has
# nothing to copy for it: a closed type is its own one instance.

# %%
#| export
EXN = TCon("Exn")


class Inference(Inference):
    def exceptions(self, e, env: dict):
        match e:
            case c.Raise(arg):
                self.check(arg, EXN, env, "the argument of raise")
                return self.fresh()
            case c.Try(body, clauses):
                t = self.infer(body, env)
                for pattern, clause in clauses:
                    bound = self.pattern(pattern, EXN, {})
                    self.check(clause, t, {**env, **bound}, origin=("the block of the try", body.span, t))
                return t
        raise TypeError(f"not an exception form: {e!r}")


# %% [markdown]
# ## Let, generalisation, and the value restriction
#
# ```text
#  Γ ⊢ e1 : τ1    Γ, x : gen(Γ, e1, τ1) ⊢ e2 : τ2
# ──────────────────────────────────────────────── (Let)
#  Γ ⊢ let x = e1; e2 : τ2
#
#  gen(Γ, e1, τ1) = ∀a1…an. τ1   where a1 … an are the variables of τ1 not free in Γ,
#                                 if e1 is a syntactic value
#                 = τ1           otherwise
# ```
#
# The only rule that makes a scheme. When the right-hand side is a
# *syntactic value* — a function, a literal, a variable, or a constructor or
# tuple of values — a `let` infers it one level deeper, then generalises
# what is left unknown at that level: the variables "not free in Γ" of the
# rule, found by their levels rather than by a walk over Γ. Otherwise the
# type is used as it is, unknowns included, and the first use that settles
# them settles them for every use.
#
# Why the restriction (Wright 1995; Standard ML's rule, and with a
# relaxation OCaml's)? Because of mutable state. Imagine L had no
# restriction, and this program:
#
# ```l
# def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
# def swap = make_cell()       // swap : List<_a> -> List<_a>; suppose it were ∀a. List<a> -> List<a>
# swap(Cons(1, Nil))           // stores a List<Int>
# swap(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
# ```
#
# `make_cell()` returns a closure sharing one `var`. If `swap` were
# generalised, the second call could use it at `List<String>` and get back
# the `List<Int>` the first call stored, as a list of strings: `s` would be
# typed `String` and hold the `Int` 1, and the compiled code, which finds a
# `String`'s bytes through a pointer, would follow the integer instead. The
# right-hand side `make_cell()` is a
# call, not a syntactic value, so the restriction keeps `swap`'s type
# *weak*: `List<_a> -> List<_a>`, one type not yet known, which the first
# call fixes at `List<Int>` and the second call then contradicts — a type
# error, where it belongs (the program is run through inference below, in
# "Inference at work"). A
# `var` itself is never generalised, for the same reason. A function, on the
# other hand, computes nothing until it is called, so its type is safe to
# generalise; that is why every `def f(x) = …` is polymorphic.
#
# `let_bound` returns the pair (type, generalised?) that the environment
# stores for the name — `_infer`'s case for `let` adds it to the environment
# of the body. The equality requirements of `==` met inside the right-hand
# side are settled here, just before generalisation. A right-hand side that
# is not a value is inferred at the current level, not one deeper: its
# unknowns are born at the level of the scope that shares them, and there
# is nothing to bring back afterwards.

# %%
#| export
class Inference(Inference):
    def let_bound(self, value, env: dict) -> tuple:
        if not is_value(value):
            return self.infer(value, env), False
        self.level += 1
        t = self.infer(value, env)
        self.level -= 1
        self.settle_equalities()
        self.generalize(t)
        return t, True

    def settle_equalities(self, final: bool = False) -> None:
        """Check the pending requirements of == and != whose type is known, or about to be
        generalised (it then defaults to Int); keep the others for an outer definition."""
        waiting = []
        for t, span in self.pending_equalities:
            x = self.shallow(t)
            if type(x) is TVar:
                if final or self.uf.description(self.uf.find(x)).level > self.level:
                    self.unify(x, INT)
                else:
                    waiting.append((t, span))
            elif x.name not in COMPARABLE:
                raise CompileError(f"expected Int, Bool or String, found {Namer(self).show(x)} "
                                   "(only those can be compared with == and !=)", span)
        self.pending_equalities = waiting


# %% [markdown]
# `id` is a value, generalised, and used at two types; a `let` of a call is
# not, and its weak variable is fixed by its first use:

# %%
type_of("{ let id = { x -> x }; (id(1), id(true)) }")
type_of("{ let f = { g -> g }({ x -> x }); (f(1), f(true)) }")

# %% [markdown]
# ## Data declarations
#
# A declaration `data List<t> { Cons(t, List<t>); Nil }` gives each
# constructor a type: `Cons` takes a `t` and a `List<t>` and makes a
# `List<t>`, for every `t`. The checks: each type name used in a field
# exists and has the right number of parameters, each type variable is a
# parameter of the declaration, and no parameter is declared twice.
# Declarations may refer to each other in any order.

# %%
#| export
class Inference(Inference):
    def declare_data(self, declarations: list) -> None:
        arities = {name: 0 for name in BASE_TYPES}
        for d in declarations:
            arities[d.name] = len(d.params)
        self.constructors, self.declarations, errors = {}, {}, []
        for d in declarations:
            try:
                params = {}
                for p in d.params:
                    if p.name in params:
                        raise CompileError(f"the type parameter {p.name} is declared twice", p.span)
                    params[p.name] = self.fresh()
                result = TCon(d.name, tuple(params.values()))
                for con in d.constructors:
                    field_types = tuple(self.syntax_type(f.type, params, arities) for f in con.fields or [])
                    self.constructors[con.name] = (result, field_types)
                    self.declarations[con.name] = con.span
                for v in params.values():
                    self.uf.description(self.uf.find(v)).level = GENERIC
            except CompileError as error:      # each declaration is checked, and the mistakes reported
                errors.append(error)
        raise_errors(errors)

    def syntax_type(self, t, params: dict, arities: dict):
        match t:
            case s.TVar(name, span):
                if name not in params:
                    hint = did_you_mean(name, params) or f": declare it as a parameter, as in data Name<{name}>"
                    raise CompileError(f"unknown type variable {name}{hint}", span)
                return params[name]
            case s.TName(name, args, span):
                if name not in arities:
                    raise CompileError(f"unknown type {name}{did_you_mean(name, arities)}", span)
                if len(args) != arities[name]:
                    raise CompileError(f"{name} takes {arities[name]} type argument"
                                       f"{'s' * (arities[name] != 1)}, given {len(args)}", span)
                if not args:
                    return BASE_TYPES.get(name) or TCon(name)
                return TCon(name, tuple(self.syntax_type(a, params, arities) for a in args))
            case s.TTuple(items):
                return tuple_of(self.syntax_type(i, params, arities) for i in items)
            case s.TFun(arg, result):
                return fn(self.syntax_type(arg, params, arities), self.syntax_type(result, params, arities))
        raise TypeError(f"not a type: {t!r}")

    def instantiate_constructor(self, name: str) -> tuple:
        result, field_types = self.constructors[name]
        both = self.instantiate(TCon("", (result,) + field_types))
        return both.args[0], both.args[1:]


# %% [markdown]
# With the constructors' types known, the last rule: a constructor is
# applied to its fields like a function to its arguments, its scheme
# instantiated afresh at each use.
#
# ```text
#  C : ∀a1…an. (σ1, …, σk) -> T<a1, …, an>    Γ ⊢ ei : σi[a1 := τ1, …, an := τn]   (each i)
# ───────────────────────────────────────────────────────────────────────────────────── (Con)
#  Γ ⊢ C(e1, …, ek) : T<τ1, …, τn>
# ```
#
# Each field is checked against its type, and an error carries a note at the
# constructor's declaration, with the constructor's type.

# %%
#| export
class Inference(Inference):
    def construction(self, name: str, args: list, env: dict):
        result, field_types = self.instantiate_constructor(name)
        origin = (name, self.declarations[name], fn(tuple_of(field_types) if len(args) > 1
                                                     else field_types[0], result)) if args else None
        for i, (arg, t) in enumerate(zip(args, field_types), 1):
            self.check(arg, t, env, f"field {i} of {name}" if len(args) > 1 else f"the field of {name}",
                       origin)
        return result


# %%
type_of("data List<t> { Cons(t, List<t>); Nil }\nCons(1, Cons(2, Nil))")
type_of("data List<t> { Cons(t, List<t>); Nil }\nCons(1, Cons(true, Nil))")


# %% [markdown]
# ## The top level: strongly connected components
#
# Top-level definitions may refer to each other in any order, and
# recursively. Typing them one by one in textual order would not do: a
# function used before its definition would be met with an unknown type. And
# typing *all* of them together as one recursive group would make them all
# monomorphic within the group: a polymorphic helper `id` used at `Int` by one
# definition and at `Bool` by another would be unified with both.
#
# The standard solution: build the graph of references between definitions,
# split it into **strongly connected components** — groups of definitions
# that refer to each other, directly or not — and type the components in
# dependency order. Within a component the definitions are monomorphic
# (their recursive uses share one type); once the component is done, each
# definition is generalised, and the components that use it later see a
# polymorphic scheme.
#
# Tarjan's algorithm (Tarjan 1972) finds the components in one depth-first
# traversal, and emits each component after all the components it depends on: exactly the
# order we need. It is written with an explicit stack, since a program of a
# hundred thousand definitions would exceed Python's recursion limit.

# %%
#| export
_LOOK_INTO = {}     # a node class -> its fields that may hold nodes (asking dataclasses each time is slow)


def references(e) -> set:
    """The top-level names an expression reads."""
    found, todo = set(), [e]
    while todo:
        x = todo.pop()
        t = type(x)
        if t is c.Var:
            if x.kind == "global":
                found.add(x.name)
        elif t is c.Assign:
            todo.append(x.value)
        elif t is c.Match:
            todo.append(x.scrutinee)
            todo.extend(body for _, body in x.clauses)
        elif t is c.Try:
            todo.append(x.body)
            todo.extend(body for _, body in x.clauses)
        elif t is list:
            todo.extend(x)
        else:
            names = _LOOK_INTO.get(t)
            if names is None:                   # the first node of its class: which fields to look into
                names = _LOOK_INTO[t] = tuple(f.name for f in fields(t) if f.name not in ("span", "type", "op_span")
                                              ) if is_dataclass(t) else ()
            for name in names:
                v = getattr(x, name)
                if type(v) is not str:
                    todo.append(v)
    return found


# %% [markdown]
# Tarjan's algorithm numbers the definitions in the order a depth-first walk
# meets them (`index`), and keeps for each the lowest number it can reach
# back to (`low`); a definition whose `low` is its own number closes a
# component, which is everything above it on the stack.

# %%
#| export
def strongly_connected(graph: dict) -> list[list]:
    """Tarjan's algorithm, iterative: the components of graph, dependencies first."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component[::-1])
    return components


# %% [markdown]
# On the graph of the `even`/`odd` program further down: `id` first, alone;
# then `even` and `odd` together; then `both`, which uses them all.

# %%
strongly_connected({"id": [], "even": ["id", "odd"], "odd": ["even", "id"], "both": ["even", "id", "odd"]})


# %% [markdown]
# The program: declarations first, then the components of the definitions,
# then the top-level statements (which define nothing, and so may be typed
# last). The equality requirements that are still pending at the end default
# their unknown types to `Int`.
#
# A type error in one definition should not hide the errors of the others,
# and need not: each component, and each top-level statement, is checked on
# its own, and `program` collects the errors of all of them, then reports
# them in the order of the source. What is safe to check after an error?
# The other components are, if the failed one cannot make them fail in turn.
# So the names of a component that failed get the type `∀a. a`, generalised:
# each use instantiates a fresh variable, which agrees with anything, so no
# error can come from a use of a definition that is already reported. (Such
# a use may then hide an error of its own — fewer errors, never invented
# ones.) A failed component may have left the inference half-way: deeper in
# levels, with requirements of `==` still pending; both are put back as they
# were before it. Within one definition, inference still stops at the first
# error: its types after a failed unification are not worth trusting.

# %%
#| export
class Inference(Inference):
    def program(self, program: c.Program) -> dict:
        self.declare_data([i for i in program.items if isinstance(i, s.Data)])
        self.globals, self.pending_equalities, errors = {}, [], []
        defs = {i.name.name: i for i in program.items if isinstance(i, c.Def)}
        self.definitions = {name: d.name.span for name, d in defs.items()}
        graph = {name: sorted(references(d.value) & defs.keys()) for name, d in defs.items()}
        for component in strongly_connected(graph):
            group = [defs[name] for name in component]
            try:
                with self.undone_on_error():
                    self.component(group)
            except CompileError as error:
                errors.append(error)
                for d in group:                   # ∀a. a: its uses cannot fail
                    v = self.fresh()
                    self.uf.description(self.uf.find(v)).level = GENERIC
                    self.globals[d.name.name] = (v, True)
        for item in program.items:
            if not isinstance(item, (c.Def, s.Data)):
                try:
                    with self.undone_on_error():
                        self.infer(item, {})
                except CompileError as error:
                    errors.append(error)
        try:
            self.settle_equalities(final=True)
        except CompileError as error:
            errors.append(error)
        raise_errors(errors)
        return {name: t for name, (t, _) in self.globals.items()}


# %% [markdown]
# A component: its definitions get fresh variables one level deeper, so
# that their recursive uses share them (monomorphic within the group); then
# each right-hand side is checked against its variable; then, if all of them
# are values, the group is generalised. If one is not, the group's types are
# weak, and `lower` brings their unknowns back to the level around the
# group, where every later component sees them as part of its environment.
# (Without that step, the next component, inferred one level deeper, would
# generalise them: see "A weak type read by a later definition", below.)
# `undone_on_error` is the rollback the previous paragraph described.

# %%
#| export
class Inference(Inference):
    def component(self, group: list) -> None:
        """Infer a group of definitions that refer to each other; generalise them if they are values."""
        self.level += 1
        for d in group:
            self.globals[d.name.name] = (self.fresh(), False)
        for d in group:
            self.check(d.value, self.globals[d.name.name][0], {}, f"the definition of {d.name.name}")
        self.level -= 1
        generalise = all(is_value(d.value) for d in group)
        if generalise:
            self.settle_equalities()
        for d in group:
            t = self.globals[d.name.name][0]
            if generalise:
                self.generalize(t)
            else:
                self.lower(t)       # weak: its unknowns now belong to the level around it
            self.globals[d.name.name] = (t, generalise)
            d.name.type = t

    @contextmanager
    def undone_on_error(self):
        """On a CompileError, put the level and the pending requirements of == back as they were."""
        level, pending = self.level, len(self.pending_equalities)
        try:
            yield
        except CompileError:
            self.level = level
            del self.pending_equalities[pending:]
            raise


# %% [markdown]
# ## After inference: plain types for the later stages
#
# During inference a node's type may be a variable that unification later
# binds; the back end wants the final answer. `infer_program` therefore ends
# by *resolving* every recorded type — following every variable to what it
# stands for — into an immutable tree of `TCon`s, where a variable still
# unknown becomes a `TParam`: a type the program leaves open (the `a` of
# `length : List<a> -> Int`), which [chapter 5b](05b_mono.ipynb) then
# replaces, in each copy of the definition, by the type that copy is used
# at.

# %%
#| export
@dataclass(frozen=True, slots=True)
class TParam:
    """A type variable left open by inference: a parameter of a polymorphic type."""
    number: int
    generic: bool = True     # False: a weak variable, fixed by nothing in the program


@dataclass
class Typing:
    """The result of inference: each definition's scheme, and how to print types."""
    schemes: dict            # name -> resolved type (TParams are its quantified variables)

    def show(self, name: str) -> str:
        return show_type(self.schemes[name])


def show_type(t, names: dict | None = None) -> str:
    """A resolved type in L syntax; weak variables get a leading underscore."""
    names = {} if names is None else names
    match t:
        case TParam(number, generic):
            if number not in names:
                n = len(names)
                names[number] = chr(ord("a") + n % 26) + (str(n // 26) if n >= 26 else "")
            return names[number] if generic else "_" + names[number]
        case TCon("->", (param, result)):
            left = show_type(param, names)
            if isinstance(param, TCon) and param.name == "->":
                left = f"({left})"
            return f"{left} -> {show_type(result, names)}"
        case TCon("*", items):
            return "(" + ", ".join(show_type(i, names) for i in items) + ")"
        case TCon(name, ()):
            return name
        case TCon(name, args):
            return f"{name}<" + ", ".join(show_type(a, names) for a in args) + ">"
    raise TypeError(f"not a type: {t!r}")


# %%
show_type(fn(tuple_of([fn(TParam(0), TParam(1)), TCon("List", (TParam(0),))]), TCon("List", (TParam(1, False),))))

# %% [markdown]
# `resolve` follows a type through its variables to a `TCon`/`TParam` tree;
# `resolve_all` does it for every node of the program, and `infer_program`
# is the whole chapter in one call: infer, resolve, and return the schemes.

# %%
#| export
class Inference(Inference):
    def resolve(self, t, cache: dict):
        x = self.shallow(t)
        if type(x) is TVar:
            p = self.uf.find(x)
            if p not in cache:
                cache[p] = TParam(len(cache), self.uf.description(p).level == GENERIC)
            return cache[p]
        if not x.args:
            return x
        key = id(x)
        if key not in cache:
            cache[key] = (x, TCon(x.name, tuple(self.resolve(a, cache) for a in x.args)))
        return cache[key][1]

    def resolve_all(self, program: c.Program) -> None:
        """Replace every recorded type in the program by its resolved form."""
        cache, todo = {}, [program.items]
        while todo:
            x = todo.pop()
            if isinstance(x, (list, tuple)):
                todo.extend(x)
                continue
            plan = _PLANS.get(type(x), False)
            if plan is False:
                plan = walk_plan(type(x))
            if plan is None:
                continue
            has_type, names = plan
            if has_type and x.type is not None:
                x.type = self.resolve(x.type, cache)
            for name in names:
                v = getattr(x, name)
                if v is not None and not isinstance(v, (str, int)):
                    todo.append(v)


# %% [markdown]
# `resolve_all` visits every node of the program, tens of thousands for a
# large one, so it does not ask `dataclasses.fields` at each node which of
# its fields to look into: it works that out once per class of node (and
# `pattern_warnings`, below, walks the typed program with the same plans).

# %%
#| export
_PLANS = {}     # a class -> how resolve_all walks its objects (looking fields up is slow)


def walk_plan(cls) -> tuple | None:
    """For a node class of the core tree: (has a `type` field, the other fields that may hold
    nodes); None for anything else (types themselves, data declarations, names)."""
    if is_dataclass(cls) and not issubclass(cls, (TCon, TParam, s.Data, Span)):
        names = [f.name for f in fields(cls)]
        plan = ("type" in names, tuple(n for n in names if n not in ("type", "span", "op_span")))
    else:
        plan = None
    _PLANS[cls] = plan
    return plan


def infer_program(program: c.Program) -> Typing:
    """Infer and record the types of a resolved core program; CompileError if ill-typed."""
    try:                                # as in chapter 4a: millions of objects, no garbage cycles
        with collector_paused(), recursion_limit(NESTING_LIMIT):
            inference = Inference()
            schemes = inference.program(program)
            inference.resolve_all(program)
            cache = {}
            return Typing({name: inference.resolve(t, cache) for name, t in schemes.items()})
    except RecursionError:
        raise CompileError("the program is nested too deeply for this compiler", program.span) from None


# %% [markdown]
# `resolve` keeps, for each constructor node it has resolved, the original
# node next to the result, so that the `id` it uses as a key stays valid; and
# one cache serves the whole program, so that a type shared by many nodes is
# resolved once.
#
# ## Inference at work
#
# Inference is the pipeline's stage `types` ([chapter 4](04_pipeline.ipynb)):
# it hands on the core program it was given, every node now carrying its
# type, and leaves the type schemes of the definitions in the unit's field
# `typing`, which is what `lc show types` prints. Its interpreter is still
# chapter 4b's: types change nothing in what a program does.
# `check_types` runs the pipeline up to this stage, and `types_of` prints
# each definition's scheme. First the examples from the start of the
# chapter:

# %%
#| export
from lcompiler import pipeline
from lcompiler.errors import Source
from lcompiler.interp import Interpreter


@pipeline.stage("types", show=lambda program, unit: typing_text(program, unit.typing),
                interpret=lambda program, unit, out: Interpreter(out).run(program))
def types_stage(program: c.Program, unit: pipeline.Unit) -> c.Program:
    unit.typing = infer_program(program)
    return program


def check_types(source: Source) -> tuple[c.Program, Typing]:
    """Parse, desugar, resolve and type a program, through the pipeline's stages up to `types`:
    its typed core and the schemes of its definitions, or a CompileError."""
    program, unit = pipeline.compile_to("types", source)
    return program, unit.typing


def typing_text(program: c.Program, typing: Typing) -> str:
    """Every top-level definition with its type scheme, in program order."""
    return "\n".join(f"{d.name.name} : {typing.show(d.name.name)}"
                     for d in program.items if isinstance(d, c.Def))


def show_types(source: Source) -> str:
    return typing_text(*check_types(source))


# %%
def types_of(text: str) -> None:
    try:
        print(show_types(Source("example.l", text)))
    except CompileError as error:
        print(error.render())


types_of("""\
def inc = { x -> x + 1 }
def call_with_one = { f -> f(1) }
def self_apply = { x -> x(x) }
""")

# %% [markdown]
# `self_apply`'s call would need a type that contains itself: the program
# is rejected, with that error alone, since the other definitions are
# well-typed. Without it, and with more examples:

# %%
types_of("""\
data List<t> { Cons(t, List<t>); Nil }
def inc = { x -> x + 1 }
def call_with_one = { f -> f(1) }
def id(x) = x
def pair = (id(1), id(true))
def compose(f, g) = { x -> f(g(x)) }
def same(a, b) = a == b
def length = {
  Cons(_, tail) -> 1 + length(tail)
  Nil -> 0
}
def map(f, list) = match (list) {
  Cons(x, rest) -> Cons(f(x), map(f, rest))
  Nil -> Nil
}
def lengths = map(length, Cons(Cons(1, Nil), Cons(Nil, Nil)))
def empty = map(id, Nil)
""")

# %% [markdown]
# `same` compares values of an unknown type, so that type defaulted to `Int`.
# `lengths` is not a syntactic value (it is a call), so it is not
# generalised, but its type is fully known. `empty` is a call too: its
# element type, unknown and not generalised, is *weak*, `_a` — the first use
# of `empty` at some list type will fix it.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: what defaulting == to Int costs</p>
#
# `same : (Int, Int) -> Bool` is not the most general type `same` could
# have: it works as well on two `String`s, and `same("a", "b")` is
# nevertheless a type error. Hindley–Milner without `==` infers a
# *principal* type for every definition, a type of which every other type
# it could be given is an instance; the defaulting rule gives that up, for
# the definitions that compare values of a type they do not fix. The ways to
# keep it: OCaml's `=` compares values of every type, `'a -> 'a -> bool`,
# and raises an exception at run time on functions, which L's contract
# forbids; Haskell puts the condition in the scheme, `Eq a => a -> a ->
# Bool`, and passes the comparison as a hidden argument; a scheme
# `∀a ∈ {Int, Bool, String}. (a, a) -> Bool` would do the same for L (it is
# Standard ML's answer: its *equality type variables*, written `''a`, the
# notation chapter 4b's table borrows, range over the types that `=` can
# compare), and would cost nothing at run time, since [chapter 5b](05b_mono.ipynb) copies
# each polymorphic definition at the ground types it is used at. L chose the
# simplest rule. Haskell defaults too, but only a type that nothing else
# can settle — an ambiguous numeric type, as in `show (2 ^ 10)`, or one the
# monomorphism restriction keeps from being generalised — which becomes
# `Integer`; a function such as `f x = x + 1` keeps the condition in its
# scheme, `Num a => a -> a`. L defaults even a type that could have been
# generalised, and that is what costs `same` its principal type.
#
# </div>
#
# The mutually recursive definitions `even` and `odd` form one component, and
# `id` is used at two types by other components:

# %%
types_of("""\
def id(x) = x
def even(n) = if (n == 0) id(true) else odd(n - 1)
def odd(n) = if (n == 0) id(false) else even(n - 1)
def both = (even(id(10)), odd(3))
""")

# %% [markdown]
# The `swap` of the value restriction: its definitions alone, then the
# program that uses it at two types. `swap`'s type is weak, and the second
# call is the error, with a note at `swap`, whose type the first call fixed:

# %%
swap = """\
data List<t> { Cons(t, List<t>); Nil }
def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
def swap = make_cell()
"""
types_of(swap)
types_of(swap + """\
swap(Cons(1, Nil))
swap(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
""")

# %% [markdown]
# ### A weak type read by a later definition
#
# The first edition of this chapter had a hole here, and a reader found it
# with the chapter's own `make_cell`; the program below is the one the
# reader sent. Add one
# definition, `g`, that does nothing but return `swap`, and use `swap`
# through `g`. The definitions alone, then the program:

# %%
reader = swap + """\
def g(y) = swap
g(1)(Cons(1, Nil))
g(2)(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
"""
types_of(swap + "def g(y) = swap\n")
types_of(reader)

# %% [markdown]
# That is the right answer: `g` is generalised in the type of its own
# parameter, `a`, but `swap`'s weak variable (`_b` in `g`'s type) stays
# weak; `g(1)` returns the one `swap` there is, the first call fixes its
# type at `List<Int>`, and the second call contradicts it, at the place the
# contract says an error caused by the value restriction belongs. But the
# first edition accepted the program,
# with `g : a -> List<b> -> List<b>`. Each use of `g` then instantiated a
# fresh `b`: the first call stored a `List<Int>` in the cell, the second
# read it back as a `List<String>`. The reference interpreter, which never
# looks at a type, printed `false 1`; the compiled program, which prints a
# `String` by following a pointer to its bytes, followed the integer 1 and
# died of a segmentation fault. A program that had passed the type checker
# crashed, which is exactly what this chapter promises cannot happen.
#
# The levels tell why. `component` raises the level before it infers a
# group, so `swap`'s unknown is born at level 2, one deeper than the top.
# `swap` is not a value, so it is not generalised: its unknown is weak, and
# belongs to the top level from now on — it is free in the environment of
# every later definition, and the rule of `let` generalises only what is
# *not* free there. The first edition lowered the level counter after the
# group, but left the group's unknowns at level 2. The next component, `g`,
# was inferred at level 2 too, and generalising it took every unknown of its
# type deeper than level 1: its own `a`, and `swap`'s. The fix is `lower`:
# a group that is not generalised brings its unknowns back to the level
# around it. (`let_bound` never had the problem, since it goes one level
# deeper only for a value.)
#
# Here is what each version does, printed after each component: the level
# of every unknown in the component's types (`∀` for a generalised one).
# `Traced` prints them; `FirstEdition` is the same inference with `lower`
# doing nothing, as the first edition did.

# %%
import io


class Traced(Inference):
    """An Inference that prints, after each component, the levels of the unknowns of its types."""

    def component(self, group: list) -> None:
        super().component(group)
        for d in group:
            t, generalised = self.globals[d.name.name]
            print(f"  {d.name.name:10} {'generalised' if generalised else 'weak':12} levels of its unknowns: "
                  + " ".join("∀" if level == GENERIC else str(level) for level in self.levels(t)))

    def levels(self, t) -> list:
        found, todo = {}, [t]
        while todo:
            x = self.shallow(todo.pop())
            if type(x) is TVar:
                p = self.uf.find(x)
                found.setdefault(p, self.uf.description(p).level)
            else:
                todo.extend(reversed(x.args))
        return list(found.values())


class FirstEdition(Traced):
    def lower(self, t) -> None:
        """The bug of the first edition: a weak group's unknowns stay one level too deep."""


for version in (FirstEdition, Traced):
    print(f"{version.__name__}:")
    inference, program = version(), check_names(Source("reader.l", reader))
    try:
        schemes = inference.program(program)
        printed = io.StringIO()
        Interpreter(printed).run(program)
        print("  accepted, with g :", show_type(inference.resolve(schemes["g"], {})))
        print("  and the interpreter prints:", printed.getvalue(), end="")
    except CompileError as error:
        print("  rejected:", error.render().splitlines()[0])

# %% [markdown]
# In the first edition, `swap`'s unknown stayed at level 2 after its
# component, and `g`'s generalisation turned it into one of `g`'s own
# quantified variables: `g`'s second `∀`, the `b` of its type, which each
# use of `g` then instantiated afresh. With `lower`, the unknown is at
# level 1 when `g` is inferred, and stays there: `g` is generalised in its
# own parameter's type only, and the `_b` of `g : a -> List<_b> ->
# List<_b>` is weak, one type shared by every use, which the first use
# fixes.
#
# Three things now guard the fix. `tests/test_types.py` runs this program
# and its variants — `swap` read through an alias (`def alias = swap`, a
# value, since it is a variable), through a tuple, through a chain of two
# definitions, by two mutually recursive readers, from a weak group that
# is itself mutually recursive, built by nested `let`s, and all of it inside
# a function — and each must be rejected at its second use. All of them but
# the two inside a function, which never had the problem, fail on the first
# edition. But a test written after a bug is understood guards against that
# bug, and the next one may be elsewhere; so `tests/test_soundness.py` asks
# a type checker this book did not write, OCaml's, about random programs
# made to sit where this bug hid (see "What the tests check", near the end).
# Last, [chapter 5b](05b_mono.ipynb)'s checker now runs on every
# compilation: a mistake of this kind that got past both would stop the
# compiler with an internal error pointing at the definition it broke, not
# crash the program when it runs.

# %% [markdown]
# ### Components and levels, drawn
#
# Here is the whole top level at once, for one program that puts the two
# stories of this section together: `id`, `even` and `odd` from above, and
# `make_cell`, `swap` and `g`. The picture is drawn from what the compiler
# computes: `references` gives the arrows (a definition points at the
# definitions it uses), `strongly_connected` the components (a dashed frame
# around each), and `Levelled`, an `Inference` like `Traced`, records the
# order in which `program` hands the components to `component` (the number
# on the left), the level at which each component's unknowns are born, and
# their levels once the component is done, in its types: `∀` for a
# generalised unknown, a number for one that stayed unknown and belongs to
# that level (the levels `Traced` printed above). Each definition has its
# own column, in the order of the text; each component its own row, in the
# order of inference, so every arrow between components points up, to a
# component inferred earlier.

# %%
LEVELLED = """\
data List<t> { Cons(t, List<t>); Nil }
def id(x) = x
def even(n) = if (n == 0) id(true) else odd(n - 1)
def odd(n) = if (n == 0) id(false) else even(n - 1)
def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
def swap = make_cell()
def g(y) = swap
"""
types_of(LEVELLED)


# %%
class Levelled(Inference):
    """An Inference that records each component it infers: its names, in order, the levels its
    unknowns are born at, and the levels of the unknowns of its types once it is done."""

    levels = Traced.levels

    def __init__(self):
        super().__init__()
        self.steps, self.born = [], None

    def fresh(self) -> TVar:
        if self.born is not None:
            self.born.add(self.level)
        return super().fresh()

    def component(self, group: list) -> None:
        self.born = set()
        super().component(group)
        after = set()
        for d in group:
            after.update(self.levels(self.globals[d.name.name][0]))
        self.steps.append(([d.name.name for d in group], sorted(self.born), sorted(after, reverse=True),
                           self.globals[group[0].name.name][1]))
        self.born = None


# %% [markdown]
# `components_picture` lays the definitions out on that grid and draws
# them with the sizes, font and colours of `lcompiler.drawing`: a blue box
# per definition, a grey arrow per use (between two definitions of one
# row, an arc under the boxes, the deeper one for a use of a definition to
# the right; a loop on the right for a definition that calls itself), a
# dashed frame per component. Each shape says
# what it stands for in its attributes (`data-name`, `data-from`,
# `data-to`, …), which `tests/test_drawing.py` reads back from the picture
# stored in this notebook and compares with the program.

# %%
from html import escape
from xml.etree import ElementTree

from lcompiler.drawing import BOX_H, CHAR_W, GAP, STYLES


def level_text(level: int) -> str:
    return "∀" if level == GENERIC else str(level)


@dataclass
class SVGText:
    """An SVG text that Jupyter shows as a picture, with its description (its title) as its plain-text
    form and in its metadata. (Not a subclass of str: IPython prints a str as its text, whatever else it offers.)"""
    svg: str

    def _repr_mimebundle_(self, include=None, exclude=None):
        alt = ElementTree.fromstring(self.svg).findtext("{http://www.w3.org/2000/svg}title")
        return {"image/svg+xml": self.svg, "text/plain": alt}, {"alt": alt}


# %% [markdown]
# `SVGText` is how the picture reaches the page: Jupyter draws its SVG,
# and its plain-text form, and the site's alternative text for the image,
# are its title, a sentence that says what the picture shows. The picture
# itself:

# %%
def components_picture(text: str) -> SVGText:
    """The definitions of text as boxes, their uses as arrows, its components as frames, in the
    order inference takes them, with the levels of their unknowns."""
    program = check_names(Source("levels.l", text))
    inference = Levelled()
    inference.program(program)
    defs = {d.name.name: d for d in program.items if isinstance(d, c.Def)}
    uses = {name: sorted(references(d.value) & defs.keys()) for name, d in defs.items()}
    row = {name: i for i, (names, *_) in enumerate(inference.steps) for name in names}
    width, x, left, high = {}, {}, 34, BOX_H + 52
    for name in defs:                                   # a column per definition, in the order of the text
        x[name], width[name] = left + GAP + sum(width.values()) + 2 * GAP * len(width), len(name) * CHAR_W + 14
    y = {name: 40 + row[name] * high for name in defs}
    notes = round(max(x[name] + width[name] for name in defs) + 3 * GAP, 1)
    words = [f"{', '.join(map(str, born))} → " + (" ".join(map(level_text, after)) or "no unknowns")
             + (", generalised" if general else ", weak")
             for names, born, after, general in inference.steps]
    shapes = [f'<text x="{left}" y="18" font-weight="bold">definitions →</text>',
              f'<text x="{notes}" y="18" font-weight="bold">levels: born → after</text>']
    for i, (names, born, after, _) in enumerate(inference.steps):
        x0, x1 = min(x[n] for n in names) - GAP, max(x[n] + width[n] for n in names) + GAP
        top = 40 + i * high - 10
        shapes.append(f'<rect class="component" data-order="{i + 1}" data-members="{" ".join(names)}" '
                      f'data-born="{" ".join(map(str, born))}" data-after="{" ".join(map(level_text, after))}" '
                      f'x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{BOX_H + 30}" rx="8" '
                      f'fill="none" stroke="{STYLES["yellow"][1]}" stroke-dasharray="5,3"/>')
        shapes.append(f'<text x="{left - 22}" y="{top + 25}" font-weight="bold" '
                      f'fill="{STYLES["yellow"][1]}">{i + 1}</text>')
        shapes.append(f'<text x="{notes}" y="{top + 25}">{escape(words[i])}</text>')
    for name in defs:
        fill, stroke = STYLES["blue"]
        shapes.append(f'<rect class="definition" data-name="{name}" x="{x[name]:.1f}" y="{y[name]}" '
                      f'width="{width[name]:.1f}" height="{BOX_H}" rx="5" fill="{fill}" stroke="{stroke}"/>')
        shapes.append(f'<text x="{x[name] + width[name] / 2:.1f}" y="{y[name] + 15}" '
                      f'text-anchor="middle">{name}</text>')
    arrows = []
    for user in defs:
        for used in uses[user]:
            ux, vx = x[user] + width[user] / 2, x[used] + width[used] / 2
            if row[used] < row[user]:                   # up, to a component inferred before
                path = f"M{ux:.1f},{y[user]} L{vx:.1f},{y[used] + BOX_H + 1}"
            elif used == user:                          # a definition that calls itself: a loop
                r = x[user] + width[user]
                path = (f"M{r:.1f},{y[user] + 6} C{r + 24:.1f},{y[user] - 8} "
                        f"{r + 24:.1f},{y[user] + BOX_H + 8} {r + 1:.1f},{y[user] + BOX_H - 6}")
            else:                                       # within a component: two arcs under the boxes
                bottom, depth = y[user] + BOX_H, 30 if ux < vx else 14
                path = (f"M{ux - 6:.1f},{bottom} Q{(ux + vx) / 2:.1f},{bottom + depth} "
                        f"{vx + 6:.1f},{bottom + 1}")
            arrows.append(f'<path class="uses" data-from="{user}" data-to="{used}" d="{path}" '
                          f'stroke="#475569" fill="none" marker-end="url(#arrow)"/>')
    width_all = notes + max(len(w) for w in words + ["levels: born → after"]) * CHAR_W + 10
    height = 40 + len(inference.steps) * high - 12
    alt = ("The definitions of the program as boxes, one column each, one row per component, "
           "in the order inference takes them. Uses: "
           + "; ".join(f"{user} uses {', '.join(uses[user])}" for user in defs if uses[user])
           + ". Components, in order, with the level their unknowns are born at and their levels after: "
           + "; ".join(f"{i + 1}. {' and '.join(names)}: {w}"
                       for i, ((names, *_), w) in enumerate(zip(inference.steps, words))) + ".")
    return SVGText("\n".join(
        [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width_all:.0f}" height="{height}" '
         f'viewBox="0 0 {width_all:.0f} {height}" font-family="monospace" font-size="12" fill="#0f172a">',
         f'<title>{escape(alt)}</title>',
         '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
         '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>',
         f'<rect width="{width_all:.0f}" height="{height}" fill="#ffffff"/>', *arrows, *shapes, '</svg>']))


components_picture(LEVELLED)

# %% [markdown]
# Read it from the top. `id` comes first, alone, since it uses nothing; its
# unknown is born at level 2, one deeper than the top, and generalised. `even`
# and `odd` use each other, so they are one component, inferred together
# at level 2 and monomorphic within it; their types end with no unknowns
# at all. `make_cell` is a function, a value, and is generalised. `swap` is
# a call: weak, its unknown lowered by `lower` from level 2 to level 1, the
# top. Last, `g`: its own unknown is born at level 2 and generalised, but
# its type also holds `swap`'s unknown, still at level 1 — the weak `_b` of
# `g : a -> List<_b> -> List<_b>`, printed above. In the first edition, as
# `FirstEdition` printed above, `swap`'s row would end in `2` and `g`'s in
# `∀ ∀`: `g`'s generalisation took `swap`'s unknown too.


# %% [markdown]
# ### The L blog's sample program, step by step
#
# The sample program of the L compiler's blog (the post "A framework for CPS
# transformation", one of the [sources](../bibliography.md#the-l-blog) this
# book grew from), which chapter 4b ran, rebinds `true` and `false` to functions
# that choose one of two values — *Church booleans*, after Alonzo Church,
# who encoded data as functions — and builds pairs from them. Here is how inference goes
# through it, with the type each name gets (the block is the argument of an
# `==`, inside an `assert`):
#
# 1. `let true = { (x,y) -> x }`: a function of a pair; `x : a`, `y : b`;
#    result `a`. A syntactic value, generalised: `true : ∀a b. (a, b) -> a`.
# 2. `let false = { (x,y) -> y }`: likewise `false : ∀a b. (a, b) -> b`.
# 3. `let pair = { (first,second) -> boolean -> boolean(first, second) }`:
#    `first : a`, `second : b`, `boolean : c`; the call makes
#    `c = (a, b) -> d`. So `pair : ∀a b d. (a, b) -> ((a, b) -> d) -> d`: give
#    it two values, and it returns a function that passes both to a chooser.
# 4. `let first = { p -> p(true) }`: `p : e`, applied to `true`, which is
#    instantiated as `(f, g) -> f`; so `e = ((f, g) -> f) -> h`, and
#    `first : ∀f g h. (((f, g) -> f) -> h) -> h`. `second` is the same with
#    `g`.
# 5. `let p = pair(7, 5)`: `pair` instantiated with `a = Int`, `b = Int`:
#    `p : ((Int, Int) -> d) -> d`. A call, not a value: `d` is *not*
#    generalised — it is weak.
# 6. `second(p)`: `second`'s parameter type `((f, g) -> g) -> h` meets `p`'s
#    type: `f = g = Int`, `d = Int`, `h = Int`. So `second(p) : Int`, and that
#    fixed `d`, `p`'s weak variable, at `Int` for good.
# 7. `first(p)`: `first` needs `((f', g') -> f') -> h'` — unified with
#    `((Int, Int) -> Int) -> Int`: fine, `Int`. The block's value,
#    `second(p) * (first(p) + second(p))`, is an `Int`, compared with `60`.
#
# Step 7 works *because* `first` and `second` both choose an `Int` from a
# pair of `Int`s. Had the program built `pair(7, "five")`, the first
# selector applied to `p` would fix `d` for good, and no later use could
# choose the other field's type: `p` is not polymorphic. The program
# passes, and the types recorded on its nodes are what steps 1–7 said:

# %%
seeds = Source("seeds.l", """\
assert( { let true = { (x,y) -> x }
          let false = { (x,y) -> y }
          let pair = { (first,second) -> boolean -> boolean( first, second) }
          let first = { p -> p( true)}
          let second = { p -> p( false)}
          let p = pair( 7, 5)
          second( p) * (first( p) + second( p)) } == 60)
""")
program, typing = check_types(seeds)

node = program.items[0].cond.args[0]       # the block, in core: nested lets
while isinstance(node, c.Let):
    print(f"{node.name:6} : {show_type(node.value.type)}")
    node = node.body
print(f"{'result':6} : {show_type(node.type)}")

# %% [markdown]
# (The schemes of the `let`-bound functions print with their quantified
# variables; `p`'s variable has been fixed to `Int` by the time inference
# ends.)

# %% [markdown]
# ### Exceptions, typed
#
# Two programs with exceptions that type, then the mistakes: raising what is not an
# exception, a clause whose pattern is not one, a clause whose type is not
# the block's, and comparing two exceptions with `==` (only `Int`, `Bool` and
# `String` can be compared).

# %%
for text in ["""exception Negative
def root(n) = if (n < 0) raise(Negative) else n / 2
def safe(n) = try { root(n) } catch { Negative -> 0; DivisionByZero -> -1 }""",
             """exception Failure(String)
def fail(why) = raise(Failure(why))
def message(e) = e.{ Failure(why) -> why; _ -> "another" }"""]:
    program, typing = check_types(Source("exceptions.l", text))
    print(typing_text(program, typing), end="\n\n")

for text in ["def f(x) = raise(x + 1)",
             "exception Stop\ndef f(x) = try { x } catch { 0 -> 1 }",
             "exception Stop\ndef f(x) = try { x + 1 } catch { Stop -> \"stopped\" }",
             "exception Stop\ndef same = Stop == Stop"]:
    try:
        check_types(Source("wrong.l", text))
    except CompileError as error:
        print(error.render(), end="\n\n")

# %% [markdown]
# ## Errors
#
# Some ill-typed programs, and what the programmer is told. The function
# `unused` is never called: it is rejected all the same, since every
# definition is checked.

# %%
for name, text in {
    "args.l": "def add(a, b) = a + b\nprint(add(1, true))",
    "cond.l": "def f(n) = if (n + 1) 1 else 2",
    "branch.l": "def f(c) = if (c) 1 else \"one\"",
    "restriction.l": "def id(x) = x\ndef f() = {\n  let g = id(id)\n  print(g(1), g(true))\n}",
    "unused.l": "def unused(x) = {\n  let y = x + 1\n  y && true\n}",
    "compare.l": "print((1, 2) == (1, 2))",
    "data.l": "data Tree<a> { Leaf; Node(Tree<a>, b, Tree<a>) }",
    "not_fn.l": "def x = 3\nprint(x(1))",
    "infinite.l": "def loop = { f -> f(f) }",
}.items():
    try:
        check_types(Source(name, text))
        print(f"{name}: accepted!")
    except CompileError as error:
        print(error.render(), end="\n\n")

# %% [markdown]
# A program with several type errors gets them all, in the order of the
# source, though inference meets them in the order of the components
# (`sign` is typed before `describe`, which uses it). The error in `sign`
# does not spill over: `describe`'s use of it is not reported, and
# `describe`'s own mistake is.

# %%
try:
    check_types(Source("several.l", """\
data Shape { Circle(Int); Rect(Int, Int) }
def describe(s) = s.{ Circle(r) -> sign(r) + 1; Rect(w, h) -> "rect" }
def sign(n) = if (n > 0) "positive" else 0
print(Rect(1, "two"))
"""))
except CompileError as error:
    print(error.render())

# %% [markdown]
# ## Showing types, and running only well-typed programs
#
# From this chapter on, `lc run` type-checks a program before running it: an
# ill-typed program is refused with exit status 1, and nothing runs. (The
# command, in [appendix C](C_cli.ipynb#lc-run), calls `check_types` and then
# chapter 4b's interpreter, under `--interp`; without it, from [chapter
# 11](11_running.ipynb) on, it compiles the checked program to native code.)
# `lc show types` prints the type of every top-level definition.

# %%
import contextlib
import tempfile
from pathlib import Path

from lcompiler.cli import lc

with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("lists.l").write_text("""\
data List<t> { Cons(t, List<t>); Nil }
def length = { Cons(_, tail) -> 1 + length(tail); Nil -> 0 }
def map(f, l) = l.{ Cons(x, r) -> Cons(f(x), map(f, r)); Nil -> Nil }
print(map({ x -> x * x }, Cons(1, Cons(2, Nil))), length(Cons("a", Nil)))
""")
    print("exit status", lc("show", "types", "lists.l"))
    print("exit status", lc("run", "--interp", "lists.l"))
    Path("bad.l").write_text('print("before")\nprint(1 + "one")\n')
    print("exit status", lc("run", "--interp", "bad.l"))

# %% [markdown]
# `bad.l` prints nothing at all: the type error is found before anything
# runs.
#
# ## How inference scales, and where it does not
#
# Inference visits each node once, and each unification costs the size of
# the types it compares, with union-find's nearly constant finds; so on
# ordinary programs, whose types stay small, it is linear in the size of the
# program. `bench/infer_speed.py` measures it on generated programs of
# definitions (each a line that calls the definition before it and makes
# six uses of the polymorphic helpers `id`, `pair`, `length` and `map`,
# each instantiated afresh), doubling their number from one size to the next;
# by default up to 100,000 definitions, which takes minutes. The cell runs it
# up to 6,400, live (its times are this machine's, now, so the book's tests
# do not compare them):

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

print(subprocess.run([sys.executable, "../bench/infer_speed.py", "--largest", "6400", "--repeat", "1"],
                     capture_output=True, text=True, check=True).stdout, end="")

# %% [markdown]
# The last line compares the time per definition of the largest program
# with the smallest's. Exactly linear inference would print 1.00; one
# quadratic in the number of definitions would print about 64, since the
# largest program has 64 times as many definitions as the smallest. What it
# prints is a small factor, nowhere near 64 — but not 1.00 exactly: on a
# shared machine the time per definition moves from run to run, and the
# single doublings (the column "ratio") wander around 2, sometimes well
# above it. The front
# end of chapters 4a and 4b (parsing, desugaring, resolving) takes about as
# long again as inference.
#
# Types do not always stay small. Each function below doubles the size of
# the type of the one before: `double(x)` is a pair of two `x`s, so the
# result type of `d0` has 2 copies of `a`, that of `d3` has 2⁴ = 16, and
# `dn`'s has 2ⁿ⁺¹. So the *printed* type of a program of n lines can have
# 2ⁿ symbols — while, drawn as a graph whose equal parts are shared, it
# has only a few nodes per line: the growth is in the writing, not in the
# information. (This family is the gentle one: deciding whether a program
# has a type at all is, in the worst case, exponential in time — Mairson
# 1990; Kfoury, Tiuryn and Urzyczyn 1990 — with nested `let`s whose types
# grow doubly exponentially when written out.) In this implementation
# sharing does not save us either: unification shares the parts it makes equal, but each use of `d{i-1}`
# in `d{i}` *instantiates* its scheme, and `instantiate` copies the type
# node by node, shared parts included. The cell counts the type variables
# inference creates, and the distinct nodes of `dn`'s type in memory:

# %%
def doubling(n: int) -> str:
    lines = ["def double(x) = (x, x)", "def d0(x) = double(x)"]
    lines += [f"def d{i}(x) = double(d{i - 1}(x))" for i in range(1, n + 1)]
    return "\n".join(lines)


def distinct_nodes(t) -> int:
    seen, todo = set(), [t]
    while todo:
        x = todo.pop()
        if id(x) not in seen:
            seen.add(id(x))
            todo.extend(x.args if isinstance(x, TCon) else ())
    return len(seen)


class Counting(Inference):
    created = 0

    def fresh(self) -> TVar:
        Counting.created += 1
        return super().fresh()


for n in (3, 6, 9, 12):
    Counting.created = 0
    program = check_names(Source("doubling.l", doubling(n)))
    inference = Counting()
    t = inference.resolve(inference.program(program)[f"d{n}"], {})    # shares what inference shares
    shown = show_type(t)
    print(f"n = {n:2}: {Counting.created:3} variables; d{n}'s type has {distinct_nodes(t):5} distinct nodes "
          f"and prints with {len(shown):6} characters: {shown[:30]}…")

# %% [markdown]
# The variables grow linearly, four per line, but the printed size doubles
# with each line of the program, and so does the number of nodes of the type
# that inference holds in memory: three lines more, eight times as many. (No
# real program meets this; but it is why no compiler promises linear-time
# type inference for ML, and why the benchmark above uses types of bounded
# size.)
#
# ## What the tests check
#
# `tests/test_types.py`:
#
# - every program of the corpus that must run (`tests/corpus/run`, `fail`,
#   and `examples/`) is well-typed;
# - every program of `tests/corpus/types/` is rejected at the line and column
#   its first line names, with the expected and found types it names;
# - Hypothesis generates random well-typed programs *from types* — an
#   expression is built to have a chosen type, using literals, variables in
#   scope, operators, `if`, `let`, functions, calls, tuples, lists and the
#   polymorphic helpers `id`, `twice`, `length`, `map` — and checks that
#   inference accepts them, that the chosen type is an instance of the type
#   inferred (it may be more general: `Nil` is a `List<a>`), and that the
#   interpreter runs them without a runtime error of any kind: no type
#   confusion at run time;
# - the value-restriction program above is rejected at its second call,
#   and `id`, `even`/`odd`, `map`, `empty` and `same` get the schemes this
#   chapter prints (the L blog's sample program is in the corpus, as
#   `tests/corpus/run/seed_sample.l`; the doubling types, like every
#   other output of this chapter, are compared by nbval when the notebook
#   runs under pytest);
# - the reader's program and its variants ("A weak type read by a later
#   definition") are rejected at their second use, and a definition that
#   reads a weak type is generalised in its own variables only;
# - the random programs also raise (at any type) and catch, with clauses
#   that do and do not match, and may end with an uncaught exception but
#   never with any other runtime error; the mistakes with exceptions —
#   raising what is not an `Exn`, a clause of another type than the block,
#   a pattern that is not an exception, `==` on `Exn`, a field of the wrong
#   type — are in the golden files of `tests/errors/`.
#
# `tests/test_soundness.py` checks the type checker against OCaml's.
# Hypothesis writes programs around a prelude of data types with one, two
# and three parameters and helpers that make cells, references and partial
# applications; their definitions are *weak* (`make_cell()`, `id(Nil)`,
# `pairer(Nil)`, a block whose `var` a closure captures) or values that
# read earlier ones (aliases, tuples, functions returning them, chains and
# mutually recursive pairs of readers, local polymorphic and local weak
# `let`s), and their statements use each at types chosen per use — mostly
# the same for the same unknown, sometimes not. Some programs are well
# typed, many are not, and the generator does not know which. Each is
# translated to OCaml (`data` to variant types, `var` to `ref`, definitions
# to `let` and `let rec … and …` per component) and compiled by `ocamlc`.
# What L accepts, OCaml must accept: OCaml's value restriction is the
# *relaxed* one (it generalises `id(Nil)`), so OCaml may accept more, never
# less. A program L accepts is then run three ways — interpreted, compiled,
# and in OCaml, whose printers are built for the types L recorded — and the
# outputs must agree, with no crash and no internal error. With the first
# edition's bug put back, the same test fails. `python tools/soundness.py`
# runs the long version, and records its figures in `tests/soundness.json`:

# %%
import json

for name, run in json.loads(Path("../tests/soundness.json").read_text()).items():
    f, machine = run["figures"], run["machine"]
    print(f"{name}: {f['programs']} programs ({run['distinct']} distinct), `{run['command']}`, "
          f"{machine['cpu']}, {machine['cores']} cores")
    print(f"  accepted by L {f['accepted by L']}, by OCaml {f['accepted by OCaml']}, by L only "
          f"{f['accepted by L only']}, by OCaml only {f['accepted by OCaml only']}")
    print(f"  run compiled {f['run compiled']}: status other than 0 {f['compiled: status not 0']}, "
          f"crashed {f['compiled: crash (killed by a signal)']}; outputs that differ {f['outputs that differ']}")
    kinds = run["findings by kind"]
    print(f"  programs with findings: {f['programs with findings']}" + (f", by kind: {kinds}" if kinds else ""))

# %% [markdown]
# As the compiler is: no finding, and OCaml accepts a few programs that L
# rejects, as it may: its relaxed value restriction generalises what L's
# does not (`id(Nil)`), and its `=` compares values of any type. With the
# first edition's bug put back, OCaml rejects
# programs that L accepts; no compiled program crashes, because those whose
# recorded types disagree stop at compile time with chapter 5b's internal
# error; and the reference interpreter, which never looks at a type, meets
# a value of the wrong kind in a few (it stops with a runtime error such
# as "this is not a function"), and in two prints something other than
# OCaml does.
#
# `tests/test_errors.py` compares the messages of this chapter, notes and
# "did you mean" included, with golden files (`tests/errors/`): the two
# branches of an `if`, the clauses of a `match` and of a function, the
# operands of `==`, the argument of a top-level function, the field of a
# constructor; three type errors in three definitions, all reported in the
# order of the source; a definition whose error is not reported again in
# the definitions that use it.
#
# ## Warnings for pattern matching
#
# A program can type-check and still contain a mistake that the types
# let through. Three are common with patterns, and the compiler warns of
# them (`FILE:LINE:COL: warning: …`, on standard error; the program still
# compiles and runs, unless `-Werror` makes them errors):
#
# - a `match`, a function of several clauses or a `let` whose pattern can
#   fail, that does **not cover** every value of its type. The program
#   stops with a match failure when such a value comes; the warning names
#   one: `this match does not cover Cons(_, Cons(_, _))`;
# - a clause that **can never match**, because the clauses above it match
#   every value it would;
# - a pattern `true` or `false`. L's contract makes them names that can be
#   rebound, so in a pattern they bind a new variable, which matches
#   anything: `match (b) { true -> "yes"; false -> "no" }` says `yes` for
#   `false`.
#
# A `catch` is a match too, but one that does not cover every exception is
# normal — an exception it does not name goes on to the next `try` — so
# only its unreachable clauses are warned about.
#
# The first two are questions about sets of values, answered with the
# algorithm of Luc Maranget's "Warnings for pattern matching" (JFP 2007),
# which OCaml and Rust use. Write the clauses as the rows of a *matrix*
# P, one column per value being matched (one, to start with). A row of
# patterns q is **useful** with respect to P if some value vector matches q
# and no row of P. Then:
#
# - clause i is unreachable when its pattern is not useful with respect to
#   the clauses above it;
# - the match is exhaustive when the wildcard `_` is not useful with
#   respect to all its clauses — and when it is useful, the values that
#   show it are the values the match misses.
#
# Usefulness is computed by looking at the first column. If q starts with
# a constructor c of arity n, keep the rows of P whose first pattern could
# match a c value — those starting with c, whose n arguments replace it,
# and those starting with a wildcard, which becomes n wildcards: the
# *specialised* matrix S(c, P) — and ask whether the arguments of q, then
# the rest of q, are useful against it. If q starts with a wildcard, look
# at the constructors Σ that head the first column of P. When Σ holds every
# constructor of the type (`Cons` and `Nil` for a list; the one
# constructor of a tuple), a value escapes P exactly when it escapes for
# one of them: try each c in Σ. When Σ misses some — always so for Int,
# whose constructors are its infinitely many numbers — a value headed by
# a missing constructor is matched only by the rows that start with a
# wildcard, the *default* matrix D(P): ask whether the rest of q is useful
# against D(P). With no column left, q is useful exactly when P has no row.
#
# The same recursion, asked for the wildcard, builds the missing value
# on its way back up: `c(w1, …, wn)` from the witness of S(c, P), or a
# missing constructor with `_` arguments (an Int that no clause names) in
# front of the witness of D(P). A worked example: the function `third` of
# the cell below, whose clauses are the rows `Nil`, `Cons(_, Nil)` and
# `Cons(_, Cons(_, Nil))`. Is `_` useful?
#
# ```text
# P:  Nil                      Σ = {Nil, Cons}: complete, try each
#     Cons(_, Nil)             S(Nil, P)  = one row, no column: nothing escapes
#     Cons(_, Cons(_, Nil))    S(Cons, P) = _ Nil  /  _ Cons(_, Nil)
#
# S(Cons, P), column 1: only wildcards, Σ = {}   -> witness  _ , then D = Nil / Cons(_, Nil)
# D: Σ = {Nil, Cons} complete; S(Nil, D) covered; S(Cons, D) = _ Nil
#    column 1 wildcards      -> _ , then the matrix Nil alone
#    Nil alone: Σ = {Nil} misses Cons -> Cons(_, _), and no row is left: escapes
# back up: Cons(_, Cons(_, _)) for D, so Cons(_, Cons(_, Cons(_, _))) for P
# ```
#
# A list of three or more elements escapes, and that is the warning below.
#
# The patterns of L are variables and `_` (wildcards), integers (a type
# with infinitely many constructors, never all named), `()`, tuples (one
# constructor, as many fields as the tuple), and the constructors of a data
# type, all known from its declaration. Exceptions, the type `Exn`, are
# treated like Int: a program may always declare one more. Strings and
# Bools have no literal patterns in L, so only a wildcard covers them.

# %%
#| export
WILD = None                 # a variable or _: matches anything


def head(p) -> tuple | None:
    """The constructor of a pattern, as (key, arity), and its arguments; WILD for a variable or _."""
    match p:
        case s.PCon(name, args):
            return ("con", name), list(args or [])
        case s.PTuple(items):
            return ("tuple", len(items)), list(items)
        case s.PInt(value):
            return ("int", value), []
        case s.PUnit():
            return ("unit",), []
    return WILD


class Patterns:
    """Maranget's usefulness, over the data types of one program."""

    def __init__(self, datas: list):
        self.family = {}        # constructor name -> (its data type's name, [(constructor, arity)])
        for d in datas:
            members = [(k.name, len(k.fields or [])) for k in d.constructors]
            for k in d.constructors:
                self.family[k.name] = (d.name, members)

    def complete(self, keys: list) -> bool:
        """Do the constructors KEYS, heads of one column, include every constructor of its type?"""
        if not keys:
            return False
        kind = keys[0][0]
        if kind in ("tuple", "unit"):
            return True
        if kind == "con" and keys[0][1] in self.family:
            data, members = self.family[keys[0][1]]
            return data != c.EXN and {name for name, _ in members} <= {k[1] for k in keys}
        return False

    def arity(self, key: tuple) -> int:
        if key[0] == "tuple":
            return key[1]
        if key[0] == "con":
            return dict(self.family[key[1]][1])[key[1]] if key[1] in self.family else 0
        return 0

    @staticmethod
    def specialise(rows: list, key: tuple, n: int) -> list:
        out = []
        for row in rows:
            h = head(row[0])
            if h is WILD:
                out.append([WILD] * n + row[1:])
            elif h[0] == key:
                out.append(h[1] + row[1:])
        return out

    @staticmethod
    def default(rows: list) -> list:
        return [row[1:] for row in rows if head(row[0]) is WILD]

    def heads(self, rows: list) -> list:
        keys = []
        for row in rows:
            h = head(row[0])
            if h is not WILD and h[0] not in keys:
                keys.append(h[0])
        return keys

# %% [markdown]
# Usefulness itself, the recursion of the worked example: a row `q` whose
# first pattern is a constructor asks the specialised matrix; a wildcard
# asks every constructor of the column when the column's heads name them
# all (a complete signature), and only the default matrix when they do
# not — a value with a constructor no row names would escape there.

# %%
#| export
class Patterns(Patterns):
    def useful(self, rows: list, q: list) -> bool:
        """Is the pattern row Q useful with respect to the matrix ROWS: does a value match Q and no row?"""
        if not q:
            return not rows
        h = head(q[0])
        if h is not WILD:
            return self.useful(self.specialise(rows, h[0], len(h[1])), h[1] + q[1:])
        keys = self.heads(rows)
        if self.complete(keys):
            return any(self.useful(self.specialise(rows, k, self.arity(k)), [WILD] * self.arity(k) + q[1:])
                       for k in keys)
        return self.useful(self.default(rows), q[1:])

# %% [markdown]
# A warning is better with an example of what escapes. `missing` follows
# the same recursion but returns the witness it finds, as text: the first
# constructor (in the order of the declaration, so that the message is the
# same at every run) whose specialised matrix lets a value through, or, for
# an incomplete column, a constructor nobody named (`absent`) — a number
# not among the integers tried, a constructor of the data type, or `_`.

# %%
#| export
class Patterns(Patterns):
    def missing(self, rows: list, n: int) -> list | None:
        """N patterns (as text) that describe values matched by no row of ROWS; None if there are none."""
        if n == 0:
            return None if rows else []
        keys = self.heads(rows)
        if self.complete(keys):
            for k in self.ordered(keys):
                a = self.arity(k)
                w = self.missing(self.specialise(rows, k, a), a + n - 1)
                if w is not None:
                    return [self.show(k, w[:a])] + w[a:]
            return None
        w = self.missing(self.default(rows), n - 1)
        if w is None:
            return None
        return [self.absent(keys)] + w

    def ordered(self, keys: list) -> list:
        """Constructors in the order of their declaration, so that the witness is predictable."""
        if keys[0][0] == "con":
            order = [name for name, _ in self.family[keys[0][1]][1]]
            return sorted(keys, key=lambda k: order.index(k[1]))
        return keys

    def absent(self, keys: list) -> str:
        """A constructor of the column's type that no key names, with _ for its arguments; _ if any."""
        if keys and keys[0][0] == "int":
            taken = {k[1] for k in keys}
            return str(next(i for i in range(len(taken) + 1) if i not in taken))
        if keys and keys[0][0] == "con" and keys[0][1] in self.family:
            data, members = self.family[keys[0][1]]
            for name, a in members:
                if ("con", name) not in keys and data != c.EXN:
                    return self.show(("con", name), ["_"] * a)
        return "_"

    @staticmethod
    def show(key: tuple, args: list) -> str:
        if key[0] == "tuple":
            return "(" + ", ".join(args) + ")"
        if key[0] == "int":
            return str(key[1])
        if key[0] == "unit":
            return "()"
        return key[1] + (f"({', '.join(args)})" if args else "")


# %% [markdown]
# The three kinds of warning are found by walking the typed core program.
# A function of several clauses and a refutable `let` both became a
# `Match` in [chapter 4b](04b_meaning.ipynb): a function's `Match` is the
# body of a `Lambda` whose parameter is a fresh name (`%3`), and a `let`'s
# `Match` has the span of its keyword `let`; this is how the messages tell
# them apart. Nested functions and matches are found by looking into every
# field of every node, with a stack rather than recursion, since programs
# may be nested deeply.

# %%
#| export
from lcompiler.errors import CompileWarning


def bound_bools(p) -> list:
    """The variables named true or false that a pattern binds."""
    match p:
        case s.PVar(name, span) if name in ("true", "false"):
            return [(name, span)]
        case s.PCon(_, args):
            return [b for a in args or [] for b in bound_bools(a)]
        case s.PTuple(items):
            return [b for i in items for b in bound_bools(i)]
    return []


def pattern_warnings(program: c.Program) -> list:
    """The warnings about the patterns of a program: non-exhaustive, unreachable, true/false bound."""
    checker = Patterns([d for d in program.items if isinstance(d, s.Data)])
    warnings, functions, todo = [], set(), [program.items]
    while todo:
        x = todo.pop()
        if isinstance(x, (list, tuple)):
            todo.extend(x)
            continue
        plan = _PLANS.get(type(x), False)       # the fields to look into, as resolve_all does
        if plan is False:
            plan = walk_plan(type(x))
        if plan is None:
            continue
        if isinstance(x, c.Lambda) and isinstance(x.body, c.Match) and x.param.startswith("%"):
            functions.add(id(x.body))
        if isinstance(x, (c.Match, c.Try)):
            warnings += clause_warnings(checker, x, id(x) in functions)
        for name in plan[1]:
            v = getattr(x, name)
            if v is not None and not isinstance(v, (str, int)):
                todo.append(v)
    return sorted(warnings, key=lambda w: w.span.start)


def clause_warnings(checker: Patterns, node, function: bool) -> list:
    warnings, rows = [], []
    for pattern, _ in node.clauses:
        for name, span in bound_bools(pattern):
            warnings.append(CompileWarning(f"this binds a new variable '{name}'; to test a Bool, use if", span))
        if not checker.useful(rows, [pattern]):
            warnings.append(CompileWarning("this clause can never match", pattern.span))
        rows.append([pattern])
    if isinstance(node, c.Match):
        missed = checker.missing(rows, 1)
        if missed is not None:
            what = ("the clauses of this function do not" if function else
                    "this pattern does not" if node.span.end - node.span.start == 3 and
                    node.span.source.text[node.span.start:node.span.end] == "let" else "this match does not")
            span = node.span
            if span.source.text.startswith("match", span.start):       # the keyword, not the whole match
                span = Span(span.source, span.start, span.start + len("match"))
            warnings.append(CompileWarning(f"{what} cover {missed[0]}", span))
    return warnings


# %% [markdown]
# The stage `types` is registered again, now with its warnings: the new
# registration replaces the first in the pipeline's table, and its body is
# the first stage's, `types_stage`, followed by the warnings. After
# inference, `pattern_warnings` looks at the typed program, and
# `report_warnings` ([appendix A](A_errors.ipynb#warnings)) hands them to
# where `lc`, the REPL or `%%L` shows them, or raises them as errors under
# `-Werror`.

# %%
#| export
from lcompiler.errors import report_warnings


@pipeline.stage("types", show=lambda program, unit: typing_text(program, unit.typing),
                interpret=lambda program, unit, out: Interpreter(out).run(program))
def types_with_warnings(program: c.Program, unit: pipeline.Unit) -> c.Program:
    program = types_stage(program, unit)
    report_warnings(pattern_warnings(program))
    return program


# %% [markdown]
# The example from the reader who asked for the warnings, and the three-clause
# list function of the worked example:

# %%
def warnings_of(text: str) -> None:
    program, _ = pipeline.compile_to("core", Source("example.l", text))
    infer_program(program)
    for w in pattern_warnings(program):
        print(w.render())


warnings_of("""data List<a> { Cons(a, List<a>); Nil }
def yes(b) = match (b) { true -> "yes"; false -> "no" }
def third = {
  Nil -> 0
  Cons(_, Nil) -> 1
  Cons(_, Cons(_, Nil)) -> 2
}
def sign(n) = match (n) { 0 -> "zero"; 1 -> "one"; 0 -> "again" }
""")

# %% [markdown]
# In `yes`, both patterns are variables: `false` can never match, since
# `true` has already taken every value — three warnings for one mistake,
# each true. `third` misses the lists of three or more, as worked out
# above. `sign` names 0 and 1, so 2 is the first Int it misses, and its
# second `0` comes too late. A `let true = …` or a function `{ true -> … }`
# of one parameter is not warned about: there a new name is what the
# programmer asked for, and the contract allows it; the warning is for a
# clause, which looks like a test.
#
# `tests/test_warnings.py` checks the algorithm against an independent
# oracle: for random clauses over a small data type, `data T { A; B(T,
# Int); C(T, T) }` in a pair with an Int, it enumerates every value up to
# a depth deeper than the patterns and matches them one by one; a clause
# is reachable exactly when some value matches it and no clause above, the
# clauses are exhaustive exactly when every value is matched, and every
# value the witness describes is matched by no clause. The golden files
# `tests/errors/warn_*.l` fix the messages, and a test checks that the
# corpus, the examples and the benchmarks warn only where they mean to.

# %% [markdown]
# ## Exercises
#
# 1. Generalise the variables bound by a tuple pattern in `let (a, b) =
#    (id, id)`, as OCaml does. What must `is_value` say about the pattern?
# 2. Replace levels by the textbook test "is this variable free in the
#    environment?" and run `bench/infer_speed.py`. How does the time grow?
# 3. An error's note points at where the expected type came from when that
#    is another expression. Make `x := e` point at the `var` that declared
#    `x`: what must the environment remember?
# 4. Allow `exception Box<a>(a)`, an exception with a type parameter, by
#    giving `Exn` a parameter. Write the program that then goes wrong, and
#    say why no choice of the parameter at the `try` can save it.
# 5. `raise` has the rule (Raise) instead of a type. Give it a type scheme,
#    as if it were a function, and check that inference then gives the
#    same types to the examples of the section on exceptions.
#
# <details><summary>Solutions</summary>
#
# 1. The core has no `let` with a pattern: `let (a, b) = (id, id); e`
#    becomes `match ((id, id)) { (a, b) -> e }`, a `match` of one clause,
#    so that is where the rule (Let) must be copied. When the match has one
#    clause and its scrutinee is a syntactic value, infer the scrutinee one
#    level deeper, check the pattern against its type *at that level* (so
#    that what the pattern fixes, a literal or a constructor, is fixed
#    before generalising), generalise the scrutinee's type, and bind each
#    variable of the pattern to its part of that type, marked generalised:
#
#    ```python
#    class TuplePatterns(Inference):
#        def match(self, scrutinee, clauses, env):
#            if len(clauses) != 1 or not is_value(scrutinee) or \
#                    getattr(scrutinee, "name", "").startswith("%"):
#                return super().match(scrutinee, clauses, env)
#            (pattern, body), = clauses
#            self.level += 1
#            t = self.infer(scrutinee, env)
#            bound = self.pattern(pattern, t, {}, ("the value matched", scrutinee.span, t))
#            self.level -= 1
#            self.settle_equalities()
#            self.generalize(t)
#            return self.infer(body, {**env, **{x: (u, True) for x, (u, _) in bound.items()}})
#    ```
#
#    `is_value` need say nothing about the pattern: the restriction is on
#    what is *computed*, and a pattern only takes apart a value already
#    made (OCaml generalises `let Some f = Some id` too, refutable as it
#    is). What matters is that the right-hand side is a value:
#    `(id, id)` is, a tuple of variables, and `a` and `b` both get
#    `∀a. a -> a`, so `(a(1), a(true), b("s"))` has type
#    `(Int, Bool, String)`; `(id(id), Nil)` is a call in a tuple, not a
#    value, and `a(1), a(true)` is a type error as before; and a
#    function's parameter `p` in `let (a, b) = p` is a variable, a value,
#    but its unknowns live at the level of the function, so the levels
#    generalise nothing of it. (The clauses of a function, a `match` on a
#    `%` parameter, are left to the old rule only to keep their error
#    notes.) The change is not finished at inference, though: chapter 5b
#    copies only `let`s, and on `let (a, b) = (id, id)` used at two types
#    its checker stops the compilation — "the variable a: Int -> Int where
#    Unit -> Unit is wanted" — so the pass must copy the generalised match
#    per instance too. `tests/test_types.py` runs this class on these
#    programs, and the pass's complaint.
# 2. The textbook generalises the unknowns of τ1 that are not free in Γ:
#    walk every type of the environment — the locals in scope and every
#    global but those being generalised — collect their unknowns, and
#    quantify the unknowns of τ1 outside that set. `FreeInEnvironment` in
#    `tests/test_types.py` does that (`let_bound` and `component` tell it
#    what Γ is), and gives the same schemes as the levels on every program
#    of the corpus and the same first error on every ill-typed one. But
#    every generalisation now walks all of Γ, and at the top level Γ holds
#    every definition already inferred: the k-th of n definitions walks k
#    types, n²/2 in all. Run `bench/infer_speed.py` with the class
#    swapped in, and beside it as it is (the timings are this machine's,
#    so they are not printed here): its column "ratio", the time for a
#    program over the time for one of half its size, stays near 2 with the
#    levels — linear — and climbs towards 4 with the walk — quadratic — and
#    its last line, the time per definition of the largest program over
#    the smallest's, grows with the size instead of staying within a small
#    factor of 1. The
#    test counts, rather than times, the types the walk visits: four times
#    as many for twice the definitions. The levels make the question
#    "free in Γ?" a comparison of two integers, paid for once at each
#    unification, which is why OCaml uses them.
# 3. The environment maps a name to (type, generalised?); it must also
#    remember, for a `var`, where the `var` gave it its type. The entry
#    can stay a pair for every other reader — a tuple subclass with one
#    more attribute — made by `LetVar` and read by `Assign`, which passes
#    it to `check` as the origin of the expected type:
#
#    ```python
#    class Declared(tuple):
#        origin = None
#
#    # in statement, case LetVar:
#        t = self.infer(value, env)
#        entry = Declared((t, False))
#        entry.origin = (f"the var {name}", value.span, t)
#        return self.infer(body, {**env, name: entry})
#    # case Assign: as before, with origin=getattr(env.get(target.name), "origin", None)
#    ```
#
#    A name shadowed by an inner `var` gets the inner entry, so the note
#    follows the scopes by itself. On `var n := 0; …; n := "three"` the
#    error is the same and gains the note `the var n has type Int`,
#    pointing at the `0` of `var n := 0`: the initial value, the code the
#    type came from, as the other notes point at the code they mean. The
#    test in `tests/test_types.py` checks the note's place, with a
#    shadowing `var n := "s"` in between.
# 4. With `Exn<a>`, `raise(Box(1))` raises an `Exn<Int>` and `try { … }
#    catch { Box(s) -> s + "!" }` — `+` on strings, in a language that has
#    it — catches an `Exn<String>`; but the block between them may be any
#    call, and the type of the exceptions a call may raise appears nowhere
#    in its type, so nothing relates the two `a`s. Whatever `a` the `try`
#    picks, a `raise` inside the block may have picked another; and a
#    handler left generic in `a` could use `s` at any type it likes. Making
#    the exceptions appear in the type (an effect system) is one way out;
#    OCaml and L instead forbid the
#    variable, so that every exception has one closed type and `Exn` needs
#    no parameter.
# 5. `raise : ∀a. Exn -> a`. Each use instantiates `a` afresh, which is what
#    the rule's fresh variable does: `raise(x)` is then the application of a
#    variable of that scheme to `x`, and `check` of the argument against
#    `Exn` is `application`'s check against the parameter type. The types
#    of `root`, `safe`, `fail` and `message` come out the same, and so does
#    the message of a wrong argument: `application` names the callee, "the
#    argument of raise", as the rule's case does (with no note, since
#    `raise` has no definition to point at).
#
# </details>
