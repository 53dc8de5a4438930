"""The soundness of L's types, judged by an independent type checker (OCaml's) and by running.

A short property run of tests/soundness.py: random programs near the value restriction (weak
definitions, definitions that read them, uses at one type or two). What L accepts, OCaml must
accept, and it must run the same interpreted, compiled and in OCaml. `python tools/soundness.py
--programs 2000` runs a long one. The OCaml half is skipped, saying why, where OCaml is absent.
"""

import pytest
from hypothesis import HealthCheck, given, settings

from lcompiler.errors import Source
from lcompiler.interp import check as resolve

from soundness import PRELUDE, generate, interpret, judge, ocaml_available, programs, run_ocaml, to_ocaml

needs_ocaml = pytest.mark.skipif(not ocaml_available(),
                                 reason="ocamlc is not installed (apt-get install ocaml-nox): without it there "
                                        "is no independent type checker to compare L's with")
SHORT = settings(max_examples=30, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def report(verdict) -> str:
    return "\n".join(verdict.findings) + "\n" + verdict.text


@needs_ocaml
@SHORT
@given(programs())
def test_what_l_accepts_ocaml_accepts_and_runs_alike(text):
    verdict = judge(text, compiled=False)
    assert not verdict.findings, report(verdict)


@pytest.mark.slow
@SHORT
@given(programs())
def test_what_l_accepts_runs_alike_compiled_and_interpreted(text):
    verdict = judge(text, ocaml=False)
    assert not verdict.findings, report(verdict)


# --- The oracle can fail: with chapter 5's bug put back, it finds it ------------------------------

ISSUE = """\
data List<t> { Cons(t, List<t>); Nil }
def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
def swap = make_cell()
def g(y) = swap
g(1)(Cons(1, Nil))
g(2)(Cons("one", Nil)).{ Cons(s, _) -> print(s == "one", s); Nil -> () }
"""


@pytest.fixture
def levels_not_lowered(monkeypatch):
    """Chapter 5's inference before issue 23: a weak component's unknowns stay one level too deep."""
    from lcompiler.types import Inference
    monkeypatch.setattr(Inference, "lower", lambda self, t: None)


def test_the_judges_reject_the_program_of_the_issue():
    verdict = judge(ISSUE, ocaml=ocaml_available())
    assert not verdict.l_accepts and not verdict.findings
    assert verdict.l_error.startswith("random.l:6:6: error: expected List<Int>, found List<String>")
    if ocaml_available():
        assert not verdict.ocaml.accepted


def test_with_the_bug_put_back_the_judges_find_it(levels_not_lowered):
    verdict = judge(ISSUE, ocaml=ocaml_available())
    assert verdict.l_accepts
    assert any(f.startswith("compiled: status 3: random.l:4:12: internal compiler error: ill-typed after "
                            "monomorphisation") for f in verdict.findings), verdict.findings
    if ocaml_available():
        assert any(f.startswith("L accepts, OCaml rejects") for f in verdict.findings), verdict.findings


@pytest.mark.slow
@needs_ocaml
def test_with_the_bug_put_back_random_programs_find_it(levels_not_lowered):
    """The generator is not blind to the bug: in 150 programs of a fixed seed, OCaml rejects some
    that L (with the bug) accepts."""
    found = [v for v in (judge(t, compiled=False) for t in generate(150, seed=1)) if v.findings]
    assert any(f.startswith("L accepts, OCaml rejects") for v in found for f in v.findings), len(found)


# --- The generator and the translation ----------------------------------------------------------

@pytest.mark.slow
def test_the_generator_writes_both_well_and_ill_typed_programs_around_weak_definitions():
    texts = generate(60, seed=2)
    verdicts = [judge(t, ocaml=False, compiled=False) for t in texts]
    accepted = sum(v.l_accepts for v in verdicts)
    assert 10 < accepted < 55, accepted
    assert any("\ndef w" in t and "\ndef r" in t for t in texts)                 # weak defs, and readers
    assert any("e(n, y) = if (n == 0)" in t for t in texts)                       # mutually recursive readers
    assert all(t.startswith(PRELUDE) for t in texts)


EVERYTHING = PRELUDE + """\
def count(n) = { var i := 0; var acc := Nil; while (i < n) { acc := Cons(i * 2 - 1, acc); i := i + 1 }; acc }
def describe = { 0 -> "zero"; n -> if (n < 0 || n % 2 != 0 && !false) "odd or negative" else "even" }
def quoted = ("a\\"b", Cons("c\\nd", Nil), P(-3, ()), T3(true, Left(1), Right("r")), Fn({ x -> x }))
print(count(3), describe(0), describe(-4), describe(4), quoted)
print(compose(add(1), { x -> x * 10 })(4), const(7)("ignored"), pairer(1)(true), id(id)(5) / 2)
if (1 < 2) print("no else")
print(make_cell()(Cons(1, Nil)), -(1 + 2), "top-level \\"quoted\\"")
{ let r = make_ref(1); r.{ (get, set) -> { set(get(()) + 41); print(get(())) } } }
"""


@needs_ocaml
def test_the_translation_to_ocaml_means_the_same():
    """Every construct of the core, run by the interpreter and by OCaml from the translation."""
    program = resolve(Source("everything.l", EVERYTHING))
    from lcompiler.types import infer_program
    infer_program(program)
    ran = run_ocaml(to_ocaml(program, typed=True), run=True)
    assert ran.accepted and ran.status == 0, ran.error
    printed, error = interpret(resolve(Source("everything.l", EVERYTHING)))
    assert error is None and ran.stdout == printed
    assert printed.count("\n") == 5


@needs_ocaml
def test_a_type_error_is_a_type_error_for_ocaml_too():
    for text in ['print(1 + "one")', "def f(x) = x(x)", "def r = make_cell()\nr(Cons(1, Nil))\nr(Cons(true, Nil))"]:
        verdict = judge(PRELUDE + text + "\n", compiled=False)
        assert not verdict.l_accepts and not verdict.ocaml.accepted, verdict.ocaml
