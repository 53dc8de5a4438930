"""A soundness oracle for L's types: random programs near the value restriction, judged by OCaml.

Issue 23 found a well-typed L program that crashed: chapter 5's inference let a definition that reads
a weak type (the value restriction's `swap = make_cell()`) generalise that type. This module checks
the type checker against one its author did not write, OCaml's, on programs made to sit where such
mistakes hide:

- `programs()`, a Hypothesis strategy, writes L programs around a prelude of data types with one,
  two and three parameters (one with a function field) and helpers that make cells (`var`s captured
  by closures), references, partial applications and compositions. Its definitions are either *weak*
  (non-values: `make_cell()`, `id(Nil)`, `pairer(Nil)`, a block with a `var`) or *values* that read
  earlier ones (aliases, tuples, constructors, functions that return them, a chain of readers,
  mutually recursive readers, local polymorphic and local weak `let`s); its statements use each at
  types chosen per use, usually the same for the same unknown, sometimes not. The generator does
  not know which programs are well typed: some are, many are not, and that is the point.
- `to_ocaml(core, typed)` translates a resolved core program (chapter 4b's, before inference) to
  OCaml: `data` to variant types, `def`s to `let`/`let rec … and …` per strongly connected component,
  `var` to `ref`, evaluation left to right made explicit. When L accepted the program, each `print`
  prints with a printer built for the type L recorded on its argument, so OCaml also checks those
  types; otherwise `print` only evaluates its arguments.
- `judge(text)` runs it all: L's type checker; OCaml's (`ocamlc`); and, for a program L accepts, the
  reference interpreter, the compiled code (`driver.run_source`) and the OCaml program. The
  findings: L accepts and OCaml rejects (OCaml's relaxed value restriction accepts *more*, so the
  other way round is expected and only counted); a compiled program that fails, crashes, or stops
  with an internal compiler error; outputs that differ.

`tests/test_soundness.py` runs a short property run in pytest; `tools/soundness.py` runs long ones.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from lcompiler import core as c, syntax as s
from lcompiler.errors import CompileError, Diagnostic, RunError, Source
from lcompiler.interp import Interpreter, check as resolve
from lcompiler.types import TParam, infer_program, references, strongly_connected

# --- The generator -------------------------------------------------------------------------------

PRELUDE = """\
data List<t> { Cons(t, List<t>); Nil }
data P<a, b> { P(a, b) }
data Either<a, b> { Left(a); Right(b) }
data T3<a, b, c> { T3(a, b, c) }
data Fn<a, b> { Fn(a -> b) }
def id(x) = x
def make_cell() = { var content := Nil; { x -> { let old = content; content := x; old } } }
def make_ref(x) = { var v := x; ({ () -> v }, { y -> v := y }) }
def const(x) = { y -> x }
def pairer(x) = { y -> P(x, y) }
def compose(f, g) = { x -> f(g(x)) }
def add(x) = { y -> x + y }
"""

# Types as the generator sees them: "Int", "Bool", "String", "Unit", (name, *arguments) for List, P,
# Either, T3, Fn, "*" (tuples) and "->", and ("?", k): an unknown, which each use chooses.
GROUND = ["Int", "String", "Bool", ("List", "Int"), ("P", "Int", "String"), ("Either", "String", "Int"),
          ("*", "Int", "Bool"), ("List", "String"), ("->", "Int", "Int")]
WORDS = ["one", "two", "", "a b"]


@dataclass
class Entity:
    """Something a statement can use: its L text, and its type with unknowns."""
    text: str
    type: object
    weak: bool = False           # made by a non-value (the generator's belief, for the weights only)


class Holes:
    """The unknowns of a program: each gets a preferred ground type when it is made."""

    def __init__(self, draw):
        self.draw, self.preferred = draw, []

    def new(self):
        self.preferred.append(self.draw(st.sampled_from(GROUND)))
        return ("?", len(self.preferred) - 1)

    def choose(self, t, chosen: dict):
        """t with its unknowns made ground: the preferred type, mostly, and the same for one
        unknown within one use (chosen)."""
        if isinstance(t, str):
            return t
        if t[0] == "?":
            if t[1] not in chosen:
                keep = self.draw(st.integers(0, 2)) > 0
                chosen[t[1]] = self.preferred[t[1]] if keep else self.draw(st.sampled_from(GROUND))
            return chosen[t[1]]
        return (t[0], *(self.choose(a, chosen) for a in t[1:]))


def value_of(draw, t, depth: int = 2) -> str:
    """L text of a value of the ground type t."""
    if t == "Int":
        return str(draw(st.integers(0, 9)))
    if t == "Bool":
        return draw(st.sampled_from(["true", "false"]))
    if t == "String":
        return '"' + draw(st.sampled_from(WORDS)) + '"'
    if t == "Unit":
        return "()"
    name, *args = t
    sub = lambda u: value_of(draw, u, depth - 1)
    if name == "List":
        return "Nil" if depth <= 0 or draw(st.booleans()) else f"Cons({sub(args[0])}, {sub(t)})"
    if name == "P":
        return f"P({sub(args[0])}, {sub(args[1])})"
    if name == "Either":
        return f"Left({sub(args[0])})" if draw(st.booleans()) else f"Right({sub(args[1])})"
    if name == "T3":
        return f"T3({', '.join(map(sub, args))})"
    if name == "Fn":
        return f"Fn({sub(('->', *args))})"
    if name == "*":
        return "(" + ", ".join(map(sub, args)) + ")"
    if args[0] == args[1] and draw(st.booleans()):
        return "{ x -> x }"
    return f"{{ x -> {sub(args[1])} }}"


def use(draw, e: str, t, depth: int = 2) -> str:
    """An L statement that uses the value of e (of ground type t) at that type: prints it, calls it,
    matches it."""
    name = t[0] if isinstance(t, tuple) else t
    how = draw(st.integers(0, 2)) if depth > 0 else 0
    if how == 0 and name != "->":
        return f"print({e})"
    if name == "Int":
        return f"print({e} + 1)"
    if name == "Bool":
        return f'print(if ({e}) "yes" else "no")'
    if name == "String":
        return f'{{ let s = {e}; print(s == "one", s) }}'
    if name == "List":
        return f'{e}.{{ Cons(h, _) -> {use(draw, "h", t[1], depth - 1)}; Nil -> print("nil") }}'
    if name == "P":
        return f"{e}.{{ P(l, r) -> {{ {use(draw, 'l', t[1], depth - 1)}; {use(draw, 'r', t[2], depth - 1)} }} }}"
    if name == "Either":
        return (f"{e}.{{ Left(l) -> {use(draw, 'l', t[1], depth - 1)}; "
                f"Right(r) -> {use(draw, 'r', t[2], depth - 1)} }}")
    if name == "Fn":
        return f"{e}.{{ Fn(f) -> {use(draw, 'f', ('->', *t[1:]), depth - 1)} }}"
    if name == "*":
        names = [f"c{depth}{i}" for i in range(len(t) - 1)]
        order = draw(st.permutations(range(len(names))))
        body = "; ".join(use(draw, names[i], t[i + 1], depth - 1) for i in order)
        return f"{e}.{{ ({', '.join(names)}) -> {{ {body} }} }}"
    if name == "T3":
        body = "; ".join(use(draw, x, u, depth - 1) for x, u in zip(("l", "m", "r"), t[1:]))
        return f"{e}.{{ T3(l, m, r) -> {{ {body} }} }}"
    return use(draw, f"{e}({value_of(draw, t[1])})", t[2], depth - 1)      # a function: call it


def weak_definition(draw, holes: Holes, entities: list) -> tuple:
    """A definition whose right-hand side is not a syntactic value: (text after `def NAME`, type)."""
    h = holes.new()
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return " = make_cell()", ("->", ("List", h), ("List", h))
    if choice == 1:
        return " = id(Nil)", ("List", h)
    if choice == 2:
        return " = make_ref(Nil)", ("*", ("->", "Unit", ("List", h)), ("->", ("List", h), "Unit"))
    if choice == 3:
        return " = { var c := Nil; { x -> { c := Cons(x, c); c } } }", ("->", h, ("List", h))
    if choice == 4:
        return " = compose(id, id)", ("->", h, h)
    if choice == 5:
        return " = pairer(Nil)", ("->", (h2 := holes.new()), ("P", ("List", h), h2))
    if choice == 6:
        return " = const(Nil)", ("->", holes.new(), ("List", h))
    if choice == 7:
        return " = Fn(compose(id, id))", ("Fn", h, h)
    if choice == 8:
        return " = P(id(Nil), Left(id(Nil)))", ("P", ("List", h), ("Either", ("List", holes.new()), holes.new()))
    functions = [e for e in entities if isinstance(e.type, tuple) and e.type[0] == "->"]
    f = draw(st.sampled_from(functions))
    arg = holes.choose(f.type[1], {})
    # The generator does not follow what the argument fixes in the result's type: a use that
    # disagrees is one more program for the type checkers to judge.
    return f" = {f.text}({value_of(draw, arg)})", f.type[2]


def value_definition(draw, holes: Holes, entities: list, name: str) -> tuple:
    """A definition whose right-hand side is a value, reading earlier entities: (text, [(name,
    type)]) — several names for a mutually recursive pair."""
    e = draw(st.sampled_from(entities))
    y = holes.new()
    choice = draw(st.integers(0, 10))
    if choice == 0:
        return f"def {name}(y) = {e.text}", [(name, ("->", y, e.type))]
    if choice == 1:
        return f"def {name} = {e.text}", [(name, e.type)]
    if choice == 2:
        other = draw(st.sampled_from(entities))
        return f"def {name} = ({e.text}, {other.text})", [(name, ("*", e.type, other.type))]
    if choice == 3 and draw(st.booleans()):
        return f"def {name}(y) = P(y, {e.text})", [(name, ("->", y, ("P", y, e.type)))]
    if choice == 3:
        return f"def {name}(y) = T3({e.text}, y, {e.text})", [(name, ("->", y, ("T3", e.type, y, e.type)))]
    if choice == 4:
        return f"def {name}(y) = {{ let z = {e.text}; z }}", [(name, ("->", y, e.type))]
    if choice == 5:
        return f"def {name} = Right({e.text})", [(name, ("Either", y, e.type))]
    if choice == 6 and isinstance(e.type, tuple) and e.type[0] == "->":
        return f"def {name}(y) = {e.text}(y)", [(name, e.type)]
    if choice == 7:
        a, b = draw(st.sampled_from(GROUND)), draw(st.sampled_from(GROUND))
        body = (f"{{ let f = {{ x -> P(x, y) }}; (f({value_of(draw, a)}), f({value_of(draw, b)})) }}")
        return f"def {name}(y) = {body}", [(name, ("->", y, ("*", ("P", a, y), ("P", b, y))))]
    if choice == 8:
        a, b = draw(st.sampled_from(GROUND)), draw(st.sampled_from(GROUND))
        body = (f"{{ let c = make_cell(); let first = c(Cons({value_of(draw, a)}, Nil)); "
                f"(first, c(Cons({value_of(draw, b)}, Nil))) }}")
        return f"def {name}(y) = {body}", [(name, ("->", y, ("*", ("List", a), ("List", b))))]
    if choice == 9:
        return (f"def {name}(y) = {{ var c := y; {{ x -> {{ let old = c; c := x; old }} }} }}",
                [(name, ("->", y, ("->", y, y)))])
    # 10 (and 6, when e is not a function): a pair of mutually recursive readers
    even, odd = f"{name}e", f"{name}o"
    text = (f"def {even}(n, y) = if (n == 0) {e.text} else {odd}(n - 1, y)\n"
            f"def {odd}(n, y) = if (n == 0) {e.text} else {even}(n - 1, y)")
    t = ("->", ("*", "Int", y), e.type)
    return text, [(even, t), (odd, t)]


@st.composite
def programs(draw) -> str:
    """An L program: the prelude, definitions that build on each other, and statements using them."""
    holes = Holes(draw)
    h, k = holes.new(), holes.new()
    entities = [Entity("id", ("->", h, h)), Entity("make_cell()", ("->", ("List", k), ("List", k)))]
    lines = []
    for i in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 2)) == 0 or not any(e.weak for e in entities):
            text, t = weak_definition(draw, holes, entities)
            lines.append(f"def w{i}{text}")
            entities.append(Entity(f"w{i}", t, weak=True))
        else:
            weak = [e for e in entities if e.weak]
            text, named = value_definition(draw, holes, weak if draw(st.integers(0, 2)) else entities, f"r{i}")
            lines.append(text)
            entities.extend(Entity(n, t) for n, t in named)
    mine = entities[2:]
    for _ in range(draw(st.integers(2, 5))):
        e = draw(st.sampled_from(mine))
        lines.append(use(draw, e.text, holes.choose(e.type, {})))
    return PRELUDE + "\n".join(lines) + "\n"


def generate(count: int, seed: int) -> list[str]:
    """count programs from `programs()`, the same for the same seed (for long runs outside pytest)."""
    import warnings
    from hypothesis import HealthCheck, Phase, given, seed as fix_seed, settings
    texts = []

    @fix_seed(seed)
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(text):
        texts.append(text)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collect()
    return texts[:count]


# --- OCaml ---------------------------------------------------------------------------------------

class Untranslatable(Exception):
    """A program outside what the translation handles (the generator never writes one)."""


def ocaml_string(text: str) -> str:
    return '"' + "".join("\\\\" if ch == "\\" else '\\"' if ch == '"' else "\\n" if ch == "\n" else
                         ch if " " <= ch <= "~" else f"\\{ord(ch):03}" for ch in text) + '"'


def local(name: str) -> str:
    return "v_" + name.replace("%", "p")


def type_text(t, params: dict) -> str:
    """An OCaml type for a field type written in a data declaration."""
    match t:
        case s.TVar(name) if name in params:
            return params[name]
        case s.TName(name, args):
            base = {"Int": "int", "Bool": "bool", "String": "string", "Unit": "unit"}.get(name)
            if base:
                return base
            return (f"({', '.join(type_text(a, params) for a in args)}) " if args else "") + f"t_{name}"
        case s.TTuple(items):
            return "(" + " * ".join(type_text(i, params) for i in items) + ")"
        case s.TFun(arg, result):
            return f"({type_text(arg, params)} -> {type_text(result, params)})"
    raise Untranslatable(f"a field type {t!r}")


def printer_of_field(t, params: dict) -> str:
    """An OCaml printer (nested -> value -> string) for a field type of a data declaration."""
    match t:
        case s.TVar(name):
            return f"show_{name}"
        case s.TName(name, args):
            base = {"Int": "show_int", "Bool": "show_bool", "String": "show_string", "Unit": "show_unit"}
            if name in base:
                return base[name]
            return f"(show_t_{name} {' '.join(printer_of_field(a, params) for a in args)})"
        case s.TTuple(items):
            return tuple_printer([printer_of_field(i, params) for i in items])
        case s.TFun():
            return "show_function"
    raise Untranslatable(f"a field type {t!r}")


def tuple_printer(printers: list) -> str:
    names = [f"x{i}" for i in range(len(printers))]
    shown = ' ^ ", " ^ '.join(f"{p} true {x}" for p, x in zip(printers, names))
    return f'(fun _ ({", ".join(names)}) -> "(" ^ {shown} ^ ")")'


def printer_of(t) -> str:
    """An OCaml printer for a type L recorded (a resolved type): OCaml checks that the value has it."""
    if isinstance(t, TParam):
        return "show_unknown"
    if t.name in ("Int", "Bool", "String", "Unit"):
        return f"show_{t.name.lower()}"
    if t.name == "->":
        return "show_function"
    if t.name == "*":
        return tuple_printer([printer_of(a) for a in t.args])
    return f"(show_t_{t.name} {' '.join(printer_of(a) for a in t.args)})" if t.args else f"show_t_{t.name}"


RUNTIME = r"""
let show_int _ n = string_of_int n
let show_bool _ b = if b then "true" else "false"
let quote s =                                       (* as L writes a string nested in a value *)
  let b = Buffer.create 16 in
  Buffer.add_char b '"';
  String.iter (function '\\' -> Buffer.add_string b "\\\\" | '"' -> Buffer.add_string b "\\\""
                      | '\n' -> Buffer.add_string b "\\n" | '\t' -> Buffer.add_string b "\\t"
                      | c -> Buffer.add_char b c) s;
  Buffer.add_char b '"';
  Buffer.contents b
let show_string nested s = if nested then quote s else s
let show_unit _ () = "()"
let show_function _ _ = "<function>"
let show_unknown _ _ = "?"
"""


def data_text(items: list) -> str:
    """The data declarations as one recursive OCaml type definition, and their printers."""
    datas = [d for d in items if isinstance(d, s.Data)]
    if not datas:
        return ""
    types, printers = [], []
    for d in datas:
        params = {p.name: f"'{p.name}" for p in d.params}
        head = (f"({', '.join(params.values())}) " if params else "") + f"t_{d.name}"
        cases, shows = [], []
        for k in d.constructors:
            fields_ = [type_text(f.type, params) for f in k.fields or []]
            cases.append(f"K_{k.name}" + (f" of {' * '.join(fields_)}" if fields_ else ""))
            if fields_:
                names = [f"f{i}" for i in range(len(fields_))]
                shown = ' ^ ", " ^ '.join(f"{printer_of_field(f.type, params)} true {x}"
                                          for f, x in zip(k.fields, names))
                shows.append(f'K_{k.name} ({", ".join(names)}) -> "{k.name}(" ^ {shown} ^ ")"')
            else:
                shows.append(f'K_{k.name} -> "{k.name}"')
        types.append(f"{head} = " + " | ".join(cases))
        args = " ".join(f"show_{p.name}" for p in d.params)
        printers.append(f"show_t_{d.name} {args} _ v = match v with " + " | ".join(shows))
    return "type " + "\nand ".join(types) + "\n\nlet rec " + "\nand ".join(printers) + "\n"


class Translator:
    """Core expressions to OCaml text; prints with printers for L's recorded types if typed."""

    def __init__(self, typed: bool):
        self.typed = typed

    def atomic(self, e) -> bool:
        return type(e) in (c.Var, c.Lit, c.Lambda)

    def in_order(self, parts: list, build) -> str:
        """Evaluate the parts left to right (OCaml's order is unspecified), then build from them."""
        texts, binds = [], []
        for p in parts:
            t = self.expr(p)
            if self.atomic(p) or len(parts) == 1:
                texts.append(t)
            else:
                name = f"o{len(binds)}_{id(p) % 100000}"
                binds.append(f"let {name} = {t} in ")
                texts.append(name)
        return "(" + "".join(binds) + build(texts) + ")"

    def expr(self, e) -> str:
        match e:
            case c.Lit(value=v):
                if v is True or v is False:
                    return "true" if v else "false"
                if type(v) is int:
                    return f"({v})"
                if type(v) is str:
                    return ocaml_string(v)
                return "()"
            case c.Var(name=name, kind=kind):
                if kind == "builtin":
                    return name
                if kind == "global":
                    return "g_" + name
                return f"(!{local(name)})" if kind == "mutable" else local(name)
            case c.Con(name=name, args=args):
                if not args:
                    return f"K_{name}"
                return self.in_order(args, lambda xs: f"K_{name} ({', '.join(xs)})")
            case c.Tuple(items=items):
                return self.in_order(items, lambda xs: f"({', '.join(xs)})")
            case c.Lambda(param=x, body=body):
                return f"(fun {local(x)} -> {self.expr(body)})"
            case c.App(fn=f, arg=a):
                return self.in_order([f, a], lambda xs: f"({xs[0]} {xs[1]})")
            case c.Prim(op=op, args=args):
                if op == "neg":
                    return f"(~- {self.expr(args[0])})"
                if op == "not":
                    return f"(not {self.expr(args[0])})"
                ocaml = {"==": "=", "!=": "<>", "%": "mod"}.get(op, op)
                if op in ("<", "<=", ">", ">="):
                    return self.in_order(args, lambda xs: f"(({xs[0]} : int) {ocaml} {xs[1]})")
                return self.in_order(args, lambda xs: f"({xs[0]} {ocaml} {xs[1]})")
            case c.If(cond=cond, then=then, orelse=orelse):
                return f"(if {self.expr(cond)} then {self.expr(then)} else {self.expr(orelse)})"
            case c.Match(scrutinee=scrutinee, clauses=clauses):
                arms = " | ".join(f"{self.pattern(p)} -> {self.expr(b)}" for p, b in clauses)
                return f"(match {self.expr(scrutinee)} with {arms})"
            case c.Let(name=x, value=v, body=body):
                return f"(let {local(x)} = {self.expr(v)} in {self.expr(body)})"
            case c.LetVar(name=x, value=v, body=body):
                return f"(let {local(x)} = ref {self.expr(v)} in {self.expr(body)})"
            case c.Assign(target=target, value=v):
                return f"({local(target.name)} := {self.expr(v)})"
            case c.While(cond=cond, body=body):
                return f"(while {self.expr(cond)} do ignore {self.expr(body)} done)"
            case c.Seq(first=first, second=second):
                return f"(ignore {self.expr(first)}; {self.expr(second)})"
            case c.Print(args=args):
                if not self.typed:
                    return "(" + "".join(f"ignore {self.expr(a)}; " for a in args) + "())"
                names = [f"p{i}_{id(a) % 100000}" for i, a in enumerate(args)]
                binds = "".join(f"let {n} = {self.expr(a)} in " for n, a in zip(names, args))
                shown = ' ^ " " ^ '.join(f"{printer_of(a.type)} false {n}" for a, n in zip(args, names))
                return f'({binds}print_string ({shown or chr(34) * 2} ^ "\\n"))'
            case c.Assert(cond=cond):
                return f"(assert {self.expr(cond)})"
        raise Untranslatable(f"an expression {type(e).__name__}")

    def pattern(self, p) -> str:
        match p:
            case s.PVar(name=x):
                return local(x)
            case s.PWild():
                return "_"
            case s.PInt(value=n):
                return f"({n})"
            case s.PUnit():
                return "()"
            case s.PTuple(items=items):
                return "(" + ", ".join(map(self.pattern, items)) + ")"
            case s.PCon(name=name, args=args):
                return f"K_{name}" + (f" ({', '.join(map(self.pattern, args))})" if args else "")
        raise Untranslatable(f"a pattern {type(p).__name__}")


def to_ocaml(program: c.Program, typed: bool) -> str:
    """An OCaml program meaning the same as a resolved core program. Definitions become nested
    lets, one per strongly connected component, so that weak types need not be generalisable at the
    top of an OCaml module; they must come before the statements and after what they read."""
    t = Translator(typed)
    defs = {d.name.name: d for d in program.items if isinstance(d, c.Def)}
    graph = {name: sorted(references(d.value) & defs.keys()) for name, d in defs.items()}
    order = {name: i for i, name in enumerate(defs)}
    lines, seen_statement = [], False
    for component in sorted(strongly_connected(graph), key=lambda comp: min(order[n] for n in comp)):
        recursive = len(component) > 1 or component[0] in graph[component[0]]
        if recursive and not all(type(defs[n].value) is c.Lambda for n in component):
            raise Untranslatable("a recursive group with a non-function")
        bound = [f"g_{n} = {t.expr(defs[n].value)}" for n in component]
        lines.append(("let rec " if recursive else "let ") + "\nand ".join(bound) + " in")
    for item in program.items:
        if isinstance(item, c.Def):
            if seen_statement:
                raise Untranslatable("a definition after a statement")
        elif not isinstance(item, s.Data):
            seen_statement = True
            lines.append(f"ignore {t.expr(item)};")
    return RUNTIME + "\n" + data_text(program.items) + "\nlet () =\n" + "\n".join(lines) + "\n()\n"


def ocaml_message(error: str) -> str:
    """The gist of an error of ocamlc: from its line `Error: …` on, on one line."""
    at = error.find("Error:")
    return " ".join(error[at:].split()) if at >= 0 else " ".join(error.split())


def ocaml_available() -> bool:
    return shutil.which("ocamlc") is not None


@dataclass
class OCamlOutcome:
    accepted: bool
    error: str = ""
    stdout: str = ""
    status: int | None = None


def run_ocaml(text: str, run: bool, timeout: float = 60) -> OCamlOutcome:
    """Compile an OCaml program with ocamlc (warnings off); run it if asked and it compiled."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "p.ml").write_text(text)
        done = subprocess.run(["ocamlc", "-w", "-a", "-o", "p", "p.ml"], cwd=tmp, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode:
            error = done.stderr.strip()
            if "Error: Syntax error" in error or "Unbound" in error:
                raise Untranslatable(f"the translation is not OCaml: {error}\n{text}")
            return OCamlOutcome(False, error)
        if not run:
            return OCamlOutcome(True)
        try:
            ran = subprocess.run(["./p"], cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return OCamlOutcome(True, f"ran longer than {timeout:g} s", "", -9)
        return OCamlOutcome(True, ran.stderr, ran.stdout, ran.returncode)


# --- The judgement ----------------------------------------------------------------------------------

@dataclass
class Verdict:
    """What every judge said of one program, and what is wrong (findings: nothing, if sound)."""
    text: str
    l_accepts: bool = False
    l_error: str = ""
    ocaml: OCamlOutcome | None = None
    interpreter: tuple | None = None         # (stdout, rendered runtime error or None)
    compiled: tuple | None = None            # (stdout, stderr, status)
    findings: list = field(default_factory=list)
    untranslatable: str = ""                 # why there is no OCaml verdict (never, for a generated program)


def interpret(program, timeout: float = 60) -> tuple:
    """(what the reference interpreter prints, its runtime error or None), run in a child process
    with a time limit (a minimiser's cut may loop for ever)."""
    from lcompiler import driver

    def main() -> int:
        out, error = io.StringIO(), ""
        try:
            Interpreter(out).run(program)
        except RunError as stopped:
            error = stopped.render()
        os.write(1, out.getvalue().encode())
        os.write(2, error.encode())
        return 2 if error else 0

    result = driver.run_in_child(main, timeout)
    return result.stdout, (None if result.status == 0 else result.stderr or f"status {result.status}")


def judge(text: str, ocaml: bool = True, compiled: bool = True, timeout: float = 60) -> Verdict:
    from lcompiler import driver
    verdict = Verdict(text)
    source = Source("random.l", text)
    try:
        program = resolve(source)
    except CompileError as error:                     # names or syntax (a minimiser's cut): no types
        verdict.l_error = error.render()
        return verdict
    try:
        infer_program(program)
        verdict.l_accepts = True
    except CompileError as error:
        verdict.l_error = error.render()
    if ocaml:
        try:                                          # a fresh copy without L's types, unless accepted
            translated = to_ocaml(program if verdict.l_accepts else resolve(source), verdict.l_accepts)
            verdict.ocaml = run_ocaml(translated, run=verdict.l_accepts, timeout=timeout)
        except Untranslatable as error:
            verdict.untranslatable = str(error)
        else:
            if verdict.l_accepts and not verdict.ocaml.accepted:
                verdict.findings.append("L accepts, OCaml rejects: " + ocaml_message(verdict.ocaml.error))
    if not verdict.l_accepts:
        return verdict
    verdict.interpreter = interpret(resolve(source), timeout)
    if verdict.interpreter[1] is not None:
        verdict.findings.append(f"the interpreter stopped: {verdict.interpreter[1]}")
    if compiled:
        try:
            result = driver.run_source(source, timeout=timeout)
            verdict.compiled = (result.stdout, result.stderr, result.status)
        except Diagnostic as error:                   # IllTyped, from the stage mono: status 3
            verdict.compiled = ("", error.render(), error.status)
        except Exception as error:                    # what lc reports as an internal compiler error
            verdict.compiled = ("", f"internal compiler error: {type(error).__name__}: {error}", 3)
        if verdict.compiled[2] != 0 or verdict.compiled[1]:
            verdict.findings.append(f"compiled: status {verdict.compiled[2]}: {verdict.compiled[1][:300]}")
        elif verdict.compiled[0] != verdict.interpreter[0]:
            verdict.findings.append("compiled and interpreted outputs differ")
    if verdict.ocaml is not None and verdict.ocaml.accepted:
        if verdict.ocaml.status != 0:
            verdict.findings.append(f"OCaml stopped: status {verdict.ocaml.status}: {verdict.ocaml.error[:300]}")
        elif verdict.ocaml.stdout != verdict.interpreter[0]:
            verdict.findings.append("OCaml and interpreted outputs differ")
    return verdict


__all__ = ["PRELUDE", "programs", "generate", "to_ocaml", "ocaml_available", "run_ocaml", "judge", "Verdict"]
