"""Exceptions in machine code (chapter 10's section on exceptions): the flag lowering.

The golden corpus `tests/corpus/exceptions/` runs compiled in tests/test_exceptions.py; here, what the
back end promises beyond it, each against an oracle that is not the back end: the reference
interpreter (random programs, the collector's roots, reports), the LLVM of programs that catch nothing,
and the tests in the module (a call of a function that cannot raise is not followed by one).
"""
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from lcompiler import cps, pipeline
from lcompiler.errors import Source
from lcompiler.llvm_backend import LOWERINGS, catches, to_llvm

import test_native
from test_convert import programs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


@pytest.fixture(autouse=True, params=LOWERINGS)
def lowering(request, monkeypatch) -> str:
    """Every test runs under each lowering of exceptions: the flag, and trap frames."""
    monkeypatch.setenv("LC_EXCEPTIONS", request.param)
    return request.param


def source(text: str, name: str = "t.l") -> Source:
    return Source(name, textwrap.dedent(text))


def compiled(text: str, env: dict | None = None, name: str = "t.l", optimiser: bool = True) -> tuple:
    """(stdout, stderr, status) of the program run compiled (the JIT, in a child)."""
    r = test_native.run(text, name, env, optimiser=optimiser)
    return r.stdout, r.stderr, r.status


def reference(text: str, name: str = "t.l") -> tuple:
    return test_native.reference(source(text, name))


def closed_program(text: str, optimiser: bool = True) -> cps.Program:
    """The program the back end translates (chapter 9's optimiser on, or off)."""
    return pipeline.compile_to("shrink" if optimiser else "closure", source(text), optimiser)[0]


# --- A program that catches nothing: the code of before ---------------------------------------------

def test_a_program_that_catches_nothing_gets_no_flag_no_record_and_no_extra_root():
    """Every program of the corpus and the examples without exceptions: nothing catches, so the module
    has no test of the flag, no raise site, no lc_uncaught, and lc_globals has its slots of before
    (one per dynamic definition)."""
    paths = [p for folder in ("run", "fail") for p in sorted((CORPUS / folder).glob("*.l"))] + \
        sorted((ROOT / "examples").glob("*.l"))
    assert len(paths) > 50
    for p in paths:
        src = Source(p.name, p.read_text(encoding="utf-8"))
        program = pipeline.compile_to("shrink", src, True)[0]
        assert not catches(program), p.name
        text = str(to_llvm(src))
        assert '%"pending"' not in text and '@"lc_site"' not in text and '@"lc_uncaught"' not in text, p.name
        dynamic = sum(d.body is not None and d.var is not None for d in program.definitions)
        assert f"@\"lc_globals\" = global [{max(1, dynamic)} x i64]" in text, p.name


def test_a_raise_that_nothing_catches_reports_at_once_as_before():
    text = """\
    exception Failure(String)
    def check(n) = if (n > 2) raise(Failure("too big")) else n
    print(check(1))
    print(check(5))
    """
    program = closed_program(text)
    assert not catches(program)
    module = str(to_llvm(source(text), optimiser=False))
    assert '%"pending"' not in module and '@"lc_uncaught"' not in module and '@"lc_fail_begin"' in module
    assert compiled(text) == reference(text)


# --- The flag: tested after the calls that may raise, and only there ---------------------------------

def test_only_a_call_of_a_function_that_may_raise_is_followed_by_a_test(lowering):
    text = """\
    exception E
    def pure(n) = n * 2
    def risky(n) = if (n > 5) raise(E) else n
    def through(n) = 1 + risky(n)
    print(try { pure(1) + risky(2) + through(3) + pure(4) } catch { E -> 0 })
    print(try { through(9) } catch { E -> -1 })
    """
    assert catches(closed_program(text, False))
    module = str(to_llvm(source(text), optimiser=False))
    tests = len(re.findall(r'%"pending(\.\d+)?" = load', module))
    traps = module.count('call i32 @"llvm.eh.sjlj.setjmp"')
    if lowering == "flag":
        # through calls risky (a test, then return at once); the statements call risky once and
        # through twice (three tests); the two calls of pure have none
        assert (tests, traps) == (4, 0), module
    else:
        # a trap around each call that names a handler and may raise: risky, through, through;
        # the landing of each reads the exception
        assert (tests, traps) == (3, 3), module
    assert compiled(text, optimiser=False) == reference(text) == ("16\n-1\n", "", 0)


# --- Oracle: the reference interpreter -------------------------------------------------------------

REPORTS = """\
data Option<a> { Some(a); None }
exception Other
def pick(o) = match (o) { None -> 0 }
def guard(o) = try { pick(o) } catch { Other -> 1 }
print(guard(None))
print(guard(Some((1, "a \\"b\\""))))
"""


def test_a_match_failure_passed_on_by_a_try_keeps_its_message_and_its_value():
    got = compiled(REPORTS, name="reports.l")
    assert got == reference(REPORTS, "reports.l")
    assert got[1].startswith("reports.l:3:15: runtime error: no clause matches the value Some((1, \"a \\\"b\\\"\"))")


@pytest.mark.parametrize("optimiser", [True, False], ids=["O2", "O0"])
def test_a_division_by_zero_raised_deep_and_caught_or_not(optimiser):
    text = """\
    def down(n, d) = if (n == 0) 100 / d else 1 + down(n - 1, d)
    print(try { down(1000, 0) } catch { DivisionByZero -> -1 })
    print(try { down(10, 5) } catch { DivisionByZero -> -1 })
    print(try { down(10, 0) } catch { MatchFailure -> -2 })
    """
    assert compiled(text, optimiser=optimiser) == reference(text)


# The collector: a raise passes through frames that hold the only pointers to young blocks, and the
# handlers that catch it allocate; under stress (a collection at every allocation) a lost root is a
# wrong sum or a crash.
ROOTS = """\
data List<a> { Cons(a, List<a>); Nil }
exception Up(List<Int>)
def sum(l) = match (l) { Nil -> 0; Cons(x, r) -> x + sum(r) }
def build(n) = if (n == 0) Nil else Cons(n, build(n - 1))
def down(n) = {
  let mine = build(3)
  if (n == 0) raise(Up(build(5)))
  else try { sum(mine) + down(n - 1) } catch { Up(l) -> if (n % 7 == 0) sum(mine) + sum(l) else raise(Up(Cons(n, l))) }
}
print(try { down($N) } catch { Up(l) -> sum(l) })
"""


@pytest.mark.parametrize("env", [{"LC_GC_STRESS": "1"}, {"LC_GC_STRESS": "3"}, {"LC_NURSERY": "64K"}],
                         ids=lambda e: " ".join(f"{k}={v}" for k, v in e.items()))
def test_a_raise_through_frames_holding_young_blocks_keeps_them(env):
    text = ROOTS.replace("$N", "60" if "LC_GC_STRESS" in env else "3000")
    assert compiled(text, env) == reference(text)


def test_stack_overflow_and_out_of_memory_in_a_try_stay_fatal_and_located():
    overflow = ("exception E\ndef down(n) = if (n < 0) raise(E) else 2 * down(n + 1) + 1\n"
                "print(try { down(0) } catch { _ -> 0 })\n")
    got = compiled(overflow, name="over.l")
    assert got == reference(overflow, "over.l")
    assert got[1].startswith("over.l:2:44: runtime error: stack overflow"), got
    grow = ("data List<a> { Cons(a, List<a>); Nil }\nexception E\n"
            "def grow(l) = grow(Cons((1, 2), l))\nprint(try { grow(Nil) } catch { _ -> Nil })\n")
    out, err, status = compiled(grow, {"LC_HEAP_LIMIT": "4M"}, name="grow.l")
    assert (out, status) == ("", 2) and err.startswith("grow.l: runtime error: out of memory"), err


def test_a_loop_that_retries_in_its_handler_runs_in_a_small_stack():
    """The corpus's handler_tail_calls (a million retries; ping and pong; a closure), on a stack of
    256 KiB: a call in a clause is a tail call."""
    path = CORPUS / "exceptions" / "handler_tail_calls.l"
    got = compiled(path.read_text(encoding="utf-8"), {"LC_STACK_SIZE": "256K"}, name=path.name)
    assert got == (path.with_suffix(".out").read_text(encoding="utf-8"), "", 0)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, database=None,   # the same programs every run
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(programs(exceptions=True))
def test_random_programs_with_exceptions_run_compiled_as_the_interpreter_runs_them(text):
    assert compiled(text, name="random.l") == reference(text, "random.l"), text


def test_the_flag_is_a_word_of_lc_globals_and_a_raise_to_a_handler_clears_nothing_else():
    """The pending exception and the recorded value are the last two slots of lc_globals: roots."""
    text = "exception E(Int)\ndef f(n) = if (n > 0) raise(E(n)) else 0\nprint(try { f(2) } catch { E(k) -> k })\n"
    assert catches(closed_program(text, False))
    module = str(to_llvm(source(text), optimiser=False))
    size = int(re.search(r'@"lc_globals" = global \[(\d+) x i64\]', module).group(1))
    assert size == 2 + 0          # no dynamic definition: the two words of exceptions
    assert compiled(text) == ("2\n", "", 0)


@pytest.mark.slow
@pytest.mark.parametrize("way", ["jit", "executable", "jit -O0"])
def test_the_corpus_of_exceptions_runs_compiled_under_trap_frames_too(way, tmp_path, monkeypatch, lowering):
    """tests/test_exceptions.py runs the corpus with the default lowering; here under the other one."""
    import test_exceptions
    if lowering == "flag":
        pytest.skip("the default lowering: tests/test_exceptions.py")
    wrong = []
    for path in test_exceptions.EXCEPTIONS:
        monkeypatch.chdir(path.parent)
        got = test_exceptions.WAYS[way](test_exceptions.source(path), tmp_path)
        if got != test_exceptions.expected(path):
            wrong.append(path.stem)
    assert wrong == []
