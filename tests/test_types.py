"""Type inference (chapter 5): the corpus, random well-typed programs, and the chapter's claims."""

import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lcompiler.errors import CompileError, RunError, Source
from lcompiler.interp import Interpreter
from lcompiler.types import check_types, show_types

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
WELL_TYPED = sorted((CORPUS / "run").glob("*.l")) + sorted((CORPUS / "fail").glob("*.l")) + \
    sorted((ROOT / "examples").glob("*.l"))
ILL_TYPED = sorted((CORPUS / "types").glob("*.l"))


@pytest.mark.parametrize("path", WELL_TYPED, ids=[p.parent.name + "/" + p.stem for p in WELL_TYPED])
def test_programs_that_run_are_well_typed(path):
    check_types(Source(path.name, path.read_text()))


@pytest.mark.parametrize("path", ILL_TYPED, ids=[p.stem for p in ILL_TYPED])
def test_ill_typed_programs_are_rejected_where_and_as_expected(path):
    text = path.read_text()
    m = re.match(r"//\s*error\s+(\d+):(\d+)\s+(expected .+, found .+?)\s*$", text.splitlines()[0])
    assert m, "first line: // error LINE:COL expected T1, found T2"
    with pytest.raises(CompileError) as caught:
        check_types(Source(path.name, text))
    error = caught.value
    assert error.span.source.line_col(error.span.start) == (int(m.group(1)), int(m.group(2))), error.render()
    assert error.message.startswith(m.group(3)), error.render()


def schemes(text: str) -> dict:
    return dict(line.split(" : ") for line in show_types(Source("t.l", text)).splitlines())


def test_polymorphism_value_restriction_and_components():
    found = schemes("""
data List<t> { Cons(t, List<t>); Nil }
def id(x) = x
def pair = (id(1), id(true))
def even(n) = if (n == 0) true else odd(n - 1)
def odd(n) = if (n == 0) false else even(n - 1)
def map(f, l) = match (l) { Cons(x, r) -> Cons(f(x), map(f, r)); Nil -> Nil }
def empty = map(id, Nil)
def same(a, b) = a == b
def cell = { var c := Nil; { x -> { let old = c; c := x; old } } }
""")
    assert found == {"id": "a -> a", "pair": "(Int, Bool)", "even": "Int -> Bool", "odd": "Int -> Bool",
                     "map": "(a -> b, List<a>) -> List<b>", "empty": "List<_a>",
                     "same": "(Int, Int) -> Bool",
                     "cell": "List<_a> -> List<_a>"}   # a block, not a syntactic value: weak


def test_the_unsound_program_of_the_chapter_is_rejected():
    program = """
data List<t> { Cons(t, List<t>); Nil }
def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
def swap = make_cell()
swap(Cons(1, Nil))
swap(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
"""
    with pytest.raises(CompileError, match=r"expected List<Int>, found List<String> \(the argument of swap\)"):
        check_types(Source("t.l", program))


def test_equality_needs_int_bool_or_string():
    with pytest.raises(CompileError, match="expected Int, Bool or String, found"):
        check_types(Source("t.l", "print((1, 2) == (1, 2))"))
    with pytest.raises(CompileError, match=r"expected Int, found a -> a \(argument 1 of same\)"):
        check_types(Source("t.l", "def same(a, b) = a == b\nprint(same({ x -> x }, { x -> x }))"))
    assert schemes('def eq(a, b) = a == b\ndef s = (eq(1, 2), "x" == "y", true != false)') == \
        {"eq": "(Int, Int) -> Bool", "s": "(Bool, Bool, Bool)"}


def test_data_declarations_are_checked():
    for text, message in [("data T { A(U) }", "unknown type U"), ("data T { A(List) }", "unknown type List"),
                          ("data L<a> { C(L) }", "L takes 1 type argument, given 0"),
                          ("data T { A(b) }", "unknown type variable b"),
                          ("data T<a, a> { A }", "declared twice")]:
        with pytest.raises(CompileError, match=message):
            check_types(Source("t.l", text))


def test_every_node_gets_a_resolved_type():
    from lcompiler import core as c
    from lcompiler.types import TCon, TParam
    program, _ = check_types(Source("t.l", "def f(x) = { let y = (x, 1); print(y); y }\nprint(f(true))"))
    todo, count = [program.items], 0
    while todo:
        x = todo.pop()
        if isinstance(x, (list, tuple)):
            todo.extend(x)
        elif isinstance(x, c.Def):
            todo.append(x.value)
        elif type(x).__module__ == c.__name__:
            assert isinstance(x.type, (TCon, TParam)), x
            count += 1
            todo.extend(getattr(x, f) for f in x.__slots__ if f not in ("span", "type", "op_span", "kind", "form"))
    assert count > 10


# -- random well-typed programs, generated from their types ------------------------------------

PRELUDE = """\
data List<t> { Cons(t, List<t>); Nil }
def id(x) = x
def twice(f, x) = f(f(x))
def length = { Cons(_, t) -> 1 + length(t); Nil -> 0 }
def map(f, l) = l.{ Cons(x, r) -> Cons(f(x), map(f, r)); Nil -> Nil }
exception Stop
exception Fail(Int)
"""

BASE = ["Int", "Bool", "String", "Unit"]


@st.composite
def types(draw, depth=2, kinds=("base", "base", "tuple", "fn", "list")):
    """A type: a base type's name, or a tuple (constructor, arguments…); kinds weighs what a level
    may be ("shape", the Shape of tests/test_convert.py's prelude, only where kinds says so)."""
    if depth == 0:
        return draw(st.sampled_from(BASE))
    kind = draw(st.sampled_from(kinds))
    if kind == "base":
        return draw(st.sampled_from(BASE))
    if kind == "shape":
        return "Shape"
    if kind == "tuple":
        return ("*", draw(types(depth - 1, kinds)), draw(types(depth - 1, kinds)))
    if kind == "fn":
        return ("->", draw(types(depth - 1, kinds)), draw(types(depth - 1, kinds)))
    return ("List", draw(types(depth - 1, kinds)))


def show(t) -> str:
    if isinstance(t, str):
        return t
    if t[0] == "*":
        return f"({show(t[1])}, {show(t[2])})"
    if t[0] == "->":
        left = show(t[1])
        return f"{'(' + left + ')' if isinstance(t[1], tuple) and t[1][0] == '->' else left} -> {show(t[2])}"
    return f"List<{show(t[1])}>"


@st.composite
def expression(draw, t, env, depth):
    """L text of an expression of type t, using the variables of env (name -> type)."""
    names = [x for x, tx in env.items() if tx == t]
    leaf = depth <= 0
    options = ["literal"] + ["var"] * bool(names) + ([] if leaf else ["let", "if", "call", "id", "shape",
                                                                       "raise", "try"])
    kind = draw(st.sampled_from(options))
    sub = lambda ty, e=env: draw(expression(ty, e, depth - 1))
    if kind == "raise":             # of any type: an exception, perhaps caught by a try around it
        return draw(st.sampled_from(["raise(Stop)", f"raise(Fail({sub('Int')}))"]))
    if kind == "try":               # clauses that do and do not match
        x = f"v{len(env)}"
        clauses = draw(st.lists(st.sampled_from([f"Stop -> {sub(t)}", f"Fail({x}) -> {sub(t, {**env, x: 'Int'})}",
                                                 f"Fail(0) -> {sub(t)}", f"_ -> {sub(t)}"]), min_size=1, max_size=3))
        return f"try {{ {sub(t)} }} catch {{ {'; '.join(clauses)} }}"
    if kind == "var":
        return draw(st.sampled_from(names))
    if kind == "let":
        x = f"v{len(env)}"
        tx = draw(types(1))
        return f"{{ let {x} = {sub(tx)}; {sub(t, {**env, x: tx})} }}"
    if kind == "if":
        return f"(if ({sub('Bool')}) {sub(t)} else {sub(t)})"
    if kind == "call":
        arg = draw(types(1))
        return f"({sub(('->', arg, t))})({sub(arg)})"
    if kind == "id":
        return f"id({sub(t)})"
    # literal or shape: build a value of the type from its structure
    if t == "Int":
        if kind == "shape":
            op = draw(st.sampled_from(["+", "-", "*"]))
            return f"({sub('Int')} {op} {sub('Int')})" if draw(st.booleans()) else f"length({sub(('List', 'Bool'))})"
        return str(draw(st.integers(0, 99)))
    if t == "Bool":
        if kind == "shape":
            choice = draw(st.sampled_from(["<", "==", "&&", "!", "eqs"]))
            if choice == "!":
                return f"!{sub('Bool')}"
            if choice == "&&":
                return f"({sub('Bool')} && {sub('Bool')})"
            if choice == "eqs":      # the if fixes the operands' type: == on a type still unknown is on Int
                return f"((if (true) {sub('String')} else \"\") == {sub('String')})"
            return f"({sub('Int')} {choice} {sub('Int')})"
        return draw(st.sampled_from(["true", "false"]))
    if t == "String":
        return '"' + draw(st.sampled_from(["", "a", "b c", "x\\n"])) + '"'
    if t == "Unit":
        return "()" if kind == "literal" else f"print({sub('Int')})"
    if t[0] == "*":
        return f"({sub(t[1])}, {sub(t[2])})"
    if t[0] == "->":
        x = f"p{len(env)}"
        return f"{{ {x} -> {sub(t[2], {**env, x: t[1]})} }}"
    if kind == "shape":
        return f"map({{ y -> y }}, {sub(t)})" if draw(st.booleans()) else f"twice({{ l -> l }}, {sub(t)})"
    return "Nil" if draw(st.booleans()) else f"Cons({sub(t[1])}, {sub(t)})"


def instance_of(t, scheme, mapping: dict) -> bool:
    """Is the chosen type t an instance of the inferred type (its parameters mapped consistently)?"""
    from lcompiler.types import TParam
    if isinstance(scheme, TParam):
        return mapping.setdefault(scheme, t) == t
    if isinstance(t, str):
        return scheme.name == t and not scheme.args
    name = {"*": "*", "->": "->", "List": "List"}[t[0]]
    return scheme.name == name and len(scheme.args) == len(t) - 1 and \
        all(instance_of(x, y, mapping) for x, y in zip(t[1:], scheme.args))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_well_typed_programs_are_accepted_and_never_go_wrong(data):
    t = data.draw(types(2), label="type")
    e = data.draw(expression(t, {}, 4), label="expression")
    text = PRELUDE + f"def value = {e}\nprint(value)\n"
    source = Source("random.l", text)
    program, typing = check_types(source)
    assert instance_of(t, typing.schemes["value"], {}), (typing.show("value"), show(t))
    out = io.StringIO()
    try:
        Interpreter(out).run(program)
    except RunError as error:       # every kind of runtime error is a failure here: there is no /, no partial
        if not error.message.startswith("uncaught exception "):        # match; only a raise no clause caught
            raise AssertionError(f"{error.render()}\n{text}") from None


CORPUS_TEXTS = [p.read_text() for p in sorted(CORPUS.glob("*/*.l"))]
TOKENS = ["1", "true", '"s"', "()", "x", "f", "Nil", "Cons(1, Nil)", "(1, 2)", "{ x -> x }", "==", "+", "&&",
          "if (true) 1 else 2", "print", "(", ")", ";", "\n"]


@pytest.mark.slow
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_inference_never_raises_anything_but_a_located_compile_error(data):
    words = data.draw(st.sampled_from(CORPUS_TEXTS)).split(" ")
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(words) - 1))
        words[at] = data.draw(st.sampled_from(TOKENS + words))
    source = Source("mutant.l", " ".join(words))
    try:
        check_types(source)
    except CompileError as error:
        line, col = error.span.source.line_col(error.span.start)
        assert error.render().startswith(f"mutant.l:{line}:{col}: error: ")


# -- the value restriction's levels (issue 23, §1): a weak type stays weak ----------------------

CELL = """\
data List<t> { Cons(t, List<t>); Nil }
def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
"""

# The program of the issue: `swap` is not a syntactic value, so its type is weak; `g` reads it, and
# `g` is generalised. Before the fix, the unknowns of `swap`'s type kept the level of its component,
# one deeper than the top, so generalising `g` quantified them too: `g : a -> List<b> -> List<b>`,
# the program was accepted, and the compiled code read the Int it had stored as a String.
ISSUE = CELL + """\
def swap = make_cell()
def g(y) = swap
g(1)(Cons(1, Nil))
g(2)(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
"""

# Each variant reaches the weak `swap` another way; the last two lines use it at List<Int>, then at
# List<String>: the second use is the conflict, and the contract puts the error there.
USES = """\
{f}(Cons(1, Nil))
{f}(Cons("one", Nil)).{{ Cons(s, _) -> print(s == "one", s); Nil -> () }}
"""
VARIANTS = {
    "a def reads it": ("def swap = make_cell()\ndef g(y) = swap\n", "g(2)"),
    "an alias, a value": ("def swap = make_cell()\ndef alias = swap\n", "alias"),
    "a tuple of it, a value": ("def swap = make_cell()\ndef both = (swap, swap)\n"
                               "def first((a, b)) = a\n", "first(both)"),
    "only through another def": ("def swap = make_cell()\ndef g(y) = swap\ndef k(y) = g(y)\n", "k(3)"),
    "nested lets": ("def swap = { let cell = make_cell(); let same = cell; same }\ndef g(y) = swap\n", "g(2)"),
    "mutual recursion, weak": ("def swap = { let unused = g; make_cell() }\n"
                               "def g(y) = { let unused = swap; swap }\ndef h(y) = g(y)\n", "h(2)"),
    "mutual recursion, readers": ("def swap = make_cell()\ndef even(n) = if (n == 0) swap else odd(n - 1)\n"
                                  "def odd(n) = if (n == 0) swap else even(n - 1)\n", "odd(1)"),
    "inside a function": ("def main() = {\n  let swap = make_cell()\n  let g = { y -> swap }\n"
                          "  g(1)(Cons(1, Nil))\n  g(2)(Cons(\"one\", Nil))\n}\nmain()\n", None),
    "inside a function, nested lets": ("def main() = {\n  let swap = { let c = make_cell(); c }\n"
                                       "  let g = { y -> { let h = { z -> swap }; h(y) } }\n"
                                       "  g(1)(Cons(1, Nil))\n  g(2)(Cons(\"one\", Nil))\n}\nmain()\n", None),
}


def variant(name: str) -> str:
    defs, f = VARIANTS[name]
    return CELL + defs + (USES.format(f=f) if f else "")


def conflicting_use(text: str) -> tuple:
    """Line and column of the last Cons("one", Nil): the use that contradicts the first."""
    at = text.rindex('Cons("one", Nil)')
    return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


@pytest.mark.parametrize("text", [ISSUE] + [variant(n) for n in VARIANTS], ids=["issue"] + list(VARIANTS))
def test_a_weak_type_is_fixed_by_its_first_use_wherever_it_is_read(text):
    with pytest.raises(CompileError) as caught:
        check_types(Source("t.l", text))
    error = caught.value
    assert error.span.source.line_col(error.span.start) == conflicting_use(text), error.render()
    assert error.message.startswith("expected List<Int>, found List<String>"), error.render()


def test_a_def_that_reads_a_weak_type_is_generalised_in_its_own_variables_only():
    found = schemes(CELL + "def swap = make_cell()\ndef g(y) = swap\ndef alias = swap\ndef k(y) = (y, g(y))\n")
    assert found == {"make_cell": "Unit -> List<a> -> List<a>", "swap": "List<_a> -> List<_a>",
                     "g": "a -> List<_b> -> List<_b>", "alias": "List<_a> -> List<_a>",
                     "k": "a -> (a, List<_b> -> List<_b>)"}


def test_the_program_of_the_issue_is_refused_before_it_runs():
    from lcompiler.driver import run_source
    result = run_source(Source("issue.l", ISSUE), timeout=60)     # compiled and run in a child process
    line, col = conflicting_use(ISSUE)
    assert (result.status, result.stdout) == (1, ""), result
    assert result.stderr.startswith(f"issue.l:{line}:{col}: error: expected List<Int>, found List<String>")


# --- The worked solutions of chapter 5's exercises ------------------------------------------------

import lcompiler.types as types_module
from lcompiler import core as c


class TuplePatterns(types_module.Inference):
    """Exercise 1: `let (a, b) = v; e` (a match of one clause on a value) generalised as a let is."""

    def match(self, scrutinee, clauses, env):
        if len(clauses) != 1 or not types_module.is_value(scrutinee) or \
                getattr(scrutinee, "name", "").startswith("%"):
            return super().match(scrutinee, clauses, env)
        (pattern, body), = clauses
        self.level += 1
        t = self.infer(scrutinee, env)
        bound = self.pattern(pattern, t, {}, ("the value matched", scrutinee.span, t))
        self.level -= 1
        self.settle_equalities()
        self.generalize(t)
        return self.infer(body, {**env, **{x: (u, True) for x, (u, _) in bound.items()}})


def test_solution_1_tuple_patterns_generalised(monkeypatch):
    before = "def id(x) = x\ndef main() = { let (a, b) = (id, id); (a(1), a(true), b(\"s\")) }\n"
    with pytest.raises(CompileError, match="expected Int, found Bool"):
        show_types(Source("t.l", before))                    # the chapter's inference: a is monomorphic
    monkeypatch.setattr(types_module, "Inference", TuplePatterns)
    assert schemes(before)["main"] == "Unit -> (Int, Bool, String)"
    assert schemes(LIST_TEXT + "def id(x) = x\ndef main() = { let (a, b) = (id, Nil); "
                   "(a(1), a(true), Cons(1, b), Cons(true, b)) }")["main"] == \
        "Unit -> (Int, Bool, List<Int>, List<Bool>)"
    for not_generalised in ["def main() = { let (a, b) = (id(id), Nil); (a(1), a(true), b) }",
                            "def f(p) = { let (a, b) = p; (a(1), a(true)) }"]:   # a call; a parameter
        with pytest.raises(CompileError, match="expected Int, found Bool"):
            show_types(Source("t.l", LIST_TEXT + "def id(x) = x\n" + not_generalised))
    # chapter 5b copies lets only: its checker stops the generalised match, as the solution says
    from lcompiler.mono import IllTyped, check, monomorphise
    typed, _ = check_types(Source("t.l", before + "print(main())\n"))
    with pytest.raises(IllTyped, match="the variable a: Int -> Int where Unit -> Unit is wanted"):
        check(monomorphise(typed))


LIST_TEXT = "data List<t> { Cons(t, List<t>); Nil }\n"


class FreeInEnvironment(types_module.Inference):
    """Exercise 2: generalise the unknowns not free in Γ, found by walking Γ, instead of by levels."""
    scope, group, visited = {}, set(), 0     # Γ's locals; the globals being generalised; types walked

    def let_bound(self, value, env):
        outer, self.scope, self.group = (self.scope, self.group), env, set()
        try:
            return super().let_bound(value, env)
        finally:
            self.scope, self.group = outer

    def component(self, group):
        self.scope, self.group = {}, {d.name.name for d in group}
        super().component(group)

    def unknowns(self, t, found: set) -> set:
        todo = [t]
        while todo:
            FreeInEnvironment.visited += 1
            x = self.shallow(todo.pop())
            if type(x) is types_module.TVar:
                found.add(self.uf.find(x))
            else:
                todo.extend(x.args)
        return found

    def generalize(self, t) -> None:
        free = set()
        gamma = [u for name, (u, _) in self.globals.items() if name not in self.group]
        for u in gamma + [u for u, _ in self.scope.values()]:
            self.unknowns(u, free)
        for p in self.unknowns(t, set()) - free:
            if self.uf.description(p).level != types_module.GENERIC:
                self.uf.description(p).level = types_module.GENERIC


def outcome(path) -> str:
    try:
        return show_types(Source(path.name, path.read_text()))
    except CompileError as error:
        return error.render()


def test_solution_2_free_in_the_environment_agrees_with_levels_and_is_quadratic(monkeypatch):
    programs = WELL_TYPED + ILL_TYPED
    with_levels = [outcome(p) for p in programs]
    monkeypatch.setattr(types_module, "Inference", FreeInEnvironment)
    assert [outcome(p) for p in programs] == with_levels

    def walked(n: int) -> int:
        text = "def f0(n) = n\n" + "".join(f"def f{i}(n) = if (n == 0) {i} else f{i - 1}(n - 1)\n"
                                           for i in range(1, n + 1))
        FreeInEnvironment.visited = 0
        show_types(Source("chain.l", text))
        return FreeInEnvironment.visited
    assert 3.8 < walked(400) / walked(200) < 4.2             # twice the definitions, four times the walk


class Declared(tuple):
    """An environment entry (type, generalised?) that remembers where its var got its type."""
    origin = None


class DeclarationNotes(types_module.Inference):
    """Exercise 3: the error of `x := e` notes the var that declared x."""

    def statement(self, e, env):
        if type(e) is c.LetVar:
            t = self.infer(e.value, env)
            entry = Declared((t, False))
            entry.origin = (f"the var {e.name}", e.value.span, t)
            return self.infer(e.body, {**env, e.name: entry})
        if type(e) is c.Assign:
            target_type = self.variable(e.target, env)
            e.target.type = target_type
            self.check(e.value, target_type, env, f"the assignment to {e.target.name}",
                       getattr(env.get(e.target.name), "origin", None))
            return types_module.UNIT
        return super().statement(e, env)


def test_solution_3_an_assignment_notes_its_var(monkeypatch):
    text = 'def main() = {\n  var n := 0;\n  { var n := "s"; n := "t" };\n  n := "three";\n  n\n}\n'
    with pytest.raises(CompileError) as before:
        show_types(Source("t.l", text))
    assert before.value.notes == []
    monkeypatch.setattr(types_module, "Inference", DeclarationNotes)
    with pytest.raises(CompileError) as after:
        show_types(Source("t.l", text))
    assert after.value.render() == before.value.render() + (
        "\nt.l:2:12: note: the var n has type Int\n  var n := 0;\n           ^")
    for path in WELL_TYPED:                                   # and nothing else changes
        show_types(Source(path.name, path.read_text()))
