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
# # Chapter 6. The CPS language
#
# Every stage after this one reads and rewrites programs in one intermediate
# language: a *continuation-passing* language whose every intermediate value
# has a name, whose every jump is explicit, and in which a function never
# returns — it is handed a *continuation* to jump to instead. This chapter
# defines that language and the small framework that every later pass uses to
# build, inspect, check, change, print, parse and run its terms. It follows
# Andrew Kennedy's paper *Compiling with continuations, continued* (2007) as
# the sources of this book describe it: the [`Cpsast`
# interface](../bibliography.md#cpsast) of the original L compiler, the
# framework modules of its author's [blog](../bibliography.md#the-l-blog),
# and OCamlPro's [account of the same design inside
# Flambda2](../bibliography.md#flambda2-snippets). Below, *the seed* is
# the first two, the L compiler's own sources, and *the snippet* is
# OCamlPro's post.
#
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** those sources (see the [bibliography](../bibliography.md#the-seeds));
# [chapter 2](02_union_find.ipynb), union-find (`Fast`), which
# links each use of a variable to the variable; the idea of
# [chapter 3](03_anf.ipynb), that every intermediate value gets a name; a
# few helpers of [chapter 4a](04a_syntax.ipynb) (string quoting, the guards
# on Python's recursion and garbage collector, which live in [appendix
# B](B_support.ipynb)) and of [chapter 4b](04b_meaning.ipynb) (the table of
# primitives; runtime errors, which live with the compile errors and
# source locations in [appendix A](A_errors.ipynb)).
#
# **Builds:** the module `lcompiler.cps`: the CPS language, and the
# framework that every later pass uses on it — [chapter 7](07_cps_convert.ipynb)
# builds terms, [chapter 8](08_closure.ipynb) and [chapter 9](09_shrink.ipynb)
# change them in place, [chapter 10](10_llvm.ipynb) compiles them to LLVM.
#
# </div>

# %%
#| default_exp cps

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.cps`:
#
# - **Representation.** Terms `LetPrim`, `LetCont`, `ApplyCont`, `Apply`,
#   `Case`, `Halt`; values (constants, tuples, injections, lambdas,
#   externals) and primitive operations; top-level `Definition`s with a
#   visibility. Variables are separate from their occurrences, continuation
#   variables separate from ordinary ones, and every occurrence finds its
#   variable in amortised constant time through chapter 2's union-find.
#   Every term, variable and occurrence knows what encloses it.
# - **Build** terms without touching a link (`let_prim`, `let_cont`, … in
#   the higher-order style, and `Seq` for long straight-line code);
#   **Print** them as a readable text (`show`); **Traverse** them
#   (`walk`, `occurrences`, `fold`, `free_variables`); **Change** them in
#   place (`substitute`, `replace`, `move`, `delete_binding`, `redirect`,
#   `swap_prim`); **Parse** the printed text back, with `parse(show(p))`
#   printing as `show(p)`; **Check** every invariant (`check`);
#   **Interpret** them (`run`), the reference semantics for every later
#   pass; and draw them (`diagram`).
# - Everything is linear in the size of the term but two steps: the
#   interpreter, preparing a term to run, asks `free_variables` of every
#   function, so the body of a function nested d deep is walked d times;
#   and `diagram`, made for terms of a page, compares every arrow it draws
#   with every box.
#   The operations that walk a whole term —
#   Traverse, Check, Change, Print — keep their own stack rather than
#   Python's, so a term of a million nodes is as easy as one of ten. Two
#   recurse on nesting only, raising Python's recursion limit for deeply
#   nested terms: Parse, on the bodies of `fun` and `cont`, and the
#   interpreter's step that prepares a term to run. `bench/cps_speed.py`
#   times building, checking, printing, parsing, walking, running and
#   substituting on terms of up to a million nodes, at the end of the
#   chapter.

# %% [markdown]
# ## Why continuations, and why second-class ones
#
# Compare two ways to write `map` in L. The direct one,
#
# ```l
# def map(f, l) = l.{ Nil -> Nil; Cons(x, r) -> Cons(f(x), map(f, r)) }
# ```
#
# leaves implicit *where* each call returns to and *what happens next*: after
# `f(x)` we must still call `map`, then build the `Cons`. A CPS program says
# it. Each "what happens next" becomes a named **continuation**, `k(v)` is a
# jump that passes `v` to it, and a call names the continuation it returns
# to — and the one it *raises* to, if the callee raises an exception. In the
# language of this chapter (its syntax is defined below) `map` is:
#
# ```text
# private map_1 = fun ret_2 exn_3 (f_4, l_5) {
#   t_6 = tag l_5
#   cont empty_7() {
#     nil_8 = inj 0 Nil()
#     ret_2(nil_8)
#   }
#   cont nonempty_9() {
#     x_10 = l_5[0]
#     r_11 = l_5[1]
#     cont after_f_12(fx_13) {
#       cont after_map_14(m_15) {
#         result_16 = inj 1 Cons(fx_13, m_15)
#         ret_2(result_16)
#       }
#       call map_1(f_4, r_11) -> after_map_14 / exn_3
#     }
#     call f_4(x_10) -> after_f_12 / exn_3
#   }
#   case t_6 { 0 -> empty_7; 1 -> nonempty_9 }
# }
# ```
#
# `map` binds two continuations: `ret_2`, where it returns, and `exn_3`,
# where it raises. Both calls in its body name two: `-> after_map_14`, where
# the call returns, and `/ exn_3`, where an exception raised by the callee
# goes — here `map`'s own, so an exception raised by `f` leaves `map` too.
#
# This is *second-class* CPS, the kind Kennedy proposed and Flambda2 uses:
# continuations are not values. They are bound by `cont` (the term
# `LetCont`), jumped to (`ApplyCont`) or handed to a call as its return
# and exception points (`Apply`), and nothing else: they cannot be stored in
# a tuple or passed as an ordinary argument. Three things follow, and the whole back end
# stands on them.
#
# 1. **A continuation is a block of code, not a closure.** Since it never
#    escapes the function that binds it, it needs no heap allocation: it is a
#    label. `cont` is a *basic block* (a run of instructions entered only
#    at its top and left only by its last), a jump to it is a branch, and a
#    function body is a control-flow graph — the graph Flambda2's post draws for this
#    very `map`, boxes nested by scope. [Chapter 10](10_llvm.ipynb) compiles
#    it exactly so.
# 2. **Calls use the machine stack.** The return continuation of a call is a
#    continuation of the *caller*, so "call `map`, then continue at
#    `after_map`" is an ordinary call instruction followed by a branch, and a
#    call whose two continuations are the function's own `ret` and `exn` is a
#    tail call.
#    First-class CPS (continuations as closures, the `map_cps` of the Flambda2 snippet)
#    would instead allocate a closure per call.
# 3. **Control flow is explicit, and rewriting it is local.** Inlining a
#    continuation, deleting an unused one, turning a tail-recursive function
#    into a loop: each is a rewrite of one term, done in place by the Change
#    functions below. An SSA compiler such as LLVM (*static single
#    assignment*: every variable is assigned once, as here; [chapter
#    10](10_llvm.ipynb) meets it in full) also rewrites its graph in
#    place (its use-lists play the part of our rings of occurrences); what
#    CPS adds is *scope*. A variable is visible
#    exactly in the term under its binding, so whether a rewrite keeps the
#    program valid is decided by looking at the terms it touches, where an
#    SSA rewrite must keep right, across the whole function, each
#    definition's *dominance* over its uses (it comes first on every path
#    to them) and the *φ-nodes*, the instructions at the top of a block
#    that choose a value by the block that control came from.
#
# The language is also in *administrative normal form*: every operand is a
# variable, including constants (`one = 1` before `x + one`). Every value
# has one name, given once — the property [chapter 3](03_anf.ipynb) obtained
# for expressions.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: two continuations, even where nothing raises</p>
#
# Like Flambda2, every function here has *two* continuations, one for a
# normal return and one for an exception ("double-barrelled" CPS, after Hayo
# Thielecke), and every call names both. L has exceptions: the front end
# learns `exception`, `raise` and `try … catch` in chapters 4a–5, and
# [chapter 7](07_cps_convert.ipynb) converts them. In this language they need
# no new kind of control flow, only a second place to go:
#
# - a handler (the clauses of a `catch`) is an ordinary local continuation
#   (`cont`) of one parameter, the exception;
# - `raise` is a jump to a continuation, `h(e) raise @3:5`, which records
#   its *raise site* (where it happened, for the report if nothing catches
#   it);
# - a call inside a `try` names the handler as its exception continuation;
#   any other call names its function's own, so an exception leaves the
#   function;
# - the top level raises to one continuation of the program, `uncaught`,
#   which reports and stops with exit status 2.
#
# Why give every function the second continuation, even in a program that
# never raises? Because a function is compiled once, for every caller: the
# same `map` is called inside a `try` by one caller and outside by another,
# so where it raises to is a parameter, as where it returns to is. Keeping
# the parameter in every function costs nothing at run time where nothing
# is caught: the compiled function receives nothing for it, and a program
# that catches no exception compiles to the code it would have without
# them; in a program that does catch, a call that may raise is followed by
# one test ([chapter 10](10_llvm.ipynb)). And it makes every pass handle
# both from the start instead of special-casing functions that may raise.
#
# The operations that can fail — `/` and `%` by zero, a `match` without a
# matching clause, `assert` — raise predefined exceptions (`DivisionByZero`,
# `MatchFailure`, `AssertionFailed`). Here they are primitives that name
# the continuation their failure raises to (`q = a / b @2:7 / exn_3`, `u =
# fail "assertion failed" @4:1 / exn_3`), not an explicit test and a jump:
# the table of primitives (chapter 4b) says which operations fail and how,
# and the back end keeps its one check per division. Raising to `uncaught`,
# such a failure stops the program with the message, and at the place, that
# a program without `try` reports (`division by zero` at the operator).
#
# </div>

# %% [markdown]
# ## The terms
#
# A **term** is one of six forms. Below, `x` is an ordinary variable,
# `k` a continuation variable, `p` a primitive (defined next) and `t` a term.
#
# | term | printed | meaning |
# |---|---|---|
# | `LetPrim(x, p, t)` | `x = p` then `t` | compute `p`, name the result `x`, continue with `t` |
# | `LetCont(k, [x1…xn], t1, t2)` | `cont k(x1, …, xn) { t1 }` then `t2` | bind the block `t1` with parameters `x1…xn` to `k`, in `t1` (so it can loop) and in `t2`; continue with `t2` |
# | `ApplyCont(k, [y1…yn])` | `k(y1, …, yn)` | jump to `k`, binding its parameters to `y1…yn` |
# | `ApplyCont(h, [e], raises)` | `h(e) raise @3:5` | a raise: jump to `h` with the exception `e`, recording the raise site (L source line 3, column 5) |
# | `Apply(kind, f, k, h, [y1…yn])` | `call f(y1, …, yn) -> k / h` | call the function `f`; it will jump to `k` with its result, or to `h` with an exception it raises (`call direct` for a `direct` call) |
# | `Case(x, {i: k…}, kd)` | `case x { i -> k; …; _ -> kd }` | jump to the continuation whose integer matches the value of `x`, or to `kd` |
# | `Halt(x)` | `halt x` | stop; `x` is the value of the computation |
#
# A continuation takes any number of parameters (`cont k(x1, …, xn)`); a
# `Case` arm continuation takes none, a return continuation exactly one (the
# function's result), and an exception continuation exactly one (the
# exception). `Case` only chooses where to jump, by the value of an
# integer or boolean variable (`false` is 0, `true` is 1); taking a value
# apart is separate: the primitive `tag x` reads the constructor number of an
# injection, `x[i]` reads field `i`.
#
# **Function kinds.** A lambda and a call are marked `closure` or `direct`
# (the seed's `No_environment`). Before closure conversion
# ([chapter 8](08_closure.ipynb)), every L function is a `closure`: it may
# mention variables of the enclosing code. Afterwards, a `direct` function
# mentions only its parameters and the top-level definitions, and a
# `closure` receives its environment explicitly.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: continuations with several parameters</p>
#
# The seed's `Let_cont` takes exactly one parameter; ours take several, as in
# Flambda2. The choice costs nothing in the framework and pays in three places
# later. A join point after an `if` that assigned two `var`s must pass two
# values; with one parameter they would travel in a tuple, allocated on the
# heap and unpacked by the back end's optimiser if it can. A loop (`while`
# with its loop variables) is a continuation with one parameter per variable.
# And a continuation parameter becomes an LLVM φ-node (a `phi` instruction),
# of which a block has as many as it likes.
#
# </div>
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a <code>case</code> that only jumps</p>
#
# The seed's `Case` takes an injection apart — it compares the tag and hands
# the field to the arm. Ours only jumps, and the fields are read by
# primitives. So `Case` is exactly LLVM's `switch`, an `if` is a `Case` on a
# boolean, and matching integer literals needs nothing new. Exercise 3 asks
# what the other choice would change.
#
# </div>

# %% [markdown]
# ## Values and primitives
#
# A **value** is something that can be computed without running code, which
# is why a top-level definition can hold one *statically*
# ([chapter 10](10_llvm.ipynb) makes it an LLVM constant, or an LLVM
# function for a lambda):
#
# | value | printed | |
# |---|---|---|
# | `Const(c)` | `42`, `true`, `()`, `"text"` | an Int, Bool, Unit or String constant |
# | `TupleValue([x1…xn])` | `tuple(x1, …, xn)` | a block of n fields; n may be 1 (a mutable *cell*) or 0 |
# | `MakeClosure([f, x1…xn])` | `closure(f, x1, …, xn)` | a tuple holding a function's code `f` and its environment (made by chapter 8) |
# | `Inject(tag, name, [x1…xn])` | `inj 1 Cons(x1, x2)` | constructor number `tag` (of its type) applied to fields |
# | `Lambda(kind, k, h, [x1…xn], t)` | `fun k h (x1, …) { t }`, `fun direct k h (x1, …) { t }` | a function with return continuation `k` and exception continuation `h` |
# | `External(name)` | `external "name"` | a value defined outside the program (the runtime) |
#
# A **primitive** is a value or an operation on variables:
#
# | primitive | printed | |
# |---|---|---|
# | `Proj(i, x)` | `x[i]` | field `i` of a tuple or injection |
# | `Tag(x)` | `tag x` | the constructor number of an injection |
# | `Op(op, [x, y])` | `x + y`, `x <= y` … | `+ - * / %` (64-bit, C division) and `== != < <= > >=` |
# | `Op(op, [x, y], h)` | `x / y @2:7 / h` | an operation that can fail (`/` and `%` on zero), and the continuation `h` its failure raises to |
# | `Op(op, [x])` | `-x`, `!x` | `neg`, negation (wrapping), and `not` |
# | `SetField(i, x, y)` | `x[i] := y` | store into field `i` (the cells of captured `var`s); the result is `()` |
# | `Print([x1…xn])` | `print(x1, …)` | L's `print`: the values separated by spaces, then a newline; the result is `()` |
# | `Fail(message, [x], loc)` | `fail "message" x @3:7` | stop with a runtime error at L source line 3, column 7, the message followed by the printed value of `x` if there is one |
# | `Fail(message, [x], loc, h)` | `fail "assertion failed" @3:7 / h` | raise the predefined exception of the message (`MatchFailure`, `AssertionFailed`) to `h`; uncaught, it reports as the line above |
#
# This is the list the L back end needs: arithmetic and comparison for the
# operators, projections and tags for pattern matching, cells for captured
# variables, printing, and located failures for `assert`, unmatched patterns
# and reading a definition before it has run. `/`, `%`, `Fail` and calls carry
# the source location of the L expression they come from (`@line:col`), so
# that a runtime error can say where it happened.
#
# An `Op` is a primitive of the core's: its `op` is the name of a row of
# [chapter 4b](04b_meaning.ipynb)'s table of primitives (`lcompiler.primitives`),
# the same name a core `Prim` has, and the row says how many operands it
# takes, how it is printed (its symbol), what it computes, and whether it can
# fail. This chapter asks the table each of those questions and knows no
# operator of its own.

# %% [markdown]
# ## Top-level definitions
#
# A program is a list of **definitions**, as in `Cpsast`. A definition binds a
# global variable to either a *static* value (a lambda, a constant, a tuple of
# other globals) or a *dynamic* one, a term computed when the program starts,
# whose `halt x` gives the value. Its **visibility** is `public` (other
# compilation units may use it), `private` (used by this program only) or
# `unused` (no variable at all: a computation run for its effects, like a
# top-level `print`). An L program is one compilation unit, so the L
# compiler makes every definition `private` or `unused`
# ([chapter 7](07_cps_convert.ipynb)); `public` is for a compiler that links
# units together, and for the tests and benchmarks of this chapter, which
# write CPS by hand. The only pass that reads it is the optimiser of
# [chapter 9](09_shrink.ipynb), which never deletes a `public` definition.
#
# A program of two definitions, which the section on Build makes and the
# section on Print prints:
#
# ```text
# private square_1 = fun ret_2 exn_3 (x_4) {
#   y_5 = x_4 * x_4
#   ret_2(y_5)
# }
# unused = do {
#   seven_6 = 7
#   cont k_7(r_8) {
#     u_9 = print(r_8)
#     halt u_9
#   }
#   call square_1(seven_6) -> k_7 / uncaught
# }
# ```
#
# The call at the top level raises to `uncaught`, the program's exception
# continuation: every dynamic definition's body raises there, and a jump to
# it reports the exception and stops. It is bound by the program, not by a
# term, and printed without a number: there is one.
#
# Static values exist before anything runs, so every function can call every
# other, in any order (L's mutual recursion); dynamic definitions then run top
# to bottom. A global is therefore in scope everywhere, and reading one whose
# dynamic definition has not run yet is the program's business to prevent
# (the L → CPS conversion of [chapter 7](07_cps_convert.ipynb) inserts the
# check and its `fail`).
#
# <div class="admonition note">
# <p class="admonition-title">Design note: static definitions beside dynamic ones</p>
#
# A program could be one big term, run from its first line: every function
# a `LetPrim` of a `Lambda` inside `main`. Then a function would be a value
# made at run time, and a function defined later in the text could not be
# called by one defined earlier: the language would need a recursive
# binding form, or the back end some back-patching. Splitting the
# program into definitions, static where the value needs no computation,
# gives the back end what it wants — a static function is an LLVM function,
# a static tuple a constant — and gives mutual recursion for free, since
# every static value exists before anything runs.
#
# </div>

# %% [markdown]
# ## Variables and occurrences
#
# Kennedy's representation separates a **variable** — the object made once,
# where the name is bound — from its **occurrences**, one object per use. An
# occurrence must lead to its variable quickly (to ask "what is bound
# here?"), and a variable must list its occurrences quickly (to ask "is it
# used? once? where?"). The interesting operation is **substitution**: after
# `x = y` has been found redundant, every occurrence of `x` must become an
# occurrence of `y` — and a shrinking pass ([chapter 9](09_shrink.ipynb)) does this thousands of
# times, so it must not cost a walk over the occurrences.
#
# The seed's answer, which we follow, is chapter 2's union-find. The
# occurrences of one variable form one partition, whose *description* is the
# variable. Then:
#
# - *occurrence → variable* is `find`, amortised constant time;
# - *substitute y for x* is one `union` of x's and y's partitions, with
#   description `y`: every occurrence of `x` now finds `y`, and none was
#   visited.
#
# For the other direction, each variable also threads its occurrences on a
# circular doubly linked list with the variable itself as the list head.
# Two such rings splice into one in constant time, so substitution stays
# constant, and removing one occurrence (when the term holding it is
# deleted) is constant too. The variable keeps the count of its
# occurrences, which the shrinking reductions read constantly (dead: 0;
# inline: 1).
#
# Continuation variables are a separate class from ordinary variables, with
# their own occurrence class: the two never mix, and the checker enforces
# it. Names are unique by construction — a variable is an object, and two
# objects are never confused — so no pass renames a variable to keep it
# from capturing another ("alpha-conversion"); only a pass that copies a
# term (chapter 9, to inline a function at several calls) makes the copy
# variables of its own. The `hint` of a variable is only for printing.

# %%
#| export
from lcompiler.union_find import Fast

OCCURRENCES = Fast("link")        # one structure for every occurrence of every program


class Var:
    """An ordinary variable: where a name is bound. Also the head of its ring of occurrences."""
    __slots__ = ("hint", "partition", "binder", "type", "count", "next", "prev")
    is_cont = False

    def __init__(self, hint: str = "x", type=None):
        self.hint, self.type = hint, type
        self.partition = None          # the union-find partition of its occurrences
        self.binder = None             # the term, lambda or definition that binds it
        self.count = 0                 # how many occurrences it has
        self.next = self.prev = self   # the ring of occurrences, empty

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.hint}>"


class ContVar(Var):
    """A continuation variable."""
    __slots__ = ()
    is_cont = True

    def __init__(self, hint: str = "k"):
        super().__init__(hint)



# %% [markdown]
# A variable is an object with a printing hint, and it is also the head of
# the ring of its occurrences: `next` and `prev` point at itself while it has
# none. `binder` is filled in by the Build functions below; `type` is for
# the L type of the value, which [chapter 7](07_cps_convert.ipynb) records.

# %%
x = Var("x")
k = ContVar("k")
x, x.count, x.next is x, k.is_cont  # noqa: B018  (the cell shows it)

# %% [markdown]
# A fresh variable has no use yet: its count is 0, and its ring is empty,
# which is what `x.next is x` says — the head of the ring points back at
# itself. The last `True` is the class talking: `k` is a `ContVar`, and
# nothing but its class tells it from an ordinary variable.
#
# An occurrence holds three things: its place in the union-find structure
# (the field `link`, which `Fast` manages), its place in the ring, and its
# uplink. It does not hold its variable: `var` asks union-find.

# %%
#| export
class Occ:
    """One use of a variable: an element of the union-find partition of its variable."""
    __slots__ = ("link", "next", "prev", "enclosing")
    is_cont = False

    @property
    def var(self) -> Var:
        """The variable this occurrence refers to: a find, amortised constant time."""
        return OCCURRENCES.find(self).desc

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.var.hint}>"


class ContOcc(Occ):
    """One use of a continuation variable."""
    __slots__ = ()
    is_cont = True


# %% [markdown]
# `occur` makes an occurrence: a singleton partition of the union-find
# structure, joined to the variable's partition (the variable stays its
# description), and a new element at the head of the ring. `_forget` takes
# one out of the ring when the term holding it is deleted, and returns its
# variable.

# %%
#| export
def occur(var: Var) -> Occ:
    """A new occurrence of var, not yet placed in a term."""
    o = (ContOcc if var.is_cont else Occ)()
    o.enclosing = None
    p = OCCURRENCES.singleton(o, var)
    var.partition = p if var.partition is None else OCCURRENCES.union(var.partition, p, var)
    o.prev, o.next = var, var.next                  # insert at the head of the ring
    var.next.prev = o
    var.next = o
    var.count += 1
    return o


def _forget(o: Occ) -> Var:
    """Take an occurrence out of its variable's ring (its term is being deleted); return the variable."""
    var = o.var
    o.prev.next, o.next.prev = o.next, o.prev
    o.next = o.prev = None
    var.count -= 1
    if var.count == 0:
        var.partition = None           # no occurrence left: start afresh on the next one
    return var


def occurrences(var: Var):
    """The occurrences of var, most recent first."""
    o = var.next
    while o is not var:
        nxt = o.next                   # so the caller may change o
        yield o
        o = nxt


# %% [markdown]
# Two occurrences of `x`: both find `x`, the ring lists them, the count is 2.

# %%
o1, o2 = occur(x), occur(x)
x.count, o1.var is x, o2.var is x, list(occurrences(x)) == [o2, o1]

# %% [markdown]
# Neither occurrence stores `x`: each `.var` above was a `find` in the
# union-find structure. The ring lists `o2` before `o1` because `occur`
# inserts at the head, so `occurrences` gives the most recent use first;
# no pass depends on that order, only on the ring being complete.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: occurrences that find their variable, rather than point at it</p>
#
# The obvious representation gives each occurrence a field `var`, pointing
# straight at its variable. Reading it is then one field access instead of a
# `find`, but substituting `y` for `x` must visit every occurrence of `x` and
# rewrite its field: the cost of a substitution grows with the number of
# uses. A shrinking pass ([chapter 9](09_shrink.ipynb)) substitutes again and
# again — often the result of one substitution is substituted in turn — so
# that cost can add up to time quadratic in the size of the program. With
# union-find the substitution is one `union` whatever the number of uses, and
# each read pays an amortised constant for the `find`. Exercise 2 asks you
# to measure the difference.
#
# </div>
#
# The node classes are plain Python objects with `__slots__`. The field
# `enclosing` of a term is its **uplink**: the term, lambda or definition it
# sits in. The fields holding occurrences are named after their role, and the
# tuple `OCC_FIELDS` of each class says which fields hold occurrences, so the
# generic functions below (traversal, deletion, checking) handle every node
# without a case per class. The same goes for `SUBTERMS` (fields holding
# terms) and `BINDS` (fields holding the variables a node binds).

# %%
#| export
class Node:
    """Terms, values and primitives: a few fields and an uplink."""
    __slots__ = ("enclosing",)
    OCC_FIELDS = ()       # fields holding an occurrence or a list of occurrences
    SUBTERMS = ()         # fields holding a term
    BINDS = ()            # fields holding a variable or a list of variables it binds

    def occs(self):
        """The occurrences held directly by this node, in order."""
        for f in self.OCC_FIELDS:
            v = getattr(self, f)
            if type(v) is list:
                yield from v
            elif v is not None:
                yield v

    def bound(self):
        """The variables this node binds, in order."""
        for f in self.BINDS:
            v = getattr(self, f)
            if type(v) is list:
                yield from v
            else:
                yield v

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


# %% [markdown]
# `Node` has no `__init__`: the Build functions below create nodes and fill
# their fields, so that no other code has to know in which order a class
# lists them. `occs` and `bound` are written once here, for every class,
# from the field lists each class declares.
#
# The six terms. Each class lists its fields in `__slots__` and says which
# of them hold occurrences, sub-terms and bound variables; `Case` keeps its
# arms as a list of (integer, occurrence) pairs, so it lists its
# occurrences itself.

# %%
#| export
class Term(Node):
    __slots__ = ()

class LetPrim(Term):
    __slots__ = ("var", "prim", "body")
    SUBTERMS, BINDS = ("body",), ("var",)

class LetCont(Term):
    __slots__ = ("cont", "params", "handler", "body")
    SUBTERMS, BINDS = ("handler", "body"), ("cont", "params")

class ApplyCont(Term):
    __slots__ = ("cont", "args", "raises", "loc")  # raises: a raise site (a raise, at loc)
    OCC_FIELDS = ("cont", "args")

class Apply(Term):
    __slots__ = ("kind", "func", "cont", "exn", "args", "loc")
    OCC_FIELDS = ("func", "args", "cont", "exn")

class Case(Term):
    __slots__ = ("scrutinee", "arms", "default")   # arms: list of (int, ContOcc), sorted
    OCC_FIELDS = ("scrutinee", "default")

    def occs(self):
        yield self.scrutinee
        for _, k in self.arms:
            yield k
        if self.default is not None:
            yield self.default

class Halt(Term):
    __slots__ = ("arg",)
    OCC_FIELDS = ("arg",)


# %% [markdown]
# The primitives, and among them the values. `MakeClosure` is a
# `TupleValue` (a closure *is* a tuple, whose field 0 is code), so every
# pass that handles tuples handles closures; `loc`, on `Op`, `Fail` and
# `Apply` (and, on the terms above, on an `ApplyCont` that raises), is the
# L source location that a runtime error reports.

# %%
#| export
class Prim(Node):
    __slots__ = ()

class Value(Prim):
    __slots__ = ()

class Const(Value):
    __slots__ = ("value",)            # int, bool, str, or () for Unit

class TupleValue(Value):
    __slots__ = ("fields",)
    OCC_FIELDS = ("fields",)

class MakeClosure(TupleValue):
    """A tuple whose field 0 is a function's code: a closure (made by chapter 8)."""
    __slots__ = ()

class Inject(Value):
    __slots__ = ("tag", "name", "fields")
    OCC_FIELDS = ("fields",)

class Lambda(Value):
    __slots__ = ("kind", "cont", "exn", "params", "body")
    SUBTERMS, BINDS = ("body",), ("cont", "exn", "params")

class External(Value):
    __slots__ = ("name",)

class Proj(Prim):
    __slots__ = ("index", "arg")
    OCC_FIELDS = ("arg",)

class Tag(Prim):
    __slots__ = ("arg",)
    OCC_FIELDS = ("arg",)

class Op(Prim):
    __slots__ = ("op", "args", "loc", "exn")     # exn: where its failure raises to (None: it cannot fail)
    OCC_FIELDS = ("args", "exn")

class SetField(Prim):
    __slots__ = ("index", "target", "value")
    OCC_FIELDS = ("target", "value")

class Print(Prim):
    __slots__ = ("args",)
    OCC_FIELDS = ("args",)

class Fail(Prim):
    __slots__ = ("message", "args", "loc", "exn")   # exn: where it raises to (None: it stops)
    OCC_FIELDS = ("args", "exn")


# %% [markdown]
# A `Definition` is a node too, so that uplinks can lead to it; a
# `Program` is only a list of them.

# %%
#| export
class Definition(Node):
    """A top-level binding: visibility, variable (None when unused), static value or dynamic term."""
    __slots__ = ("visibility", "var", "value", "body")
    SUBTERMS, BINDS = ("body",), ("var",)

    def bound(self):
        if self.var is not None:
            yield self.var

    def occs(self):
        return iter(())


class Program:
    """A whole compilation unit: its definitions, in order, and its `uncaught` continuation,
    the exception continuation of every top-level definition's body."""
    __slots__ = ("definitions", "uncaught")

    def __init__(self, definitions=None, uncaught: "ContVar" = None):
        self.definitions = [] if definitions is None else definitions
        if uncaught is None:
            uncaught = ContVar("uncaught")
            uncaught.binder = self
        self.uncaught = uncaught

    def occs(self):
        return iter(())

    def bound(self):
        return iter(())

# %% [markdown]
# The classes at a glance — their fields, and the three lists that the
# generic functions read:

# %%
for cls in (LetPrim, LetCont, ApplyCont, Apply, Case, Halt, Lambda, Op, Fail, Definition):
    print(f"{cls.__name__:10} {', '.join(cls.__slots__):34} occurrences: {', '.join(cls.OCC_FIELDS) or '-':20}"
          f" terms: {', '.join(cls.SUBTERMS) or '-':14} binds: {', '.join(cls.BINDS) or '-'}")

# %% [markdown]
# Read the table by columns. Only `LetPrim`, `LetCont`, `Lambda` and
# `Definition` bind anything, and only they have sub-terms: the other terms
# are the *terminators*, which end a block. `Case` lists only `scrutinee`
# and `default` among its occurrence fields, because its arms live in a
# list of pairs that its own `occs` reads. And `Apply` lists its
# occurrences in the order `call f(args) -> k / h` prints them: function,
# arguments, then the two continuations — the order every generic function
# meets them in. `Op` and `Fail` hold a continuation occurrence too, `exn`
# (or `None`): where their failure raises to.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: slotted classes and <code>type(t) is</code>, not dataclasses and <code>match</code></p>
#
# The house style elsewhere is dataclasses consumed by `match`. Here the
# nodes are plain classes with `__slots__`, for two reasons. A node is an
# object whose *identity* counts — uplinks point at it, and passes change
# it in place — while a dataclass brings an `__init__` that `_new` makes
# unnecessary and an `__eq__` that compares fields, so that two different
# constants `1`, in two places of a term, would compare equal (and, without
# a `__hash__`, no node could be a key of a dictionary). And a class pattern in `match` tests
# `isinstance`: `case TupleValue()` would also match a `MakeClosure`, its
# subclass. The code here tests `type(p) is …` where the difference matters
# (`Printer.prim` below tests `TupleValue` and `MakeClosure` separately), and
# the generic functions read `OCC_FIELDS`, `SUBTERMS` and `BINDS` instead of
# having a case per class. `__slots__` also spares every node the dictionary
# a Python object normally carries, which counts in a term of a million
# nodes.
#
# </div>
#
# `LetPrim` holds its primitive in `prim`, and a `Lambda` is a primitive
# whose body is a term; so the node tree alternates terms and primitives.
# `SUBTERMS` of a `LetPrim` is only its `body`: the lambda inside its `prim`
# is reached through `prim`, and the functions below treat "a `LetPrim`
# whose primitive is a `Lambda`" where it matters.
#
# What the uplinks are, precisely:
#
# - a **term**'s `enclosing` is the term, `Lambda` or `Definition` it is a
#   direct part of (`None` only while it is being built);
# - a **primitive**'s `enclosing` is its `LetPrim` (or the `Definition` of a
#   static value);
# - an **occurrence**'s `enclosing` is the term, primitive or definition
#   holding it;
# - a **variable**'s `binder` is the `LetPrim`, `LetCont`, `Lambda` or
#   `Definition` that binds it.

# %% [markdown]
# ## Build
#
# Nobody should set those links by hand. The Build functions create a node,
# turn the variables they are given into fresh occurrences, and set every
# uplink. Binding forms take a Python function that receives the freshly
# made variables and returns the body — *higher-order abstract syntax*, as in
# the seed's Build module: the binding structure of the CPS term is the
# binding structure of the Python code that builds it.
#
# ```python
# let_prim(const(2), lambda two:
#     let_cont(lambda k, x: let_prim(op("+", two, x), lambda y: apply_cont(k, y)),
#              lambda k: apply_cont(k, two)))
# ```
#
# builds the loop `let k(x) = k(2 + x) in k(2)`. It is the example the
# seed's post on LLVM turns into a block with a φ-node, `let k(x) =
# k(2+x); k(11)`, except that it enters the loop with 2, so that one
# constant serves twice; the chapter calls it *the seed's loop*. The nesting of that
# Python code follows the nesting of the term, which is what we want for
# handlers and lambdas but not for a long run of `LetPrim`s: a straight-line
# block of ten thousand instructions would nest ten thousand Python calls.
# For those, `Seq` builds a chain of bindings one statement at a time, the
# way an assembler emits instructions: `s.let(p)` appends a `LetPrim` and
# returns its variable, `s.cont(…)` appends a `LetCont` whose handler is built
# by a function, and `s.end(t)` closes the chain with its last term.

# %%
#| export
def _attach(parent, field: str, child):
    """Put child (a node or None) in parent.field and point its uplink at parent."""
    setattr(parent, field, child)
    if child is not None:
        child.enclosing = parent


def _own(node):
    """Point the uplinks of the occurrences held by node at it."""
    for o in node.occs():
        o.enclosing = node
    return node


def _occs(vars_) -> list:
    return [occur(v) for v in vars_]


def _names(params, default: str) -> list:
    """Parameter hints: a count of default names, or a list of hints."""
    return [default] * params if type(params) is int else list(params)


def _bind(binder, *variables):
    for v in variables:
        if type(v) is list:
            for w in v:
                w.binder = binder
        elif v is not None:
            v.binder = binder


def _new(cls, **fields):
    node = cls.__new__(cls)
    node.enclosing = None
    for name, value in fields.items():
        setattr(node, name, value)
    return node


# %% [markdown]
# In this chapter, those are the only functions that touch links (chapter
# 9's shrinker calls them too: the table of the interface, at the end,
# says where). `_new` makes a node
# without an `__init__` (the classes have none: each Build function fills
# exactly the fields its node has); `_attach` puts a child in a field and
# points the child's uplink back; `_own` points the uplinks of a node's
# occurrences at it; `_bind` sets the `binder` of the variables a node
# binds.
#
# Values and primitives take *variables*, and make the occurrences
# themselves: the caller never sees an occurrence.

# %%
#| export
from lcompiler.primitives import PRIMITIVES, by_symbol, DIVISION_BY_ZERO

# The predefined exceptions (tags 0, 1, 2 of the type Exn), by the message of the runtime error
# they report when nothing catches them.
PREDEFINED = {DIVISION_BY_ZERO.message: (0, "DivisionByZero"),
              "no clause matches the value": (1, "MatchFailure"),
              "assertion failed": (2, "AssertionFailed")}


def const(value) -> Const:
    return _new(Const, value=value)

def tuple_(*fields: Var) -> TupleValue:
    return _own(_new(TupleValue, fields=_occs(fields)))

def closure(code: Var, *environment: Var) -> MakeClosure:
    return _own(_new(MakeClosure, fields=_occs((code,) + environment)))

def inject(tag: int, name: str, *fields: Var) -> Inject:
    return _own(_new(Inject, tag=tag, name=name, fields=_occs(fields)))

def external(name: str) -> External:
    return _new(External, name=name)

def proj(index: int, x: Var) -> Proj:
    return _own(_new(Proj, index=index, arg=occur(x)))

def tag(x: Var) -> Tag:
    return _own(_new(Tag, arg=occur(x)))

def op(operator: str, *args: Var, loc=None, exn: "ContVar" = None) -> Op:
    """The primitive named operator (a name of chapter 4b's table: "+", "neg") on args; if it
    can fail, exn is the continuation its failure raises to."""
    if operator not in PRIMITIVES or PRIMITIVES[operator].arity != len(args):
        raise ValueError(f"no primitive {operator} of {len(args)} operands")
    if exn is not None and PRIMITIVES[operator].fails is None:
        raise ValueError(f"the primitive {operator} cannot fail: it has no exception continuation")
    return _own(_new(Op, op=operator, args=_occs(args), loc=loc, exn=None if exn is None else occur(exn)))

def set_field(index: int, target: Var, value: Var) -> SetField:
    return _own(_new(SetField, index=index, target=occur(target), value=occur(value)))

def print_(*args: Var) -> Print:
    return _own(_new(Print, args=_occs(args)))

def fail(message: str, *args: Var, loc=None, exn: "ContVar" = None) -> Fail:
    """A failure: raises the predefined exception of message to exn, or (no exn) stops the program."""
    if exn is not None and message not in PREDEFINED:
        raise ValueError(f"{message!r} is not the message of a predefined exception")
    return _own(_new(Fail, message=message, args=_occs(args), loc=loc, exn=None if exn is None else occur(exn)))

# %% [markdown]
# `a + b` as a primitive: it holds two new occurrences, each pointing back
# at it, and `a` now counts one use. An operation is named as in the core,
# by its row in the table of primitives (`"+"`, `"neg"` for `-x`), and one
# with the wrong number of operands is refused at once:

# %%
a, b = Var("a"), Var("b")
plus = op("+", a, b)
print(type(plus).__name__, [o.var for o in plus.occs()], a.count, plus.args[0].enclosing is plus)
try:
    op("+", a)
except ValueError as e:
    print("ValueError:", e)

# %% [markdown]
# The binding forms are higher-order: `lam`, `let_prim` and `let_cont` make
# the variables they bind, pass them to the Python function that builds the
# body, and attach what it returns. The other terms take variables, like
# the primitives.

# %%
#| export
def lam(body, params=1, kind: str = "closure", cont: str = "ret", exn: str = "exn") -> Lambda:
    """A function: body(k, h, x1, …, xn) returns its body, k its return continuation, h its
    exception continuation; params is a count or a list of hints."""
    k, h = ContVar(cont), ContVar(exn)
    xs = [Var(n) for n in _names(params, "x")]
    node = _new(Lambda, kind=kind, cont=k, exn=h, params=xs, body=None)
    _bind(node, k, h, xs)
    _attach(node, "body", body(k, h, *xs))
    return node


def let_prim(prim: Prim, body, name: str = "x") -> LetPrim:
    """x = prim, then body(x)."""
    x = Var(name)
    t = _new(LetPrim, var=x, prim=None, body=None)
    x.binder = t
    _attach(t, "prim", prim)
    _attach(t, "body", body(x))
    return t

def let_cont(handler, body, params=1, name: str = "k") -> LetCont:
    """cont k(x1…xn) { handler(k, x1…xn) }, then body(k)."""
    k = ContVar(name)
    xs = [Var(h) for h in _names(params, "x")]
    t = _new(LetCont, cont=k, params=xs, handler=None, body=None)
    _bind(t, k, xs)
    _attach(t, "handler", handler(k, *xs))
    _attach(t, "body", body(k))
    return t

def apply_cont(k: ContVar, *args: Var, raises: bool = False, loc=None) -> ApplyCont:
    """A jump to k; raises: it is a raise (of args[0], at loc), which records its raise site."""
    if raises and len(args) != 1:
        raise ValueError("a raise passes one value, the exception")
    return _own(_new(ApplyCont, cont=occur(k), args=_occs(args), raises=raises, loc=loc))

def raise_(h: ContVar, e: Var, loc=None) -> ApplyCont:
    """raise e to the exception continuation h: a jump that records its raise site."""
    return apply_cont(h, e, raises=True, loc=loc)

def apply(f: Var, k: ContVar, h: ContVar, *args: Var, kind: str = "closure", loc=None) -> Apply:
    """Call f on args: it returns to k, it raises to h."""
    return _own(_new(Apply, kind=kind, func=occur(f), cont=occur(k), exn=occur(h), args=_occs(args), loc=loc))

def case(x: Var, arms: dict, default: ContVar = None) -> Case:
    """Jump to arms[value of x], or to default."""
    return _own(_new(Case, scrutinee=occur(x), arms=[(i, occur(arms[i])) for i in sorted(arms)],
                     default=None if default is None else occur(default)))

def halt(x: Var) -> Halt:
    return _own(_new(Halt, arg=occur(x)))


# %% [markdown]
# The seed's loop, built by exactly the Python code shown above (with names
# for the printer). The continuation `k` is used twice: by the jump in its
# own handler, and by the jump that enters the loop.

# %%
loop = let_prim(const(2), lambda two:
    let_cont(lambda k, x: let_prim(op("+", two, x), lambda y: apply_cont(k, y), "y"),
             lambda k: apply_cont(k, two), params=["x"]), "two")
type(loop).__name__, type(loop.body).__name__, loop.body.cont.count

# %% [markdown]
# The result names the two outermost terms — the `LetPrim` that binds `two`,
# whose body is the `LetCont` of the loop — and the count of `k`, 2: the jump
# in the handler and the jump after it, exactly the two uses the sentence
# above announced.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: binding with Python functions, not with names</p>
#
# A builder could take names instead: `let_prim("two", const(2), …)`, with
# the uses written as strings and resolved at the end. Then a misspelt name,
# or a use outside the binding's scope, would only be found when the term is
# resolved, and two builders that both pick the name `x` could capture each
# other's variables. With higher-order abstract syntax the variable is a
# Python object that exists only inside the function that receives it:
# Python's own scoping keeps the term well scoped, and there is no name to
# clash.
#
# </div>
#
# `Seq` keeps the first and the last term of the chain it is building;
# appending attaches the new term as the body of the last one. A handler is
# still built by a function, so only handlers and lambdas nest Python calls.

# %%
#| export
class Seq:
    """Build a straight chain of bindings one at a time; end() closes it with a term."""

    def __init__(self):
        self.first = self.last = None

    def _append(self, t: Term) -> None:
        if self.last is None:
            self.first = t
        else:
            _attach(self.last, "body", t)
        self.last = t

    def let(self, prim: Prim, name: str = "x") -> Var:
        """Append x = prim; return x."""
        x = Var(name)
        t = _new(LetPrim, var=x, prim=None, body=None)
        x.binder = t
        _attach(t, "prim", prim)
        self._append(t)
        return x

    def cont(self, handler, params=1, name: str = "k") -> ContVar:
        """Append cont k(x1…xn) { handler(k, x1…xn) }; return k for the rest of the chain."""
        k = ContVar(name)
        xs = [Var(h) for h in _names(params, "x")]
        t = _new(LetCont, cont=k, params=xs, handler=None, body=None)
        _bind(t, k, xs)
        _attach(t, "handler", handler(k, *xs))
        self._append(t)
        return k

    def end(self, last: Term) -> Term:
        """Close the chain with its final term; return the whole chain."""
        self._append(last)
        first, self.first, self.last = self.first, None, None
        return first

# %% [markdown]
# The same loop, built with `Seq`, one statement after another:

# %%
s = Seq()
two = s.let(const(2), "two")
k = s.cont(lambda k, x: let_prim(op("+", two, x), lambda y: apply_cont(k, y), "y"), ["x"])
loop2 = s.end(apply_cont(k, two))
type(loop2).__name__, type(loop2.body).__name__, k.count, two.count

# %% [markdown]
# The same two outer terms and the same count for `k`; `two` is used twice
# as well, by the sum in the handler and by the jump that enters the loop.
# Only the Python that built it differs: three statements in a row instead
# of nested lambdas.
#
# Definitions are built the same way, on a `Program`. A function can call
# a definition that comes later, so `declare` makes the global variable first
# and `define` gives it its value afterwards; `define` alone does both.

# %%
#| export
class Program(Program):
    def declare(self, name: str = "g") -> Var:
        """A global variable, to be given a definition by define()."""
        return Var(name)

    def define(self, value, visibility: str = "private", var: Var = None, name: str = "g"):
        """Add a definition: a Value (static) or a Term (dynamic); returns its variable."""
        if visibility not in ("public", "private", "unused"):
            raise ValueError(f"visibility {visibility!r}")
        if visibility == "unused":
            var = None
        elif var is None:
            var = Var(name)
        d = _new(Definition, visibility=visibility, var=var, value=None, body=None)
        _bind(d, var)
        if isinstance(value, Value):
            _attach(d, "value", value)
        else:
            _attach(d, "body", value)
        d.enclosing = None
        self.definitions.append(d)
        return var

# %% [markdown]
# The program of two definitions shown with the visibilities above: a
# static function `square`, and a dynamic definition, `unused`, that calls
# it and prints the result. The next section prints it.

# %%
square_program = Program()
square = square_program.define(lam(lambda ret, exn, x: let_prim(op("*", x, x), lambda y: apply_cont(ret, y), "y"),
                                   ["x"]), name="square")
main = Seq()
n = main.let(const(7), "seven")
k = main.cont(lambda k, r: let_prim(print_(r), lambda u: halt(u), "u"), ["r"])
square_program.define(main.end(apply(square, k, square_program.uncaught, n)), "unused")
[(d.visibility, d.var) for d in square_program.definitions]

# %% [markdown]
# The second pair is `('unused', None)`: a definition run only for its
# effect has no variable, and `define` returned `None` for it.
#
# ## Print
#
# The printed form is the seed's: one binding per line, like assembly or SSA,
# which stays readable on long terms where nested `let … in` would march off
# the right margin. Handlers and function bodies are indented blocks in
# braces. Variables are printed `hint_n`, numbered 1, 2, 3, … in the order in
# which they first appear in the text, so the same term always prints the
# same, in any process, and two terms that differ only in the identity of
# their variable objects print identically.

# %%
#| export
import re
from lcompiler.syntax import Str, pretty_expr

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Namer:
    """Names for variables, numbered in order of first appearance."""

    def __init__(self):
        self.names, self.count = {}, 0

    def __call__(self, var: Var) -> str:
        name = self.names.get(var)
        if name is None and type(var.binder) is Program:
            return "uncaught"                 # the program's continuation: one, never numbered
        if name is None:
            self.count += 1
            hint = var.hint if _IDENT.match(var.hint or "") else "x"
            name = self.names[var] = f"{hint}_{self.count}"
        return name

# %% [markdown]
# A `Namer` is a dictionary from variables to names, filled as the printer
# meets them. A hint that is not an identifier (the parser could not read it
# back) prints as `x`:

# %%
name = Namer()
name(two), name(k), name(two), name(Var("a b"))

# %% [markdown]
# `two` gets the number 1 and keeps it when it is met again; `k` gets 2.
# The number is not stored in the variable: another `Namer` may give `two`
# another number, as the printers below do.
#
# Constants print as L writes them (strings through
# [chapter 4a](04a_syntax.ipynb)'s printer, so that the escapes agree), and a
# location as `@line:col` of the L source. A location is a `Span` of an L
# source, or, in a text read back by the parser below, a bare `Pos`:

# %%
#| export
def line_col(loc) -> tuple:
    """(line, column) of a source location: a Span of an L source, or a parsed Pos."""
    if isinstance(loc, Pos):
        return loc.line, loc.col
    return loc.source.line_col(loc.start)


class Pos:
    """A location read back from printed CPS: a line and a column of the L source."""
    __slots__ = ("line", "col")

    def __init__(self, line: int, col: int):
        self.line, self.col = line, col

    def __repr__(self) -> str:
        return f"Pos({self.line}, {self.col})"


def _at(loc) -> str:
    return "" if loc is None else " @%d:%d" % line_col(loc)


def quote(s: str) -> str:
    """A string constant as L (and the CPS text) writes it: chapter 4a's printer does it."""
    return pretty_expr(Str(s))


def show_const(c) -> str:
    if c is True or c is False:
        return "true" if c else "false"
    if type(c) is int:
        return str(c)
    if type(c) is str:
        return quote(c)
    if c == ():
        return "()"
    raise ValueError(f"not a constant: {c!r}")

# %% [markdown]
# The helpers on the cases that are easy to get wrong: a string with quotes
# and a line break in it, Unit, a boolean, and a location.

# %%
show_const('say "hi"\n'), show_const(()), show_const(False), _at(Pos(3, 7))

# %% [markdown]
# The first result looks doubly escaped because Jupyter shows the Python
# `repr` of the string: the text the printer writes is `"say \"hi\"\n"`, as
# L's own printer writes that string. The location starts with a space, so
# that it can be appended to any line, and an absent one is the empty
# string.
#
# The printer itself is a `Namer` and a list of lines. A primitive prints on
# one line, by a case per class:

# %%
#| export
class Printer:
    def __init__(self):
        self.name = Namer()
        self.lines = []

    def args(self, occs) -> str:
        return ", ".join(self.name(o.var) for o in occs)

    def prim(self, p) -> str:
        """A primitive other than a Lambda, on one line."""
        t, n = type(p), self.name
        if t is Const:
            return show_const(p.value)
        if t is TupleValue:
            return f"tuple({self.args(p.fields)})"
        if t is MakeClosure:
            return f"closure({self.args(p.fields)})"
        if t is Inject:
            return f"inj {p.tag} {p.name}({self.args(p.fields)})"
        if t is External:
            return f"external {quote(p.name)}"
        if t is Proj:
            return f"{n(p.arg.var)}[{p.index}]"
        if t is Tag:
            return f"tag {n(p.arg.var)}"
        if t is Op:
            symbol = PRIMITIVES[p.op].symbol
            if symbol is None:
                return f"{p.op}({self.args(p.args)}){_at(p.loc)}{self.exn(p)}"
            if len(p.args) == 1:
                return f"{symbol}{n(p.args[0].var)}{_at(p.loc)}{self.exn(p)}"
            return f"{n(p.args[0].var)} {symbol} {n(p.args[1].var)}{_at(p.loc)}{self.exn(p)}"
        if t is SetField:
            return f"{n(p.target.var)}[{p.index}] := {n(p.value.var)}"
        if t is Print:
            return f"print({self.args(p.args)})"
        if t is Fail:
            return f"fail {quote(p.message)}" + "".join(" " + n(o.var) for o in p.args) + _at(p.loc) + self.exn(p)
        if p is None:
            return "<hole>"
        raise TypeError(f"not a primitive: {p!r}")

    def exn(self, p) -> str:
        """Where a primitive that can fail raises to: ` / h`, as a call writes its second continuation."""
        return "" if p.exn is None else f" / {self.name(p.exn.var)}"

# %% [markdown]
# The primitive `a + b` of the section on Build, printed by a fresh printer,
# which numbers `a` and `b` in the order it meets them:

# %%
Printer().prim(plus)

# %% [markdown]
# No `@line:col` follows: `plus` was built without a location.
#
# The head of a function, and the last term of a block — a jump, a call, a
# `case` or `halt` — also print on one line each (a new printer numbers the
# names in the order it meets them):

# %%
#| export
class Printer(Printer):
    def header(self, lam: Lambda) -> str:
        kind = "fun" if lam.kind == "closure" else "fun direct"
        k, h = self.name(lam.cont), self.name(lam.exn)
        params = ", ".join(self.name(x) for x in lam.params)
        return f"{kind} {k} {h} ({params}) {{"

    def terminator(self, t) -> str:
        n = self.name
        if type(t) is ApplyCont:
            site = f" raise{_at(t.loc)}" if t.raises else ""
            return f"{n(t.cont.var)}({self.args(t.args)}){site}"
        if type(t) is Apply:
            kind = "call" if t.kind == "closure" else "call direct"
            return (f"{kind} {n(t.func.var)}({self.args(t.args)}) -> {n(t.cont.var)} / {n(t.exn.var)}"
                    f"{_at(t.loc)}")
        if type(t) is Case:
            arms = [f"{i} -> {n(k.var)}" for i, k in t.arms]
            if t.default is not None:
                arms.append(f"_ -> {n(t.default.var)}")
            return f"case {n(t.scrutinee.var)} {{ {'; '.join(arms)} }}"
        if type(t) is Halt:
            return f"halt {n(t.arg.var)}"
        return "<hole>"

# %% [markdown]
# Two terminators, through one printer: the jump that enters the seed's
# loop, and the call at the end of the `unused` definition.

# %%
p = Printer()
p.terminator(loop.body.body), p.terminator(square_program.definitions[1].body.body.body)

# %% [markdown]
# The numbers continue from one line to the next (`square_3` follows
# `two_2`) because one printer printed both; and they are not the numbers of
# the full texts below, where `k` is `k_2` and `two` is `two_1`. A name's
# number depends on what the printer met before it, which is why `show`
# always prints a whole program, definition or term from its top.
#
# A block is printed by a loop over a stack of work, never by recursion: a
# `LetPrim` prints its line and continues with its body; a function or a
# handler prints its head, then pushes its body one level deeper, a closing
# brace, and what follows it — in the reverse order, since the stack pops
# the last first.

# %%
#| export
class Printer(Printer):
    def block(self, term, depth: int) -> None:
        """Print a term at an indentation, iteratively: handlers and lambdas are pushed as work."""
        out, n = self.lines, self.name
        work = [(term, depth)]
        while work:
            t, depth = work.pop()
            pad = "  " * depth
            if type(t) is str:                   # a closing brace
                out.append(pad + t)
            elif type(t) is LetPrim:
                if type(t.prim) is Lambda:
                    out.append(f"{pad}{n(t.var)} = {self.header(t.prim)}")
                    work += [(t.body, depth), ("}", depth), (t.prim.body, depth + 1)]
                else:
                    out.append(f"{pad}{n(t.var)} = {self.prim(t.prim)}")
                    work.append((t.body, depth))
            elif type(t) is LetCont:
                k = n(t.cont)
                params = ", ".join(n(x) for x in t.params)
                out.append(f"{pad}cont {k}({params}) {{")
                work += [(t.body, depth), ("}", depth), (t.handler, depth + 1)]
            else:
                out.append(pad + self.terminator(t))

# %% [markdown]
# Last, a definition: `visibility name = value`, with `do { … }` around a
# dynamic term; and `show`, for a program, a definition or a term.

# %%
#| export
class Printer(Printer):
    def definition(self, d: Definition) -> None:
        head = d.visibility if d.var is None else f"{d.visibility} {self.name(d.var)}"
        if d.body is not None or d.value is None:
            self.lines.append(f"{head} = do {{")
            self.block(d.body, 1)
            self.lines.append("}")
        elif type(d.value) is Lambda:
            self.lines.append(f"{head} = {self.header(d.value)}")
            self.block(d.value.body, 1)
            self.lines.append("}")
        else:
            self.lines.append(f"{head} = {self.prim(d.value)}")


def _print(node) -> Printer:
    """The printer, after printing a program, a definition or a term: its lines and its names."""
    p = Printer()
    if type(node) is Program:
        for d in node.definitions:
            p.definition(d)
    elif type(node) is Definition:
        p.definition(node)
    else:
        p.block(node, 0)
    return p


def show(node) -> str:
    """The text of a program, a definition or a term."""
    return "\n".join(_print(node).lines) + "\n"

# %% [markdown]
# The seed's loop, and the program of two definitions, which prints exactly
# as the section on definitions wrote it:

# %%
print(show(loop), end="")

# %% [markdown]
# In the loop, `k_2` is used inside its own handler (`k_2(y_4)`, the jump
# back) and once after it (`k_2(two_1)`, the jump that starts the loop):
# a `cont` is in scope in its own body. The program of two definitions:

# %%
print(show(square_program), end="")

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: names given by the printer, not stored in variables</p>
#
# Many compilers give each variable a unique name when it is made, from a
# global counter (`x_4711`). Then a name would depend on everything the
# process had built before: the same term would print differently in a test
# and in this notebook, and a pass that makes one more variable would shift
# the numbers of every variable made after it, so that the texts before and
# after a pass would differ on every line. Numbering at printing time, in
# order of appearance, makes the text a function of the term alone; it is
# also what lets `parse(show(p))` print as `show(p)`.
#
# </div>
#
# ## Traverse
#
# Later passes never look inside a node class for its fields: they use the
# functions of this section. `children` gives the direct parts of a node —
# for a `LetPrim` its primitive then its body, for a `LetCont` its handler
# then its body, for a `Lambda` its body — and `walk` visits a whole tree in
# that order (depth first, handlers before what follows them: the order the
# printer writes them). `walk` uses an explicit stack, not recursion, so a
# chain of a million bindings is no problem. It pushes each node's
# children itself, last first, rather than calling `children`: the order is
# the same, but `walk` is the inner loop of nearly every later pass, and it
# saves a call and a list per node (the `walk` column of the table of
# costs per node at the end of the chapter is what a visit costs this way).

# %%
#| export
def children(node) -> list:
    """The direct parts of a node (terms and primitives), in printing order."""
    t = type(node)
    if t is LetPrim:
        return [node.prim, node.body]
    if t is LetCont:
        return [node.handler, node.body]
    if t is Lambda:
        return [node.body]
    if t is Definition:
        return [node.body if node.value is None else node.value]
    if t is Program:
        return list(node.definitions)
    return []


def walk(root):
    """Every node under root (a node, a definition or a program), root first, in printing order."""
    stack = [root]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if node is None:
            continue
        yield node
        t = type(node)                  # children(node), pushed last first
        if t is LetPrim:
            push(node.body)
            push(node.prim)
        elif t is LetCont:
            push(node.body)
            push(node.handler)
        elif t is Lambda or t is Definition and node.value is None:
            push(node.body)
        elif t is Definition:
            push(node.value)
        elif t is Program:
            stack.extend(reversed(node.definitions))

# %% [markdown]
# The loop, node by node, in the order of its printed text:

# %%
[type(node).__name__ for node in walk(loop)]

# %% [markdown]
# Primitives are nodes too: the `Const` of `two_1 = 2` comes right after its
# `LetPrim`, and the `Op` of the sum right after its own. The two
# `ApplyCont`s are the jump back, inside the handler, then the jump after
# the handler — line by line the order of the printed text above.
#
# Everything else in this section is a filter or a fold over `walk`: the
# terms, the occurrences, the bound variables, the size.

# %%
#| export
def subterms(root):
    """The terms under root, in printing order."""
    return (n for n in walk(root) if isinstance(n, Term))


def all_occurrences(root):
    """Every occurrence under root, in printing order."""
    for node in walk(root):
        yield from node.occs()


def binders(root):
    """Every variable bound under root, in printing order."""
    for node in walk(root):
        t = type(node)
        if t is LetPrim or t is LetCont or t is Lambda or t is Definition:
            yield from node.bound()


def fold(f, acc, root):
    """f(...f(f(acc, n1), n2)..., nk) over the nodes under root, in printing order."""
    for node in walk(root):
        acc = f(acc, node)
    return acc


def size(root) -> int:
    """The number of nodes (terms, primitives, definitions) under root."""
    return sum(1 for _ in walk(root))

# %% [markdown]
# The program of two definitions, through three of them: its size, the
# variables it binds, and the occurrences in each definition.

# %%
print(size(square_program), "nodes;", "bound:", [v.hint for v in binders(square_program)])
print("occurrences:", [o.var.hint for d in square_program.definitions for o in all_occurrences(d)])

# %% [markdown]
# The 14 nodes are five for `square` (its `Definition`, the `Lambda`, the
# `LetPrim`, its `Op` and the `ApplyCont`), eight for the `unused`
# definition, and the `Program` itself, which `walk` yields first. In the
# list of occurrences, `x` appears twice, once per operand of `x * x`;
# `ret` comes before `y` because `ApplyCont` lists its continuation first;
# and `r` and `u`, used in the handler of `k`, come before `square`, `seven`
# and `k`, used by the call after it: printing order again.
#
# The questions later passes ask most: which variables a term uses without
# binding them (closure conversion, [chapter 8](08_closure.ipynb)), which
# function a node is in, whether a variable is global, and whether a
# primitive may be deleted when its result is unused
# ([chapter 9](09_shrink.ipynb)) — not if it prints, writes, fails, or is
# an operation that its row in the table of primitives says is not pure or
# can fail: a division, since a division by zero is a runtime error.

# %%
#| export
def free_variables(root) -> list:
    """The variables occurring under root and bound outside it (globals included), in order of
    first occurrence."""
    bound = set(binders(root))
    seen, free = set(), []
    for o in all_occurrences(root):
        v = o.var
        if v not in bound and v not in seen:
            seen.add(v)
            free.append(v)
    return free


def enclosing_lambda(node):
    """The innermost Lambda around node (a node or an occurrence), or None at top level."""
    node = node.enclosing
    while node is not None and type(node) is not Lambda:
        node = node.enclosing
    return node


def is_global(var: Var) -> bool:
    return type(var.binder) is Definition


EFFECTS = (Print, SetField, Fail)

def has_effect(prim: Prim) -> bool:
    """Whether computing prim does more than produce its value (so it may not be deleted)."""
    if type(prim) is Op:
        row = PRIMITIVES[prim.op]
        return not row.pure or row.fails is not None
    return isinstance(prim, EFFECTS)

# %% [markdown]
# The handler of the loop uses `two`, bound outside it, and `x` and `k`,
# bound by the `cont` that holds the handler: all three are free in the
# handler. The function `square` uses only its own variables. The sum has no
# effect, the `print` has one, and `square` is a global.

# %%
handler = loop.body.handler
print([v.hint for v in free_variables(handler)], [v.hint for v in free_variables(square_program.definitions[0])])
print(has_effect(plus), has_effect(print_(a)), is_global(square))

# %% [markdown]
# ## Change
#
# A pass changes a term *in place*, with six operations that keep every link
# right — the uplinks, and each variable's occurrences and count:
#
# - `substitute(x, y)`: every occurrence of `x` becomes an occurrence of `y`.
#   One union-find `union` and one ring splice; constant time, whatever the
#   number of occurrences.
# - `replace(old, new)`: put the term `new` where `old` was, and delete what
#   is left of `old` (its occurrences leave their variables' rings).
# - `move(part, dest)`: take the term `part` out of its place (`take`) and
#   put it where `dest` was — `replace(dest, part)`; the place `part` left
#   becomes a *hole* that must be filled or deleted before the term is
#   checked again.
# - `delete_binding(t)`: remove a `LetPrim` or `LetCont` whose variable is
#   no longer used, putting its body in its place.
# - `redirect(o, y)`: make one occurrence refer to `y` — for the rare pass
#   that changes some uses of a variable and not others (closure conversion
#   does, in [chapter 8](08_closure.ipynb)). A union-find element cannot leave its partition, so
#   a new occurrence of `y` takes the place of `o`, which leaves its ring.
# - `swap_prim(t, p)`: give a `LetPrim` a new primitive, returning the old
#   one detached, so that it can be moved elsewhere (a lambda hoisted to the
#   top level, in chapter 8).
#
# Deleting a sub-tree costs its size: each of its occurrences is taken out of
# its ring, so that "how many uses has `x`?" stays a field read. That is the
# work of `delete`, below; `_slot` finds the field of the parent that holds a
# term, which every operation that puts a term in another's place needs.

# %%
#| export
class ChangeError(Exception):
    """A change that would break the representation's invariants."""


def _slot(node):
    """The parent of a term and the name of the field that holds it."""
    parent = node.enclosing
    if parent is None:
        raise ChangeError("the term is not placed anywhere")
    for f in (parent.SUBTERMS if type(parent) is not Definition else ("body",)):
        if getattr(parent, f) is node:
            return parent, f
    raise ChangeError("the term's uplink does not lead to a parent holding it")


def delete(node) -> None:
    """Forget every occurrence under node (which is being thrown away)."""
    for n in walk(node):
        for o in n.occs():
            if o.next is not None:
                _forget(o)

# %% [markdown]
# `substitute` is the operation the representation was designed for. The
# union-find `union` makes every occurrence of `x` find `y`, without
# visiting one; the splice moves `x`'s whole ring into `y`'s, in four
# pointer writes; the counts add up.

# %%
#| export
def substitute(x: Var, y: Var) -> None:
    """Make every occurrence of x an occurrence of y, in constant time."""
    if x is y:
        return
    if x.is_cont != y.is_cont:
        raise ChangeError("a continuation variable and an ordinary variable cannot replace each other")
    if x.count == 0:
        return
    if y.partition is None:
        y.partition = x.partition
        OCCURRENCES.set_description(y.partition, y)
    else:
        y.partition = OCCURRENCES.union(x.partition, y.partition, y)
    x.partition = None
    first, last = x.next, x.prev                   # splice x's ring into y's
    first.prev, last.next = y, y.next
    y.next.prev = last
    y.next = first
    x.next = x.prev = x
    y.count += x.count
    x.count = 0

# %% [markdown]
# Drawn, on a term where both variables have uses — `one` once, `uno` twice —
# each occurrence labelled with the variable it was made for: the rings
# (from the head, `next` by `next`, back to the head), and the union-find
# forest read from the occurrences' `link` fields, each partition under its
# handle, whose description is the variable.

# %%
from IPython.display import display
from lcompiler.drawing import Box, Picture
from lcompiler.union_find import Partition

s = Seq()
one = s.let(const(1), "one")
uno = s.let(const(1), "uno")
total = s.let(op("+", one, uno), "a")
pictured = s.end(halt(s.let(op("+", total, uno), "b")))
print(show(pictured), end="")
labels = {id(o): f"{v.hint} use {i}" for v in (one, uno)
          for i, o in enumerate(reversed(list(occurrences(v))), 1)}
occs = [o for v in (one, uno) for o in reversed(list(occurrences(v)))]


def rings() -> list:
    """Each variable's ring, from its head round to its head again."""
    heads = []
    for v in (one, uno):
        box = head = Box(f"{v.hint}: {v.count} use{'' if v.count == 1 else 's'}", style="green")
        for o in occurrences(v):
            box.children.append(Box(labels[id(o)], style="blue", edge="next"))
            box = box.children[0]
        box.children.append(Box(f"back to {v.hint}", style="green", edge="next"))
        heads.append(head)
    return heads


def forest() -> list:
    """The partitions of the occurrences, read from their links, under their handles."""
    boxes = {id(o): Box(labels[id(o)], style="blue") for o in occs}
    roots = []
    for o in occs:
        if type(o.link) is Partition:
            roots.append(Box(f"handle: {o.link.desc.hint}, rank {o.link.rank}", [boxes[id(o)]], "yellow"))
        else:
            boxes[id(o.link)].children.append(boxes[id(o)])
    return roots


def in_words() -> tuple:
    ring = "; ".join(f"{v.hint}'s ring holds " + (", ".join(labels[id(o)] for o in occurrences(v)) or "nothing")
                     for v in (one, uno))
    links = "; ".join(f"{labels[id(o)]} → " + (f"the handle of {o.link.desc.hint}" if type(o.link) is Partition
                                                else labels[id(o.link)]) for o in occs)
    return ring, links


moments = [("before", rings(), forest(), in_words())]
substitute(uno, one)
moments.append(("after substitute(uno, one)", rings(), forest(), in_words()))
for kind, i, edges in (("rings", 0, "down"), ("partitions", 1, "up")):
    alt = (f"The {kind} of the occurrences of one and uno before and after substitute(uno, one). "
           + " ".join(f"{when.capitalize()}: {words[i]}." for when, *_, words in moments))
    display(Picture([(f"{kind}, {when}", moment[i]) for when, *moment in moments], alt=alt, edges=edges))

# %% [markdown]
# The splice moved both of `uno`'s uses into `one`'s ring, and `uno`'s ring
# is empty. The union hung `one`'s partition under `uno`'s — `uno`'s had
# the higher rank, so its root stays the root — and relabelled the handle:
# its description is now `one`. No occurrence was visited: `uno use 1` and
# `uno use 2` still have the links they had, and find `one`.

# %% [markdown]
# A small term with a redundant constant: `uno` is bound to 1 like `one`.
# Substituting `one` for `uno` leaves `uno` with no use at all:

# %%
s = Seq()
one = s.let(const(1), "one")
uno = s.let(const(1), "uno")
total = s.let(op("+", uno, uno), "sum")
small = s.end(halt(total))
print(show(small), end="")
substitute(uno, one)
print(show(small), end="")
print("uses of one:", one.count, "of uno:", uno.count)

# %% [markdown]
# Nothing was renamed in the term: the `Op` still holds the same two
# occurrence objects, and they now *find* `one`. The second text still
# shows `uno_2 = 1` because the binding is still there, dead; deleting it is
# a separate operation, below.
#
# Taking a term out, putting one in, moving one: the term structure changes,
# and `delete` keeps the rings and counts true for whatever is thrown away.

# %%
#| export
def take(part: Term) -> Term:
    """Detach a term from its place, leaving a hole there; return it."""
    parent, f = _slot(part)
    setattr(parent, f, None)
    part.enclosing = None
    return part


def replace(old: Term, new: Term) -> Term:
    """Put new where old is, and delete what remains of old."""
    if new.enclosing is not None:
        take(new)
    parent, f = _slot(old)
    _attach(parent, f, new)
    old.enclosing = None
    delete(old)
    return new


def move(part: Term, dest: Term) -> Term:
    """Take part from its place (leaving a hole) and put it where dest is, deleting dest."""
    n = dest
    while n is not None:
        if n is part:
            raise ChangeError("cannot move a term into itself")
        n = n.enclosing
    return replace(dest, take(part))

# %% [markdown]
# Replacing the `halt sum_3` of the small term by `halt one`: the old `halt`
# is deleted, and with it the one use of `sum`.

# %%
replace(small.body.body.body, halt(one))
print(show(small), end="")
print("uses of sum:", total.count)

# %% [markdown]
# The new `halt one_1` made one more occurrence of `one` (it has three now:
# two in the sum and one here), and the deleted `halt sum_3` took its
# occurrence of `sum` with it, so `sum` counts 0 and is dead in turn.
#
# `delete_binding` removes a dead binding, after checking that it is dead:
# its variable has no use, and its primitive has no effect. One subtlety on
# a `LetCont`: the continuation may still be used — by its own handler, a
# loop that nothing enters any more. Those uses go with the handler, so
# they do not keep it alive.

# %%
#| export
def delete_binding(t: Term) -> Term:
    """Remove an unused LetPrim or LetCont (its body takes its place); return the body."""
    if type(t) is LetPrim:
        if t.var.count:
            raise ChangeError(f"{t.var.hint} is still used {t.var.count} time(s)")
        if has_effect(t.prim):
            raise ChangeError("the primitive has an effect")
        dead = t.prim
    elif type(t) is LetCont:
        inside = sum(1 for o in all_occurrences(t.handler) if o.var is t.cont)
        if t.cont.count > inside:
            raise ChangeError(f"{t.cont.hint} is still used outside its handler")
        dead = t.handler
    else:
        raise ChangeError(f"a {type(t).__name__} binds nothing")
    _slot(t)                                       # fails, changing nothing, if t has no place
    body = take(t.body)
    replace(t, body)
    if dead is not None:
        delete(dead)
    return body

# %% [markdown]
# `uno` and `sum` are dead now, and go; `one` is not, and `delete_binding`
# refuses, naming the reason:

# %%
delete_binding(small.body)                     # uno_2 = 1
delete_binding(small.body)                     # sum_3 = one_1 + one_1
print(show(small), end="")
try:
    delete_binding(small)
except ChangeError as e:
    print("ChangeError:", e)

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: small operations that may leave a term broken for a while</p>
#
# The Change functions are small, and some leave the term invalid until the
# next one runs: `take` leaves a hole, and `substitute` can make a variable
# used outside its scope. The alternative is a few large operations that
# each go from a valid term to a valid term — "inline this continuation",
# "delete this dead code". But the passes of the later chapters need many
# such rewrites, each a different sequence of the same small steps, and
# coding each as a primitive operation would duplicate the link-keeping
# in all of them. So the framework keeps the links right at every step, and
# `check` says what is still missing in between: the graph compaction at the
# end of this chapter shows the checker's messages after each step.
#
# </div>
#
# The last two operations change one occurrence, or one primitive, where
# the others change a variable or a term.

# %%
#| export
def redirect(o: Occ, y: Var) -> Occ:
    """Make the single occurrence o an occurrence of y (a new occurrence takes its place)."""
    node = o.enclosing
    new = occur(y)
    new.enclosing = node
    if type(node) is Case:
        node.arms = [(i, new if k is o else k) for i, k in node.arms]
        if node.default is o:
            node.default = new
    for f in node.OCC_FIELDS:
        v = getattr(node, f)
        if v is o:
            setattr(node, f, new)
        elif type(v) is list:
            setattr(node, f, [new if x is o else x for x in v])
    _forget(o)
    return new


def swap_prim(t: LetPrim, prim: Prim) -> Prim:
    """Put a new primitive in a LetPrim; return the old one, detached (not deleted)."""
    old = t.prim
    _attach(t, "prim", prim)
    old.enclosing = None
    return old

# %% [markdown]
# In `s = a + a`, one use of `a` is redirected to `b`; then the primitive is
# swapped for `a * b`. The old primitive comes back detached but still
# holding its occurrences, so that it could be put elsewhere; here it is
# thrown away, with `delete`.

# %%
s = Seq()
six, seven = s.let(const(6), "a"), s.let(const(7), "b")
product = s.let(op("+", six, six), "s")
term = s.end(halt(product))
redirect(product.binder.prim.args[1], seven)
print(show(term), end="")
old = swap_prim(product.binder, op("*", six, seven))
delete(old)
print(show(term), end="")
print("uses of a:", six.count, "of b:", seven.count)


# %% [markdown]
# ## Parse
#
# The seed's author designed his printed form to be parsable but never wrote
# the parser. We need one: tests and the chapters can then *write* CPS terms
# instead of building them, and `parse(show(t))` printing the same as `t` is a
# strong test of both directions. The grammar, one statement per line:
#
# ```text
# program    ::= definition*
# definition ::= ("public" | "private") NAME "=" (value | "do" block)
#              | "unused" "=" "do" block
# block      ::= "{" (NAME "=" prim | "cont" NAME "(" names ")" block)* last "}"
# last       ::= cont "(" names ")" ["raise" [loc]]          jump to a continuation; a raise
#              | "call" ["direct"] NAME "(" names ")" "->" cont "/" cont [loc]
#              | "case" NAME "{" (INT "->" cont ";")* ["_" "->" cont] "}"
#              | "halt" NAME
# prim       ::= value | NAME "[" INT "]" [":=" NAME] | "tag" NAME
#              | NAME OP NAME [loc] [exn] | OP NAME [loc] [exn]
#              | PRIMITIVE "(" names ")" [loc] [exn]
#              | "print" "(" names ")" | "fail" STRING NAME* [loc] [exn]
# value      ::= INT | "-" INT | "true" | "false" | "()" | STRING
#              | "tuple" "(" names ")" | "closure" "(" names ")"
#              | "inj" INT NAME "(" names ")" | "external" STRING
#              | "fun" ["direct"] NAME NAME "(" names ")" block
# cont       ::= NAME | "uncaught"                         uncaught: at the top level only
# exn        ::= "/" cont                                  where a failure raises to
# loc        ::= "@" INT ":" INT                           a line and column of the L source
# ```
#
# (`;` inside a `case` separates arms; `#` starts a comment.) An `OP` is the
# symbol of a primitive of two operands, or of one (`-`, `!`), in chapter
# 4b's table; a primitive that has no symbol is written as a call of its
# name, `PRIMITIVE(…)`. A name is an
# identifier; the printer's `_n` suffix is not required, and what precedes the
# last `_` becomes the variable's hint. Every name must be bound exactly once
# in the whole text — the representation has no shadowing — and used where
# its binding is in scope: a global anywhere, a continuation only inside the
# function that binds it. Each violation is a `CompileError` with the line and
# column, rendered like the L front end's errors.

# %%
#| export
from lcompiler.errors import CompileError, Source, Span
from lcompiler.support import recursion_limit, NESTING_LIMIT, collector_paused

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<int>[0-9]+)
  | (?P<string>"(?:[^"\\\n]|\\[nt\\"])*")
  | (?P<punct>:=|->|==|!=|<=|>=|[-=(){}\[\],;:+*/%<>!@])
""", re.VERBOSE)

_UNESCAPE = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}
_KEYWORDS = {"public", "private", "unused", "do", "cont", "call", "direct", "case", "halt",
             "tag", "print", "fail", "tuple", "closure", "inj", "external", "fun", "true", "false",
             "uncaught", "raise"}


class Parser:
    def __init__(self, source: Source, l_source: Source = None):
        self.source, self.l_source = source, l_source
        self.tokens = self.lex(source.text)
        self.i = 0
        self.vars = {}         # name -> variable, for every binding seen (names are unique)
        self.scope = set()     # ordinary variables in scope
        self.program_ = Program()  # the program read, whose `uncaught` the top level may name
        self.conts = {self.program_.uncaught}   # continuation variables in scope (the current function's)
        self.globals = {}

    def lex(self, text: str) -> list:
        tokens, pos = [], 0
        for m in _TOKEN.finditer(text):
            if m.start() != pos:
                break
            pos = m.end()
            kind = m.lastgroup
            if kind != "space":
                tokens.append((kind, m.group(), m.start()))
        if pos != len(text):
            raise self.error_at(pos, f"unexpected character {text[pos]!r}")
        tokens.append(("eof", "", len(text)))
        return tokens

# %% [markdown]
# The lexer is one regular expression with a named group per kind of token;
# spaces and comments are dropped, line breaks kept (a statement ends at
# one). Each token is (kind, text, offset in the text):

# %%
[(kind, text) for kind, text, _ in Parser(Source("<cps>", 'x_1 = y_2 / z_3 @1:5  # a comment\nhalt x_1')).tokens]

# %% [markdown]
# The comment is gone, the line break is a token of its own, and the
# location `@1:5` is four tokens: `@`, `1`, `:` and `5`. The keyword `halt` comes out as a `name`: the
# lexer does not know keywords; `name` below refuses them where a variable is
# expected. The list ends with an `eof` token, so the parser can always look
# one token ahead without running off the end.
#
# The helpers that read tokens: `peek` looks, `accept` takes a token if it is
# the one expected, `expect` requires it. An error says what was expected
# and what was found, at the place it was found, as a `CompileError` that
# renders like the L front end's errors:

# %%
#| export
class Parser(Parser):
    def error_at(self, offset: int, message: str, length: int = 1) -> CompileError:
        end = min(offset + length, len(self.source.text))
        return CompileError(message, Span(self.source, offset, max(end, offset)))

    def error(self, message: str) -> CompileError:
        kind, text, offset = self.tokens[self.i]
        found = "the end of the text" if kind == "eof" else "a line break" if kind == "newline" else repr(text)
        return self.error_at(offset, f"{message}, found {found}", len(text))

    def peek(self, value: str = None, kind: str = None) -> bool:
        k, text, _ = self.tokens[self.i]
        return (value is None or text == value and k in ("name", "punct")) and (kind is None or k == kind)

    def accept(self, value: str) -> bool:
        if self.peek(value):
            self.i += 1
            return True
        return False

    def expect(self, value: str, what: str = None) -> None:
        if not self.accept(value):
            raise self.error(f"expected {what or repr(value)}")

    def newlines(self, required: bool = True) -> None:
        if required and not self.peek(kind="newline") and not self.peek(kind="eof"):
            raise self.error("expected the end of the line")
        while self.peek(kind="newline"):
            self.i += 1

    def integer(self) -> int:
        negative = self.accept("-")
        if not self.peek(kind="int"):
            raise self.error("expected an integer")
        value = int(self.tokens[self.i][1])
        self.i += 1
        return -value if negative else value

    def string(self) -> str:
        if not self.peek(kind="string"):
            raise self.error("expected a string")
        text = self.tokens[self.i][1][1:-1]
        self.i += 1
        return re.sub(r"\\(.)", lambda m: _UNESCAPE[m.group(1)], text)

    def name(self, what: str = "a name") -> tuple:
        k, text, offset = self.tokens[self.i]
        if k != "name" or text in _KEYWORDS:
            raise self.error(f"expected {what}")
        self.i += 1
        return text, offset

# %% [markdown]
# The helpers at work on a broken line: a parser reads the name `x_1`, then
# accepts the `=`, and fails where the next name should be.

# %%
p = Parser(Source("<cps>", "x_1 = )"))
p.name(), p.accept("=")
try:
    p.name()
except CompileError as e:
    print(e.render())

# %% [markdown]
# The first two results (the name with its offset, and `True` from
# `accept`) are not shown, because they are not the last thing in the
# cell: the `try` is, and it shows the error. It is the same three-line
# format as the L front end's errors: the place as `FILE:LINE:COL`, the
# message with what was found, then the line with a caret under column 7,
# the `)`.
#
# Names and scopes. `hint` recovers the printing hint from a printed name
# (`after_f_12` was printed from the hint `after_f`); `use` reads a name
# that must be bound, of the right class, and in scope — each failure a
# different message; `loc` reads `@line:col`, as a `Span` of the L source
# when the parser has one, else as a `Pos`.

# %%
#| export
class Parser(Parser):
    @staticmethod
    def hint(name: str) -> str:
        base, sep, number = name.rpartition("_")
        return base if sep and number.isdigit() and base else name

    def use(self, cont: bool = False) -> Var:
        if cont and self.peek("uncaught"):
            if self.program_.uncaught not in self.conts:
                raise self.error("uncaught is the top level's exception continuation; a function raises "
                                 "to its own")
            self.i += 1
            return self.program_.uncaught
        name, offset = self.name("a continuation" if cont else "a variable")
        v = self.vars.get(name)
        if v is None:
            raise self.error_at(offset, f"{name} is not bound")
        if v.is_cont != cont:
            raise self.error_at(offset, f"{name} is {'a continuation' if v.is_cont else 'not a continuation'}"
                                        f"; a {'continuation' if cont else 'variable'} is expected here")
        if v not in (self.conts if cont else self.scope):
            where = "outside the function that binds it" if cont else "out of its scope"
            raise self.error_at(offset, f"{name} is used {where}")
        return v

    def uses(self) -> list:
        self.expect("(")
        vs = []
        if not self.accept(")"):
            vs.append(self.use())
            while self.accept(","):
                vs.append(self.use())
            self.expect(")", "',' or ')'")
        return vs

    def params(self) -> list:
        self.expect("(")
        names = []
        if not self.accept(")"):
            names.append(self.name("a parameter"))
            while self.accept(","):
                names.append(self.name("a parameter"))
            self.expect(")", "',' or ')'")
        return names

    def loc(self):
        at = self.tokens[self.i][2]
        if not self.accept("@"):
            return None
        line = self.integer()
        self.expect(":")
        col = self.integer()
        if self.l_source is None:
            return Pos(line, col)
        starts = self.l_source.line_starts
        if not 1 <= line <= len(starts) or col < 1:
            raise self.error_at(at, f"the location {line}:{col} is outside the L source")
        return Span(self.l_source, starts[line - 1] + col - 1, starts[line - 1] + col)

# %% [markdown]
# `hint` on three names, and `loc` on a location read without an L source:

# %%
Parser.hint("after_f_12"), Parser.hint("x"), Parser.hint("_2"), Parser(Source("<cps>", "@3:7")).loc()

# %% [markdown]
# `after_f_12` loses its number and keeps the underscore inside its hint;
# `x` has no number to lose; `_2` keeps its whole name, since taking off the
# number would leave an empty hint. With no L source the location stays a
# bare `Pos(3, 7)`.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a hand-written parser</p>
#
# A parser generator would read the grammar above almost as it is written.
# But the interesting work of this parser is not the grammar: it is the
# scope rules — every name bound once, a continuation used only in the
# function that binds it — and the building of the term with the Build
# functions as it goes. Both are a few lines each in a hand-written
# recursive-descent parser, which needs at most two tokens of lookahead
# (`tokens[self.i + 1]`, to tell `x = …` from a jump `k(…)`); with a
# generated parser they would be a second pass over its tree, and its
# errors would have to be translated into the L front end's format. It
# would also be a new dependency for a grammar of nine rules.
#
# </div>
#
# Parsing a block builds it with `Seq`, one statement at a time, so that a
# long block costs no Python recursion; only a handler or a function body —
# text in braces — recurses. Scopes are sets updated on entry and exit: a
# handler's parameters leave the scope when its closing brace is read, a
# function body starts with no continuation in scope but its own.

# %%
#| export
class Parser(Parser):
    def block(self) -> Term:
        self.expect("{")
        self.newlines()
        return self.sequence("}")

    def sequence(self, closing: str) -> Term:
        """Statements up to the closing brace (or the end of the text), as one chain."""
        s, bound = Seq(), []
        while True:
            if self.peek(kind="name") and self.tokens[self.i + 1][1] == "=" \
                    and self.tokens[self.i][1] not in _KEYWORDS:
                name, offset = self.name()
                self.i += 1
                prim = self.prim()
                x = s.let(prim, self.hint(name))
                self.register(name, offset, x)
                bound.append(x)
            elif self.accept("cont"):
                name, offset = self.name("a continuation name")
                params = self.params()
                def handler(k, *xs, name=name, offset=offset, params=params):
                    self.register(name, offset, k)
                    for (pname, poffset), x in zip(params, xs):
                        self.register(pname, poffset, x)
                    body = self.block()
                    self.scope.difference_update(xs)
                    return body
                k = s.cont(handler, [self.hint(p) for p, _ in params], self.hint(name))
                bound.append(k)
            else:
                last = self.last()
                self.newlines()
                if closing == "eof":
                    if not self.peek(kind="eof"):
                        raise self.error("expected the end of the text after the last term")
                else:
                    self.expect(closing, "'}' after the block's last term")
                for v in bound:
                    (self.conts if v.is_cont else self.scope).discard(v)
                return s.end(last)
            self.newlines()

    def register(self, name: str, offset: int, var: Var) -> None:
        """Bind a name to a variable made by Build."""
        if name in self.vars:
            raise self.error_at(offset, f"{name} is bound twice (every name must be bound once)")
        self.vars[name] = var
        (self.conts if var.is_cont else self.scope).add(var)

# %% [markdown]
# The last term of a block (the rule `last` of the grammar): a call, a
# `case`, `halt`, or a jump, which is a name followed by `(`.

# %%
#| export
class Parser(Parser):
    def last(self) -> Term:
        if self.accept("call"):
            kind = "direct" if self.accept("direct") else "closure"
            f = self.use()
            args = self.uses()
            self.expect("->")
            k = self.use(cont=True)
            self.expect("/", "'/' and the exception continuation")
            h = self.use(cont=True)
            return apply(f, k, h, *args, kind=kind, loc=self.loc())
        if self.accept("case"):
            x = self.use()
            self.expect("{")
            arms, default = {}, None
            while not self.accept("}"):
                if self.accept("_"):
                    self.expect("->")
                    default = self.use(cont=True)
                else:
                    _, _, offset = self.tokens[self.i]
                    i = self.integer()
                    if i in arms:
                        raise self.error_at(offset, f"case {i} appears twice")
                    self.expect("->")
                    arms[i] = self.use(cont=True)
                if not self.accept(";"):
                    self.expect("}", "';' or '}'")
                    break
            return case(x, arms, default)
        if self.accept("halt"):
            return halt(self.use())
        if self.peek(kind="name") and self.tokens[self.i + 1][1] == "(":
            k = self.use(cont=True)
            args = self.uses()
            if self.accept("raise"):
                if len(args) != 1:
                    raise self.error_at(self.tokens[self.i - 1][2], "a raise passes one value, the exception")
                return apply_cont(k, *args, raises=True, loc=self.loc())
            return apply_cont(k, *args)
        raise self.error("expected a binding, 'cont', or a final term (a jump, call, case or halt)")

# %% [markdown]
# A primitive (the rules `prim` and `value`): a keyword says which, except
# for the forms that start with a variable — a projection, a store, a binary
# operation — and for the constants.

# %%
#| export
class Parser(Parser):
    def prim(self) -> Prim:
        if self.peek(kind="int") or (self.peek("-") and self.tokens[self.i + 1][0] == "int"):
            return const(self.integer())
        if self.peek(kind="string"):
            return const(self.string())
        for word, value in (("true", True), ("false", False)):
            if self.accept(word):
                return const(value)
        if self.accept("("):
            self.expect(")", "')' (the only constant in parentheses is ())")
            return const(())
        if self.accept("tuple"):
            return tuple_(*self.uses())
        if self.accept("closure"):
            code, *environment = self.uses() or [None]
            if code is None:
                raise self.error_at(self.tokens[self.i - 1][2], "a closure needs its code")
            return closure(code, *environment)
        if self.accept("inj"):
            tag_ = self.integer()
            name, _ = self.name("a constructor name")
            return inject(tag_, name, *self.uses())
        if self.accept("external"):
            return external(self.string())
        if self.accept("fun"):
            return self.function()
        if self.accept("tag"):
            return tag(self.use())
        if self.accept("print"):
            return print_(*self.uses())
        if self.accept("fail"):
            message = self.string()
            args = []
            while self.peek(kind="name"):
                args.append(self.use())
            return fail(message, *args, loc=self.loc(), exn=self.raises_to())
        kind, text, _ = self.tokens[self.i]
        if kind == "punct" and by_symbol(text, 1):
            self.i += 1
            return op(by_symbol(text, 1).name, self.use(), loc=self.loc(), exn=self.raises_to())
        if kind == "name" and self.tokens[self.i + 1][1] == "(" and text in PRIMITIVES:
            self.i += 1                                     # a primitive that has no operator
            return op(text, *self.uses(), loc=self.loc(), exn=self.raises_to())
        x = self.use()
        if self.accept("["):
            index = self.integer()
            self.expect("]")
            if self.accept(":="):
                return set_field(index, x, self.use())
            return proj(index, x)
        kind, text, _ = self.tokens[self.i]
        row = by_symbol(text, 2) if kind == "punct" else None
        if row is None:
            raise self.error("expected an operator, '[' or the end of the line")
        self.i += 1
        y = self.use()
        return op(row.name, x, y, loc=self.loc(), exn=self.raises_to())

    def raises_to(self):
        """The continuation a primitive's failure raises to: ` / h`, or nothing."""
        return self.use(cont=True) if self.accept("/") else None

# %% [markdown]
# A function starts a new scope of continuations: those of the enclosing
# function are saved and none is visible inside, which is what makes
# continuations second-class in the text as in the checker.

# %%
#| export
class Parser(Parser):
    def function(self) -> Lambda:
        kind = "direct" if self.accept("direct") else "closure"
        name, offset = self.name("the function's return continuation")
        ename, eoffset = self.name("the function's exception continuation")
        params = self.params()
        saved, self.conts = self.conts, set()
        def body(k, h, *xs):
            self.register(name, offset, k)
            self.register(ename, eoffset, h)
            for (pname, poffset), x in zip(params, xs):
                self.register(pname, poffset, x)
            b = self.block()
            self.scope.difference_update(xs)
            return b
        f = lam(body, [self.hint(p) for p, _ in params], kind, cont=self.hint(name), exn=self.hint(ename))
        self.conts = saved
        return f

# %% [markdown]
# A program: every global is in scope everywhere, even before its
# definition, so `declare_globals` first scans the tokens for the names
# defined at the top level (outside every brace), then the definitions are
# read in order.

# %%
#| export
class Parser(Parser):
    def program(self) -> Program:
        self.newlines(False)
        self.declare_globals()
        prog = self.program_
        while not self.peek(kind="eof"):
            if not (self.peek("public") or self.peek("private") or self.peek("unused")):
                raise self.error("expected a definition: 'public', 'private' or 'unused'")
            visibility = self.tokens[self.i][1]
            self.i += 1
            var = None
            if visibility != "unused":
                name, offset = self.name("the defined name")
                var = self.globals[name]
            self.expect("=")
            if self.accept("do"):
                value = self.block()
            else:
                value = self.prim()
                if not isinstance(value, Value):
                    raise self.error_at(self.tokens[self.i - 1][2],
                                        "a static definition must be a value; use 'do { … }' to compute it")
            prog.define(value, visibility, var)
            self.newlines()
        return prog

    def declare_globals(self) -> None:
        """Every global is in scope in the whole program: find them all first."""
        depth, toks = 0, self.tokens
        for j, (kind, text, _) in enumerate(toks):
            if text in "{}" and kind == "punct":
                depth += 1 if text == "{" else -1
            elif depth == 0 and kind == "name" and text in ("public", "private") \
                    and (j == 0 or toks[j - 1][0] == "newline") and toks[j + 1][0] == "name":
                name, noffset = toks[j + 1][1], toks[j + 1][2]
                if name in self.vars:
                    raise self.error_at(noffset, f"{name} is defined twice")
                v = self.vars[name] = self.globals[name] = Var(self.hint(name))
                self.scope.add(v)

# %% [markdown]
# The entry points pause the garbage collector and raise the recursion limit,
# as chapter 4a's parser does, since only nesting recurses; a text nested
# beyond that limit is an error, not a crash.

# %%
#| export
def parse(text: str, name: str = "<cps>", source: Source = None) -> Program:
    """Read a program printed by show(); source is the L program its @line:col refer to."""
    p = Parser(Source(name, text), source)
    with recursion_limit(NESTING_LIMIT), collector_paused():
        try:
            return p.program()
        except RecursionError:
            raise p.error("the text is nested too deeply") from None


def parse_term(text: str, name: str = "<cps>", source: Source = None) -> Term:
    """Read a term: the statements of a block, without its braces."""
    p = Parser(Source(name, text), source)
    with recursion_limit(NESTING_LIMIT), collector_paused():
        try:
            p.newlines(False)
            return p.sequence("eof")
        except RecursionError:
            raise p.error("the text is nested too deeply") from None

# %% [markdown]
# The program of two definitions, printed, parsed and printed again, gives
# the same text; and the three ways a name can be wrong, each reported where
# it is:

# %%
again = parse(show(square_program))
assert show(again) == show(square_program)
WRONG = ("x_1 = 1\nk_2(x_1)",
         "cont k_1(x_2) {\n  halt x_2\n}\nhalt x_2",
         "cont out_1(r_2) {\n  halt r_2\n}\nf_3 = fun ret_4 exn_5 (x_6) {\n  out_1(x_6)\n}\nout_1(f_3)")
for text in WRONG:
    try:
        parse_term(text)
    except CompileError as e:
        print(e.render())

# %% [markdown]
# One error per text, each where the reader would look for it. In the first,
# `k_2` is never bound. In the second, `x_2` is the parameter of the
# handler, and the `halt` after the handler's closing brace is outside it.
# In the third, `out_1` is bound by a `cont` at the top level and used inside
# the function `f_3`: a continuation cannot cross a `fun`, because it is a
# block of the code that binds it, and `f_3` may run anywhere.
#
# ## Check
#
# Much of the representation is redundant — an uplink repeats a downlink, a
# variable's ring repeats where its occurrences are, its count repeats the
# ring's length — and redundancy is what makes it fast. `check` verifies that
# all of it agrees, and that the term means something:
#
# 1. **Structure**: every field holds what it should (a term, a primitive, an
#    occurrence of the right class); no hole is left by `take`.
# 2. **Uplinks**: every term, primitive and occurrence points at its parent;
#    every variable's `binder` is the node that binds it.
# 3. **Unique binders**: no variable is bound twice.
# 4. **Scope and second-classness**: every occurrence's variable (found
#    through the union-find) is in scope there. A continuation variable
#    occurs only where a continuation is expected — the two continuations of
#    a call, the target of a jump, the arms of a `case`, the exception
#    continuation of an operation that can fail — never as a value (in a
#    tuple, an argument, a closure). A continuation is in scope only inside
#    the function that binds it: continuations are second-class, they never
#    cross a `fun`. Together these say that a handler never escapes: no value
#    and no closure can carry it out of its function. `uncaught` is in scope
#    in the dynamic definitions only, not in functions, which raise to their
#    own exception continuation.
# 5. **Occurrence links**: every occurrence met in the term is in its
#    variable's ring, every ring holds only occurrences of the term, and every
#    count is right.
# 6. **Arity and placement**: a jump passes as many arguments as its
#    continuation has parameters (exactly one to a return or exception
#    continuation, one to the continuations a call names, one in a raise, none
#    to a `case` arm); a function's two continuations are two variables;
#    `case` values are distinct; `halt` appears only in a dynamic
#    definition, outside every function.
# 7. With `closed=True` — the back end's precondition, after closure
#    conversion — **no function has a free variable** other than globals.
#
# The first violation raises `CheckError`, whose message names the place with
# the printer's names (the checker meets variables in the printer's order):
# `in definition f_1, in fun ret_2: x_7 is used out of its scope`.

# %%
#| export
class CheckError(Exception):
    """A broken invariant of a CPS term."""


class Checker:
    def __init__(self, closed: bool = False):
        self.closed = closed
        self.name = Namer()
        self.bound = {}          # variable -> the function (Lambda, or None at top level) binding it
        self.scope = set()       # variables in scope
        self.seen = {}           # variable -> occurrences met
        self.occs = set()        # ids of every occurrence met

    def fail(self, node, message: str):
        where = self.where(node)
        raise CheckError(f"{where}: {message}" if where else message)

    def bind(self, node, var, cont: bool, function) -> None:
        if not isinstance(var, Var) or var.is_cont != cont:
            self.fail(node, f"a {'continuation' if cont else 'variable'} was expected as binder, not {var!r}")
        if var in self.bound:
            self.fail(node, f"{self.name(var)} is bound twice")
        if var.binder is not node:
            self.fail(node, f"the binder link of {self.name(var)} does not point at its binding")
        self.name(var)                   # named where the printer names it: at its binding
        self.bound[var] = function
        self.scope.add(var)

# %% [markdown]
# A `Checker` remembers, for every variable bound so far, the function that
# binds it (`None` at the top level), which variables are in scope, and which
# occurrences it has met. `bind` checks rules 2 and 3 where a variable is
# bound. `occurrence` checks rules 1, 2 and 4 where one is used — a
# continuation, or with `closed` any local variable, must belong to the
# function it is used in — and `arity` rule 6 for a jump.

# %%
#| export
class Checker(Checker):
    def occurrence(self, node, o, cont: bool, function) -> None:
        if not isinstance(o, Occ) or o.is_cont != cont:
            self.fail(node, f"a {'continuation' if cont else 'variable'} occurrence was expected, not {o!r}")
        if o.enclosing is not node:
            self.fail(node, "an occurrence's uplink does not point at the node holding it")
        if o.next is None:
            self.fail(node, "an occurrence that was deleted is still in the term")
        var = o.var
        name = self.name(var)
        if var not in self.scope:
            self.fail(node, f"{name} is used out of its scope")
        owner = self.bound[var]
        if owner is not function and (cont or (self.closed and not is_global(var))):
            what = "continuation" if cont else "variable"
            self.fail(node, f"{name} is a free {what} of the function (bound outside it)")
        self.seen[var] = self.seen.get(var, 0) + 1
        self.occs.add(id(o))

    def arity(self, node, k: Var, n: int) -> None:
        b = k.binder                     # a function's two continuations, and uncaught, take one value
        expected = 1 if type(b) is Program or type(b) is Lambda and (b.cont is k or b.exn is k) \
            else len(b.params)
        if expected != n:
            self.fail(node, f"{self.name(k)} expects {expected} argument(s), and is given {n}")

# %% [markdown]
# A message says where the violation is: `where` climbs the uplinks from the
# node, naming each definition, function and handler it passes.

# %%
#| export
class Checker(Checker):
    def where(self, node) -> str:
        """The chain of enclosing definitions, functions and handlers of a node, for a message."""
        parts, prev, steps = [], None, 0
        while node is not None and steps < 1_000_000:
            t = type(node)
            if t is Definition:
                parts.append("in definition " + (self.name(node.var) if node.var else "(unused)"))
            elif t is Lambda:
                parts.append(f"in fun {self.name(node.cont)}")
            elif t is LetCont and prev is not None and prev is node.handler:
                parts.append(f"in cont {self.name(node.cont)}")
            prev, node, steps = node, getattr(node, "enclosing", None), steps + 1
        return ", ".join(reversed(parts))

# %% [markdown]
# A program binds all its globals first (they are in scope everywhere), then
# checks each definition: its visibility agrees with its variable, and it
# holds a static value or a dynamic term, not both.

# %%
#| export
class Checker(Checker):
    def program(self, prog: Program) -> None:
        u = prog.uncaught
        if not isinstance(u, ContVar) or type(u.binder) is not Program:
            raise CheckError("the program's uncaught must be a continuation variable bound by a program")
        self.bound[u] = None                 # the top level's exception continuation
        self.scope.add(u)
        for d in prog.definitions:
            if type(d) is not Definition:
                raise CheckError(f"not a definition: {d!r}")
            if (d.var is None) != (d.visibility == "unused") or \
                    d.visibility not in ("public", "private", "unused"):
                self.fail(d, f"visibility {d.visibility} with {'no' if d.var is None else 'a'} variable")
            if d.var is not None:
                if d.var in self.bound:
                    self.fail(d, f"{self.name(d.var)} is bound twice")
                if d.var.binder is not d:
                    self.fail(d, "the binder link of a global does not point at its definition")
                self.bound[d.var] = None             # in scope everywhere; named where printed
                self.scope.add(d.var)
        for d in prog.definitions:
            self.definition(d)

    def definition(self, d: Definition) -> None:
        if d.var is not None:
            self.name(d.var)
        if d.enclosing is not None:
            self.fail(d, "a definition's uplink must be empty")
        if (d.value is None) == (d.body is None):
            self.fail(d, "a definition holds either a static value or a dynamic term")
        if d.value is not None:
            if not isinstance(d.value, Value):
                self.fail(d, f"a static definition holds a value, not {d.value!r}")
            self.visit(d.value, d, None)
        else:
            self.visit(d.body, d, None)

# %% [markdown]
# The walk itself keeps a stack of work, like `walk`, with two more kinds of
# item: "bind these variables now" and "these variables leave the scope now".
# A `LetPrim`'s variable enters the scope after its primitive is checked (a
# `LetPrim` is not recursive); a `LetCont`'s continuation enters before its
# handler (it is); parameters leave when their handler or body is done.

# %%
#| export
class Checker(Checker):
    def visit(self, root, parent, function) -> None:
        work = [("node", root, parent, function)]
        while work:
            item = work.pop()
            if item[0] == "unbind":
                self.scope.difference_update(item[1])
                continue
            if item[0] == "bind":
                _, node, var, function = item
                self.bind(node, var, False, function)
                continue
            _, node, parent, function = item
            if node is None:
                self.fail(parent, "a hole: a part of this term was taken out and not replaced")
            if not isinstance(node, Node) or isinstance(node, Definition):
                self.fail(parent, f"not a term or primitive: {node!r}")
            if node.enclosing is not parent:
                self.fail(parent, f"the uplink of a {type(node).__name__} does not point at its parent")
            t = type(node)
            if t is LetPrim:
                if not isinstance(node.prim, Prim):
                    self.fail(node, f"a binding holds a primitive, not {node.prim!r}")
                self.term_field(node, "body")
                self.name(node.var)              # the printer writes "x = …" before the primitive
                work += [("unbind", [node.var]), ("node", node.body, node, function),
                         ("bind", node, node.var, function), ("node", node.prim, node, function)]
            elif t is LetCont:
                self.term_field(node, "handler")
                self.term_field(node, "body")
                self.bind(node, node.cont, True, function)
                for x in node.params:
                    self.bind(node, x, False, function)
                work += [("unbind", [node.cont]), ("node", node.body, node, function),
                         ("unbind", list(node.params)), ("node", node.handler, node, function)]
            elif t is Lambda:
                if node.kind not in ("closure", "direct"):
                    self.fail(node, f"a function kind is closure or direct, not {node.kind!r}")
                self.term_field(node, "body")
                self.bind(node, node.cont, True, node)
                self.bind(node, node.exn, True, node)      # bound twice if it is the same as cont
                for x in node.params:
                    self.bind(node, x, False, node)
                work += [("unbind", [node.cont, node.exn, *node.params]), ("node", node.body, node, node)]
            else:
                self.leaf(node, function)

# %% [markdown]
# The work items are pushed in the reverse of the order they run, since the
# stack pops the last first. For a `LetPrim` they run: check the primitive,
# bind the variable, check the body, and take the variable out of the
# scope. For a `LetCont` the continuation and its parameters are bound at
# once, the handler is checked, the parameters leave the scope, then the
# body is checked with only the continuation still in scope. A `Lambda`
# starts a new `function`: the owner that `occurrence` compares with, so a
# continuation of the outer function used inside it is caught.
#
# The nodes without sub-terms — terminators and primitives — are checked by
# `leaf`: the continuations a terminator names are continuation occurrences,
# the others ordinary ones; the values of a `case` are distinct and sorted;
# `halt` is outside every function; and every jump has the right arity.

# %%
#| export
class Checker(Checker):
    def term_field(self, node, field: str) -> None:
        part = getattr(node, field)
        if part is not None and not isinstance(part, Term):
            self.fail(node, f"the {field} of a {type(node).__name__} must be a term, not {part!r}")

    def leaf(self, node, function) -> None:
        """A node without sub-terms: check its occurrences, and the terminators' rules."""
        t = type(node)
        conts = ()
        if t is ApplyCont:
            conts = (node.cont,)
            if node.raises and len(node.args) != 1:
                self.fail(node, "a raise passes one value, the exception")
        elif t is Apply:
            conts = (node.cont, node.exn)
            if node.kind not in ("closure", "direct"):
                self.fail(node, f"a call kind is closure or direct, not {node.kind!r}")
        elif t is Case:
            conts = tuple(k for _, k in node.arms) + ((node.default,) if node.default else ())
            values = [i for i, _ in node.arms]
            if any(type(i) is not int for i in values) or values != sorted(set(values)):
                self.fail(node, "the values of a case must be distinct integers, in order")
        elif t is Halt and function is not None:
            self.fail(node, "halt inside a function (a function returns through its continuation)")
        elif t is Op or t is Fail:
            conts = () if node.exn is None else (node.exn,)
            if t is Op and node.exn is not None and PRIMITIVES[node.op].fails is None:
                self.fail(node, f"the primitive {node.op} cannot fail, and has an exception continuation")
        for o in node.occs():
            self.occurrence(node, o, any(o is k for k in conts), function)
        if t is ApplyCont:
            self.arity(node, node.cont.var, len(node.args))
        elif t is Apply:
            self.arity(node, node.cont.var, 1)
            self.arity(node, node.exn.var, 1)
        elif t is Case:
            for k in conts:
                self.arity(node, k.var, 0)

# %% [markdown]
# Last, rule 5, once the walk is over and every occurrence has been met:
# each variable's count and ring agree with what the walk found. `check`
# puts it all together, for a program, a definition or a term.

# %%
#| export
class Checker(Checker):
    def links(self) -> None:
        """Rings and counts agree with the occurrences met."""
        for var in self.bound:
            met = self.seen.get(var, 0)
            if var.count != met:
                self.fail(var.binder, f"{self.name(var)} counts {var.count} occurrence(s), "
                                      f"and the term has {met}")
            n = 0
            for o in occurrences(var):
                n += 1
                if id(o) not in self.occs or n > met:
                    self.fail(var.binder, f"the ring of {self.name(var)} holds an occurrence "
                                          "that is not in the term")
            if n != met:
                self.fail(var.binder, f"the ring of {self.name(var)} misses occurrences")


def _uncaught_of(root) -> ContVar:
    """The uncaught continuation a definition or term outside its program raises to (or a new one)."""
    for v in free_variables(root):
        if v.is_cont and type(v.binder) is Program:
            return v
    return Program().uncaught


def check(root, closed: bool = False) -> None:
    """Verify every invariant of a program, definition or term; CheckError at the first violation."""
    c = Checker(closed)
    with collector_paused():
        if type(root) is Program:
            c.program(root)
        elif type(root) is Definition:
            c.program(Program([root], _uncaught_of(root)))
        else:
            u = _uncaught_of(root)
            c.bound[u], c.scope = None, {u}      # a term alone may raise to its program's uncaught
            c.visit(root, root.enclosing, None)
        c.links()

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: one checker, run when asked</p>
#
# The Change functions could check the invariants themselves, after every
# change. But an invariant such as scope is a property of the whole term,
# and `check` walks all of it: a pass that makes thousands of small changes
# would walk the program thousands of times, a quadratic cost. And, as the
# graph compaction below shows, a term may rightly be invalid *between* two
# steps of one rewrite. So the Change functions keep only the links right,
# at a cost that depends only on what they touch — constant for
# `substitute`, `take`, `redirect` and `swap_prim`; the size of what is
# thrown away for `delete`, `replace` and `delete_binding`; and for `move`,
# also the path from `dest` up to the root, which it climbs to refuse
# moving a term into itself — and `check` is a separate, linear function that the
# tests (and a curious reader) run after a pass, or after each step while
# debugging one.
#
# </div>
#
# The program of two definitions passes, including the stricter check of
# closed functions (it has no nested function). Two texts that parse but
# break a rule do not: a jump with one argument to a continuation of two
# parameters, and a nested function that uses a variable of the enclosing
# one — which is fine before closure conversion and not after:

# %%
check(square_program, closed=True)
ARITY = "cont k_1(x_2, y_3) {\n  halt x_2\n}\none_4 = 1\nk_1(one_4)"
NESTED = """private f_1 = fun ret_2 exn_3 (x_4) {
  g_5 = fun ret_6 exn_7 (y_8) {
    z_9 = x_4 + y_8
    ret_6(z_9)
  }
  ret_2(g_5)
}
"""
for program, closed in ((parse_term(ARITY), False), (parse(NESTED), False), (parse(NESTED), True)):
    try:
        check(program, closed=closed)
        print(f"check(closed={closed}) passes")
    except CheckError as e:
        print(f"check(closed={closed}): CheckError:", e)

# %% [markdown]
# `check(square_program, closed=True)` printed nothing: it passed. The first
# message has no "in definition …" before it, because the term was parsed
# with `parse_term` and sits in no definition. The last one names the whole
# chain from the definition down to the inner function: `x_4` is bound by
# the outer `fun ret_2` and used by the inner `fun ret_6`. Before closure
# conversion that is an ordinary nested function; after it, it is a bug.
#
# ## Interpret
#
# The interpreter is the meaning of CPS terms, and the judge of every later
# pass: a pass is right when the interpreter gives the same output before and
# after it. It translates each term once into Python closures (like
# [chapter 4b](04b_meaning.ipynb)'s interpreter) and runs them on a *trampoline*: running a block returns
# the next block to run with its environment, instead of calling it, so a
# loop or a chain of tail calls never grows Python's stack.
#
# - An **activation** of a function is a dictionary from variables to values.
#   A continuation bound by `cont` is its compiled handler, its parameters
#   and the activation it was made in: jumping to it stores the arguments
#   in that activation and runs the
#   handler. That is exactly why continuations need no heap in compiled code:
#   they only ever run in the activation that made them.
# - A **function value** copies the values of its free variables when it is
#   created (a flat closure), so a function made in a loop keeps the values of
#   *that* iteration. Calling it makes a new activation from that copy, its
#   parameters, and its two continuations: the call's return and exception
#   continuations.
# - After closure conversion ([chapter 8](08_closure.ipynb)) a function
#   value is a `ClosureRecord`, a tuple whose field 0 is its code; calling it
#   calls that code with the record itself as first argument. The
#   interpreter accepts both forms, so it can run a program before and after
#   that chapter.
# - A call whose two continuations are the caller's own is a **tail call**:
#   the new activation replaces the caller's at the same depth. Any other call
#   goes one deeper — a call that raises to a local handler too, since the
#   handler must still be there when the callee raises; past `stack_limit`
#   the program stops with L's "stack overflow" runtime error at the call.
# - A **raise** (`h(e) raise @3:5`) is a jump to the handler `h`, which
#   first records its *raise site* — the report it would make if nothing
#   catches it — in the interpreter (`Interpreter.site`). A jump that
#   passes an exception on without `raise` leaves the site alone, so an
#   exception that goes through handlers that do not want it is still
#   reported where it was raised. An operation that fails (`/` by zero, an
#   unmatched `match`, `assert`) raises its predefined exception to the
#   continuation it names, with its runtime error (`division by zero`)
#   as its site; inside a
#   block of bindings, that jump is made by a Python exception, `Raised`,
#   which the trampoline catches.
# - **`uncaught`**, the program's exception continuation, is a continuation
#   whose code reports the last raise site as a runtime error: the
#   interpreter raises `RunError` (or `Stop`), as for any runtime error.
#   A failing operation whose continuation is `uncaught` reports at once,
#   exactly as before exceptions existed.
#
# Runtime values: Python `int`, `bool`, `str`, `()` for Unit, a `list` for a
# tuple (lists, because `SetField` writes into cells), `Injected` for an
# injection, `Function` for a function, `ClosureRecord` (a list) for a
# closure.

# %%
#| export
import sys
from lcompiler.errors import RunError
from lcompiler.primitives import wrap

STACK_LIMIT = 100_000     # nested non-tail calls before "stack overflow"


class Injected:
    __slots__ = ("tag", "name", "fields")

    def __init__(self, tag, name, fields):
        self.tag, self.name, self.fields = tag, name, fields


class Function:
    __slots__ = ("code", "params", "cont", "exn", "captured")

    def __init__(self, code, params, cont, exn, captured):
        self.code, self.params, self.cont, self.exn, self.captured = code, params, cont, exn, captured


class ClosureRecord(list):
    """A closure at run time: its code, then its environment."""
    __slots__ = ()


class Continuation:
    __slots__ = ("code", "params", "env")

    def __init__(self, code, params, env):
        self.code, self.params, self.env = code, params, env


class Raised(Exception):
    """A primitive failed inside a block: the trampoline jumps to its exception continuation."""

    def __init__(self, cont: Continuation, value):
        self.cont, self.value = cont, value

# %% [markdown]
# `Injected`, `Function` and `Continuation` are the run-time forms of an
# injection, a function value and a continuation; `ClosureRecord` is a
# `list` (so that projections and stores work on it as on any tuple) whose
# class says it is a closure. `STACK_LIMIT` bounds the depth of non-tail
# calls, counted by the interpreter, not by Python.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a trampoline, not a recursive evaluator</p>
#
# The simplest interpreter is a recursive `eval(term, env)`. In CPS, though,
# *every* step is a jump: a loop of a thousand iterations is a thousand
# jumps, and a recursive evaluator would nest a Python call for each, so
# Python's recursion limit would stop programs that the compiled code runs in
# constant stack. With a trampoline, each block returns the next block to
# run instead of calling it, and the loop in `trampoline` runs them one after
# another: Python's stack stays flat, and the depth the interpreter counts is
# only that of real, non-tail L calls — the depth that uses the machine
# stack in compiled code. Translating each term into Python closures once,
# before running, means a loop body is examined once, not at each iteration.
#
# </div>
#
# A runtime error of a program converted from L carries the L source's
# `Span`, and is chapter 4b's `RunError`, rendered with the source line; one
# of a CPS text written by hand only has a `Pos`, and is a `Stop`.
# `show_value` prints a value as L's `print` does, strings quoted only
# inside a structure:

# %%
#| export
class Stop(Exception):
    """A runtime error at a location of a parsed CPS text, which has no L source to show."""

    def __init__(self, message: str, loc: Pos):
        super().__init__(f"{loc.line}:{loc.col}: runtime error: {message}" if loc else
                         f"runtime error: {message}")
        self.message, self.loc = message, loc


def runtime_error(message: str, loc):
    return RunError(message, loc) if isinstance(loc, Span) else Stop(message, loc)


def show_value(v, nested: bool = False) -> str:
    """A value as L's print writes it."""
    if v is True or v is False:
        return "true" if v else "false"
    t = type(v)
    if t is int:
        return str(v)
    if t is str:
        return quote(v) if nested else v
    if t is list or t is tuple:
        return "(" + ", ".join(show_value(x, True) for x in v) + ")"
    if t is Injected:
        return v.name + ("(" + ", ".join(show_value(x, True) for x in v.fields) + ")" if v.fields else "")
    if t is Function or t is ClosureRecord:
        return "<function>"
    raise TypeError(f"not an L value: {v!r}")

# %% [markdown]
# `show_value` on a tuple that holds a string and a list, and on a bare
# string:

# %%
show_value([1, "one", Injected(1, "Cons", [True, Injected(0, "Nil", [])])]), show_value("one")

# %% [markdown]
# Inside the tuple, `"one"` keeps its quotes; alone it is printed bare, as
# `print("one")` in L prints it. `Nil`, a constructor without fields, has
# no parentheses.
#
# The interpreter translates each primitive, once, into a Python function of
# the activation. `get` makes the function that reads one occurrence: a
# dictionary lookup for a local, and for a global a lookup that fails
# cleanly when its definition has not run yet.

# %%
#| export
class Interpreter:
    def __init__(self, out=None, stack_limit: int = STACK_LIMIT, externals=None):
        self.out = sys.stdout if out is None else out
        self.stack_limit = stack_limit
        self.externals = externals or {}
        self.globals = {}
        self.free = {}          # Lambda -> its free local variables
        self.site = None        # the last raise's site: (the runtime error's text, its location)
        x = Var("e")
        self.uncaught = Continuation(self.report, [x], {})
        self.exception = x

    def report(self, env):
        """The code of the uncaught continuation: the runtime error of the raise that got here."""
        text, loc = self.site if self.site is not None else \
            (f"uncaught exception {show_value(env[self.exception], True)}", None)
        raise runtime_error(text, loc)

    def get(self, o: Occ):
        """A function reading an occurrence's value from an activation."""
        v = o.var
        if is_global(v):
            g = self.globals
            def read_global(env):
                try:
                    return g[v]
                except KeyError:
                    raise runtime_error(f"the definition of {v.hint} has not run yet", None) from None
            return read_global
        return lambda env: env[v]

# %% [markdown]
# Values first: each makes a new Python object from the values of its
# fields. A `Lambda` is a function value, made below.

# %%
#| export
class Interpreter(Interpreter):
    def prim(self, p):
        t = type(p)
        if t is Const:
            value = p.value
            return lambda env: value
        if t is TupleValue:
            gets = [self.get(o) for o in p.fields]
            return lambda env: [g(env) for g in gets]
        if t is MakeClosure:
            gets = [self.get(o) for o in p.fields]
            return lambda env: ClosureRecord([g(env) for g in gets])
        if t is Inject:
            gets, tag_, name = [self.get(o) for o in p.fields], p.tag, p.name
            return lambda env: Injected(tag_, name, [g(env) for g in gets])
        if t is External:
            name, table = p.name, self.externals
            def ext(env):
                if name not in table:
                    raise runtime_error(f"unknown external {name}", None)
                return table[name]
            return ext
        if t is Lambda:
            return self.function(p)
        return self.primitive(p)

# %% [markdown]
# Then the other primitives: reading a field or a tag, arithmetic
# (`operation`, next), storing into a cell, printing and failing.

# %%
#| export
class Interpreter(Interpreter):
    def primitive(self, p):
        """A primitive that is not a value: a read, an operation, or an effect."""
        t = type(p)
        if t is Proj:
            g, i = self.get(p.arg), p.index
            def projection(env):
                v = g(env)
                return v.fields[i] if type(v) is Injected else v[i]
            return projection
        if t is Tag:
            g = self.get(p.arg)
            return lambda env: g(env).tag
        if t is Op:
            return self.operation(p)
        if t is SetField:
            gt, gv, i = self.get(p.target), self.get(p.value), p.index
            def store(env):
                gt(env)[i] = gv(env)
                return ()
            return store
        if t is Print:
            gets, out = [self.get(o) for o in p.args], self.out
            def print_values(env):
                out.write(" ".join(show_value(g(env)) for g in gets) + "\n")
                return ()
            return print_values
        if t is Fail:
            gets, message, loc = [self.get(o) for o in p.args], p.message, p.loc
            h = None if p.exn is None else p.exn.var
            def failure(env):
                text = " ".join([message] + [show_value(g(env), True) for g in gets])
                self.raise_predefined(env, h, text, loc, message)
            return failure
        raise TypeError(f"not a primitive: {p!r}")

# %% [markdown]
# Arithmetic is L's — 64-bit, wrapping, and C's division — because it is
# the table's: an operation applies its row's `operation`, and `wrap`s the
# result if the row says so. A row that can fail is tested first, and its
# failure — a division by zero — raises `DivisionByZero` to the
# operation's exception continuation; with none, or with `uncaught`, it
# is a runtime error at the operation's location.

# %%
#| export
class Interpreter(Interpreter):
    def raise_predefined(self, env, h, text: str, loc, message: str = None):
        """A primitive fails: stop with the runtime error text at loc if h is missing or is uncaught,
        else record the raise site and raise the predefined exception to h."""
        c = None if h is None else env[h]
        if c is None or c is self.uncaught:
            raise runtime_error(text, loc)
        self.site = (text, loc)
        tag_, name = PREDEFINED[message or text]
        raise Raised(c, Injected(tag_, name, []))

    def operation(self, p: Op):
        row, gets, loc = PRIMITIVES[p.op], [self.get(o) for o in p.args], p.loc
        f, wraps = row.operation, row.wraps
        if row.fails:
            failure, h = row.fails, (None if p.exn is None else p.exn.var)
            def checked(env):
                values = [g(env) for g in gets]
                if failure.happens(values):
                    self.raise_predefined(env, h, failure.message, loc)
                return wrap(f(*values)) if wraps else f(*values)
            return checked
        if len(gets) == 1:
            g = gets[0]
            if wraps:
                return lambda env: wrap(f(g(env)))
            return lambda env: f(g(env))
        ga, gb = gets
        if wraps:
            return lambda env: wrap(f(ga(env), gb(env)))
        return lambda env: f(ga(env), gb(env))

# %% [markdown]
# The primitive `a + b` of the section on Build, translated once, run in an
# activation where `a` is 20 and `b` is 22; and a division by zero at the
# location 1:3:

# %%
interpreter = Interpreter()
print(interpreter.prim(plus)({a: 20, b: 22}))
try:
    interpreter.prim(op("/", a, b, loc=Pos(1, 3)))({a: 1, b: 0})
except Stop as e:
    print(e)

# %% [markdown]
# The first line is the sum, 42. The second is a `Stop`, not a `RunError`:
# the location is a bare `Pos`, since no L source is involved, so the
# message starts with `1:3:` and has no file name or source line.
#
# Terms. A block — a chain of `LetPrim`s and `LetCont`s ending in a
# terminator — is compiled into a list of steps and a final function; the
# chain is followed with a loop, so only the nesting of handlers and function
# bodies recurses during compilation. A terminator returns the pair (next
# code, activation) to the trampoline, or `(None, value)` for `halt`.

# %%
#| export
class Interpreter(Interpreter):
    def block(self, term):
        steps = []
        while type(term) in (LetPrim, LetCont):
            if type(term) is LetPrim:
                steps.append((term.var, self.prim(term.prim)))
            else:
                steps.append((term.cont, self.continuation(term)))
            term = term.body
        last = self.terminator(term)
        if not steps:
            return last
        def run(env):
            for var, compute in steps:
                env[var] = compute(env)
            return last(env)
        return run

    def continuation(self, t: LetCont):
        params = t.params
        cell = []                                    # the handler, compiled after the closure exists
        def make(env):
            return Continuation(cell[0], params, env)
        cell.append(self.block(t.handler))
        return make

    def function(self, lam_: Lambda):
        free = [v for v in free_variables(lam_) if not v.is_cont and not is_global(v)]
        body = self.block(lam_.body)
        params, cont, exn = lam_.params, lam_.cont, lam_.exn
        return lambda env: Function(body, params, cont, exn, {v: env[v] for v in free})

# %% [markdown]
# A terminator becomes a function that returns the next block to run and
# its activation. A jump stores its arguments in the activation of the
# continuation — reading them all before writing any, since a loop may pass
# its parameters to itself in another order; a `case` picks the
# continuation; `halt` ends the trampoline.

# %%
#| export
class Interpreter(Interpreter):
    def terminator(self, t):
        if type(t) is ApplyCont and t.raises:
            k, g, loc = t.cont.var, self.get(t.args[0]), t.loc
            def raise_(env):
                c, value = env[k], g(env)
                self.site = (f"uncaught exception {show_value(value, True)}", loc)
                c.env[c.params[0]] = value
                return c.code, c.env
            return raise_
        if type(t) is ApplyCont:
            k, gets = t.cont.var, [self.get(o) for o in t.args]
            def jump(env):
                c = env[k]
                target = c.env
                values = [g(env) for g in gets]          # all read before any is written
                for x, v in zip(c.params, values):
                    target[x] = v
                return c.code, target
            return jump
        if type(t) is Apply:
            return self.call(t)
        if type(t) is Case:
            g, table = self.get(t.scrutinee), {i: k.var for i, k in t.arms}
            default = None if t.default is None else t.default.var
            def branch(env):
                k = table.get(g(env), default)
                if k is None:
                    raise runtime_error("no case for the value", None)
                c = env[k]
                return c.code, c.env
            return branch
        if type(t) is Halt:
            g = self.get(t.arg)
            return lambda env: (None, g(env))
        raise TypeError(f"not a term: {t!r}")

# %% [markdown]
# A call makes the callee's activation: the values it captured, its
# parameters, and its two continuations bound to the two the call names.
# Whether the call is a tail call is decided once, when it is
# translated.

# %%
#| export
class Interpreter(Interpreter):
    def call(self, t: Apply):
        gf, gets, k, h, loc = self.get(t.func), [self.get(o) for o in t.args], t.cont.var, t.exn.var, t.loc
        tail = type(k.binder) is Lambda and k.binder.cont is k and k.binder.exn is h   # both its own
        limit = self.stack_limit
        def call(env):
            f = gf(env)
            args = [g(env) for g in gets]
            if type(f) is ClosureRecord:            # (code, environment…)
                f, args = f[0], [f] + args
            if type(f) is not Function:
                raise runtime_error("this is not a function", loc)
            new = dict(f.captured)
            for x, a in zip(f.params, args):
                new[x] = a
            new[f.cont] = env[k]
            new[f.exn] = env[h]
            depth = env[None] if tail else env[None] + 1
            if depth > limit:
                raise runtime_error("stack overflow: the program nested calls too deeply", loc)
            new[None] = depth
            return f.code, new
        return call

# %% [markdown]
# A call's return continuation is a `Continuation` of the caller's
# activation, stored under the callee's return-continuation variable; so
# `ret(x)` in the callee is an ordinary jump that lands in the caller, and
# `exn(e)` the same for its exception continuation. The
# activation's depth is stored under the key `None`.
#
# Running a program: every static value is made first — functions first, so
# that a static tuple may hold any function — then each dynamic definition
# runs, top to bottom, and its `halt` value becomes the global's value.

# %%
#| export
class Interpreter(Interpreter):
    def run(self, prog: Program) -> dict:
        with recursion_limit(NESTING_LIMIT):
            code = [(d, self.prim(d.value) if d.value is not None else self.block(d.body))
                    for d in prog.definitions]
        order = sorted(range(len(code)), key=lambda i: type(code[i][0].value) is not Lambda)
        for i in order:
            d, c = code[i]
            if d.value is not None:
                self.store(d, c({None: 0}))
        try:
            for d, c in code:
                if d.body is not None:
                    self.store(d, self.trampoline(c, {None: 0, prog.uncaught: self.uncaught}))
        finally:
            self.out.flush()
        return self.globals

    def store(self, d: Definition, value) -> None:
        if d.var is not None:
            self.globals[d.var] = value

    @staticmethod
    def trampoline(code, env):
        while True:
            try:
                while code is not None:
                    code, env = code(env)
                return env
            except Raised as r:                     # a primitive failed: jump to its handler
                c = r.cont
                c.env[c.params[0]] = r.value
                code, env = c.code, c.env


def run(prog: Program, out=None, stack_limit: int = STACK_LIMIT) -> dict:
    """Run a program: its output goes to out (stdout); returns the globals' values.
    A runtime error is a RunError (or Stop, for a parsed text without its L source)."""
    return Interpreter(out, stack_limit).run(prog)


def evaluate(term: Term, out=None):
    """The value a closed term halts with."""
    interpreter = Interpreter(out)
    with recursion_limit(NESTING_LIMIT):
        code = interpreter.block(term)
    env = {None: 0}
    for v in free_variables(term):
        if v.is_cont:                      # the exception continuation of the top: uncaught
            env[v] = interpreter.uncaught
    return interpreter.trampoline(code, env)

# %% [markdown]
# The term `a * b` of the section on Change halts with 42; the program of
# two definitions prints 49, and its globals afterwards are `square`, a
# function:

# %%
print(evaluate(term))
{v.hint: show_value(value) for v, value in run(square_program).items()}

# %% [markdown]
# `42` is the value the term of the section on Change halts with (`6 * 7`);
# `49` is printed by the program's own `print`. The dictionary holds one
# global only: the `unused` definition has no variable, so its value, the
# `()` of its `print`, is not kept.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: flat closures, copied when the function is made</p>
#
# A function value could instead keep a pointer to the activation that made
# it, and look its free variables up there when it runs — a *linked*
# environment, with nothing copied. Here that would be wrong, not merely
# slower: a jump to a loop's continuation stores the new values of the loop
# parameters into the *same* activation (`target[x] = v` in `jump`), so a
# function made in one iteration would see the values of a later one.
# Copying the free variables when the function is made gives it the values
# of its own iteration, which is what L means; it is also what closure
# conversion ([chapter 8](08_closure.ipynb)) does in compiled code, where a
# closure is a tuple of copied values.
#
# </div>
#
# ## A picture of a term
#
# Flambda2's post draws `map` as nested boxes: each continuation is a block
# of code, boxes nest as scopes do (a variable bound in an outer box is
# visible in the inner ones), and arrows are the jumps. `diagram` draws the
# same picture of any printed term, as an SVG image: a box per function
# (blue), per continuation handler (yellow) and per dynamic definition
# (grey); an arrow from every jump, `case` arm, and continuation that a
# call (or an operation that can fail) names, to that continuation when a
# `cont` of the picture binds it — red when the jump is inside the box it
# targets, so that it goes back to the start of code it is part of (a
# loop), green otherwise. It works from the printed text, so it shows
# exactly what `show` shows.

# %%
#| export
from html import escape as _escape

_HEADER = re.compile(r"\s*(?:(cont) (\w+)\(|(?:public|private|unused)\b.*= (do|fun)\b|\w+ = (fun)\b)")
_TARGETS = re.compile(r"-> (\w+)|^\s*(\w+)\(| / (\w+)")   # a jump, and a call's two continuations


def _scopes(lines: list) -> tuple:
    """The boxes of a printed term — (first line, last line, indentation, kind, depth) for each
    function, handler and dynamic definition — and where each continuation is bound."""
    boxes, open_, heads = [], [], {}
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if line.endswith("{") and m:
            kind = "cont" if m.group(1) else "fun" if (m.group(3) == "fun" or m.group(4)) else "do"
            open_.append((i, len(line) - len(line.lstrip()), kind, len(open_)))
            if m.group(2):
                heads[m.group(2)] = (i, len(open_) - 1)
        elif line.strip() == "}" and open_:
            start, indent, kind, depth = open_.pop()
            boxes.append((start, i, indent, kind, depth))
    return boxes, heads


def _jumps(lines: list, heads: dict) -> list:
    """The arrows: (line of the jump, line of the target's header, its depth, length of the line)."""
    arrows = []
    for i, line in enumerate(lines):
        if line.rstrip().endswith("{"):
            continue
        body = line.strip()
        found = [m.group(1) or m.group(2) or m.group(3) for m in _TARGETS.finditer(line)]
        if body.startswith("case"):
            found = re.findall(r"-> (\w+)", body)
        for name in found:
            if name in heads:
                arrows.append((i, *heads[name], len(line)))
    return arrows

# %% [markdown]
# The scopes of the seed's loop — one box, the handler of `k_2`, on lines
# 1 to 4 of its text (counting from 0) — and its two jumps, from lines 3
# and 5, both to that header:

# %%
loop_lines = show(loop).rstrip("\n").split("\n")
loop_boxes, loop_heads = _scopes(loop_lines)
loop_boxes, _jumps(loop_lines, loop_heads)

# %% [markdown]
# Each box is (first line, last line, indentation, kind, depth of nesting),
# and each arrow (line of the jump, line of the target's header, depth,
# length of the jump's line), so the box `(1, 4, 0, 'cont', 0)` spans
# `cont k_2(x_3) {` to its `}`. The arrow from line 3 (`  k_2(y_4)`) goes
# back up to line 1, the loop; the one from line 5 (`k_2(two_1)`) also ends
# on line 1, above it. Both jump lines are 10 characters long: the length
# says where an arrow starts, just after the end of its line. The first
# arrow will be red, since its jump lies inside the box it targets (a
# loop); the second green, since it enters the box from outside.
#
# The drawing is then a rectangle per box, a line of text per line, and a
# path per arrow through a gutter on the right, one lane per arrow. Two
# options serve the later chapters: `marks` colours the names of some
# variables (chapter 8 shows a function's free variables that way), and a
# `title` makes the picture stand alone — it carries its description and a
# white card of its own, so that it reads on a dark page too.

# %%
#| export
def diagram(node, width_chars: int = None, *, marks: dict = None, title: str = None) -> str:
    """An SVG picture of a program, definition or term: scopes as boxes, jumps as arrows.
    marks: {variable: colour} for names to colour; title: a description, and a white card."""
    printer = _print(node)
    lines = printer.lines
    ch, lh, left = 7.2, 17, 8                           # character width, line height, margin
    text_w = max(len(l) for l in lines) if width_chars is None else width_chars
    boxes, heads = _scopes(lines)
    arrows = _jumps(lines, heads)
    gutter = left + text_w * ch + 16
    width = gutter + 14 * len(arrows) + 24
    height = lh * len(lines) + 12
    fill = {"fun": "#dbeafe", "cont": "#fef9c3", "do": "#f1f5f9"}
    stroke = {"fun": "#3b82f6", "cont": "#ca8a04", "do": "#64748b"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
           f'font-family="monospace" font-size="12">',
           '<defs><marker id="a" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
           '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>']
    if title is not None:
        out[0] = out[0][:-1] + ' fill="#0f172a">'
        out.insert(1, f'<title>{_escape(title)}</title>')
        out.append(f'<rect width="{width:.0f}" height="{height}" fill="#ffffff"/>')
    for start, end, indent, kind, depth in sorted(boxes):
        x = left + indent * ch - 4
        out.append(f'<rect x="{x:.1f}" y="{start * lh + 3}" width="{gutter - x - 6 - 5 * depth:.1f}" '
                   f'height="{(end - start + 1) * lh + 2}" rx="5" fill="{fill[kind]}" '
                   f'stroke="{stroke[kind]}" fill-opacity="0.6"/>')
    coloured = {printer.name(v): colour for v, colour in (marks or {}).items()}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, coloured)) + r")\b") if coloured else None
    for i, line in enumerate(lines):
        text = _escape(line)
        if pattern:
            text = pattern.sub(lambda m: f'<tspan fill="{coloured[m.group(1)]}" font-weight="bold">'
                                         f'{m.group(1)}</tspan>', text)
        out.append(f'<text x="{left}" y="{(i + 1) * lh}" xml:space="preserve">{text}</text>')
    for n, (src, dst, depth, length) in enumerate(arrows):
        gx = gutter + 14 * n + 8
        y1, y2 = src * lh + lh / 2 + 2 + 3 * (n % 3), dst * lh + lh / 2 + 4
        loop_back = any(s == dst and s <= src <= e for s, e, *_ in boxes)
        colour = "#dc2626" if loop_back else "#16a34a"
        x1 = left + length * ch + 4
        out.append(f'<path d="M{x1:.1f},{y1:.1f} H{gx:.1f} V{y2:.1f} H{gutter - 6 - 5 * depth:.1f}" fill="none" '
                   f'stroke="{colour}" stroke-width="1.3" marker-end="url(#a)"/>')
    out.append("</svg>")
    return "\n".join(out)

# %% [markdown]
# Two pictures side by side — a term before and after a pass, an L
# function beside its CPS — are two SVG images in one, each under its
# caption: `beside` puts them there.

# %%
#| export
_SIZE = re.compile(r'<svg[^>]*?\bwidth="([\d.]+)"[^>]*?\bheight="([\d.]+)"')


def beside(pictures: list, title: str, gap: float = 28) -> str:
    """One SVG picture of several, side by side: pictures is [(caption, SVG text)]; title is
    the description of the whole. White card, dark text, like the pictures it holds."""
    x, parts, height = 10.0, [], 0.0
    for caption, svg in pictures:
        w, h = (float(v) for v in _SIZE.search(svg).groups())
        parts.append(f'<text x="{x:.1f}" y="18" font-weight="bold">{_escape(caption)}</text>')
        parts.append(svg.replace("<svg ", f'<svg x="{x:.1f}" y="28" ', 1))
        x += max(w, len(caption) * 7.2) + gap
        height = max(height, h)
    width, height = x - gap + 10, height + 38
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
                      f'font-family="monospace" font-size="12" fill="#0f172a">',
                      f'<title>{_escape(title)}</title>',
                      f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>', *parts, '</svg>'])

# %% [markdown]
# ## The framework at work
#
# ### Map, second-class
#
# The `map` of the first section, as a program: `parse` reads it, `check`
# accepts it, and `run` applies it to a function and the list `[1, 2, 3]`.
# (Before closure conversion every function and call is of the `closure`
# kind, printed `fun` and `call`.)

# %%
MAP = '''
private map_1 = fun ret_2 exn_3 (f_4, l_5) {
  t_6 = tag l_5
  cont empty_7() {
    nil_8 = inj 0 Nil()
    ret_2(nil_8)
  }
  cont nonempty_9() {
    x_10 = l_5[0]
    r_11 = l_5[1]
    cont after_f_12(fx_13) {
      cont after_map_14(m_15) {
        result_16 = inj 1 Cons(fx_13, m_15)
        ret_2(result_16)
      }
      call map_1(f_4, r_11) -> after_map_14 / exn_3
    }
    call f_4(x_10) -> after_f_12 / exn_3
  }
  case t_6 { 0 -> empty_7; 1 -> nonempty_9 }
}
private square_17 = fun ret_18 exn_19 (x_20) {
  y_21 = x_20 * x_20
  ret_18(y_21)
}
unused = do {
  nil_22 = inj 0 Nil()
  three_23 = 3
  l3_24 = inj 1 Cons(three_23, nil_22)
  two_25 = 2
  l2_26 = inj 1 Cons(two_25, l3_24)
  one_27 = 1
  l1_28 = inj 1 Cons(one_27, l2_26)
  cont done_29(squares_30) {
    u_31 = print(l1_28, squares_30)
    halt u_31
  }
  call map_1(square_17, l1_28) -> done_29 / uncaught
}
'''
map_program = parse(MAP)
check(map_program)
assert show(map_program) == MAP.lstrip()
values = run(map_program)

# %% [markdown]
# The output is one line from the `print` of the last definition: the list,
# then its squares, separated by a space as L's `print` separates its
# values. The `assert` in the cell has already checked that the text prints
# back exactly as it was written.
#
# Its picture: the function's box, the continuation boxes nested in it,
# and the arrows of the `case` and of the two calls' return points (the
# jumps to `ret_2` return to a continuation of the caller, which has no
# box here, and get no arrow). No arrow leaves a function box: that is
# what second-class continuations mean.

# %%
from IPython.display import SVG


def picture(node, alt: str) -> None:
    """Show the diagram of node, with its description (the alt text of the book's site)."""
    display(SVG(diagram(node, title=alt)), metadata={"alt": alt})


picture(map_program.definitions[0],
        "Diagram of map_1: a blue box for the function holds yellow boxes for the continuations "
        "empty_7 and nonempty_9, and inside nonempty_9 the nested after_f_12 and after_map_14; green "
        "arrows go from the case to empty_7 and nonempty_9, and from the two calls to after_f_12 and "
        "after_map_14. No arrow leaves the function box.")

# %% [markdown]
# ### The Flambda2 snippet's map, in L and in CPS
#
# OCamlPro's [snippet](../bibliography.md#flambda2-snippets) explains Flambda2's second-class CPS with this very function,
# written in OCaml and then in its IR. Here it is in L (with the list type
# it needs: `Nil` is constructor 0, `Cons` constructor 1), beside the CPS of
# the program above. Each line of the L has its place on the right: the
# `match` is the `tag` and the `case`; each arm is a `cont` (`empty_7`,
# `nonempty_9`); each of the two calls is a `call` that names where it
# returns — `after_f_12` then `after_map_14`, the "what happens next" that
# the L leaves implicit — and the `Cons` is built in the last continuation.
#
# The snippet's first listing writes only the return continuation,
# `Apply (map f r {k_after_map})`; Flambda2 passes the exception
# continuation too, as the snippet goes on to explain, and so does ours: `/ exn_3` on both calls says that an exception raised in `f`
# or in the recursive `map` leaves this `map` through its own `exn_3` —
# there is no `try` here. In this program, which catches nothing, nothing
# in `map` pays for the second continuation: it is a name, and chapter 10
# compiles a program that catches nothing as if exceptions did not exist.
# In a program that catches, the two calls would each be followed by a
# test, since `f` is a function unknown to `map` and may raise.

# %%
MAP_L = """data List<t> {
  Nil
  Cons(t, List<t>)
}

def map(f, l) = l.{
  Nil -> Nil
  Cons(x, r) -> Cons(f(x), map(f, r))
}"""


def beside_text(left: str, right: str, gap: int = 4) -> str:
    """Two texts side by side, the left one padded to its widest line."""
    ls, rs = left.splitlines(), right.splitlines()
    width = max(map(len, ls)) + gap
    return "\n".join(a.ljust(width) + b for a, b in itertools.zip_longest(ls, rs, fillvalue="")).rstrip() + "\n"


import itertools
print(beside_text(MAP_L, show(map_program.definitions[0])), end="")

# %% [markdown]
# ### A raise, caught by the caller
#
# No program of this chapter has raised yet, but the language can already
# say it. Below, `find` raises `NotFound` (constructor 3 of `Exn`, after
# the three predefined exceptions) when its argument is not 0: a jump to
# its own exception continuation, `exn_3(e_9) raise @2:5`. The caller's call names a
# handler of its own, `/ handler_11`, so that is where the exception lands,
# with the caller's activation: the handler prints it. The same program
# with the call raising to `uncaught` instead stops with the report of the
# raise, at its site.

# %%
CATCH = '''
private find_1 = fun ret_2 exn_3 (n_4) {
  zero_5 = 0
  z_6 = n_4 == zero_5
  cont found_7() {
    ret_2(n_4)
  }
  cont missing_8() {
    e_9 = inj 3 NotFound()
    exn_3(e_9) raise @2:5
  }
  case z_6 { 0 -> missing_8; 1 -> found_7 }
}
unused = do {
  one_10 = 1
  cont handler_11(e_12) {
    u_13 = print(e_12)
    halt u_13
  }
  cont back_14(r_15) {
    v_16 = print(r_15)
    halt v_16
  }
  call find_1(one_10) -> back_14 / handler_11 @3:1
}
'''
catch_program = parse(CATCH)
check(catch_program)
assert show(catch_program) == CATCH.lstrip()
run(catch_program)
try:
    run(parse(CATCH.replace("/ handler_11", "/ uncaught")))
except Stop as e:
    print("Stop:", e)

# %% [markdown]
# In the picture, the call has two arrows: one to its return point
# `back_14`, one to its handler `handler_11` (drawn alone, the definition
# is numbered afresh: they are `back_5` and `handler_2` there). Both are
# continuations of the caller; the raise inside `find` jumps to `exn_3`,
# a parameter of `find`, and it is the call that says where that is.

# %%
picture(catch_program.definitions[1],
        "Diagram of a dynamic definition that calls find_8: a grey box holds the yellow boxes of "
        "handler_2 and back_5; two green arrows go from the call's line, one to back_5, its return "
        "point, and one to handler_2, its exception continuation.")

# %% [markdown]
# ### The seed's loop
#
# In `let k(x) = k(2 + x) in k(2)` a continuation is in scope in its own
# handler, and that makes a loop: the reason the seed's interface gives for
# binding it there ("this allows loops"). Built earlier with `let_prim`/`let_cont`
# as `loop`, and with `Seq` as `loop2` — the two print the same:

# %%
print(show(loop2), end="")
assert show(loop) == show(loop2)
picture(loop, "Diagram of the seed's loop: a yellow box for the continuation k_2, with a red arrow "
              "from its last line, the jump k_2(y_4), back to its own header, and a green arrow to it "
              "from the jump k_2(two_1) below the box.")

# %% [markdown]
# It never stops, so we do not run it; a loop that counts to three and then
# halts is the same shape with a `case` on its test:

# %%
COUNT = '''
zero_1 = 0
cont loop_2(i_3) {
  three_4 = 3
  done_5 = i_3 >= three_4
  cont exit_6() {
    halt i_3
  }
  cont again_7() {
    u_8 = print(i_3)
    one_9 = 1
    next_10 = i_3 + one_9
    loop_2(next_10)
  }
  case done_5 { 0 -> again_7; 1 -> exit_6 }
}
loop_2(zero_1)
'''
evaluate(parse_term(COUNT))

# %% [markdown]
# `0`, `1` and `2` are printed by the loop, one per iteration; the last `3`
# is not printed by the program but is the value of `halt i_3`, which
# `evaluate` returns and Jupyter shows as the cell's result. `i_3` is the
# loop's parameter: each `loop_2(next_10)` jump gives it a new value.
#
# ### Graph compaction, step by step
#
# The Flambda2 snippet's second example shows why a CPS intermediate language makes
# optimisation local. The OCaml function
#
# ```ocaml
# let f cond = let v = if cond then raise Failure else 0 in (v, v)
# ```
#
# converts naively to a join point `k_after_if`, bound because the `if`
# has two branches, though only the `else` branch reaches it. The `raise`
# is written here as a `fail` (a runtime error), which keeps the example
# as small as the snippet's; a `raise` would be a jump to the
# function's exception continuation, `exn_3(e) raise`, and the rest is the
# same:

# %% [markdown]
# The text is parsed and checked, and the count of `after_if` read from the
# variable itself — no walk over the term:

# %%
STEP1 = '''
private f_1 = fun ret_2 exn_3 (cond_4) {
  cont after_if_5(v_6) {
    result_7 = tuple(v_6, v_6)
    ret_2(result_7)
  }
  cont then_8() {
    u_9 = fail "Failure"
    ret_2(u_9)
  }
  cont else_10() {
    zero_11 = 0
    after_if_5(zero_11)
  }
  case cond_4 { 0 -> else_10; 1 -> then_8 }
}
'''
f_program = parse(STEP1)
check(f_program)
f_lambda = f_program.definitions[0].value
after_if = f_lambda.body                       # the LetCont of after_if_5
print(after_if.cont.hint, "is used", after_if.cont.count, "time(s)")

# %% [markdown]
# `after_if` is used once: only `fail`'s branch does not reach it. A
# continuation used once can be *inlined*: its handler moves to the place of
# the one jump, with the jump's arguments in place of its parameters. With
# the Change functions, that is three steps, each keeping the term valid or,
# in between, reporting exactly what is missing.
#
# **Step 1: substitute the argument for the parameter.** Every occurrence of
# `v_6` becomes an occurrence of `zero_11` — one union, whatever the number
# of occurrences. The term does not check any more: `zero_11` is now used
# in `after_if`'s handler, outside its scope. That is expected; the next
# step moves those uses into the scope. (The checker names variables as the
# printer would print the changed term, where `zero_11` comes eighth:
# `zero_8`.)

# %%
jump = next(o.enclosing for o in occurrences(after_if.cont))    # the only jump: after_if_5(zero_11)
(arg,) = [o.var for o in jump.args]
substitute(after_if.params[0], arg)
try:
    check(f_program)
except CheckError as e:
    print("CheckError:", e)

# %% [markdown]
# **Step 2: move the handler to the jump.** `move` takes the handler out
# of the `LetCont` (leaving a hole there) and puts it in place of the jump,
# deleting the jump and its occurrences:

# %%
moved = move(after_if.handler, jump)
try:
    check(f_program)
except CheckError as e:
    print("CheckError:", e)

# %% [markdown]
# The scope error has gone — the handler that uses `zero_11` now sits in
# place of the jump, inside `else_10`, where `zero_11` is bound — and the
# checker reports the other gap: the `LetCont` of `after_if_5` has a hole
# where its handler was.
#
# **Step 3: delete the binding**, which is dead now — `after_if_5` has no
# occurrence left — and its hole with it:

# %%
delete_binding(after_if)
check(f_program)
print(show(f_program), end="")

# %% [markdown]
# This is the snippet's "step 2": the else branch computes `(0, 0)` and returns
# it, the then branch fails, and the join point is gone. The picture, before
# and after:

# %%
picture(parse(STEP1), "Diagram of f_1 before the rewriting: the continuations after_if_5, then_8 and "
                      "else_10 inside the function box; the case jumps to else_10 and then_8, and else_10 "
                      "jumps to the join point after_if_5.")

# %% [markdown]
# And after the rewriting, with the box of `after_if` gone:

# %%
picture(f_program, "Diagram of f_1 after the rewriting: only the continuations then_5 and else_7 are "
                  "left, each reached from the case; the join point after_if_5 is gone.")

# %% [markdown]
# Both versions behave the same: each is run on `false` (the pair) and on
# `true` (the failure).

# %%
def call_f(program_text: str, argument: str) -> str:
    import io
    out = io.StringIO()
    text = program_text + f'''unused = do {{
  c_100 = {argument}
  cont k_101(r_102) {{
    u_103 = print(r_102)
    halt u_103
  }}
  call f_1(c_100) -> k_101 / uncaught
}}
'''
    try:
        run(parse(text), out)
    except Stop as e:
        out.write(str(e) + "\n")
    return out.getvalue()

compacted = show(f_program)
for argument in ("false", "true"):
    print(argument, "→", call_f(STEP1, argument), end="")
    assert call_f(STEP1, argument) == call_f(compacted, argument)

# %% [markdown]
# With `false` the function returns the pair, which the caller prints as
# `(0, 0)`; with `true` it stops at the `fail`, and the message has no
# `@line:col` in front because this hand-written `fail` carries no location.
# The `assert` in the loop has compared each output with the output of the
# compacted version: they are the same.

# %% [markdown]
# ## The interface, in one table
#
# What the later chapters use: the classes themselves (`Var`, `ContVar`,
# `Occ`, the terms, values and primitives, `Definition`, `Program`), which
# they test with `type(t) is …`, and these functions:
#
# | | |
# |---|---|
# | **Build** | `let_prim`, `let_cont`, `lam` (its body gets `ret`, `exn` and the parameters), `apply_cont`, `raise_`, `apply(f, k, h, …)`, `case`, `halt`; values `const`, `tuple_`, `closure`, `inject`, `external`; primitives `proj`, `tag`, `op(…, exn=h)`, `set_field`, `print_`, `fail(…, exn=h)`; `Seq` for straight-line code; `Program.declare` / `define`, `Program.uncaught`; `PREDEFINED` (the predefined exceptions) |
# | **Traverse** | `children`, `walk`, `subterms`, `all_occurrences`, `binders`, `fold`, `size`, `free_variables`, `occurrences(var)`, `var.count`, `occ.var`, `enclosing_lambda`, `is_global`, `has_effect` |
# | **Change** | `substitute`, `replace`, `take`, `move`, `delete_binding`, `redirect`, `swap_prim`, `delete` |
# | **Check** | `check(root, closed=False)` → `CheckError` |
# | **Print / Parse** | `show(root)`, `Printer` (its `name` numbers variables as `show` does), `Namer`, `parse(text, source=None)`, `parse_term(text)` |
# | **Draw** | `diagram(root, marks=…, title=…)`, `beside([(caption, svg), …], title)` |
# | **Interpret** | `run(program, out)`, `evaluate(term)`; a runtime error is a `RunError`, or a `Stop` for a parsed text |
# | **Underneath** | `occur`, `_new`, `_attach`, `_own`, `_slot`, `_forget`: the link-keeping helpers of Build and Change. Chapter 9's shrinker calls them itself, where it copies a function's body to inline it and where it changes the term while keeping a count of every variable's uses; chapter 8 calls `_attach` once, to give a function its new body |
#
# ## The promises, tested
#
# `tests/test_cps.py` generates random well-formed programs with Hypothesis —
# constants, arithmetic, tuples, injections and `case`, join points with
# several parameters, nested functions that capture variables, calls,
# bounded loops, `print` — and checks that `check` accepts them; that they
# print, parse back and print identically, and run the same after the round
# trip; and that substituting one variable for another bound to the same
# constant (then deleting the dead binding) keeps `check` true and the
# interpreter's output unchanged. It breaks every invariant of `check` on
# purpose and expects the error; it feeds the parser truncated, misspelt and
# randomly mutated texts and expects a located `CompileError` each time,
# never another exception.
#
# For the second continuation, written programs (the generated ones do not
# raise yet): a raise in a callee reaches the handler its caller's call
# names; a division by zero raises `DivisionByZero` to a handler, which
# passes it on to `uncaught`, and the report is the division's; an uncaught
# raise reports `uncaught exception Failure("boom")` at the raise; handlers
# and raise sites print and parse back; the checker rejects a handler used
# as a value or captured by a function, a call whose exception continuation
# is an ordinary variable, and a function whose two continuations are one;
# a call that names a local handler is not a tail call (it overflows a
# small stack where the same loop raising to its own `exn` does not); and
# a diagram draws an arrow from a call to the handler it names.
#
# `bench/cps_speed.py` builds, checks, prints, parses, traverses and runs
# terms of 10⁴ to 10⁶ nodes and performs substitutions on each, and writes
# what it measures to `bench/cps_speed.json`. Its last run on this book's
# machine, read from that file:

# %%
import json
from pathlib import Path

SPEED = json.loads(Path("../bench/cps_speed.json").read_text())
phases = SPEED["phases"]
where = SPEED.get("machine", {})
print(f"measured {where.get('date', '?')} on {where.get('cpu', 'a machine not recorded')}, "
      f"{where.get('cores', '?')} cores, load average {where.get('load')} at the start")
print(SPEED["command"], f"— µs per node, {SPEED['settings']['stat']} of `runs` runs, "
      f"{SPEED['settings']['clock']} clock; subst: µs per substitution; touch: µs to read what it writes")
print(f"{'nodes':>8} {'lines':>7} {'depth':>5} {'runs':>4} " + " ".join(f"{p:>6}" for p in phases)
      + f" {'subst':>6} {'touch':>6}")
for row in SPEED["sizes"]:
    print(f"{row['nodes']:>8} {row['lines']:>7} {row['depth']:>5} {row['runs']:>4} "
          + " ".join(f"{row[p]:>6.2f}" for p in phases) + f" {row['subst']:>6.2f} {row['touch']:>6.2f}")
small, large = SPEED["sizes"][0], SPEED["sizes"][-1]
print("time per node, largest program / smallest (1.00 is linear):",
      ", ".join(f"{p} {large[p] / small[p]:.2f}" for p in phases))
dearest = max(phases, key=lambda p: small[p])
cheapest = min(phases, key=lambda p: small[p])
growth = [large[p] / small[p] for p in phases]
for label, p in (("dearest", dearest), ("cheapest", cheapest)):
    values = [row[p] for row in SPEED["sizes"]]
    print(f"{label} per node: {p}, {min(values):.2f} to {max(values):.2f} µs")
print(f"growth of the time per node over the {large['nodes'] / small['nodes']:.0f}-fold growth of the program: "
      f"{min(growth):.2f} to {max(growth):.2f}")

# %% [markdown]
# Read a row as one program: its size in nodes and in printed lines, its
# depth (the deepest nesting of handlers and functions in it), how
# many times each phase was timed (the table keeps the minimum), then the
# microseconds each phase spends per node. Down a column, a linear phase
# keeps the same figure. The last lines of the output name the dearest
# phase per node and the cheapest, a bare `walk`.
#
# Over a hundredfold growth of the program, the time per node of every
# phase grows by the factors printed last — where a quadratic phase would
# grow a hundredfold. Timings on a shared machine are noisy, though, and a
# factor up to 1.7 could hide an algorithm that is a little worse than
# linear. So count the work instead of timing it: the number of Python
# function calls each phase makes per node, on generated programs of
# about 3,000 and 30,000 nodes (the same generator, at sizes that take
# seconds here). A count does not depend on the machine or its load:

# %%
import cProfile
import io
import pstats
import sys  # noqa: F811  (the cell imports what it uses, as a module would)

sys.path.insert(0, "../bench")
import cps_speed
from lcompiler import cps as exported     # the benchmark builds with the package's copy of this chapter


def calls(action) -> tuple:
    """(Python function calls made by action(), its result), the garbage collector paused."""
    profile = cProfile.Profile()
    with collector_paused():
        profile.enable()
        result = action()
        profile.disable()
    return pstats.Stats(profile).total_calls, result


print(f"{'nodes':>6} " + " ".join(f"{p:>6}" for p in ("build", "check", "show", "parse", "walk", "run")))
per_node = []
for n in (3_000, 30_000):
    plan, globals_, _ = cps_speed.Planner(n, 6 + n).program()
    counts = [calls(lambda: cps_speed.build(plan, globals_))]  # noqa: B023  (called in this iteration)
    program_n = counts[0][1][0]
    counts += [calls(lambda: exported.check(program_n)), calls(lambda: exported.show(program_n))]  # noqa: B023  (called in this iteration)
    counts += [calls(lambda: exported.parse(counts[-1][1])), calls(lambda: exported.size(program_n)),  # noqa: B023  (called in this iteration)
               calls(lambda: exported.run(program_n, io.StringIO()))]  # noqa: B023  (called in this iteration)
    nodes = exported.size(program_n)
    per_node.append([c / nodes for c, _ in counts])
    print(f"{nodes:>6} " + " ".join(f"{c:>6.2f}" for c in per_node[-1]))
print("calls per node, larger program / smaller:",
      ", ".join(f"{p} {b / a:.3f}" for p, a, b in zip(("build", "check", "show", "parse", "walk", "run"), *per_node)))

# %% [markdown]
# The columns are Python function calls per node: the parser makes about 61,
# the checker 23, a bare walk 4; the second program is ten times the size
# of the first.
#
# Every phase makes the same number of calls per node at both sizes, to
# within 1 % (the last line) — except the interpreter, which runs only the
# path the program takes, and makes 5 % fewer on the larger one. On these
# programs the algorithms are linear. What grows a little in the timings
# is the cost of reaching each object — a node, an occurrence, an entry of
# a dictionary or a set — once a million of them are scattered over a heap
# far larger than the processor's caches: the effect
# [chapter 2](02_union_find.ipynb) measured on union-find, and the one the
# benchmark's `touch` column, below, measures on its own.
#
# Substitution is constant time in the number of occurrences: the last
# table of the benchmark substitutes variables used 10 to 100,000 times,
# each substitution moving all of them.

# %%
print(f"{'occurrences':>11} {'µs/subst':>9} {'µs/find after':>14}")
for row in SPEED["occurrences"]:
    print(f"{row['occurrences']:>11} {row['subst']:>9.2f} {row['find']:>14.3f}")
print(f"subst in the programs above: {small['subst']:.2f} µs at {small['nodes']} nodes, "
      f"{large['subst']:.2f} µs at {large['nodes']}; touch: {small['touch']:.2f} and {large['touch']:.2f} µs")

# %% [markdown]
# A substitution costs under a microsecond whether the variable has 10 or
# 100,000 occurrences (the first column): it is one `union` and one
# splice. In the generated programs it costs more as the program grows,
# about twice as much at a million nodes as at ten thousand; but so does
# "touch", which only reads the objects a substitution writes, by about as
# much (the cell's last line). That is the price of reaching objects
# scattered in a larger heap, not work the substitution does.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: the tail call that was quadratic</p>
#
# One phase was not linear in the first version of this chapter, and the
# benchmark found it: the interpreter decided whether a call is a tail call
# by climbing the uplinks to the enclosing function, a walk as long as the
# chain of bindings above the call — quadratic on a long straight-line
# `main`. A continuation variable is only visible in the function that
# binds it, so the call's return continuation says it directly: the call
# is a tail call when that continuation is the return continuation of the
# `fun` that binds it and the call's exception continuation is that
# `fun`'s too: a few field reads, whatever the length of the chain.
#
# </div>

# %% [markdown]
# ## Exercises
#
# 1. Write `inline_once(k)`: inline a continuation that is jumped to exactly
#    once, as the graph compaction above did by hand, and use it on every
#    continuation of `map_program` that qualifies. Which ones do, and why not
#    the others?
# 2. `substitute` costs one `union`. What would it cost if each occurrence
#    pointed straight at its variable, without union-find? Measure it with
#    `bench/cps_speed.py`'s last table.
# 3. Give `Case` a form that passes the fields of the matched constructor to
#    the arm, as the seed's `Case` does. What changes in `check`, in `show`
#    and `parse`, and in chapter 7's pattern matching?
# 4. Make `check` report *all* the violations it finds, not only the first.
#    Which invariants can still be checked once an earlier one fails?
#
# <details><summary>Solutions</summary>
#
# 1. `inline_once`, below, is the graph compaction's three steps made
#    general: if the `LetCont` binds a continuation used exactly once, and
#    that one use is a jump (an `ApplyCont`) in the `LetCont`'s body, it
#    substitutes the jump's arguments for the parameters, moves the handler
#    to the jump and deletes the binding. It refuses the other single uses,
#    and says why: a `case` arm (the `Case` holds continuations, not terms,
#    so there is no place to put a handler), the return or exception
#    continuation of a call (the call returns there; only a pass that knows
#    the callee could inline it, chapter 9's contification), the exception
#    continuation of an operation that can fail (an operation is not a
#    jump), a raise (a handler inlined at a raise would no longer record
#    its site; chapter 9's rule turns the handler's passes-on into raises
#    to keep it), and a jump from the continuation's own handler (a loop
#    that nothing enters).
#    Run on every continuation of `map_program`, it inlines none: all five
#    are used once, `empty_7` and `nonempty_9` as the arms of the `case`,
#    `after_f_12`, `after_map_14` and `done_29` as the return points of
#    calls. On the graph compaction's `f_1` it inlines `after_if_5`, as the
#    hand-made steps did, and leaves the arms `then_8` and `else_10`.
# 2. Each occurrence would have to be rewritten: `substitute(x, y)` would
#    cost one pointer write per occurrence of `x`, linear in its number of
#    uses, instead of one `union` and a splice; and a shrinking pass that
#    substitutes the result of a substitution again (`x → t1 → t2 → …`)
#    would move the same occurrences again and again, quadratic in the
#    worst case. The occurrences would also have to be found, so the ring
#    would still be needed. To measure it: `python bench/cps_speed.py`
#    prints, in its last table, µs per `substitute` for variables of 10,
#    1,000 and 100,000 occurrences; a direct-pointer version adds a loop
#    `for o in occurrences(x): o.var = y` (with `var` a plain slot). The
#    cell below times both on this machine: look for the union-find
#    column staying flat while the direct one grows in proportion to the
#    occurrences, and for the size at which they cross (a `union` and a
#    splice cost more than a few field writes, so at a handful of uses the
#    direct version is no slower).
# 3. The arm continuation takes the constructor's fields as parameters:
#    `cont nonempty_9(x_10, r_11)`, and the `case` on the list itself (not
#    on `tag l_5`) jumps to it with the fields. `check` must then know, for
#    each arm, how many fields its constructor has — the `Case` carries
#    each arm's arity, or the scrutinee's type does — and checks the
#    arm's parameters against it (rule 6, arity, for a `case` as for a
#    jump); a `default` arm takes no field (the seed's takes the value
#    itself). `show` and `parse` keep the
#    arms' text, `0 -> empty_7; 1 -> nonempty_9`, but the `case` prints its
#    scrutinee rather than a `tag`, and `parse` reads the arity from the
#    arms' handlers. The interpreter reads the fields when it jumps; the
#    back end loads them at the top of the arm's block, which only the
#    `switch` enters, so they need no φ-node.
#    Chapter 7 no longer emits `t = tag l` and the projections `l[0]`,
#    `l[1]` of a constructor's fields: a pattern's variables are the arm's
#    parameters. The price: a `case` on an `Int` or `Bool` (no fields)
#    and one on a constructor become two forms, and chapter 9's rules on
#    known injections change with it: `known_case`, jumping to the arm of
#    an injection it knows, must pass the arm its fields, and `project`
#    no longer meets the projections of a matched value.
# 4. `AllChecker`, below, records each violation in `fail` and goes on;
#    `check_all` returns the list. On `BROKEN`, which has three
#    violations in three places (a free variable of a nested function,
#    and two jumps with the wrong number of arguments), it reports all
#    three, where `check` stops at the first. What may still be checked after a violation is what does not
#    depend on it: arity, scope and the free-variable rule are properties
#    of one node each and stay meaningful; the counts and rings checked at
#    the end (`links`) are meaningful only if the walk met every
#    occurrence. A violation of the term's *shape* — a hole where a term
#    should be, an occurrence that is not an `Occ` — leaves nothing to
#    walk below it, and a checker that goes on must stop at that node (the
#    code below does not meet one: `BROKEN` parses).
#
# </details>
#
# Exercise 1's `inline_once` and its run on the graph compaction's `f_1`
# and on `map_program`, each checked, run and compared with the original:

# %%
def inline_once(t: LetCont) -> str:
    """Inline the continuation that t binds if its body jumps to it exactly once: substitute the
    jump's arguments for the parameters, move the handler to the jump, delete the binding.
    Returns "inlined", or why not."""
    k = t.cont
    if k.count != 1:
        return f"used {k.count} times"
    (o,) = occurrences(k)
    user = o.enclosing
    if type(user) is Case:
        return "a case arm"
    if type(user) is Apply:
        return f"the {'return' if user.cont is o else 'exception'} continuation of a call"
    if type(user) is not ApplyCont:
        return "the exception continuation of an operation that can fail"
    if user.raises:
        return "a raise"
    n = user
    while n.enclosing is not t:                # climb to the child of t that holds the jump
        n = n.enclosing
    if n is t.handler:
        return "jumped to from its own handler: a loop"
    for param, arg in zip(t.params, [a.var for a in user.args]):
        substitute(param, arg)
    move(t.handler, user)
    delete_binding(t)
    return "inlined"


def inline_every_once(program: Program) -> dict:
    """inline_once on every continuation of the program: what became of each, by its printed name."""
    printer = Printer()
    for d in program.definitions:
        printer.definition(d)
    conts = [n for d in program.definitions for n in walk(d) if type(n) is LetCont]
    names = [printer.name(t.cont) for t in conts]
    return dict(zip(names, [inline_once(t) for t in conts]))


f_inlined = parse(STEP1)
print(inline_every_once(f_inlined))
check(f_inlined)
for argument in ("false", "true"):
    assert call_f(show(f_inlined), argument) == call_f(STEP1, argument)
map_inlined = parse(MAP)
print(inline_every_once(map_inlined))
check(map_inlined)
assert show(map_inlined) == MAP.lstrip()                 # nothing qualified: unchanged

# %% [markdown]
# Exercise 2: `substitute` against a direct pointer in each occurrence,
# rewritten one by one, for variables of 10 to 100,000 uses (timed on this
# machine, so its output is not compared by the tests):

# %% tags=["nbval-ignore-output"]
import time


class Direct:
    """An occurrence that points straight at its variable."""
    __slots__ = ("var",)


def best_of(f, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
    return best


def direct_substitute(occs: list, y) -> None:
    for o in occs:
        o.var = y


print(f"{'occurrences':>11} {'µs union-find':>14} {'µs direct':>10}")
for n in (10, 1_000, 100_000):
    xs, ys = [Var("x") for _ in range(5)], Var("y")
    for x in xs:
        for _ in range(n):
            occur(x)
    occur(ys)
    pending = iter(xs)
    uf = best_of(lambda: substitute(next(pending), ys))  # noqa: B023  (called in this iteration)
    assert ys.count == 5 * n + 1
    direct = [Direct() for _ in range(n)]
    d = best_of(lambda: direct_substitute(direct, ys))  # noqa: B023  (called in this iteration)
    assert all(o.var is ys for o in direct)
    print(f"{n:>11} {1e6 * uf:>14.2f} {1e6 * d:>10.2f}")

# %% [markdown]
# Exercise 4: a checker that reports every violation.

# %%
class AllChecker(Checker):
    """A Checker that records every violation and goes on, instead of stopping at the first."""

    def __init__(self, closed: bool = False):
        super().__init__(closed)
        self.found = []

    def fail(self, node, message: str):
        where = self.where(node)
        self.found.append(f"{where}: {message}" if where else message)


def check_all(program: Program, closed: bool = False) -> list:
    """Every violation that check would report one at a time, in the order of the walk."""
    c = AllChecker(closed)
    with collector_paused():
        c.program(program)
        c.links()
    return c.found


BROKEN = """private f_1 = fun ret_2 exn_3 (x_4) {
  cont k_5(a_6, b_7) {
    g_8 = fun ret_9 exn_10 (y_11) {
      z_12 = x_4 + y_11
      ret_9(z_12)
    }
    ret_2(g_8, a_6)
  }
  k_5(x_4)
}
"""
found = check_all(parse(BROKEN), closed=True)
for message in found:
    print(message)
try:
    check(parse(BROKEN), closed=True)
except CheckError as e:
    assert str(e) == found[0]                            # check stops at the first of them
assert len(found) == 3 and check_all(parse(MAP)) == []
