"""The addition language (chapter 1): tree, interpreter and native code agree."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from lcompiler.addlang import (
    Exp, Llvm, compile, evaluate, free_variables, jit_run, llvm_function, llvm_module, parse,
    rename, run_i64_function, value_of, wrap64)
from lcompiler.cli import main
from lcompiler.errors import CompileError

I64 = st.integers(-2**63, 2**63 - 1)
NAMES = ["x", "y", "z"]


def expressions(literals=I64, variables=True):
    base = st.builds(Exp.Lit, literals)
    if variables:
        base = base | st.builds(Exp.Var, st.sampled_from(NAMES))
    return st.recursive(base, lambda sub: st.builds(Exp.Add, sub, sub), max_leaves=30)


def print_and_halt(result):
    return Llvm.Print(result, Llvm.Halt())


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(expressions(variables=False))
def test_native_program_prints_what_the_interpreter_prints(e):
    program = compile(e, print_and_halt)
    run = jit_run(llvm_module(program))
    assert run.status == 0
    assert run.stdout == evaluate(program)[0] == f"{value_of(e)}\n"


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(expressions(), st.fixed_dictionaries({x: I64 for x in NAMES}))
def test_native_function_returns_what_the_interpreter_returns(e, env):
    params = free_variables(e)
    native = run_i64_function(llvm_function("f", params, e), "f", *[env[p] for p in params])
    output, interpreted = evaluate(compile(rename(e, env.get), Llvm.Ret))
    assert output == "" and native == interpreted == value_of(e, env)


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(expressions(variables=False), expressions(variables=False))
def test_numbering_survives_a_print_between_additions(e1, e2):
    # printf's i32 result takes a register number: an Add after a Print must count it.
    program = compile(e1, lambda v1: Llvm.Print(v1, compile(e2, print_and_halt)))
    run = jit_run(llvm_module(program))
    assert run.stdout == evaluate(program)[0] == f"{value_of(e1)}\n{value_of(e2)}\n"


def test_addition_wraps_around_at_64_bits():
    big = Exp.Add(Exp.Lit(2**63 - 1), Exp.Lit(1))
    assert value_of(big) == -2**63 == wrap64(2**63)
    assert jit_run(llvm_module(compile(big, print_and_halt))).stdout == f"{-2**63}\n"


def test_a_literal_alone_compiles_to_no_instruction():
    program = compile(Exp.Lit(7), print_and_halt)
    assert isinstance(program, Llvm.Print)
    assert "add" not in llvm_module(program)


def show(e) -> str:
    match e:
        case Exp.Lit(n):
            return str(n)
        case Exp.Var(x):
            return x
        case Exp.Add(l, r):
            right = f"({show(r)})" if isinstance(r, Exp.Add) else show(r)
            return f"{show(l)} + {right}"


@settings(max_examples=200)
@given(expressions(literals=st.integers(0, 2**63 - 1)))
def test_parse_reads_back_what_show_prints(e):
    assert parse(show(e))[0] == e


ERROR = re.compile(r"^<expression>:1:(\d+): error: .+\n(.*)\n( *)\^~*$")


@settings(max_examples=300)
@given(st.text(alphabet="0123456789 +()xy_@9", max_size=20))
def test_any_text_parses_or_gives_a_located_error(text):
    try:
        parse(text)
    except CompileError as error:
        m = ERROR.match(error.render())
        assert m, error.render()
        assert int(m.group(1)) == len(m.group(3)) + 1       # the caret is under the column
        assert m.group(2) == text


@pytest.mark.parametrize("text, column, message", [
    ("3 + + 4", 5, "expected a number, a variable or '('"),
    ("(1 + 2", 7, "expected ')', found the end of the expression"),
    ("1 + 99999999999999999999", 5, "does not fit in 64 bits"),
    ("1 2", 3, "expected '+' or the end of the expression, found '2'"),
    ("007", 1, "cannot start with 0"),
    ("1 + @", 5, "unexpected character '@'"),
    ("", 1, "expected a number, a variable or '('"),
])
def test_syntax_errors_name_the_column(text, column, message):
    with pytest.raises(CompileError) as caught:
        parse(text)
    assert caught.value.render().startswith(f"<expression>:1:{column}: error: ")
    assert message in caught.value.message


def test_lc_add_runs_natively_and_reports_errors(capsys):
    assert main(["add", "3 + (2 + 4)"]) == 0
    assert capsys.readouterr().out == "9\n"
    assert main(["add", "--interp", "3 + (2 + 4)"]) == 0
    assert capsys.readouterr().out == "9\n"
    assert main(["add", "--llvm", "1 + 2"]) == 0
    assert "define i32 @main()" in capsys.readouterr().out
    assert main(["add", "1 + y"]) == 1
    err = capsys.readouterr().err
    assert err == "<expression>:1:5: error: unbound variable y: lc add compiles closed expressions\n1 + y\n    ^\n"


def test_lc_add_deep_nesting_is_an_error_not_a_traceback(capsys):
    assert main(["add", "(" * 5000 + "1" + ")" * 5000]) == 1
    assert "nested too deeply" in capsys.readouterr().err


def test_the_installed_lc_command():
    lc = Path(sys.executable).parent / "lc"
    done = subprocess.run([str(lc), "add", "1 + (2 + 3)"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "6\n", "")
    done = subprocess.run([str(lc), "add", "1 +"], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("<expression>:1:4: error:")
