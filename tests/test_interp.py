"""The reference interpreter (chapter 4b): arithmetic against LLVM, tail calls, stack, core."""

import io

import pytest
from hypothesis import given, settings, strategies as st

from lcompiler.addlang import run_i64_function
from lcompiler.core import desugar, pretty_core
from lcompiler.errors import CompileError, RunError, Source
from lcompiler.interp import MAX_INT, MIN_INT, Interpreter, c_div, c_rem, check, show_value
from lcompiler.syntax import parse

I64 = st.integers(MIN_INT, MAX_INT)
SDIV = "define i64 @q(i64 %a, i64 %b) {\n  %r = sdiv i64 %a, %b\n  ret i64 %r\n}\n"
SREM = "define i64 @r(i64 %a, i64 %b) {\n  %r = srem i64 %a, %b\n  ret i64 %r\n}\n"


@settings(max_examples=200, deadline=None)
@given(I64, I64 | st.integers(-5, 5))
def test_division_and_remainder_agree_with_llvm_sdiv_and_srem(a, b):
    if b == 0 or (a == MIN_INT and b == -1):     # undefined in LLVM, defined by L below
        return
    assert c_div(a, b) == run_i64_function(SDIV, "q", a, b)
    assert c_rem(a, b) == run_i64_function(SREM, "r", a, b)


def output(text: str) -> str:
    out = io.StringIO()
    Interpreter(out).run(check(Source("t.l", text)))
    return out.getvalue()


def test_the_edge_cases_of_64_bit_arithmetic():
    assert output("def m = -9223372036854775807 - 1\nprint(m / -1, m % -1, m - 1, -m, m * -1)") == \
        f"{MIN_INT} 0 {MAX_INT} {MIN_INT} {MIN_INT}\n"
    assert output("print(-7 / 2, -7 % 2, 7 / -2, 7 % -2)") == "-3 -1 -3 1\n"
    with pytest.raises(RunError, match="division by zero"):
        output("print(1 % 0)")


def test_a_million_iteration_tail_loop_runs_in_constant_stack():
    # 300 Python frames for a million iterations: the stack does not grow with the loop.
    program = check(Source("loop.l", "def loop(i, acc) = if (i == 0) acc else loop(i - 1, acc + i)\n"
                                     "print(loop(1000000, 0))"))
    out = io.StringIO()
    Interpreter(out, stack_limit=300).run(program)
    assert out.getvalue() == "500000500000\n"


def test_mutual_tail_recursion_and_tail_calls_through_closures_run_in_constant_stack():
    out = io.StringIO()
    Interpreter(out, stack_limit=300).run(check(Source("even.l", """
def even(n) = if (n == 0) true else odd(n - 1)
def odd(n) = if (n == 0) false else even(n - 1)
def apply(f, x) = f(x)
def countdown = { n -> if (n == 0) "done" else apply(countdown, n - 1) }
print(even(100001), odd(100001), countdown(100000))
""")))
    assert out.getvalue() == "false true done\n"


def test_a_million_nested_calls_run():
    assert output("def count(n) = if (n == 0) 0 else 1 + count(n - 1)\nprint(count(1000000))") == "1000000\n"


LIST = "data List<a> { Cons(a, List<a>); Nil }\n"


def test_long_lists_are_built_by_non_tail_recursion_and_printed():
    text = output(LIST + "def range(a, b) = if (a > b) Nil else Cons(a, range(a + 1, b))\n"
                  "def build(n, acc) = if (n == 0) acc else build(n - 1, Cons(n, acc))\n"
                  "def length = { Cons(_, t) -> 1 + length(t); Nil -> 0 }\n"
                  "print(length(range(1, 20000)))\nprint(build(30000, Nil))\nprint((build(3, Nil), \"x\"))\n")
    count, printed, pair, _ = text.split("\n")
    assert count == "20000" and pair == '(Cons(1, Cons(2, Cons(3, Nil))), "x")'
    assert printed == "".join(f"Cons({i}, " for i in range(1, 30001)) + "Nil" + ")" * 30000


def overflow(text: str, **limits) -> RunError:
    out = io.StringIO()
    with pytest.raises(RunError) as caught:
        Interpreter(out, **limits).run(check(Source("t.l", text)))
    assert caught.value.message == "stack overflow: the program nested calls too deeply"
    return caught.value


def test_infinite_recursion_is_a_stack_overflow_at_the_last_call_whichever_limit_stops_it():
    down = "def down(n) = 1 + down(n + 1)\nprint(down(0))"
    for limits in ({"depth_limit": 5000}, {"stack_limit": 3000}):     # calls, or Python frames
        error = overflow(down, **limits)
        assert error.span.source.line_col(error.span.start) == (1, 19)
    # a body of many frames per call: the frame limit stops it first, at the same place
    error = overflow("def f(n) = (((1 + f(n + 1)) + 1) + 1)\nprint(f(0))", stack_limit=3000, depth_limit=10 ** 6)
    assert error.span.source.line_col(error.span.start) == (1, 19)


def test_an_interrupt_stops_the_running_program_too():
    import signal
    import threading
    before = threading.active_count()
    timer = threading.Timer(0.5, lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        output("def spin(n) = spin(n + 1)\nspin(0)")
    timer.join()
    for _ in range(100):                     # the program's thread is gone, not spinning on
        if threading.active_count() == before:
            break
        threading.Event().wait(0.05)
    assert threading.active_count() == before


def test_a_closed_output_is_left_alone_and_the_program_runs_on():
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError
    with pytest.raises(RunError, match="division by zero"):
        Interpreter(Closed()).run(check(Source("t.l", "print(1)\nprint(2)\nprint(1 / 0)")))


def test_evaluation_is_left_to_right():
    assert output('def p(x) = { print(x); x }\nprint(p(1) + p(2) * p(3), (p(4), p(5)), p({ y -> y })(p(6)))') == \
        "1\n2\n3\n4\n5\n<function>\n6\n7 (4, 5) 6\n"


@pytest.mark.parametrize("text, message, place", [
    ('print(1 + "a")', "the operands of + have the wrong types", (1, 9)),
    ("print(1(2))", "this is not a function", (1, 7)),
    ('print("a" < 1)', "the operands of < have the wrong types", (1, 11)),
    ("def f = { (a, b) -> a }\nprint(f(1))", "no clause matches the value 1", (1, 9)),
    ("def f(a, b) = a\nprint(f(1))", "no clause matches the value 1", (1, 5)),
])
def test_ill_typed_programs_stop_with_a_runtime_error_not_a_python_exception(text, message, place):
    # check() does not infer types (chapter 5 does): the interpreter itself must stop these
    with pytest.raises(RunError) as caught:
        output(text)
    assert caught.value.message == message
    assert caught.value.span.source.line_col(caught.value.span.start) == place


def test_printing_values():
    from lcompiler.interp import Closure, Data
    assert show_value(("a\n", (1, True), Data("Cons", (1, Data("Nil", ()))), ())) == \
        '("a\\n", (1, true), Cons(1, Nil), ())'
    assert show_value("a\n") == "a\n"
    assert show_value(Closure("x", None, {})) == "<function>"


def test_print_and_assert_are_reserved():
    for text in ["def print = 1", "def f = { assert -> 1 }", "def g(x) = { let print = x; 1 }", "def h = print"]:
        with pytest.raises(CompileError, match="built-in form"):
            check(Source("t.l", text))


def test_the_core_has_no_sugar_left():
    core = pretty_core(desugar(parse(Source("t.l", """
def f(a, b) = a.g(b) && !b.{ 0 -> true; _ -> false }
def g = { x -> y -> if (x) y }
""")))).replace(" ", "")
    for sugar in [".", "&&", "->y->"]:
        assert sugar not in core, sugar
    assert "match(%" in core and "else()" in core and "else" in core


@pytest.mark.parametrize("text, output_", [
    ("def x = 1\nprint(x)", "1\n"),
    ('def f() = limit\ndef limit = 3\nprint(f())', "3\n"),
    ("def a = { var n := 0; def_helper(); n }\ndef def_helper() = 0\nprint(a)", "0\n"),
])
def test_top_level_order(text, output_):
    assert output(text) == output_


def test_a_long_chain_of_operators_is_checked_typed_and_run():
    from lcompiler.types import check_types
    text = "print(" + " + ".join(["1"] * 3000) + ")"
    program, _ = check_types(Source("chain.l", text))
    out = io.StringIO()
    Interpreter(out).run(program)
    assert out.getvalue() == "3000\n"


def test_running_out_of_memory_is_a_runtime_error(tmp_path):
    import resource
    import subprocess
    import sys
    from pathlib import Path
    program = tmp_path / "grow.l"
    program.write_text(LIST + "def grow(l, n) = grow(Cons(n, l), n + 1)\nprint(\"growing\")\nprint(grow(Nil, 0))\n")
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (640 << 20, 640 << 20))   # as ulimit -v would
    done = subprocess.run([str(Path(sys.executable).parent / "lc"), "run", "--interp", str(program)],
                          capture_output=True, text=True, preexec_fn=limit, timeout=300)
    assert (done.returncode, done.stdout) == (2, "growing\n"), done.stderr
    assert done.stderr.startswith(f"{program}:4:7: runtime error: out of memory\n"), done.stderr
