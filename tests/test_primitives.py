"""The table of primitives (chapter 4b): one row per primitive, which every stage reads.

- Every row has a lowering in the back end (chapter 10), and nothing else has one.
- The operators the parser of chapter 4a accepts are the table's symbols, unary and binary.
- Each row's meaning (Python) agrees with its lowering (LLVM instructions, run natively) on random
  64-bit operands and on the edges: the two implementations are each other's oracle.
- Adding a primitive is a row and a lowering: `max` (no operator, pure, cannot fail) and `inverse`
  (one operand, fails on 0), added to the table for the duration of a test, are typed by chapter 5,
  checked by chapter 5b, run by both interpreters, converted, folded or kept by chapter 9, printed and
  parsed back as CPS, and compiled and run natively — with no other change to the compiler.
- A row that says a primitive is not pure makes the optimiser keep it and not fold it.
"""

import ctypes
import dataclasses
import io
import os

import llvmlite.ir as ir
import pytest
from hypothesis import given, settings, strategies as st

from lcompiler import addlang, core, cps, driver, llvm_backend, pipeline, shrink, syntax, types
from lcompiler.errors import CompileError, RunError, Source
from lcompiler.primitives import MAX_INT, MIN_INT, PRIMITIVES, Failure, Primitive, by_symbol, c_div

I64 = st.integers(MIN_INT, MAX_INT)
EDGES = [MIN_INT, MIN_INT + 1, -2, -1, 0, 1, 2, MAX_INT - 1, MAX_INT]


# --- The table and the stages agree on names and symbols ----------------------------------------

def test_every_row_has_a_lowering_and_every_lowering_a_row():
    assert set(llvm_backend.LOWERING) == set(PRIMITIVES)


def parsed(text: str):
    try:
        return syntax.parse(Source("t.l", text + "\n")).items[0]
    except CompileError:
        return None


def test_the_operators_the_parser_accepts_are_the_table_s_symbols():
    unary = {op for op in syntax.OPERATORS if type(parsed(f"{op}x")) is syntax.Unary}
    binary = {op for op in syntax.OPERATORS if type(parsed(f"a {op} b")) is syntax.Binary}
    assert unary == {p.symbol for p in PRIMITIVES.values() if p.arity == 1 and p.symbol}
    assert binary - {"&&", "||"} == {p.symbol for p in PRIMITIVES.values() if p.arity == 2 and p.symbol}
    assert set(syntax.BINARY) == binary                       # the binding powers: the same operators
    for op in binary - {"&&", "||"}:                          # and the core names the row
        assert core.desugar(syntax.parse(Source("t.l", f"a {op} b\n"))).items[0].op == by_symbol(op, 2).name


def test_a_row_has_one_or_two_operands():
    with pytest.raises(ValueError, match="has 3 operands"):
        Primitive("clamp", None, ("Int", "Int", "Int", "Int"), lambda a, b, c: min(max(a, b), c))


def test_chapter_5b_checks_a_primitive_s_types_against_its_row():
    from lcompiler.mono import fits
    INT, BOOL, STRING, UNIT = (types.BASE_TYPES[n] for n in ("Int", "Bool", "String", "Unit"))
    equal, plus, negate = (PRIMITIVES[n].type for n in ("==", "+", "not"))
    assert fits(equal, [INT, INT, BOOL]) and fits(equal, [STRING, STRING, BOOL]) and fits(equal, [BOOL, BOOL, BOOL])
    assert not fits(equal, [UNIT, UNIT, BOOL])                # ''a: only Int, Bool and String
    assert not fits(equal, [types.TCon("*", (INT, INT))] * 2 + [BOOL])
    assert not fits(equal, [INT, BOOL, BOOL]) and not fits(equal, [INT, INT, INT])
    assert fits(plus, [INT, INT, INT]) and not fits(plus, [INT, INT, BOOL]) and not fits(plus, [INT, INT])
    assert fits(negate, [BOOL, BOOL]) and not fits(negate, [INT, BOOL])


# --- Meaning against lowering -------------------------------------------------------------------

def lowered_module(names: list) -> str:
    """An LLVM module with, for each primitive name, a function p<i>(i64 a, i64 b) -> i64 that applies
    the primitive's lowering to its Int (or Bool) operands."""
    module = ir.Module()
    for i, name in enumerate(names):
        row = PRIMITIVES[name]
        f = ir.Function(module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)] * 2), f"p{i}")
        b = ir.IRBuilder(f.append_basic_block("entry"))
        operands = [cps.Var("a"), cps.Var("b")][:row.arity]
        for v, t in zip(operands, row.type):
            v.type = types.BOOL if t == "Bool" else types.INT
        p = cps.op(name, *operands)
        b.ret(llvm_backend.LOWERING[name](None, b, p, list(f.args[:row.arity])))
    return str(module)


def natively(cases: list) -> list:
    """The results of the primitives' lowerings, compiled, on cases [(name, a, b)], computed in a
    child process (a wrong lowering may trap, which must not kill the tests)."""
    names = sorted({name for name, _, _ in cases})
    engine = addlang.jit(lowered_module(names))
    signature = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
    functions = {name: signature(engine.get_function_address(f"p{i}")) for i, name in enumerate(names)}

    def main() -> int:
        os.write(1, " ".join(str(functions[name](a, b)) for name, a, b in cases).encode())
        return 0
    result = driver.run_in_child(main, timeout=60)
    assert result.status == 0, result
    return [int(x) for x in result.stdout.split()]


def operands_of(row: Primitive, a: int, b: int) -> list:
    return [x if t != "Bool" else x & 1 for x, t in zip((a, b), row.type[:row.arity])]


def agree(cases: list) -> None:
    """Each primitive's meaning and its lowering agree on each (name, a, b) it does not fail on."""
    checked, expected = [], []
    for name, a, b in cases:
        row = PRIMITIVES[name]
        values = operands_of(row, a, b)
        if row.fails and row.fails.happens(values):
            continue                                          # the back end tests it before the lowering
        checked.append((name, *values, *[0] * (2 - row.arity)))
        expected.append(int(row.meaning(*values)))
    assert natively(checked) == expected


def test_each_meaning_agrees_with_its_lowering_on_the_edges():
    agree([(name, a, b) for name in sorted(PRIMITIVES) for a in EDGES for b in EDGES])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(PRIMITIVES)), I64, I64 | st.integers(-3, 3)), min_size=1,
                max_size=50))
def test_each_meaning_agrees_with_its_lowering_on_random_operands(cases):
    agree(cases)


# --- Adding a primitive -------------------------------------------------------------------------

MAX = Primitive("max", None, ("Int", "Int", "Int"), max)
INVERSE = Primitive("inverse", None, ("Int", "Int"), lambda a: c_div(1, a),
                    fails=Failure("the inverse of zero", 0, 0))
INTO = Primitive("into", None, ("Int", "Int", "Int"), lambda a, b: c_div(b, a),    # b / a
                 fails=Failure("division by zero", 0, 0))
NEW_LOWERINGS = {
    "max": lambda backend, b, p, args: b.select(b.icmp_signed(">", *args), *args),
    "inverse": lambda backend, b, p, args: b.sdiv(ir.Constant(ir.IntType(64), 1), args[0]),
    "into": lambda backend, b, p, args: llvm_backend.LOWERING["/"](backend, b, p, args[::-1]),
}


@pytest.fixture
def new_primitives(monkeypatch):
    """max, inverse and into, added to the table and to the back end's lowerings while the test runs."""
    for row in (MAX, INVERSE, INTO):
        monkeypatch.setitem(PRIMITIVES, row.name, row)
        monkeypatch.setitem(llvm_backend.LOWERING, row.name, NEW_LOWERINGS[row.name])


def unfolded(program) -> list:
    """The operations of a CPS program whose operands are all constants (chapter 9's `constant`):
    (name, [constants])."""
    return [(n.op, [shrink.constant(o.var)[1] for o in n.args]) for d in program.definitions
            for n in cps.walk(d) if type(n) is cps.Op and all(shrink.constant(o.var)[0] for o in n.args)]


def renamed(program, names: dict):
    """The core program with each primitive of names (old name -> new) renamed: how a test writes
    a primitive that L has no syntax for."""
    todo = [program]
    while todo:
        x = todo.pop()
        if type(x) is core.Prim and x.op in names:
            x.op = names[x.op]
        if type(x) in (list, tuple):
            todo.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            todo.extend(getattr(x, f.name) for f in dataclasses.fields(x)
                        if f.name not in ("span", "type", "op_span"))
    return program


def through_every_stage(text: str, names: dict, optimise: bool = True) -> tuple:
    """Run the program through the pipeline, renaming the primitives of names in its core; after each
    stage its checker, and its interpreter if it has one. The interpreters' outcomes (output, error)
    by stage; each stage's output as text and, for a CPS stage, its operations on constants; and the
    native outcome."""
    unit, value = pipeline.Unit(Source("new.l", text), optimise), Source("new.l", text)
    outcomes, outputs, constants = {}, {}, {}
    for stage in pipeline.load():
        if not optimise and stage.name in pipeline.OPTIMISATIONS:
            continue
        value = stage.run(value, unit)
        if stage.name == "core":
            renamed(value, names)
        if stage.check is not None:
            stage.check(value, unit)
        outputs[stage.name] = stage.show(value, unit)
        if isinstance(value, cps.Program):
            constants[stage.name] = unfolded(value)
        if stage.interpret is not None:
            out, error = io.StringIO(), None
            try:
                stage.interpret(value, unit, out)
            except RunError as e:
                error = e.render()
            outcomes[stage.name] = (out.getvalue(), error)
        if stage.name == "llvm":
            break
    engine, main = driver.jit(driver.machine_code(value))
    result = driver.run_in_child(main, timeout=60)
    return outcomes, outputs, constants, result


MAX_PROGRAM = """\
data List<t> { Cons(t, List<t>); Nil }
def biggest(xs) = match (xs) {
  Nil -> -9223372036854775807 - 1
  Cons(x, rest) -> x + biggest(rest)
}
def pair(a, b) = (a + b, b + a)
print(biggest(Cons(3, Cons(-7, Cons(12, Cons(5, Nil))))), pair(2, 9), 4 + -4)
"""


@pytest.mark.parametrize("optimise", [True, False], ids=["optimised", "O0"])
def test_a_primitive_without_an_operator_is_a_row_and_a_lowering(new_primitives, optimise):
    outcomes, outputs, constants, result = through_every_stage(MAX_PROGRAM, {"+": "max"}, optimise)
    expected = f"{max(3, -7, 12, 5)} ({max(2, 9)}, {max(9, 2)}) {max(4, -4)}\n"
    assert set(outcomes) >= {"core", "mono", "cps", "closure"}
    assert all(outcome == (expected, None) for outcome in outcomes.values()), outcomes
    assert (result.stdout, result.stderr, result.status) == (expected, "", 0)
    assert "max(x, biggest(rest))" in outputs["core"]       # printed as a call
    text = outputs["cps"]
    assert "max(" in text and " + " not in text
    assert cps.show(cps.parse(text)).rstrip("\n") == text    # the CPS text prints it and reads it back
    assert ("max", [4, -4]) in constants["cps"]
    if optimise:                                             # on constants, it is folded
        assert constants["opt"] == constants["shrink"] == []
    agree([(name, a, b) for name in ("max", "inverse", "into") for a in EDGES for b in EDGES])


def type_error(text: str, names: dict) -> str:
    program = renamed(core.resolve(core.desugar(syntax.parse(Source("bad.l", text)))), names)
    with pytest.raises(CompileError) as error:
        types.infer_program(program)
    return error.value.render()


def test_a_new_primitive_is_typed_from_its_row(new_primitives):
    assert type_error("print(1 + true)\n", {"+": "max"}) == type_error("print(1 + true)\n", {}) \
        == "bad.l:1:11: error: expected Int, found Bool\nprint(1 + true)\n          ^~~~"
    assert "expected Int, found String" in type_error('print(-"one")\n', {"neg": "inverse"})


def test_a_row_s_type_variables_are_fresh_at_each_use(monkeypatch):
    """'a in a row is a type variable, instantiated at each use: an identity is a -> a, a result that
    no operand fixes is any type, as `raise` will be."""
    monkeypatch.setitem(PRIMITIVES, "same", Primitive("same", None, ("'a", "'a"), lambda a: a))
    monkeypatch.setitem(PRIMITIVES, "anything", Primitive("anything", None, ("Int", "'a"), lambda a: a))
    text = "def f(x) = -x\ndef g(n) = !n\ndef h(b) = (-b, -1 + 1)\n"
    program = renamed(core.resolve(core.desugar(syntax.parse(Source("v.l", text)))), {"neg": "same", "not": "anything"})
    typing = types.infer_program(program)
    assert [typing.show(name) for name in "fgh"] == ["a -> a", "Int -> a", "a -> (a, Int)"]


INVERSE_PROGRAM = """\
def f(n) = -n
def loop(i) = if (i < 3) { print(f(2 - i)); loop(i + 1) } else ()
print(-1, -(0 - 1))
loop(0)
"""


@pytest.mark.parametrize("optimise", [True, False], ids=["optimised", "O0"])
def test_a_primitive_that_can_fail_is_a_row_and_a_lowering(new_primitives, optimise):
    outcomes, outputs, constants, result = through_every_stage(INVERSE_PROGRAM, {"neg": "inverse"}, optimise)
    error = "new.l:1:12: runtime error: the inverse of zero\ndef f(n) = -n\n           ^"
    expected = ("-1 -1\n0\n1\n", error)                    # 1 / 2 is 0, 1 / 1 is 1, then 1 / 0
    assert all(outcome == expected for outcome in outcomes.values()), outcomes
    assert (result.stdout, result.stderr, result.status) == (expected[0], error + "\n", 2)
    assert "inverse(n_" in outputs["cps"] and " @1:12" in outputs["cps"]
    assert ("-", [0, 1]) in constants["cps"]
    if optimise:                          # on constants it is folded (-(0 - 1) too), but where it fails
        assert all(c == ("inverse", [0]) for c in constants["opt"] + constants["shrink"])


def test_an_unused_primitive_that_can_fail_is_deleted_only_when_its_operand_is_known_safe(new_primitives):
    text = """unused = do {
  a_1 = external "a"
  z_2 = 0
  two_3 = 2
  i_4 = inverse(a_1) @1:1
  j_5 = inverse(z_2) @1:2
  k_6 = into(two_3, a_1) @1:3
  l_7 = into(z_2, a_1) @1:4
  m_8 = into(a_1, two_3) @1:5
  n_9 = a_1 / two_3 @1:6
  o_10 = a_1 / z_2 @1:7
  u_11 = ()
  halt u_11
}
"""
    program = cps.parse(text)
    shrink.shrink(program)
    kept = cps.show(program)
    for gone in ("@1:3", "@1:6"):                      # into(2, a) and a / 2 cannot fail
        assert gone not in kept
    for stays in ("@1:1", "@1:2", "@1:4", "@1:5", "@1:7"):
        assert stays in kept
    assert shrink.fold_operation("inverse", [2]) == 0 and shrink.fold_operation("inverse", [-1]) == -1
    assert shrink.fold_operation("inverse", [0]) is shrink.UNKNOWN
    assert shrink.fold_operation("into", [2, 7]) == 3 and shrink.fold_operation("into", [0, 7]) is shrink.UNKNOWN


def test_a_row_that_is_not_pure_is_neither_folded_nor_deleted(monkeypatch):
    text = "unused = do {\n  one_1 = 1\n  two_2 = 2\n  s_3 = one_1 + two_2\n  u_4 = ()\n  halt u_4\n}\n"
    program = cps.parse(text)
    shrink.shrink(program)
    assert "+" not in cps.show(program)                       # pure: the unused sum is deleted
    monkeypatch.setitem(PRIMITIVES, "+", dataclasses.replace(PRIMITIVES["+"], pure=False))
    program = cps.parse(text)
    assert cps.has_effect(program.definitions[0].body.body.body.prim)
    assert shrink.fold_operation("+", [1, 2]) is shrink.UNKNOWN
    shrink.shrink(program)
    assert "s_3 = one_1 + two_2" in cps.show(program)
