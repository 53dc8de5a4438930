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
# # Chapter 3. From trees to A-normal form: C0 … C5
#
# Six small compilers, each a little better than the one before, lower a tiny
# expression language to *A-normal form*: a form in which every intermediate
# result has a name and the order of evaluation is written down. The last of
# them, C5, makes no useless copies of code, leaves in tail position what was
# in tail position (so that, once the language has calls, a tail call stays
# one), and is the plan of the conversion from L to CPS in chapter 7.

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** the idea of [chapter 1](01_addlang.ipynb), compiling with a
# continuation, and none of its code; the pictures use `lcompiler.drawing`
# from [appendix A](A_errors.ipynb), and one plot matplotlib.
#
# **Builds:** the module `lcompiler.anf`: the languages `S`, `A1` and `A2`,
# their evaluators, a scope checker, and the compilers `C0` … `C5`.
# [Chapter 7](07_cps_convert.ipynb) follows C5's plan.
#
# </div>
#
# The chapter re-tells, in Python, a gist by Milo Turner (iitalics on GitHub;
# one of the sources this book grew from, listed in the
# [bibliography](../bibliography.md#the-seeds)) that takes these six steps in
# OCaml. We keep its names — the
# languages `S`, `A1`, `A2`, the compilers `C0` to `C5`, the constructors
# `Let`, `If0`, `LetJoin`, `Join` — so the two can be read side by side, and we
# check that our compilers print, up to the numbering of fresh names, the six
# listings the gist prints. A-normal form was defined by Flanagan, Sabry,
# Duba and Felleisen in "The essence of compiling with continuations"
# (1993); Maurer, Downen, Ariola and Peyton Jones's "Compiling without
# continuations" (2017) adds join points to such a language, as A2 does
# here; both are in the [bibliography](../bibliography.md#papers-and-books).
#
# [Chapter 1](01_addlang.ipynb) compiled expressions with a continuation, but
# its language had no branches, so each continuation was used exactly once. Here the language has
# a conditional, `If0`, and the question this chapter answers is what to do
# with "the rest of the program" when two branches both need it.

# %%
#| default_exp anf

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.anf`:
#
# - The source language `S` and the two A-normal forms `A1` and `A2` (`A2`
#   adds join points, `LetJoin` and `Join`), each with an evaluator
#   (`evaluate_s`, `evaluate_a`) and a printer (`show`); `check_scopes`
#   verifies that every name of an A-normal term is bound before it is used,
#   once.
# - Six compilers `C0` … `C5` from `S`, each better than the one before;
#   every one of them keeps the value of every program whose `let`s bind
#   distinct names (`evaluate_s` of C0's, C1's and C2's output, whose
#   language is still `S`, and `evaluate_a` of C3's, C4's and C5's, is
#   `evaluate_s` of the input; where a program binds a name again, the
#   flattening that starts with C2 can let the inner binding capture a use
#   of the outer one, as C2's section shows), and from `C2` on its output
#   is in A-normal form.
# - `C5` uses each part of the program once in its output — the output's
#   size is linear in the input's — and leaves in *tail position* (where a
#   value becomes the program's result) whatever was there in the source:
#   it makes a join point only where two branches would otherwise both copy
#   the rest of the program.
#
# ## The languages
#
# The **source language S** is a tree of expressions:
#
# ```text
# s ::= x                    Var: a variable
#     | n                    Int: an integer
#     | s1 ⊕ s2              Bop: a binary operation
#     | let x = s1 in s2     Let
#     | if0 s1 then s2 else s3     If0: s2 if s1 is zero, else s3
# ```
#
# The gist leaves the operator `⊕` abstract. To run programs we must choose
# one, and we choose **subtraction**: it is not commutative, so a compiler that
# swapped the operands of a `Bop` would be caught by the tests, where `+` would
# hide the mistake.
#
# The **target language A1** is *A-normal form*. It splits the grammar in
# two: *expressions* are flat, their operands are names; *terms* say what
# happens in order.
#
# ```text
# e ::= Var x | Int n | Bop (x1, x2)       expressions: no nesting
# t ::= Return e                           the result of the whole term
#     | Let (x, e, t)                      compute e, call it x, go on with t
#     | If0 (x, t1, t2)                    branch on a name
# ```
#
# `Bop` and `If0` take *names*, never sub-expressions, so every intermediate
# result must be named by a `Let`; and a `Let` can only bind an expression,
# never a term, so `Let`s cannot nest on their right-hand side: a term is a
# straight line of `Let`s ending in a `Return` or an `If0`.
#
# **A2** adds *join points*, which we meet in C4:
#
# ```text
# t ::= …
#     | LetJoin (j, x, t_j, t)             j is the code t_j with parameter x; go on with t
#     | Join (j, e)                        jump to j with the value of e
# ```
#
# A join point is a local function that is only ever *jumped to*, from tail
# position, never called and returned from: in a compiler's back end it
# becomes a labelled block, and `Join` a jump with an argument.
#
# As in chapter 1, a class serves as a namespace, one small dataclass per
# constructor, so that `S.Let` and `A1.Let` can both exist. `A2` extends `A1`:
# every A1 term is an A2 term.

# %%
#| export
from dataclasses import dataclass, fields, is_dataclass


class S:
    """The source language: s ::= x | n | s ⊕ s | let x = s in s | if0 s then s else s."""

    @dataclass(slots=True)
    class Var:
        name: str

    @dataclass(slots=True)
    class Int:
        value: int

    @dataclass(slots=True)
    class Bop:
        left: object
        right: object

    @dataclass(slots=True)
    class Let:
        name: str
        bound: object
        body: object

    @dataclass(slots=True)
    class If0:
        test: object
        then: object
        orelse: object


# %% [markdown]
# Each constructor of `S` is a node of the source tree; the fields hold
# sub-trees, except the names (`str`) and the literal (`int`). The target
# language `A1` comes next: its expressions are flat, and the fields of
# `Bop` and `If0` are names, not sub-terms.

# %%
#| export
class A1:
    """A-normal form. Expressions e ::= Var x | Int n | Bop (x, x);
    terms t ::= Return e | Let (x, e, t) | If0 (x, t, t)."""

    @dataclass(slots=True)
    class Var:
        name: str

    @dataclass(slots=True)
    class Int:
        value: int

    @dataclass(slots=True)
    class Bop:
        left: str
        right: str

    @dataclass(slots=True)
    class Return:
        exp: object

    @dataclass(slots=True)
    class Let:
        name: str
        exp: object
        body: object

    @dataclass(slots=True)
    class If0:
        name: str
        then: object
        orelse: object


# %% [markdown]
# `A2` inherits `A1`'s constructors and adds the two of join points, so
# that `A2.Let` is `A1.Let` and every A1 term is an A2 term.

# %%
#| export
class A2(A1):
    """A1 with join points: t ::= … | LetJoin (j, x, t_j, t) | Join (j, e)."""

    @dataclass(slots=True)
    class LetJoin:
        join: str
        param: str
        join_body: object
        body: object

    @dataclass(slots=True)
    class Join:
        join: str
        exp: object


# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: terms that could change, and never do</p>
#
# The dataclasses are not frozen: freezing makes each construction slower
# (every field is then set through `object.__setattr__`), and one
# measurement below builds millions of terms. No code in
# this book changes a term after building it, and a change that altered a
# program's meaning would show in the tests, which check every compiler
# against the evaluators.
#
# </div>
#
# ### A printer
#
# The gist shows every result in OCaml's constructor syntax, and so do we:
# `Let ("x", Int 1, Return (Var "x"))`. A term that fits on a line is printed
# on one line. Otherwise its fields go on separate lines, indented — except the
# *body* of a binding (`Let`, `LetJoin`), which stays at the indentation of
# the binding, so that a chain of `Let`s reads top to bottom like a program.

# %%
#| export
_BODY_LAST = {"Let", "LetJoin"}     # constructors whose last field is the rest of the program


def _inline(node) -> str:
    if isinstance(node, str):
        return f'"{node}"'
    if isinstance(node, int):
        return str(node)
    name = type(node).__name__
    args = [_inline(getattr(node, f.name)) for f in fields(node)]
    if len(args) == 1:
        arg = getattr(node, fields(node)[0].name)
        return f"{name} ({args[0]})" if is_dataclass(arg) and fields(arg) else f"{name} {args[0]}"
    return f"{name} ({', '.join(args)})"


def show(node, width: int = 78, indent: int = 0, trailing: int = 0) -> str:
    """A term of S, A1 or A2 in the gist's constructor syntax, broken into lines to fit width.

    indent is the column the term starts at; trailing, how many characters
    (closing parentheses, a comma) will follow its last line."""
    flat = _inline(node)
    if indent + len(flat) + trailing <= width or not is_dataclass(node):
        return flat
    name = type(node).__name__
    values = [getattr(node, f.name) for f in fields(node)]
    if len(values) == 1:
        return f"{name} (" + show(values[0], width, indent + len(name) + 2, trailing + 1) + ")"
    pad = " " * (indent + 2)
    if name in _BODY_LAST:                  # Let (x, e, body), LetJoin (j, x, t_j, body)
        *init, last = values
        head = f"{name} (" + ", ".join(_inline(v) for v in init) + ","
        if len(head) + indent > width:      # names on the first line, terms below them
            head = f"{name} (" + ", ".join(_inline(v) for v in init if not is_dataclass(v)) + ","
            head += "".join(f"\n{pad}{show(v, width, indent + 2, 1)}," for v in init if is_dataclass(v))
        return f"{head}\n{' ' * indent}{show(last, width, indent, trailing + 1)})"
    *init, last = values
    parts = [show(v, width, indent + 2, 1) for v in init] + [show(last, width, indent + 2, trailing + 1)]
    return f"{name} (" + (",\n" + pad).join(parts) + ")"


# %% [markdown]
# ### The gist's two example programs
#
# The gist runs its compilers on two programs. The first has nested
# operations; the second has a conditional whose result feeds another
# conditional — the case that makes code duplication appear.

# %%
#| export
P1 = S.Let("x", S.Bop(S.Int(1), S.Bop(S.Int(2), S.Int(3))), S.Bop(S.Var("x"), S.Int(4)))
P2 = S.Let("x", S.If0(S.Int(0), S.Int(1), S.Int(2)),
           S.If0(S.Bop(S.Var("x"), S.Int(3)), S.Int(4), S.Int(5)))

# %%
print(show(P1))
print(show(P2))

# %% [markdown]
# ### What the programs mean
#
# Each language gets an evaluator. They define what "correct" means for every
# compiler in this chapter: the lowered program must evaluate to the same
# number as the source.
#
# `evaluate_s` is the obvious recursive definition. `evaluate_a` runs A1 and
# A2 terms with a loop instead of recursion, which is possible precisely
# because of A-normal form: after a `Let` the evaluator simply continues with
# the body, after an `If0` with one branch, and a `Join` goes to the join
# point's code with its parameter bound — a jump, not a call. A join point's
# code sees the variables that were in scope where it was defined
# (`LetJoin`), plus its parameter; the evaluator keeps, for each join point,
# that environment along with the code.

# %%
#| export
def evaluate_s(s, env: dict | None = None) -> int:
    """The value of a source program (⊕ is subtraction)."""
    env = env or {}
    match s:
        case S.Var(x):
            return env[x]
        case S.Int(n):
            return n
        case S.Bop(l, r):
            return evaluate_s(l, env) - evaluate_s(r, env)
        case S.Let(x, bound, body):
            return evaluate_s(body, {**env, x: evaluate_s(bound, env)})
        case S.If0(test, then, orelse):
            return evaluate_s(then if evaluate_s(test, env) == 0 else orelse, env)
    raise TypeError(f"not an S term: {s!r}")


def evaluate_exp(e, env: dict) -> int:
    match e:
        case A1.Var(x):
            return env[x]
        case A1.Int(n):
            return n
        case A1.Bop(x1, x2):
            return env[x1] - env[x2]
    raise TypeError(f"not an A expression: {e!r}")


def evaluate_a(t, env: dict | None = None) -> int:
    """The value of an A1 or A2 term."""
    env, joins = dict(env or {}), {}
    while True:
        match t:
            case A1.Return(e):
                return evaluate_exp(e, env)
            case A1.Let(x, e, body):
                env = {**env, x: evaluate_exp(e, env)}
                t = body
            case A1.If0(x, then, orelse):
                t = then if env[x] == 0 else orelse
            case A2.LetJoin(j, x, join_body, body):
                joins = {**joins, j: (x, join_body, env, joins)}
                t = body
            case A2.Join(j, e):
                x, join_body, join_env, join_joins = joins[j]
                env, joins = {**join_env, x: evaluate_exp(e, env)}, join_joins
                t = join_body
            case _:
                raise TypeError(f"not an A term: {t!r}")


# %%
evaluate_s(P1), evaluate_s(P2)

# %% [markdown]
# P1 is (1 − (2 − 3)) − 4 = −2. In P2, `x` is 1 (the test is 0), and
# 1 − 3 is not zero, so the result is 5.
#
# ### Sizes, and a scope checker
#
# Two more tools measure and check the compilers' output. `size` counts the
# constructors of a term, iteratively, visiting only the fields that hold
# sub-terms (C3's outputs get large: millions of constructors, below). `check_scopes`
# verifies what a good lowering promises: every variable and every join point
# is bound before it is used, is used only where it is in scope, a `Join`
# targets a join point (not a variable) and an expression names variables (not
# join points), and **every name is bound once** in the whole term — the
# property that lets later stages treat a name as a unique identity.

# %%
#| export
_SUBTERMS: dict[type, tuple[str, ...]] = {}


def _subterm_fields(cls: type) -> tuple[str, ...]:
    """The fields of a constructor that hold terms or expressions (not names or numbers)."""
    if cls not in _SUBTERMS:
        _SUBTERMS[cls] = tuple(f.name for f in fields(cls) if f.type not in (str, int))
    return _SUBTERMS[cls]


def size(node) -> int:
    """The number of constructors in a term of any of the three languages."""
    count, stack = 0, [node]
    while stack:
        n = stack.pop()
        count += 1
        stack.extend(getattr(n, f) for f in _subterm_fields(type(n)))
    return count


# %% [markdown]
# `size` visits only the fields that hold sub-terms; a table per class,
# built on first use, says which those are. The checker comes next.

# %%
#| export
class ScopeError(Exception):
    """A lowered term that uses a name out of scope, or binds one twice."""


def check_scopes(t, variables=frozenset()) -> None:
    """Raise ScopeError unless every name in the A2 term is bound once and used in scope."""
    bound = set(variables)
    stack = [(t, frozenset(variables), frozenset())]

    def bind(name):
        if name in bound:
            raise ScopeError(f"{name} is bound twice")
        bound.add(name)

    def use(e, vs):
        names = {A1.Var: lambda: [e.name], A1.Int: lambda: [],
                 A1.Bop: lambda: [e.left, e.right]}[type(e)]()
        for x in names:
            if x not in vs:
                raise ScopeError(f"variable {x} used out of scope")

    while stack:
        t, vs, js = stack.pop()
        match t:
            case A1.Return(e):
                use(e, vs)
            case A1.Let(x, e, body):
                use(e, vs)
                bind(x)
                stack.append((body, vs | {x}, js))
            case A1.If0(x, then, orelse):
                use(A1.Var(x), vs)
                stack += [(orelse, vs, js), (then, vs, js)]
            case A2.LetJoin(j, x, join_body, body):
                bind(j)
                bind(x)
                stack += [(body, vs, js | {j}), (join_body, vs | {x}, js)]
            case A2.Join(j, e):
                if j not in js:
                    raise ScopeError(f"join point {j} used out of scope")
                use(e, vs)
            case _:
                raise TypeError(f"not an A term: {t!r}")


# %% [markdown]
# ## C0: a template that changes nothing
#
# All six compilers have the same shape, which is the point of the gist: a
# recursive `lower` that visits the source tree and calls one *helper* per
# constructor, `var`, `int`, `bop`, `let_` and `if0`, on the results of
# lowering the sub-trees. Each step changes only the helpers (and what a
# "lowered term" is, and, from C2 on, how a compilation starts); the
# recursion itself never changes. C0's helpers rebuild the same tree, so C0
# is the identity.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: OCaml modules as Python classes</p>
#
# The gist writes each compiler as an OCaml module that includes the one
# before and overrides some helpers. Ours are classes, for the same reuse: the
# helpers are methods, each compiler a subclass that overrides what changes, a
# compilation an instance. The instance holds the counter for fresh names, so
# numbering restarts at `%1` for every program, where the gist's counter is
# global and never restarts; a program's output then depends on nothing but
# the program, which the tests need.
#
# </div>

# %%
#| export
class Compiler:
    """The shape shared by C0 … C5: a helper per constructor, and lower."""

    def __init__(self, right_to_left: bool = False):
        self.counter = 0
        self.right_to_left = right_to_left

    def fresh(self) -> str:
        self.counter += 1
        return f"%{self.counter}"

    @classmethod
    def lower(cls, s, right_to_left: bool = False):
        """Lower a whole source program, with fresh names numbered from %1."""
        return cls(right_to_left).start(s)

    def start(self, s):
        return self.lower_(s)

    def lower_(self, s):
        match s:
            case S.Var(x):
                return self.var(x)
            case S.Int(i):
                return self.int(i)
            case S.Bop(s1, s2):
                return self.bop(*self.lower_all(s1, s2))
            case S.Let(x, s1, s2):
                return self.let_(x, *self.lower_all(s1, s2))
            case S.If0(s1, s2, s3):
                return self.if0(*self.lower_all(s1, s2, s3))
        raise TypeError(f"not an S term: {s!r}")

    def lower_all(self, *subterms) -> list:
        """Lower the sub-terms left to right, as Python evaluates arguments,
        or right to left, as OCaml's compilers do (see C1)."""
        if self.right_to_left:
            return [self.lower_(s) for s in reversed(subterms)][::-1]
        return [self.lower_(s) for s in subterms]


# %% [markdown]
# `lower_` is the gist's recursive `lower`, the one recursive function here;
# the class method `lower` makes a compilation, with its own counter, and
# starts it on a whole program (`start`, which C2 and later compilers
# change). `lower_all` lowers the sub-terms of a node in one of two orders,
# which matters for the names (below). C0's helpers rebuild the tree they
# are given:

# %%
#| export
class C0(Compiler):
    """The identity: each helper rebuilds its constructor."""

    def var(self, x):
        return S.Var(x)

    def int(self, i):
        return S.Int(i)

    def bop(self, t1, t2):
        return S.Bop(t1, t2)

    def let_(self, x, t1, t2):
        return S.Let(x, t1, t2)

    def if0(self, t1, t2, t3):
        return S.If0(t1, t2, t3)


# %%
C0.lower(P1) == P1, C0.lower(P2) == P2

# %% [markdown]
# ## C1: name every intermediate result
#
# The first real step: a `Bop` or an `If0` must not have a compound operand,
# so give each operand a fresh name with a `Let`. C1 changes only the two
# helpers whose operands must become names:
#
# - `bop(t1, t2)` becomes `let %a = t1 in let %b = t2 in %a ⊕ %b`;
# - `if0(t1, t2, t3)` becomes `let %a = t1 in if0 %a then t2 else t3`.

# %%
#| export
class C1(C0):
    """Naive let-insertion: operands get names, the result is still an S term."""

    def bop(self, t1, t2):
        x1, x2 = self.fresh(), self.fresh()
        return S.Let(x1, t1, S.Let(x2, t2, S.Bop(S.Var(x1), S.Var(x2))))

    def if0(self, t1, t2, t3):
        x1 = self.fresh()
        return S.Let(x1, t1, S.If0(S.Var(x1), t2, t3))


# %%
print(show(C1.lower(P1)))

# %% [markdown]
# Every operand of `⊕` is now a variable, but the `Let`s have landed at all
# levels: the right-hand side of `let x = …` is itself a `Let`, and inside
# it the right-hand side of `let %4 = …` is another. That is not a straight
# line of instructions.
# (Even a variable is copied into a fresh one, `let %5 = x`: C1 names
# everything, whether it needs a name or not.)
#
# ### Why our numbers differ from the gist's
#
# The gist prints the same term with other numbers: its first fresh `Let`,
# the one that names the operand `1`, binds `%5` where ours binds `%3`.
# Nothing is wrong. A helper asks for its fresh names when it runs, which is
# after `lower` has lowered its operands, so the names go to the operations in
# the order their operands are finished. In `bop (lower s1) (lower s2)`,
# OCaml's compilers evaluate the *arguments of a function call from right
# to left* (the language leaves the order unspecified), so the gist lowers
# `s2` before `s1`: the body `x ⊕ 4` of the `let` is finished
# first and gets `%1` and `%2`, then the inner `2 ⊕ 3` gets `%3` and `%4`, and
# the outer `1 ⊕ (…)` `%5` and `%6`. Python evaluates arguments left to right:
# the inner `2 ⊕ 3` is finished first (`%1`, `%2`), then the outer operation
# (`%3`, `%4`), then the body (`%5`, `%6`). The terms are the same up to a
# consistent renaming of the `%n` names, and `lower_all` can follow OCaml's
# order instead, which reproduces the gist's numbers exactly:

# %%
print(show(C1.lower(P1, right_to_left=True)))

# %% [markdown]
# To compare our output with the gist's listings whatever the numbering,
# `same_up_to_renaming` checks that two terms have the same shape and that
# their `%n` names correspond one to one (the names from the source, like `x`,
# must be equal). The gist's six listings are transcribed below as terms, and
# the tests compare each compiler with them in both evaluation orders.

# %%
#| export
def same_up_to_renaming(a, b) -> bool:
    """Equal terms, up to a one-to-one renaming of the fresh names %n."""
    forward, backward = {}, {}
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, str) and isinstance(y, str):
            if x.startswith("%") and y.startswith("%"):
                if forward.setdefault(x, y) != y or backward.setdefault(y, x) != x:
                    return False
            elif x != y:
                return False
        elif is_dataclass(x) and type(x) is type(y):
            stack += [(getattr(x, f.name), getattr(y, f.name)) for f in fields(x)]
        elif x != y or type(x) is not type(y):
            return False
    return True


# %% [markdown]
# The gist's listings, as terms with the gist's own numbers (C1, C2 and C3 on
# P1; C3, C4 and C5 on P2):

# %%
#| export
def _lets(bindings, last, let):
    """Nest (name, bound) pairs in Lets around the last term."""
    for x, bound in reversed(bindings):
        last = let(x, bound, last)
    return last


def _gist_listings() -> dict:
    V, I, B = S.Var, S.Int, lambda a, b: S.Bop(S.Var(a), S.Var(b))
    AV, AI, AB, Ret, If0, Join = A1.Var, A1.Int, A1.Bop, A1.Return, A1.If0, A2.Join
    p2_rest = lambda: _lets([("%1", AV("x")), ("%2", AI(3)), ("%3", AB("%1", "%2"))],
                            If0("%3", Ret(AI(4)), Ret(AI(5))), A1.Let)
    first_if0 = A1.Let("%4", AI(0), If0("%4", Join("%5", AI(1)), Join("%5", AI(2))))
    return {
        ("C1", "P1"): S.Let("x", S.Let("%5", I(1), S.Let("%6", S.Let("%3", I(2), S.Let("%4", I(3), B("%3", "%4"))),
                                                      B("%5", "%6"))),
                            S.Let("%1", V("x"), S.Let("%2", I(4), B("%1", "%2")))),
        ("C2", "P1"): _lets([("%5", I(1)), ("%3", I(2)), ("%4", I(3)), ("%6", B("%3", "%4")),
                             ("x", B("%5", "%6")), ("%1", V("x")), ("%2", I(4))], B("%1", "%2"), S.Let),
        ("C3", "P1"): _lets([("%5", AI(1)), ("%3", AI(2)), ("%4", AI(3)), ("%6", AB("%3", "%4")),
                             ("x", AB("%5", "%6")), ("%1", AV("x")), ("%2", AI(4))], Ret(AB("%1", "%2")), A1.Let),
        ("C3", "P2"): A1.Let("%4", AI(0), If0("%4", A1.Let("x", AI(1), p2_rest()), A1.Let("x", AI(2), p2_rest()))),
        ("C4", "P2"): A2.LetJoin("%5", "%6",
                                 A1.Let("x", AV("%6"), A2.LetJoin(
                                     "%7", "%8", Ret(AV("%8")),
                                     _lets([("%1", AV("x")), ("%2", AI(3)), ("%3", AB("%1", "%2"))],
                                           If0("%3", Join("%7", AI(4)), Join("%7", AI(5))), A1.Let))),
                                 first_if0),
        ("C5", "P2"): A2.LetJoin("%5", "%6", A1.Let("x", AV("%6"), p2_rest()), first_if0),
    }


GIST_LISTINGS = _gist_listings()

# %%
same_up_to_renaming(C1.lower(P1), GIST_LISTINGS["C1", "P1"]), C1.lower(P1, right_to_left=True) == GIST_LISTINGS["C1", "P1"]

# %% [markdown]
# ## C2: the continuation trick flattens the lets
#
# The nested `Let`s of C1 come from building each operand's code *inside* the
# `Let` that names it. The fix is the idea of chapter 1: instead of returning a
# term, a lowered sub-tree takes a continuation `k` — "what to build around my
# value" — and calls it with a small expression, after wrapping the result in
# whatever `Let`s it needs. The lowered type changes from `S.t` to
# `(S.t → S.t) → S.t`, and the helpers become:
#
# - `var` and `int` give their expression to `k` directly;
# - `bop(t1, t2)` builds `k(%a ⊕ %b)` — the rest of the program, using the
#   result — then asks `t2` to put its value in `%b` *around that*, then asks
#   `t1` to put its value in `%a` around *that*. The `Let`s come out in order,
#   each on the body of the previous one;
# - `let_ x t1 t2` asks `t1` for its value and binds it to `x` around `t2`
#   lowered with the same `k`;
# - `if0` names its test the same way and lowers both branches with `k`.
#
# The whole program is started with the identity continuation.

# %%
#| export
class C2(Compiler):
    """Lowered terms take a continuation: (S.t -> S.t) -> S.t. Lets come out flat."""

    def start(self, s):
        return self.lower_(s)(lambda e: e)

    def var(self, x):
        return lambda k: k(S.Var(x))

    def int(self, i):
        return lambda k: k(S.Int(i))

    def bop(self, t1, t2):
        x1, x2 = self.fresh(), self.fresh()

        def lowered(k):
            rest = k(S.Bop(S.Var(x1), S.Var(x2)))
            with_x2 = t2(lambda e2: S.Let(x2, e2, rest))
            return t1(lambda e1: S.Let(x1, e1, with_x2))
        return lowered

    def let_(self, x, t1, t2):
        return lambda k: t1(lambda e1: S.Let(x, e1, t2(k)))

    def if0(self, t1, t2, t3):
        x1 = self.fresh()

        def lowered(k):
            branch = S.If0(S.Var(x1), t2(k), t3(k))
            return t1(lambda e1: S.Let(x1, e1, branch))
        return lowered


# %%
print(show(C2.lower(P1)))

# %% [markdown]
# A straight line of `Let`s, with the same names as C1 (the fresh names are
# still chosen when `lower` visits the tree, in the same order). It is the
# gist's listing up to renaming:

# %%
same_up_to_renaming(C2.lower(P1), GIST_LISTINGS["C2", "P1"]), C2.lower(P1, right_to_left=True) == GIST_LISTINGS["C2", "P1"]

# %% [markdown]
# One detail of `bop`: the rest of the program, `k(…)`, is built *first*, and
# the `Let`s are wrapped around it from the inside out. That is the way to
# build a linked list from its end. The `Let`s therefore come out in the
# order the program runs — the left operand first (`%3` is `1`), then the
# right operand, whose own operands `%1` and `%2` come before the `%4` they
# make — while the numbers were handed out earlier, in the order `lower`
# finished the operations: the inner `2 ⊕ 3` first. That is why `%3` is bound
# before `%1`.
#
# ### Flattening moves scopes
#
# The straight line has a price that the gist does not mention. In
# `let z = (let y = 2 in y) in z ⊕ y`, the inner `let y` covers only its own
# body, `y`; in C2's flat output it covers everything after it, `z ⊕ y`
# included. When the program has bound `y` before, the `y` of `z ⊕ y` then
# reads the wrong one:

# %%
rebinds = S.Let("y", S.Int(1),
                S.Let("z", S.Let("y", S.Int(2), S.Var("y")), S.Bop(S.Var("z"), S.Var("y"))))
print(show(rebinds))
print(show(C2.lower(rebinds)))
print("value of the source:", evaluate_s(rebinds), "| of C1's output:", evaluate_s(C1.lower(rebinds)),
      "| of C2's output:", evaluate_s(C2.lower(rebinds)))

# %% [markdown]
# C1 is right here, because its nested `Let`s keep the scopes of the
# source. C2 flattens, and is wrong; every compiler after it flattens too,
# and is wrong on this program as well (C5's section shows it). The cure is
# not in the lowering but before it: give every binding a name of its own.
# A renaming pass can do that, or, as [chapter 7](07_cps_convert.ipynb)'s
# conversion does, an environment that maps each source name to a fresh
# variable, so that the two `y`s become two variables. This chapter's
# compilers assume that the source's `let`s bind distinct names, and its
# tests generate only such programs.
#
# ## C3: a type that makes flatness a promise
#
# C2's output is flat, but its type, `S`, does not say so: nothing stops a
# helper from building a nested `Let`. C3 is C2 with A1 as its target, where
# `Bop` and `If0` take names and a `Let` binds only an expression; a mistake
# that nests would not even type-check in OCaml. (In Python the dataclasses
# do not enforce their field types, but `check_scopes` and the evaluator
# raise an exception on a term that nests.) The program now ends with
# `Return`, the initial continuation.

# %%
#| export
class C3(Compiler):
    """C2 with A-normal form as its target type: (A1.exp -> A1.t) -> A1.t."""

    def start(self, s):
        return self.lower_(s)(A1.Return)

    def var(self, x):
        return lambda k: k(A1.Var(x))

    def int(self, i):
        return lambda k: k(A1.Int(i))

    def bop(self, t1, t2):
        x1, x2 = self.fresh(), self.fresh()

        def lowered(k):
            rest = k(A1.Bop(x1, x2))
            with_x2 = t2(lambda e2: A1.Let(x2, e2, rest))
            return t1(lambda e1: A1.Let(x1, e1, with_x2))
        return lowered

    def let_(self, x, t1, t2):
        return lambda k: t1(lambda e1: A1.Let(x, e1, t2(k)))

    def if0(self, t1, t2, t3):
        x1 = self.fresh()

        def lowered(k):
            branch = A1.If0(x1, t2(k), t3(k))
            return t1(lambda e1: A1.Let(x1, e1, branch))
        return lowered


# %%
print(show(C3.lower(P1)))
same_up_to_renaming(C3.lower(P1), GIST_LISTINGS["C3", "P1"])

# %% [markdown]
# ### The duplication problem
#
# Now P2, whose `let x = if0 … in …` puts a conditional where a value is
# expected:

# %%
print(show(C3.lower(P2)))
same_up_to_renaming(C3.lower(P2), GIST_LISTINGS["C3", "P2"])

# %% [markdown]
# The whole rest of the program — `let %2 = x … if0 %4 …` — appears twice,
# once in each branch of the first `If0`. The reason is in `if0`: it calls the
# continuation `k` once per branch, `t2(k)` and `t3(k)`, and each call builds
# the rest of the program anew. Two things go wrong. The code is copied:
# after a chain of n such conditionals, what follows the last one is built
# 2ⁿ times (we measure it below).
# And the copies bind the same names (`x`, `%2`, `%3` and `%4` twice each), so
# a name no longer identifies one place in the program.
#
# The flaw came with the continuation. (The gist says that it was already
# in C1, unnoticed; it was not.) C1 calls no continuation: it lowers
# every sub-tree once and only nests the `Let`s, so its output for P2 holds
# each part of P2 once. C2, the first compiler to pass the rest of the
# program down as a continuation, is the first to copy it. Their sizes on
# P2, beside the source's. (C2 and C3 build the same shape; C2's `Bop` and
# `If0` hold their operands in `Var` nodes, where C3's hold bare names, and
# C3 ends each path with a `Return` node that C2 does not have: hence the
# difference between the two.)

# %%
for name, compiler in (("P2", C0), ("C1", C1), ("C2", C2), ("C3", C3)):
    print(f"{name}: {size(compiler.lower(P2)):>2} constructors")

# %% [markdown]
# ## C4: a join point for every If0
#
# The usual cure, in compilers as in this gist: put the rest of the program
# in one place, give it a name, and make both branches *jump* there with
# their value.
# That named place is a **join point** (a basic block with a parameter, in the
# vocabulary of [chapter 10](10_llvm.ipynb)). C4 targets A2 and changes only `if0`: it builds
# the rest of the program once, `k(Var x0)`, with a fresh parameter `x0`
# standing for the value of the conditional; binds it as join point `j` with
# `LetJoin`; and lowers both branches with the continuation "jump to `j`".

# %%
#| export
class C4(C3):
    """Join points: if0 never duplicates its continuation. Targets A2."""

    def if0(self, t1, t2, t3):
        x1 = self.fresh()

        def lowered(k0):
            j, x0 = self.fresh(), self.fresh()
            rest = k0(A1.Var(x0))
            k = lambda e: A2.Join(j, e)
            branch = A1.If0(x1, t2(k), t3(k))
            with_test = t1(lambda e1: A1.Let(x1, e1, branch))
            return A2.LetJoin(j, x0, rest, with_test)
        return lowered


# %%
print(show(C4.lower(P2)))
same_up_to_renaming(C4.lower(P2), GIST_LISTINGS["C4", "P2"]), C4.lower(P2, right_to_left=True) == GIST_LISTINGS["C4", "P2"]

# %% [markdown]
# No more copies: the join point `%5` holds the rest of the program after the
# first conditional, and both branches `Join` it. Every name is bound once:

# %%
check_scopes(C4.lower(P2))
evaluate_a(C4.lower(P2)), evaluate_s(P2)

# %% [markdown]
# ### … and the tail positions it loses
#
# But look at the second conditional, the last thing the program does. Its
# branches used to be `Return (Int 4)` and `Return (Int 5)`: the program's
# result, in *tail position*. C4 made them `Join ("%7", Int 4)`, jumps to a
# join point `%7` whose only job is `Return (Var "%8")`. C4 creates a join
# point for *every* `If0`, even when the continuation is just "return", which
# costs nothing to copy. In this little language that is an extra jump; in a
# language with functions it is worse: a call in a branch that returns its
# result is a *tail call* (the caller's frame can be reused), and the same call
# followed by a jump to a join point is not. A loop written as tail recursion
# would then grow the stack. L promises proper tail calls, so this matters.
#
# ## C5: continuations you can look at
#
# C4 cannot tell a cheap continuation from an expensive one because a
# continuation is a Python function, and a function can only be called, not
# inspected. C5 *defunctionalises* the continuations (Reynolds's word, from
# "Definitional interpreters for higher-order programming languages", 1972,
# in the bibliography): it lists every kind of
# continuation the compiler ever creates, and makes each a data constructor
# that can be inspected, with one function, `apply` (the gist's `$`), to use
# it. There are only three:
#
# | constructor | stands for the function | copyable? |
# |---|---|---|
# | `Cont.Return()` | `e ↦ Return e` | yes: one small node |
# | `Cont.Join(j)` | `e ↦ Join (j, e)` | yes: one small node |
# | `Cont.Let(x, t)` | `e ↦ Let (x, e, t)` — with the rest of the program `t` inside | **no** |
#
# Now `if0` can decide: if `k` is copyable, lower both branches with `k`
# itself, exactly as C3 did; only a `Let` continuation, which carries a whole
# term, is bound once to a join point.

# %%
#| export
class Cont:
    """C5's defunctionalised continuations."""

    @dataclass(slots=True)
    class Return:
        pass

    @dataclass(slots=True)
    class Join:
        join: str

    @dataclass(slots=True)
    class Let:
        name: str
        body: object


def apply(k, e):
    """Use a continuation: the gist's k $ e."""
    match k:
        case Cont.Return():
            return A1.Return(e)
        case Cont.Join(j):
            return A2.Join(j, e)
        case Cont.Let(x, t):
            return A1.Let(x, e, t)
    raise TypeError(f"not a continuation: {k!r}")


def is_copyable(k) -> bool:
    """May k be used in two places without copying a term?"""
    return not isinstance(k, Cont.Let)


# %% [markdown]
# `is_copyable` is the question C4 could not ask. C5 asks it in `if0`, and
# otherwise builds the same terms as C3, with `Cont.Let` values where C3
# built lambdas:

# %%
#| export
class C5(Compiler):
    """Defunctionalised continuations: a join point only where one is needed."""

    def start(self, s):
        return self.lower_(s)(Cont.Return())

    def var(self, x):
        return lambda k: apply(k, A1.Var(x))

    def int(self, i):
        return lambda k: apply(k, A1.Int(i))

    def bop(self, t1, t2):
        x1, x2 = self.fresh(), self.fresh()

        def lowered(k):
            rest = apply(k, A1.Bop(x1, x2))
            with_x2 = t2(Cont.Let(x2, rest))
            return t1(Cont.Let(x1, with_x2))
        return lowered

    def let_(self, x, t1, t2):
        return lambda k: t1(Cont.Let(x, t2(k)))

    def if0(self, t1, t2, t3):
        x1 = self.fresh()

        def lowered(k):
            if is_copyable(k):
                branch = A1.If0(x1, t2(k), t3(k))
                return t1(Cont.Let(x1, branch))
            j, x0 = self.fresh(), self.fresh()
            rest = apply(k, A1.Var(x0))
            branch = A1.If0(x1, t2(Cont.Join(j)), t3(Cont.Join(j)))
            with_test = t1(Cont.Let(x1, branch))
            return A2.LetJoin(j, x0, rest, with_test)
        return lowered


# %%
print(show(C5.lower(P2)))
(same_up_to_renaming(C5.lower(P2), GIST_LISTINGS["C5", "P2"]),
 C5.lower(P2, right_to_left=True) == GIST_LISTINGS["C5", "P2"])

# %% [markdown]
# The first conditional still gets its join point `%5` — its continuation is
# `let x = [·] in …`, the whole rest of the program. The second conditional's
# continuation is `Return`, so its branches are `Return (Int 4)` and
# `Return (Int 5)` again: in tail position, with no join point. And nothing is
# copied: every name is bound once, and C5's output is the smallest of the
# three.

# %%
check_scopes(C5.lower(P2))
print("value:", evaluate_a(C5.lower(P2)), "| size on P2:",
      ", ".join(f"{c.__name__} {size(c.lower(P2))}" for c in (C3, C4, C5)))

# %% [markdown]
# C5 still flattens as C2 did, so it still needs a source whose `let`s bind
# distinct names. On the program of C2's section, which binds `y` twice,
# C3, C4 and C5 go wrong as C2 did, and `check_scopes` says why:

# %%
print("value of the source:", evaluate_s(rebinds), "| of C3's, C4's and C5's outputs:",
      *(evaluate_a(c.lower(rebinds)) for c in (C3, C4, C5)))
try:
    check_scopes(C5.lower(rebinds))
except ScopeError as error:
    print("check_scopes:", error)

# %% [markdown]
# ### C3 and C5, drawn
#
# The two outputs for P2 as trees make the difference visible. `term_tree`
# draws a term of A1 or A2 with one box per constructor of a term — `Let`,
# `If0`, `Return`, `LetJoin`, `Join` — and writes the expressions inside
# the boxes: a `Let` has its body below it, an `If0` its
# two branches, a `LetJoin` the join point's code and then its body. A box
# that occurs twice in the same tree — the same sub-term, built twice — is
# red; a join point is yellow, a jump green, with a dashed arrow to the join
# point it jumps to.

# %%
from collections import Counter

from lcompiler.drawing import Box, Picture


def exp_label(e) -> str:
    match e:
        case A1.Var(x):
            return x
        case A1.Int(n):
            return str(n)
        case A1.Bop(x1, x2):
            return f"{x1} ⊕ {x2}"
    raise TypeError(f"not an A expression: {e!r}")


def term_tree(t, copies: Counter, arrows: list, edge: str = "") -> Box:
    """The term as boxes; copies counts each sub-term's text; arrows receives (jump, join point)."""
    style = "red" if copies[_inline(t)] > 1 else "plain"
    match t:
        case A1.Return(e):
            return Box(f"return {exp_label(e)}", [], style, edge)
        case A1.Let(x, e, body):
            return Box(f"let {x} = {exp_label(e)}", [term_tree(body, copies, arrows)], style, edge)
        case A1.If0(x, then, orelse):
            branches = [term_tree(then, copies, arrows, "= 0"), term_tree(orelse, copies, arrows, "≠ 0")]
            return Box(f"if0 {x}", branches, style, edge)
        case A2.LetJoin(j, x, join_body, body):
            parts = [term_tree(join_body, copies, arrows, "code"), term_tree(body, copies, arrows, "body")]
            return Box(f"join point {j}({x})", parts, "yellow", edge, name=j)
        case A2.Join(j, e):
            name = f"jump {len(arrows)}"
            arrows.append((name, j))
            return Box(f"jump {j}({exp_label(e)})", [], "green", edge, name=name)
    raise TypeError(f"not an A term: {t!r}")


def subterms(t) -> list:
    """Every term inside t (expressions excluded), t first."""
    terms, stack = [], [t]
    while stack:
        n = stack.pop()
        terms.append(n)
        stack += [v for v in (getattr(n, f.name) for f in fields(n)) if is_dataclass(v) and not
                  isinstance(v, (A1.Var, A1.Int, A1.Bop))]
    return terms


def count_boxes(box: Box) -> tuple[int, int]:
    """(boxes, red boxes) in a tree."""
    below = [count_boxes(c) for c in box.children]
    return 1 + sum(b for b, _ in below), (box.style == "red") + sum(r for _, r in below)

# %%
panels, words, arrows = [], [], []
for name, compiler, caption in (("C3", C3, "C3: the rest of the program, copied"),
                                ("C5", C5, "C5: one join point, two jumps")):
    term = compiler.lower(P2)
    tree = term_tree(term, Counter(_inline(t) for t in subterms(term)), arrows)
    boxes, red = count_boxes(tree)
    panels.append((caption, [tree]))
    words.append(f"{name}'s output for P2 as a tree of {boxes} boxes, {red} of them red copies")
Picture(panels, arrows=arrows,
        alt="Two trees side by side. " + "; ".join(words)
            + f"; in C5's, {len(arrows)} dashed arrows go from the jumps to the join point.")

# %% [markdown]
# On the left, everything below the two `let x` boxes is there twice: the
# red chain `let %2 = x`, `let %3 = 3`, `let %4 = %2 ⊕ %3`, `if0 %4` with its
# two returns. On the right, that chain exists once, as the code of the join
# point `%5`, and the two branches of the first `if0` are jumps to it; the
# second `if0` still ends in two `return`s.
#
# Two things to notice in C5's code (they are in the gist's C5 too). `bop`
# and `let_` now build `Cont.Let` values where C3 built lambdas: the same
# continuations, but inspectable. And when `k` is copyable, handing it to
# both branches is safe because applying `Cont.Return` or `Cont.Join` makes
# one node; the *rest of the program* is never rebuilt, so no name is bound
# twice.
#
# ### Join points in a flow graph
#
# A back end sees the same terms as a *flow graph*: straight runs of `let`s
# are basic blocks, an `If0` ends its block with two edges, one per branch,
# and a join point is a block that the jumps reach — the place where two
# paths of control meet again, hence its name. `block` cuts a term into
# such blocks and draws them: a join point (yellow) below the first jump
# (green) that reaches it, a dashed arrow from every other jump to it. Here
# are C4 and C5 on P2:

# %%
def block(t, head: str, joins: dict, arrows: list, edge: str = "", style: str = "plain", name=None) -> Box:
    """The basic block that starts with t, and the blocks it leads to. A join point's block
    (in joins until placed) goes below the first jump to it; later jumps get an arrow."""
    lines = []

    def label(last: str) -> str:
        return (f"{head} " if head else "") + "; ".join(lines + [last])

    while True:
        match t:
            case A1.Let(x, e, body):
                lines.append(f"let {x} = {exp_label(e)}")
                t = body
            case A2.LetJoin(j, x, join_body, body):
                joins[j] = block(join_body, f"{j}({x}):", joins, arrows, "", "yellow", j)
                t = body
            case A1.Return(e):
                return Box(label(f"return {exp_label(e)}"), [], style, edge, name)
            case A2.Join(j, e):
                jump = Box(label(f"jump {j}({exp_label(e)})"), [], "green", edge)
                jump.name = f"jump {id(jump)}"
                if j in joins:
                    jump.children.append(joins.pop(j))
                else:
                    arrows.append((jump.name, j))
                return jump
            case A1.If0(x, then, orelse):
                branches = [block(then, "", joins, arrows, "= 0"), block(orelse, "", joins, arrows, "≠ 0")]
                return Box(label(f"if0 {x}"), branches, style, edge, name)
            case _:
                raise TypeError(f"not an A term: {t!r}")


def labels(box: Box) -> list[str]:
    return [box.label] + [label for child in box.children for label in labels(child)]


def boxes_in(box: Box, style: str | None = None) -> int:
    """The boxes of a tree, or those of one style."""
    return (style in (None, box.style)) + sum(boxes_in(c, style) for c in box.children)


# %%
for name, compiler in (("C4", C4), ("C5", C5)):
    arrows = []
    entry = block(compiler.lower(P2), "entry:", {}, arrows)
    joins = boxes_in(entry, "yellow")
    caption = f"{name} on P2: {boxes_in(entry)} blocks, " + ("one join point" if joins == 1 else f"{joins} join points")
    display(Picture([(caption, [entry])], arrows=arrows,
                    alt=f"The flow graph of {caption}. Its blocks, from the top: " + " | ".join(labels(entry))
                        + ". A join point is drawn below the first jump to it; "
                        + ("the other jump is a dashed arrow" if len(arrows) == 1 else
                           f"the other {len(arrows)} jumps are dashed arrows") + " to its join point."))

# %% [markdown]
# In C4's graph both conditionals end in jumps: the first to `%5`, which holds
# the rest of the program, the second to `%7`, a block that does nothing but
# return its parameter. In C5's the second conditional's branches are blocks
# that return at once; the one join point left is the one that saves a copy.
#
# ## Measuring the duplication
#
# To see the difference grow, take a chain of n conditionals, each testing
# the result of the previous one:
#
# ```text
# let x1 = if0 0 then 1 else 2 in
# let x2 = if0 x1 then 1 else 2 in
# …
# let xn = if0 x(n-1) then 1 else 2 in
# xn
# ```
#
# and count the constructors in each compiler's output, for n = 1 … 20.

# %%
#| export
def if0_chain(n: int):
    """let x1 = if0 0 then 1 else 2 in … let xn = if0 x(n-1) then 1 else 2 in xn"""
    body = S.Var(f"x{n}")
    for i in range(n, 0, -1):
        test = S.Int(0) if i == 1 else S.Var(f"x{i - 1}")
        body = S.Let(f"x{i}", S.If0(test, S.Int(1), S.Int(2)), body)
    return body


# %%
print(show(C5.lower(if0_chain(2))))

# %% [markdown]
# For n = 20, C3's output has over nine million constructors (the table
# below prints the count). Building it is the slowest step of this notebook,
# and by far the largest thing it makes;
# Python's cyclic garbage collector is paused meanwhile, as it would otherwise
# walk those millions of objects over and over while they are built (none of
# them forms a cycle, so nothing is lost).

# %%
import gc

chain_sizes = {"source": [], "C3": [], "C4": [], "C5": []}
gc.disable()
try:
    for n in range(1, 21):
        s = if0_chain(n)
        chain_sizes["source"].append(size(s))
        for name, compiler in (("C3", C3), ("C4", C4), ("C5", C5)):
            chain_sizes[name].append(size(compiler.lower(s)))
finally:
    gc.enable()
print(f"{'n':>3} {'source':>7} {'C3':>10} {'C4':>6} {'C5':>6}")
for n in (1, 2, 3, 4, 5, 10, 15, 20):
    print(f"{n:>3}", *(f"{chain_sizes[k][n - 1]:>{w}}" for k, w in
                       (("source", 7), ("C3", 10), ("C4", 6), ("C5", 6))))
c3 = chain_sizes["C3"]
ratios = [later / earlier for earlier, later in zip(c3[9:], c3[10:])]
print(f"C3: from n = 10 on, one conditional more multiplies the size by {min(ratios):.4f} to {max(ratios):.4f}")
for name in ("C4", "C5"):
    steps = {later - earlier for earlier, later in zip(chain_sizes[name], chain_sizes[name][1:])}
    print(f"{name}: one conditional more adds {' or '.join(map(str, sorted(steps)))} constructors")

# %%
import matplotlib.pyplot as plt

ns = range(1, 21)
top = max(chain_sizes["C4"]) * 1.3
leaves = next(n for n in ns if chain_sizes["C3"][n - 1] > top)    # the first n whose C3 point is off the chart
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
for name in ("C3", "C4", "C5"):
    left.plot(ns, chain_sizes[name], marker=".", label=name)
    right.plot(ns, chain_sizes[name], marker=".", label=name)
left.set_yscale("log")
left.set_title("output size (log scale)")
right.set_ylim(0, top)
right.set_title(f"output size (linear scale; C3 leaves it at n = {leaves})")
for ax in (left, right):
    ax.set_xlabel("conditionals in the chain, n")
    ax.set_xticks([1, 5, 10, 15, 20])
    ax.legend()
plt.tight_layout()
step = chain_sizes["C5"][1] - chain_sizes["C5"][0]
display(fig, metadata={"alt": "Two plots of output size against the number n of conditionals in the "
                              "chain, 1 to 20. On a logarithmic scale C3 is a straight line, doubling "
                              "with each conditional, far above C4 and C5. On a linear scale C3 leaves "
                              f"the chart at n = {leaves}, and C4 and C5 are one straight line, {step} "
                              "constructors more per conditional."})
plt.close(fig)

# %% [markdown]
# On the logarithmic scale C3 is a straight line: its size doubles with each
# conditional (each one copies everything after it into both of its
# branches; the lines below the table print the factor). C4 and C5 grow by
# the same number of constructors per conditional, printed there too: a
# straight line on the linear scale (C4's line is hidden under C5's). On
# this chain C5's output is exactly as large as C4's, because every
# conditional's continuation is a `let` (`let xi = [·] in …`), the one kind C5
# must bind to a join point too. C5 differs from C4 only where a conditional's
# continuation is `Return` or a jump, as in P2 above, and there it is smaller
# by the join point it does not make — and keeps the branches in tail
# position.
#
# ## From C5 to CPS
#
# C5 is the plan of [chapter 7](07_cps_convert.ipynb), where L is converted to
# the CPS language of [chapter 6](06_cps.ipynb), after Kennedy's *Compiling
# with continuations, continued*. Each of C5's three continuations has a
# counterpart there, a *context* of chapter 7's converter (which has two
# kinds: a `Return` holds either of the two names):
#
# | C5 | chapter 7's context | what it is in the CPS term |
# |---|---|---|
# | `Cont.Return()` | `Return(ret)` | the function's *return continuation* `ret`, the continuation variable every function receives; an `ApplyCont` to it returns the function's result. Using it twice is free: it is a name. |
# | `Cont.Join(j)` | `Return(k)` | a *continuation variable* `k` bound by a `LetCont`: again a name, free to use twice. A `Join (j, e)` is an `ApplyCont` to `k`. |
# | `Cont.Let(x, t)` | `Then(fn)` | no node of its own: `fn` is a *meta-continuation*, a Python function in the converter that builds the rest of the term around a value. It cannot be used twice; before two branches can both need it, the converter binds it with a `LetCont` to a fresh continuation variable, and the branches jump to that with `ApplyCont`. That is C5's `LetJoin`. |
#
# An `if` or a `match` in tail position is then converted with the return
# continuation itself, so a call in one of its branches stays a tail call:
# an `Apply` whose continuations are the function's own. And no
# *administrative redex* appears — no continuation that the conversion makes
# only to apply it at once to a value, [chapter 1](01_addlang.ipynb)'s
# useless step — because a value is handed to a meta-continuation directly,
# as in chapter 1, rather than first bound and then passed on.
#
# ## What the tests check
#
# `tests/test_anf.py` holds this chapter's promises:
#
# - each of the gist's six listings equals our output up to renaming, and
#   exactly when the compiler follows OCaml's right-to-left order;
# - for random well-scoped S programs whose `let`s bind distinct names
#   (generated by Hypothesis), the output of every compiler C0 … C5
#   evaluates to the value of the source;
# - C1's output is at most five times the size of its input — it names,
#   and copies nothing — while C2's doubles along a chain of conditionals:
#   the copies came with the continuation;
# - on the same programs, C4's and C5's outputs pass `check_scopes`: every
#   name bound once, every use in scope, joins only to join points;
# - C5's output is never more than four times the size of its input. Count
#   what each source constructor adds to the output: a variable or a literal,
#   its expression and the node that applying its continuation makes (a
#   `Return`, a `Join` or a `Let`): 2. A `Bop`, its expression and one
#   application: 2 (the `Let`s naming its operands are made by the operands'
#   own applications). A `let`, nothing of its own. An `If0`, its `If0` node,
#   and when its continuation must be bound, a `LetJoin`, the parameter's
#   `Var` and one application: at most 4. Nothing is ever built twice, so the
#   total is at most 4 per source constructor;
# - C5 never makes a join point whose code merely returns its parameter —
#   the join points that cost C4 its tail positions;
# - a chain of conditionals makes C3's output double and C5's grow by a
#   constant.
#
# ## Exercises
#
# 1. C5 binds every `Cont.Let` continuation of a conditional to a join
#    point, even one whose term only returns the value it names, `let x = [·] in return x` — the
#    continuation of the last conditional of `if0_chain(n)`. Recognise it:
#    it behaves as `Cont.Return()`. Which join points does that save, and
#    what does it give back?
# 2. C1 to C5 copy a variable into a fresh one (`let %1 = x`). Change C5 so
#    that an operand of `⊕` that is already a variable is used directly.
#    What happens to the sizes in the measurement above? When is it wrong?
# 3. Add a `Call (f, x)` expression to S and A2. In which of C4's outputs on
#    P2-like programs would a call that was in tail position stop being one?
# 4. Write C6 where `If0` tests an arbitrary expression (`If0 of exp * t * t`),
#    avoiding the `let %n = …` that names the test.
#
# <details><summary>Solutions</summary>
#
# 1. `C5Rename`, below, hands such a continuation to C5's `if0` as
#    `Cont.Return()`. It saves the join point of a conditional whose value
#    is named only to be returned: in `if0_chain(n)`, the last one. And it
#    gives back tail position: the branches of that conditional return
#    their value themselves instead of jumping to a block that does, so a
#    call there (exercise 3) would stay a tail call. The variable `x` is not
#    bound at all any more, since nothing but the return used it.
# 2. `C5Direct`, below, lowers a `⊕` whose operand is a variable with the
#    variable's own name in the `Bop` and no `Let` for it. The sizes of the
#    chain do not change at all: it has no `⊕`. Its copies `let %n = x`
#    come from `if0`, which names its test even when the test is already a
#    variable — exercise 4's business. On P1 and P2 the output shrinks by two
#    constructors per operand that is a variable. It is wrong when the right
#    operand binds again the name of a left operand that is a variable: in
#    `y ⊕ (let y = 5 in y)` the right operand's `let y` comes first in the
#    flat output, and the `Bop` reads the new `y`. C5 gets that program
#    right, since its copy `let %1 = y` reads `y` before the right operand
#    binds it again; the copy is what protects the left operand's value.
#    On programs whose `let`s bind distinct names, which C2 to C5 already
#    need (C2's section), the direct version is right too.
# 3. In every branch of an `If0` that is itself in tail position. C4 gives
#    each `If0` a join point, even when its continuation is `Return`; a call
#    `f x` in a branch then becomes `Join (j, Call (f, x))`: call, then jump
#    to `j`, which returns — the call is no longer the last thing the
#    function does. In P2-like programs that is the *last* conditional,
#    whose join point `%7` (drawn in the flow graph above) only returns.
#    The first conditional's branches were never in tail position: the rest
#    of the program follows them. C5 keeps the tail calls, since it makes no
#    join point for the continuation `Return`.
# 4. `C6`, below: a fourth continuation, `Test(then, orelse)`, stands for
#    `e ↦ If0 (e, then, orelse)`, and `if0` lowers its test with it instead
#    of with `Cont.Let(%n, If0 (%n, …))`. `Test` carries two terms, so it is
#    not copyable: an `if0` in the test position of another makes a join
#    point for it, as for a `Cont.Let`. The evaluator needs one more case;
#    below, `named_tests` turns C6's output back into A2 by naming each test,
#    and `evaluate_a` runs that. Each conditional saves one constructor, the
#    `Let` that named its test.
#
# </details>
#
# The solutions that are code, run on P1, P2 and the chains, against
# `evaluate_s`. Exercise 1:

# %%
def returns_what_it_names(k) -> bool:
    return isinstance(k, Cont.Let) and k.body == A1.Return(A1.Var(k.name))


class C5Rename(C5):
    """C5 that treats the continuation let x = [·] in return x as return."""

    def if0(self, t1, t2, t3):
        lowered = super().if0(t1, t2, t3)
        return lambda k: lowered(Cont.Return() if returns_what_it_names(k) else k)


def join_points(t) -> int:
    return sum(isinstance(u, A2.LetJoin) for u in subterms(t))


tests = [P1, P2] + [if0_chain(n) for n in (1, 2, 5)]
for s in tests:
    for compiler in (C5, C5Rename):
        check_scopes(compiler.lower(s))
        assert evaluate_a(compiler.lower(s)) == evaluate_s(s)
for n in (1, 2, 5):
    print(f"if0_chain({n}): join points, C5 {join_points(C5.lower(if0_chain(n)))}, "
          f"C5Rename {join_points(C5Rename.lower(if0_chain(n)))}")

# %% [markdown]
# Exercise 2:

# %%
class C5Direct(C5):
    """C5 that uses a variable operand of a Bop directly, without a Let."""

    def lower_(self, s):
        if not (isinstance(s, S.Bop) and S.Var in (type(s.left), type(s.right))):
            return super().lower_(s)
        t1, t2 = self.lower_all(s.left, s.right)
        x1, x2 = (o.name if isinstance(o, S.Var) else self.fresh() for o in (s.left, s.right))

        def lowered(k):
            rest = apply(k, A1.Bop(x1, x2))
            with_x2 = rest if isinstance(s.right, S.Var) else t2(Cont.Let(x2, rest))
            return with_x2 if isinstance(s.left, S.Var) else t1(Cont.Let(x1, with_x2))
        return lowered


for s in tests:
    assert evaluate_a(C5Direct.lower(s)) == evaluate_s(s)
for name, s in (("P1", P1), ("P2", P2), ("if0_chain(5)", if0_chain(5))):
    print(f"{name}: C5 {size(C5.lower(s))}, C5Direct {size(C5Direct.lower(s))} constructors")
shadowing = S.Let("y", S.Int(1), S.Bop(S.Var("y"), S.Let("y", S.Int(5), S.Var("y"))))
print("y ⊕ (let y = 5 in y), with y = 1:", evaluate_s(shadowing), "| C5 gives", evaluate_a(C5.lower(shadowing)),
      "| C5Direct gives", evaluate_a(C5Direct.lower(shadowing)))

# %% [markdown]
# Exercise 4:

# %%
@dataclass(slots=True)
class If0e:
    """C6's conditional: If0 (e, then, orelse) tests an expression."""
    test: object
    then: object
    orelse: object


@dataclass(slots=True)
class Test:
    """The continuation e ↦ If0 (e, then, orelse)."""
    then: object
    orelse: object


def apply6(k, e):
    return If0e(e, k.then, k.orelse) if isinstance(k, Test) else apply(k, e)


class C6(C5):
    """C5 whose If0 tests an expression: no Let names the test."""

    def var(self, x):
        return lambda k: apply6(k, A1.Var(x))

    def int(self, i):
        return lambda k: apply6(k, A1.Int(i))

    def bop(self, t1, t2):
        x1, x2 = self.fresh(), self.fresh()
        return lambda k: t1(Cont.Let(x1, t2(Cont.Let(x2, apply6(k, A1.Bop(x1, x2))))))

    def if0(self, t1, t2, t3):
        def lowered(k):
            if is_copyable(k) and not isinstance(k, Test):
                return t1(Test(t2(k), t3(k)))
            j, x0 = self.fresh(), self.fresh()
            rest = apply6(k, A1.Var(x0))
            return A2.LetJoin(j, x0, rest, t1(Test(t2(Cont.Join(j)), t3(Cont.Join(j)))))
        return lowered


# %%
def named_tests(t, names=None):
    """C6's output as A2: each tested expression named by a Let."""
    names = names if names is not None else iter(range(1, 10**9))
    if isinstance(t, If0e):
        x = f"test{next(names)}"
        return A1.Let(x, t.test, A1.If0(x, named_tests(t.then, names), named_tests(t.orelse, names)))
    if isinstance(t, (A1.Let, A1.If0, A2.LetJoin)):
        return type(t)(*(named_tests(getattr(t, f.name), names) for f in fields(t)))
    return t


nested = S.If0(S.If0(S.Var("x"), S.Int(0), S.Int(1)), S.Int(2), S.Int(3))   # if0 in a test
for s in tests + [S.Let("x", S.Int(0), nested)]:
    output = named_tests(C6.lower(s))
    check_scopes(output)
    assert evaluate_a(output) == evaluate_s(s)
for name, s in (("P2", P2), ("if0_chain(5)", if0_chain(5))):
    print(f"{name}: C5 {size(C5.lower(s))}, C6 {size(C6.lower(s))} constructors")
print(show(C6.lower(P2)))
