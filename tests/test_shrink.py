"""The optimiser of chapter 9: shrinking reductions, contification, inlining.

- Meaning: every corpus program and example means the same before and after the optimiser, under the
  CPS interpreter (before and after closure conversion and the second shrink) and compiled with and
  without the optimiser; so do random well-typed programs.
- Each step: on random programs, chapter 6's `check` holds after every single rewrite, of both
  shrinkers and of the optimiser; the census the census-based shrinker keeps is the true count.
- Fixed point: after either shrinker and after the optimiser, `redexes` finds nothing.
- Termination: every shrinking rewrite lowers chapter 9's measure (B, W, U, C), computed here by a walk of
  its own.
- Each rule, on a small program, as text before and after.
- The seeds' program compiles to no allocation and no call.
- Tail calls: the million-call loops run in the CPS interpreter (whose stack is far smaller) and
  compiled, after the optimiser.
- Bounded growth: no program grows beyond GROWTH × size + SLACK, including programs made to tempt the
  inliner.
- Allocation: no program of the corpus, the examples or the benchmarks (at their small sizes) allocates
  more bytes optimised than at -O0, by the runtime's own count.
- Exceptions: a raise to a handler used once takes the handler's place, its passes-on raising at the
  raise's site; a `try` whose handler meets its exception, or whose block cannot raise, leaves no
  handler; a loop that raises out of a `try` is contified; an uncaught exception is reported at the same
  place optimised and not; random programs that raise and catch, as above.
- `lc show opt`, `lc show shrink`, `-O0`.
"""

import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from lcompiler import cps, driver, pipeline, shrink
from lcompiler.closure import closure_convert
from lcompiler.cps import Apply, LetCont, Lambda, MakeClosure, TupleValue, Inject, parse, show, walk
from lcompiler.errors import Source
from lcompiler.types import TCon

from test_convert import PROGRAMS, IDS, SLOW, expected_outcome, on_cps, programs, source
from test_native import expected as expected_native

ROOT = Path(__file__).resolve().parent.parent
LC = [str(Path(sys.executable).parent / "lc")]


def converted(src: Source) -> cps.Program:
    """The CPS the optimiser receives: monomorphised and converted, not yet optimised."""
    return pipeline.compile_to("cps", src, optimise=False)[0]


def checking(program):
    """An `after` hook that checks the whole program after each rewrite, and counts the rewrites."""
    seen = Counter()

    def after(rule, node):
        cps.check(program)
        seen[rule] += 1
    return after, seen


# --- Meaning -------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_the_optimiser_keeps_the_meaning_of_every_program(path):
    src = source(path)
    want = expected_outcome(path)
    program = converted(src)
    before = cps.size(program)
    shrink.optimise(program)
    cps.check(program)
    assert not shrink.redexes(program)
    assert cps.size(program) <= shrink.GROWTH * before + shrink.SLACK
    if path.stem not in SLOW:
        assert on_cps(program) == want
    closure_convert(program)
    shrink.shrink(program)
    cps.check(program, closed=True)
    assert not shrink.redexes(program)
    assert on_cps(program) == want


@pytest.mark.parametrize("path", PROGRAMS[1::3], ids=[p.stem for p in PROGRAMS[1::3]])
def test_compiled_without_the_optimiser_too(path):
    r = driver.run_source(source(path), timeout=60, optimiser=False)
    assert (r.stdout, r.stderr, r.status) == expected_native(path)


# The random programs are the same ones at every run (derandomize): a test run cannot fail by chance.
# tools/random_optimiser.py runs the same checks on as many other programs as one asks for.
RANDOM = settings(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


def means_the_same_after_every_single_rewrite(text: str) -> None:
    """Both shrinkers and the optimiser, then closure conversion and the shrinker, on the program
    text: `check` after every rewrite, no redex left, and the same output and error throughout."""
    src = Source("random.l", text)
    want = on_cps(converted(src))
    for run in (shrink.shrink_census, shrink.shrink, shrink.optimise):
        program = converted(src)
        after, seen = checking(program)
        run(program, after=after)
        assert not shrink.redexes(program), (run.__name__, dict(shrink.redexes(program)))
        assert on_cps(program) == want, run.__name__
    closure_convert(program)
    after, _ = checking(program)
    shrink.shrink(program, after=after)
    assert on_cps(program) == want


def compiled_the_same_with_and_without_the_optimiser(text: str) -> None:
    """The program text compiled with and without the optimiser: the same output, errors and status,
    and, when it runs to the end, no more bytes allocated optimised (the runtime's count)."""
    src = Source("random.l", text)
    saved = os.environ.get("LC_GC_STATS")
    os.environ["LC_GC_STATS"] = "1"            # read by the runtime in the child, at the end of the run
    try:
        with_ = driver.run_source(src, timeout=60)
        without = driver.run_source(src, timeout=60, optimiser=False)
    finally:
        if saved is None:
            del os.environ["LC_GC_STATS"]
        else:
            os.environ["LC_GC_STATS"] = saved
    counts = [re.findall(r"^gc: .* allocated [\d.]+ MB \((\d+) bytes\)", r.stderr, re.M) for r in (with_, without)]
    stderr = [re.sub(r"^gc: .*\n", "", r.stderr, flags=re.M) for r in (with_, without)]
    assert (with_.stdout, stderr[0], with_.status) == (without.stdout, stderr[1], without.status)
    if with_.status == 0:
        assert int(counts[0][0]) <= int(counts[1][0]), f"{counts[0][0]} bytes allocated optimised, {counts[1][0]} at -O0"


@pytest.mark.slow
@settings(RANDOM, max_examples=40)
@given(programs())
def test_random_programs_mean_the_same_after_every_single_rewrite(text):
    means_the_same_after_every_single_rewrite(text)


@pytest.mark.slow
@settings(RANDOM, max_examples=15)
@given(programs())
def test_random_programs_compiled_with_and_without_the_optimiser(text):
    compiled_the_same_with_and_without_the_optimiser(text)


@pytest.mark.slow
@settings(RANDOM, max_examples=40)
@given(programs(exceptions=True))
def test_random_programs_that_raise_and_catch_mean_the_same_after_every_single_rewrite(text):
    means_the_same_after_every_single_rewrite(text)


@pytest.mark.slow
@settings(RANDOM, max_examples=15)
@given(programs(exceptions=True))
def test_random_programs_that_raise_and_catch_compiled_with_and_without_the_optimiser(text):
    compiled_the_same_with_and_without_the_optimiser(text)


def test_an_alias_of_a_definition_that_becomes_static_late_is_reduced():
    """Found by the random programs (issue 23, "one flaky test"): d1 is read by f before it has run,
    so chapter 7 guards it with a `ready` cell; the optimiser makes the cell static before anything
    can call f, and only then can d1 become static, after d2 = d1 was looked at. Nothing looked at
    d2 again, and the optimiser stopped with a `static_definition` redex left."""
    text = "def f(x) = d1\ndef d1 = ()\ndef d2 = d1\nprint(d1, d2, f(0))\n"
    means_the_same_after_every_single_rewrite(text)
    program = converted(Source("alias.l", text))
    shrink.optimise(program)
    assert [d.var.hint for d in program.definitions if d.var is not None] == ["d1"]
    assert on_cps(program) == ("() () ()\n", None)


def test_a_cell_a_closure_writes_through_its_environment_is_not_forwarded():
    """Found by the exception corpus (vars_seen_by_handlers, issue 25): after closure conversion the
    closure writes `last`'s cell as `env.1[0] := n`, and the cell's own variable is never the target of a
    write; the shrinker took the cell for a constant tuple and forwarded its first value, -1, to the
    read after the loop. Run compiled at every level, as the interpreter runs it."""
    text = ("def deep(n, log) = if (n == 0) 0 else { log(n); deep(n - 1, log) }\n"
            "def main() = { var last := -1; deep(5, { n -> last := n }); last }\n"
            "print(main())\n")
    source = Source("cell.l", text)
    assert driver.run_source(source).stdout == "1\n"
    assert driver.run_source(source, optimiser=False).stdout == "1\n"
    program, _ = pipeline.compile_to("shrink", source)
    assert on_cps(program) == ("1\n", None)


def test_the_census_is_the_true_count():
    """The census-based shrinker keeps its own table of counts as it rewrites: at the end of every
    sweep the table must agree with a fresh count."""
    class Checked(shrink.Census):
        def tidy(self):
            super().tidy()
            fresh = Counter(o.var for o in cps.all_occurrences(self.program))
            assert all(self.census[v] == n for v, n in fresh.items())
            assert all(n == 0 for v, n in self.census.items() if v not in fresh)
    for path in PROGRAMS[::4]:
        Checked(converted(source(path))).run()


def test_both_shrinkers_reach_a_fixed_point_of_the_same_size():
    for path in PROGRAMS[::2]:
        a, b = converted(source(path)), converted(source(path))
        shrink.shrink(a)
        shrink.shrink_census(b)
        assert not shrink.redexes(a) and not shrink.redexes(b)
        assert cps.size(a) == cps.size(b), path.name


# --- Termination: the measure every shrinking rule lowers ---------------------------------------------

def tuple_constructors(t) -> int:
    """The tuple constructors `*` in a type: (Int, (Int, Int)) has two."""
    return isinstance(t, TCon) and ((t.name == "*") + sum(tuple_constructors(a) for a in t.args))


def measure(program: cps.Program) -> tuple[int, int, int, int]:
    """Chapter 9's termination measure (B, W, U, C), computed by a walk of its own: B, the tuple
    constructors in the types of continuation parameters; W, the nodes plus the occurrences held by
    primitives and cases plus the continuations' parameters plus the definitions' names; U, the `fail`s
    not followed by the jump of their result to their function's return (a `halt` at top level);
    C, the calls through closures."""
    b = w = u = c = 0
    for n in walk(program):
        w += 1
        if type(n) is LetCont:
            w += len(n.params)
            b += sum(tuple_constructors(x.type) for x in n.params)
        elif type(n) is cps.Definition and n.var is not None:
            w += 1
        elif type(n) is Apply and n.kind == "closure":
            c += 1
        if isinstance(n, cps.Prim) or type(n) is cps.Case:
            w += sum(1 for _ in n.occs())
        if type(n) is cps.LetPrim and type(n.prim) is cps.Fail:
            rest, home = n.body, n.enclosing
            while type(home) not in (Lambda, cps.Definition):
                home = home.enclosing
            u += not (type(rest) is cps.ApplyCont and type(home) is Lambda and rest.cont.var is home.cont
                      and rest.args[0].var is n.var
                      or type(rest) is cps.Halt and type(home) is not Lambda and rest.arg.var is n.var)
    return b, w, u, c


SHRINKING = {rule.__name__ for rules in shrink.Shrinker.RULES.values() for rule in rules}


def lowers_the_measure(program: cps.Program, run, seen: Counter) -> None:
    """Run a shrinker or the optimiser on program; after every shrinking rewrite, the measure must be
    lower than before it. The optimiser's own steps (early writes, contification, inlining) may raise
    it: the reference is taken again before each of its shrinking phases."""
    state = [measure(program)]

    def after(rule, node):
        now = measure(program)
        if rule in SHRINKING:
            assert now < state[0], (rule, state[0], now)
            seen[rule] += 1
        state[0] = now

    class Measured(shrink.Optimiser):
        def early_writes(self):
            n = super().early_writes()
            state[0] = measure(self.program)
            return n

        def drain(self):
            state[0] = measure(self.program)
            return super().drain()

    if run is shrink.optimise:
        Measured(program, after=after).run()
    else:
        run(program, after=after)


def test_every_shrinking_rewrite_lowers_the_measure():
    seen = Counter()
    sources = [source(p) for p in PROGRAMS + sorted((ROOT / "tests" / "corpus" / "exceptions").glob("*.l"))
               + sorted((ROOT / "bench" / "programs").glob("*.l"))]
    sources += [Source(f"{name}.l", text) for name, (text, *_) in EXCEPTIONS.items()]
    for src in sources:
        for run in (shrink.shrink, shrink.shrink_census, shrink.optimise):
            program = converted(src)
            lowers_the_measure(program, run, seen)
            closure_convert(program)
            lowers_the_measure(program, shrink.shrink, seen)
    assert SHRINKING <= set(seen), SHRINKING - set(seen)      # every rule was met, and checked


def test_a_raise_to_a_handler_used_once_lowers_the_measure():
    program = parse(RAISE_ONCE)
    before = measure(program)
    handler = next(n for n in walk(program) if type(n) is LetCont and n.cont.hint == "handler")
    assert shrink.Shrinker(program).inline_continuation_once(handler, True)
    assert measure(program) < before


def test_the_census_needs_a_sweep_per_link_of_a_dead_chain_and_the_work_list_one():
    def chain(n):
        s = cps.Seq()
        x = first = s.let(cps.const(0), "x")
        for _ in range(n):
            x = s.let(cps.tuple_(x), "x")
        p = cps.Program()
        p.define(s.end(cps.halt(first)), "unused")
        return p
    census = shrink.shrink_census(chain(50))
    assert census["passes"] == 51 and census["dead_value"] == 50
    program = chain(50)
    counting = shrink.Kennedy(program)
    visits = []
    counting.visit = lambda node, do=True, v=counting.visit: visits.append(node) or v(node, do)
    assert counting.run()["dead_value"] == 50
    assert len(visits) <= 3 * 52                      # each binding looked at a bounded number of times
    assert cps.size(program) == 5                     # the program, its definition, x0 = 0, halt x0


# --- Each rule -----------------------------------------------------------------------------------

RULES = {
    "dead_value": ("""
unused = do {
  one_1 = 1
  two_2 = tuple(one_1, one_1)
  halt one_1
}
""", """
unused = do {
  one_1 = 1
  halt one_1
}
"""),
    "fold": ("""
unused = do {
  a_1 = 9223372036854775807
  b_2 = 1
  c_3 = a_1 + b_2
  halt c_3
}
""", """
unused = do {
  a_1 = 9223372036854775807
  b_2 = 1
  c_3 = -9223372036854775808
  halt c_3
}
"""),
    "project": ("""
unused = do {
  a_1 = 1
  t_2 = tuple(a_1, a_1)
  x_3 = t_2[1]
  halt x_3
}
""", """
unused = do {
  a_1 = 1
  t_2 = tuple(a_1, a_1)
  halt a_1
}
"""),
    "inline_function_once": ("""
unused = do {
  f_1 = fun ret_2 exn_3 (x_4) {
    ret_2(x_4)
  }
  c_5 = 4
  cont k_6(r_7) {
    halt r_7
  }
  call f_1(c_5) -> k_6 / uncaught
}
""", """
unused = do {
  c_1 = 4
  cont k_2(r_3) {
    halt r_3
  }
  k_2(c_1)
}
"""),
    "inline_continuation_once": ("""
unused = do {
  cont k_1(x_2) {
    halt x_2
  }
  c_3 = 3
  k_1(c_3)
}
""", """
unused = do {
  c_1 = 3
  halt c_1
}
"""),
    "dead_continuation": ("""
unused = do {
  c_1 = 1
  cont loop_2(i_3) {
    loop_2(i_3)
  }
  halt c_1
}
""", """
unused = do {
  c_1 = 1
  halt c_1
}
"""),
    "eta": ("""
private f_1 = fun ret_2 exn_3 (x_4) {
  cont k_5(r_6) {
    ret_2(r_6)
  }
  call f_1(x_4) -> k_5 / exn_3
}
""", """
private f_1 = fun ret_2 exn_3 (x_4) {
  call f_1(x_4) -> ret_2 / exn_3
}
"""),
    "known_case": ("""
unused = do {
  t_1 = false
  cont a_2() {
    halt t_1
  }
  cont b_3() {
    halt t_1
  }
  case t_1 { 0 -> a_2; 1 -> b_3 }
}
""", """
unused = do {
  t_1 = false
  cont a_2() {
    halt t_1
  }
  cont b_3() {
    halt t_1
  }
  a_2()
}
"""),
    "unreachable": ("""
private f_1 = fun ret_2 exn_3 (x_4) {
  cont k_5(r_6) {
    ret_2(r_6)
  }
  u_7 = fail "stop"
  k_5(u_7)
}
""", """
private f_1 = fun ret_2 exn_3 (x_4) {
  cont k_5(r_6) {
    ret_2(r_6)
  }
  u_7 = fail "stop"
  ret_2(u_7)
}
"""),
    "known_call": ("""
private code_1 = fun ret_2 exn_3 (env_4, x_5) {
  ret_2(x_5)
}
unused = do {
  c_6 = closure(code_1)
  cont k_7(r_8) {
    halt r_8
  }
  call c_6(c_6) -> k_7 / uncaught
}
""", """
private code_1 = fun ret_2 exn_3 (env_4, x_5) {
  ret_2(x_5)
}
unused = do {
  c_6 = closure(code_1)
  cont k_7(r_8) {
    halt r_8
  }
  call direct code_1(c_6, c_6) -> k_7 / uncaught
}
"""),
    "dead_parameter": ("""
private f_1 = fun ret_2 exn_3 (b_4) {
  c_5 = 1
  cont j_6(x_7, y_8) {
    s_9 = x_7 + x_7
    ret_2(s_9)
  }
  cont t_10() {
    j_6(c_5, c_5)
  }
  cont e_11() {
    j_6(c_5, b_4)
  }
  case b_4 { 0 -> e_11; 1 -> t_10 }
}
""", """
private f_1 = fun ret_2 exn_3 (b_4) {
  c_5 = 1
  cont j_6(x_7) {
    s_8 = x_7 + x_7
    ret_2(s_8)
  }
  cont t_9() {
    j_6(c_5)
  }
  cont e_10() {
    j_6(c_5)
  }
  case b_4 { 0 -> e_10; 1 -> t_9 }
}
"""),
    "unbox": ("""
private f_1 = fun ret_2 exn_3 (b_4) {
  c_5 = 1
  t_6 = tuple(c_5, b_4)
  cont j_7(p_8) {
    a_9 = p_8[0]
    cont bad_10() {
      u_11 = fail "no clause matches the value" p_8 / exn_3
      ret_2(u_11)
    }
    cont good_12() {
      ret_2(a_9)
    }
    case a_9 { 1 -> good_12; _ -> bad_10 }
  }
  cont x_13() {
    j_7(t_6)
  }
  cont y_14() {
    j_7(t_6)
  }
  case b_4 { 0 -> x_13; 1 -> y_14 }
}
""", """
private f_1 = fun ret_2 exn_3 (b_4) {
  c_5 = 1
  t_6 = tuple(c_5, b_4)
  cont j_7(p0_8, p1_9) {
    cont bad_10() {
      p_11 = tuple(p0_8, p1_9)
      u_12 = fail "no clause matches the value" p_11 / exn_3
      ret_2(u_12)
    }
    cont good_13() {
      ret_2(p0_8)
    }
    case p0_8 { 1 -> good_13; _ -> bad_10 }
  }
  cont x_14() {
    j_7(c_5, b_4)
  }
  cont y_15() {
    j_7(c_5, b_4)
  }
  case b_4 { 0 -> x_14; 1 -> y_15 }
}
"""),
    "static_definition": ("""
private g_1 = do {
  c_2 = 5
  halt c_2
}
unused = do {
  halt g_1
}
""", """
private g_1 = 5
unused = do {
  halt g_1
}
"""),
    "dead_definition": ("""
private g_1 = fun ret_2 exn_3 (x_4) {
  call g_1(x_4) -> ret_2 / exn_3
}
unused = do {
  c_5 = 1
  halt c_5
}
""", """
unused = do {
  c_1 = 1
  halt c_1
}
"""),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_rewrites_as_its_table_says(rule):
    before, after = RULES[rule]
    program = parse(before)
    s = shrink.Shrinker(program)
    node = next(n for d in program.definitions for n in walk(d) if s.visit(n, do=False) == rule)
    getattr(shrink.Shrinker, rule)(s, node, True)
    s.tidy()
    cps.check(program)
    assert show(program) == after.lstrip()


# --- Promises ------------------------------------------------------------------------------------

SEEDS = source(ROOT / "examples" / "seeds.l")


def test_the_seeds_program_compiles_to_no_allocation_and_no_call():
    program = pipeline.compile_to("shrink", SEEDS)[0]
    assert show(program) == "unused = do {\n  u_1 = ()\n  halt u_1\n}\n"
    kinds = {type(n) for n in walk(program)}
    assert not kinds & {Apply, Lambda, MakeClosure, TupleValue, Inject}
    statement = llvm_function(str(pipeline.compile_to("llvm", SEEDS)[0]), "init.statement")
    assert "lc_alloc" not in statement and not re.search(r"\bcall\b", statement)


def llvm_function(module: str, name: str) -> str:
    """The definition of the LLVM function whose name starts with name."""
    return re.search(r'^define[^\n]*@"?' + re.escape(name) + r'.*?^}$', module, re.M | re.S).group(0)


@pytest.mark.slow
def test_tail_calls_stay_tail_calls():
    for name in sorted(SLOW):
        path = ROOT / "tests" / "corpus" / "run" / f"{name}.l"
        program = converted(source(path))
        shrink.optimise(program)
        assert on_cps(program) == (path.with_suffix(".out").read_text(), None)   # a 100,000-deep stack


def tempting(depth: int, calls: int) -> str:
    """Small functions, each calling the one before several times: copied naively, 3^depth big."""
    lines = ["def f0(x) = x + 1"]
    for i in range(1, depth + 1):
        lines.append(f"def f{i}(x) = " + " + ".join(f"f{i - 1}(x + {j})" for j in range(calls)))
    lines.append(f"print(f{depth}(1))")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("depth, calls", [(6, 3), (10, 2), (4, 8)])
def test_the_inliner_stays_within_its_bound(depth, calls):
    src = Source("tempting.l", tempting(depth, calls))
    program = converted(src)
    before = cps.size(program)
    shrink.optimise(program)
    assert cps.size(program) <= shrink.GROWTH * before + shrink.SLACK
    assert on_cps(program) == on_cps(converted(src))


FIB = "def fib(n) = if (n < 2) n else fib(n - 1) + fib(n - 2)\nprint(fib(15))\n"


def fib_calls(program) -> list:
    fib = next(d for d in program.definitions if d.var is not None and d.var.hint == "fib")
    return [n for n in walk(fib) if type(n) is Apply]


@pytest.mark.parametrize("rounds, calls", [(0, 2), (1, 3), (2, 7), (3, 43)])
def test_recursion_is_unrolled_round_by_round_but_not_where_its_result_is_returned(rounds, calls):
    program = converted(Source("fib.l", FIB))
    shrink.optimise(program, unroll=rounds)
    found = fib_calls(program)
    assert len(found) == calls         # no rounds: fib's own two calls; one round: fib(n - 1) has a copy
    returned = [a for a in found if shrink.returns_soon(a, a.func.var.binder.value)]
    assert len(returned) == 1          # fib's own fib(n - 2), whose result fib returns, was never copied into
    assert on_cps(program) == ("610\n", None)


ACK = ("def ack(m, n) = if (m == 0) n + 1 else if (n == 0) ack(m - 1, 1) else ack(m - 1, ack(m, n - 1))\n"
       "print(ack(2, 3))\n")


@pytest.mark.parametrize("rounds", [0, 1, 2, 3])
def test_tail_calls_become_a_loop_before_the_body_is_copied(rounds):
    program = converted(Source("ack.l", ACK))
    stats = shrink.optimise(program, unroll=rounds)
    ack = next(d for d in program.definitions if d.var is not None and d.var.hint == "ack")
    calls = [n for n in walk(ack) if type(n) is Apply]
    loops = [n for n in walk(ack) if type(n) is LetCont and n.cont.hint == "ack"]
    if rounds == 0:                    # no unrolling, no loop: ack's three calls
        assert stats["loopify"] == 0 and len(calls) == 3 and not loops
    else:                              # a loop per copy (2, 4, 8 of them), and one call, in the deepest
        assert stats["loopify"] == 1 and len(calls) == 1 and len(loops) == 2 ** rounds
    assert on_cps(program) == ("9\n", None)


def test_only_a_small_recursive_function_is_unrolled():
    body = " + ".join(f"f(n - {i})" for i in range(1, 9))      # eight calls: over UNROLL_BUDGET
    src = Source("big.l", f"def f(n) = if (n < 2) n else {body}\nprint(f(9))\n")
    program = pipeline.compile_to("opt", src)[0]
    f = next(d for d in program.definitions if d.var is not None and d.var.hint == "f")
    assert cps.size(f.value.body) > shrink.UNROLL_BUDGET
    assert sum(type(n) is Apply for n in walk(f)) == 8
    assert on_cps(program) == on_cps(converted(src))


CPSTAK = """def tak(x, y, z, k) =
  if (!(y < x)) k(z)
  else tak(x - 1, y, z, { v1 -> tak(y - 1, z, x, { v2 -> tak(z - 1, x, y, { v3 -> tak(v1, v2, v3, k) }) }) })
print(tak(12, 8, 4, { a -> a }))
"""


@pytest.mark.parametrize("rule", [True, False])
def test_a_recursive_function_that_makes_closures_is_not_unrolled(rule, monkeypatch):
    src = Source("cpstak.l", CPSTAK)
    if not rule:                                   # the rule switched off: tak is unrolled
        monkeypatch.setattr(shrink, "makes_closures", lambda body: False)
    program = pipeline.compile_to("opt", src)[0]
    lambdas = sum(type(n) is Lambda for d in program.definitions for n in walk(d))
    if rule:
        assert lambdas == 1 + 3 + 1               # tak, its three continuations, the first one
    else:
        assert lambdas > 5 * 5
    assert on_cps(program) == on_cps(converted(src)) == ("5\n", None)


@pytest.mark.parametrize("rule", [True, False])
def test_a_deep_recursion_is_not_copied_into_a_function_that_recurses_too(rule, monkeypatch):
    """primes' filter calls itself other than in tail position, and so does sieve, which calls it: no
    copy of filter goes into sieve (with the rule switched off, three levels of it do). Into the
    program's statement, which runs once, it is still copied (with sieve)."""
    src = small(ROOT / "bench" / "programs" / "primes.l", 300)
    if not rule:
        monkeypatch.setattr(shrink.Optimiser, "keeps_frames_at", lambda self, a: False)
    program = pipeline.compile_to("opt", src)[0]
    sieve = next(d for d in program.definitions if d.var is not None and d.var.hint == "sieve")
    copies = [n for n in walk(sieve) if type(n) is LetCont and n.cont.hint == "filter"]
    assert len(copies) == (0 if rule else 3)
    statement = program.definitions[-1]
    assert any(type(n) is LetCont and n.cont.hint == "filter" for n in walk(statement)) == rule
    assert on_cps(program) == on_cps(converted(src)) == ("62 8275\n", None)


def test_a_deep_recursion_called_once_is_still_copied_and_folded():
    src = Source("length.l", "data List<t> { Cons(t, List<t>); Nil }\n"
                             "def length = { Cons(_, t) -> 1 + length(t); Nil -> 0 }\n"
                             "print(Cons(1, Cons(2, Nil)).length)\n")
    program = pipeline.compile_to("opt", src)[0]
    assert show(program) == "unused = do {\n  v_1 = 2\n  u_2 = print(v_1)\n  halt u_2\n}\n"


def test_a_loop_becomes_a_continuation_and_a_loop_in_llvm():
    src = Source("loop.l", "def sum_to(i, acc) = if (i == 0) acc else sum_to(i - 1, acc + i)\n"
                           "print(sum_to(100, 0))\n")
    program = pipeline.compile_to("opt", src)[0]
    assert [d.var is None for d in program.definitions] == [True]     # no function left
    loops = [n for n in walk(program) if type(n) is cps.LetCont and n.cont.hint == "sum_to"]
    assert len(loops) == 1 and len(loops[0].params) == 2              # contified, unboxed
    statement = llvm_function(str(pipeline.compile_to("llvm", src)[0]), "init.statement")
    called = re.findall(r'\bcall \w+ @"?([\w.]+)', statement)
    assert called and all(f.startswith(("print", "lc_print")) for f in called), statement   # only printing
    assert re.search(r'^sum_to[^:]*:.*br label %"sum_to', statement, re.M | re.S), statement     # a loop


def test_lc_show_opt_and_O0(tmp_path):
    shown = subprocess.run(LC + ["show", "opt", str(ROOT / "examples" / "seeds.l")], capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout == "unused = do {\n  u_1 = ()\n  halt u_1\n}\n"
    plain = subprocess.run(LC + ["show", "-O0", "opt", str(ROOT / "examples" / "seeds.l")],
                           capture_output=True, text=True)
    assert plain.stdout == pipeline.show("cps", SEEDS) + "\n"
    for argv in (["run", "-O0"], ["run"]):
        done = subprocess.run(LC + argv + [str(ROOT / "examples" / "primes.l")], capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout == expected_native(ROOT / "examples" / "primes.l")[0]
    helped = subprocess.run(LC + ["show", "--help"], capture_output=True, text=True).stdout
    assert ", ".join(pipeline.names()) in " ".join(helped.split())


# --- Allocation ----------------------------------------------------------------------------------

def bench_sizes() -> dict:
    """bench/run.py's SIZES: benchmark name -> (full size, small size)."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SIZES


def small(path: Path, size: int) -> Source:
    """A benchmark with its first line (`def n = …`) set to size."""
    first, rest = path.read_text().split("\n", 1)
    assert first.startswith("def n = "), path
    return Source(path.name, f"def n = {size}\n{rest}")


# Two more, for the rule `unbox`: a loop's tuple passed whole to a call, which a tuple rebuilt there
# serves at no cost (chapter 10 passes it in registers); and one stored whole, twice a turn, where
# rebuilding it would allocate twice where the jump allocates once.
TUPLES = {
    "whole_in_a_call": """\
def mix(p) = p.{ (a, b) -> (a * 3 + b) % 7 + (a * 5 + b) % 11 + (a * 7 + b) % 13 + (a + b * 3) % 19 + (a + b * 5) % 23 }
def loop(p) = p.{
  (0, acc) -> acc
  (i, acc) -> loop((i - 1, acc + mix(p)))
}
print(loop((1000, 0)), mix((1, 2)))
""",
    "whole_in_a_list": """\
data List<t> { Cons(t, List<t>); Nil }
def loop(p, acc) = p.{ (0, _) -> acc; (i, n) -> loop((i - 1, n), Cons(p, Cons(p, acc))) }
def length(l, k) = l.{ Cons(_, r) -> length(r, k + 1); Nil -> k }
print(length(loop((1000, 7), Nil), 0))
""",
}

ALLOCATING = [(p.parent.name + "/" + p.stem, source(p)) for p in
              sorted((ROOT / "tests" / "corpus" / "run").glob("*.l")) + sorted((ROOT / "examples").glob("*.l"))] \
    + [("bench/" + name, small(ROOT / "bench" / "programs" / f"{name}.l", sizes[1]))
       for name, sizes in sorted(bench_sizes().items())] \
    + [("tuples/" + name, Source(f"{name}.l", text)) for name, text in TUPLES.items()]


def allocated(src: Source, optimiser: bool) -> tuple[str, int]:
    """What the program prints, and the bytes it allocates (the runtime's count, LC_GC_STATS=1)."""
    r = driver.run_source(src, timeout=120, optimiser=optimiser)
    assert r.status == 0, r.stderr
    return r.stdout, int(re.search(r"^gc: .* allocated [\d.]+ MB \((\d+) bytes\)", r.stderr, re.M).group(1))


@pytest.mark.slow
@pytest.mark.parametrize("src", [s for _, s in ALLOCATING], ids=[name for name, _ in ALLOCATING])
def test_the_optimised_program_allocates_no_more_than_at_O0(src, monkeypatch):
    monkeypatch.setenv("LC_GC_STATS", "1")             # read by the runtime in the child, at the end of the run
    printed, plain = allocated(src, optimiser=False)
    optimised_printed, optimised = allocated(src, optimiser=True)
    assert optimised_printed == printed
    assert optimised <= plain, f"{optimised} bytes allocated optimised, {plain} at -O0"


# --- Exceptions ----------------------------------------------------------------------------------

RAISE_ONCE = """
unused = do {
  cont handler_1(e_2) {
    cont next_3() {
      uncaught(e_2)
    }
    tag_4 = tag e_2
    cont Done_5() {
      k_6 = e_2[0]
      u_7 = print(k_6)
      halt u_7
    }
    case tag_4 { 3 -> Done_5; _ -> next_3 }
  }
  seven_8 = 7
  done_9 = inj 3 Done(seven_8)
  handler_1(done_9) raise @2:3
}
"""


def test_a_raise_to_a_handler_used_once_moves_it_there_and_its_pass_on_raises_at_the_same_site():
    program = parse(RAISE_ONCE)
    s = shrink.Shrinker(program)
    node = next(n for n in walk(program) if type(n) is LetCont and n.cont.hint == "handler")
    assert s.inline_continuation_once(node, True)
    s.tidy()
    cps.check(program)
    assert show(program) == """unused = do {
  seven_1 = 7
  done_2 = inj 3 Done(seven_1)
  cont next_3() {
    uncaught(done_2) raise @2:3
  }
  tag_4 = tag done_2
  cont Done_5() {
    k_6 = done_2[0]
    u_7 = print(k_6)
    halt u_7
  }
  case tag_4 { 3 -> Done_5; _ -> next_3 }
}
"""
    shrink.shrink(program)
    assert show(program) == """unused = do {
  seven_1 = 7
  u_2 = print(seven_1)
  halt u_2
}
"""


def test_a_handler_whose_exception_is_also_passed_to_a_join_point_still_moves():
    """The exception returned as a value (`catch { e -> e }`) is not a pass-on: the jump stays a jump."""
    program = parse(RAISE_ONCE.replace("cont next_3() {\n      uncaught(e_2)", "cont next_3() {\n      k_0(e_2)")
                    .replace("unused = do {\n", "unused = do {\n  cont k_0(v_0) {\n    halt v_0\n  }\n", 1))
    s = shrink.Shrinker(program)
    node = next(n for n in walk(program) if type(n) is LetCont and n.cont.hint == "handler")
    assert s.inline_continuation_once(node, True)
    s.tidy()
    cps.check(program)
    assert "raise" not in show(program)


EXCEPTIONS = {   # name: (program, (handlers, raises, calls) after the optimiser, stdout, stderr)
    "search": ("""exception Done(Int)
def search(n) = {
  var i := 0
  try { while (true) { if (i * i > n) raise(Done(i)); i := i + 1 }; 0 } catch { Done(k) -> k }
}
print(search(1000))
""", (0, 0, 0), "32\n", ""),
    "cannot_raise": ("""exception Found(Int)
def half(x) = try { x / 2 } catch { DivisionByZero -> 0 }
print(half(9), half(10))
""", (0, 0, 0), "4 5\n", ""),
    "inlined": ("""exception Negative(Int)
def check(x) = if (x < 0) raise(Negative(x)) else x
def safe(x) = try { check(x) * 2 } catch { Negative(n) -> n }
print(safe(4), safe(-4))
""", (0, 0, 0), "8 -4\n", ""),
    "uncaught": ("""exception A(Int)
exception B
def f(n) = try { try { if (n > 0) raise(A(n)) else 0 } catch { B -> 1 } } catch { B -> 2 }
print(f(0))
print(f(3))
""", (0, 1, 0), "0\n", "t.l:3:35: runtime error: uncaught exception A(3)"),
}


def exception_census(program) -> tuple:
    nodes = list(walk(program))
    return (sum(type(n) is LetCont and len(n.params) == 1 and shrink.exceptional(n.cont) for n in nodes),
            sum(type(n) is cps.ApplyCont and n.raises for n in nodes), sum(type(n) is Apply for n in nodes))


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_the_optimiser_leaves_no_handler_that_meets_its_exception_or_that_nothing_raises_to(name, tmp_path):
    text, census, stdout, stderr = EXCEPTIONS[name]
    src = Source("t.l", text)
    assert exception_census(converted(src))[:2] != (0, 0)          # the -O0 program has its handlers
    assert exception_census(pipeline.compile_to("opt", src)[0]) == census
    path = tmp_path / "t.l"
    path.write_text(text)
    for options in ([], ["-O0"], ["--interp"]):
        r = subprocess.run(LC + ["run", *options, "t.l"], cwd=tmp_path, capture_output=True, text=True)
        assert r.stdout == stdout and r.stderr.startswith(stderr) and r.returncode == (2 if stderr else 0), options
        assert stderr or not r.stderr


def test_a_loop_that_raises_out_of_a_try_is_contified_and_raises_to_the_handler():
    src = Source("first.l", """exception Found(Int)
def find(p, i, n) = if (i == n) raise(Found(-1)) else if (p(i)) raise(Found(i)) else find(p, i + 1, n)
def first_square_above(k) = try { find({ x -> x * x > k }, 0, 1000000) } catch { Found(x) -> x }
print(first_square_above(1000))
print(first_square_above(5000))
""")
    program = pipeline.compile_to("opt", src)[0]
    assert not any(d.var is not None and d.var.hint == "find" for d in program.definitions)
    loops = [n for n in walk(program) if type(n) is LetCont and n.cont.hint == "find"]
    assert len(loops) == 1
    raises = [n for n in walk(loops[0].handler) if type(n) is cps.ApplyCont and n.raises]
    assert len(raises) == 2 and all(type(r.cont.var.binder) is LetCont for r in raises)
    assert all(type(a.exn.var.binder) is LetCont for a in walk(program) if type(a) is Apply
               and shrink.home(a) is shrink.home(loops[0]))                    # the closure call too
    assert on_cps(program) == on_cps(converted(src))
