"""CPS conversion (chapter 7) and closure conversion (chapter 8), judged against the reference interpreter.

Every corpus program and example goes three ways: the reference interpreter of chapter 4b, the CPS
interpreter of chapter 6 on the converted program, and again after closure conversion. The three must
print the same thing and stop (or not) with the same runtime error, and each pass must leave a program
that passes chapter 6's checker. The converted programs must also survive printing and parsing. Random
well-typed programs (a generator grown from tests/test_types.py's: vars, while loops, assignments,
matches on constructors, integers and tuples, nested patterns on user data types (a tree, an option),
&& and ||, closures capturing vars, polymorphic helpers used at several types, mutual recursion, non-tail
recursion thousands of calls deep, prints, asserts, divisions, nested functions and top-level definitions
read early — so every kind of runtime error, on purpose; and, for tools/random_programs.py, a runaway
recursion) go the same three ways. Then a few
claims of the chapters, each checked by a test that fails if the claim does: proper tail calls, join
points only where needed, cells only for captured vars, types carried over, direct calls and closures,
a linear output size. Then `lc show cps` and `lc show closure`. Last, exceptions (issue 25): no call in
the block of a `try` is a tail call, a call in a clause of a `try` in tail position is one (a million
retries in constant stack), the clauses see the vars a block assigned before raising out of a `while`,
an exception that no clause matches keeps its raise site, the predefined exceptions raise to the handler
of their block, closure code takes both continuations; random programs that raise and catch mean the same
on every interpreter of the pipeline, and compiled, by the JIT with chapter 9's optimiser and without.
"""

import io
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lcompiler import cps, driver, pipeline
from lcompiler.closure import closure_convert
from lcompiler.cps import (
    Apply, CheckError, Const, Definition, Lambda, LetCont, LetPrim, MakeClosure, Op, SetField,
    TupleValue, check, is_global, parse, show, size, walk)
from lcompiler.cps_convert import convert
from lcompiler.errors import RunError, Source
from lcompiler.interp import Interpreter
from lcompiler.types import check_types, show_type

from test_types import types as type_trees

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
PROGRAMS = sorted((CORPUS / "run").glob("*.l")) + sorted((CORPUS / "fail").glob("*.l")) + \
    sorted((ROOT / "examples").glob("*.l"))
IDS = [p.parent.name + "/" + p.stem for p in PROGRAMS]

# The two programs of a million tail calls take seconds on each interpreter. They go the three ways once
# (their reference output is their .out file, which tests/test_corpus.py checks the reference interpreter
# prints); the round trip checks only their text.
SLOW = {"tail_sum_million", "tail_mutual_million"}


# --- Running a program three ways ---------------------------------------------------------------

def source(path: Path) -> Source:
    return Source(path.name, path.read_text(encoding="utf-8"))


def outcome(run) -> tuple:
    """(what run(out) printed, the rendered runtime error or None)."""
    out = io.StringIO()
    try:
        run(out)
        error = None
    except RunError as e:
        error = e.render()
    return out.getvalue(), error


def reference(core) -> tuple:
    return outcome(lambda out: Interpreter(out).run(core))


def on_cps(program, **options) -> tuple:
    return outcome(lambda out: cps.run(program, out, **options))


def located(result: tuple) -> tuple:
    """The outcome with the error as its message line, source line and caret column: a program read back
    from text keeps where an error happens (@line:col), not the width of the L expression under it."""
    printed, error = result
    if error is None:
        return printed, None
    lines = error.split("\n")
    return printed, lines[0], lines[1], lines[2].index("^")


def lambdas_are_top_level(program) -> None:
    definitions = set(map(id, program.definitions))
    for node in walk(program):
        if type(node) is Lambda:
            assert type(node.enclosing) is Definition and id(node.enclosing) in definitions, \
                "a function is left inside another term after closure conversion"


def calls_are_consistent(program) -> None:
    """After closure conversion: a call to a top-level function is direct, and a direct call calls one."""
    for node in walk(program):
        if type(node) is Apply:
            f = node.func.var
            known = is_global(f) and type(f.binder.value) is Lambda
            assert (node.kind == "direct") == (known and f.binder.value.kind == "direct"), show(node)


def three_ways(src: Source, expected=None) -> tuple:
    """Run a program three ways, walking the pipeline (without the optimiser) and checking each
    stage's output on the way: the reference interpreter on the typed core, the CPS interpreter after
    CPS conversion and again after closure conversion. Return the closure-converted CPS program and
    the common outcome."""
    want = expected
    for stage, value, _ in pipeline.stages_of(src, upto="closure", optimise=False, checked=True):
        if stage.name == "types" and want is None:
            want = reference(value)
        elif stage.name == "cps":
            converted = on_cps(value)
            assert converted == want, f"after CPS conversion:\n{converted}\nreference:\n{want}"
        elif stage.name == "closure":
            lambdas_are_top_level(value)
            calls_are_consistent(value)
            closed = on_cps(value)
            assert closed == want, f"after closure conversion:\n{closed}\nreference:\n{want}"
    return value, want


@lru_cache(maxsize=None)
def expected_outcome(path: Path) -> tuple:
    if path.stem in SLOW:
        return path.with_suffix(".out").read_text(encoding="utf-8"), None
    return reference(check_types(source(path))[0])


# --- 1. The corpus, three ways ------------------------------------------------------------------

def test_the_corpus_is_there():
    assert len(PROGRAMS) >= 60 and SLOW <= {p.stem for p in PROGRAMS}
    assert sum(p.parent.name == "fail" for p in PROGRAMS) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_corpus_programs_mean_the_same_after_each_pass(path):
    _, result = three_ways(source(path), expected_outcome(path))
    if path.parent.name == "fail":
        assert result[1] is not None and result[1].startswith(f"{path.name}:")
    else:
        assert result[1] is None


# --- 2. Printing and parsing the converted programs ---------------------------------------------

def round_trip(program, src: Source, closed: bool, want, run: bool) -> None:
    text = show(program)
    again = parse(text, "again.cps", source=src)
    assert show(again) == text
    check(again, closed=closed)
    if closed:
        lambdas_are_top_level(again)
    if run:
        assert located(on_cps(again)) == located(want)


@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_converted_programs_print_parse_and_run_again(path):
    src = source(path)
    want = expected_outcome(path)
    program = convert(check_types(src)[0])
    round_trip(program, src, False, want, path.stem not in SLOW)
    closure_convert(program)
    round_trip(program, src, True, want, path.stem not in SLOW)


def test_a_parsed_runtime_error_is_where_the_original_is():
    src = Source("t.l", "def f(x) = 10 / x\nprint(f(2))\nprint(f(0))\n")
    program = convert(check_types(src)[0])
    _, error = on_cps(parse(show(program), source=src))
    assert error.startswith("t.l:1:15: runtime error: division by zero\ndef f(x) = 10 / x\n")
    with pytest.raises(cps.Stop, match=r"^1:15: runtime error: division by zero"):
        cps.run(parse(show(program)), io.StringIO())


# --- 3. Random well-typed programs --------------------------------------------------------------

PRELUDE = """\
data List<t> { Cons(t, List<t>); Nil }
data Shape { Dot; Circle(Int); Rect(Int, Int) }
def id(x) = x
def twice(f, x) = f(f(x))
def length = { Cons(_, t) -> 1 + length(t); Nil -> 0 }
def map(f, l) = l.{ Cons(x, r) -> Cons(f(x), map(f, r)); Nil -> Nil }
def count(n, acc) = if (n <= 0) acc else count(n - 1, acc + 1)
def area = {
  Dot -> 0
  Circle(r) -> 3 * r * r
  Rect(w, h) -> w * h
}
data Tree { Leaf; Node(Tree, Int, Tree) }
data Opt<a> { None; Some(a) }
def max(a, b) = if (a > b) a else b
def depth = { Leaf -> 0; Node(l, _, r) -> 1 + max(depth(l), depth(r)) }
def insert(t, v) = t.{
  Leaf -> Node(Leaf, v, Leaf)
  Node(l, x, r) -> if (v < x) Node(insert(l, v), x, r) else Node(l, x, insert(r, v))
}
def get(o, default) = o.{ Some(x) -> x; None -> default }
def first(p) = p.{ (a, _) -> a }
def pair(x) = (x, x)
def even(n) = if (n <= 0) true else odd(n - 1)
def odd(n) = if (n <= 0) false else even(n - 1)
def ping(n) = if (n <= 0) 0 else 1 + pong(n - 1)
def pong(n) = if (n <= 0) 0 else 2 + ping(n - 1)
def sum_to(n) = if (n <= 0) 0 else n + sum_to(n - 1)
def range(a, b) = if (a > b) Nil else Cons(a, range(a + 1, b))
"""

INTS = [0, 1, 2, 3, 7, 42, 99, 4611686018427387904, 9223372036854775807]

# Exceptions (issue 25): with programs(exceptions=True), expressions also raise — directly, or from a
# recursion of random depth — and catch, with handlers that do and do not match (an exception no clause
# matches goes on outward, perhaps uncaught: a runtime error). The switch is off by default: the random
# tests of other files draw programs without them, and those with them go the interpreters of every stage
# and the compiled ways below (and tests/test_exceptions_native.py's, under each lowering).
EXCEPTIONS_PRELUDE = """\
exception Stop
exception Fail(Int)
exception Oops(String)
def dive(n, k) = if (n <= 0) raise(Fail(k)) else 1 + dive(n - 1, k)
def attempt(n) = if (n % 2 == 0) raise(Stop) else n
"""
_exceptions = [False]       # set while programs(exceptions=True) draws a program


@st.composite
def exception_value(draw, env: dict, depth: int) -> str:
    kind = draw(st.sampled_from(["Stop", "Fail", "Fail", "Oops", "DivisionByZero", "MatchFailure"]))
    if kind == "Fail":
        return f"Fail({draw(expression('Int', env, depth - 1))})"
    if kind == "Oops":
        return f"Oops({draw(expression('String', env, depth - 1))})"
    return kind


@st.composite
def handlers(draw, t, env: dict, depth: int) -> list:
    """The clauses of a catch, results of type t: some match the exceptions raised, some do not."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["Stop", "Fail", "Fail", "Oops", "predefined", "any", "reraise"]))
        inner = dict(env)
        if kind == "Fail":
            x = f"q{len(env)}"
            pattern = draw(st.sampled_from([f"Fail({x})", "Fail(_)", f"Fail({draw(st.integers(0, 3))})"]))
            if pattern == f"Fail({x})":
                inner[x] = ("Int", "val")
        elif kind == "Oops":
            x = f"q{len(env)}"
            pattern, inner[x] = f"Oops({x})", ("String", "val")
        elif kind == "predefined":
            pattern = draw(st.sampled_from(["DivisionByZero", "MatchFailure"]))
        elif kind in ("any", "reraise"):
            pattern = draw(st.sampled_from(["_", f"e{len(env)}"]))
            if kind == "reraise":
                e = f"e{len(env)}"
                out.append(f"{e} -> raise({e})")
                break
        else:
            pattern = "Stop"
        out.append(f"{pattern} -> {draw(expression(t, inner, depth - 1))}")
    return out


def user_types(t, choices):
    """t with each Shape replaced by one of the prelude's data types: Shape, Tree, or an Opt of a base type."""
    if t == "Shape":
        return next(choices)
    if isinstance(t, str):
        return t
    return (t[0], *(user_types(x, choices) for x in t[1:]))


@st.composite
def types(draw, depth=2):
    """tests/test_types.py's types, with more base types and the prelude's data types."""
    t = draw(type_trees(depth, ("base", "base", "base", "tuple", "fn", "list", "shape")))
    choices = iter(lambda: draw(st.sampled_from(["Shape", "Tree", ("Opt", "Int"), ("Opt", "String"),
                                                 ("Opt", ("List", "Int"))])), None)
    return user_types(t, choices)


def arrow_free(t) -> bool:
    return isinstance(t, str) or (t[0] != "->" and all(arrow_free(x) for x in t[1:]))


def fresh(draw, env: dict, prefix: str) -> str:
    """A new name, or now and then the name of a variable in scope (which it shadows)."""
    if env and draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from(sorted(env)))
    return f"{prefix}{len(env)}"


@st.composite
def pattern(draw, t, env: dict, depth=2):
    """(text, {name: type}) of a pattern of type t; names are fresh and distinct."""
    bound = {}

    def go(t, depth):
        kind = draw(st.sampled_from(["var", "var", "wild", "shape", "shape"] if depth > 0 else ["var", "wild"]))
        if kind == "var":
            name = f"q{len(env) + len(bound)}"
            bound[name] = t
            return name
        if kind == "wild":
            return "_"
        if t == "Int":
            return str(draw(st.integers(0, 3)))
        if t == "Unit":
            return "()"
        if t == "Shape":
            which = draw(st.sampled_from(["Dot", "Circle", "Rect"]))
            return {"Dot": lambda: "Dot", "Circle": lambda: f"Circle({go('Int', depth - 1)})",
                    "Rect": lambda: f"Rect({go('Int', depth - 1)}, {go('Int', depth - 1)})"}[which]()
        if t == "Tree":                  # nested: Node(Node(_, 1, Leaf), x, _)
            if draw(st.booleans()):
                return "Leaf"
            return f"Node({go('Tree', depth - 1)}, {go('Int', depth - 1)}, {go('Tree', depth - 1)})"
        if not isinstance(t, str) and t[0] == "Opt":
            return "None" if draw(st.booleans()) else f"Some({go(t[1], depth - 1)})"
        if isinstance(t, str) or t[0] == "->":
            name = f"q{len(env) + len(bound)}"
            bound[name] = t
            return name
        if t[0] == "*":
            return f"({go(t[1], depth - 1)}, {go(t[2], depth - 1)})"
        return "Nil" if draw(st.booleans()) else f"Cons({go(t[1], depth - 1)}, {go(t, depth - 1)})"

    return go(t, depth), bound


@st.composite
def clauses(draw, s, t, env: dict, depth: int) -> list:
    """'pattern -> body' clauses for a scrutinee of type s, results of type t; usually exhaustive."""
    out = []
    for _ in range(draw(st.integers(0, 3))):
        p, bound = draw(pattern(s, env, depth=3))
        out.append(f"{p} -> {draw(expression(t, {**env, **{x: (tx, 'val') for x, tx in bound.items()}}, depth - 1))}")
    if not out or draw(st.integers(0, 9)) > 0:           # a last clause that always matches
        x = fresh(draw, env, "q")
        out.append(f"{x} -> {draw(expression(t, {**env, x: (s, 'val')}, depth - 1))}")
    return out


@st.composite
def statements(draw, env: dict, depth: int, count: int):
    """Statements of a block, and the environment after them."""
    out = []
    assignable = sorted(x for x, (_, mode) in env.items() if mode == "mut")
    if assignable and draw(st.booleans()):       # most blocks change a var of the blocks around them
        x = draw(st.sampled_from(assignable))
        out.append(f"{x} := {draw(expression(env[x][0], env, depth - 1))}")
    for _ in range(count):
        assignable = sorted(x for x, (_, mode) in env.items() if mode == "mut")
        functions = sorted(x for x, (t, _) in env.items() if not isinstance(t, str) and t[0] == "->")
        kind = draw(st.sampled_from(["var", "var", "assign", "assign", "assign", "loop", "loop", "print", "let",
                                     "effect", "branch", "branch", "closure", "closure", "call", "call"]))
        if kind == "assign" and assignable:
            x = draw(st.sampled_from(assignable))
            out.append(f"{x} := {draw(expression(env[x][0], env, depth - 1))}")
        elif kind == "loop" and depth > 0:
            i = fresh(draw, env, "i")
            body_env = {**env, i: ("Int", "ro")}
            body, _ = draw(statements(body_env, depth - 1, draw(st.integers(1, 3))))
            out.append(f"var {i} := 0")
            out.append(f"while ({i} < {draw(st.integers(0, 3))}) {{ {'; '.join([f'{i} := {i} + 1'] + body)} }}")
            env = body_env
        elif kind == "branch" and depth > 0:      # an if or a match statement, its value unused
            arms = [draw(statements(env, depth - 1, draw(st.integers(1, 2))))[0] + ["()"] for _ in range(2)]
            then, orelse = ("{ " + "; ".join(arm) + " }" for arm in arms)
            form = draw(st.sampled_from(["if", "if", "if without else", "match"]))
            if form == "if":
                out.append(f"if ({draw(expression('Bool', env, depth - 1))}) {then} else {orelse}")
            elif form == "if without else":
                out.append(f"if ({draw(expression('Bool', env, depth - 1))}) {then}")
            else:
                out.append(f"match ({draw(expression('Int', env, depth - 1))}) {{ 0 -> {then}; _ -> {orelse} }}")
        elif kind == "closure" and depth > 0:    # a function whose body may assign the vars around it
            param, result = draw(types(1)), draw(types(1))
            x, p = fresh(draw, env, "g"), f"p{len(env)}"
            inner = {**env, p: (param, "val")}
            body, inner = draw(statements(inner, depth - 1, draw(st.integers(1, 2))))
            body.append(draw(expression(result, inner, depth - 1)))
            out.append(f"let {x} = {{ {p} -> {'; '.join(body)} }}")
            env = {**env, x: (("->", param, result), "val")}
        elif kind == "call" and functions:
            f = draw(st.sampled_from(functions))
            out.append(f"{f}({draw(expression(env[f][0][1], env, depth - 1))})")
        elif kind == "print":
            args = [draw(expression(draw(types(1)), env, depth - 1)) for _ in range(draw(st.integers(1, 2)))]
            out.append(f"print({', '.join(args)})")
        elif kind == "let":
            t = draw(types(1))
            x = fresh(draw, env, "v")
            out.append(f"let {x} = {draw(expression(t, env, depth - 1))}")
            env = {**env, x: (t, "val")}
        elif kind == "effect":
            out.append(draw(expression(draw(types(1)), env, depth - 1)))
        else:                    # a var: never of a function type, so no function can reach itself
            t = draw(types(1).filter(arrow_free))
            x = fresh(draw, env, "m")
            out.append(f"var {x} := {draw(expression(t, env, depth - 1))}")
            env = {**env, x: (t, "mut")}
    return out, env


@st.composite
def expression(draw, t, env: dict, depth: int):
    """L text of an expression of type t; env maps a name to (type, 'val' | 'mut' | 'ro')."""
    names = sorted(x for x, (tx, _) in env.items() if tx == t)
    callees = sorted(x for x, (tx, _) in env.items() if not isinstance(tx, str) and tx[0] == "->" and tx[2] == t)
    leaf = depth <= 0
    options = ["literal"] + ["var"] * 2 * bool(names) + (
        [] if leaf else ["let", "if", "call", "id", "shape", "shape", "block", "block", "match"] +
        ["callee"] * 2 * bool(callees) + ["raise", "try", "try"] * _exceptions[0])
    kind = draw(st.sampled_from(options))
    sub = lambda ty, e=env: draw(expression(ty, e, depth - 1))
    if kind == "raise":
        return f"raise({draw(exception_value(env, depth))})"
    if kind == "try":
        body = sub(t) if t != "Int" or draw(st.booleans()) else \
            draw(st.sampled_from([f"dive({sub('Int')} % 40, {sub('Int')})", f"attempt({sub('Int')})"]))
        separator = draw(st.sampled_from([" ", "\n"]))
        return f"try {{ {body} }}{separator}catch {{ {'; '.join(draw(handlers(t, env, depth)))} }}"
    if kind == "var":
        return draw(st.sampled_from(names))
    if kind == "callee":
        f = draw(st.sampled_from(callees))
        param = env[f][0][1]
        if not isinstance(param, str) and param[0] == "*" and draw(st.booleans()):
            return f"{f}({sub(param[1])}, {sub(param[2])})"
        return f"{f}({sub(param)})"
    if kind == "let":
        x = fresh(draw, env, "v")
        tx = draw(types(1))
        return f"{{ let {x} = {sub(tx)}; {sub(t, {**env, x: (tx, 'val')})} }}"
    if kind == "if":
        if t == "Unit" and draw(st.booleans()):
            return f"(if ({sub('Bool')}) {sub(t)})"
        return f"(if ({sub('Bool')}) {sub(t)} else {sub(t)})"
    if kind == "call":
        arg = draw(types(1))
        return f"({sub(('->', arg, t))})({sub(arg)})"
    if kind == "id":
        return f"id({sub(t)})"
    if kind == "block":
        declared = []
        if draw(st.integers(0, 2)) > 0:            # most blocks start with a var
            tx = draw(types(1).filter(arrow_free))
            x = fresh(draw, env, "m")
            declared = [f"var {x} := {sub(tx)}"]
            env = {**env, x: (tx, "mut")}
        body, inner = draw(statements(env, depth - 1, draw(st.integers(1, 3))))
        body = declared + body
        return "{ " + "; ".join(body + [draw(expression(t, inner, depth - 1))]) + " }"
    if kind == "match":
        s = draw(st.sampled_from(["Int", "Int", "Shape", ("*", "Int", "Int"), ("List", "Int"),
                                  ("*", ("List", "Bool"), "Int"), "Tree", ("Opt", "Int"),
                                  ("*", "Tree", ("Opt", "Bool")), draw(types(1))]))
        arms = draw(clauses(s, t, env, depth))
        form = draw(st.sampled_from(["match", "dot", "function"]))
        if form == "match":
            return f"match ({sub(s)}) {{ {'; '.join(arms)} }}"
        if form == "dot":
            return f"({sub(s)}).{{ {'; '.join(arms)} }}"
        return f"({{ {'; '.join(arms)} }})({sub(s)})"
    # literal or shape: build a value of the type from its structure
    if t == "Int":
        if kind == "shape":
            choice = draw(st.sampled_from(["+", "-", "*", "/", "%", "neg", "length", "count", "area", "depth",
                                           "get", "first", "deep", "zero"]))
            if choice == "neg":
                return f"-{sub('Int')}"
            if choice == "depth":
                return f"depth({sub('Tree')})"
            if choice == "get":                      # the polymorphic helpers, at Int here
                return f"get({sub(('Opt', 'Int'))}, {sub('Int')})"
            if choice == "first":
                return f"first(pair({sub('Int')}))"
            if choice == "zero":                     # a runtime error on purpose, now and then
                return f"({sub('Int')} {draw(st.sampled_from(['/', '%']))} {draw(st.sampled_from(['0', '(1 - 1)']))})"
            if choice == "deep":                     # non-tail recursion, thousands of calls deep
                n = f"(2000 + {sub('Int')} % 1000)"
                return draw(st.sampled_from([f"sum_to({n})", f"length(range(1, {n}))", f"ping({n})"]))
            if choice == "length":
                return f"length({sub(('List', 'Bool'))})"
            if choice == "count":
                return f"count({sub('Int')} % 20, 0)"
            if choice == "area":
                return f"area({sub('Shape')})"
            return f"({sub('Int')} {choice} {sub('Int')})"
        return str(draw(st.sampled_from(INTS)))
    if t == "Bool":
        if kind == "shape":
            choice = draw(st.sampled_from(["<", ">=", "==", "!=", "&&", "&&", "||", "||", "!", "eqs", "eqb",
                                           "even", "get"]))
            if choice == "!":
                return f"!{sub('Bool')}"
            if choice == "even":                     # mutual tail recursion
                return f"{draw(st.sampled_from(['even', 'odd']))}({sub('Int')} % 5000)"
            if choice == "get":
                return f"get({sub(('Opt', 'Bool'))}, {sub('Bool')})"
            if choice in ("&&", "||"):
                return f"({sub('Bool')} {choice} {sub('Bool')})"
            if choice == "eqs":      # the if and the && fix the operands' types: == on an unknown type is on Int
                return f"((if (true) {sub('String')} else \"\") == {sub('String')})"
            if choice == "eqb":
                return f"(({sub('Bool')} && true) != {sub('Bool')})"
            return f"({sub('Int')} {choice} {sub('Int')})"
        return draw(st.sampled_from(["true", "false"]))
    if t == "String":
        if kind == "shape":
            return f"get({sub(('Opt', 'String'))}, {sub('String')})"
        return '"' + draw(st.sampled_from(["", "a", "b c", "x\\n", 'q\\"'])) + '"'
    if t == "Unit":
        if kind == "shape":
            choice = draw(st.sampled_from(["print", "print", "assert"]))
            if choice == "assert":
                return f"assert({sub('Bool')})"
            return f"print({', '.join(sub(draw(types(1))) for _ in range(draw(st.integers(1, 3))))})"
        return "()"
    if t == "Shape":
        which = draw(st.sampled_from(["Dot", "Circle", "Rect"]))
        return {"Dot": lambda: "Dot", "Circle": lambda: f"Circle({sub('Int')})",
                "Rect": lambda: f"Rect({sub('Int')}, {sub('Int')})"}[which]()
    if t == "Tree":
        if kind == "shape":
            return f"insert({sub('Tree')}, {sub('Int')})"
        return "Leaf" if draw(st.booleans()) else f"Node({sub('Tree')}, {sub('Int')}, {sub('Tree')})"
    if t[0] == "Opt":
        if kind == "shape":
            return f"get(Some({sub(t)}), None)"      # get at Opt<Opt<…>>: one more type
        return "None" if draw(st.booleans()) else f"Some({sub(t[1])})"
    if t[0] == "*":
        if kind == "shape" and t[1] == t[2]:
            return f"pair({sub(t[1])})"
        return f"({sub(t[1])}, {sub(t[2])})"
    if t[0] == "->":
        if kind == "shape" and t[1] == "Int" and t[2] == "Int":
            return f"{{ 0 -> {sub('Int')}; n{len(env)} -> {sub('Int', {**env, f'n{len(env)}': ('Int', 'val')})} }}"
        x = fresh(draw, env, "p")
        return f"{{ {x} -> {sub(t[2], {**env, x: (t[1], 'val')})} }}"
    if kind == "shape":
        return f"map({{ y -> y }}, {sub(t)})" if draw(st.booleans()) else f"twice({{ l -> l }}, {sub(t)})"
    return "Nil" if draw(st.booleans()) else f"Cons({sub(t[1])}, {sub(t)})"


@st.composite
def programs(draw, runaway: int = 0, exceptions: bool = False):
    """A program of functions, definitions and statements. A function calls only the functions above it
    and reads only definitions without functions in them (so nothing recurses for ever), perhaps ones
    that have not run yet when it is called. With runaway = n, about one program in n has a statement
    that starts a recursion that never ends: a stack overflow, reported at its call wherever the stack
    runs out. With exceptions, expressions raise and catch too."""
    _exceptions[0] = exceptions
    try:
        return draw(program_text(runaway)) if not exceptions else \
            PRELUDE + EXCEPTIONS_PRELUDE + draw(program_text(runaway))[len(PRELUDE):]
    finally:
        _exceptions[0] = False


@st.composite
def program_text(draw, runaway: int):
    plan = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["fun", "fun", "def", "def", "stmt"]))
        if kind == "fun":
            params = [draw(types(1)) for _ in range(draw(st.integers(1, 2)))]
            plan.append(("fun", f"f{i}", params, draw(types(1))))
        elif kind == "def":
            plan.append(("def", f"d{i}", None, draw(types(2))))
        else:
            plan.append(("stmt", None, None, None))
    values = {name: (t, "val") for kind, name, _, t in plan if kind == "def" and arrow_free(t)}
    items, functions, above = [], {}, {}
    for kind, name, params, t in plan:
        if kind == "fun":
            env = {**functions, **values}
            for j, p in enumerate(params):
                env[f"a{j}"] = (p, "val")
            ftype = ("->", params[0] if len(params) == 1 else ("*", *params), t)
            items.append(f"def {name}({', '.join(f'a{j}' for j in range(len(params)))}) = "
                         f"{draw(expression(t, env, 3))}")
            functions[name] = (ftype, "val")
        elif kind == "def":
            items.append(f"def {name} = {draw(expression(t, {**functions, **above}, 3))}")
            above[name] = (t, "val")
        else:
            items.append(draw(expression("Unit", {**functions, **above}, 3)))
    shown = [name for kind, name, _, _ in plan if kind == "def"]
    if shown:
        items.append(f"print({', '.join(shown)})")
    for name, (ftype, _) in functions.items():
        items.append(f"print({draw(expression(ftype[2], {**functions, **above}, 2))}, "
                     f"{name}({draw(expression(ftype[1], {**functions, **above}, 1))}))")
    if runaway and draw(st.integers(0, 1023)) % runaway == runaway - 1:   # Hypothesis favours 0, 1, 1023
        items.insert(draw(st.integers(0, len(items))), "def runaway(n) = 2 * runaway(n + 1) + 1\nprint(runaway(0))")
    return PRELUDE + "\n".join(items) + "\n"


@pytest.mark.slow
@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(programs())
def test_random_programs_mean_the_same_after_each_pass(text):
    src = Source("random.l", text)
    program, want = three_ways(src)
    round_trip(program, src, True, want, run=True)


@pytest.mark.slow
@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(programs(exceptions=True))
def test_random_programs_with_exceptions_mean_the_same_on_every_interpreter(text):
    """The interpreter of every stage from core to shrink, with the optimiser (the CPS interpreter after
    cps, opt, closure and shrink), each stage's output checked; and the converted program prints, parses
    and runs again. Compiled: the next test."""
    src = Source("random.l", text)
    outcomes = {}
    for stage, value, unit in pipeline.stages_of(src, upto="shrink", checked=True):
        if stage.interpret is not None:
            outcomes[stage.name] = outcome(lambda out, s=stage, v=value, u=unit: s.interpret(v, u, out))
    assert set(outcomes) == {"core", "types", "mono", "cps", "opt", "closure", "shrink"}
    want = outcomes["core"]
    assert all(got == want for got in outcomes.values()), (text, outcomes)
    program, _ = three_ways(src, want)
    round_trip(program, src, True, want, run=True)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(programs(exceptions=True))
def test_random_programs_with_exceptions_run_compiled_as_the_reference_interpreter_runs_them(text):
    """The JIT with chapter 9's optimiser and without (-O0), each in a child process (chapter 11's
    run_source: a crash is a status, not the end of pytest), against the reference interpreter: what
    it prints, its runtime error (an uncaught exception among them) and its exit status. The same
    programs at every run (derandomize): a test run cannot fail by chance."""
    src = Source("random.l", text)
    printed, error = reference(check_types(src)[0])
    want = printed, "" if error is None else error + "\n", 0 if error is None else 2
    for optimiser in (True, False):
        r = driver.run_source(src, timeout=120, optimiser=optimiser)
        assert (r.stdout, r.stderr, r.status) == want, (f"optimiser {'on' if optimiser else 'off'}", text)


@pytest.mark.slow
def test_the_generator_raises_at_random_depths_and_catches_with_handlers_that_do_and_do_not_match():
    from hypothesis import Phase, seed
    outcomes = []

    @seed(25)
    @settings(max_examples=60, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs(exceptions=True))
    def collect(text):
        outcomes.append((text, reference(check_types(Source("random.l", text))[0])))

    collect()
    bodies = [text[len(PRELUDE + EXCEPTIONS_PRELUDE):] for text, _ in outcomes]
    assert sum("raise(" in b for b in bodies) > 10 and sum("try {" in b for b in bodies) > 10
    assert sum("dive(" in b for b in bodies) > 3 and sum("-> raise(e" in b for b in bodies) > 0
    errors = [error for _, (_, error) in outcomes if error]
    assert any("uncaught exception" in e for e in errors)                # not every handler matches
    assert sum(error is None for _, (_, error) in outcomes) > 10        # and most programs end well
    assert any(b.count("try {") > 1 for b in bodies)


# --- 4. What the chapters claim about the conversion ------------------------------------------

def converted(text: str, join_points: bool = True):
    return convert(check_types(Source("t.l", text))[0], join_points=join_points)


def closed(text: str):
    program = converted(text)
    closure_convert(program)
    check(program, closed=True)
    return program


def function(program, name: str) -> Lambda:
    """The Lambda of the top-level function name."""
    found = [d.value for d in program.definitions if d.var is not None and d.var.hint == name]
    assert len(found) == 1 and type(found[0]) is Lambda, show(program)
    return found[0]


def nodes(root, cls) -> list:
    return [n for n in walk(root) if type(n) is cls]


def return_points(lam: Lambda) -> list:
    """The continuations bound inside lam that some call returns to."""
    bound = {id(t.cont) for t in nodes(lam, LetCont)}
    return [a for a in nodes(lam, Apply) if id(a.cont.var) in bound]


LOOP = "def loop(n) = if (n == 0) 0 else loop(n - 1)\n"
COUNT = "def count(n) = if (n == 0) 0 else 1 + count(n - 1)\n"


def test_a_call_in_tail_position_returns_through_the_callers_continuation():
    program = converted(LOOP)
    check(program)
    lam = function(program, "loop")
    calls = nodes(lam, Apply)
    assert len(calls) == 1 and calls[0].cont.var is lam.cont and calls[0].func.var.hint == "loop"
    assert return_points(lam) == [] and all(t.cont.hint != "k" for t in nodes(lam, LetCont))
    # the non-tail call of count is the opposite case: it needs a return point
    count = function(converted(COUNT), "count")
    assert [a.cont.var.hint for a in return_points(count)] == ["k"]
    assert all(a.cont.var is not count.cont for a in nodes(count, Apply))


def test_tail_calls_run_in_constant_depth():
    deep = cps.STACK_LIMIT + 50_000
    for program in (converted(LOOP + f"print(loop({deep}))"), closed(LOOP + f"print(loop({deep}))")):
        assert on_cps(program) == ("0\n", None)
    # the same depth limit stops the non-tail recursion: the limit is there, tail calls stay under it
    for program in (converted(COUNT + "print(count(3000))"), closed(COUNT + "print(count(3000))")):
        printed, error = on_cps(program, stack_limit=1000)
        assert printed == "" and "stack overflow" in error
    for program in (converted(LOOP + "print(loop(3000))"), closed(LOOP + "print(loop(3000))")):
        assert on_cps(program, stack_limit=1000) == ("0\n", None)


def joins(program) -> int:
    return sum(1 for t in nodes(program, LetCont) if t.cont.hint == "join")


def test_join_points_only_where_a_value_comes_back_from_several_branches():
    assert joins(converted("def f(x) = if (x > 0) 1 else 2")) == 0
    assert joins(converted("def g(x) = (if (x > 0) 1 else 2) + 1")) == 1
    shape = "data C { A; B; D(Int) }\n"
    assert joins(converted(shape + "def h(c) = match (c) { A -> 1; B -> 2; D(n) -> n }")) == 0
    assert joins(converted(shape + "def h(c) = 1 + match (c) { A -> 1; B -> 2; D(n) -> n }")) == 1
    assert joins(converted("def a(x, y) = x > 0 || y > 0 && x < y")) == 0     # the && is in tail position
    assert joins(converted("def a(x, y) = !(x > 0 && y > 0)")) == 1
    # one join per if in an operand, not one per branch below it
    assert joins(converted("def g(x) = (if (x > 0) (if (x > 1) 1 else 2) else 3) + 1")) == 1
    program = converted("def g(x) = { let y = if (x > 0) 1 else 2; y + 1 }", join_points=False)
    assert joins(program) == 0 and len(nodes(program, Op)) == 3         # x > 0, and + 1 twice


def test_a_join_point_carries_the_vars_its_branches_assign():
    program = converted("def f(c) = { var m := 0; var z := 5; let r = (if (c) { m := 1; 10 } else 20); (r, m, z) }")
    [join] = [t for t in nodes(program, LetCont) if t.cont.hint == "join"]
    assert [x.hint for x in join.params] == ["r", "m"]


SUM = "def s(n) = { var i := 0; var t := 0; while (i < n) { i := i + 1; t := t + i }; t }\n"
CAPTURED = "def c() = { var x := 0; let inc = { u -> x := x + 1 }; inc(()); inc(()); x }\n"


def cells(program) -> list:
    return [n for n in walk(program) if type(n) is TupleValue and len(n.fields) == 1]


def test_a_var_no_function_captures_lives_in_continuation_parameters():
    program = converted(SUM)
    assert cells(program) == [] and nodes(program, SetField) == []
    [loop] = [t for t in nodes(program, LetCont) if t.cont.hint == "loop"]
    assert [x.hint for x in loop.params] == ["i", "t"]
    assert on_cps(converted(SUM + "print(s(10))")) == ("55\n", None)


def test_a_captured_var_lives_in_a_cell():
    program = converted(CAPTURED)
    assert len(cells(program)) == 1 and len(nodes(program, SetField)) == 1
    [cell] = cells(program)
    assert cell.enclosing.var.hint == "x_cell"
    assert on_cps(converted(CAPTURED + "print(c())")) == ("2\n", None)
    # only the captured one of two vars gets a cell
    both = converted("def c() = { var x := 0; var y := 0; let inc = { u -> x := x + 1 }; y := 4; inc(()); x + y }")
    assert [c.enclosing.var.hint for c in cells(both)] == ["x_cell"] and len(nodes(both, SetField)) == 1


def test_types_travel_to_the_variables():
    program = converted("def f(x) = x + 1\ndef g(p) = { let (a, b) = p; !(a == \"s\" && b) }")
    f = function(program, "f")
    assert show_type(f.params[0].type) == "Int"
    assert show_type(f.enclosing.var.type) == "Int -> Int"
    [sum_] = [t for t in nodes(f, LetPrim) if type(t.prim) is Op]
    assert show_type(sum_.var.type) == "Int"
    g = function(program, "g")
    assert show_type(g.params[0].type) == "(String, Bool)"
    assert {show_type(t.var.type) for t in nodes(g, LetPrim) if t.var.hint in ("a", "b")} == {"String", "Bool"}
    [join] = [t for t in nodes(program, LetCont) if t.cont.hint == "join"]     # the value of the &&
    assert show_type(join.params[0].type) == "Bool"
    closure_convert(program)
    assert show_type(function(program, "f").params[0].type) == "Int"


def bookkeeping(v) -> bool:
    """A variable the conversion binds for itself, not for an L value: a tag, a cell, a ready flag."""
    b = v.binder
    if type(b) is Definition:
        return type(b.value) in (Const, TupleValue) and v.type is None and \
            (v.hint == "false" or v.hint.startswith("ready_"))
    prim = b.prim
    if type(prim) in (cps.Tag, SetField, cps.Fail):
        return True
    if type(prim) is TupleValue:
        return len(prim.fields) == 1 and v.hint.endswith("_cell")
    if type(prim) is cps.Proj:
        return v.hint == "ready" and is_global(prim.arg.var)
    if type(prim) is Const:      # the mark a definition read early sets; the u = () of an assignment, a while
        # or an assert is an L value, but has no type: see test_every_value_returned_carries_its_type
        return (prim.value is True and v.hint == "true") or (prim.value == () and v.hint == "u")
    return False


@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_variables_for_l_values_carry_their_types(path):
    program = convert(check_types(source(path))[0])
    for v in cps.binders(program):
        if not v.is_cont:
            assert v.type is not None or bookkeeping(v), f"{v.hint} bound by {type(v.binder).__name__}"
    for node in walk(program):
        if type(node) is Lambda:
            assert all(x.type is not None for x in node.params)


# The units the conversion makes for the value of an assignment, a while loop or an assert, and the variable
# standing for the value of a match no clause matched, are L values handed to a continuation (here, returned):
# they carry their type too. name -> (program, the type of what f returns, where the variable is made).
UNTYPED = {
    "assignment": ("def f(x) = { var y := x; y := 2 }", "Unit", "Converter.assign: self.unit(...)"),
    "captured assignment": ("def f(x) = { var y := x; let g = { u -> y := 2 }; g(()) }", "Unit",
                            "Converter.assign: let_prim(set_field(...), ..., 'u')"),
    "while": ("def f(n) = { var i := 0; while (i < n) i := i + 1 }", "Unit", "Converter.loop, leave: self.unit(...)"),
    "assert": ("def f(b) = assert(b)", "Unit", "Converter.expr, c.Assert: self.unit(...)"),
    "match failure": ("def f(n) = match (n) { 0 -> 1 }", "Int",
                      "Converter.clauses: let_prim(fail(...), ..., 'u') stands for the match's value"),
}


@pytest.mark.parametrize("text, expected", [
    pytest.param(text, expected, id=name) for name, (text, expected, origin) in UNTYPED.items()] + [
    pytest.param("def f(x) = { var y := x; y := 2; y }", "Int", id="read after assignment"),
    pytest.param("def f(x) = print(x, 1)", "Unit", id="print"),
    pytest.param("def f(n) = (if (n > 0) 1 else 2) * 3", "Int", id="join"),
    pytest.param("def f(g) = g(1) + 1", "Int", id="return point"),
])
def test_every_value_returned_carries_its_type(text, expected):
    program = converted(text)
    returned = [t.args[0].var for lam in nodes(program, Lambda) for t in nodes(lam, cps.ApplyCont)
                if t.cont.var is lam.cont]
    assert returned
    for v in returned:
        assert v.type is not None, f"{v.hint}, returned by {text!r}, has no type"
        assert show_type(v.type) == expected


def test_closure_conversion_makes_known_calls_direct_and_closures_flat():
    program = closed("def adder(n) = { x -> x + n }\nprint(adder(1)(2))")
    adder = function(program, "adder")
    assert adder.kind == "direct"
    [make] = nodes(adder, MakeClosure)
    code, n = [o.var for o in make.fields]
    assert n is adder.params[0]
    assert is_global(code) and type(code.binder.value) is Lambda and code.binder.value.kind == "closure"
    assert [x.hint for x in code.binder.value.params] == ["env", "x"]
    calls = nodes(program, Apply)
    assert sorted(a.kind for a in calls) == ["closure", "direct"]
    assert on_cps(program) == ("3\n", None)


def test_a_top_level_function_passed_as_a_value_gets_a_static_closure():
    text = PRELUDE + "def square(x) = x * x\nprint(map(square, Cons(2, Cons(3, Nil))), square(4))\n"
    program = closed(text)
    square = function(program, "square")
    static = [d for d in program.definitions if type(d.value) is MakeClosure]
    assert [d.var.hint for d in static] == ["square_closure"]
    entry = static[0].value.fields[0].var.binder.value
    [inner] = nodes(entry, Apply)
    assert inner.kind == "direct" and inner.func.var is square.enclosing.var and inner.cont.var is entry.cont
    direct = [a for a in nodes(program, Apply) if a.func.var is square.enclosing.var]
    assert len(direct) == 2 and all(a.kind == "direct" for a in direct)     # square(4), and in the entry
    assert on_cps(program) == ("Cons(4, Cons(9, Nil)) 16\n", None)


def test_a_local_function_without_free_variables_is_hoisted_and_called_directly():
    program = closed("def f(y) = { let g = { x -> x * 2 }; g(y) + g(1) }\nprint(f(5))")
    assert nodes(program, MakeClosure) == []
    assert all(a.kind == "direct" for a in nodes(program, Apply))
    assert len([d for d in program.definitions if type(d.value) is Lambda]) == 2
    assert on_cps(program) == ("12\n", None)
    # functions are closed inside out and in order: g is global by the time h and k are closed, so h's
    # closure holds only y, k needs none, and every call of g, k and f is direct
    program = closed("def f(y) = { let g = { x -> x * 2 }; let h = { z -> g(z) + y }; let k = { w -> g(w) }\n"
                     "  h(k(y)) }\nprint(f(5))")
    [make] = nodes(program, MakeClosure)
    assert [o.var.hint for o in make.fields] == ["h_code", "y"]
    assert sorted(a.kind for a in nodes(program, Apply)) == ["closure"] + ["direct"] * 4
    assert on_cps(program) == ("25\n", None)


SHAPES = "data Shape { Circle(Int); Rect(Int, Int); Dot }\n"


@pytest.mark.parametrize("clauses, tests, fails", [
    ("Circle(r) -> r; Rect(w, h) -> w * h; Dot -> 0", 2, 0),     # the last constructor is not tested
    ("Dot -> 0; Rect(w, h) -> w * h; Circle(r) -> r; _ -> 9", 2, 0),  # nor what follows it translated
    ("Circle(r) -> r; Rect(w, 1) -> w; Dot -> 0", 3, 1),           # Rect(w, 1) may fail on its field
    ("Circle(r) -> r; Rect(w, h) -> w * h", 2, 1),                  # not exhaustive
    ("Circle(1) -> 1; Circle(r) -> r; Rect(w, h) -> w; Dot -> 0", 3, 0),
])
def test_a_match_tests_no_tag_it_knows_and_fails_only_if_it_can(clauses, tests, fails):
    text = SHAPES + f"def f(s) = match (s) {{ {clauses} }}\nprint(f(Circle(2)), f(Rect(3, 1)), f(Dot))\n"
    program = converted(text)
    cases = [p for p in nodes(program, LetPrim) if type(p.prim) is cps.Tag]
    failing = [p for p in nodes(program, LetPrim) if type(p.prim) is cps.Fail]
    assert (len(cases), len(failing)) == (tests, fails)
    assert on_cps(program) == reference(check_types(Source("t.l", text))[0])


def operands(n: int) -> str:
    """A function adding n ifs, each an operand (not in tail position)."""
    return "def f(x) = " + " + ".join(f"(if (x > {i}) {i} else {i + 1})" for i in range(n)) + "\nprint(f(3))\n"


def chain(n: int) -> str:
    """A function of n lets, each bound to an if whose context is the rest of the function (chapter 7's)."""
    lets = "".join(f"  let a{i} = if (x > {i}) a{i - 1} + 1 else {i}\n" for i in range(1, n + 1))
    return f"def f(x) = {{\n  let a0 = x\n{lets}  a{n}\n}}\nprint(f(3), f(-1))\n"


def test_the_output_grows_linearly_with_join_points_and_exponentially_without():
    for program in (operands, chain):
        small, large = size(converted(program(10))), size(converted(program(20)))
        assert large / small < 2.5, program.__name__
    small, large = size(converted(chain(4), False)), size(converted(chain(12), False))
    assert large / small > 100
    # copying the contexts changes the size, not the meaning
    for n in (3, 8):
        copying = converted(chain(n), False)
        check(copying)
        assert on_cps(copying) == on_cps(converted(chain(n))) == reference(check_types(Source("t.l", chain(n)))[0])
    # f(3) = 0 + 1 + 2 + 4 + 5 + 6 + 7 + 8
    assert on_cps(converted(operands(8))) == ("33\n", None)


@pytest.mark.parametrize("text", [
    "def g(x) = (if (x > 0) 1 else 2) + 1\nprint(g(0))",
    "def g(x) = 1 + (if (x > 0) 1 else 2)\nprint(g(0))",
    "def g(x) = print(if (x > 0) 1 else 2)\ng(0)",
    "data O { Some(Int); None }\ndef g(x) = Some(if (x > 0) 1 else 2)\nprint(g(0))",
    "def g(f, x) = f(if (x > 0) 1 else 2)\nprint(g({ y -> y }, 0))",
], ids=["left operand", "right operand", "print argument", "constructor argument", "call argument"])
def test_copying_contexts_keeps_the_meaning_of_an_if_among_operands(text):
    copying = converted(text, join_points=False)
    check(copying)
    assert on_cps(copying) == on_cps(converted(text))


def test_the_checker_would_catch_a_broken_conversion():
    program = converted(SUM)
    check(program)
    [loop] = [t for t in nodes(program, LetCont) if t.cont.hint == "loop"]
    loop.params.pop()          # a continuation that forgets a parameter: check must see it
    with pytest.raises(CheckError):
        check(program)


# --- 5. The command line -----------------------------------------------------------------------

def lc(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "lc"), *args], capture_output=True, text=True,
                          cwd=cwd)


LISTS = ROOT / "examples" / "lists.l"


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["cps", "opt", "closure", "shrink"])
def test_lc_show_prints_a_program_that_parses_checks_and_runs(stage, tmp_path):
    """`lc show STAGE` prints what the stage hands to the next: the same program, read back."""
    shown = lc("show", stage, str(LISTS))
    assert shown.returncode == 0 and shown.stderr == ""
    src = source(LISTS)
    program = parse(shown.stdout, "shown.cps", source=src)
    closed = stage in ("closure", "shrink")
    check(program, closed=closed)
    if closed:
        lambdas_are_top_level(program)
    assert show(program) == show(pipeline.compile_to(stage, src)[0])
    assert on_cps(program) == expected_outcome(LISTS)

    bad = tmp_path / "bad.l"
    bad.write_text('def f(x) = x + 1\nprint(f("one"))\n')
    failing = lc("show", stage, "bad.l", cwd=tmp_path)
    assert failing.returncode == 1 and failing.stdout == ""
    assert re.match(r"bad\.l:2:\d+: error: expected Int, found String", failing.stderr), failing.stderr
    assert "Traceback" not in failing.stderr
    unparsable = tmp_path / "syntax.l"
    unparsable.write_text("def f(x) = (x +\n")
    failing = lc("show", stage, "syntax.l", cwd=tmp_path)
    assert failing.returncode == 1 and re.match(r"syntax\.l:\d+:\d+: error: ", failing.stderr), failing.stderr


# --- The second continuation ----------------------------------------------------------------------

def raises_to(node):
    """The exception continuation the code around node raises to: its function's, or uncaught."""
    f = cps.enclosing_lambda(node)
    return f.exn if f is not None else None


@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_every_call_and_failing_operation_raises_to_its_functions_exception_continuation(path):
    program = convert(check_types(source(path))[0])
    cps.check(program)
    seen = 0
    for node in cps.walk(program):
        t = type(node)
        if t is cps.Lambda:
            assert node.exn is not node.cont and node.exn.binder is node
        h = None
        if t is Apply:
            h = node.exn.var
        elif t is cps.Op and cps.PRIMITIVES[node.op].fails is not None:
            h = node.exn.var
        elif t is cps.Fail and node.message in cps.PREDEFINED:
            h = node.exn.var
        elif t is cps.Fail:
            assert node.exn is None                 # reading a definition before it has run stops
        if h is not None:
            seen += 1
            assert h is (raises_to(node) or program.uncaught)
    assert all(not (type(n) is cps.ApplyCont and n.raises) for n in cps.walk(program))   # no raise, no try
    if "call" in cps.show(program) or " / " in cps.show(program):
        assert seen > 0


def test_a_call_is_a_tail_call_only_when_both_its_continuations_are_its_functions():
    program = convert(check_types(Source("t.l", "def loop(n) = if (n == 0) 0 else loop(n - 1)\n"
                                                "print(loop(10))\n"))[0])
    (lam,) = [n for n in cps.walk(program) if type(n) is cps.Lambda]
    (call,) = [n for n in cps.walk(lam) if type(n) is Apply]
    assert call.cont.var is lam.cont and call.exn.var is lam.exn


# --- 5. Exceptions: raise and try (chapter 7), closures that take both continuations (chapter 8) -----

def run_converted(text: str, optimised: bool = False, **options) -> tuple:
    """The outcome of text on the CPS interpreter: after cps, or after opt, closure and shrink; each stage
    checked. Asserted equal to the reference interpreter's."""
    src = Source("t.l", text)
    want = reference(check_types(src)[0])
    *_, (_, value, _) = pipeline.stages_of(src, upto="shrink" if optimised else "cps", optimise=optimised,
                                           checked=True)
    got = on_cps(value, **options)
    assert got == want, (got, want)
    return got


def handlers_of(program) -> set:
    """The continuations that some call, failing operation or raise raises to and that are local handlers."""
    out = set()
    for n in walk(program):
        if type(n) in (Apply, Op, cps.Fail) and getattr(n, "exn", None) is not None \
                and type(n.exn.var.binder) is LetCont:
            out.add(n.exn.var)
        elif type(n) is cps.ApplyCont and n.raises and type(n.cont.var.binder) is LetCont:
            out.add(n.cont.var)
    return out


TRIES = """exception Stop
def g(x) = if (x > 3) raise(Stop) else x
def f(x) = try { g(x) } catch { Stop -> 0 }
def h(x) = try { if (x > 0) g(x) else g(g(x)) } catch { Stop -> g(1) }
def k(x) = try { let y = g(x); try { g(y) } catch { Stop -> g(2) } } catch { _ -> 9 }
print(f(2), f(5), h(2), h(5), h(-1), k(1), k(7))
"""


def test_a_call_in_a_try_block_is_never_a_tail_call():
    program = converted(TRIES)
    in_blocks = {}
    for name in ("f", "h", "k"):
        lam = function(program, name)
        handlers = handlers_of(lam)
        calls = [a for a in nodes(lam, Apply) if a.exn.var in handlers]
        assert all(a.cont.var is not lam.cont for a in calls), show(lam)    # none returns through ret
        in_blocks[name] = len(calls)
    assert in_blocks == {"f": 1, "h": 3, "k": 3}          # every call written in a block, counted
    assert run_converted(TRIES) == ("2 0 2 1 -1 1 9\n", None)


def test_a_call_in_a_clause_is_a_tail_call_when_the_try_is():
    program = converted(TRIES)
    h, k = function(program, "h"), function(program, "k")
    (clause_call,) = [a for a in nodes(h, Apply) if a.exn.var is h.exn]            # g(1), in h's clause
    assert clause_call.cont.var is h.cont
    (inner,) = [a for a in nodes(k, Apply) if type(a.args[0].var.binder) is LetPrim
                and type(a.args[0].var.binder.prim) is Const and a.args[0].var.binder.prim.value == 2]
    assert inner.cont.var is not k.cont and inner.exn.var is not k.exn   # g(2): its try is in a block


RETRY = """exception Again(Int)
def attempt(n) = if (n < {n}) raise(Again(n)) else n
def retry(n) = try {{ attempt(n) }} catch {{ Again(k) -> retry(k + 1) }}
print(retry(0))
"""


def test_a_retry_loop_in_its_handler_runs_a_million_times_in_constant_stack():
    # the top level's call of retry, and retry's call of attempt: two frames at most, a million times
    assert on_cps(converted(RETRY.format(n=1_000_000)), stack_limit=2) == ("1000000\n", None)
    # the limit is real: with the recursive call in a block (of an outer try), the stack grows each retry
    in_block = """exception Again(Int)
def attempt(n) = if (n < 1000) raise(Again(n)) else n
def retry(n) = try { try { attempt(n) } catch { Again(k) -> retry(k + 1) } } catch { Again(k) -> 0 }
print(retry(0))
"""
    printed, error = on_cps(converted(in_block), stack_limit=100)
    assert printed == "" and "stack overflow" in error
    assert on_cps(converted(in_block), stack_limit=3000) == ("1000\n", None)


WHILE_RAISE = """exception Found(Int)
def search(n, target) = {
  var i := 0
  var steps := 0
  var untouched := 7
  var after := 0
  let r = try {
    var inner := 0
    while (i < n) {
      steps := steps + 1
      inner := inner + 1
      if (i * i == target) raise(Found(i))
      i := i + 1
    }
    -1
  } catch {
    Found(x) -> { after := 1; x * 1000 + steps * 10 + untouched }
  }
  r + after
}
print(search(10, 49), search(3, 49))
"""


def test_the_clauses_see_the_vars_the_block_assigned_before_a_raise_out_of_a_while():
    assert run_converted(WHILE_RAISE) == ("7088 -1\n", None)
    assert run_converted(WHILE_RAISE, optimised=True) == ("7088 -1\n", None)
    program = converted(WHILE_RAISE)
    assert len(cells(program)) == 2          # i and steps; not untouched, not inner (the block's own),
    #                                          not after (assigned in a clause, a join point's parameter)
    assert cps.show(program).count("_cell") >= 2 and "i_cell" in cps.show(program) \
        and "steps_cell" in cps.show(program)


THROUGH = """exception A
exception B
def f(x) = if (x > 0) raise(A) else 0
def g(x) = try { f(x) } catch { B -> 1 }
print(try { g(0) + g(1) } catch { B -> 2 })
"""


def test_an_exception_through_trys_that_do_not_match_keeps_its_raise_site():
    for optimised in (False, True):
        printed, error = run_converted(THROUGH, optimised=optimised)
        assert printed == "" and error.startswith("t.l:3:23: runtime error: uncaught exception A\n")
    program = converted(THROUGH)
    jumps = [n for n in walk(program) if type(n) is cps.ApplyCont]
    assert sum(n.raises for n in jumps) == 1                         # the raise; passing on is no new raise
    passing_on = [n for n in jumps if not n.raises and (n.cont.var is program.uncaught or
                  type(n.cont.var.binder) is Lambda and n.cont.var.binder.exn is n.cont.var)]
    assert len(passing_on) == 2                                       # g's handler and the top level's


def test_the_predefined_exceptions_raise_to_the_handler_of_their_block():
    text = """data O { S(Int); N }
def f(x, y) = try { (x / y, match (S(x)) { N -> 0 }) } catch { DivisionByZero -> (1, 1); MatchFailure -> (2, 2) }
def a(b) = try { assert(b); 0 } catch { AssertionFailed -> 1 }
print(f(1, 0), f(1, 1), a(true), a(false))
"""
    program = converted(text)
    f = function(program, "f")
    (h,) = handlers_of(f)
    failing = [n for n in walk(f) if type(n) in (Op, cps.Fail) and n.exn is not None]
    assert len(failing) == 2 and all(n.exn.var is h for n in failing)
    assert run_converted(text) == ("(1, 1) (2, 2) 0 1\n", None)


def test_closure_code_takes_both_continuations_and_calls_through_closures_pass_both():
    text = """exception Stop
def apply(f, x) = try { f(x) } catch { Stop -> -1 }
def stop(n) = if (n > 0) raise(Stop) else n
print(apply({ n -> stop(n) + 1 }, 3), apply({ n -> n * 2 }, 4))
"""
    program = closed(text)
    lam = function(program, "apply")
    (call,) = nodes(lam, Apply)
    assert call.kind == "closure" and type(call.exn.var.binder) is LetCont      # the handler, not apply's
    codes = [d.value for d in program.definitions if type(d.value) is Lambda]
    assert all(c.exn is not None and c.exn is not c.cont for c in codes)
    assert on_cps(program) == reference(check_types(Source("t.l", text))[0]) == ("-1 8\n", None)


def test_a_cell_written_by_a_closure_is_read_again_after_closure_conversion():
    """Chapter 9's shrinker, after chapter 8: the closure writes the cell through its record, under another
    name; the read after the calls must not be replaced by the cell's first value (it was, before issue 25)."""
    text = """def deep(n, log) = if (n == 0) 0 else { log(n); deep(n - 1, log) }
def count_down() = {
  var last := -1
  deep(5, { n -> last := n })
  last
}
print(count_down())
"""
    assert run_converted(text, optimised=True) == ("1\n", None)
