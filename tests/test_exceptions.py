"""Exceptions (issue 25, L-LANGUAGE.md §12): the corpus of exception programs with their golden outputs,
run every way L runs, and the promises of the front end and the reference interpreter.

tests/corpus/exceptions/NAME.l writes NAME.out on stdout; if NAME.err exists, the program stops with a
runtime error, exit status 2, and NAME.err is exactly what it writes on stderr (else stderr is empty and
the status 0). Each program goes each way of WAYS: the reference interpreter; chapter 6's CPS interpreter
after CPS conversion (chapter 7), and after the optimiser, closure conversion and the shrinker (chapters 9
and 8), every stage's output checked; and the compiled ways (the JIT, an executable, the JIT without chapter
9's optimiser). Every way runs every program: a compiled way that refused one (`back_end_refuses`, the
message of the days before the back end lowered exceptions) fails the test.
"""

import io
import subprocess
from pathlib import Path

import pytest

from lcompiler import core, cps, driver, pipeline
from lcompiler.errors import CompileError, RunError, Source
from lcompiler.interp import DEPTH_LIMIT, Interpreter, Raised, check
from lcompiler.types import check_types

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
EXCEPTIONS = sorted((CORPUS / "exceptions").glob("*.l"))
NOT_YET = "exceptions are not compiled yet"


def source(path: Path) -> Source:
    return Source(path.name, path.read_text(encoding="utf-8"))


def interpreted(src: Source, tmp_path: Path) -> tuple:
    """(stdout, stderr, status) under the reference interpreter, on the typed program as lc runs it."""
    out = io.StringIO()
    try:
        Interpreter(out).run(check_types(src)[0])
    except RunError as error:
        return out.getvalue(), error.render() + "\n", 2
    return out.getvalue(), "", 0


def compiled(optimiser: bool):
    def run(src: Source, tmp_path: Path) -> tuple:
        r = driver.run_source(src, timeout=120, optimiser=optimiser)
        return r.stdout, r.stderr, r.status
    return run


def executable(src: Source, tmp_path: Path) -> tuple:
    try:
        exe = driver.build(src, tmp_path / "program")
    except CompileError as error:
        return "", error.render() + "\n", 1
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return done.stdout, done.stderr, done.returncode


def on_cps(optimised: bool):
    """Chapter 6's interpreter on the CPS after the stage cps, or after opt, closure and shrink; each stage's
    output checked. Its stack limit is the reference interpreter's: deep_recursion_escape nests 100,001
    calls, one more than the CPS interpreter's default allows."""
    def run(src: Source, tmp_path: Path) -> tuple:
        *_, (_, value, _) = pipeline.stages_of(src, upto="shrink" if optimised else "cps", optimise=optimised,
                                               checked=True)
        out = io.StringIO()
        try:
            cps.run(value, out, stack_limit=DEPTH_LIMIT)
        except RunError as error:
            return out.getvalue(), error.render() + "\n", 2
        return out.getvalue(), "", 0
    return run


WAYS = {"interpreter": interpreted, "cps": on_cps(False), "cps optimised": on_cps(True),
        "jit": compiled(True), "executable": executable, "jit -O0": compiled(False)}
COMPILED = ("jit", "executable", "jit -O0")


def back_end_refuses(way: str, got: tuple) -> bool:
    """Did a compiled way stop at the llvm stage's refusal of what the back end does not lower yet?"""
    return way in COMPILED and got[2] == 1 and NOT_YET in got[1]


def expected(path: Path) -> tuple:
    err = path.with_suffix(".err")
    stderr = err.read_text(encoding="utf-8") if err.exists() else ""
    return path.with_suffix(".out").read_text(encoding="utf-8"), stderr, 2 if stderr else 0


def test_the_corpus_covers_what_the_issue_asks():
    names = {p.stem for p in EXCEPTIONS}
    assert {"raise_and_catch", "nested_try", "closures_and_higher_order", "raise_in_clauses", "predefined_caught",
            "deep_recursion_escape", "million_raises", "handler_tail_calls", "evaluation_order",
            "vars_seen_by_handlers", "uncaught_user", "uncaught_through_try", "uncaught_from_clause"} <= names
    assert sum(p.with_suffix(".err").exists() for p in EXCEPTIONS) >= 6
    for p in EXCEPTIONS:
        assert p.with_suffix(".out").exists(), p.name


@pytest.mark.slow
@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("path", EXCEPTIONS, ids=[p.stem for p in EXCEPTIONS])
def test_exception_programs_behave_as_their_golden_files_say(path, way, tmp_path, monkeypatch):
    monkeypatch.chdir(path.parent)
    got = WAYS[way](source(path), tmp_path)
    assert not back_end_refuses(way, got), f"{way}: the back end refused the program"
    assert got == expected(path)


# --- The promises of the interpreter, each with a limit that would break without it -------------

def run(text: str, **limits) -> tuple:
    out = io.StringIO()
    try:
        Interpreter(out, **limits).run(check_types(Source("t.l", text))[0])
    except RunError as error:
        return out.getvalue(), error.render()
    return out.getvalue(), None


def test_a_call_in_a_clause_is_a_tail_call_when_the_try_is():
    retry = """exception Again(Int)
def attempt(n) = if (n < 5000) raise(Again(n)) else n
def retry(n) = try { attempt(n) } catch { Again(k) -> retry(k + 1) }
print(retry(0))
"""
    assert run(retry, depth_limit=100) == ("5000\n", None)          # 5000 retries, 100 nested calls allowed


def test_a_call_in_the_block_of_a_try_is_not_a_tail_call():
    looping = """exception Never
def loop(n) = try { if (n == 0) 0 else loop(n - 1) } catch { Never -> -1 }
print(loop(5000))
"""
    printed, error = run(looping, depth_limit=100)
    assert printed == "" and "stack overflow" in error
    assert run(looping, depth_limit=6000) == ("0\n", None)


def test_stack_and_heap_exhaustion_are_not_exceptions():
    printed, error = run("def down(n) = 1 + down(n + 1)\nprint(try { down(0) } catch { _ -> 0 })", depth_limit=1000)
    assert "stack overflow" in error
    grow = """data List<a> { Cons(a, List<a>); Nil }
def grow(l) = grow(Cons((1, 2), l))
print(try { grow(Nil) } catch { _ -> Nil })
"""
    printed, error = run(grow, heap_limit=1 << 20)
    assert printed == "" and "out of memory" in error


def test_an_uncaught_exception_is_a_runtime_error_at_its_raise_with_status_2():
    printed, error = run('exception Failure(String)\nprint(1)\ndef f() = raise(Failure("bo\\"om"))\nf()')
    assert printed == "1\n"
    assert error.split("\n")[0] == 't.l:3:11: runtime error: uncaught exception Failure("bo\\"om")'
    assert error.split("\n")[2] == " " * 10 + "^" + "~" * 23          # under the whole raise(…)


def test_the_predefined_exceptions_come_first_then_the_programs_in_order():
    program = check(Source("t.l", "exception B\nexception A(Int)\nprint(1)"))
    exn = program.items[0]
    assert exn.name == "Exn" and [c.name for c in exn.constructors] == \
        ["DivisionByZero", "MatchFailure", "AssertionFailed", "B", "A"]
    assert core.PREDEFINED_EXCEPTIONS == ("DivisionByZero", "MatchFailure", "AssertionFailed")


def test_a_program_without_exceptions_has_the_core_it_had_before():
    """No Exn item, so every later stage sees the program of before: for every program of the corpus and
    the examples that does not mention exceptions."""
    paths = [p for folder in ("run", "fail", "types") for p in sorted((CORPUS / folder).glob("*.l"))] + \
        sorted((ROOT / "examples").glob("*.l"))
    for p in paths:
        program = check(source(p))
        assert not any(getattr(item, "name", None) == "Exn" for item in program.items), p.name


def test_a_raise_caught_leaves_nothing_behind_for_the_depth_count():
    text = """exception Deep
def down(n) = if (n == 0) raise(Deep) else 1 + down(n - 1)
def many(i) = if (i == 0) 0 else { try { down(50) } catch { Deep -> 0 }; many(i - 1) }
print(many(1000))
"""
    assert run(text, depth_limit=200) == ("0\n", None)      # 1000 × 50 calls left by a raise, never counted


def test_raised_is_a_run_error_carrying_the_value():
    printed, error = run("print(try { 7 / 0; AssertionFailed } catch { e -> e })")
    assert printed == "DivisionByZero\n" and error is None
    with pytest.raises(Raised) as caught:
        Interpreter(io.StringIO()).run(check(Source("t.l", "print(7 % 0)")))
    assert caught.value.value.name == "DivisionByZero" and caught.value.message == "division by zero"


def test_the_repl_accepts_an_exception_declaration():
    shown = []
    session = driver.Repl(write=shown.append, timeout=60)

    def enter(text: str) -> str:
        shown.clear()
        session.enter(text)
        return "".join(shown)

    assert enter("exception Failure(String)\n") == "exception Failure(String)\n"     # echoed, as data is
    assert enter('Failure("x")\n') == 'Failure("x") : Exn\n'
    assert enter("try { raise(Failure(\"y\")) } catch { _ -> 0 }\n") == "0 : Int\n"
