"""The CPS framework (chapter 6): Build, Traverse, Change, Print, Parse, Check, Interpret.

The property tests draw a small typed direct-style *plan* (a tiny functional language with
lets, arithmetic, tuples, injections and matches, ifs with one- and two-value join points,
closures and calls, prints, and bounded loops), convert it to CPS through the Build API
(never through the parser), and judge the result against a Python evaluation of the plan.
"""

import io
import itertools
import re
import sys

import pytest
from hypothesis import HealthCheck, assume, event, given, settings, strategies as st

import lcompiler.cps as cps
from lcompiler.cps import (
    Apply, ApplyCont, Case, ChangeError, CheckError, Const, ContVar, Definition, Function, Halt,
    Injected, Lambda, LetCont, LetPrim, Program, Seq, Stop, Term, Var, all_occurrences, apply,
    apply_cont, binders, case, check, const, delete, delete_binding, enclosing_lambda, evaluate,
    fail, fold, free_variables, halt, has_effect, is_global, lam, let_cont, let_prim, move, occur,
    occurrences, op, parse, parse_term, proj, replace, run, show, show_value, size, substitute,
    subterms, take, tuple_, walk)
from lcompiler.errors import CompileError, RunError, Source, Span

PROPERTY = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- A reference semantics, independent of lcompiler ---------------------

def wrap64(n):
    return (n + 2**63) % 2**64 - 2**63


def cdiv(a, b):
    q = abs(a) // abs(b)
    return wrap64(q if (a < 0) == (b < 0) else -q)


def crem(a, b):
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


class RTuple:
    def __init__(self, fields):
        self.fields = list(fields)


class RInj:
    def __init__(self, tag, name, fields):
        self.tag, self.name, self.fields = tag, name, list(fields)


class RFun:
    def __init__(self, f):
        self.f = f


def lquote(s):
    out = []
    for c in s:
        out.append({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}.get(c, c))
    return '"' + "".join(out) + '"'


def fmt(v, nested=False):
    """L's print format, written again from the chapter's description."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return lquote(v) if nested else v
    if v == ():
        return "()"
    if isinstance(v, RTuple):
        return "(" + ", ".join(fmt(x, True) for x in v.fields) + ")"
    if isinstance(v, RInj):
        return v.name + ("(" + ", ".join(fmt(x, True) for x in v.fields) + ")" if v.fields else "")
    if isinstance(v, RFun):
        return "<function>"
    raise TypeError(v)


def canon(v):
    """A comparable form of a value of either semantics (bools apart from ints)."""
    if isinstance(v, bool):
        return ("B", v)
    if isinstance(v, int):
        return ("N", v)
    if isinstance(v, str):
        return ("S", v)
    if type(v) is tuple and v == ():
        return ("U",)
    if isinstance(v, (list, RTuple)):
        return ("T",) + tuple(canon(x) for x in (v if isinstance(v, list) else v.fields))
    if isinstance(v, (Injected, RInj)):
        return ("I", v.tag, v.name) + tuple(canon(x) for x in v.fields)
    if isinstance(v, (Function, RFun)):
        return ("F",)
    raise TypeError(v)


SHAPES = {0: ("Nil", 0), 1: ("One", 1), 2: ("Two", 2)}
ARITH, COMPARE = ("+", "-", "*"), ("==", "!=", "<", "<=", ">", ">=")
PYOP = {"+": lambda a, b: wrap64(a + b), "-": lambda a, b: wrap64(a - b),
        "*": lambda a, b: wrap64(a * b), "/": cdiv, "%": crem,
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def ev(e, env, out):
    """The value of a plan expression; prints go to the list out."""
    t = e[0]
    if t == "lit":
        return e[1]
    if t == "var":
        return env[e[1]]
    if t == "let":
        return ev(e[3], {**env, e[1]: ev(e[2], env, out)}, out)
    if t in ("bin", "div"):
        a = ev(e[2], env, out)
        return PYOP[e[1]](a, ev(e[3], env, out))
    if t == "neg":
        return wrap64(-ev(e[1], env, out))
    if t == "not":
        return not ev(e[1], env, out)
    if t == "tuple":
        return RTuple([ev(x, env, out) for x in e[1]])
    if t == "proj":
        v = ev(e[2], env, out)
        return v.fields[e[1]]
    if t == "inj":
        return RInj(e[1], SHAPES[e[1]][0], [ev(x, env, out) for x in e[2]])
    if t == "match":
        v = ev(e[1], env, out)
        arm = e[2].get(v.tag)
        if arm is None:
            return ev(e[3], env, out)
        names, body = arm
        return ev(body, {**env, **dict(zip(names, v.fields))}, out)
    if t == "if":
        return ev(e[2] if ev(e[1], env, out) else e[3], env, out)
    if t == "if2":
        _, c, then, else_, names, body = e
        a, b = then if ev(c, env, out) else else_
        va = ev(a, env, out)
        vb = ev(b, env, out)
        return ev(body, {**env, names[0]: va, names[1]: vb}, out)
    if t == "fun":
        names, body = e[1], e[2]
        return RFun(lambda *args: ev(body, {**env, **dict(zip(names, args))}, out))
    if t == "call":
        f = ev(e[1], env, out)
        args = [ev(x, env, out) for x in e[2]]
        return f.f(*args)
    if t == "print":
        vs = [ev(x, env, out) for x in e[1]]
        out.append(" ".join(fmt(v) for v in vs) + "\n")
        return ()
    if t == "seq":
        ev(e[1], env, out)
        return ev(e[2], env, out)
    if t == "loop":
        _, n, init, acc, i, body = e
        a = ev(init, env, out)
        for k in range(n, 0, -1):
            a = ev(body, {**env, acc: a, i: k}, out)
        return a
    if t == "rcall":
        return RECURSIVE[e[1]][1](*[ev(x, env, out) for x in e[2]])
    raise ValueError(e)


# --- Drawing plans -------------------------------------------------------

INT_LITS = st.one_of(st.integers(-4, 6), st.sampled_from([2**62, 2**63 - 1, -2**63, 10**12, 5]))
STR_LITS = st.text(alphabet='ab"\\\n\t\r#{}é ', max_size=5)
DIVISORS = st.sampled_from([-3, -1, 2, 7])
SIMPLE = ["int", "bool", "str", "unit", "shape", ("fun", 1), ("tuple", ("int", "str"))]


class Plans:
    """Draws typed plan expressions; names are fresh, every variable is bound once."""

    def __init__(self, draw, recursive=True):
        self.draw, self.n, self.recursive = draw, 0, recursive

    def fresh(self):
        self.n += 1
        return f"v{self.n}"

    def of(self, env, ty):
        return [n for n, t in env.items() if t == ty]

    def expr(self, ty, env, depth):
        d = self.draw
        if depth <= 0:
            return self.leaf(ty, env)
        kinds = ["leaf", "let", "if", "seq", "special", "special"]
        if ty == "int":
            kinds += ["call", "if2", "match", "loop", "proj"]
        kind = d(st.sampled_from(kinds))
        if kind == "leaf":
            return self.leaf(ty, env)
        if kind == "let":
            name, t = self.fresh(), d(st.sampled_from(SIMPLE))
            bound = self.expr(t, env, depth - 1)
            return ("let", name, bound, self.expr(ty, {**env, name: t}, depth - 1))
        if kind == "if":
            return ("if", self.expr("bool", env, depth - 1), self.expr(ty, env, depth - 1),
                    self.expr(ty, env, depth - 1), d(st.integers(0, 2)))
        if kind == "seq":
            return ("seq", self.special("unit", env, depth - 1), self.expr(ty, env, depth - 1))
        if kind == "call":
            funs = [n for n, t in env.items() if type(t) is tuple and t[0] == "fun"]
            if funs and d(st.booleans()):
                f = d(st.sampled_from(funs))
                fe = ("var", f)
                arity = env[f][1]
            else:
                arity = d(st.integers(0, 2))
                fe = self.expr(("fun", arity), env, depth - 1)
            return ("call", fe, [self.expr("int", env, depth - 2) for _ in range(arity)])
        if kind == "if2":
            na, nb = self.fresh(), self.fresh()
            pair = lambda: (self.expr("int", env, depth - 2), self.expr("int", env, depth - 2))
            return ("if2", self.expr("bool", env, depth - 2), pair(), pair(), (na, nb),
                    self.expr(ty, {**env, na: "int", nb: "int"}, depth - 1))
        if kind == "match":
            scrut = self.expr("shape", env, depth - 1)
            tags = d(st.lists(st.integers(0, 2), unique=True, max_size=3))
            arms = {}
            for t in tags:
                names = [self.fresh() for _ in range(SHAPES[t][1])]
                arms[t] = (names, self.expr(ty, {**env, **{n: "int" for n in names}}, depth - 1))
            default = None if len(tags) == 3 and d(st.booleans()) else self.expr(ty, env, depth - 1)
            return ("match", scrut, arms, default)
        if kind == "loop":
            acc, i = self.fresh(), self.fresh()
            return ("loop", d(st.integers(0, 4)), self.expr("int", env, depth - 1), acc, i,
                    self.expr("int", {**env, acc: "int", i: "int"}, depth - 1))
        if kind == "proj":
            if d(st.booleans()):
                return ("proj", 0, self.expr(("tuple", ("int", "str")), env, depth - 1))
            return ("proj", 0, ("inj", 1, [self.expr("int", env, depth - 1)]))
        return self.special(ty, env, depth)

    def special(self, ty, env, depth):
        d = self.draw
        if ty == "int":
            k = d(st.sampled_from(["bin", "bin", "div", "neg", "rcall"][:5 if self.recursive else 4]))
            if k == "bin":
                return ("bin", d(st.sampled_from(ARITH)), self.expr("int", env, depth - 1),
                        self.expr("int", env, depth - 1))
            if k == "div":
                return ("div", d(st.sampled_from(["/", "%"])), self.expr("int", env, depth - 1),
                        ("lit", d(DIVISORS)))
            if k == "neg":
                return ("neg", self.expr("int", env, depth - 1))
            name = d(st.sampled_from(sorted(RECURSIVE)))
            args = [("lit", d(st.integers(-2, 12)))]
            if name == "count_tail":
                args.append(self.expr("int", env, depth - 1))
            return ("rcall", name, args)
        if ty == "bool":
            if d(st.booleans()):
                return ("not", self.expr("bool", env, depth - 1))
            return ("bin", d(st.sampled_from(COMPARE)), self.expr("int", env, depth - 1),
                    self.expr("int", env, depth - 1))
        if ty == "unit":
            ts = d(st.lists(st.sampled_from(SIMPLE), max_size=3))
            return ("print", [self.expr(t, env, depth - 1) for t in ts])
        if ty == "shape":
            t = d(st.integers(0, 2))
            return ("inj", t, [self.expr("int", env, depth - 1) for _ in range(SHAPES[t][1])])
        if type(ty) is tuple and ty[0] == "tuple":
            return ("tuple", [self.expr(t, env, depth - 1) for t in ty[1]])
        if type(ty) is tuple and ty[0] == "fun":
            names = [self.fresh() for _ in range(ty[1])]
            return ("fun", names, self.expr("int", {**env, **{n: "int" for n in names}}, depth - 1))
        return self.leaf(ty, env)

    def leaf(self, ty, env):
        d = self.draw
        names = self.of(env, ty)
        if names and d(st.booleans()):
            return ("var", d(st.sampled_from(names)))
        if ty == "int":
            return ("lit", d(INT_LITS))
        if ty == "bool":
            return ("lit", d(st.booleans()))
        if ty == "str":
            return ("lit", d(STR_LITS))
        if ty == "unit":
            return ("lit", ())
        if ty == "shape":
            t = d(st.integers(0, 2))
            return ("inj", t, [("lit", d(INT_LITS)) for _ in range(SHAPES[t][1])])
        if type(ty) is tuple and ty[0] == "tuple":
            return ("tuple", [self.leaf(t, env) for t in ty[1]])
        if type(ty) is tuple and ty[0] == "fun":
            names = [self.fresh() for _ in range(ty[1])]
            body_env = {**env, **{n: "int" for n in names}}
            return ("fun", names, ("var", d(st.sampled_from(self.of(body_env, "int"))))
                    if names else ("lit", d(INT_LITS)))
        raise ValueError(ty)


@st.composite
def plans(draw, depth=5, recursive=False):
    ty = draw(st.sampled_from(["int", "int", "bool", "str", "shape", ("tuple", ("int", "str"))]))
    p = Plans(draw, recursive)
    return p.expr(ty, {}, draw(st.integers(2, depth)))


# --- Converting plans to CPS through Build, counting the nodes made -------

class Counting:
    """The Build functions of lcompiler.cps, each counting the nodes it makes."""
    NODES = ("const", "tuple_", "inject", "external", "proj", "tag", "op", "set_field",
             "print_", "fail", "lam", "let_prim", "let_cont", "apply_cont", "apply", "case", "halt")
    TERMS = ("let_prim", "let_cont", "apply_cont", "apply", "case", "halt")

    def __init__(self):
        self.nodes = self.terms = 0

    def __getattr__(self, name):
        f = getattr(cps, name)

        def counted(*args, **kwargs):
            self.nodes += 1
            self.terms += name in self.TERMS
            return f(*args, **kwargs)
        return counted


class Converter:
    def __init__(self, globals_=None, uncaught=None):
        self.B = Counting()
        self.globals = globals_ or {}
        self.locs = itertools.count(1)
        self.exn = Program().uncaught if uncaught is None else uncaught   # where a raise goes here

    def ret(self, k, v):
        return self.B.apply_cont(k, v) if isinstance(k, ContVar) else k(v)

    def join(self, k, body):
        """body(j) with j a continuation variable: k itself, or a join point running k."""
        if isinstance(k, ContVar):
            return body(k)
        return self.B.let_cont(lambda j, r: k(r), body, params=["r"], name="join")

    def many(self, es, env, then, done=()):
        if not es:
            return then(list(done))
        return self.conv(es[0], env, lambda v: self.many(es[1:], env, then, (*done, v)))

    def conts(self, handlers, then, made=()):
        """Bind a chain of parameterless continuations, then then(*their variables)."""
        if not handlers:
            return then(*made)
        return self.B.let_cont(lambda kk: handlers[0](), lambda kk: self.conts(handlers[1:], then,
                                                                              (*made, kk)),
                               params=0, name="arm")

    def let(self, prim, k, name="t"):
        return self.B.let_prim(prim, lambda x: self.ret(k, x), name)

    def conv(self, e, env, k):
        t, B = e[0], self.B
        if t == "lit":
            return B.let_prim(B.const(e[1]), lambda x: self.ret(k, x), "c")
        if t == "var":
            return self.ret(k, env[e[1]] if e[1] in env else self.globals[e[1]])
        if t == "let":
            return self.conv(e[2], env, lambda v: self.conv(e[3], {**env, e[1]: v}, k))
        if t in ("bin", "div"):
            loc = cps.Pos(next(self.locs), 3) if t == "div" else None
            return self.conv(e[2], env, lambda a: self.conv(
                e[3], env, lambda b: self.let(B.op(e[1], a, b, loc=loc, exn=self.exn if loc else None), k)))
        if t == "neg":
            return self.conv(e[1], env, lambda a: self.let(B.op("neg", a), k))
        if t == "not":
            return self.conv(e[1], env, lambda a: self.let(B.op("not", a), k))
        if t == "tuple":
            return self.many(e[1], env, lambda vs: self.let(B.tuple_(*vs), k, "tup"))
        if t == "proj":
            return self.conv(e[2], env, lambda x: self.let(B.proj(e[1], x), k, "field"))
        if t == "inj":
            return self.many(e[2], env, lambda vs: self.let(B.inject(e[1], SHAPES[e[1]][0], *vs), k))
        if t == "match":
            _, scrut, arms, default = e

            def arm(kk, names, body, x):
                def fields(i, env2):
                    if i == len(names):
                        return self.conv(body, env2, kk)
                    return B.let_prim(B.proj(i, x), lambda f: fields(i + 1, {**env2, names[i]: f}),
                                      names[i])
                return lambda: fields(0, env)

            def match_branch(kk, x, tg):
                tags = sorted(arms)
                handlers = [arm(kk, *arms[i], x) for i in tags]
                if default is not None:
                    handlers.append(lambda: self.conv(default, env, kk))
                def final(*ks):
                    table = dict(zip(tags, ks))
                    return B.case(tg, table, ks[-1] if default is not None else None)
                return self.conts(handlers, final)
            return self.conv(scrut, env, lambda x: self.join(k, lambda kk: B.let_prim(
                B.tag(x), lambda tg: match_branch(kk, x, tg), "tag")))
        if t == "if":
            _, c, then, else_, variant = e

            def branch(cv, kk):
                def final(kt, ke):
                    if variant == 0:
                        return B.case(cv, {0: ke, 1: kt})
                    if variant == 1:
                        return B.case(cv, {1: kt}, ke)
                    return B.case(cv, {0: ke}, kt)
                return self.conts([lambda: self.conv(then, env, kk),
                                   lambda: self.conv(else_, env, kk)], final)
            return self.conv(c, env, lambda cv: self.join(k, lambda kk: branch(cv, kk)))
        if t == "if2":
            _, c, then, else_, names, body = e

            def jump(j, pair):
                return lambda: self.many(list(pair), env, lambda vs: B.apply_cont(j, *vs))
            return self.conv(c, env, lambda cv: B.let_cont(
                lambda j, a, b: self.conv(body, {**env, names[0]: a, names[1]: b}, k),
                lambda j: self.conts([jump(j, then), jump(j, else_)],
                                     lambda kt, ke: B.case(cv, {0: ke, 1: kt})),
                params=list(names), name="join2"))
        if t == "fun":
            return self.let(self.function(e, env), k, "f")
        if t in ("call", "rcall"):
            fe = e[1] if t == "call" else ("var", e[1])
            return self.conv(fe, env, lambda f: self.many(e[2], env, lambda vs: self.call(f, vs, k)))
        if t == "print":
            return self.many(e[1], env, lambda vs: self.let(B.print_(*vs), k, "u"))
        if t == "seq":
            return self.conv(e[1], env, lambda _: self.conv(e[2], env, k))
        if t == "loop":
            _, n, init, acc, i, body = e
            # The accumulator comes first: the jump loop(r, i - 1) may pass the counter i itself
            # as r, and a jump that passes a parameter of its target after that parameter's own
            # position was once broken by a non-parallel jump (test_jumps_are_parallel_assignments).
            return B.let_prim(B.const(n), lambda nv: self.conv(init, env, lambda a0: B.let_cont(
                lambda loop, av, iv: B.let_prim(B.const(0), lambda zero: B.let_prim(
                    B.op("<=", iv, zero), lambda z: self.conts(
                        [lambda: self.ret(k, av),
                         lambda: self.conv(body, {**env, acc: av, i: iv}, lambda r: B.let_prim(
                             B.const(1), lambda one: B.let_prim(
                                 B.op("-", iv, one), lambda i2: B.apply_cont(loop, r, i2), "i"),
                             "one"))],
                        lambda done, again: B.case(z, {0: again, 1: done})), "z"), "zero"),
                lambda loop: B.apply_cont(loop, a0, nv), params=["acc", "i"], name="loop")), "n")
        raise ValueError(e)

    def function(self, e, env):
        names, body = e[1], e[2]

        def inside(r, h, *xs):
            outer, self.exn = self.exn, h
            try:
                return self.conv(body, {**env, **dict(zip(names, xs))}, r)
            finally:
                self.exn = outer
        return self.B.lam(inside, params=list(names), cont="ret")

    def call(self, f, vs, k):
        h = self.exn
        if isinstance(k, ContVar):
            return self.B.apply(f, k, h, *vs)
        return self.B.let_cont(lambda j, r: k(r), lambda j: self.B.apply(f, j, h, *vs),
                               params=["r"], name="after")


# Global recursive functions every program has: their CPS, and their meaning.
def build_sum_to(B, self_var):
    """sum_to(n) = n <= 0 ? 0 : n + sum_to(n - 1), not a tail call."""
    return B.lam(lambda ret, exn, n: B.let_prim(B.const(0), lambda zero: B.let_prim(
        B.op("<=", n, zero), lambda z: B.let_cont(
            lambda base: B.apply_cont(ret, zero),
            lambda base: B.let_cont(
                lambda step: B.let_prim(B.const(1), lambda one: B.let_prim(
                    B.op("-", n, one), lambda m: B.let_cont(
                        lambda after, r: B.let_prim(B.op("+", n, r), lambda s: B.apply_cont(ret, s)),
                        lambda after: B.apply(self_var, after, exn, m), params=["r"], name="after"))),
                lambda step: B.case(z, {0: step, 1: base}), params=0, name="step"),
            params=0, name="base"))), params=["n"])


def build_count_tail(B, self_var):
    """count_tail(n, acc) = n <= 0 ? acc : count_tail(n - 1, acc + n), a tail call."""
    return B.lam(lambda ret, exn, n, acc: B.let_prim(B.const(0), lambda zero: B.let_prim(
        B.op("<=", n, zero), lambda z: B.let_cont(
            lambda base: B.apply_cont(ret, acc),
            lambda base: B.let_cont(
                lambda step: B.let_prim(B.const(1), lambda one: B.let_prim(
                    B.op("-", n, one), lambda m: B.let_prim(
                        B.op("+", acc, n), lambda a2: B.apply(self_var, ret, exn, m, a2)))),
                lambda step: B.case(z, {1: base}, step), params=0, name="step"),
            params=0, name="base"))), params=["n", "acc"])


RECURSIVE = {
    "sum_to": (build_sum_to, lambda n: wrap64(sum(range(1, n + 1))) if n > 0 else 0),
    "count_tail": (build_count_tail, lambda n, acc: wrap64(acc + (sum(range(1, n + 1)) if n > 0
                                                                  else 0))),
}


def recursive_program():
    """A Program holding the recursive functions only, and the globals map for plans."""
    prog = Program()
    conv = Converter(uncaught=prog.uncaught)
    vars_ = {name: prog.declare(name) for name in sorted(RECURSIVE)}
    for name in sorted(RECURSIVE):
        prog.define(RECURSIVE[name][0](conv.B, vars_[name]), "private", vars_[name])
    conv.globals = vars_
    return prog, conv


class Built:
    """A plan converted to CPS, with what the conversion made and what the plan means."""

    def __init__(self, root, conv, expected_out, expected, plan=None):
        self.root, self.conv = root, conv
        self.expected_out, self.expected = expected_out, expected
        self.plan = plan

    def __repr__(self):
        return f"Built(plan={self.plan!r})\n{show(self.root)}"


def seeded(plan):
    """The plan after unused constants: at least one pair of equal ones, and more pairs with
    the zeros and ones that the plan itself has (every loop has some)."""
    return ("let", "s0", ("lit", 0), ("let", "s1", ("lit", 1), ("let", "s2", ("lit", 0), plan)))


@st.composite
def terms(draw, depth=5, seed=False):
    """A closed term (recursion goes through a program, so terms call no global)."""
    plan = draw(plans(depth))
    plan = seeded(plan) if seed else plan
    conv = Converter()
    t = conv.conv(plan, {}, lambda v: conv.B.halt(v))
    out = []
    value = ev(plan, {}, out)
    return Built(t, conv, "".join(out), canon(value), plan)


@st.composite
def programs(draw, depth=3, seed=False):
    """A program: recursive functions, static constants, lambdas and a tuple, then dynamic
    definitions that may use every static and each earlier dynamic one."""
    prog, conv = recursive_program()
    p = Plans(draw)
    env = {"sum_to": ("rfun",), "count_tail": ("rfun",)}
    ref = {name: RFun(RECURSIVE[name][1]) for name in RECURSIVE}
    out, expected = [], {}
    statics = draw(st.lists(st.sampled_from(["const", "fun", "fun2"]), max_size=3))
    for s in statics:
        name = p.fresh()
        var = prog.declare(name)
        conv.globals[name] = var
        if s == "const":
            c = draw(INT_LITS)
            prog.define(conv.B.const(c), draw(st.sampled_from(["public", "private"])), var)
            env[name], ref[name] = "int", c
        else:
            arity = 1 if s == "fun" else 2
            fplan = p.special(("fun", arity), dict(env), draw(st.integers(1, depth)))
            prog.define(conv.function(fplan, {}), "private", var)
            env[name], ref[name] = ("fun", arity), ev(fplan, ref, out)
        expected[name] = canon(ref[name])
    ints = [n for n, t in env.items() if t == "int"]
    if ints and draw(st.booleans()):
        name = p.fresh()
        var = prog.declare(name)
        conv.globals[name] = var
        fields = draw(st.lists(st.sampled_from(ints), min_size=1, max_size=3))
        prog.define(conv.B.tuple_(*(conv.globals[f] for f in fields)), "private", var)
        ref[name] = RTuple([ref[f] for f in fields])
        expected[name] = canon(ref[name])
    for _ in range(draw(st.integers(1, 3))):
        ty = draw(st.sampled_from(["int", "unit", "str", ("fun", 1)]))
        plan = p.expr(ty, dict(env), draw(st.integers(1, depth)))
        plan = seeded(plan) if seed else plan
        term = conv.conv(plan, {}, lambda v: conv.B.halt(v))
        value = ev(plan, ref, out)
        if draw(st.booleans()) and ty == "unit":
            prog.define(term, "unused")
        else:
            name = p.fresh()
            var = prog.declare(name)
            conv.globals[name] = var
            prog.define(term, draw(st.sampled_from(["public", "private"])), var)
            env[name], ref[name], expected[name] = ty, value, canon(value)
    built = Built(prog, conv, "".join(out), expected)
    built.names = {v: n for n, v in conv.globals.items()}
    return built


def interpret(root):
    """(output, canonical result) of a term (its halt value) or a program (its globals)."""
    out = io.StringIO()
    if type(root) is Program:
        g = run(root, out)
        return out.getvalue(), [canon(g[d.var]) for d in root.definitions if d.var is not None]
    value = evaluate(root, out)
    return out.getvalue(), canon(value)


# --- 1. Properties of generated terms and programs -----------------------

@PROPERTY
@given(terms())
def test_generated_terms_check_and_mean_what_their_plan_means(b):
    check(b.root)
    check(b.root, closed=False)
    assert interpret(b.root) == (b.expected_out, b.expected)


@PROPERTY
@given(programs())
def test_generated_programs_check_and_mean_what_their_plan_means(b):
    check(b.root)
    out, values = interpret(b.root)
    assert out == b.expected_out
    named = [d for d in b.root.definitions if d.var is not None]
    for d, v in zip(named, values):
        name = b.names[d.var]
        if name in b.expected:
            assert v == b.expected[name], name


def reparse(root):
    text = show(root)
    return (parse if type(root) is Program else parse_term)(text)


def occs_of(root):
    """all_occurrences, per definition for a program (as the chapter first had it)."""
    if type(root) is Program:
        return [o for d in root.definitions for o in all_occurrences(d)]
    return list(all_occurrences(root))


UNCAUGHT = Program().uncaught      # the exception continuation of the terms built alone, below


def uncaught_of(root):
    """The uncaught continuations the root raises to (its program's, bound outside every term)."""
    return [v for v in free_variables(root) if v.is_cont and type(v.binder) is Program]


def free_of(root):
    """The free variables of a term, or of a program's definitions, but for globals and uncaught."""
    if type(root) is Program:
        free = [v for d in root.definitions for v in free_variables(d) if not is_global(v)]
    else:
        free = free_variables(root)
    return [v for v in free if not (v.is_cont and type(v.binder) is Program)]


def inside(node, ancestor):
    """Whether ancestor is node or encloses it, by the uplinks."""
    while node is not None:
        if node is ancestor:
            return True
        node = node.enclosing
    return False


@PROPERTY
@given(st.one_of(terms(), programs()))
def test_print_parse_round_trip_keeps_text_links_and_meaning(b):
    text = show(b.root)
    again = reparse(b.root)
    assert show(again) == text
    check(again)
    assert [(v.hint, v.count, v.is_cont) for v in binders(again)] == \
        [(v.hint, v.count, v.is_cont) for v in binders(b.root)]
    assert size(again) == size(b.root)
    assert interpret(again) == interpret(b.root)


@PROPERTY
@given(st.one_of(terms(), programs()))
def test_traversals_agree_with_what_was_built(b):
    root, B = b.root, b.conv.B
    extra = 0 if type(root) is not Program else len(root.definitions) + 1   # the Program itself
    assert size(root) == B.nodes + extra
    assert fold(lambda n, _: n + 1, 0, root) == size(root)
    assert fold(lambda acc, node: acc + [node], [], root) == list(walk(root))
    assert sum(1 for _ in subterms(root)) == B.terms
    assert all(isinstance(t, Term) for t in subterms(root))
    assert free_of(root) == []
    bound = list(binders(root))
    assert len(bound) == len(set(bound))
    occs = occs_of(root)
    raised_to = sorted(set(uncaught_of(root) if type(root) is not Program else
                           [v for d in root.definitions for v in uncaught_of(d)]), key=id)
    assert len(occs) == sum(v.count for v in bound + raised_to) == len({id(o) for o in occs})
    # walk is the printing order: the printer numbers binders 1, 2, 3, … in walk order
    printer = cps.Printer()
    if type(root) is Program:
        for d in root.definitions:
            printer.definition(d)
    else:
        printer.block(root, 0)
    numbers = [int(printer.name.names[v].rpartition("_")[2]) for v in bound]
    assert numbers == list(range(1, len(bound) + 1))


def lambdas_by_descent(root):
    """(occurrence, innermost lambda) for every occurrence, found going down, not up."""
    found, stack = [], [(root, None)]
    while stack:
        node, fn = stack.pop()
        if node is None:
            continue
        if type(node) is Lambda:
            fn = node
        if type(node) is not Program:
            found += [(o, fn) for o in node.occs()]
        stack += [(c, fn) for c in cps.children(node)]
    return found


@PROPERTY
@given(st.one_of(terms(), programs()))
def test_uplinks_enclosing_lambda_and_free_variables_of_functions(b):
    pairs = lambdas_by_descent(b.root)
    assert len(pairs) == len(occs_of(b.root))
    for o, fn in pairs:
        assert enclosing_lambda(o) is fn
        assert o.enclosing is not None and o in list(o.enclosing.occs())
    for node in walk(b.root):
        if type(node) is Lambda:
            expect = []                      # in printing order, by the binders' uplinks
            for o in all_occurrences(node):
                v = o.var
                if not inside(v.binder, node) and v not in expect:
                    expect.append(v)
            assert free_variables(node) == expect
            assert not any(v.is_cont for v in expect), "continuations are second-class"
    for v in binders(b.root):
        assert is_global(v) == (type(v.binder) is Definition)


def const_pairs(root):
    """(a's LetPrim, b's LetPrim): equal constants, b's binding inside a's scope."""
    lets = [t for t in subterms(root) if type(t) is LetPrim and type(t.prim) is Const]
    return [(a, b) for a in lets for b in lets
            if a is not b and type(a.prim.value) is type(b.prim.value)
            and a.prim.value == b.prim.value and inside(b, a.body)]


@pytest.mark.slow
@PROPERTY
@given(st.one_of(terms(seed=True), programs(seed=True)), st.data())
def test_substituting_a_dominating_equal_constant_keeps_the_meaning(b, data):
    pairs = const_pairs(b.root)
    assume(pairs)
    a_let, b_let = data.draw(st.sampled_from(pairs))
    a, bv = a_let.var, b_let.var
    before = interpret(b.root)
    ca, cb = a.count, bv.count
    b_occs = list(occurrences(bv))
    substitute(bv, a)
    assert bv.count == 0 and list(occurrences(bv)) == []
    assert a.count == ca + cb
    ring = list(occurrences(a))
    assert len(ring) == a.count and all(o.var is a for o in ring)
    assert all(o.var is a for o in b_occs) and {id(o) for o in b_occs} <= {id(o) for o in ring}
    size_before = size(b.root)
    body = delete_binding(b_let)
    assert body.enclosing is not None and b_let.enclosing is None
    assert size(b.root) == size_before - 2
    check(b.root)
    assert interpret(b.root) == before
    assert show(reparse(b.root)) == show(b.root)


def dead_binding(root):
    for t in subterms(root):
        if t.enclosing is None:
            continue                   # the root itself has no place to delete from
        if type(t) is LetPrim and t.var.count == 0 and not has_effect(t.prim):
            return t
        if type(t) is LetCont and all(inside(o.enclosing, t.handler) for o in occurrences(t.cont)):
            return t
    return None


@PROPERTY
@given(st.one_of(terms(), programs()))
def test_deleting_every_dead_binding_keeps_the_meaning(b):
    before = interpret(b.root)
    deleted = 0
    while (t := dead_binding(b.root)) is not None:
        expected = size(b.root) - (size(t) - size(t.body))
        dead = t.prim if type(t) is LetPrim else t.handler
        freed = [o.var for o in all_occurrences(dead) if not inside(o.var.binder, dead)]
        counts = {v: v.count for v in freed}
        delete_binding(t)
        deleted += 1
        assert size(b.root) == expected
        for v in set(freed):
            assert v.count == counts[v] - freed.count(v)
        check(b.root)
    assert interpret(b.root) == before
    assert show(reparse(b.root)) == show(b.root)


def used_once_by_a_jump(root):
    for t in subterms(root):
        if type(t) is LetCont and t.cont.count == 1:
            (o,) = occurrences(t.cont)
            if type(o.enclosing) is ApplyCont and o.enclosing.cont is o \
                    and not inside(o.enclosing, t.handler):
                return t, o.enclosing
    return None


@PROPERTY
@given(st.one_of(terms(), programs()))
def test_inlining_every_continuation_used_once_keeps_the_meaning(b):
    """Flambda2's graph compaction, everywhere it applies."""
    before = interpret(b.root)
    while (found := used_once_by_a_jump(b.root)) is not None:
        t, jump = found
        n = size(b.root)
        for x, a in zip(t.params, [o.var for o in jump.args]):
            substitute(x, a)
        assert all(x.count == 0 for x in t.params)
        move(t.handler, jump)
        assert t.handler is None and jump.enclosing is None
        delete_binding(t)
        assert size(b.root) == n - 2
        check(b.root)
    assert interpret(b.root) == before
    assert show(reparse(b.root)) == show(b.root)


# --- Helpers for the unit tests ------------------------------------------

def binding(root, hint):
    """The LetPrim or LetCont binding the variable with this hint (unique in the tests)."""
    for t in subterms(root):
        if (type(t) is LetPrim and t.var.hint == hint) or (type(t) is LetCont and t.cont.hint == hint):
            return t
    raise KeyError(hint)


def var(root, hint):
    for v in binders(root):
        if v.hint == hint:
            return v
    raise KeyError(hint)


def first(root, cls):
    return next(n for n in walk(root) if type(n) is cls)


def evaluated(root):
    out = io.StringIO()
    return evaluate(root, out), out.getvalue()


# --- Build ----------------------------------------------------------------

def test_build_refuses_unknown_operators_and_visibilities():
    x = Var("x")
    for operator, args in (("+", [x]), ("!", [x, x]), ("**", [x, x]), ("-", [x, x, x])):
        with pytest.raises(ValueError, match="no primitive"):
            op(operator, *args)
    assert x.count == 0                               # refused before any occurrence is made
    prog = Program()
    with pytest.raises(ValueError, match="visibility 'protected'"):
        prog.define(const(1), "protected")
    assert prog.define(let_prim(const(1), halt), "unused") is None
    g = prog.define(const(2), "private", name="two")
    assert g.hint == "two" and is_global(g) and g.binder is prog.definitions[-1]
    check(prog)


def test_seq_and_nested_build_make_the_same_term():
    nested = let_prim(const(2), lambda two: let_cont(
        lambda k, x: let_prim(op("+", two, x), lambda y: apply_cont(k, y), "y"),
        lambda k: apply_cont(k, two), params=["x"]), "two")
    s = Seq()
    two = s.let(const(2), "two")
    k = s.cont(lambda k, x: let_prim(op("+", two, x), lambda y: apply_cont(k, y), "y"), ["x"])
    chained = s.end(apply_cont(k, two))
    for t in (nested, chained):
        check(t)
        assert show(t) == show(parse_term(SEED_LOOP))
        assert [v.count for v in binders(t)] == [2, 2, 1, 1]
        assert t.enclosing is None and t.body.enclosing is t and t.prim.enclosing is t


def test_occurrences_are_listed_most_recent_first():
    x, k = Var("x"), ContVar("k")
    made = [occur(x) for _ in range(3)]
    assert list(occurrences(x)) == made[::-1] and x.count == 3
    assert all(o.var is x and type(o) is cps.Occ and not o.is_cont for o in made)
    ko = occur(k)
    assert type(ko) is cps.ContOcc and ko.is_cont and ko.var is k


@pytest.mark.slow
def test_long_chains_cost_no_python_recursion():
    n = 20_000
    s = Seq()
    x = s.let(const(1), "x")
    for _ in range(n):
        x = s.let(op("+", x, x), "x")
    t = s.end(halt(x))
    check(t)
    assert size(t) == 2 * (n + 1) + 1
    text = show(t)
    again = parse_term(text)
    assert show(again) == text
    assert evaluate(again) == wrap64(2**n)


# --- 2. Change ------------------------------------------------------------

STEP1 = '''\
private f_1 = fun ret_2 exn_3 (cond_4) {
  cont after_if_5(v_6) {
    result_7 = tuple(v_6, v_6)
    ret_2(result_7)
  }
  cont then_8() {
    u_9 = fail "Failure" @2:30
    ret_2(u_9)
  }
  cont else_10() {
    zero_11 = 0
    after_if_5(zero_11)
  }
  case cond_4 { 0 -> else_10; 1 -> then_8 }
}
'''

COMPACTED = '''\
private f_1 = fun ret_2 exn_3 (cond_4) {
  cont then_5() {
    u_6 = fail "Failure" @2:30
    ret_2(u_6)
  }
  cont else_7() {
    zero_8 = 0
    result_9 = tuple(zero_8, zero_8)
    ret_2(result_9)
  }
  case cond_4 { 0 -> else_7; 1 -> then_5 }
}
'''


def call_f(program: Program, argument: str) -> str:
    """Run f_1 on a constant, with a fresh copy of the program: output, or the runtime error."""
    text = show(program) + f'''unused = do {{
  c_100 = {argument}
  cont k_101(r_102) {{
    u_103 = print(r_102)
    halt u_103
  }}
  call f_1(c_100) -> k_101 / uncaught
}}
'''
    out = io.StringIO()
    try:
        run(parse(text), out)
    except Stop as e:
        out.write(str(e) + "\n")
    return out.getvalue()


def test_graph_compaction_inlines_a_continuation_used_once():
    prog = parse(STEP1)
    check(prog)
    before = {a: call_f(prog, a) for a in ("false", "true")}
    assert before == {"false": "(0, 0)\n", "true": "2:30: runtime error: Failure\n"}
    after_if = prog.definitions[0].value.body
    assert type(after_if) is LetCont and after_if.cont.count == 1
    (o,) = occurrences(after_if.cont)
    jump = o.enclosing
    assert type(jump) is ApplyCont
    (param,) = after_if.params
    (arg,) = [a.var for a in jump.args]
    assert (param.count, arg.count) == (2, 1)
    substitute(param, arg)
    assert (param.count, arg.count) == (0, 3)
    with pytest.raises(CheckError, match=r"in definition f_1, in fun ret_2, in cont after_if_5: "
                                         r"zero_\d+ is used out of its scope"):
        check(prog)
    moved = move(after_if.handler, jump)
    assert moved.enclosing is not None and after_if.handler is None
    assert after_if.cont.count == 0 and arg.count == 2          # the jump's argument went with it
    with pytest.raises(CheckError, match="a hole"):
        check(prog)
    assert "<hole>" in show(prog)
    body = delete_binding(after_if)
    assert body.enclosing is prog.definitions[0].value
    check(prog)
    assert show(prog) == COMPACTED
    assert {a: call_f(prog, a) for a in ("false", "true")} == before


def test_delete_binding_refuses_a_used_variable_and_leaves_the_term_alone():
    t = parse_term("x = 1\ny = 2\nhalt x\n")
    text = show(t)
    with pytest.raises(ChangeError, match="still used 1 time"):
        delete_binding(t)                           # refused before any change
    assert show(t) == text
    check(t)
    delete_binding(binding(t, "y"))
    assert show(t) == "x_1 = 1\nhalt x_1\n"
    check(t)


@pytest.mark.parametrize("prim", ["print(a)", "a[0] := a", 'fail "no" a', "a / a", "a % a"])
def test_delete_binding_refuses_an_effect(prim):
    t = parse_term(f"one = 1\na = tuple(one)\nu = {prim}\nhalt a\n")
    u = binding(t, "u")
    assert u.var.count == 0 and has_effect(u.prim)
    text = show(t)
    with pytest.raises(ChangeError, match="effect"):
        delete_binding(u)
    assert show(t) == text
    check(t)


@pytest.mark.parametrize("prim", ["a + a", "a == a", "-a", "!a", "a[0]", "tag a", "tuple(a, a)",
                                  "inj 0 N()", 'external "e"', "fun r h () {\n  r(a)\n}"])
def test_delete_binding_removes_a_pure_unused_primitive_and_its_uses(prim):
    setup = "b = 1\na = tuple(b)" if prim == "a[0]" else "a = 1"
    t = parse_term(f"{setup}\nu = {prim}\nhalt a\n")
    u, a = binding(t, "u"), var(t, "a")
    uses_in_prim = sum(1 for o in all_occurrences(u.prim) if o.var is a)
    count = a.count
    assert not has_effect(u.prim)
    delete_binding(u)
    assert a.count == count - uses_in_prim
    check(t)


def test_delete_binding_refuses_a_continuation_used_outside_its_handler():
    t = parse_term("cont k(x) {\n  halt x\n}\none = 1\nk(one)\n")
    with pytest.raises(ChangeError, match="still used outside its handler"):
        delete_binding(t)
    with pytest.raises(ChangeError, match="binds nothing"):
        delete_binding(first(t, ApplyCont))
    check(t)


DEAD_LOOP = '''\
one = 1
cont spin(i) {
  j = i + one
  spin(j)
}
halt one
'''


def test_delete_binding_removes_a_dead_loop_used_only_in_its_own_handler():
    t = parse_term(DEAD_LOOP)
    spin, one = binding(t, "spin"), var(t, "one")
    assert spin.cont.count == 1 and one.count == 2
    delete_binding(spin)
    assert spin.cont.count == 0 and one.count == 1
    check(t)
    assert show(t) == "one_1 = 1\nhalt one_1\n"
    assert evaluated(t) == (1, "")


def test_replace_deletes_the_old_part_and_keeps_counts():
    t = parse_term("a = 1\nb = 2\ncont k(x) {\n  s = x + a\n  t = s * a\n  halt t\n}\nk(b)\n")
    a, b, x = var(t, "a"), var(t, "b"), var(t, "x")
    k = binding(t, "k")
    old = binding(t, "s")
    assert (a.count, b.count, x.count) == (2, 1, 1)
    new = replace(old, halt(b))
    assert new.enclosing is k and k.handler is new and old.enclosing is None
    assert (a.count, b.count, x.count) == (0, 2, 0)
    assert all(o.next is None for o in all_occurrences(old))     # out of their rings
    check(t)
    assert evaluated(t) == (2, "")


def test_replace_with_a_placed_term_takes_it_from_its_place():
    t = parse_term("a = 1\ncont k() {\n  halt a\n}\ncont m() {\n  k()\n}\nm()\n")
    k_handler, jump_in_m = binding(t, "k").handler, binding(t, "m").handler
    replace(jump_in_m, k_handler)          # m's handler becomes k's: k's place is a hole
    assert binding(t, "k").handler is None and binding(t, "m").handler is k_handler
    assert var(t, "k").count == 0
    with pytest.raises(CheckError, match="a hole"):
        check(t)


def test_take_leaves_a_hole_that_check_and_show_report():
    t = parse_term("a = 1\nb = a + a\nhalt b\n")
    part = take(binding(t, "b"))
    assert part.enclosing is None and t.body is None
    with pytest.raises(CheckError, match="a hole: a part of this term was taken out"):
        check(t)
    assert show(t) == "a_1 = 1\n<hole>\n"
    with pytest.raises(ChangeError, match="not placed anywhere"):
        take(part)


def test_substitute_refuses_to_mix_continuations_and_variables():
    t = parse_term("cont k(x) {\n  halt x\n}\none = 1\nk(one)\n")
    k, one = var(t, "k"), var(t, "one")
    for x, y in ((k, one), (one, k)):
        with pytest.raises(ChangeError, match="cannot replace each other"):
            substitute(x, y)
    assert (k.count, one.count) == (1, 1)
    substitute(one, one)
    assert one.count == 1
    check(t)


def test_substitute_an_unused_variable_changes_nothing():
    t = parse_term("a = 1\nb = 2\nhalt a\n")
    a, b = var(t, "a"), var(t, "b")
    substitute(b, a)
    assert (a.count, b.count) == (1, 0)
    check(t)


def test_substitute_ten_thousand_occurrences_without_visiting_them():
    n = 10_000
    s = Seq()
    x, y = s.let(const(1), "x"), s.let(const(2), "y")
    s.let(tuple_(y, y, y), "u")
    big = s.let(tuple_(*[x] * n), "big")
    t = s.end(halt(big))
    xs = list(occurrences(x))
    assert x.count == len(xs) == n and y.count == 3
    links = [o.link for o in xs] + [o.link for o in occurrences(y)]
    substitute(x, y)
    after = [o.link for o in xs] + [o.link for o in list(occurrences(y))[n:]]
    assert sum(1 for l0, l1 in zip(links, after) if l0 is not l1) <= 1, "only a root is relinked"
    assert x.count == 0 and list(occurrences(x)) == [] and x.next is x and x.prev is x
    assert y.count == n + 3
    ring = list(occurrences(y))
    assert len(ring) == n + 3 and len({id(o) for o in ring}) == n + 3
    assert all(o.var is y for o in xs)
    assert all(o.prev.next is o and o.next.prev is o for o in ring)
    check(t)
    assert evaluated(t)[0] == [2] * n
    z = Var("z")
    o = occur(z)
    assert z.count == 1 and o.var is z
    substitute(y, x)                                   # and back: x now holds them all
    assert x.count == n + 3 and all(o.var is x for o in ring)


def test_a_variable_used_again_after_losing_every_occurrence():
    t = parse_term("a = 1\nb = tuple(a)\nc = 2\nhalt c\n")
    a, c = var(t, "a"), var(t, "c")
    delete_binding(binding(t, "b"))
    assert a.count == 0 and a.partition is None
    replace(first(t, Halt), halt(a))
    assert a.count == 1 and c.count == 0 and list(occurrences(a))[0].var is a
    check(t)
    assert evaluated(t) == (1, "")


def test_delete_binding_that_fails_leaves_the_term_unchanged():
    t = let_prim(const(1), lambda x: let_prim(const(2), lambda y: halt(y), "y"), "x")
    with pytest.raises(ChangeError):
        delete_binding(t)
    check(t)                                           # CheckError: a hole


# --- 3. Check: each invariant, broken on purpose --------------------------

BASE = '''\
one = 1
two = 2
cont join(a, b) {
  s = a + b
  halt s
}
cont arm() {
  join(one, two)
}
f = fun ret h3 (x) {
  y = x + one
  ret(y)
}
cont after(r) {
  case r { 2 -> arm; _ -> arm }
}
call f(one) -> after / uncaught
'''


@pytest.fixture
def base():
    t = parse_term(BASE)
    check(t)
    assert evaluated(t) == (3, "")
    return t


def test_check_rejects_a_wrong_uplink_of_a_term(base):
    binding(base, "s").body.enclosing = None
    with pytest.raises(CheckError, match="in cont join_3: the uplink of a Halt does not point"):
        check(base)


def test_check_rejects_a_wrong_uplink_of_a_primitive(base):
    binding(base, "y").prim.enclosing = base
    with pytest.raises(CheckError, match="the uplink of a Op does not point at its parent"):
        check(base)


def test_check_rejects_a_wrong_uplink_of_an_occurrence(base):
    h = binding(base, "s").body
    h.arg.enclosing = binding(base, "s")
    with pytest.raises(CheckError, match="an occurrence's uplink does not point at the node"):
        check(base)


def test_check_rejects_a_variable_bound_twice(base):
    one_let, two_let = binding(base, "one"), binding(base, "two")
    two_let.var = one_let.var                       # one's binder is still its own LetPrim
    with pytest.raises(CheckError, match="one_1 is bound twice"):
        check(base)


def test_check_rejects_a_wrong_binder_link(base):
    var(base, "b").binder = binding(base, "arm")
    with pytest.raises(CheckError, match="the binder link of b_5 does not point at its binding"):
        check(base)


def test_check_rejects_a_continuation_parameter_used_after_the_handler():
    s, kept = Seq(), {}

    def handler(k, x):
        kept["x"] = x
        return halt(x)
    s.cont(handler, ["x"])
    t = s.end(halt(kept["x"]))                    # x is in scope in the handler only
    with pytest.raises(CheckError, match=r"^x_2 is used out of its scope$"):
        check(t)


def test_check_rejects_a_let_prim_using_its_own_variable():
    t = let_prim(const(1), lambda x: halt(x), "x")
    t.prim = tuple_(t.var)                           # x = tuple(x): a LetPrim is not recursive
    t.prim.enclosing = t
    with pytest.raises(CheckError, match="x_1 is used out of its scope"):
        check(t)


def test_check_rejects_a_parameter_used_after_its_function():
    kept = {}

    def body(r, h, p):
        kept["p"] = p
        return apply_cont(r, p)
    t = let_prim(lam(body, ["p"]), lambda f: halt(kept["p"]), "f")
    with pytest.raises(CheckError, match=r"p_\d+ is used out of its scope"):
        check(t)


def test_check_rejects_a_free_continuation():
    t = let_cont(lambda k, x: halt(x),
                 lambda k: let_prim(lam(lambda r, h, y: apply_cont(k, y), ["y"]), lambda f: let_prim(
                     const(1), lambda one: apply(f, k, UNCAUGHT, one)), "f"), ["x"])
    with pytest.raises(CheckError, match=r"^in fun ret_\d+: k_1 is a free continuation of the "
                                         r"function \(bound outside it\)$"):
        check(t)


def test_check_rejects_a_jump_with_the_wrong_number_of_arguments():
    t = let_cont(lambda k, a, b: halt(a),
                 lambda k: let_prim(const(1), lambda x: apply_cont(k, x)), params=2)
    with pytest.raises(CheckError, match=r"k_1 expects 2 argument\(s\), and is given 1"):
        check(t)


def test_check_rejects_a_call_returning_to_a_continuation_of_two_parameters():
    t = let_prim(lam(lambda r, h, y: apply_cont(r, y)), lambda f: let_cont(
        lambda k, a, b: halt(a),
        lambda k: let_prim(const(1), lambda x: apply(f, k, UNCAUGHT, x)), params=2), "f")
    with pytest.raises(CheckError, match=r"k_5 expects 2 argument\(s\), and is given 1"):
        check(t)


def test_check_rejects_a_case_arm_with_a_parameter():
    t = let_cont(lambda k, a: halt(a), lambda k: let_prim(const(0), lambda x: case(x, {0: k})))
    with pytest.raises(CheckError, match=r"k_1 expects 1 argument\(s\), and is given 0"):
        check(t)
    t = let_cont(lambda k, a: halt(a), lambda k: let_prim(const(0), lambda x: case(x, {}, k)))
    with pytest.raises(CheckError, match=r"k_1 expects 1 argument\(s\), and is given 0"):
        check(t)


def test_check_rejects_a_return_with_two_values():
    t = let_prim(lam(lambda r, h, y: apply_cont(r, y, y), ["y"], cont="r"), lambda f: halt(f), "f")
    with pytest.raises(CheckError, match=r"in fun (r_\d+): \1 expects 1 argument\(s\), and is given 2"):
        check(t)


def test_check_rejects_halt_inside_a_function():
    t = let_prim(lam(lambda r, h, y: halt(y), ["y"]), lambda f: halt(f), "f")
    with pytest.raises(CheckError, match="halt inside a function"):
        check(t)
    prog = Program()
    prog.define(lam(lambda r, h, y: halt(y)), "public", name="g")
    with pytest.raises(CheckError, match=r"in definition g_1, in fun ret_2: halt inside a function"):
        check(prog)


def test_check_rejects_a_wrong_count(base):
    one = var(base, "one")
    one.count += 1
    with pytest.raises(CheckError, match=r"one_1 counts 4 occurrence\(s\), and the term has 3"):
        check(base)


def test_check_rejects_a_ring_missing_an_occurrence(base):
    one = var(base, "one")
    o = one.next
    o.prev.next, o.next.prev = o.next, o.prev      # out of the ring, but the count is kept
    with pytest.raises(CheckError, match="the ring of one_1 misses occurrences"):
        check(base)


def test_check_rejects_a_ring_holding_a_stranger(base):
    one = var(base, "one")
    o, stranger = one.next, occur(Var("z"))
    var_z = stranger.var
    stranger.prev.next, stranger.next.prev = stranger.next, stranger.prev
    stranger.prev, stranger.next = o.prev, o.next  # the stranger takes o's place in one's ring
    o.prev.next = o.next.prev = stranger
    assert var_z.count == 1 and one.count == 3
    with pytest.raises(CheckError, match="the ring of one_1 holds an occurrence that is not in"):
        check(base)


def test_check_rejects_a_deleted_occurrence_left_in_the_term(base):
    o = var(base, "two").next
    cps._forget(o)
    with pytest.raises(CheckError, match="an occurrence that was deleted is still in the term"):
        check(base)


def test_check_rejects_an_occurrence_of_the_wrong_class(base):
    h = binding(base, "s").body
    h.arg = occur(var(base, "join"))             # halt of a continuation
    h.arg.enclosing = h
    with pytest.raises(CheckError, match="a variable occurrence was expected"):
        check(base)


def test_check_rejects_case_values_out_of_order(base):
    c = first(base, Case)
    c.arms = [(3, c.arms[0][1]), (2, occur(var(base, "arm")))]
    c.arms[1][1].enclosing = c
    with pytest.raises(CheckError, match="the values of a case must be distinct integers, in order"):
        check(base)


def test_check_rejects_unknown_kinds(base):
    first(base, Apply).kind = "tail"
    with pytest.raises(CheckError, match="a call kind is closure or direct, not 'tail'"):
        check(base)
    first(base, Apply).kind = "direct"
    first(base, Lambda).kind = "method"
    with pytest.raises(CheckError, match="a function kind is closure or direct, not 'method'"):
        check(base)


def test_check_rejects_parts_of_the_wrong_class(base):
    y = binding(base, "y")
    y.prim, old = halt(var(base, "one")), y.prim
    y.prim.enclosing = y
    with pytest.raises(CheckError, match="a binding holds a primitive"):
        check(base)
    y.prim = old
    s = binding(base, "s")
    s.body = const(1)
    s.body.enclosing = s
    with pytest.raises(CheckError, match="the body of a LetPrim must be a term"):
        check(base)


def test_check_rejects_broken_definitions():
    prog = parse("public g_1 = 5\nunused = do {\n  x = 1\n  halt x\n}\n")
    check(prog)
    g, u = prog.definitions
    g.visibility = "unused"
    with pytest.raises(CheckError, match="visibility unused with a variable"):
        check(prog)
    g.visibility = "public"
    u.visibility = "private"
    with pytest.raises(CheckError, match="visibility private with no variable"):
        check(prog)
    u.visibility = "unused"
    u.enclosing = g
    with pytest.raises(CheckError, match="a definition's uplink must be empty"):
        check(prog)
    u.enclosing = None
    g.value = proj(0, g.var)
    g.value.enclosing = g
    with pytest.raises(CheckError, match="a static definition holds a value"):
        check(prog)
    g.value = const(5)
    g.value.enclosing = g
    g.body = u.body
    with pytest.raises(CheckError, match="either a static value or a dynamic term"):
        check(prog)


def test_check_messages_name_the_enclosing_definition_function_and_continuation():
    prog, kept = Program(), {}
    g = prog.declare("g")

    def other(r, h, p):
        kept["p"] = p
        return apply_cont(r, p)
    g_value = lam(other, ["p"])
    prog.define(lam(lambda ret, exn, x: let_cont(lambda k: apply_cont(ret, kept["p"]),
                                            lambda k: apply_cont(k), 0), ["x"]), "public", name="f")
    prog.define(g_value, "private", g)
    with pytest.raises(CheckError, match=r"^in definition f_1, in fun (ret_\d+), in cont k_\d+: "
                                         r"p_\d+ is used out of its scope$"):
        check(prog)


CLOSED = '''\
private h_1 = fun direct ret_2 exn_3 (a_4) {
  ret_2(a_4)
}
public g_5 = fun direct ret_6 exn_7 (x_8) {
  cont k_9(r_10) {
    s_11 = r_10 + x_8
    ret_6(s_11)
  }
  call direct h_1(x_8) -> k_9 / exn_7
}
'''


def test_check_closed_accepts_globals_and_parameters_only():
    prog = parse(CLOSED)
    check(prog, closed=True)
    check(prog)
    inner = parse(CLOSED.replace("  call direct h_1(x_8) -> k_9 / exn_7",
                                 "  f_12 = fun ret_13 exn_14 () {\n    ret_13(x_8)\n  }\n"
                                 "  call f_12() -> k_9 / exn_7"))
    check(inner)
    with pytest.raises(CheckError, match=r"in definition g_\d+, in fun ret_6, in fun ret_\d+: x_8 is a "
                                         r"free variable of the function \(bound outside it\)"):
        check(inner, closed=True)


def test_check_closed_rejects_a_free_local_of_a_top_level_lambda():
    t = let_prim(const(1), lambda one: let_prim(
        lam(lambda r, h, y: let_prim(op("+", y, one), lambda s: apply_cont(r, s)), ["y"]),
        lambda f: halt(f), "f"), "one")
    check(t)
    with pytest.raises(CheckError, match="one_1 is a free variable of the function"):
        check(t, closed=True)
    closed = let_prim(lam(lambda r, h, y: apply_cont(r, y)), lambda f: halt(f))
    check(closed, closed=True)


@pytest.mark.parametrize("text, parser, where", [
    ("f = fun r h (y) {\n  halt y\n}\nhalt f\n", parse_term, "in fun r_2"),
    ("private a = 1\nprivate b = 2\nprivate c = 3\nprivate g = fun r h (y) {\n  halt y\n}\n", parse,
     "in definition g_4, in fun r_5"),
])
def test_check_messages_use_the_printed_names(text, parser, where):
    root = parser(text)
    assert f"fun {where.split()[-1]} " in show(root)
    with pytest.raises(CheckError) as e:
        check(root)
    assert str(e.value) == f"{where}: halt inside a function (a function returns through its continuation)"


# --- 4. Parse ---------------------------------------------------------------

RICH = '''\
# every form of the language, once at least
private f_1 = fun ret_2 exn_3 (x_4, y_5) {
  s_6 = x_4 + y_5 @1:5
  ret_2(s_6)
}
public g_7 = fun direct ret_8 exn_9 (n_10) {
  one_11 = 1
  m_12 = n_10 / one_11 @2:7 / exn_9
  r_13 = m_12 % one_11 @2:9 / exn_9
  cont back_14(v_15) {
    ret_8(v_15)
  }
  call f_1(m_12, r_13) -> back_14 / exn_9   # a comment
}
private c_16 = "a\\"b\\\\c\\n\\td#{}"
private t_17 = tuple(c_16, f_1)
private e_18 = external "runtime_thing"
private nil_19 = inj 0 Nil()
private big_20 = -9223372036854775808
public main_21 = do {
  u_22 = ()
  b_23 = true
  nb_24 = !b_23
  k_25 = -5
  nk_26 = -k_25
  cell_27 = tuple(k_25)
  w_28 = cell_27[0] := nk_26
  v_29 = cell_27[0]
  cons_30 = inj 1 Cons(v_29, nil_19)
  tg_31 = tag cons_30
  cont done_32(res_33) {
    p_34 = print(res_33, cons_30, t_17, nb_24, u_22, big_20)
    halt res_33
  }
  cont zero_35() {
    z_36 = fail "no clause matches the value" v_29 @3:1 / uncaught
    done_32(z_36)
  }
  cont other_37() {
    cont back_38(q_39) {
      done_32(q_39)
    }
    call direct g_7(v_29) -> back_38 / uncaught @4:2
  }
  case tg_31 { 0 -> zero_35; 1 -> other_37; _ -> zero_35 }
}
unused = do {
  v_40 = 1
  h_41 = fun ret_42 exn_43 () {
    cmp_44 = v_40 >= v_40
    cont caught_45(e_46) {
      ret_42(e_46)
    }
    cont raising_47() {
      nf_48 = inj 3 NotFound()
      caught_45(nf_48) raise @6:2
    }
    case cmp_44 { 0 -> raising_47; 1 -> raising_47 }
  }
  empty_49 = print()
  halt empty_49
}
'''


def test_the_rich_program_parses_checks_prints_and_runs():
    prog = parse(RICH)
    check(prog)
    printed = "".join(line.split("   #")[0] + "\n" for line in RICH.splitlines()[1:])
    assert show(prog) == printed                      # comments go, everything else stays
    out = io.StringIO()
    values = cps.Interpreter(out, externals={"runtime_thing": 7}).run(prog)
    assert out.getvalue() == ('5 Cons(5, Nil) ("a\\"b\\\\c\\n\\td#{}", <function>) false () '
                              '-9223372036854775808\n\n')
    by_hint = {v.hint: x for v, x in values.items()}
    assert by_hint["c"] == 'a"b\\c\n\td#{}' and by_hint["e"] == 7 and by_hint["main"] == 5
    assert by_hint["big"] == -2**63 and type(by_hint["t"][1]) is Function
    with pytest.raises(Stop, match="^runtime error: unknown external runtime_thing$"):
        run(prog, io.StringIO())


def test_every_truncation_of_a_program_is_a_compile_error_or_a_valid_program():
    valid = 0
    for i in range(len(RICH)):
        try:
            prog = parse(RICH[:i])
        except CompileError as e:
            assert re.match(r"<cps>:\d+:\d+: error: ", str(e))
            continue
        check(prog)
        valid += 1
    assert 0 < valid < len(RICH) // 4


def error_of(text, parser=parse_term, **kwargs):
    with pytest.raises(CompileError) as e:
        parser(text, **kwargs)
    return str(e.value)


@pytest.mark.parametrize("text, line, col, message", [
    ("x = 1\ny = z\nhalt y\n", 2, 5, "z is not bound"),
    ("x = 1\nx = 2\nhalt x\n", 2, 1, "x is bound twice (every name must be bound once)"),
    ("cont k() {\n  x = 1\n  halt x\n}\ny = tuple(k)\nhalt y\n", 5, 11,
     "k is a continuation; a variable is expected here"),
    ("x = 1\nx(x)\n", 2, 1, "x is not a continuation; a continuation is expected here"),
    ("cont k(a) {\n  halt a\n}\nf = fun r h12 (x) {\n  k(x)\n}\nhalt f\n", 5, 3,
     "k is used outside the function that binds it"),
    ("cont k(a) {\n  halt a\n}\nk(a)\n", 4, 3, "a is used out of its scope"),
    ("f = fun r h13 (p) {\n  r(p)\n}\nhalt p\n", 4, 6, "p is used out of its scope"),
    ("x = 1 $ 2\n", 1, 7, "unexpected character '$'"),
    ("x = 1\nhalt x\nhalt x\n", 3, 1, "expected the end of the text after the last term, found 'halt'"),
    ("x = 1\ncont k() {\n  halt x\n}\ncase x { 1 -> k; 1 -> k }\n", 5, 18, "case 1 appears twice"),
    ("x = tuple(\n", 1, 11, "expected a variable, found a line break"),
    ("x = closure()\nhalt x\n", 1, 13, "a closure needs its code"),
    ("", 1, 1, "expected a binding, 'cont', or a final term (a jump, call, case or halt), "
              "found the end of the text"),
])
def test_parse_errors_say_where(text, line, col, message):
    assert error_of(text).split("\n")[0] == f"<cps>:{line}:{col}: error: {message}"


def test_parse_error_rendering_shows_the_line_and_a_caret():
    text = "x = 1\nsum = x +   nope\nhalt sum\n"
    assert error_of(text, name="t.cps") == (
        "t.cps:2:13: error: nope is not bound\n"
        "sum = x +   nope\n"
        "            ^")
    assert error_of("x = 1\n\thalt x\nhalt x\n", name="t.cps") == (
        "t.cps:3:1: error: expected the end of the text after the last term, found 'halt'\n"
        "halt x\n"
        "^~~~")
    assert error_of("x = 1\n\tx = 2\n").endswith("\n\tx = 2\n\t^")       # tabs kept for the caret


@pytest.mark.parametrize("text, line, col, message", [
    ("public g = 1\nprivate g = 2\n", 2, 9, "g is defined twice"),
    ("public g = 1\nprivate h = g + g\n", 2, 17,
     "a static definition must be a value; use 'do { … }' to compute it"),
    ("x = 1\n", 1, 1, "expected a definition: 'public', 'private' or 'unused', found 'x'"),
    ("public g = do {\n  x = 1\n  halt x\n", 4, 1,
     "'}' after the block's last term, found the end of the text"),
    ("public g = do {\n  halt g\n}\nprivate f = fun k h14 () {\n  k(h)\n}\n", 5, 5, "h is not bound"),
    ("unused g = do {\n  halt g\n}\n", 1, 8, "expected '=', found 'g'"),
])
def test_program_parse_errors_say_where(text, line, col, message):
    first_line = error_of(text, parse).split("\n")[0]
    assert first_line.startswith(f"<cps>:{line}:{col}: error: ") and first_line.endswith(message)


def test_globals_are_in_scope_everywhere_but_locals_are_not():
    prog = parse("public g = fun r h15 (x) {\n  call h(x) -> r / h15\n}\npublic h = fun s h16 (y) {\n  s(y)\n}\n")
    check(prog)
    assert error_of("public g = do {\n  a = 1\n  halt a\n}\npublic h = do {\n  halt a\n}\n",
                    parse).startswith("<cps>:6:8: error: a is used out of its scope")


def test_locations_read_back_as_positions_or_spans():
    text = "x = 7\nz = 0\ny = x / z @2:3 / uncaught\nhalt y\n"
    t = parse_term(text)
    assert show(t) == "x_1 = 7\nz_2 = 0\ny_3 = x_1 / z_2 @2:3 / uncaught\nhalt y_3\n"
    with pytest.raises(Stop, match=r"^2:3: runtime error: division by zero$"):
        evaluate(t)
    source = Source("prog.l", "let a = 1\nlet b = a / 0\n")
    t = parse_term(text, source=source)
    p = first(t, LetPrim).body.body.prim
    assert type(p.loc) is Span and cps.line_col(p.loc) == (2, 3)
    assert show(t).splitlines()[2].endswith("@2:3 / uncaught")
    with pytest.raises(RunError) as e:
        evaluate(t)
    assert "division by zero" in str(e.value) and "prog.l:2:3" in str(e.value)


def test_a_location_outside_the_l_source_is_reported_at_the_location():
    message = error_of("x = 1\ny = x / x @9:1 / uncaught\nhalt y\n", source=Source("l", "a\nb\n"))
    assert message.split("\n")[0] == "<cps>:2:11: error: the location 9:1 is outside the L source"


def test_nesting_too_deep_is_a_compile_error():
    text = "".join(f"cont k{i}() {{\n" for i in range(6000)) + "x = 1\nhalt x\n"
    assert "error: the text is nested too deeply" in error_of(text)
    assert sys.getrecursionlimit() < 20_000                    # restored


@pytest.mark.parametrize("text", ["x = 1\nhalt x\n", "x = 1 # one\n\n\nhalt x # the end",
                                  "\n# leading comment\nx = 1\r\nhalt x\r\n",
                                  "x\t=\t1\nhalt    x\n"])
def test_comments_blank_lines_and_spaces(text):
    assert show(parse_term(text)) == "x_1 = 1\nhalt x_1\n"


@PROPERTY
@given(st.text(max_size=30), st.integers(), st.sampled_from(["x", "a_1", "_", "tuple", "fun_2", "é",
                                                             "", "1x", "k_"]))
def test_constants_and_hints_round_trip(s, n, hint):
    t = let_prim(const(s), lambda a: let_prim(const(n), lambda b: let_prim(
        tuple_(a, b), lambda c: halt(c), hint), hint), hint)
    again = parse_term(show(t))
    assert show(again) == show(t)
    assert evaluate(again) == [s, n]
    assert [v.hint for v in binders(again)] == [hint if re.fullmatch(r"[A-Za-z_]\w*", hint, re.ASCII)
                                                else "x"] * 3


MUTATION_PIECES = list('{}()[],;:=-+*/%<>!@#"\\\n _aAx019') + [
    "cont ", "call ", "halt ", "fun ", "case ", "direct ", "tuple", "closure", "->", ":=", "_ -> ",
    "public ", "unused = do {", "x_1", "k_2", "ret_2", "@1:2", "}\n", "{\n"]


@st.composite
def mutated(draw):
    b = draw(st.one_of(terms(depth=3), programs(depth=2)))
    text = show(b.root)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "drop_line", "dup_line",
                                     "swap_lines", "swap_words"]))
        i = draw(st.integers(0, max(0, len(text) - 1)))
        lines = text.split("\n")
        j, k = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
        if kind == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 4)):]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(MUTATION_PIECES)) + text[i:]
        elif kind == "replace":
            text = text[:i] + draw(st.sampled_from(MUTATION_PIECES)) + text[i + 1:]
        elif kind == "drop_line":
            text = "\n".join(lines[:j] + lines[j + 1:])
        elif kind == "dup_line":
            text = "\n".join(lines[:j] + [lines[k]] + lines[j:])
        elif kind == "swap_lines":
            lines[j], lines[k] = lines[k], lines[j]
            text = "\n".join(lines)
        else:
            words = re.findall(r"\w+", text)
            if len(words) >= 2:
                a, c = draw(st.sampled_from(words)), draw(st.sampled_from(words))
                text = re.sub(rf"\b{a}\b", c, text, count=1)
    return type(b.root) is Program, text


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_texts_parse_or_fail_with_a_located_compile_error(case_):
    is_program, text = case_
    try:
        root = (parse if is_program else parse_term)(text)
    except CompileError as e:
        message = str(e).split("\n")
        m = re.match(r"<cps>:(\d+):(\d+): error: \S", message[0])
        assert m, message
        line, col = int(m[1]), int(m[2])
        source_line = text.split("\n")[line - 1]
        assert message[1] == source_line and 1 <= col <= len(source_line) + 1
        assert message[2].strip().startswith("^")
        event("compile error")
        return
    try:
        check(root)
    except CheckError:
        event("check error")
        return                     # arity, halt in a function…: check's business, not the parser's
    event("valid")
    assert show(reparse(root)) == show(root)


def test_fail_with_two_arguments_round_trips():
    t = let_prim(const(1), lambda a: let_prim(fail("m", a, a), lambda u: halt(u)))
    check(t)
    assert show(parse_term(show(t))) == show(t)


# --- 5. Interpret ---------------------------------------------------------

SEED_LOOP = '''\
two = 2
cont k(x) {
  y = two + x
  k(y)
}
k(two)
'''


def test_the_seed_loop_runs_on_without_growing_the_stack():
    t = parse_term(SEED_LOOP)
    check(t)
    interp = cps.Interpreter(io.StringIO())
    code, env = interp.block(t), {None: 0}
    for _ in range(10_000):
        code, env = code(env)
        assert code is not None                      # never halts
    assert env[var(t, "x")] == 2 * 10_000            # k(2), k(4), …: the 10,000th jump passes 20,000


def python_depth():
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


COUNT = '''\
zero = 0
one = 1
n = %d
cont loop(i, acc) {
  cont done() {
    halt acc
  }
  cont again() {
    j = i - one
    a = acc + i
    loop(j, a)
  }
  z = i == zero
  case z { 0 -> again; 1 -> done }
}
loop(n, zero)
'''


def test_a_loop_of_100000_iterations_runs_in_constant_python_stack():
    t = parse_term(COUNT % 100_000)
    check(t)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(python_depth() + 60)    # far fewer frames than iterations
    try:
        assert evaluate(t) == 100_000 * 100_001 // 2
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize("a, b, quotient, remainder", [
    (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (7, 2, 3, 1), (0, -5, 0, 0),
    (-2**63, -1, -2**63, 0), (2**63 - 1, 2, 2**62 - 1, 1), (-2**63, 7, -1317624576693539401, -1)])
def test_division_and_remainder_are_c_s(a, b, quotient, remainder):
    t = parse_term(f"a = {a}\nb = {b}\nq = a / b\nr = a % b\nt = tuple(q, r)\nhalt t\n")
    assert evaluate(t) == [quotient, remainder]


@pytest.mark.parametrize("operator", ["/", "%"])
def test_division_by_zero_stops_with_a_located_error(operator):
    with pytest.raises(Stop, match=r"^4:9: runtime error: division by zero$"):
        evaluate(parse_term(f"a = 1\nz = 0\nq = a {operator} z @4:9\nhalt q\n"))
    with pytest.raises(Stop, match=r"^runtime error: division by zero$"):
        evaluate(parse_term(f"a = 1\nz = 0\nq = a {operator} z\nhalt q\n"))
    source = Source("m.l", "\n\n\nprint(1 / 0)\n")
    t = let_prim(const(1), lambda a: let_prim(const(0), lambda z: let_prim(
        op(operator, a, z, loc=Span(source, 11, 12)), lambda q: halt(q))))
    with pytest.raises(RunError) as e:
        evaluate(t)
    assert str(e.value).startswith("m.l:4:9: ") and "division by zero" in str(e.value)


@pytest.mark.parametrize("text, value", [
    ("a = 9223372036854775807\nb = 1\nc = a + b\nhalt c", -2**63),
    ("a = -9223372036854775808\nb = 1\nc = a - b\nhalt c", 2**63 - 1),
    ("a = -9223372036854775808\nc = -a\nhalt c", -2**63),
    ("a = 4611686018427387904\nb = 4\nc = a * b\nhalt c", 0),
    ("a = 3037000500\nc = a * a\nhalt c", 3037000500**2 - 2**64),
    ("a = 1\nb = 2\nc = a < b\nd = !c\nhalt d", False),
    ("a = 1\nb = 1\nc = a >= b\nhalt c", True),
])
def test_arithmetic_wraps_to_64_bits(text, value):
    result = evaluate(parse_term(text))
    assert result == value and type(result) is type(value)


PRINTS = "public g = 5\nunused = do {\n  s = \"a\\n\"\n  t = tuple(s, g)\n  n = inj 0 Nil()\n  c = inj 1 Cons(g, n)\n  f = fun r h17 (x) {\n    r(x)\n  }\n  u = print(s, t, c, n, f)\n  b = true\n  q = tuple(t, b, u)\n  v = print(q)\n  e = tuple()\n  w = print()\n  cl = closure(f, g)\n  last = print(e, cl, b)\n  halt w\n}\n"


def test_print_writes_l_values():
    out = io.StringIO()
    values = run(parse(PRINTS), out)
    assert out.getvalue() == ('a\n ("a\\n", 5) Cons(5, Nil) Nil <function>\n'
                              '(("a\\n", 5), true, ())\n'
                              '\n'
                              '() <function> true\n')
    assert [v.hint for v in values] == ["g"]           # unused definitions store nothing


def test_show_value_quotes_strings_only_inside_values():
    assert show_value('say "hi"\t\\') == 'say "hi"\t\\'
    assert show_value(['say "hi"\t\\']) == '("say \\"hi\\"\\t\\\\")'
    assert show_value(Injected(1, "Some", ["x"])) == 'Some("x")'
    assert show_value(Injected(0, "None", [])) == "None"
    assert show_value([]) == show_value(()) == "()"
    assert show_value([False, -3, [1]]) == "(false, -3, (1))"


RECURSION = '''\
private sum_to = fun ret h18 (n) {
  zero = 0
  z = n <= zero
  cont base() {
    ret(zero)
  }
  cont step() {
    one = 1
    m = n - one
    cont after(r) {
      s = n + r
      ret(s)
    }
    call sum_to(m) -> after / h18 @5:3
  }
  case z { 0 -> step; 1 -> base }
}
private count = fun cret h19 (c, acc) {
  czero = 0
  cz = c <= czero
  cont cbase() {
    cret(acc)
  }
  cont cstep() {
    cone = 1
    cm = c - cone
    ca = acc + cone
    call count(cm, ca) -> cret / h19 @9:9
  }
  case cz { 0 -> cstep; 1 -> cbase }
}
public main = do {
  top = %d
  top_zero = 0
  cont k(res) {
    halt res
  }
  call %s -> k / uncaught
}
'''


def recursion(n, call):
    return parse(RECURSION % (n, call))


def main_value(prog, **kwargs):
    values = run(prog, io.StringIO(), **kwargs)
    (main,) = [d.var for d in prog.definitions if d.var is not None and d.var.hint == "main"]
    return values[main]


def test_non_tail_recursion_stops_exactly_past_the_stack_limit():
    assert main_value(recursion(999, "sum_to(top)"), stack_limit=1000) == 999 * 1000 // 2
    with pytest.raises(Stop, match=r"^5:3: runtime error: stack overflow: the program nested "
                                   r"calls too deeply$"):
        main_value(recursion(1000, "sum_to(top)"), stack_limit=1000)


def test_tail_recursion_runs_at_constant_depth():
    assert main_value(recursion(200_000, "count(top, top_zero)")) == 200_000
    assert main_value(recursion(5_000, "count(top, top_zero)"), stack_limit=2) == 5_000


def test_flat_closures_keep_the_values_of_their_iteration():
    text = '''\
zero = 0
one = 1
three = 3
nil = inj 0 Nil()
cont loop(i, fs) {
  cont done() {
    cont walk(l) {
      t = tag l
      cont end() {
        halt zero
      }
      cont next() {
        f = l[0]
        rest = l[1]
        cont back(v) {
          u = print(v)
          walk(rest)
        }
        call f() -> back / uncaught
      }
      case t { 0 -> end; 1 -> next }
    }
    walk(fs)
  }
  cont again() {
    g = fun r h20 () {
      twice = i + i
      r(twice)
    }
    more = inj 1 Cons(g, fs)
    j = i - one
    loop(j, more)
  }
  z = i == zero
  case z { 0 -> again; 1 -> done }
}
loop(three, nil)
'''
    t = parse_term(text)
    check(t)
    assert evaluated(t) == (0, "2\n4\n6\n")


def test_runtime_errors_of_the_interpreter():
    with pytest.raises(Stop, match="^runtime error: no case for the value$"):
        evaluate(parse_term("x = 5\ncont k() {\n  halt x\n}\ncase x { 1 -> k }\n"))
    assert evaluate(parse_term("x = 5\ncont k() {\n  halt x\n}\ncase x { 1 -> k; _ -> k }\n")) == 5
    with pytest.raises(Stop, match=r"^7:1: runtime error: this is not a function$"):
        evaluate(parse_term("x = 5\ncont k(r) {\n  halt r\n}\ncall x(x) -> k / uncaught @7:1\n"))
    with pytest.raises(Stop, match='^2:2: runtime error: boom "x"$'):
        evaluate(parse_term('s = "x"\nu = fail "boom" s @2:2\nhalt u\n'))
    with pytest.raises(Stop, match="^runtime error: the definition of h has not run yet$"):
        run(parse("public g = do {\n  x = tuple(h)\n  halt x\n}\npublic h = do {\n  y = 1\n"
                  "  halt y\n}\n"), io.StringIO())


def test_booleans_choose_case_arms_and_cells_can_be_written():
    text = '''\
one = 1
two = 2
cell = tuple(one)
b = one < two
cont yes() {
  w = cell[0] := two
  v = cell[0]
  p = tuple(v, w)
  halt p
}
cont no() {
  halt one
}
case b { 0 -> no; 1 -> yes }
'''
    assert evaluate(parse_term(text)) == [2, ()]


def test_static_definitions_exist_before_dynamic_ones_run():
    text = '''\
private c = 12
public t = tuple(f, c)
public main = do {
  g = t[0]
  x = t[1]
  cont k(r) {
    halt r
  }
  call g(x) -> k / uncaught
}
private f = fun ret h21 (a) {
  b = a * a
  ret(b)
}
'''
    prog = parse(text)
    check(prog)
    assert main_value(prog) == 144


def test_a_closure_record_is_called_with_itself_as_first_argument():
    text = '''\
private code = fun direct ret h22 (env, x) {
  y = env[1]
  s = x + y
  ret(s)
}
public main = do {
  ten = 10
  c = closure(code, ten)
  one = 1
  cont k(r) {
    halt r
  }
  call c(one) -> k / uncaught
}
'''
    prog = parse(text)
    check(prog, closed=True)
    assert show(parse(show(prog))) == show(prog)
    assert "c_10 = closure(code_1, ten_9)" in show(prog)
    assert type(first(prog, cps.MakeClosure)) is cps.MakeClosure
    assert main_value(prog) == 11


def test_a_jump_is_a_parallel_assignment():
    swap = '''\
one = 1
two = 2
cont loop(a, b, n) {
  cont done() {
    t = tuple(a, b)
    halt t
  }
  cont again() {
    m = n - one
    loop(b, a, m)
  }
  case n { 0 -> done; _ -> again }
}
loop(one, two, one)
'''
    t = parse_term(swap)
    check(t)
    assert evaluate(t) == [2, 1]


def test_evaluate_handles_the_nesting_that_run_handles():
    n = 1000
    text = "".join(f"cont k{i}(x{i}) {{\n" for i in range(n)) + f"halt x{n - 1}\n"
    text += "".join(f"}}\nk{i}(x{i - 1})\n" for i in reversed(range(1, n))) + "}\nc = 7\nk0(c)\n"
    t = parse_term(text)
    check(t)
    prog = Program()
    prog.define(t, "public", name="g")
    assert list(run(prog, io.StringIO()).values()) == [7]
    assert evaluate(t) == 7


def test_traversals_accept_a_program():
    prog = parse("public g = 1\npublic h = tuple(g)\n")
    assert size(prog) == 5 and len(list(binders(prog))) == 2
    assert len(list(all_occurrences(prog))) == 1
    assert free_variables(prog) == []


# --- The Change functions that chapter 8 added ------------------------------

def test_redirect_changes_one_occurrence_only():
    t = parse_term("a = 1\nb = 2\ncont k() {\n  p = tuple(a, a, b)\n  halt p\n}\ncase a { 1 -> k; _ -> k }\n")
    a, b = var(t, "a"), var(t, "b")
    tup = binding(t, "p").prim
    o = tup.fields[1]
    new = cps.redirect(o, b)
    assert tup.fields[1] is new and new.var is b and new.enclosing is tup
    assert (a.count, b.count) == (2, 2) and o.next is None
    c = first(t, Case)
    k = var(t, "k")
    cps.redirect(c.default, k)                       # an arm, then the scrutinee
    cps.redirect(c.scrutinee, b)
    assert c.scrutinee.var is b and k.count == 2 and (a.count, b.count) == (1, 3)
    check(t)
    assert show(t).endswith("p_4 = tuple(a_1, b_2, b_2)\n  halt p_4\n}\ncase b_2 { 1 -> k_3; _ -> k_3 }\n")


def test_swap_prim_detaches_the_old_primitive():
    t = parse_term("a = 1\nf = fun r h23 (x) {\n  s = x + a\n  r(s)\n}\nhalt f\n")
    f, a = binding(t, "f"), var(t, "a")
    old = cps.swap_prim(f, const(3))
    assert type(old) is Lambda and old.enclosing is None and f.prim.enclosing is f
    assert a.count == 1                               # detached, not deleted
    with pytest.raises(CheckError, match="a_1 counts 1 occurrence"):
        check(t)
    delete(old)
    assert a.count == 0
    check(t)
    assert evaluate(t) == 3


def test_diagram_draws_a_box_per_scope_and_an_arrow_per_jump():
    svg = cps.diagram(parse(STEP1))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<rect") == 4                 # the function and its three continuations
    assert svg.count("marker-end=") == 3           # after_if_4(…) and the two case arms
    assert "&quot;Failure&quot;" in svg


def test_a_diagram_with_a_title_stands_alone_and_marks_colour_names():
    import xml.etree.ElementTree as ET
    program = parse(STEP1)
    plain = cps.diagram(program)
    assert "<title>" not in plain and 'fill="#ffffff"' not in plain       # chapter 9 shows this form
    cond = program.definitions[0].value.params[0]
    svg = cps.diagram(program, marks={cond: "#dc2626"}, title='f_1 & its "join"')
    root = ET.fromstring(svg)                                            # well-formed, title escaped
    ns = "{http://www.w3.org/2000/svg}"
    assert root.find(ns + "title").text == 'f_1 & its "join"'
    assert root.get("fill") == "#0f172a"
    assert [r.get("fill") for r in root.iter(ns + "rect")][0] == "#ffffff"     # the card, under all
    marked = [t.text for t in root.iter(ns + "tspan")]
    assert marked == ["cond_4"] * 2                                     # its binding and its use
    assert svg.count("<rect") == 5                                       # four boxes and the card


def test_beside_puts_pictures_side_by_side_in_one_svg():
    import xml.etree.ElementTree as ET
    a, b = cps.diagram(parse(STEP1)), cps.diagram(parse_term("x = 1\nhalt x"))
    width = lambda svg: float(re.search(r'width="([\d.]+)"', svg).group(1))
    both = cps.beside([("before", a), ("after", b)], "two <pictures>")
    root = ET.fromstring(both)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.find(ns + "title").text == "two <pictures>"
    inner = root.findall(ns + "svg")
    assert [float(s.get("x")) for s in inner] == [10.0, 10.0 + width(a) + 28]
    assert width(both) == pytest.approx(10 + width(a) + 28 + width(b) + 10, abs=1)


# --- 7. The second continuation: handlers, raises, uncaught ------------------------------------

RAISING = '''\
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
private divide_10 = fun ret_11 exn_12 (a_13, b_14) {
  q_15 = a_13 / b_14 @7:3 / exn_12
  ret_11(q_15)
}
public main_16 = do {
  one_17 = %s
  cont handler_18(e_19) {
    t_20 = tag e_19
    u_21 = print(e_19)
    cont caught_22() {
      halt one_17
    }
    cont again_23() {
      uncaught(e_19)
    }
    case t_20 { 3 -> caught_22; _ -> again_23 }
  }
  cont back_24(r_25) {
    cont back_26(s_27) {
      halt s_27
    }
    call divide_10(r_25, r_25) -> back_26 / handler_18 @4:1
  }
  call find_1(one_17) -> back_24 / handler_18 @3:1
}
'''


def test_a_raise_in_a_callee_reaches_the_handler_of_its_caller():
    # find(1) raises NotFound to its own exception continuation, which the call bound to the
    # caller's local handler: the handler prints it and halts with its argument.
    prog = parse(RAISING % "1")
    check(prog)
    out = io.StringIO()
    values = run(prog, out)
    assert out.getvalue() == "NotFound\n"
    assert values[prog.definitions[2].var] == 1


def test_a_failing_primitive_raises_its_predefined_exception_to_the_handler():
    # find(0) returns 0; divide(0, 0) fails: DivisionByZero (tag 0) goes to the handler, which
    # passes it on to uncaught: the report is the division's, at the division.
    prog = parse(RAISING % "0")
    out = io.StringIO()
    with pytest.raises(Stop, match=r"^7:3: runtime error: division by zero$"):
        run(prog, out)
    assert out.getvalue() == "DivisionByZero\n"


def test_an_uncaught_raise_reports_the_exception_at_its_raise():
    text = 'private f_1 = fun ret_2 exn_3 (x_4) {\n  s_5 = "boom"\n  e_6 = inj 4 Failure(s_5)\n' \
           '  exn_3(e_6) raise @5:7\n}\npublic main_7 = do {\n  one_8 = 1\n  cont k_9(r_10) {\n' \
           '    halt r_10\n  }\n  call f_1(one_8) -> k_9 / uncaught @9:1\n}\n'
    prog = parse(text)
    check(prog)
    assert show(prog) == text
    with pytest.raises(Stop, match=r'^5:7: runtime error: uncaught exception Failure\("boom"\)$'):
        run(prog, io.StringIO())


def test_handlers_and_raise_sites_print_and_parse_back():
    prog = parse(RAISING % "1")
    text = show(prog)
    assert text == RAISING % "1"
    again = parse(text)
    check(again)
    assert show(again) == text
    raises = [t for t in subterms(again) if type(t) is ApplyCont and t.raises]
    assert [cps.line_col(t.loc) for t in raises] == [(2, 5)]
    calls = [t for t in subterms(again) if type(t) is Apply]
    assert [t.exn.var.hint for t in calls] == ["handler", "handler"]
    (division,) = [n for n in walk(again) if type(n) is cps.Op and n.op == "/"]
    assert division.exn.var is again.definitions[1].value.exn


def test_a_raise_is_built_as_a_jump_with_a_site():
    def body(ret, exn, x):
        return let_cont(lambda h, e: apply_cont(exn, e),      # a handler that passes it on
                        lambda h: let_prim(cps.inject(4, "Failure", x), lambda e:
                                           cps.raise_(h, e, loc=cps.Pos(3, 9)), "e"),
                        ["e"], "handler")
    prog = Program()
    f = prog.define(lam(body, ["x"]), "public", name="f")
    prog.define(let_prim(const("no"), lambda s: let_cont(lambda k, r: halt(r), lambda k:
                apply(f, k, prog.uncaught, s, loc=cps.Pos(8, 1)), ["r"])), "unused")
    check(prog)
    assert "\n  handler_5(e_7) raise @3:9\n" in show(prog)
    with pytest.raises(Stop, match=r'^3:9: runtime error: uncaught exception Failure\("no"\)$'):
        run(prog, io.StringIO())
    again = parse(show(prog))
    check(again)
    assert show(again) == show(prog)


def test_check_rejects_an_escaping_handler():
    # a handler used as a value
    t = let_cont(lambda h, e: halt(e), lambda h: let_prim(tuple_(h), lambda x: halt(x)), ["e"], "h")
    with pytest.raises(CheckError, match=r"a variable occurrence was expected, not <ContOcc of h>"):
        check(t)
    # a handler captured by a function: the function raises to it
    t = let_cont(lambda h, e: halt(e), lambda h: let_prim(
        lam(lambda r, exn, y: let_prim(const(1), lambda one: apply(y, r, h, one)), ["y"]),
        lambda f: halt(f), "f"), ["e"], "h")
    with pytest.raises(CheckError, match=r"h_1 is a free continuation of the function"):
        check(t)
    with pytest.raises(CompileError, match="k is a continuation; a variable is expected here"):
        parse_term("cont k(e) {\n  halt e\n}\nx = tuple(k)\nhalt x\n")


def test_check_rejects_a_call_whose_exception_continuation_is_not_a_continuation():
    t = let_prim(lam(lambda r, exn, y: apply_cont(r, y)), lambda f: let_cont(
        lambda k, a: halt(a), lambda k: let_prim(const(1), lambda x: apply(f, k, x, x)), ["a"]), "f")
    with pytest.raises(CheckError, match=r"a continuation occurrence was expected, not <Occ of x>"):
        check(t)
    with pytest.raises(CompileError, match="x is not a continuation; a continuation is expected here"):
        parse_term("x = 1\ncont k(a) {\n  halt a\n}\ncall x(x) -> k / x\n")
    with pytest.raises(CompileError, match="expected '/' and the exception continuation"):
        parse_term("x = 1\ncont k(a) {\n  halt a\n}\ncall x(x) -> k\n")


def test_check_rejects_a_handler_of_two_parameters_and_one_continuation_bound_twice():
    t = let_prim(lam(lambda r, exn, y: apply_cont(r, y)), lambda f: let_cont(
        lambda k, a: halt(a), lambda k: let_cont(lambda h, a, b: halt(a), lambda h: let_prim(
            const(1), lambda x: apply(f, k, h, x)), ["a", "b"], "h"), ["a"]), "f")
    with pytest.raises(CheckError, match=r"h_\d+ expects 2 argument\(s\), and is given 1"):
        check(t)
    f = lam(lambda r, exn, y: apply_cont(r, y))
    f.exn = f.cont                                         # one continuation for both barrels
    t = let_prim(f, lambda g: halt(g), "f")
    with pytest.raises(CheckError, match=r"ret_\d+ is bound twice"):
        check(t)
    with pytest.raises(CompileError, match=r"r is bound twice"):
        parse_term("f = fun r r (x) {\n  r(x)\n}\nhalt f\n")


def test_uncaught_is_the_top_levels_only():
    with pytest.raises(CompileError, match="uncaught is the top level's exception continuation"):
        parse("private f = fun r h (x) {\n  one = 1\n  cont k(v) {\n    r(v)\n  }\n"
              "  call f(one) -> k / uncaught\n}\n")


def test_a_call_naming_a_local_handler_is_not_a_tail_call():
    # the loop calls itself returning to its own ret, but raising to a local handler: each call
    # keeps a frame, so a limit of 2 stops it; the same loop raising to its own exn does not.
    loop = '''\
private count = fun ret exn (n) {
  zero = 0
  done = n <= zero
  cont stop() {
    ret(n)
  }
  cont go() {
    cont handler(e) {
      exn(e)
    }
    one = 1
    m = n - one
    call count(m) -> ret / %s @4:4
  }
  case done { 0 -> go; 1 -> stop }
}
public main = do {
  top = 50
  cont k(res) {
    halt res
  }
  call count(top) -> k / uncaught
}
'''
    assert main_value(parse(loop % "exn"), stack_limit=2) == 0
    with pytest.raises(Stop, match="stack overflow"):
        main_value(parse(loop % "handler"), stack_limit=2)


def test_a_diagram_draws_an_arrow_to_the_handler_a_call_names():
    with_handler = parse(RAISING % "1").definitions[2]
    without = parse((RAISING % "1").replace("/ handler_18", "/ uncaught")).definitions[2]
    arrows = lambda d: cps.diagram(d).count("marker-end=")
    assert arrows(with_handler) == arrows(without) + 2     # the two calls' second arrows
