"""Lexer and parser (chapter 4a): separation, round trips on random trees, fuzzing."""

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lcompiler import syntax as s
from lcompiler.errors import CompileError, Source
from lcompiler.syntax import Sep, parse, pretty, tokenize

ROOT = Path(__file__).resolve().parent.parent


def seps(text: str) -> list[tuple[str, Sep, Sep]]:
    return [(t.text or t.kind, t.before, t.after) for t in tokenize(Source("t.l", text))]


def test_the_four_separations():
    toks = seps("f(x) + y;z\nw /* c\n */ v // comment\nu")
    assert toks[0] == ("f", Sep.NEWLINE, Sep.STUCK)
    assert toks[1] == ("(", Sep.STUCK, Sep.STUCK)
    assert toks[3][2] == Sep.WHITESPACE and toks[4] == ("+", Sep.WHITESPACE, Sep.WHITESPACE)
    assert toks[5] == ("y", Sep.WHITESPACE, Sep.EXPLICIT)
    assert toks[6] == ("z", Sep.EXPLICIT, Sep.NEWLINE)
    assert toks[7] == ("w", Sep.NEWLINE, Sep.WHITESPACE), "a block comment is whitespace, even over lines"
    assert toks[8] == ("v", Sep.WHITESPACE, Sep.NEWLINE), "the line break after // counts"
    assert toks[-1] == ("eof", Sep.NEWLINE, Sep.NEWLINE)


def test_line_breaks_inside_parentheses_are_whitespace_but_not_inside_braces():
    toks = seps("f(a,\n b) {\n c\n}")
    assert [t for t in toks if t[0] == "b"][0][1] == Sep.WHITESPACE
    assert [t for t in toks if t[0] == "c"][0][1] == Sep.NEWLINE
    toks = seps("(\n{\nx\n}\n)")
    assert [t for t in toks if t[0] == "x"][0][1] == Sep.NEWLINE
    assert [t for t in toks if t[0] == ")"][0][1] == Sep.WHITESPACE


def expr(text: str):
    (item,) = parse(Source("e.l", text)).items
    return item


def test_separation_decides_calls_statements_and_minus():
    assert isinstance(expr("f(x)"), s.Call)
    assert len(parse(Source("t.l", "f\n(x)")).items) == 2
    with pytest.raises(CompileError, match="stuck"):
        parse(Source("t.l", "f (x)"))
    assert expr("a -1") == s.Binary("-", s.Var("a"), s.Int(1))
    assert expr("if (c) -1 else -2") == s.If(s.Var("c"), s.Unary("-", s.Int(1)), s.Unary("-", s.Int(2)))
    assert expr("-x.f") == s.Unary("-", s.Dot(s.Var("x"), s.Var("f"), None))
    assert expr("a +\n b") == s.Binary("+", s.Var("a"), s.Var("b"))
    with pytest.raises(CompileError, match="cannot start with the operator"):
        parse(Source("t.l", "a\n+ b"))
    assert isinstance(expr("if (c) a\nelse b"), s.If)
    assert isinstance(expr("x\n  .f\n  .g"), s.Dot)
    assert expr("7.f") == s.Dot(s.Int(7), s.Var("f"), None)


def test_precedence_and_associativity():
    assert expr("a || b && c == d < e + f * g") == s.Binary(
        "||", s.Var("a"), s.Binary("&&", s.Var("b"), s.Binary("==", s.Var("c"), s.Binary(
            "<", s.Var("d"), s.Binary("+", s.Var("e"), s.Binary("*", s.Var("f"), s.Var("g")))))))
    assert expr("a - b - c") == s.Binary("-", s.Binary("-", s.Var("a"), s.Var("b")), s.Var("c"))
    assert expr("if (c) a else f(x) + 1").orelse == s.Binary("+", s.Call(s.Var("f"), [s.Var("x")]), s.Int(1))


def test_the_printer_resolves_the_ambiguities_the_round_trip_test_found():
    for tree in [s.Call(s.Dot(s.Int(0), s.Var("a"), None), []), s.Dot(s.Int(0), s.Var("a"), []),
                 s.Call(s.Con("Nil", None), [s.Int(1)]),
                 s.If(s.Int(0), s.While(s.Var("a"), s.If(s.Var("b"), s.Int(1), None)), s.Int(2)),
                 s.If(s.Int(0), s.Assign(s.Var("x"), s.If(s.Var("b"), s.Int(1), None)), s.Int(2))]:
        program = s.Program([tree])
        assert parse(Source("t.l", pretty(program))) == program, pretty(program)


def test_blocks_functions_clauses_and_curried_sugar():
    assert isinstance(expr("{ a; b }"), s.Block)
    f = expr("{ a, b -> a }")
    assert isinstance(f, s.Function) and f.clauses[0].patterns == [s.PVar("a"), s.PVar("b")]
    curried = expr("{ a -> b -> a }")
    assert isinstance(curried.clauses[0].body, s.Clause)
    two = expr("{ 0 -> 1\n n -> n }")
    assert len(two.clauses) == 2
    same_line_statements = expr("{ x ->\n  print(x)\n  x }")
    assert len(same_line_statements.clauses[0].body) == 2


NAMES = st.sampled_from(["a", "b", "x", "y", "f", "go?", "a_1", "true", "print"])
CONS = st.sampled_from(["Nil", "Cons", "Some", "Leaf", "A"])
OPS = st.sampled_from(sorted(s.BINARY))


def patterns():
    leaf = st.one_of(st.builds(s.PVar, NAMES), st.just(s.PWild()), st.builds(s.PInt, st.integers(-50, 2**63 - 1)),
                     st.just(s.PUnit()), st.builds(s.PCon, CONS, st.none()))
    return st.recursive(leaf, lambda p: st.one_of(
        st.builds(s.PTuple, st.lists(p, min_size=2, max_size=3)),
        st.builds(s.PCon, CONS, st.lists(p, min_size=1, max_size=3))), max_leaves=6)


def expressions():
    leaf = st.one_of(
        st.builds(s.Int, st.integers(0, 2**63 - 1)),
        st.builds(s.Str, st.text(st.characters(blacklist_categories=["Cs", "Cc"]) | st.sampled_from("\n\t\"\\"),
                                 max_size=6)),
        st.just(s.Unit()), st.builds(s.Var, NAMES), st.just(s.Wildcard()), st.builds(s.Con, CONS, st.none()))

    def compound(e):
        statements = st.lists(st.one_of(e, st.builds(s.Let, patterns(), e), st.builds(s.VarDecl, st.builds(s.Var, NAMES), e)),
                              min_size=1, max_size=3)
        clause = st.deferred(lambda: st.builds(s.Clause, st.lists(patterns(), min_size=1, max_size=2),
                                               statements | clause))
        callee = e.filter(lambda x: not isinstance(x, s.Con))
        return st.one_of(
            st.builds(s.Con, CONS, st.lists(e, min_size=1, max_size=3)),
            st.builds(s.Tuple, st.lists(e, min_size=2, max_size=3)),
            st.builds(s.Call, callee, st.lists(e, max_size=3)),
            st.builds(s.Dot, e, st.builds(s.Var, NAMES), st.none() | st.lists(e, max_size=2)),
            st.builds(s.DotMatch, e, st.lists(clause, min_size=1, max_size=2)),
            st.builds(s.Unary, st.sampled_from(["-", "!"]), e),
            st.builds(s.Binary, OPS, e, e),
            st.builds(s.If, e, e, st.none() | e),
            st.builds(s.Match, e, st.lists(clause, min_size=1, max_size=2)),
            st.builds(s.While, e, e),
            st.builds(s.Assign, st.builds(s.Var, NAMES), e),
            st.builds(s.Block, statements),
            st.builds(s.Function, st.lists(clause, min_size=1, max_size=3)),
            st.builds(s.Try, st.builds(s.Block, statements), st.lists(clause, min_size=1, max_size=2)))
    return st.recursive(leaf, compound, max_leaves=12)


def types():
    leaf = st.one_of(st.builds(s.TName, st.sampled_from(["Int", "Bool", "String", "Unit", "T"]), st.just([])),
                     st.builds(s.TVar, st.sampled_from(["a", "b"])))
    return st.recursive(leaf, lambda t: st.one_of(
        st.builds(s.TName, st.sampled_from(["List", "Pair"]), st.lists(t, min_size=1, max_size=2)),
        st.builds(s.TTuple, st.lists(t, min_size=2, max_size=3)),
        st.builds(s.TFun, t, t)), max_leaves=5)


def items():
    field = st.builds(s.Field, st.none() | st.sampled_from(["x", "y"]), types())
    data = st.one_of(
        st.builds(s.Data, st.sampled_from(["T", "List"]), st.lists(st.builds(s.TVar, st.sampled_from(["a", "b"])), max_size=2),
                  st.lists(st.builds(s.Constructor, CONS, st.none() | st.lists(field, min_size=1, max_size=2)),
                           min_size=1, max_size=3)),
        st.builds(lambda name, fs: s.Data(name, [], [s.Constructor(name, fs)], True),
                  st.sampled_from(["Point", "Box"]), st.lists(field, min_size=1, max_size=2)))
    definition = st.builds(s.Def, st.builds(s.Var, NAMES), st.none() | st.lists(patterns(), max_size=3), expressions())
    exception = st.builds(s.ExceptionDecl, CONS, st.none() | st.lists(field, min_size=1, max_size=2))
    return st.one_of(definition, data, exception, expressions())


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.builds(s.Program, st.lists(items(), min_size=1, max_size=4)))
def test_random_trees_print_to_text_that_parses_back_to_them(program):
    text = pretty(program)
    assert parse(Source("random.l", text)) == program, text


TOKEN_TEXTS = (["def", "data", "let", "var", "if", "else", "match", "while", "exception", "try", "catch", "x", "f", "Cons", "Nil", "_",
                "0", "42", '"s"', "()"] + s.OPERATORS)
SEPARATORS = ["", " ", "\n", "; ", "\n  "]


@pytest.mark.slow
@settings(max_examples=1500, deadline=2000)
@given(st.lists(st.tuples(st.sampled_from(TOKEN_TEXTS), st.sampled_from(SEPARATORS)), max_size=30))
def test_random_token_sequences_parse_or_fail_cleanly(tokens):
    text = "".join(t + sep for t, sep in tokens)
    try:
        parse(Source("fuzz.l", text))
    except CompileError as error:
        assert error.span is not None and error.render().startswith("fuzz.l:")


CORPUS_TEXTS = [p.read_bytes() for p in sorted((ROOT / "tests" / "corpus").glob("*/*.l"))]


@pytest.mark.slow
@settings(max_examples=1500, deadline=2000)
@given(st.data())
def test_mutated_corpus_programs_parse_or_fail_cleanly(data):
    program = bytearray(data.draw(st.sampled_from(CORPUS_TEXTS), label="program"))
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        at = data.draw(st.integers(0, len(program)), label="position")
        kind = data.draw(st.sampled_from(["insert", "delete", "replace"]), label="kind")
        byte = data.draw(st.integers(0, 255) | st.sampled_from(list(b"(){};\n\"-+.,")), label="byte")
        if kind == "insert":
            program.insert(at, byte)
        elif at < len(program):
            if kind == "delete":
                del program[at]
            else:
                program[at] = byte
    text = bytes(program).decode("utf-8", errors="replace")
    try:
        parse(Source("mutant.l", text))
    except CompileError as error:
        line, col = error.span.source.line_col(error.span.start)
        assert line >= 1 and col >= 1 and error.render().startswith(f"mutant.l:{line}:{col}: error: ")


@pytest.mark.slow
def test_deep_nesting_is_an_error_or_a_tree_not_a_crash():
    parse(Source("deep.l", "print(" + "(" * 2000 + "1" + ")" * 2000 + ")"))
    with pytest.raises(CompileError, match="nested too deeply"):
        parse(Source("deeper.l", "print(" + "(" * 100000 + "1" + ")" * 100000 + ")"))
    long_chain = "print(" + " + ".join(["1"] * 20000) + ")"
    parse(Source("long.l", long_chain))


def test_pygments_finds_the_l_lexer():
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Keyword, Name
    lexer = get_lexer_by_name("l")
    tokens = list(lexer.get_tokens("def f = { x -> print(x) }"))
    assert (Keyword, "def") in tokens and (Name.Builtin, "print") in tokens


def test_the_highlighter_knows_every_keyword_and_raise():
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Keyword, Name
    lexer = get_lexer_by_name("l")
    for word in sorted(s.KEYWORDS):
        assert (Keyword, word) in list(lexer.get_tokens(f"{word} x")), word
    assert (Name.Builtin, "raise") in list(lexer.get_tokens("raise(E)"))


def test_exception_items_and_try_parse_print_and_parse_back():
    text = ("exception Failure(why: String)\nexception NotFound\n"
            "def f(x) = try { g(x) }\n  catch {\n  Failure(s) -> 1\n  _ -> raise(NotFound)\n}\n")
    tree = parse(Source("t.l", text))
    assert isinstance(tree.items[0], s.ExceptionDecl) and tree.items[0].fields[0].name == "why"
    assert tree.items[1] == s.ExceptionDecl("NotFound", None)
    body = tree.items[2].value
    assert isinstance(body, s.Try) and len(body.clauses) == 2
    assert parse(Source("again.l", pretty(tree))) == tree
    for bad, message in [("try { 1 }", "expected 'catch' after the block of 'try'"),
                         ("try { 1 }; catch { _ -> 2 }", "cannot separate the block of a try from its catch"),
                         ("catch { _ -> 2 }", "catch without a try"),
                         ("try { x -> 1 } catch { _ -> 2 }", "the body of a try is a block"),
                         ("try { 1 } catch { }", "'catch' needs at least one clause"),
                         ("exception E()", "E() is not allowed"),
                         ("def f() = { exception E\n1 }", "exceptions are declared at the top level")]:
        with pytest.raises(CompileError, match=re.escape(message)):
            parse(Source("bad.l", bad))
