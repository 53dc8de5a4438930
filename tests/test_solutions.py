"""The worked solutions of the chapters' exercises whose answer is code: each is run here, so that
it cannot rot.

Chapter 6, exercise 1: `inline_once` inlines a continuation jumped to once, and refuses, saying
why, a case arm, a call's continuation, an operation's exception continuation, a raise and a loop;
on random programs, inlining every continuation it can keeps `check` and the meaning.

Chapter 6, exercise 4: `check_all` reports the three violations of `BROKEN`, the first of them
the one `check` stops at, and nothing where `check` passes.

Chapter 7, exercise 2: a join point carries a `var` that only the condition of its `if` (or the
scrutinee of its `match`) assigned; the precise pre-pass records the names the branches assign.
Judged on random programs against the reference interpreter, and on the size of the output.

Chapter 4, exercise 1: a stage `lines` after `tokens`, one line on the page and one registration; it
shows how many lines the program has, hands the tokens on unchanged, and the program still runs;
registered without its line on the page, it is refused at once.

Chapter 4b, exercise 4: closures that keep only the variables their body uses (`captures`); the
environments of `tick_read` hold `count` alone, and a closure no longer keeps alive, in Python's
memory, a list in scope that its body never reads.

Chapter 4b, exercise 7: a primitive `min`, added as a row of the table and a lowering, through
the interpreter and the rest of the pipeline to native code (the tables put back afterwards).

Chapter 10, exercise 4: Cooper, Harvey and Kennedy's dominators of a `FlowGraph`, judged against
dominance computed from its definition (d dominates b when b cannot be reached from the entry
without d), then used to check that every use of an SSA value is dominated by its definition, in
the worked example's functions before and after O2.

Chapter 10, exercise 5: `!tbaa` tags on the back end's loads and stores (field, cell, header) in
the program `ALIAS`: O2 then removes the second load of `P`'s field, across the store into the
cell, and keeps the first, across the closure's allocation and stores.

Chapter 10, exercise 6: the kinds that the back end gives the functions of the exercise's program
(`split`): `twice`, `ping`, `pong` and `wrap` tailcc, `down` fastcc with a loop.

Chapter 8, exercises 1 to 3: known closures called directly (none in `examples/closures.l`, both
calls of the exercise's example at -O0), the words of flat and linked closures (the seeds' program,
a function nested five deep), and the closures of the corpus that could live on the stack (three at
-O0, none optimised) — the counts the chapter prints.

Appendix C, exercises 1 and 2: `lc check`, registered for the test, prints nothing for a well-typed
program and the golden messages, status 1, for the others; `lc show` of several stages refuses every
unknown name at once, and compiling once prints what each stage's own `show` prints.

Chapter 11, exercise 5: of the 1,250-line program of bench/compile_speed.py split in two, the names
one part declares of the other are the global slots `lc_globals` and one function, a `prev…`, both
defined in part 1.
"""

import gc
import io
import re
import tracemalloc
from pathlib import Path

import llvmlite.ir as ir
import pytest
from hypothesis import given, settings, strategies as st

from lcompiler import core as c, cps, cps_convert, driver, llvm_backend, pipeline, types
from lcompiler.interp import Interpreter, check
from lcompiler.primitives import PRIMITIVES, Primitive
from lcompiler.closure import closure_convert
from lcompiler.cps import Apply, Lambda, LetPrim, MakeClosure, Proj, apply, occurrences, replace, walk
from lcompiler.cps_convert import Analysis, Converter, _children
from lcompiler.errors import Source
from lcompiler.llvm_backend import FlowGraph, optimise, to_llvm

from test_convert import on_cps, programs, reference
from test_cps import interpret as cps_interpret, programs as cps_programs, terms as cps_terms


# --- chapter 4, exercise 1

def test_a_stage_lines_after_tokens(monkeypatch):
    pipeline.load()                                   # every stage's module imported, its stage registered
    monkeypatch.setattr(pipeline, "STAGES", dict(pipeline.STAGES))      # the registry put back afterwards
    with pytest.raises(ValueError, match=r"^'lines' is not a stage of the pipeline; the stages are tokens, ast, "):
        pipeline.stage("lines")
    at = pipeline.names().index("tokens") + 1
    monkeypatch.setattr(pipeline, "PIPELINE", pipeline.PIPELINE[:at] + [("lines", "syntax", "4a", "the tokens, counted")]
                        + pipeline.PIPELINE[at:])

    @pipeline.stage("lines", show=lambda tokens, unit: f"{unit.source.text.count(chr(10))} lines")
    def lines_stage(tokens, unit):
        return tokens

    source = Source("three.l", "def double(x) = 2 * x\nprint(double(21))\nprint(1)\n")
    assert pipeline.names()[:3] == ["tokens", "lines", "ast"]
    assert pipeline.show("lines", source) == "3 lines"
    out = io.StringIO()
    for stage, value, unit in pipeline.stages_of(source, upto="shrink", checked=True):
        if stage.name == "shrink":
            stage.interpret(value, unit, out)
    assert out.getvalue() == "42\n1\n"


# --- chapter 4b, exercise 4

class Capturing(Interpreter):
    """The reference interpreter, but a closure's environment holds only its captures."""

    def function(self, e):
        make = super().function(e)

        def capturing(env):
            closure = make(env)
            closure.env = {name: closure.env[name] for name in closure.captures}
            return closure
        return capturing


TICK_READ = """def counter(start) = {
  var count := start
  ({ by -> count := count + by }, { () -> count })
}
def tick_read = counter(0)
tick_read.{ (tick, _) -> { tick(2); tick(3) } }
print(tick_read.{ (_, read) -> read() })
"""

KEEPER = """data List<a> { Cons(a, List<a>); Nil }
def build(n, acc) = if (n == 0) acc else build(n - 1, Cons(n, acc))
def keeper(n) = { let big = build(n, Nil); { x -> x + 1 } }
def f = keeper(100000)
print(f(1))
"""


def held_after(interpreter_class, text: str):
    """Run text; the interpreter, its output, and the bytes Python still holds once it has run."""
    gc.collect()
    tracemalloc.start()
    try:
        interpreter = interpreter_class(io.StringIO())
        interpreter.run(check(Source("x.l", text)))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return interpreter, interpreter.out.getvalue(), held


def test_closures_that_keep_only_their_captures():
    before, after = Interpreter(io.StringIO()), Capturing(io.StringIO())
    for interpreter in (before, after):
        interpreter.run(check(Source("tick.l", TICK_READ)))
    assert before.out.getvalue() == after.out.getvalue() == "5\n"
    assert [sorted(f.env) for f in before.globals["tick_read"]] == [["count", "start"]] * 2
    assert [sorted(f.env) for f in after.globals["tick_read"]] == [["count"]] * 2
    keeping, printed, held = held_after(Interpreter, KEEPER)
    capturing, printed_too, held_too = held_after(Capturing, KEEPER)
    assert printed == printed_too == "2\n"
    assert sorted(keeping.globals["f"].env) == ["big", "n"] and capturing.globals["f"].env == {}
    assert held - held_too > 100000 * 50          # the list of 100,000 Cons, kept before and not after


# --- chapter 4b, exercise 7

def test_a_primitive_min_through_every_stage(monkeypatch):
    monkeypatch.setitem(PRIMITIVES, "min", Primitive("min", None, ("Int", "Int", "Int"), min))
    monkeypatch.setitem(llvm_backend.LOWERING, "min",
                        lambda backend, b, p, args: b.select(b.icmp_signed("<", *args), *args))
    source = Source("min.l", "print(3 + 4, 9 + -2)\n")
    program = check(source)
    for prim in program.items[0].args:
        prim.op = "min"
    assert c.pretty_core(program) == "print(min(3, 4), min(9, -2))\n"
    out = io.StringIO()
    Interpreter(out).run(program)
    assert out.getvalue() == "3 -2\n"
    unit, value = pipeline.Unit(source), program
    stages = pipeline.load()
    assert [stage.name for stage in stages[3:10]] == ["types", "mono", "cps", "opt", "closure", "shrink", "llvm"]
    for stage in stages[3:10]:
        value = stage.run(value, unit)
        if stage.name == "cps":
            assert "v_3 = min(c_1, c_2)" in cps.show(value)
        if stage.name == "opt":
            assert "min" not in cps.show(value)           # chapter 9 folded both
    engine, main = driver.jit(driver.machine_code(value))
    assert driver.run_in_child(main).stdout == "3 -2\n"


# --- chapter 6, exercise 1

def inline_once(t: cps.LetCont) -> str:
    """The notebook's inline_once: inline the continuation t binds if its body jumps to it once."""
    k = t.cont
    if k.count != 1:
        return f"used {k.count} times"
    (o,) = cps.occurrences(k)
    user = o.enclosing
    if type(user) is cps.Case:
        return "a case arm"
    if type(user) is cps.Apply:
        return f"the {'return' if user.cont is o else 'exception'} continuation of a call"
    if type(user) is not cps.ApplyCont:
        return "the exception continuation of an operation that can fail"
    if user.raises:
        return "a raise"
    n = user
    while n.enclosing is not t:                # climb to the child of t that holds the jump
        n = n.enclosing
    if n is t.handler:
        return "jumped to from its own handler: a loop"
    for param, arg in zip(t.params, [a.var for a in user.args]):
        cps.substitute(param, arg)
    cps.move(t.handler, user)
    cps.delete_binding(t)
    return "inlined"


def inline_every_once(program) -> list:
    conts = [n for n in cps.walk(program) if type(n) is cps.LetCont]
    return [inline_once(t) for t in conts]


REFUSED = """private f_1 = fun ret_2 exn_3 (x_4) {
  cont loop_5(i_6) {
    loop_5(i_6)
  }
  cont h_7(e_8) {
    ret_2(e_8)
  }
  cont fails_9(e_10) {
    ret_2(e_10)
  }
  cont back_11(r_12) {
    cont k_13(r_14) {
      ret_2(r_14)
    }
    call f_1(r_12) -> k_13 / exn_3
  }
  zero_15 = 0
  q_16 = x_4 / zero_15 / fails_9
  t_17 = x_4 == zero_15
  cont raise_18() {
    h_7(x_4) raise @1:1
  }
  cont call_19() {
    call f_1(q_16) -> back_11 / exn_3
  }
  case t_17 { 0 -> call_19; 1 -> raise_18 }
}
"""


def test_inline_once_refuses_each_use_that_is_not_a_plain_jump_and_says_why():
    program = cps.parse(REFUSED)
    assert inline_every_once(program) == [
        "jumped to from its own handler: a loop", "a raise",
        "the exception continuation of an operation that can fail",
        "the return continuation of a call", "the return continuation of a call",
        "a case arm", "a case arm"]
    cps.check(program)
    assert cps.show(program) == REFUSED                  # nothing changed


def placed(root):
    """A generated program, or a generated term as the body of a definition (so that every
    continuation binding has a place to be deleted from; its halt value is the global's)."""
    if type(root) is cps.Program:
        return root
    program = cps.Program(uncaught=cps._uncaught_of(root))
    program.define(root, "private", name="result")
    return program


@settings(max_examples=100, deadline=None)
@given(st.one_of(cps_terms(), cps_programs()))
def test_inline_once_on_every_continuation_keeps_the_meaning(b):
    program = placed(b.root)
    before = cps_interpret(program)
    inline_every_once(program)
    cps.check(program)
    assert cps_interpret(program) == before


# --- chapter 6, exercise 4

class AllChecker(cps.Checker):
    """The notebook's AllChecker: record every violation and go on."""

    def __init__(self, closed: bool = False):
        super().__init__(closed)
        self.found = []

    def fail(self, node, message: str):
        where = self.where(node)
        self.found.append(f"{where}: {message}" if where else message)


def check_all(program, closed: bool = False) -> list:
    c = AllChecker(closed)
    with cps_convert.collector_paused():
        c.program(program)
        c.links()
    return c.found


BROKEN = """private f_1 = fun ret_2 exn_3 (x_4) {
  cont k_5(a_6, b_7) {
    g_8 = fun ret_9 exn_10 (y_11) {
      z_12 = x_4 + y_11
      ret_9(z_12)
    }
    ret_2(g_8, a_6)
  }
  k_5(x_4)
}
"""


def test_check_all_reports_the_three_violations_and_check_the_first():
    found = check_all(cps.parse(BROKEN), closed=True)
    assert [m.split(": ", 1)[1] for m in found] == [
        "x_4 is a free variable of the function (bound outside it)",
        "ret_2 expects 1 argument(s), and is given 2",
        "k_5 expects 2 argument(s), and is given 1"]
    with pytest.raises(cps.CheckError) as e:
        cps.check(cps.parse(BROKEN), closed=True)
    assert str(e.value) == found[0]


@settings(max_examples=60, deadline=None)
@given(cps_programs())
def test_check_all_finds_nothing_where_check_passes(b):
    cps.check(b.root)
    assert check_all(b.root) == []


# --- chapter 7, exercise 2

class PreciseAnalysis(Analysis):
    """Analysis, but an if's or a match's set is what its branches assign, not its condition."""

    def expr(self, e, depth, mutables):
        t = type(e)
        if t is not c.If and t is not c.Match:
            return super().expr(e, depth, mutables)
        first, *branches = _children(e)
        before = self.expr(first, depth, mutables)
        names = set()
        for part in branches:
            names |= self.expr(part, depth, mutables)
        self.assigned[id(e)] = frozenset(names)
        return before | names


class PreciseConverter(Converter):
    def __init__(self, program, join_points=True):
        super().__init__(program, join_points)
        self.analysis = PreciseAnalysis(program)


def convert_precisely(program):
    with cps_convert.recursion_limit(max(cps_convert.NESTING, 50 * cps_convert.NESTING_LIMIT)), \
            cps_convert.collector_paused():                  # as cps_convert.convert does
        return PreciseConverter(program).program(program)


def to_cps(text, precise):
    program, _ = types.check_types(Source("x.l", text))
    return convert_precisely(program) if precise else cps_convert.convert(program)


ASSIGNED_IN_CONDITION = ("def f(n) = { var x := 0; let r = if ({ x := n; x > 0 }) 1 else 2; r + x }\n"
                         "print(f(3), f(-1))\n")


def join_parameters(program) -> list:
    return [len(node.params) for node in cps.walk(program)
            if type(node) is cps.LetCont and node.cont.hint == "join"]


def test_the_precise_pre_pass_drops_the_parameter_nobody_assigned_in_the_branches():
    assert join_parameters(to_cps(ASSIGNED_IN_CONDITION, precise=False)) == [2]   # (r, x): x is n on both
    assert join_parameters(to_cps(ASSIGNED_IN_CONDITION, precise=True)) == [1]
    program, _ = types.check_types(Source("x.l", ASSIGNED_IN_CONDITION))
    assert on_cps(to_cps(ASSIGNED_IN_CONDITION, precise=True)) == reference(program) == ("4 1\n", None)


@settings(max_examples=60, deadline=None)
@given(programs())
def test_the_precise_pre_pass_means_the_same_and_is_never_larger(text):
    program, _ = types.check_types(Source("random.l", text))
    want = reference(program)
    precise = convert_precisely(program)
    cps.check(precise)
    assert on_cps(precise) == want
    assert cps.size(precise) <= cps.size(to_cps(text, precise=False))


# --- chapter 10, exercise 4

def dominators(graph: FlowGraph) -> dict:
    """Cooper, Harvey and Kennedy: block -> the set of blocks that dominate it (itself included),
    for the blocks reachable from the entry."""
    blocks = graph.blocks()
    successors = {label: succ for label, _, succ in blocks}
    entry = blocks[0][0]
    order, seen = [], set()                       # postorder, by a depth-first walk from the entry

    def visit(b):
        seen.add(b)
        for s in successors[b]:
            if s not in seen:
                visit(s)
        order.append(b)
    visit(entry)
    number = {b: i for i, b in enumerate(order)}
    predecessors = {b: [p for p in order if b in successors[p]] for b in order}
    idom = {entry: entry}

    def intersect(a, b):
        while a != b:
            while number[a] < number[b]:
                a = idom[a]
            while number[b] < number[a]:
                b = idom[b]
        return a
    changed = True
    while changed:
        changed = False
        for b in reversed(order):                 # reverse postorder
            if b == entry:
                continue
            done = [p for p in predecessors[b] if p in idom]
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom.get(b) != new:
                idom[b], changed = new, True
    result = {}
    for b in order:
        chain, x = {b}, b
        while x != entry:
            x = idom[x]
            chain.add(x)
        result[b] = chain
    return result


def dominators_by_definition(graph: FlowGraph) -> dict:
    """d dominates b when b cannot be reached from the entry without going through d."""
    successors = {label: succ for label, _, succ in graph.blocks()}
    entry = graph.blocks()[0][0]

    def reachable(without):
        seen, stack = set(), [entry] if entry != without else []
        while stack:
            b = stack.pop()
            if b not in seen:
                seen.add(b)
                stack.extend(s for s in successors[b] if s != without)
        return seen
    everything = reachable(None)
    return {b: {d for d in everything if d == b or b not in reachable(d)} for b in everything}


DEFINITION = re.compile(r'^(%"?[-\w.$]+"?) = ')
VALUE = re.compile(r'%"?[-\w.$]+"?')
PHI_INCOMING = re.compile(r'\[\s*(%"?[-\w.$]+"?|[^,\]]+),\s*%"?([-\w.$]+)"?\s*\]')


def undominated_uses(graph: FlowGraph, params: set) -> list:
    """The uses of SSA values that their definition does not dominate: [(value, block)]. A use in a
    φ is a use at the end of the block it comes from; in the defining block, the definition must
    come first."""
    dom = dominators(graph)
    defined = {}                                  # value -> (block, index)
    for label, code, _ in graph.blocks():
        for i, line in enumerate(code):
            if (m := DEFINITION.match(line)) is not None:
                defined[m.group(1)] = (label, i)
    bad = []
    for label, code, _ in graph.blocks():
        if label not in dom:
            continue                              # unreachable: the verifier does not look
        for i, line in enumerate(code):
            rhs = DEFINITION.sub("", line)
            if rhs.startswith("phi "):
                for value, pred in PHI_INCOMING.findall(rhs):
                    if value in defined and pred in dom and defined[value][0] not in dom[pred]:
                        bad.append((value, label))
                continue
            for value in VALUE.findall(rhs):
                if value in params or value not in defined:
                    continue
                block, j = defined[value]
                if block not in dom[label] or (block == label and j >= i):
                    bad.append((value, label))
    return bad


WORKED_EXAMPLE = """data List<a> { Cons(a, List<a>)
  Nil }
def sum_to(n) = {
  var i := 0
  var total := 0
  while (i < n) { i := i + 1; total := total + i }
  total
}
def length(l) = match (l) { Nil -> 0
  Cons(_, rest) -> 1 + length(rest) }
def count(n, acc) = if (n == 0) acc else count(n - 1, Cons(n, acc))
print(sum_to(100), length(count(3, Nil)), count(2, Nil))
"""


def functions(text: str):
    """(LLVM text of each defined function, its parameters)."""
    for m in re.finditer(r"^define [^\n]*\n?\{\n.*?\n\}\n", text, re.M | re.S):
        body = re.sub(r"(,? !(dbg|prof) !\d+|\s+;.*)", "", m.group(0))
        header = body.split("\n", 1)[0]
        yield body, set(re.findall(r'(%"?[-\w.$]+"?)[,)]', header))


def test_dominators_agree_with_their_definition_and_every_use_is_dominated():
    module = to_llvm(Source("example.l", WORKED_EXAMPLE), optimiser=False)
    checked = 0
    for text in (str(module), str(optimise(module))):
        for body, params in functions(text):
            graph = FlowGraph(body)
            assert dominators(graph) == dominators_by_definition(graph)
            assert undominated_uses(graph, params) == []
            checked += len(graph.blocks()) > 2
    assert checked >= 4                           # functions with branches, before and after O2


def test_a_use_that_its_definition_does_not_dominate_is_found():
    broken = FlowGraph("define i64 @f(i64 %c) {\nentry:\n  br i1 %b, label %then, label %join\n"
                       "then:\n  %x = add i64 %c, 1\n  br label %join\njoin:\n  %y = add i64 %x, 1\n"
                       "  ret i64 %y\n}\n")
    assert dominators(broken)["join"] == {"entry", "join"}
    assert undominated_uses(broken, {"%c"}) == [("%x", "join")]



# --- chapter 10, exercise 5

class Tagged(llvm_backend.Backend):
    """The back end with a `!tbaa` tag on the loads and stores of allocation, projection and
    `x[i] := y`: "header", "cell" (a `var`'s cell, which chapter 7 names `NAME_cell`) or "field",
    in place of the back end's "word" (tell_apart tags only what has no tag)."""

    def access(self, kind: str):
        if not hasattr(self, "tbaa"):
            m, word = self.module, llvm_backend.word
            root = self.alias_tags()["root"]             # the back end's root: its "allocator" stays apart
            self.tbaa = {}
            for k in ("field", "cell", "header"):
                node = m.add_metadata([ir.MetaDataString(m, k), root, word(0)])
                self.tbaa[k] = m.add_metadata([node, node, word(0)])
        return self.tbaa[kind]

    def kind(self, var) -> str:
        return "cell" if "_cell" in self.name(var) else "field"

    def alloc(self, b, fields, types, tag=0, code=False):
        p = b.call(self.allocator(), [llvm_backend.word(len(fields) + 1), self.rt["lc_hp"]])
        ptr = b.inttoptr(p, llvm_backend.I64.as_pointer())
        b.store(llvm_backend.word(llvm_backend.header(types, tag, code=code)), ptr).set_metadata(
            "tbaa", self.access("header"))
        for i, v in enumerate(fields, 1):
            b.store(v, b.gep(ptr, [llvm_backend.word(i)])).set_metadata("tbaa", self.access(self.allocating))
        return p

    def prim(self, b, p, values):
        self.allocating = self.kind(self.binding) if type(p) is cps.TupleValue else "field"
        if type(p) is cps.Proj and type(values.get(p.arg.var)) is not llvm_backend.Fields:
            load = b.load(self.field(b, self.value(b, p.arg, values), p.index))
            load.set_metadata("tbaa", self.access(self.kind(p.arg.var)))
            return load
        if type(p) is cps.SetField:
            target = self.value(b, p.target, values)
            b.store(self.value(b, p.value, values), self.field(b, target, p.index)).set_metadata(
                "tbaa", self.access(self.kind(p.target.var)))
            assert not llvm_backend.may_point(p.value.var.type)      # no barrier needed in ALIAS
            return llvm_backend.word(0)
        return super().prim(b, p, values)

    def chain(self, f, b, t, values, blocks, work, ret):
        while type(t) is cps.LetPrim and not self.virtual(t.var, t.prim):
            self.binding = t.var                     # the variable a tuple being allocated binds
            values[t.var] = self.prim(b, t.prim, values)
            t = t.body
        return super().chain(f, b, t, values, blocks, work, ret)


def loads_of_the_pair_field(tagged: bool) -> tuple:
    """After O2, main's loads of the address that P(20, 1)'s first field was stored at, and
    whether they come before or after the store into the cell of `total`."""
    chapter = (ROOT / "notebooks" / "10_llvm.py").read_text()
    alias = re.search(r'ALIAS = """(.*?)"""', chapter, re.S).group(1)
    closed, unit = pipeline.compile_to("shrink", Source("alias.l", alias), False)
    backend = (Tagged if tagged else llvm_backend.Backend)(closed, unit.datas, "alias.l")
    text = str(optimise(backend.compile()))
    start = text.index("@main_")
    body = text[start:text.index("\n}\n", start)]
    field = re.search(r"store i64 20, ptr (%[\w.]+)", body).group(1)
    cell = re.search(r"store i64 0, ptr (%[\w.]+)", body).group(1)          # var total := 0
    cell_store = re.search(rf"store i64 %[\w.]+, ptr {re.escape(cell)},", body).start()   # total := …
    loads = [m.start() for m in re.finditer(rf"= load i64, ptr {re.escape(field)},", body)]
    return tuple("before" if at < cell_store else "after" for at in loads)


def test_tbaa_tags_remove_the_load_across_the_cell_store_and_keep_the_other():
    assert loads_of_the_pair_field(tagged=False) == ("before", "after")     # what the chapter prints
    assert loads_of_the_pair_field(tagged=True) == ("before",)

# --- chapter 8, exercises 1, 2 and 3

ROOT = Path(__file__).resolve().parent.parent


def cps_output(program) -> str:
    out = io.StringIO()
    cps.run(program, out)
    return out.getvalue()


def closure_calls(program) -> int:
    return sum(type(n) is Apply and n.kind == "closure" for d in program.definitions for n in walk(d))


def call_known_closures(program) -> int:
    """Exercise 1: each call of a closure that the same function builds becomes a direct call of
    its code, the closure passed as its env."""
    calls = [n for d in program.definitions for n in walk(d)
             if type(n) is Apply and n.kind == "closure"
             and type(b := n.func.var.binder) is LetPrim and type(b.prim) is MakeClosure]
    for call in calls:
        f = call.func.var
        code = f.binder.prim.fields[0].var
        direct = apply(code, call.cont.var, call.exn.var, f, *[a.var for a in call.args], kind="direct")
        direct.loc = call.loc
        replace(call, direct)
    return len(calls)


def test_known_closures_called_directly():
    known = "def g(n) = { let f = { x -> x + n }; f(1) + f(2) }\nprint(g(10))\n"
    closures = (ROOT / "examples" / "closures.l").read_text()
    counts = {}
    for name, text in (("closures.l", closures), ("known", known)):
        for optimised in (False, True):
            p, _ = pipeline.compile_to("closure", Source(name, text), optimise=optimised)
            before = cps_output(p)
            calls = closure_calls(p)
            changed = call_known_closures(p)
            cps.check(p, closed=True)
            assert cps_output(p) == before
            counts[name, optimised] = (calls, changed)
    assert counts == {("closures.l", False): (24, 0), ("closures.l", True): (7, 0),
                      ("known", False): (2, 2), ("known", True): (0, 0)}


def builder(node):
    """The function whose body holds node (None at the top level)."""
    node = node.enclosing
    while node is not None and type(node) is not Lambda:
        node = node.enclosing
    return node


def closed(text: str):
    program, _ = pipeline.compile_to("cps", Source("x.l", text), optimise=False)
    closure_convert(program)
    cps.check(program, closed=True)
    return program


def closure_words(text: str) -> tuple:
    """Exercise 2: the words of every closure(…), flat and linked (a link to the builder's own
    environment instead of the values the builder itself reads from it)."""
    flat = linked = 0
    for d in closed(text).definitions:
        for n in walk(d):
            if type(n) is LetPrim and type(n.prim) is MakeClosure:
                b = builder(n)
                env = b.params[0] if b is not None and b.kind == "closure" else None
                inherited = [o for o in n.prim.fields[1:] if type(o.var.binder) is LetPrim
                             and type(o.var.binder.prim) is Proj and o.var.binder.prim.arg.var is env]
                flat += len(n.prim.fields) + 1
                linked += 2 + (env is not None) + len(n.prim.fields) - 1 - len(inherited)
    return flat, linked


def test_flat_and_linked_closures_counted():
    deep = "def deep(a) = { b -> { c -> { d -> { e -> a + b + c + d + e } } } }\nprint(deep(1)(2)(3)(4)(5))\n"
    assert closure_words((ROOT / "examples" / "seeds.l").read_text()) == (4, 4)
    assert closure_words(deep) == (3 + 4 + 5 + 6, 3 + 4 + 4 + 4)


def stays_on_stack(f) -> bool:
    """Exercise 3: every use of the closure f is as the function of a call that returns to the
    function that builds it (not a tail call)."""
    home = builder(f.binder)
    for o in occurrences(f):
        call = o.enclosing
        if home is None or type(call) is not Apply or call.func is not o or call.cont.var is home.cont:
            return False
    return True


def test_closures_that_could_live_on_the_stack():
    corpus = sorted((ROOT / "tests" / "corpus" / "run").glob("*.l")) + sorted((ROOT / "examples").glob("*.l"))
    found = {}
    for optimised in (False, True):
        for path in corpus:
            p, _ = pipeline.compile_to("closure", Source(path.name, path.read_text()), optimise=optimised)
            made = [n.var for d in p.definitions for n in walk(d)
                    if type(n) is LetPrim and type(n.prim) is MakeClosure]
            if any(map(stays_on_stack, made)):
                found[path.name, optimised] = (sum(map(stays_on_stack, made)), len(made))
    assert found == {("closure_counter.l", False): (1, 4), ("closures_capture.l", False): (1, 5),
                     ("shadowing.l", False): (1, 1)}


# --- appendix C, exercises 1 and 2

ERRORS = Path(__file__).resolve().parent / "errors"


def test_lc_check_prints_nothing_for_a_typed_program_and_the_golden_messages_otherwise(monkeypatch, capsys):
    from lcompiler import cli
    monkeypatch.setattr(cli, "COMMANDS", dict(cli.COMMANDS))     # the registry put back afterwards
    monkeypatch.chdir(ERRORS)                                   # the golden messages name the file alone

    @cli.command("check", "type-check an L program", cli.arg("file", help="an L source file"))
    def check_command(args) -> int:
        from lcompiler import types
        types.check_types(cli.read_source(args.file))
        return 0

    assert cli.main(["check", str(Path(__file__).resolve().parent.parent / "examples" / "lists.l")]) == 0
    assert capsys.readouterr() == ("", "")
    for name in ["if_branches", "three_syntax_errors", "not_utf8"]:   # those of the test to extend
        assert cli.main(["check", f"{name}.l"]) == 1
        assert capsys.readouterr() == ("", (ERRORS / f"{name}.err").read_text(encoding="utf-8")), name


def show_stages(names: str, source: Source, once: bool) -> str:
    """lc show STAGE,STAGE,… : every name checked first, then each stage under a heading; compiled once for
    each stage asked for, or once for all of them, walking the stages and printing each as it comes."""
    asked = names.split(",")
    if unknown := [name for name in asked if name not in pipeline.names()]:
        from lcompiler.cli import UsageError
        raise UsageError(f"unknown stage{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}; "
                         f"the stages are: {', '.join(pipeline.names())}")
    if not once:
        return "\n".join(f"== {name} ==\n{pipeline.show(name, source)}" for name in asked)
    shown = {}
    for stage, value, unit in pipeline.stages_of(source, upto=max(asked, key=pipeline.names().index)):
        if stage.name in asked:
            shown[stage.name] = stage.show(value, unit)      # now: a later stage may change this value in place
    return "\n".join(f"== {name} ==\n{shown[name]}" for name in asked)


def test_lc_show_of_several_stages_checks_every_name_first_and_compiling_once_prints_the_same():
    from lcompiler.cli import UsageError
    source = Source("lists.l", (Path(__file__).resolve().parent.parent / "examples" / "lists.l").read_text())
    with pytest.raises(UsageError, match=r"^unknown stages 'tyeps', 'cpss'; the stages are: tokens, "):
        show_stages("core,tyeps,cps,cpss", source, once=True)
    asked = "core,cps,opt,closure,llvm"
    each = show_stages(asked, source, once=False)
    assert each.count("\n== ") == 4 and each.startswith("== core ==\n")
    assert show_stages(asked, source, once=True) == each


# --- chapter 11, exercise 5

DEFINES = re.compile(r'^(define [^@]*|declare [^@]*)?@"([^"]*)"( = (external )?)?')   # the chapter's


def test_what_crosses_the_cut_of_the_generated_program_split_in_two():
    import importlib.util
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("compile_speed", root / "bench" / "compile_speed.py")
    compile_speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compile_speed)
    module, _ = pipeline.compile_to("llvm", Source("generated.l", compile_speed.program(1250)))
    halves = driver.split(module, 2)
    crossing = set()
    for text in halves:
        for m in map(DEFINES.match, text.splitlines()):
            if m and ((m.group(1) or "").startswith("declare") or m.group(4)) \
                    and not driver.declared(module.globals[m.group(2)]):
                crossing.add(m.group(2))
    functions = sorted(crossing - {"lc_globals"})
    assert "lc_globals" in crossing and len(functions) == 1 and functions[0].startswith("prev")
    shown = ["\n".join(line for line in text.splitlines()
                       if (m := DEFINES.match(line)) and m.group(2) in crossing) for text in halves]
    assert all(f'@"{name}"' in shown[0] and "declare" not in shown[0] for name in crossing)
    assert all(f'@"{name}"' in shown[1] for name in crossing) and 'define' not in shown[1]


# --- chapter 10, exercise 6

KINDS = """def twice(f, x) = f(f(x))
def down(n) = if (n == 0) 0 else down(n - 1)
def ping(n) = if (n == 0) 0 else pong(n - 1)
def pong(n) = ping(n)
def wrap(n) = twice({ x -> x + 1 }, n)
print(wrap(1), down(10), ping(5))
"""


def test_the_kinds_of_the_functions_of_exercise_6():
    chapter = (Path(__file__).resolve().parent.parent / "notebooks" / "10_llvm.py").read_text()
    assert all(f"#    {line}\n" in chapter for line in KINDS.splitlines())      # the exercise's program
    closed, unit = pipeline.compile_to("shrink", Source("kinds.l", KINDS), False)
    backend = llvm_backend.Backend(closed, unit.datas, "kinds.l")
    backend.compile()
    kinds = {re.sub(r"_\d+$", "", name): (kind, loop) for name, kind, loop in llvm_backend.split(backend)[0]}
    assert kinds == {"twice": ("tailcc", False), "down": ("fastcc", True), "ping": ("tailcc", False),
                     "pong": ("tailcc", False), "wrap": ("tailcc", False), "f": ("fastcc", False),
                     "f_entry": ("tailcc", False), "init.statement.5": ("initialiser", False)}
