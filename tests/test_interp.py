"""The reference interpreter (chapter 4b): the table's arithmetic against LLVM, tail calls, stack, core."""

import io
import os

import pytest
from hypothesis import given, settings, strategies as st

from lcompiler.addlang import run_i64_function
from lcompiler.core import desugar, pretty_core
from lcompiler.errors import CompileError, RunError, Source
from lcompiler.interp import Interpreter, check, show_value
from lcompiler.primitives import MAX_INT, MIN_INT, c_div, c_rem
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


@pytest.mark.slow
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


# --- Calls: what one costs, counted ------------------------------------------------------------

def python_calls(text: str) -> int:
    """The Python function calls made while the interpreter runs the program (its thread's)."""
    import threading
    program, calls = check(Source("t.l", text)), [0]

    def hook(frame, event, arg):
        if event == "call":
            calls[0] += 1
    threading.setprofile(hook)          # the program runs on a thread of its own
    try:
        Interpreter(io.StringIO()).run(program)
    finally:
        threading.setprofile(None)
    return calls[0]


def test_a_tail_call_costs_at_most_six_python_calls():
    loop = "def count(i, n) = if (i == n) i else count(i + 1, n)\nprint(count(0, {}))"
    assert python_calls(loop.format(2000)) - python_calls(loop.format(1000)) <= 6 * 1000


# --- The heap limit ----------------------------------------------------------------------------

from lcompiler import interp  # noqa: E402  (the heap's functions, and the runtime's C to compare with)


@pytest.fixture(scope="module")
def runtime_reader(tmp_path_factory):
    """An executable linked with the runtime of chapter 10b, which calls its env_size and
    default_heap_limit: for each argument, it sets LC_HEAP_LIMIT to it and prints what env_size reads,
    then prints default_heap_limit()."""
    import subprocess
    from lcompiler import runtime
    try:
        cc, library = runtime.c_compiler(), runtime.runtime_library("object")
    except RuntimeError:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("reader")
    (folder / "reader.c").write_text(
        "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        "uint64_t env_size(const char *name, uint64_t fallback);   /* the runtime's, in main.c */\n"
        "uint64_t default_heap_limit(void);\n"
        "int main(int argc, char **argv)\n{\n"
        "    for (int i = 1; i < argc; i++) {\n"
        "        setenv(\"LC_HEAP_LIMIT\", argv[i], 1);\n"
        "        printf(\"%llu\\n\", (unsigned long long)env_size(\"LC_HEAP_LIMIT\", 12345));\n"
        "    }\n"
        "    printf(\"%llu\\n\", (unsigned long long)default_heap_limit());\n    return 0;\n}\n")
    subprocess.run([cc, "-O1", "-o", str(folder / "reader"), str(folder / "reader.c"), str(library), "-pthread"],
                   check=True)

    def read(settings: list) -> list:
        out = subprocess.run([str(folder / "reader"), *settings], capture_output=True, text=True, check=True)
        return [int(line) for line in out.stdout.split()]
    return read


def python_reads(settings: list, monkeypatch) -> list:
    values = []
    for text in settings:
        monkeypatch.setenv("LC_HEAP_LIMIT", text)
        values.append(interp.env_size("LC_HEAP_LIMIT", 12345))
    return values + [interp.default_heap_limit()]


SETTINGS = ["64M", "64m", "8G", "8g", "1000", "5k", "5K", "0", "2X", "x", "", " 5", "5 ", "+5", "5kb", "5KK",
            "18446744073709551615", "18446744073709551616", "99999999999999999999999G", "17179869184G", "007M"]


def test_lc_heap_limit_is_read_as_the_runtime_reads_it(runtime_reader, monkeypatch):
    assert python_reads(SETTINGS, monkeypatch) == runtime_reader(SETTINGS)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r"\A[0-9]{0,21}[kKmMgGbx ]?[0-9kM]?\Z"), min_size=1, max_size=20))
def test_random_settings_are_read_as_the_runtime_reads_them(runtime_reader, settings_):
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert python_reads(settings_, monkeypatch) == runtime_reader(settings_)


def plain_live_words(roots) -> int:
    """live_words' sizes, by a walk that remembers every value it has seen: the oracle."""
    from lcompiler.interp import Cell, Closure, Data
    words, seen, todo = 0, set(), list(roots)
    while todo:
        v = todo.pop()
        if id(v) in seen or type(v) not in (Data, tuple, Closure, Cell, dict):
            continue
        seen.add(id(v))
        if type(v) is Data and v.fields:
            words, todo = words + 1 + len(v.fields), todo + list(v.fields)
        elif type(v) is tuple and v:
            words, todo = words + 1 + len(v), todo + list(v)
        elif type(v) is Closure:
            words, todo = words + 2 + len(v.captures), todo + [v.env[n] for n in v.captures]
        elif type(v) is Cell:
            words, todo = words + 2, todo + [v.value]
        elif type(v) is dict:
            todo += list(v.values())
    return words


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.lists(st.integers(0, 10 ** 6), max_size=4)), min_size=1, max_size=60),
       st.lists(st.integers(0, 10 ** 6), min_size=1, max_size=4))
def test_live_words_counts_shared_values_once(recipe, picks):
    """Random values made of earlier ones (so shared at random), of every kind the heap holds; only
    the roots are kept, so that a value held once is held by its parent alone."""
    from lcompiler.interp import Cell, Closure, Data
    nodes = [7, "text", Data("Nil", ())]
    for kind, parts in recipe:
        parts = [nodes[p % len(nodes)] for p in parts]
        if kind == 0:
            nodes.append(Data("C", tuple(parts)))
        elif kind == 1 and len(parts) >= 2:
            nodes.append(tuple(parts))
        elif kind == 2:
            env = {f"x{i}": p for i, p in enumerate(parts)}
            nodes.append(Closure("y", None, env, tuple(sorted(env))[: len(env) // 2 + 1]))
        elif kind == 3 and parts:
            nodes.append(Cell(parts[0]))
        else:
            nodes.append(Data("D", (len(nodes), nodes[-1])))
    roots = [nodes[p % len(nodes)] for p in picks]
    del nodes, parts
    assert interp.live_words(roots) == plain_live_words(roots)


def test_a_structure_shared_at_every_level_is_counted_once_per_block():
    from lcompiler.interp import Data
    shared = Data("Nil", ())
    for _ in range(200):                     # 2**200 paths: only a walk that remembers can finish
        shared = Data("Pair", (shared, shared))
    assert interp.live_words([shared]) == 600


ALLOCATING = LIST + """\
def build(n, acc) = if (n == 0) acc else build(n - 1, Cons(n, acc))
def pairs(n, acc) = if (n == 0) acc else pairs(n - 1, Cons((n, n), acc))
def adders(n, acc) = if (n == 0) acc else adders(n - 1, Cons({ x -> x + n }, acc))
def counters(n, acc) = if (n == 0) acc else {
  var count := n
  counters(n - 1, Cons(({ by -> count := count + by }, { () -> count }), acc))
}
def len(l, k) = match (l) { Cons(_, t) -> len(t, k + 1); Nil -> k }
print(len(build(200000, Nil), 0), len(pairs(100000, Nil), 0), len(adders(100000, Nil), 0),
      len(counters(50000, Nil), 0))
"""


@pytest.mark.slow
def test_the_words_allocated_are_those_the_compiled_code_allocates(tmp_path):
    """The compiled code's collector reports what it allocated (LC_GC_STATS=1); without chapter 9's
    optimiser, which would build fewer blocks, it allocates what the program says."""
    import re
    import subprocess
    import sys
    from pathlib import Path
    (tmp_path / "alloc.l").write_text(ALLOCATING)
    done = subprocess.run([str(Path(sys.executable).parent / "lc"), "run", "-O0", "alloc.l"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "LC_GC_STATS": "1"}, timeout=300)
    compiled = re.search(r"allocated ([\d.]+) MB", done.stderr).group(1)
    program, out = check(Source("alloc.l", ALLOCATING)), io.StringIO()
    interpreter = Interpreter(out)
    interpreter.run(program)
    assert out.getvalue() == done.stdout == "200000 100000 100000 50000\n"
    assert f"{interpreter.allocated() * 8 / 2 ** 20:.1f}" == compiled


@pytest.mark.slow
def test_a_growing_program_stops_at_the_heap_limit_as_the_compiled_code_does(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    (tmp_path / "grow.l").write_text(LIST + "def grow(acc) = grow(Cons(1, acc))\nprint(\"growing\")\nprint(grow(Nil))\n")
    env = {**os.environ, "LC_HEAP_LIMIT": "64M"}
    lc = str(Path(sys.executable).parent / "lc")
    runs = [subprocess.run([lc, "run", *flag, "grow.l"], cwd=tmp_path, capture_output=True, text=True, env=env,
                           timeout=300) for flag in (["--interp"], [])]
    interpreted, compiled = [(r.returncode, r.stdout, r.stderr) for r in runs]
    assert interpreted == compiled == (2, "growing\n", f"grow.l: runtime error: {interp.HEAP_LIMIT_MESSAGE}\n")


CHURN = LIST + """\
def build(n, acc) = if (n == 0) acc else build(n - 1, Cons(n, acc))
def length(l, k) = match (l) { Nil -> k; Cons(_, t) -> length(t, k + 1) }
def churn(k, total) = if (k == 0) total else churn(k - 1, total + length(build(1000, Nil), 0))
def keep(a) = { let b = build(HALF, Nil); churn(ROUNDS, 0) + length(a, 0) + length(b, 0) }
print(keep(build(HALF, Nil)))
"""
LIMIT = 4 << 20              # bytes: 524,288 words


def run_churn(half: int, rounds: int) -> tuple:
    interpreter, out = Interpreter(io.StringIO(), heap_limit=LIMIT), None
    text = CHURN.replace("HALF", str(half)).replace("ROUNDS", str(rounds))
    try:
        interpreter.run(check(Source("churn.l", text)))
    except RunError as error:
        out = error.render()
    return interpreter, out or interpreter.out.getvalue()


@pytest.mark.slow
def test_a_program_that_allocates_much_but_keeps_little_runs_to_its_end():
    # two lists of 70,000 Cons alive (0.8 of the limit), and 500 more lists of 1,000 made and dropped
    interpreter, out = run_churn(70000, 500)
    assert out == f"{500 * 1000 + 2 * 70000}\n"
    assert interpreter.allocated() * 8 > 2.5 * LIMIT and interpreter.looks >= 5


def test_values_held_by_a_call_in_progress_are_live():
    # two lists of 96,000 Cons (1.1 times the limit): the first is held only by the parameter of keep
    interpreter, out = run_churn(96000, 0)
    assert out == f"churn.l: runtime error: {interp.HEAP_LIMIT_MESSAGE}" and interpreter.looks == 1
