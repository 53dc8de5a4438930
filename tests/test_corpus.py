"""The L corpus (tests/corpus, see its README) and the examples, through the front end and the interpreter."""

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lcompiler.errors import CompileError, RunError, Source
from lcompiler.interp import Interpreter, check
from lcompiler.syntax import parse, pretty

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
EXAMPLES = ROOT / "examples"


def programs(folder: str) -> list[Path]:
    return sorted((CORPUS / folder).glob("*.l"))


def ids(paths):
    return [p.stem for p in paths]


def source(path: Path) -> Source:
    return Source(path.name, path.read_text(encoding="utf-8"))


def expected_location(path: Path, marker: str) -> tuple[int, int]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    m = re.match(rf"//\s*{marker}\s+(\d+):(\d+)", first)
    assert m, f"{path.name}: the first line must be // {marker} LINE:COL"
    return int(m.group(1)), int(m.group(2))


def run(src: Source) -> str:
    out = io.StringIO()
    Interpreter(out).run(check(src))
    return out.getvalue()


RUN, FAIL, REJECT, TYPES = programs("run"), programs("fail"), programs("reject"), programs("types")
EXAMPLE_PROGRAMS = sorted(EXAMPLES.glob("*.l"))


def test_the_corpus_is_there():
    assert len(RUN) >= 40 and len(FAIL) >= 10 and len(REJECT) >= 40 and len(TYPES) >= 10
    assert len(EXAMPLE_PROGRAMS) >= 6


@pytest.mark.slow
@pytest.mark.parametrize("path", RUN, ids=ids(RUN))
def test_run_prints_what_is_expected(path):
    assert run(source(path)) == path.with_suffix(".out").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", EXAMPLE_PROGRAMS, ids=ids(EXAMPLE_PROGRAMS))
def test_examples_print_what_is_expected(path):
    expected = ROOT / "tests" / "examples" / (path.stem + ".out")
    assert run(source(path)) == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", FAIL, ids=ids(FAIL))
def test_fail_stops_with_a_runtime_error_where_expected(path):
    out = io.StringIO()
    with pytest.raises(RunError) as caught:
        Interpreter(out).run(check(source(path)))
    assert out.getvalue() == path.with_suffix(".out").read_text(encoding="utf-8")
    assert caught.value.span.source.line_col(caught.value.span.start) == expected_location(path, "runtime-error")
    assert caught.value.render().startswith(f"{path.name}:")


@pytest.mark.parametrize("path", REJECT, ids=ids(REJECT))
def test_reject_is_a_compile_error_where_expected(path):
    with pytest.raises(CompileError) as caught:
        check(source(path))
    error = caught.value
    assert error.span.source.line_col(error.span.start) == expected_location(path, "error"), error.render()


@pytest.mark.parametrize("path", TYPES, ids=ids(TYPES))
def test_ill_typed_programs_pass_the_front_end(path):
    check(source(path))          # their mistakes are for the type checker (chapter 5)


PRINTED = RUN + FAIL + TYPES + programs("exceptions") + EXAMPLE_PROGRAMS


@pytest.mark.parametrize("path", PRINTED, ids=ids(PRINTED))
def test_printing_and_parsing_again_gives_the_same_tree(path):
    tree = parse(source(path))
    again = parse(Source("again.l", pretty(tree)))
    assert again == tree


def lc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "lc"), *args],
                          capture_output=True, text=True, cwd=CORPUS)


@pytest.mark.slow
def test_lc_run_exit_statuses_and_messages():
    ok = lc("run", f"run/{RUN[0].name}")
    assert ok.returncode == 0 and ok.stdout == RUN[0].with_suffix(".out").read_text() and ok.stderr == ""
    failing = lc("run", f"fail/{FAIL[0].name}")
    line, col = expected_location(FAIL[0], "runtime-error")
    assert failing.returncode == 2
    assert failing.stderr.startswith(f"fail/{FAIL[0].name}:{line}:{col}: runtime error: ")
    assert failing.stdout == FAIL[0].with_suffix(".out").read_text()
    rejected = lc("run", "--interp", f"reject/{REJECT[0].name}")
    line, col = expected_location(REJECT[0], "error")
    assert rejected.returncode == 1 and rejected.stdout == ""
    assert rejected.stderr.startswith(f"reject/{REJECT[0].name}:{line}:{col}: error: ")
    assert "Traceback" not in failing.stderr + rejected.stderr
    missing = lc("run", "no/such/file.l")
    assert missing.returncode == 1 and "cannot read no/such/file.l" in missing.stderr
    for stage in ("tokens", "ast", "core", "types"):
        shown = lc("show", stage, str(EXAMPLES / "lists.l"))
        assert shown.returncode == 0 and shown.stdout.strip() and shown.stderr == ""
    assert "length : List<a> -> Int" in lc("show", "types", str(EXAMPLES / "lists.l")).stdout
    unknown = lc("show", "bytecode", str(EXAMPLES / "lists.l"))
    assert unknown.returncode == 1 and "unknown stage 'bytecode'" in unknown.stderr
