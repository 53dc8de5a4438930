"""Build, check, print, parse, traverse, run and substitute CPS terms of 10^4 … 10^6 nodes (chapter 6).

    python bench/cps_speed.py [--sizes 10000,30000,...] [--quick] [--repeat 3] [--clock process]

Each size is a generated Program of about N nodes (measured with size()):
private static functions of 50 … 3,000 nodes (half of them leaves, half
calling the leaves), and a public dynamic definition `main`, a quarter of
the program, that calls them. Every block is a straight chain of LetPrims —
constants, arithmetic and comparisons on variables picked at random (a
seeded random.Random) among those in scope, tuples, injections,
projections, tags, prints — with join points (`cont j(r) { the rest }`
reached from the two branches of a `case` on a comparison or a tag, or
returned to by a call), side handlers (targets of later cases, or exits
that later calls return to), and local lambdas. Handlers and lambdas nest
at most about 45 deep however large N is, so the chains get longer as N
grows: the longest has about 200 bindings at 10^4 nodes, 21,000 at 10^6.

The program is first generated as a plan (plain tuples, untimed), then
built from it through Seq, const, op, lam, … (timed as "build"). Then, on
that program: check, show, parse (of show's text, which must print back
the same), walk (size()), all_occurrences reading `.var` of each
occurrence (a union-find find), run (the interpreter: its translation of
every block, and the execution of the path taken, which halts), and
batches of K random scope-safe substitutions (x and y bound in the same
chain, y first; check() passes after them). Every phase runs with the
cyclic garbage collector paused (chapter 4a found that it makes building
big structures superlinear). Prints µs per node of each phase for each size
(the best of --repeat runs, up to three times more below 10^5 nodes), then
for each phase the ratio of its µs per node at the largest size to the
smallest: 1.00 is linear scaling. For substitution, µs per substitution,
and beside it "touch": µs to merely read, for K other pairs, the objects a
substitution writes — the price of reaching scattered objects in a large
heap, which grows with the heap however constant the algorithm. On a
machine shared with other work, --clock process (CPU time) is steadier.

Last, substitution against the number of occurrences of x: chains of
substitutions x → t1 → t2 → … where x is used 10, 1,000 and 100,000 times;
substitute is one union and one ring splice, so its µs should not depend on
it.

Every figure printed is also written to bench/cps_speed.json (--json), which chapter 6
reads: the chapter quotes no figure that a cell beside it does not print from that file.
"""

import argparse
import gc
import io
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from lcompiler.cps import (
    Program, Seq, all_occurrences, apply, apply_cont, case, check, const, halt, inject, lam, op,
    parse, print_, proj, run, show, size, substitute, tag, tuple_, walk, LetCont, Lambda, occurrences,
)
from lcompiler.support import collector_paused

MAX_DEPTH = 40            # join points nested in one another ("the rest" of a block is in a handler)
LAMBDA_DEPTH = 2          # a local lambda in main may hold one; in a static function, none
ARITH = ("+", "-", "*")
COMPARE = ("<", "<=", "==", "!=", ">", ">=")


# --- The plan: a program as plain tuples, generated untimed -------------

class Planner:
    """Generates the plan of a program of about n nodes.

    Variables are numbers, allocated in the order in which building the plan
    creates them (replay() appends each new variable to one list), so that an
    item can name earlier variables by their number.
    """

    def __init__(self, n: int, seed: int):
        self.rng = random.Random(seed)
        self.n = n
        self.count = 0          # variables allocated
        self.ints = []          # in-scope ordinary variables holding integers (a stack)
        self.conts0 = []        # in-scope continuations without parameters, of the current function
        self.joins = []         # in-scope continuations of one parameter (ret included), current function
        self.funcs = []         # callable (variable, arity): globals, then local lambdas (a stack)
        self.lambda_depth = 0
        self.chains = []        # per block: the integer variables its own LetPrims bind, in order

    def new(self) -> int:
        self.count += 1
        return self.count - 1

    def pick(self) -> int:
        """An in-scope integer variable: mostly a recent one, sometimes any."""
        ints, rng = self.ints, self.rng
        if rng.random() < 0.7:
            return ints[-1 - int(rng.random() * min(len(ints), 20))]
        return ints[int(rng.random() * len(ints))]

    # straight-line code
    def prim(self, items: list, chain: list) -> int:
        """Append one LetPrim (two or four nodes); return the number of nodes."""
        r, rng = self.rng.random(), self.rng
        if r < 0.28 or not self.ints:
            items.append(("c", rng.randrange(100)))
        elif r < 0.73:
            items.append(("op", rng.choice(ARITH), self.pick(), self.pick()))
        elif r < 0.78:
            items.append(("neg", self.pick()))
        elif r < 0.84:
            i = self.new()
            items.append(("tuple", self.pick(), self.pick()))
            items.append(("proj", rng.randrange(2), i))
            v = self.new()
            self.ints.append(v)
            chain.append(v)
            return 4
        elif r < 0.90:
            i = self.new()
            items.append(("inj", rng.randrange(2), self.pick()))
            items.append(("proj", 0, i))
            v = self.new()
            self.ints.append(v)
            chain.append(v)
            return 4
        elif r < 0.99:
            items.append(("cmp", rng.choice(COMPARE), self.pick(), self.pick()))
            self.new()                                   # a boolean: not pushed on ints
            return 2
        else:
            items.append(("print", self.pick()))
            self.new()
            return 2
        v = self.new()
        self.ints.append(v)
        chain.append(v)
        return 2

    def condition(self, items: list) -> tuple:
        """Append the computation of a case's scrutinee: a comparison or the tag of an injection."""
        if self.rng.random() < 0.5:
            items.append(("cmp", self.rng.choice(COMPARE), self.pick(), self.pick()))
            return self.new(), 2
        v = self.new()
        items.append(("inj", self.rng.randrange(2), self.pick()))
        items.append(("tag", v))
        return self.new(), 4

    def terminator(self, items: list, top: bool) -> int:
        """Close a block: a jump, a call, a case or halt, whatever is in scope."""
        rng, choices = self.rng, []
        if self.joins:
            choices += ["jump", "jump"]
            if self.funcs:
                choices.append("call")
        if self.conts0:
            choices += ["case", "case"]
        if top:
            choices.append("halt")
        kind = rng.choice(choices)
        if kind == "jump":
            items.append(("jump", rng.choice(self.joins), self.pick()))
            return 1
        if kind == "call":
            f, arity = rng.choice(self.funcs)
            items.append(("call", f, rng.choice(self.joins), [self.pick() for _ in range(arity)]))
            return 1
        if kind == "case":
            x, nodes = self.condition(items)
            a, b = rng.choice(self.conts0), rng.choice(self.conts0)
            if rng.random() < 0.2:
                items.append(("case", x, [(0, a)], b))        # with a default
            else:
                items.append(("case", x, [(0, a), (1, b)], None))
            return nodes + 1
        items.append(("halt", self.pick()))
        return 1

    # blocks
    def block(self, budget: int, depth: int, top: bool) -> tuple:
        """A chain of about budget nodes ending in a terminator: (items, nodes)."""
        rng = self.rng
        items, used, chain = [], 0, []
        marks = len(self.ints), len(self.conts0), len(self.funcs), len(self.joins)
        self.chains.append(chain)
        while True:
            remaining = budget - used
            if remaining < 8:
                used += self.terminator(items, top)
                break
            # about one join point (the rest in its handler) every `segment` nodes
            segment = max(100, remaining / (MAX_DEPTH - depth)) if depth < MAX_DEPTH else math.inf
            if remaining > 120 and rng.random() < 2 / segment:
                used += self.join(items, remaining, depth, top)       # ends the chain
                break
            r = rng.random()
            if depth < MAX_DEPTH and r < 0.03:
                used += self.side(items, top)
            elif self.lambda_depth < LAMBDA_DEPTH and r < 0.045:
                used += self.local_lambda(items)
            else:
                used += self.prim(items, chain)
        del self.ints[marks[0]:], self.conts0[marks[1]:], self.funcs[marks[2]:], self.joins[marks[3]:]
        return items, used

    def join(self, items: list, remaining: int, depth: int, top: bool) -> int:
        """cont j(r) { the rest }, then an if whose branches jump to j, or a call returning to j."""
        j, r = self.new(), self.new()
        self.ints.append(r)
        rest, nodes = self.block(remaining - 40, depth + 1, top)     # not jumping to j: it would loop
        self.ints.pop()
        items.append(("cont", 1, rest))
        nodes += 1
        self.joins.append(j)
        if self.funcs and self.rng.random() < 0.4:
            f, arity = self.rng.choice(self.funcs)
            items.append(("call", f, j, [self.pick() for _ in range(arity)]))
            nodes += 1
        else:
            branches = []
            for _ in range(2):
                k = self.new()
                body, n = self.straight(self.rng.randrange(2, 10), ("jump", j, None))
                items.append(("cont", 0, body))
                branches.append(k)
                nodes += n + 1
            x, n = self.condition(items)
            items.append(("case", x, [(0, branches[0]), (1, branches[1])], None))
            nodes += n + 1
        self.joins.pop()
        return nodes

    def straight(self, lets: int, last) -> tuple:
        """A handler's body: a few LetPrims, then last (a jump, its argument picked here)."""
        items, nodes, chain = [], 0, []
        mark = len(self.ints)
        self.chains.append(chain)
        for _ in range(lets):
            nodes += self.prim(items, chain)
        items.append((last[0], last[1], self.pick()))
        del self.ints[mark:]
        return items, nodes + 1

    def side(self, items: list, top: bool) -> int:
        """cont h() { a few LetPrims; a jump, call, case or halt }: a target for later cases; or,
        one time in three, cont e(r) { … }: an exit that later calls may return to."""
        arity = 1 if self.rng.random() < 0.33 else 0
        k = self.new()
        body, nodes, chain = [], 0, []
        mark = len(self.ints)
        if arity:
            self.ints.append(self.new())
        self.chains.append(chain)
        for _ in range(self.rng.randrange(1, 12)):
            nodes += self.prim(body, chain)
        nodes += self.terminator(body, top)
        del self.ints[mark:]
        items.append(("cont", arity, body))
        (self.joins if arity else self.conts0).append(k)
        return nodes + 1

    def function(self, budget: int, arity: int, funcs: list, local: bool) -> tuple:
        """The plan of a lambda: ret, its parameters and its body. A local lambda sees the
        variables in scope where it is (its free variables); a static one only its parameters."""
        saved = self.ints, self.conts0, self.joins, self.funcs
        ret = self.new()
        params = [self.new() for _ in range(arity)]
        mark = len(self.ints)
        if local:
            self.ints.extend(params)
        else:
            self.ints = list(params)
        self.conts0, self.joins, self.funcs = [], [ret], list(funcs)
        self.lambda_depth += 1
        body, nodes = self.block(budget, 0, False)
        self.lambda_depth -= 1
        self.ints, self.conts0, self.joins, self.funcs = saved
        del self.ints[mark:]
        return ("lam", arity, body), nodes + 1

    def local_lambda(self, items: list) -> int:
        """f = fun ret(x…) { a small body, no calls }."""
        plan, nodes = self.function(self.rng.randrange(6, 60), self.rng.randrange(1, 3), [], True)
        items.append(plan)
        f = self.new()
        self.funcs.append((f, plan[1]))
        return nodes + 1

    def program(self) -> tuple:
        """(plan, globals, expected nodes): static functions, leaves and callers of leaves, then main."""
        rng, sizes, total = self.rng, [], 0
        while total < 0.75 * self.n or not sizes:
            s = int(math.exp(rng.uniform(math.log(50), math.log(max(60, min(3000, self.n // 20))))))
            sizes.append(s)
            total += s
        globals_ = [(self.new(), rng.randrange(1, 4)) for _ in sizes]
        main = self.new()
        leaves = globals_[0::2]
        plan, nodes = [], 0
        for i, s in enumerate(sizes):
            fn, n = self.function(s, globals_[i][1], [] if i % 2 == 0 else leaves, False)
            plan.append(("static", globals_[i][0], fn))
            nodes += n + 1
        self.funcs = list(globals_)
        body, n = self.block(max(self.n - nodes - 1, 100), 0, True)
        plan.append(("dynamic", main, body))
        return plan, len(globals_) + 1, nodes + n + 1


# --- Build: replay the plan through the Build functions (timed) ---------

def replay(items: list, V: list):
    s = Seq()
    let, push = s.let, V.append
    for i in range(len(items) - 1):
        it = items[i]
        kind = it[0]
        if kind == "op" or kind == "cmp":
            push(let(op(it[1], V[it[2]], V[it[3]]), "t"))
        elif kind == "c":
            push(let(const(it[1]), "c"))
        elif kind == "neg":
            push(let(op("neg", V[it[1]]), "n"))
        elif kind == "tuple":
            push(let(tuple_(V[it[1]], V[it[2]]), "p"))
        elif kind == "proj":
            push(let(proj(it[1], V[it[2]]), "f"))
        elif kind == "inj":
            push(let(inject(it[1], "Some" if it[1] else "None", V[it[2]]), "v"))
        elif kind == "tag":
            push(let(tag(V[it[1]]), "g"))
        elif kind == "print":
            push(let(print_(V[it[1]]), "u"))
        elif kind == "cont":
            def handler(k, *xs, body=it[2]):
                push(k)
                V.extend(xs)
                return replay(body, V)
            s.cont(handler, it[1], "j" if it[1] else "h")
        elif kind == "lam":
            push(let(function(it, V), "fn"))
        else:
            raise ValueError(kind)
    return s.end(terminator(items[-1], V))


EXN = []     # the exception continuation of the function being built (the program's uncaught at the top)


def function(it, V):
    def body(k, h, *xs):
        V.append(k)
        V.extend(xs)
        EXN.append(h)
        try:
            return replay(it[2], V)
        finally:
            EXN.pop()
    return lam(body, it[1])


def terminator(it, V):
    kind = it[0]
    if kind == "jump":
        return apply_cont(V[it[1]], V[it[2]])
    if kind == "call":
        return apply(V[it[1]], V[it[2]], EXN[-1], *[V[a] for a in it[3]])
    if kind == "case":
        default = None if it[3] is None else V[it[3]]
        return case(V[it[1]], {t: V[k] for t, k in it[2]}, default)
    return halt(V[it[1]])


def build(plan: list, globals_: int) -> tuple:
    prog, V = Program(), []
    EXN[:] = [prog.uncaught]
    for _ in range(globals_):
        V.append(prog.declare())
    for item in plan:
        if item[0] == "static":
            prog.define(function(item[2], V), "private", var=V[item[1]])
        else:
            prog.define(replay(item[2], V), "public", var=V[item[1]])
    return prog, V


# --- Measures ------------------------------------------------------------

CLOCK = time.perf_counter     # --clock process: time.process_time, blind to other processes' load


def timed(action, collect: bool = False):
    """(seconds, result) of action(), the cyclic collector paused (after a collection if asked)."""
    if collect:
        gc.collect()
    with collector_paused():
        start = CLOCK()
        result = action()
        return CLOCK() - start, result


def nesting(prog) -> int:
    """The deepest nesting of handlers and lambdas: how many a node is inside (with uplinks)."""
    deepest, depth = 0, {}
    for node in walk(prog):
        up = getattr(node, "enclosing", None)
        d = depth.get(id(up), 0)
        if type(up) is Lambda or (type(up) is LetCont and up.handler is node):
            d += 1
        depth[id(node)] = d
        deepest = max(deepest, d)
    return deepest


def substitution_pairs(planner: Planner, V: list, k: int, rng: random.Random) -> list:
    """k pairs (x, y): x used at least once, y bound earlier in the same chain; no variable is
    in two pairs, so each substitution really moves occurrences (and no x is emptied twice)."""
    candidates = [(chain, pos) for chain in planner.chains for pos in range(1, len(chain))
                  if V[chain[pos]].count]
    rng.shuffle(candidates)
    taken, pairs = set(), []
    for chain, pos in candidates:
        x = chain[pos]
        if x in taken:
            continue
        for _ in range(10):
            y = chain[rng.randrange(pos)]
            if y not in taken:
                taken.update((x, y))
                pairs.append((V[x], V[y]))
                break
        if len(pairs) == k:
            break
    return pairs


def substitute_all(pairs):
    for x, y in pairs:
        substitute(x, y)


def touch_all(pairs):
    """Read, without changing them, the objects substitute(x, y) changes: a baseline for the
    cost of reaching K scattered variables in memory (cache and TLB misses, not algorithm)."""
    for x, y in pairs:
        x.partition.root.link, y.partition and y.partition.root.link, x.next.prev, x.prev.next, y.next.prev


def read_occurrences(prog) -> int:
    """Read the variable of every occurrence. (Definition by definition: all_occurrences of a
    Program fails, as walk yields the Program itself and a Program has no occs().)"""
    n = 0
    for d in prog.definitions:
        for o in all_occurrences(d):
            o.var
            n += 1
    return n


PHASES = ("build", "check", "show", "parse", "walk", "occs", "run")


def measure(n: int, args) -> tuple:
    """The times of every phase over runs(n, args.repeat) runs, on a program of about n nodes. The
    collector stays paused throughout, untimed work included (with a heap of millions of objects,
    each of its full collections takes seconds); one explicit collection per run frees the last."""
    with collector_paused():
        return measure_paused(n, args)


def runs(n: int, repeat: int) -> int:
    """--repeat runs; up to three times more below 10^5 nodes, where runs are cheap and the
    noise of a shared machine weighs most."""
    return max(repeat, min(3 * repeat, repeat * 100_000 // n))


def measure_paused(n: int, args) -> tuple:
    planner = Planner(n, args.seed + n)
    plan, globals_, _ = planner.program()
    times = {p: [] for p in PHASES + ("subst", "touch")}
    info = {"runs": runs(n, args.repeat)}
    for rep in range(info["runs"]):
        t, (prog, V) = timed(lambda: build(plan, globals_), collect=True)
        times["build"].append(t)
        nodes = info["nodes"] = size(prog)
        t, _ = timed(lambda: check(prog))
        times["check"].append(t)
        t, text = timed(lambda: show(prog))
        times["show"].append(t)
        t, again = timed(lambda: parse(text))
        times["parse"].append(t)
        if rep == 0:
            assert show(again) == text, "parse(show(p)) does not print as show(p)"
            info["depth"] = nesting(prog)
            info["lines"] = text.count("\n")
        again = text = None
        t, walked = timed(lambda: size(prog))
        times["walk"].append(t)
        assert walked == nodes
        t, info["occs"] = timed(lambda: read_occurrences(prog))
        times["occs"].append(t)
        if not args.no_run:
            out = io.StringIO()
            t, _ = timed(lambda: run(prog, out))
            times["run"].append(t)
        # batches of K disjoint pairs: the first one only read (the baseline), the others substituted
        pairs = substitution_pairs(planner, V, args.k * (args.batches + 1), random.Random(args.seed + rep))
        k = info["k"] = min(args.k, len(pairs) // 2)
        batches = [pairs[i:i + k] for i in range(0, len(pairs) - k + 1, k)]
        t, _ = timed(lambda: touch_all(batches[0]))
        times["touch"].append(t / k)
        for batch in batches[1:]:
            t, _ = timed(lambda: substitute_all(batch))
            times["subst"].append(t / k)
        if rep == 0:
            check(prog)                  # the substitutions were scope-safe
        prog = V = pairs = batches = None          # garbage for the next run's collection
    return times, info


def occurrence_term(n: int, k: int) -> tuple:
    """a = 1; targets t_1 … t_k; x = 7; then n uses of x, and one use of each target."""
    s = Seq()
    a = s.let(const(1), "a")
    targets = [s.let(const(i), "t") for i in range(k)]
    x = s.let(const(7), "x")
    for _ in range(n):
        s.let(op("+", x, a))
    for t in targets:
        s.let(op("+", t, a))
    return s.end(halt(a)), x, targets


def substitute_chain(x, targets):
    """x → t_1 → t_2 → …: each step moves every occurrence so far, onto a variable used once."""
    for t in targets:
        substitute(x, t)
        x = t


def find_all(var) -> int:
    n = 0
    for o in occurrences(var):
        o.var
        n += 1
    return n


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--sizes", default="10000,30000,100000,300000,1000000",
                         help="comma-separated program sizes, in nodes")
    options.add_argument("--quick", action="store_true", help="sizes 10^3 … 10^5 (overrides --sizes)")
    options.add_argument("--repeat", type=int, default=3,
                         help="runs per size, more below 10^5 nodes (the best is kept)")
    options.add_argument("--stat", choices=("min", "median"), default="min", help="statistic over the runs")
    options.add_argument("--k", type=int, default=1000, help="substitutions per timed batch")
    options.add_argument("--batches", type=int, default=4, help="batches of K substitutions per run")
    options.add_argument("--seed", type=int, default=6)
    options.add_argument("--clock", choices=("wall", "process"), default="wall",
                         help="time.perf_counter, or time.process_time (this process's CPU time only: "
                              "steadier on a loaded machine)")
    options.add_argument("--no-run", action="store_true", help="skip the interpreter")
    options.add_argument("--occurrences", default="10,1000,100000",
                         help="occurrence counts of the substituted variable, for the last table")
    options.add_argument("--chain", type=int, default=10_000,
                         help="substitutions timed per occurrence count, for the last table")
    options.add_argument("--json", default=str(Path(__file__).with_name("cps_speed.json")),
                         help="where to write the figures (chapter 6 reads bench/cps_speed.json); '' for nowhere")
    args = options.parse_args()
    from machine import describe        # bench/machine.py
    described = describe()              # as the measurement starts
    global CLOCK
    CLOCK = time.perf_counter if args.clock == "wall" else time.process_time
    sizes = [1000, 3000, 10_000, 30_000, 100_000] if args.quick else \
        [int(float(s)) for s in args.sizes.split(",")]
    stat = min if args.stat == "min" else statistics.median
    phases = [p for p in PHASES if not (args.no_run and p == "run")]

    print(f"µs per node ({args.stat} of `runs` runs, {args.clock} clock); subst: µs per substitution "
          f"({args.stat} of {args.batches} batches of K per run); touch: µs to read the same fields of "
          "K other pairs")
    print(f"{'nodes':>8} {'lines':>7} {'depth':>5} {'runs':>4} " + " ".join(f"{p:>6}" for p in phases)
          + f" {'subst':>6} {'touch':>6} {'K':>5}")
    measure(1000, argparse.Namespace(**{**vars(args), "repeat": 1}))   # warm-up, not shown
    rows = []
    for n in sizes:
        times, info = measure(n, args)
        nodes = info["nodes"]
        row = {p: stat(times[p]) / nodes * 1e6 for p in phases}
        row["subst"], row["touch"] = stat(times["subst"]) * 1e6, stat(times["touch"]) * 1e6
        rows.append(row)
        row.update(nodes=nodes, lines=info["lines"], depth=info["depth"], runs=info["runs"], k=info["k"])
        print(f"{nodes:>8} {info['lines']:>7} {info['depth']:>5} {info['runs']:>4} "
              + " ".join(f"{row[p]:>6.2f}" for p in phases)
              + f" {row['subst']:>6.2f} {row['touch']:>6.2f} {info['k']:>5}", flush=True)
    print("time per node, largest program / smallest (1.00 is linear; in brackets, the slowest size / "
          "the fastest, for the noise):")
    for p in phases:
        per = [row[p] for row in rows]
        print(f"  {p:>6}: {per[-1] / per[0]:.2f}   ({max(per) / min(per):.2f})")
    print("time per substitution, largest program / smallest (1.00 is constant):")
    print(f"   subst: {rows[-1]['subst'] / rows[0]['subst']:.2f}   (touch, the same objects only read: "
          f"{rows[-1]['touch'] / rows[0]['touch']:.2f}; subst - touch: "
          f"{rows[0]['subst'] - rows[0]['touch']:.2f} -> {rows[-1]['subst'] - rows[-1]['touch']:.2f} µs)")

    print()
    print(f"substitution against the occurrences of x ({args.chain} substitutions x -> t1 -> t2 …, "
          f"{args.stat} of {args.repeat}):")
    print(f"{'occurrences':>11} {'µs/subst':>9} {'µs/find after':>14}")
    per_op, occurrence_rows = [], []
    for occ in [int(float(s)) for s in args.occurrences.split(",")]:
        subs, finds = [], []
        for _ in range(args.repeat):
            gc.collect()
            with collector_paused():
                term, x, targets = occurrence_term(occ, args.chain)
                t, _ = timed(lambda: substitute_chain(x, targets))
                subs.append(t / args.chain)
                last = targets[-1]
                assert last.count == occ + args.chain and x.count == 0
                t, found = timed(lambda: find_all(last))
                assert found == last.count
                finds.append(t / found)
                check(term)
                term = x = targets = last = None
        per_op.append(stat(subs))
        occurrence_rows.append({"occurrences": occ, "subst": stat(subs) * 1e6, "find": stat(finds) * 1e6})
        print(f"{occ:>11} {stat(subs) * 1e6:>9.2f} {stat(finds) * 1e6:>14.3f}", flush=True)
    print(f"time per substitution, most occurrences / fewest: {per_op[-1] / per_op[0]:.2f} "
          "(1.00 is constant time)")
    if args.json:
        settings = {k: getattr(args, k) for k in ("repeat", "stat", "k", "batches", "seed", "clock", "chain")}
        Path(args.json).write_text(json.dumps(
            {"command": " ".join(["python bench/cps_speed.py"] + sys.argv[1:]), "settings": settings, "phases": phases,
             "sizes": rows, "occurrences": occurrence_rows, "machine": described}, indent=1) + "\n")
        print("written to", args.json)


if __name__ == "__main__":
    main()
