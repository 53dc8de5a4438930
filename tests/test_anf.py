"""A-normal form (chapter 3): C0 … C5 against the gist's listings and the evaluators."""

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from lcompiler.anf import (
    A1, A2, C0, C1, C2, C3, C4, C5, GIST_LISTINGS, P1, P2, S, ScopeError, check_scopes,
    evaluate_a, evaluate_s, if0_chain, same_up_to_renaming, show, size)

COMPILERS = {"C0": C0, "C1": C1, "C2": C2, "C3": C3, "C4": C4, "C5": C5}
PROGRAMS = {"P1": P1, "P2": P2}


@pytest.mark.parametrize("compiler, program", sorted(GIST_LISTINGS))
def test_every_gist_listing_up_to_renaming_and_exactly_in_ocaml_order(compiler, program):
    listing = GIST_LISTINGS[compiler, program]
    lower = COMPILERS[compiler].lower
    assert same_up_to_renaming(lower(PROGRAMS[program]), listing)
    assert lower(PROGRAMS[program], right_to_left=True) == listing
    assert lower(PROGRAMS[program]) != listing, "Python's order numbers differently"


def test_same_up_to_renaming_is_a_bijection_on_fresh_names_only():
    t = A1.Let("%1", A1.Int(1), A1.Let("%2", A1.Int(2), A1.Return(A1.Bop("%1", "%2"))))
    swapped = A1.Let("%2", A1.Int(1), A1.Let("%1", A1.Int(2), A1.Return(A1.Bop("%2", "%1"))))
    merged = A1.Let("%1", A1.Int(1), A1.Let("%1", A1.Int(2), A1.Return(A1.Bop("%1", "%1"))))
    source = A1.Let("y", A1.Int(1), A1.Let("%2", A1.Int(2), A1.Return(A1.Bop("y", "%2"))))
    assert same_up_to_renaming(t, swapped)
    assert not same_up_to_renaming(t, merged) and not same_up_to_renaming(merged, t)
    assert not same_up_to_renaming(t, source), "source names are not renamed"
    assert not same_up_to_renaming(A1.Return(A1.Int(1)), A1.Return(A1.Int(2)))


@st.composite
def programs(draw, max_depth=6):
    """Closed, well-scoped S programs whose let-bound names are all distinct."""
    names = itertools.count()

    def gen(depth, scope):
        kinds = ["int"] + ["var"] * bool(scope) + ["bop", "let", "if0"] * (depth > 0)
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            return S.Int(draw(st.integers(-2, 2)))
        if kind == "var":
            return S.Var(draw(st.sampled_from(sorted(scope))))
        if kind == "bop":
            return S.Bop(gen(depth - 1, scope), gen(depth - 1, scope))
        if kind == "let":
            x = f"v{next(names)}"
            bound = gen(depth - 1, scope)
            return S.Let(x, bound, gen(depth - 1, scope | {x}))
        return S.If0(gen(depth - 1, scope), gen(depth - 1, scope), gen(depth - 1, scope))

    return gen(draw(st.integers(0, max_depth)), frozenset())


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(programs())
def test_every_compiler_preserves_the_value(s):
    value = evaluate_s(s)
    assert evaluate_s(C0.lower(s)) == value
    assert evaluate_s(C1.lower(s)) == value
    assert evaluate_s(C2.lower(s)) == value
    for compiler in (C3, C4, C5):
        assert evaluate_a(compiler.lower(s)) == value
        assert evaluate_a(compiler.lower(s, right_to_left=True)) == value


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(programs())
def test_c4_and_c5_bind_every_name_once_and_use_it_in_scope(s):
    check_scopes(C4.lower(s))
    check_scopes(C5.lower(s))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(programs())
def test_c5_output_is_linear_in_its_input(s):
    assert size(C5.lower(s)) <= 4 * size(s)


def trivial_join_points(t) -> int:
    """Join points whose code only returns their parameter: C4's lost tail positions."""
    count, stack = 0, [t]
    while stack:
        match stack.pop():
            case A2.LetJoin(_, x, A1.Return(A1.Var(y)), body) if x == y:
                count += 1
                stack.append(body)
            case A2.LetJoin(_, _, join_body, body):
                stack += [join_body, body]
            case A1.Let(_, _, body):
                stack.append(body)
            case A1.If0(_, then, orelse):
                stack += [then, orelse]
    return count


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(programs())
def test_c5_never_makes_a_join_point_that_only_returns(s):
    assert trivial_join_points(C5.lower(s)) == 0


def test_c4_loses_the_tail_positions_of_p2_and_c5_restores_them():
    assert trivial_join_points(C4.lower(P2)) == 1
    assert "Return (Int 4)" in show(C5.lower(P2)) and "Return (Int 4)" not in show(C4.lower(P2))


def test_a_chain_of_conditionals_doubles_c3_and_grows_c5_by_a_constant():
    c3 = [size(C3.lower(if0_chain(n))) for n in range(1, 13)]
    c5 = [size(C5.lower(if0_chain(n))) for n in range(1, 41)]
    assert all(b > 2 * a for a, b in zip(c3, c3[1:]))
    assert len({b - a for a, b in zip(c5, c5[1:])}) == 1


@settings(max_examples=200, deadline=None)
@given(programs())
def test_c1_copies_nothing_it_only_names(s):
    # A Bop becomes two Lets, two Vars and itself, an If0 a Let, a Var and itself: at most 5 for 1.
    assert size(C1.lower(s)) <= 5 * size(s)


def test_c2_is_the_first_compiler_that_copies():
    c1 = [size(C1.lower(if0_chain(n))) for n in range(1, 13)]
    c2 = [size(C2.lower(if0_chain(n))) for n in range(1, 13)]
    assert len({b - a for a, b in zip(c1, c1[1:])}) == 1
    assert all(b > 2 * a for a, b in zip(c2, c2[1:]))
    assert size(C1.lower(P2)) < size(C2.lower(P2))


def test_c3_binds_names_twice_on_p2():
    with pytest.raises(ScopeError, match="bound twice"):
        check_scopes(C3.lower(P2))


@pytest.mark.parametrize("term, problem", [
    (A1.Let("a", A1.Int(1), A1.Let("a", A1.Int(2), A1.Return(A1.Var("a")))), "bound twice"),
    (A1.Return(A1.Var("a")), "variable a used out of scope"),
    (A1.If0("a", A1.Return(A1.Int(1)), A1.Return(A1.Int(2))), "variable a used out of scope"),
    (A2.Join("j", A1.Int(1)), "join point j used out of scope"),
    (A2.LetJoin("j", "p", A2.Join("j", A1.Int(1)), A2.Join("j", A1.Int(2))), "join point j used out of scope"),
    (A2.LetJoin("j", "p", A1.Return(A1.Int(0)), A1.Return(A1.Var("p"))), "variable p used out of scope"),
    (A1.Let("a", A1.Int(1), A2.Join("a", A1.Int(1))), "join point a used out of scope"),
])
def test_check_scopes_reports_each_kind_of_mistake(term, problem):
    with pytest.raises(ScopeError, match=problem):
        check_scopes(term)


def test_a_join_point_sees_the_variables_of_its_definition_not_of_the_jump():
    t = A1.Let("y", A1.Int(10),
               A2.LetJoin("j", "p", A1.Return(A1.Bop("p", "y")),
                          A1.Let("y2", A1.Int(100), A2.Join("j", A1.Var("y2")))))
    check_scopes(t)
    assert evaluate_a(t) == 90


def test_show_uses_the_gist_constructor_syntax():
    assert show(S.Var("x")) == 'Var "x"'
    assert show(A1.Return(A1.Int(4))) == "Return (Int 4)"
    assert show(A2.Join("%7", A1.Int(4))) == 'Join ("%7", Int 4)'
    assert show(P1) == 'Let ("x", Bop (Int 1, Bop (Int 2, Int 3)), Bop (Var "x", Int 4))'
    long = show(C3.lower(P2))
    assert long.count("\n") > 5 and all(len(line) <= 78 for line in long.splitlines())


def test_flattening_needs_distinct_names_as_chapter_3_says():
    """The condition the chapter states: from C2 on, an inner let rebinding an outer name captures a later
    use of it, while C1's nested lets keep the source's scopes; check_scopes sees the rebinding."""
    rebinds = S.Let("y", S.Int(1), S.Let("z", S.Let("y", S.Int(2), S.Var("y")), S.Bop(S.Var("z"), S.Var("y"))))
    value = evaluate_s(rebinds)
    assert evaluate_s(C1.lower(rebinds)) == value
    assert evaluate_s(C2.lower(rebinds)) != value
    for name in ("C3", "C4", "C5"):
        lowered = COMPILERS[name].lower(rebinds)
        assert evaluate_a(lowered) != value, name
        with pytest.raises(ScopeError):
            check_scopes(lowered)
