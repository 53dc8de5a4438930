"""Warnings for pattern matching (issue 27, chapter 5's last section).

1. Maranget's usefulness, checked against an independent oracle: for random clauses over a small data
   type (with an Int field and tuples), brute force over every value up to a depth says whether a clause
   is reachable and whether the clauses are exhaustive, and every value the witness describes is matched
   by no clause.
2. The three warnings in programs: where they are, what they say; a catch that does not cover every
   exception is not warned about, an unreachable catch clause is.
3. The corpus, the examples and the benchmarks have no warnings but those the corpus's programs ask for
   on purpose (a match failure at run time, a refutable let, a rebound true).
"""

import itertools
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings, strategies as st

from lcompiler import pipeline, syntax as s
from lcompiler.errors import CompileError, Source
from lcompiler.types import Patterns, infer_program, pattern_warnings

ROOT = Path(__file__).resolve().parent.parent

# --- 1. The algorithm against brute force ---------------------------------------------------------

# data T { A; B(T, Int); C(T, T) }, the scrutinee a pair (T, Int)
T = s.Data("T", [], [s.Constructor("A", None), s.Constructor("B", ["T", "Int"]), s.Constructor("C", ["T", "T"])])
INTS = (0, 1)            # the patterns name these; the values range over one more


def t_patterns(depth: int):
    leaf = st.one_of(st.just(s.PWild()), st.just(s.PVar("x")), st.just(s.PCon("A", None)))
    if depth == 0:
        return leaf
    sub = t_patterns(depth - 1)
    ints = st.one_of(st.just(s.PWild()), st.sampled_from(INTS).map(s.PInt))
    return st.one_of(leaf, st.builds(lambda a, n: s.PCon("B", [a, n]), sub, ints),
                     st.builds(lambda a, b: s.PCon("C", [a, b]), sub, sub))


ROW = st.one_of(st.just(s.PWild()),
                st.builds(lambda a, n: s.PTuple([a, n]), t_patterns(2),
                          st.one_of(st.just(s.PWild()), st.sampled_from(INTS).map(s.PInt))))


def t_values(depth: int) -> list:
    if depth == 0:
        return [("A",)]
    smaller = t_values(depth - 1)
    return ([("A",)] + [("B", v, n) for v in smaller for n in INTS + (2,)]
            + [("C", v, w) for v in smaller for w in smaller])


VALUES = [(v, n) for v in t_values(3) for n in INTS + (2,)]     # patterns are at most 2 deep


def matches(p, v) -> bool:
    match p:
        case s.PWild() | s.PVar():
            return True
        case s.PInt(n):
            return v == n
        case s.PTuple(items):
            return all(matches(q, w) for q, w in zip(items, v))
        case s.PCon(name, args):
            return v[0] == name and all(matches(q, w) for q, w in zip(args or [], v[1:]))
    raise AssertionError(p)


def parse_witness(text: str):
    """The witness as a pattern, read by a small parser of its own."""
    tokens = re.findall(r"[A-Za-z_]\w*|\d+|[(),]", text)
    pos = 0

    def one():
        nonlocal pos
        t = tokens[pos]
        pos += 1
        if t == "(":
            items = [one()]
            while tokens[pos] == ",":
                pos += 1
                items.append(one())
            pos += 1
            return s.PTuple(items)
        if t == "_":
            return s.PWild()
        if t.isdigit():
            return s.PInt(int(t))
        if pos < len(tokens) and tokens[pos] == "(":
            pos += 1
            args = [one()]
            while tokens[pos] == ",":
                pos += 1
                args.append(one())
            pos += 1
            return s.PCon(t, args)
        return s.PCon(t, None)
    pattern = one()
    assert pos == len(tokens), text
    return pattern


@settings(max_examples=150, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=5))
def test_usefulness_and_the_witness_agree_with_brute_force(clauses):
    checker = Patterns([T])
    rows = []
    for p in clauses:
        reachable = any(matches(p, v) and not any(matches(q[0], v) for q in rows) for v in VALUES)
        assert checker.useful(rows, [p]) == reachable
        rows.append([p])
    missed = [v for v in VALUES if not any(matches(q[0], v) for q in rows)]
    witness = checker.missing(rows, 1)
    assert (witness is None) == (missed == [])
    if witness is not None:
        described = [v for v in VALUES if matches(parse_witness(witness[0]), v)]
        assert described and all(v in missed for v in described), witness


def test_the_oracle_can_tell_the_cases_apart():
    """The random clauses reach all the verdicts: exhaustive or not, a clause unreachable or not."""
    checker = Patterns([T])
    wild = s.PWild()
    a_first = s.PTuple([s.PCon("A", None), wild])
    assert checker.missing([[a_first]], 1) == ["(B(_, _), _)"]
    assert checker.missing([[a_first], [wild]], 1) is None
    assert not checker.useful([[wild]], [a_first]) and checker.useful([[a_first]], [wild])
    deep = s.PTuple([s.PCon("C", [wild, s.PCon("A", None)]), s.PInt(0)])
    rows = [[s.PTuple([s.PCon("A", None), wild])], [s.PTuple([s.PCon("B", [wild, wild]), wild])], [deep]]
    assert checker.missing(rows, 1) == ["(C(_, B(_, _)), _)"]


# --- 2. The warnings of programs ------------------------------------------------------------------

def warnings(text: str) -> list:
    program, _ = pipeline.compile_to("core", Source("w.l", text))
    infer_program(program)
    return [(w.span.source.line_col(w.span.start), w.message) for w in pattern_warnings(program)]


LIST = "data List<a> { Cons(a, List<a>); Nil }\n"


def test_the_three_warnings():
    assert warnings('def yes(b) = match (b) { true -> "yes"; false -> "no" }') == [
        ((1, 26), "this binds a new variable 'true'; to test a Bool, use if"),
        ((1, 41), "this binds a new variable 'false'; to test a Bool, use if"),
        ((1, 41), "this clause can never match")]
    assert warnings(LIST + "def two(l) = match (l) { Nil -> 0; Cons(_, Nil) -> 1 }") == [
        ((2, 14), "this match does not cover Cons(_, Cons(_, _))")]
    assert warnings(LIST + "def f = { Nil, _ -> 0; _, Nil -> 1 }") == [
        ((2, 9), "the clauses of this function do not cover (Cons(_, _), Cons(_, _))")]
    assert warnings(LIST + "def g(l) = { let Cons(x, _) = l; x }") == [((2, 14), "this pattern does not cover Nil")]
    assert warnings("def h(n) = match (n) { 0 -> 1; _ -> 2; 3 -> 4 }") == [((1, 40), "this clause can never match")]
    # the good programs: nothing
    assert warnings(LIST + "def n(l) = match (l) { Nil -> 0; Cons(_, t) -> 1 }\ndef m((a, b)) = a + b") == []


def test_a_catch_need_not_cover_every_exception_but_its_clauses_must_be_reachable():
    text = ("exception Oops(Int)\nexception Other\n"
            "def f(x) = try { x } catch { Oops(n) -> n }\n"
            "def g(x) = try { x } catch { _ -> 0; Other -> 1 }\n")
    assert warnings(text) == [((4, 38), "this clause can never match")]


# --- 3. The corpus, the examples, the benchmarks --------------------------------------------------

# The corpus's programs that warn on purpose: they test a match failure, a refutable let, a rebound true.
EXPECTED = {
    "tests/corpus/exceptions/predefined_caught.l": 4,
    "tests/corpus/exceptions/uncaught_match_failure.l": 1,
    "tests/corpus/fail/clauses_fn_no_match.l": 1,
    "tests/corpus/fail/clauses_fn_no_match_tuple.l": 1,
    "tests/corpus/fail/dot_clauses_no_match.l": 1,
    "tests/corpus/fail/let_ctor_mismatch.l": 1,
    "tests/corpus/fail/let_tuple_mismatch.l": 1,
    "tests/corpus/fail/match_int_no_clause.l": 1,
    "tests/corpus/fail/match_nested_no_clause.l": 1,
    "tests/corpus/fail/match_no_clause.l": 1,
    "tests/corpus/run/let_patterns.l": 3,
    "tests/corpus/run/match_basic.l": 1,
    "tests/corpus/run/rebind_true_false.l": 1,
}


def test_the_corpus_examples_and_benchmarks_warn_only_where_they_mean_to():
    found, checked = {}, 0
    files = itertools.chain(ROOT.glob("tests/corpus/**/*.l"), ROOT.glob("examples/**/*.l"),
                            ROOT.glob("bench/programs/*.l"))
    for path in sorted(files):
        try:
            program, _ = pipeline.compile_to("core", Source(str(path), path.read_text(encoding="utf-8")))
            infer_program(program)
        except CompileError:
            continue                     # tests/corpus/reject and types: programs lc refuses
        checked += 1
        count = len(pattern_warnings(program))
        if count:
            found[str(path.relative_to(ROOT))] = count
    assert checked > 100 and found == EXPECTED


# --- 4. lc: -Werror, and colour --------------------------------------------------------------------

ERRORS = ROOT / "tests" / "errors"
LC = str(Path(sys.executable).parent / "lc")


def lc(*args: str, env: dict | None = None, **options) -> subprocess.CompletedProcess:
    return subprocess.run([LC, *args], cwd=ERRORS, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, **options)


def test_werror_makes_the_warnings_errors_and_stops_lc_with_status_1(tmp_path):
    done = lc("run", "--interp", "-Werror", "warn_unreachable.l")
    golden = (ERRORS / "warn_unreachable.err").read_text()
    assert (done.stdout, done.stderr, done.returncode) == ("", golden.replace(": warning: ", ": error: "), 1)
    built = lc("build", "-Werror", "warn_not_covered.l", "-o", str(tmp_path / "x"))
    assert built.returncode == 1 and ": error: this match does not cover" in built.stderr
    assert not (tmp_path / "x").exists()
    # without -Werror the same program runs: the warnings are reported, the status is the program's
    assert lc("run", "--interp", "warn_unreachable.l").returncode == 0


def test_lc_show_and_lc_build_report_the_warnings_too(tmp_path):
    golden = (ERRORS / "warn_not_covered.err").read_text()
    shown = lc("show", "types", "warn_not_covered.l")
    assert (shown.stderr, shown.returncode) == (golden, 0) and "second : List<Int> -> Int" in shown.stdout
    built = lc("build", "warn_not_covered.l", "-o", str(tmp_path / "x"))
    assert (built.stderr, built.returncode) == (golden, 0)
    assert subprocess.run([str(tmp_path / "x")], capture_output=True, text=True).stdout == "2 red 0 one 5\n"


def test_color_always_paints_the_golden_ansi_and_never_does_not():
    done = lc("run", "--interp", "--color=always", "warn_bool_pattern.l")
    assert done.stderr == (ERRORS / "warn_bool_pattern.ansi").read_text()
    assert "\x1b[1;35mwarning:\x1b[0m" in done.stderr and "\x1b[1;32m^~~~\x1b[0m" in done.stderr
    plain = (ERRORS / "warn_bool_pattern.err").read_text()
    assert lc("run", "--interp", "--color=never", "warn_bool_pattern.l").stderr == plain
    assert lc("run", "--interp", "warn_bool_pattern.l").stderr == plain          # auto, into a pipe
    wrong = lc("run", "--interp", "--color=sometimes", "warn_bool_pattern.l")
    assert wrong.returncode == 1 and "invalid choice: 'sometimes'" in wrong.stderr
    # an error is painted as a warning is
    error = lc("run", "--color=always", "if_branches.l").stderr
    assert "\x1b[1;31merror:\x1b[0m" in error and "\x1b[1;36mnote:\x1b[0m" in error


def test_every_kind_of_message_has_a_colour_and_a_painted_runtime_error_keeps_status_2(tmp_path):
    """A kind without a colour was an internal error (status 3) for every runtime error on a terminal.
    Every kind of message, of every module that defines one (chapter 5b's internal error too), paints."""
    from lcompiler import errors, mono  # noqa: F401  (mono defines a kind of its own)
    kinds, todo = set(), [errors.Diagnostic]
    while todo:
        cls = todo.pop()
        kinds.add(cls.kind)
        todo += cls.__subclasses__()
    assert "runtime error" in kinds and "internal compiler error: ill-typed after monomorphisation" in kinds
    saved = errors.POLICY["color"]
    errors.POLICY["color"] = True
    try:
        for kind in kinds:
            assert errors.paint(kind, kind).startswith("\x1b[1;3"), kind      # a colour, and no KeyError
    finally:
        errors.POLICY["color"] = saved
    (tmp_path / "boom.l").write_text("exception Boom(Int)\nprint(1)\nraise(Boom(3))\n")
    for way in (["--interp"], [], ["-O0"]):
        done = subprocess.run([LC, "run", *way, "--color=always", "boom.l"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert (done.stdout, done.returncode) == ("1\n", 2), done.stderr
        assert done.stderr.startswith("\x1b[1mboom.l:3:1:\x1b[0m \x1b[1;31mruntime error:\x1b[0m uncaught exception "
                                      "Boom(3)\n"), done.stderr


def stderr_on_a_terminal(*args: str, env: dict | None = None) -> str:
    """lc's standard error when it is a terminal (a pseudo-terminal), as a person at one sees it."""
    main, secondary = pty.openpty()
    try:
        done = subprocess.run([LC, *args], cwd=ERRORS, stdout=subprocess.PIPE, stderr=secondary, timeout=120,
                              env={**os.environ, **(env or {})})
        assert done.returncode == 0
        os.close(secondary)
        secondary = None
        chunks = []
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:             # EIO: the terminal's other side is closed, all is read
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode().replace("\r\n", "\n")
    finally:
        os.close(main)
        if secondary is not None:
            os.close(secondary)


def test_on_a_terminal_auto_paints_unless_no_color_is_set():
    env = {k: "" for k in ("NO_COLOR",)}
    painted = (ERRORS / "warn_bool_pattern.ansi").read_text()
    plain = (ERRORS / "warn_bool_pattern.err").read_text()
    assert stderr_on_a_terminal("run", "--interp", "warn_bool_pattern.l", env=env) == painted
    assert stderr_on_a_terminal("run", "--interp", "warn_bool_pattern.l", env={"NO_COLOR": "1"}) == plain
    assert stderr_on_a_terminal("run", "--interp", "--color=never", "warn_bool_pattern.l", env=env) == plain
    assert stderr_on_a_terminal("run", "--interp", "--color=always", "warn_bool_pattern.l",
                                env={"NO_COLOR": "1"}) == painted


def test_the_repl_shows_each_entrys_warnings_once_in_the_entry():
    entries = ("data C { R; G }\ndef f = { R -> 1 }\nprint(f(R))\ndef g(x) = match (x) { _ -> 1; G -> 2 }\n"
               ":type f\nf(G) + 1\n")
    done = subprocess.run([LC, "repl"], input=entries, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert out.count("warning: the clauses of this function do not cover G") == 1, out
    assert out.count("warning: this clause can never match") == 1, out
    assert "<repl>:1:9: warning: the clauses" in out and "<repl>:1:32: warning: this clause" in out, out
