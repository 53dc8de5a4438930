"""Errors a person can act on, and no crash (issue 16).

1. Golden files: every program of tests/errors/ is rejected with exactly the messages of its .err file —
   "did you mean", notes at the second place of a type conflict, several errors per run in source order.
2. Several errors per run: independent broken items are each reported, and one broken item invents no
   error in the items after it.
3. The paths where lc meets a mistake of its user or of the machine (an output it cannot write, no C
   compiler, a closed pipe, a file that is not UTF-8 or not a file, a bad option): each a clear message
   and exit status 1 — never a traceback, never status 3, which is kept for bugs of lc.
4. The programs of the issue that crashed the reference interpreter run, interpreted as compiled.
"""

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lcompiler import driver, pipeline
from lcompiler.cli import read_source
from lcompiler.errors import POLICY, CompileError, CompileErrors, RunError, Source
from lcompiler.interp import Interpreter, check
from lcompiler.runtime import DEFAULTS
from lcompiler.syntax import parse
from lcompiler.types import check_types

ROOT = Path(__file__).resolve().parent.parent
ERRORS = ROOT / "tests" / "errors"
GOLDEN = sorted(ERRORS.glob("*.l"))
LC = str(Path(sys.executable).parent / "lc")


def lc(*args: str, cwd=ERRORS, env=None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([LC, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                          timeout=120)


# --- 1. Golden messages -----------------------------------------------------------------------

def rendered(path: Path, monkeypatch, capsys) -> str:
    """The errors of the program, or the warnings it compiles with (written on standard error)."""
    monkeypatch.chdir(path.parent)
    monkeypatch.setitem(POLICY, "sink", sys.stderr)      # as lc does: the warnings on standard error
    capsys.readouterr()
    try:
        check_types(read_source(path.name))
    except CompileError as error:
        return capsys.readouterr().err + error.render() + "\n"
    return capsys.readouterr().err or "accepted!\n"


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_messages(path, monkeypatch, capsys):
    got, golden = rendered(path, monkeypatch, capsys), path.with_suffix(".err")
    if os.environ.get("LC_UPDATE_GOLDEN"):
        golden.write_text(got, encoding="utf-8")
    assert got == golden.read_text(encoding="utf-8")
    assert "Traceback" not in got
    # warn_*.l are accepted, with warnings only; the others are rejected
    assert (": error: " not in got and ": warning: " in got) if path.stem.startswith("warn_") else ": error: " in got
    # the pipeline (lc run, lc show) reports the same: its tokens stage hands the lexical errors on
    try:
        pipeline.compile_to("types", read_source(path.name))
        assert capsys.readouterr().err == got
    except CompileError as error:
        assert error.render() + "\n" == got


def test_the_golden_files_cover_what_the_issue_asks():
    text = "".join(p.with_suffix(".err").read_text(encoding="utf-8") for p in GOLDEN)
    for wanted in ["did you mean square?", "did you mean Circle?", "did you mean Tree?", "did you mean print?",
                   ": note: the then branch has type String", ": note: add has type (Int, Int) -> Int",
                   ": note: first defined here", ": note: the '{' is opened here", "is not UTF-8",
                   # issue 27's messages
                   "found '='; did you mean '=='?", "note: L has no return: the value of a block is its last expression",
                   "note: + adds Ints; L has no operator that joins strings", "unknown variable prnt; did you mean print?"]:
        assert wanted in text, wanted
    unclosed = (ERRORS / "unclosed_brace_before_def.err").read_text()
    assert "'def' begins a top-level item" in unclosed and "1:12: note: the '{' is opened here" in unclosed
    assert (ERRORS / "misspelt_names_in_one_expression.err").read_text().count(": error: unknown variable") == 3
    declared = (ERRORS / "declared_twice.err").read_text()
    assert "the type Shape is declared twice" in declared and "Int is a built-in type: choose another name" in declared
    for name, count in [("three_type_errors", 3), ("three_syntax_errors", 3), ("three_name_errors", 4)]:
        assert (ERRORS / f"{name}.err").read_text().count(": error: ") == count, name


def test_the_golden_files_cover_the_mistakes_with_exceptions():
    text = "".join(p.with_suffix(".err").read_text(encoding="utf-8") for p in GOLDEN if p.stem.startswith("exception"))
    for wanted in ["unknown exception NotFund; did you mean NotFound?", "unknown exception Failur; did you mean Failure?",
                   "the exception None is declared twice", "the exception Stop is declared twice",
                   "DivisionByZero is a predefined exception", "Exn is the predefined type of exceptions",
                   "an exception's fields cannot have a type variable (a)", "raise is a built-in form, not a value",
                   "raise takes one exception, given 2", "expected 'catch' after the block of 'try'",
                   "catch without a try", "expected Exn, found Int (the argument of raise)",
                   "note: the block of the try has type Int", "found Exn (only those can be compared"]:
        assert wanted in text, wanted


def test_the_golden_files_cover_the_warnings():
    text = "".join(p.with_suffix(".err").read_text(encoding="utf-8") for p in GOLDEN if p.stem.startswith("warn_"))
    for wanted in ["warning: this match does not cover Cons(_, Nil)", "this binds a new variable 'true'; to test a Bool, use if",
                   "warning: this clause can never match", "the clauses of this function do not cover Blue",
                   "this pattern does not cover Nil", "do not cover (Cons(_, _), Cons(_, _))"]:
        assert wanted in text, wanted


@pytest.mark.parametrize("name", ["warn_bool_pattern", "warn_not_covered", "warn_unreachable"])
def test_lc_writes_the_warnings_and_runs_the_program(name):
    done = lc("run", "--interp", f"{name}.l")
    assert (done.stderr, done.returncode) == ((ERRORS / f"{name}.err").read_text(encoding="utf-8"), 0)
    assert done.stdout.strip() != ""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["if_branches", "three_syntax_errors", "not_utf8"])
def test_lc_writes_the_golden_messages_and_exits_with_status_1(name):
    for command in (["run"], ["run", "--interp"], ["build", "-o", "/tmp/never-written"]):
        done = lc(*command[:1], f"{name}.l", *command[1:])
        assert (done.stdout, done.stderr, done.returncode) == \
            ("", (ERRORS / f"{name}.err").read_text(encoding="utf-8"), 1), command


# --- 2. Several errors per run ------------------------------------------------------------------

BROKEN_ITEMS = [                     # each a top-level item with one syntax or lexical mistake
    "def a(x) = (x +",
    "def b(x) = {\n  let y = x *\n}",
    "def c = match (1) { 0 -> 1; 1 -> }",
    "def d(x) x + 1",
    "print (1)",
    "def e = Nil()",
    "def j = if (true) 1; else 3",
    "def f = \"open",
    "def g = 1 $ 2",
    "def h = { x -> x\n  print(x) )",
    "data T { A(Int) B }",
    "let i = 4",
]


def test_every_broken_item_is_reported_and_the_items_after_it_are_still_read():
    text = "\n".join(BROKEN_ITEMS) + "\n"
    starts = [text.index(item) for item in BROKEN_ITEMS] + [len(text)]
    with pytest.raises(CompileErrors) as caught:
        parse(Source("broken.l", text))
    errors = caught.value.errors
    assert [e.span.start for e in errors] == sorted(e.span.start for e in errors)
    # an item left unfinished is reported where the next one begins, at its 'def'
    owners = [max(i for i, s in enumerate(starts) if s <= e.span.start) - e.message.startswith("'def' begins")
              for e in errors]
    assert sorted(set(owners)) == list(range(len(BROKEN_ITEMS))), caught.value.render()
    # a correct item after each broken one is read, and brings no error
    good = "\n".join(f"{item}\ndef ok{i}(x) = x + {i}" for i, item in enumerate(BROKEN_ITEMS)) + "\n"
    with pytest.raises(CompileErrors) as again:
        parse(Source("broken.l", good))
    assert [e.render() for e in again.value.errors
            if "ok" in e.render().split("\n")[1] and not e.message.startswith("'def' begins")] == []


def test_a_nul_character_is_refused_in_a_string_as_elsewhere():
    # found by tools/mutants.py: the compiled code's C strings stopped at the NUL, the interpreter did not
    with pytest.raises(CompileErrors) as caught:
        parse(Source("nul.l", 'print("a\0b")\nprint(1\0)\n'))
    assert [(e.span.source.line_col(e.span.start), e.message) for e in caught.value.errors] == [
        ((1, 9), "a string cannot contain the character NUL (U+0000)"),
        ((2, 8), "unexpected character '\\x00'")]


def test_one_error_alone_is_a_plain_compile_error_and_a_group_starts_with_its_first():
    with pytest.raises(CompileError) as one:
        check_types(Source("t.l", "def f = 1 + true"))
    assert not isinstance(one.value, CompileErrors)
    with pytest.raises(CompileErrors) as several:
        check_types(Source("t.l", "def f = g(1) + true\ndef g(x) = x && 1\n"))
    first = several.value.errors[0]
    assert (several.value.message, several.value.span) == (first.message, first.span)
    assert several.value.span.source.line_col(several.value.span.start) == (1, 16)


# --- 3. Mistakes of the user or the machine: lc: error, status 1 ---------------------------------

@pytest.fixture
def hello(tmp_path) -> Path:
    path = tmp_path / "hello.l"
    path.write_text('print("hello")\n')
    return path


def clear_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stderr.startswith("lc: error: ") and "Traceback" not in done.stderr, done.stderr
    for w in words:
        assert w in done.stderr, done.stderr


def test_an_executable_that_cannot_be_written(hello, tmp_path):
    clear_error(lc("build", str(hello), "-o", "/nonexistent/dir/x"), "cannot write /nonexistent/dir/x")
    clear_error(lc("build", str(hello), "-o", str(tmp_path)), "it is a directory")
    clear_error(lc("build", str(hello), "-o", str(hello)), "it is the source file")
    assert hello.read_text() == 'print("hello")\n'


def test_inputs_that_cannot_be_read(tmp_path):
    clear_error(lc("run", str(tmp_path)), f"cannot read {tmp_path}: Is a directory")
    clear_error(lc("show", "tokens", "missing.l"), "cannot read missing.l: No such file or directory")
    done = lc("run", "not_utf8.l")
    assert done.returncode == 1 and done.stderr.startswith("not_utf8.l:1:20: error: this file is not UTF-8")


def test_no_c_compiler(hello, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    env.update(PATH=str(Path(sys.executable).parent), LC_CACHE=str(tmp_path / "cache"))   # no cached runtime
    assert shutil.which("cc", path=env["PATH"]) is None and shutil.which("gcc", path=env["PATH"]) is None
    for command in (["run", str(hello)], ["build", str(hello), "-o", str(tmp_path / "x")]):
        clear_error(lc(*command, env=env), "no C compiler found")
    clear_error(lc("run", str(hello), env={**env, "CC": "/no/such/cc"}), "/no/such/cc")


def test_output_that_cannot_be_written():
    for command in (["show", "tokens"], ["run", "--interp"]):
        with open("/dev/full", "w") as full:
            done = lc(*command, str(ROOT / "examples" / "queens.l"), stdout=full)
        clear_error(done, "No space left on device")


@pytest.mark.parametrize("command", [["run", "--interp"], ["run"], ["show", "tokens"]])
def test_a_reader_that_goes_away_is_not_an_error(command):
    """lc … | head -1: the pipe is closed before lc writes; lc stops or carries on quietly."""
    p = subprocess.Popen([LC, *command, str(ROOT / "examples" / "fizzbuzz.l")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    stderr = p.stderr.read()
    status = p.wait(timeout=120)
    assert stderr == "" and status in (0, 1), (status, stderr)
    if command[0] == "run":
        assert status == 0              # as the compiled program does: it runs to its end


@pytest.mark.slow
def test_version_help_and_usage():
    version = lc("--version")
    assert version.returncode == 0 and version.stdout.startswith("lc 0.") and version.stderr == ""
    help_ = lc("--help").stdout
    for variable in ("LC_HEAP_LIMIT", "LC_STACK_SIZE", "LC_CACHE"):
        assert variable in help_
    heap = " ".join(help_.split("LC_HEAP_LIMIT")[1].split("LC_STACK_SIZE")[0].split())
    stack = " ".join(help_.split("LC_STACK_SIZE")[1].split("LC_CACHE")[0].split())
    # the defaults are the runtime's own (chapter 10b's DEFAULTS, which its C is compiled with), whatever
    # they are; tests/test_runtime.py checks that the compiled runtime uses these
    assert "or a quarter of the machine's memory if that is less" in heap, heap
    assert help_bytes(heap) == DEFAULTS["LC_HEAP_LIMIT"] and help_bytes(stack) == DEFAULTS["LC_STACK_SIZE"]
    for args in (["run"], ["frobnicate"], ["build"], []):
        done = lc(*args)
        assert done.returncode == 1 and "usage: lc" in done.stderr and "Traceback" not in done.stderr, args


def help_bytes(text: str) -> int:
    """'… (default 256M)' or '… default 1G, or …' -> the default in bytes: 268435456."""
    value = re.search(r"default (\d+)([KMG]?)\b", text)
    return int(value.group(1)) << dict(G=30, M=20, K=10).get(value.group(2), 0)


def test_the_cell_magic_reports_a_bad_line(capsys):
    for line, message in [("--timeout abc", "--timeout needs a number of seconds, not 'abc'"),
                          ("--timeout", "--timeout needs a number of seconds, not ''"),
                          ("--timeout -3", "not '-3'"), ("--frobnicate", "unknown option --frobnicate")]:
        driver.l_cell_magic(line, 'print("not run")')
        out = capsys.readouterr().out
        assert out.startswith("%%L: error: ") and message in out and "not run" not in out, out
    driver.l_cell_magic("ok.l --timeout 30", 'print("run")')
    assert capsys.readouterr().out == "run\n"


# --- 4. What crashed the interpreter runs, interpreted as compiled -------------------------------

DEEP = {
    "range.l": "def range(a, b) = if (a > b) Nil else Cons(a, range(a + 1, b))\n"
               "def length = { Cons(_, t) -> 1 + length(t); Nil -> 0 }\nprint(length(range(1, 20000)))\n",
    "printed.l": "def build(n, acc) = if (n == 0) acc else build(n - 1, Cons(n, acc))\n"
                 "print(build(30000, Nil).{ Cons(_, t) -> t; Nil -> Nil })\n",
    "deep.l": "def deep(n) = if (n == 0) 0 else 1 + deep(n - 1)\nprint(deep(100000))\n",
}
# (A runaway recursion, a stack overflow both ways, is test_native.py's
# test_a_runaway_recursion_is_a_runtime_error_at_the_interpreters_place.)


@pytest.mark.parametrize("name", DEEP)
def test_deep_programs_run_interpreted_as_compiled(name):
    src = Source(name, "data List<a> { Cons(a, List<a>); Nil }\n" + DEEP[name])
    out = io.StringIO()
    try:
        Interpreter(out).run(check(src))
        interpreted = (out.getvalue(), "", 0)
    except RunError as error:
        interpreted = (out.getvalue(), error.render() + "\n", 2)
    compiled = driver.run_source(src, timeout=120)
    assert (compiled.stdout, compiled.stderr, compiled.status) == interpreted
    assert interpreted[2] == 0
