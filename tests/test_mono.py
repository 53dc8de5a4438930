"""Monomorphisation, judged against the reference interpreter and the later stages.

Every corpus program (run and fail) and every example is monomorphised, then:
- no `.type` field anywhere (expressions, patterns, variables, definitions) holds a TParam;
- the result is well typed at the types it records (chapter 5b's checker, `check`);
- the input program is left as it was;
- the reference interpreter prints the same and stops with the same rendered error, on the
  result, and an interpreter whose print and match failures are driven by the *static* types
  (as the back end's are) prints the same too;
- CPS conversion, closure conversion and chapter 6's checker accept the result, and the CPS
  interpreter agrees.
Then programs written for the cases that matter, and random programs from tests/test_convert.py.
"""

import tempfile
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from lcompiler import core as c, cps, syntax as s
from lcompiler.closure import closure_convert
from lcompiler.core import pretty_core
from lcompiler.cps_convert import convert
from lcompiler.errors import CompileError, Source
from lcompiler.interp import Closure, Data, Interpreter, Raised, show_value
from lcompiler.types import TCon, TParam, check_types, show_type

from lcompiler.mono import Checker, IllTyped, check, field_type, measure, monomorphise

from test_convert import on_cps, outcome, programs, reference

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
PROGRAMS = sorted((CORPUS / "run").glob("*.l")) + sorted((CORPUS / "fail").glob("*.l")) + \
    sorted((ROOT / "examples").glob("*.l"))
IDS = [p.parent.name + "/" + p.stem for p in PROGRAMS]
SLOW = {"tail_sum_million", "tail_mutual_million"}      # seconds per run: run once, on the result only


# --- Running -------------------------------------------------------------------------------------

def typed(core) -> tuple:
    return outcome(lambda out: TypedInterpreter(core, out).run(core))


def compile_text(text: str, name: str = "x.l"):
    return check_types(Source(name, text))[0]


# --- What the result must be: no type variable, well typed ----------------------------------------

def walk(x):
    """Every dataclass node reachable from x (lists and tuples included), types excepted."""
    todo = [x]
    while todo:
        x = todo.pop()
        if isinstance(x, (list, tuple)):
            todo.extend(x)
        elif is_dataclass(x) and not isinstance(x, (TCon, TParam, s.Data)):
            yield x
            todo.extend(getattr(x, f.name) for f in fields(x) if f.name not in ("span", "op_span", "type"))


def type_params(t) -> list:
    if isinstance(t, TParam):
        return [t]
    return [p for a in t.args for p in type_params(a)] if isinstance(t, TCon) else []


def no_type_variables(program) -> None:
    for node in walk(program.items):
        if hasattr(node, "type"):
            assert node.type is not None or isinstance(node, c.Def), f"untyped {node!r}"
            assert not type_params(node.type), f"{show_type(node.type)} on {node!r}"


def snapshot(program) -> tuple:
    """The text and every recorded type of a program: to check that it was not changed."""
    return pretty_core(program), [(type(n).__name__, getattr(n, "type", None)) for n in walk(program.items)]


INT, BOOL, UNIT, STRING = TCon("Int"), TCon("Bool"), TCon("Unit"), TCon("String")


def constructors(program) -> dict:
    """Constructor -> (type name, parameter names, field syntax types)."""
    return {con.name: (d.name, [p.name for p in d.params], [f.type for f in con.fields or []])
            for d in program.items if isinstance(d, s.Data) for con in d.constructors}


def field_types(cons: dict, name: str, t: TCon) -> list:
    data, params, fields_ = cons[name]
    assert t.name == data and len(t.args) == len(params), f"{name} at {show_type(t)}"
    return [field_type(f, dict(zip(params, t.args))) for f in fields_]


# --- An interpreter whose print reads the static types, as the back end's must ---------------------

class TypedInterpreter(Interpreter):
    """The reference interpreter, but `print` and the value of a match failure are written from the
    type recorded on the node (checking on the way that the value has that type)."""

    def __init__(self, program, out):
        super().__init__(out)
        self.cons = constructors(program)

    def show(self, v, t, nested: bool = False) -> str:
        assert isinstance(t, TCon), f"print at the type {t!r}"
        if t == INT:
            assert type(v) is int
        elif t == BOOL:
            assert type(v) is bool
        elif t == UNIT:
            assert v == ()
        elif t == STRING:
            assert type(v) is str
        elif t.name == "->":
            assert type(v) is Closure
        elif t.name == "*":
            assert type(v) is tuple and len(v) == len(t.args)
            return "(" + ", ".join(self.show(x, u, True) for x, u in zip(v, t.args)) + ")"
        else:
            assert type(v) is Data and self.cons[v.name][0] == t.name
            items = [self.show(x, u, True) for x, u in zip(v.fields, field_types(self.cons, v.name, t))]
            return v.name + ("(" + ", ".join(items) + ")" if items else "")
        return show_value(v, nested)

    def compile(self, e, tail: bool = False):
        if type(e) is c.Print:
            args, types_, out = [self.compile(a) for a in e.args], [a.type for a in e.args], self.out

            def print_(env):
                out.write(" ".join([self.show(a(env), t) for a, t in zip(args, types_)]) + "\n")
                return ()
            return print_
        if type(e) is c.Match:
            plain = super().compile(e, tail)
            scrutinee, t, span = self.compile(e.scrutinee), e.scrutinee.type, e.span

            def run_match(env):
                try:
                    return plain(env)
                except Raised as error:      # MatchFailure, which a try may catch: the value shown at its type
                    if error.span is span and error.message.startswith("no clause matches"):
                        raise Raised(error.value, span, "no clause matches the value "
                                     f"{self.show(scrutinee(env), t, True)}") from None
                    raise
            return run_match
        return super().compile(e, tail)


# --- 1. The corpus and the examples --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_corpus_means_the_same_monomorphised(path):
    core = compile_text(path.read_text(encoding="utf-8"), path.name)
    before = snapshot(core)
    mono = monomorphise(core)
    assert snapshot(core) == before, "the input was changed"
    no_type_variables(mono)
    check(mono)
    program = convert(mono)
    cps.check(program)
    closure_convert(program)
    cps.check(program, closed=True)
    if path.stem in SLOW:         # their .out files are checked against the reference by test_corpus.py
        assert reference(mono) == (path.with_suffix(".out").read_text(encoding="utf-8"), None)
        return
    want = reference(core)
    assert reference(mono) == want
    assert typed(mono) == want
    assert on_cps(program) == want
    if path.parent.name == "fail":
        assert want[1] is not None


# The exception programs (tests/corpus/exceptions): the copy must not change what raises and what
# catches. The two that raise a million times are left to tests/test_exceptions.py.
EXCEPTION_PROGRAMS = [p for p in sorted((CORPUS / "exceptions").glob("*.l"))
                      if p.stem not in ("million_raises", "handler_tail_calls")]


@pytest.mark.slow
@pytest.mark.parametrize("path", EXCEPTION_PROGRAMS, ids=[p.stem for p in EXCEPTION_PROGRAMS])
def test_exception_programs_mean_the_same_monomorphised(path):
    core = compile_text(path.read_text(encoding="utf-8"), path.name)
    before = snapshot(core)
    mono = monomorphise(core)
    assert snapshot(core) == before, "the input was changed"
    no_type_variables(mono)
    check(mono)
    want = reference(core)
    assert reference(mono) == want
    assert typed(mono) == want


def test_the_checker_knows_raise_and_try():
    text = LIST + """exception Stop(Int)
def f(n) = try { if (n > 0) raise(Stop(n)) else n } catch { Stop(k) -> k; _ -> 0 }
print(f(1), try { f(0) } catch { DivisionByZero -> 1 })
"""
    def damaged(damage) -> str:
        mono = monomorphise(compile_text(text))
        check(mono)
        damage(mono)
        with pytest.raises(IllTyped) as error:
            check(mono)
        return error.value.render().split("\n")[0]

    def first(kind):
        return lambda p: next(x for x in walk(p.items) if type(x) is kind)
    raise_ = first(c.Raise)

    def try_(p):                             # f's, with two clauses
        return next(x for x in walk(p.items) if type(x) is c.Try and len(x.clauses) == 2)

    def break_raise(p):
        raise_(p).arg.type = INT

    def break_block(p):
        try_(p).body.type = STRING

    def break_clause(p):
        try_(p).clauses[0][1].type = BOOL

    def break_pattern(p):
        try_(p).clauses[1][0].type = INT

    assert damaged(break_raise).endswith("the argument of raise: Int where Exn is wanted")
    assert damaged(break_block).endswith("the block of a try: String where Int is wanted")
    assert damaged(break_clause).endswith("a clause of a catch: Bool where Int is wanted")
    assert damaged(break_pattern).endswith("a pattern: Int where Exn is wanted")


def test_the_corpus_is_there():
    assert len(PROGRAMS) >= 70


# --- 2. The cases that matter --------------------------------------------------------------------

LIST = "data List<t> { Cons(t, List<t>); Nil }\n"


def same(text: str, printed: str = None, error: str = None):
    """Monomorphise text; check everything above; return the result and its statistics."""
    core = compile_text(text)
    before = snapshot(core)
    mono, stats = measure(core)
    assert snapshot(core) == before
    no_type_variables(mono)
    check(mono)
    want = reference(core)
    assert reference(mono) == want and typed(mono) == want
    program = convert(mono)
    cps.check(program)
    closure_convert(program)
    cps.check(program, closed=True)
    assert on_cps(program) == want
    if printed is not None:
        assert want[0] == printed
    if error is not None:
        assert want[1] is not None and error in want[1], want[1]
    else:
        assert want[1] is None, want[1]
    return mono, stats


def definitions(mono) -> dict:
    return {d.name.name: d.name.type for d in mono.items if isinstance(d, c.Def)}


def test_show_at_four_types():
    mono, stats = same(LIST + 'def show(x) = print(x)\nshow(1)\nshow("a")\nshow(Cons(1, Nil))\nshow((2, "b"))\n',
                       '1\na\nCons(1, Nil)\n(2, "b")\n')
    assert stats.instances == {"show": 4}
    assert {n: show_type(t) for n, t in definitions(mono).items()} == {
        "show": "Int -> Unit", "show_1": "String -> Unit", "show_2": "List<Int> -> Unit",
        "show_3": "(Int, String) -> Unit"}


def test_a_polymorphic_let_inside_a_polymorphic_function():
    _, stats = same(LIST + """
def f(x) = {
  let pair = { y -> (x, y) }
  print(pair(1), pair("s"))
  let unused = { z -> z }
  x
}
f(true)
f(Cons(Nil, Nil))
print(f(3) + 1)
""", '(true, 1) (true, "s")\n(Cons(Nil, Nil), 1) (Cons(Nil, Nil), "s")\n(3, 1) (3, "s")\n4\n')
    assert stats.instances["f"] == 3
    assert stats.instances["pair (let, 4:3)"] == 6           # two per copy of f
    assert stats.instances["unused (let, 6:3)"] == 3         # kept once per copy, at the default type


def test_mutually_recursive_polymorphic_definitions():
    _, stats = same(LIST + """
def even(l) = l.{ Nil -> true; Cons(x, r) -> { print(x); odd(r) } }
def odd(l) = l.{ Nil -> false; Cons(x, r) -> { print(x); even(r) } }
print(even(Cons(1, Cons(2, Nil))))
print(odd(Cons("a", Nil)))
print(even(Cons((1, 2), Nil)))
""", "1\n2\ntrue\na\ntrue\n(1, 2)\nfalse\n")
    assert stats.instances == {"even": 3, "odd": 3}
    # a group member's type parameter the other member's type does not mention (b, below)
    _, stats = same(LIST + """
def ping(n) = if (n == 0) 0 else pong(n - 1, Nil)
def pong(n, l) = { print(n, l); ping(n) }
print(pong(2, Cons("x", Nil)), pong(1, Cons(1, Nil)))
""", '2 Cons("x", Nil)\n1 Nil\n0 Nil\n1 Cons(1, Nil)\n0 Nil\n0 0\n')
    assert stats.instances == {"pong": 3}


def test_a_polymorphic_function_passed_as_an_argument():
    mono, stats = same(LIST + """
def id(x) = x
def apply(f, x) = f(x)
def twice(f, x) = f(f(x))
print(apply(id, 1), apply(id, "a"), twice(id, Cons(true, Nil)))
def map(f, l) = l.{ Nil -> Nil; Cons(x, r) -> Cons(f(x), map(f, r)) }
print(map(id, Cons(1, Nil)), map({ l -> map(id, l) }, Cons(Cons("a", Nil), Nil)))
""", '1 a Cons(true, Nil)\nCons(1, Nil) Cons(Cons("a", Nil), Nil)\n')
    assert stats.instances["id"] == 3 and stats.instances["apply"] == 2 and stats.instances["twice"] == 1


def test_print_of_a_type_fixed_by_nothing():
    mono, _ = same(LIST + "print(Nil)\nprint(Cons(Nil, Nil), (Nil, 1))\ndef id(x) = x\nprint(id(Nil))\n"
                   "def f() = { var v := Nil; v := v; v }\nprint(f())\n",
                   "Nil\nCons(Nil, Nil) (Nil, 1)\nNil\nNil\n")
    # the element type is defaulted to Unit
    assert show_type(mono.items[1].args[0].type) == "List<Unit>"
    assert show_type(definitions(mono)["id"]) == "List<Unit> -> List<Unit>"


def test_a_polymorphic_non_function_definition():
    mono, stats = same(LIST + """
def empty = Nil
def pair = (empty, { x -> x })
print(Cons(1, empty), Cons("a", empty), empty)
print(pair.{ (l, f) -> Cons(f(1), l) }, pair.{ (l, f) -> Cons(f("a"), l) })
def unused = Nil
""", 'Cons(1, Nil) Cons("a", Nil) Nil\nCons(1, Nil) Cons("a", Nil)\n')
    assert stats.instances == {"empty": 3, "pair": 2, "unused": 0}
    assert "unused" not in definitions(mono)                 # an unused value without effect is dropped
    # outside the first instance, a read first reads the definition that kept the name
    assert "def pair_1 = ({ empty; empty_1 }, { x -> x })" in pretty_core(mono)


def test_a_non_function_definition_read_too_early_is_still_named():
    # In a function, a read of an instance other than the first first reads the one that kept the name.
    text = LIST + """
def f() = (Cons(1, empty), Cons("a", empty))
print(f())
def empty = Nil
"""
    mono, _ = same(text, "", error='empty is read before its definition has run')
    core = compile_text(text)
    assert reference(core)[1] == reference(mono)[1]


def test_a_match_failure_inside_a_polymorphic_function():
    mono, stats = same(LIST + """
def head(l) = l.{ Cons(x, _) -> x }
print(head(Cons(1, Nil)), head(Cons("a", Nil)))
print(head(Cons(Cons(1, Nil), Nil)))
def pairs = Cons(("x", Nil), Nil)
print(head(pairs))
print(head(Cons(true, Nil)), head(Nil) + 1)
""", '1 a\nCons(1, Nil)\n("x", Nil)\n', error="x.l:3:16: runtime error: no clause matches the value Nil")
    assert stats.instances["head"] == 5


def test_a_match_failure_prints_the_value_at_its_type():
    same(LIST + 'def first(l) = match (l) { Cons(x, Nil) -> x }\nprint(first(Cons("a", Nil)))\n'
         'first(Cons(("q", Nil), Cons(("r", Cons(1, Nil)), Nil)))\n',
         "a\n", error='no clause matches the value Cons(("q", Nil), Cons(("r", Cons(1, Nil)), Nil))')


def test_names_do_not_collide():
    mono, _ = same(LIST + """
def f(x) = x
def f_1 = 7
def g(y) = { let f_2 = 3; (f(y), f_2) }
print(f(1), f("a"), f_1, g(true), g(Nil))
""", '1 a 7 (true, 3) (Nil, 3)\n')
    assert list(definitions(mono)) == ["f", "f_3", "f_4", "f_5", "f_1", "g", "g_1"]


def test_shadowing_and_a_let_named_like_an_outer_one():
    same(LIST + """
def id(x) = x
def h(n) = {
  let id = { y -> (id(y), n) }
  let k = { id -> id }
  print(id(1), id("a"), k(2))
  match (n) { id -> print(id) }
}
h(5)
h("n")
""", '(1, 5) ("a", 5) 2\n5\n(1, "n") ("a", "n") 2\nn\n')
    # a let of the same name as an outer polymorphic let, whose value uses the outer one
    mono, stats = same("""
def main() = {
  let f = { x -> x }
  let f = { y -> (f(y), f(true)) }
  print(f(1), f("a"))
}
main()
""", '(1, true) ("a", true)\n')
    assert stats.instances == {"f (let, 3:3)": 3, "f (let, 4:3)": 2}


def test_statistics():
    _, stats = same(LIST + "def id(x) = x\ndef k = 1\nprint(id(1), id(true), k)\n", "1 true 1\n")
    assert stats.definitions == (2, 3) and stats.functions == (1, 2)
    assert stats.nodes[1] > stats.nodes[0]


LEAK = LIST + """
def id(x) = x
def xs = id(Nil)
def f(y) = (y, xs)
def a = f(2)
match (a) { (n, Cons(s, _)) -> print(s + 1); (n, Nil) -> print("nil") }
match (f(3)) { (n, Cons(s, _)) -> print(s == "x"); (n, Nil) -> print(n) }
"""

ISSUE = LIST + """def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
def swap = make_cell()
def g(y) = swap
g(1)(Cons(1, Nil))
g(2)(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
"""


@pytest.fixture
def levels_not_lowered(monkeypatch):
    """Chapter 5's inference as it was before issue 23: a definition that is not generalised keeps
    its unknowns one level too deep, and a later definition that reads it generalises them."""
    from lcompiler.types import Inference
    monkeypatch.setattr(Inference, "lower", lambda self, t: None)


def test_the_leak_the_checker_found_is_now_a_type_error():
    """xs is weak (List<_a>); f reads it, and the uses at List<Int> and List<String> conflict."""
    with pytest.raises(CompileError) as caught:
        compile_text(LEAK)
    assert caught.value.render().startswith("x.l:8:46: error: expected Int, found String")


def test_the_checker_finds_the_leak_when_inference_lets_it_through(levels_not_lowered):
    """With the bug put back, chapter 5 accepts the program; the copy shares xs at List<Unit> while
    f's copies read it at List<Int> and List<String>, and the checker says where."""
    core = compile_text(LEAK)
    mono = monomorphise(core)
    no_type_variables(mono)
    with pytest.raises(IllTyped, match="x.l:5:16: .* the variable xs: List<Int> where List<Unit> is wanted"):
        check(mono)


@pytest.mark.parametrize("text, where", [(ISSUE, "4:12"), (LEAK, "5:16")], ids=["issue", "leak"])
def test_the_pipeline_stops_an_ill_typed_copy_at_compile_time(levels_not_lowered, text, where, capsys):
    """Defence in depth: the stage mono runs the checker, so an unsound inference is a located
    internal compiler error (status 3) when lc compiles, never a crash when the program runs.
    (run_source runs the code in a child process: without the check, this test fails, it does not
    crash.)"""
    from lcompiler import cli, driver
    with pytest.raises(IllTyped) as caught:
        driver.run_source(Source("x.l", text), timeout=60)
    assert caught.value.status == 3
    assert caught.value.render().startswith(f"x.l:{where}: internal compiler error: ill-typed after "
                                            "monomorphisation: the variable ")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "x.l").write_text(text)
        assert cli.main(["show", "mono", str(Path(tmp) / "x.l")]) == 3
    assert f"x.l:{where}: internal compiler error: ill-typed after monomorphisation" in capsys.readouterr().err


# --- 3. The checker fails where a rule is broken -------------------------------------------------

BROKEN = LIST + """def id(x) = x
def n = 1 + 2
def f(l) = match (l) { Cons(x, _) -> if (x > 0) x else 0; Nil -> id(0) }
print(f(Cons(n, Nil)), id(true), "s")
"""


def node(program, kind, where: str):
    """The first node of class kind whose span starts at LINE:COL."""
    for x in walk(program.items):
        if type(x) is kind and getattr(x, "span", None) is not None and repr(x.span) == where:
            return x
    raise LookupError(f"no {kind.__name__} at {where}")


def break_literal(p):
    node(p, c.Lit, "x.l:3:9").type = BOOL                     # the 1 of 1 + 2


def break_variable(p):
    node(p, c.Var, "x.l:5:14").name = "id"                     # Cons(id, Nil): id is Int -> Int


def break_call(p):
    node(p, c.App, "x.l:5:24").type = INT                      # id(true) : Int, where id_1 is Bool -> Bool


def break_primitive(p):
    zero = node(p, c.Lit, "x.l:4:46")                           # x > true: a Bool literal, right as a literal
    zero.value, zero.type = True, BOOL


def break_if(p):
    node(p, c.Var, "x.l:4:49").type = STRING                   # if (x > 0) x … with that x : String


def break_pattern(p):
    node(p, s.PVar, "x.l:4:29").type = STRING                  # Cons(x, _) with x : String


def break_definition(p):
    next(d for d in p.items if isinstance(d, c.Def) and d.name.name == "n").name.type = STRING


def leave_a_type_variable(p):
    node(p, c.Lit, "x.l:5:34").type = TParam(0)                 # "s"


@pytest.mark.parametrize("damage, where, message", [
    (break_literal, "3:9", "a literal: Bool where Int is wanted"),
    (break_variable, "5:14", "the variable id: Int where Int -> Int is wanted"),
    (break_call, "5:24", "the callee of a call: Bool -> Bool where Bool -> Int is wanted"),
    (break_primitive, "4:42", "> on Int, Bool giving Bool"),
    (break_if, "4:49", "a branch: String where Int is wanted"),
    (break_pattern, "4:29", "a pattern: String where Int is wanted"),
    (break_definition, "3:1", "the value of n: Int where String is wanted"),
    (leave_a_type_variable, "5:34", "the type a has a type variable"),
], ids=lambda x: x.__name__ if callable(x) else None)
def test_the_checker_finds_a_broken_rule_where_it_is_broken(damage, where, message):
    mono = monomorphise(compile_text(BROKEN))
    check(mono)
    damage(mono)
    with pytest.raises(IllTyped) as error:
        check(mono)
    assert error.value.render().startswith(f"x.l:{where}: internal compiler error: ill-typed after monomorphisation: "
                                           f"{message}\n")
    assert error.value.status == 3


# --- 4. Random programs (the generator of tests/test_convert.py) ----------------------------------

@pytest.mark.slow
@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_programs(text):
    core = compile_text(text)
    mono = monomorphise(core)
    no_type_variables(mono)
    check(mono)
    want = reference(core)
    assert reference(mono) == want and typed(mono) == want
    program = convert(mono)
    closure_convert(program)
    cps.check(program, closed=True)
    assert on_cps(program) == want


# --- The worked solution of chapter 5b's exercise 3: every broken rule ----------------------------

class Collecting(Checker):
    """The checker, going on after a broken rule: fail records the error; fields gives none for a
    constructor at a type not its own."""

    def __init__(self, program):
        super().__init__(program)
        self.errors = []

    def fail(self, node, message):
        try:
            super().fail(node, message)
        except IllTyped as error:
            self.errors.append(error.render().split("\n")[0].split("monomorphisation: ")[1])

    def fields(self, name, t, node):
        try:
            return super().fields(name, t, node)
        except IllTyped:
            return []


@pytest.mark.parametrize("damage, found", [
    (break_literal, ["a literal: Bool where Int is wanted", "+ on Bool, Int giving Int"]),
    (break_variable, ["the variable id: Int where Int -> Int is wanted"]),
    (break_call, ["the callee of a call: Bool -> Bool where Bool -> Int is wanted"]),
    (break_primitive, ["> on Int, Bool giving Bool"]),
    (break_if, ["a branch: String where Int is wanted", "the variable x: String where Int is wanted"]),
    (break_pattern, ["a pattern: String where Int is wanted"]),
    (break_definition, ["the value of n: Int where String is wanted",
                        "the variable n: Int where String is wanted"]),
    (leave_a_type_variable, ["the type a has a type variable", "a literal: a where String is wanted"]),
], ids=lambda x: x.__name__ if callable(x) else None)
def test_solution_3_every_broken_rule(damage, found):
    mono = monomorphise(compile_text(BROKEN))
    checker = Collecting(mono)
    checker.program(mono)
    assert checker.errors == []
    damage(mono)
    checker = Collecting(mono)
    checker.program(mono)
    assert checker.errors == found
    with pytest.raises(IllTyped) as first:                   # the chapter's check: the first of them
        check(mono)
    assert first.value.render().split("\n")[0].endswith(found[0])


def test_solution_1_a_chain_of_definitions_doubles_the_copies():
    """Chapter 5b's exercise 1: p{i} uses p{i-1} at two types; p0 is copied 2^n times."""
    for n in range(1, 7):
        chain = "def p0(x) = (x, 1)\n" + "".join(f"def p{i}(x) = p{i - 1}(p{i - 1}(x))\n" for i in range(1, n + 1))
        mono, stats = measure(compile_text(chain + f"print(p{n}(0))\n"))
        assert stats.instances["p0"] == 2 ** n
        assert stats.definitions == (n + 1, 2 ** (n + 1) - 1)
        no_type_variables(mono)
        check(mono)
