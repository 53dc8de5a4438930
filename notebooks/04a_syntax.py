# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 4a. Reading L: separation, tokens and a Pratt parser
#
# The front end of the compiler turns the text of an L program into a tree:
# a lexer cuts the text into tokens and records, between every two tokens,
# how strongly they are *separated*; a Pratt parser builds the syntax tree
# from the tokens, deciding where statements end, what is a call and what a
# subtraction from the separations alone; a printer writes the tree back as L.
# Every node of the tree remembers where in the text it came from, so that
# every error — here and in every later stage — can point at it.

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** [chapter 4](04_pipeline.ipynb): the pipeline; from the
# workshop, [appendix A](A_errors.ipynb)'s named source text (`Source`,
# `Span`) and located errors (`CompileError`, with notes, several at a
# time), and its drawings (`lcompiler.drawing`); [appendix
# B](B_support.ipynb)'s paused collector and recursion limit.
#
# **Builds:** the module `lcompiler.syntax` — the lexer `tokenize`, the syntax
# tree, the parser `parse`, the printer `pretty` and `dump`; and the first
# two stages of [chapter 4](04_pipeline.ipynb)'s pipeline, `tokens` and
# `ast`, which `lc show` prints. [Chapter 4b](04b_meaning.ipynb) takes the
# tree from here.
#
# </div>
#
# [Chapter 4](04_pipeline.ipynb) wrote the compiler's stages down on one
# page; this chapter and the next build the first of them. The next,
# [4b](04b_meaning.ipynb), removes the syntactic sugar, checks names, and gives
# L programs their meaning with a reference interpreter. The language itself is
# described for readers in [the language reference](../language.md), the
# exact contract the compiler meets; this chapter implements its
# [grammar](../language.md#grammar) a group of rules at a time. The design
# of the lexer and the parser follows l-lang, the original L compiler, whose
# lexer records how strongly each token is separated from its neighbours and
# whose Pratt parser reads it (the files `src/parser/token.mli` and
# `src/parser/tdop.mli` of [its code](../bibliography.md#the-l-blog)):
# separation is what makes L's C-like surface work without semicolons.

# %%
#| default_exp syntax

# %% [markdown]
# ## What this stage promises
#
# - `tokenize(source)` returns the list of tokens of a `Source` (appendix
#   A's named text), ending with an `eof` token. Each token has a kind, its text,
#   its `Span`, and its separation from the token before and after it.
# - `parse(source)` returns a `Program`: a list of top-level items whose every
#   node is a dataclass carrying its span. Or it raises a `CompileError` that
#   reports every mistake it found — after a mistake it skips to the next
#   top-level item and goes on — each with a message that says what is
#   wrong there, most often what was expected; and never any other
#   exception, whatever the input.
# - `pretty(program)` prints the tree back as L text, and parsing that text
#   gives the same tree again (spans aside).
# - `dump(node)` shows the tree's structure, for `lc show ast`.
#
# ## Separation
#
# In L, whether two tokens are separated by nothing, by spaces, by a line break
# or by a `;` changes what the program means. Four degrees, from weakest to
# strongest (l-lang calls them `Stuck`, `Normal`, `Strong` and `Explicit`):
#
# | separation | between the tokens | examples |
# |---|---|---|
# | `STUCK` | nothing at all | `f(x)`: a call; `x.f`; `-1` after an operator |
# | `WHITESPACE` | spaces, tabs, comments | `a - 1`, `f (x)` (an error: say what you mean) |
# | `NEWLINE` | at least one line break, no `;` | ends a statement, unless the line ends with an operator |
# | `EXPLICIT` | a `;` | ends a statement, always |
#
# With separations recorded, the parser answers its hard questions locally,
# without ever trying one reading and backing up to try another:
#
# - **Does a statement end here?** Before an infix operator, a `NEWLINE` or
#   `EXPLICIT` separation ends the expression; so `a` then a line starting with
#   `+ b` is two statements, and the second is an error. After an operator (or
#   `=`, `->`, `,`, `(`, `{`) the parser needs an operand, and a line break is
#   skipped as it would be anywhere else.
# - **Is this a call?** `f(x)` only when `(` is `STUCK` to `f`. `f (x)` is an
#   error that says so; `f` then a line `(x)` is two statements.
# - **Is this `-` a negation or a subtraction?** Where an operand is expected,
#   `-` is prefix; where an operator is expected it is infix: `a -1` subtracts,
#   `if (c) -1 else -2` negates. (Once the line-break rule above has said
#   where the statement ends — `a` then a line `-1` is two statements, the
#   second a negation — this one needs no separation: the Pratt parser below
#   knows at every moment which of the two it expects.)
#
# One rule makes long expressions comfortable: inside parentheses a line break
# is just whitespace (as in Python), so an argument list may span lines; inside
# braces and at the top level, line breaks separate again. The lexer applies
# that rule, since it knows which bracket is open.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: separation, not semicolons or layout</p>
#
# Three other ways to end statements without writing `;` everywhere are
# common. Go's lexer *inserts* a `;` at the end of a line whose last token
# could end a statement; JavaScript inserts one when the parser is stuck;
# Haskell's layout rule inserts `;` and braces from the columns where lines
# start. (Python ends a statement at a line break outside brackets, as L
# does, and uses the columns for its blocks.) Go's rule is the closest to
# ours, but it is decided by the token before the line break alone, so a line
# cannot begin with `.` or `else` as it can in L. JavaScript's rule is decided
# by a parse error, and famously reads `a` then a line `(b)` as a call. The
# layout rule ties meaning to columns. Recording the separation on every token,
# and letting each rule of the parser look at the one it cares about, keeps
# every decision local and written in one place — at the cost of a lexer that
# counts brackets.
#
# </div>

# %%
#| export
import re
from dataclasses import dataclass, field, fields, is_dataclass
from enum import IntEnum

from lcompiler.errors import CompileError, Note, Source, Span, raise_errors
from lcompiler.support import NESTING_LIMIT, collector_paused, recursion_limit


class Sep(IntEnum):
    """How strongly two neighbouring tokens are separated (weakest first)."""
    STUCK = 0
    WHITESPACE = 1
    NEWLINE = 2
    EXPLICIT = 3


@dataclass(slots=True)
class Token:
    kind: str        # 'int', 'string', 'name', 'Name', '_', 'eof', a keyword or an operator
    text: str
    span: Span
    before: Sep = Sep.NEWLINE
    after: Sep = Sep.NEWLINE
    value: object = None    # the int of an int token, the decoded text of a string token

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.span!r})"


# %% [markdown]
# ## Mistakes, several at a time
#
# A parser that stops at the first mistake costs its user a compilation per
# mistake. This one, like the checks of names (chapter 4b) and of types
# (chapter 5) after it, reports every mistake it finds, in the order of the
# source, where going on cannot invent mistakes that are not there; and an error can carry **notes**, other
# places in the program that explain it (an unclosed bracket is reported
# where the parser gave up, with a note at the bracket left open). The
# classes that do it — `CompileError` with its notes, `CompileErrors` for
# several, and `raise_errors`, which a stage calls at its end — belong to
# the error format of the whole book, and are in [appendix
# A](A_errors.ipynb#notes-and-several-mistakes-at-a-time), with examples.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: all the errors, in the order of the text</p>
#
# The simplest compiler stops at its first mistake; many
# compilers report mistakes in the order they happen to find them. Stopping
# at the first costs the programmer a compilation per mistake. Reporting in
# the order found makes the order depend on the compiler's insides — here
# the lexer runs over the whole file before the parser starts, so a bad
# character on line 9 would be reported before a missing parenthesis on
# line 2. Sorting by position gives the order a reader expects. The price
# of going on after a mistake is the risk of *cascades*, errors that exist
# only because of an earlier one; this chapter keeps that risk low in two
# ways shown below: the parser starts again only at a safe place, and
# `parse` drops a syntax error that follows a lexical error inside the same
# item, since it is likely the lexer's making.
#
# </div>

# %% [markdown]
# ## The lexer
#
# One regular expression recognises every kind of lexeme; the lexer walks the
# text with it, one match at a time. Between two tokens it accumulates the
# strongest separation seen: a `;` (which is never a token — it only
# separates), a line break, or spaces and comments. A `//` comment runs to the
# end of the line, and the line break after it still counts; a `/* … */`
# comment counts as whitespace even when it spans lines.
#
# The lexical rules of the contract, in order of the alternatives: integer
# literals (a leading zero is an error, and so is a value that does not fit in
# a signed 64-bit integer — even `9223372036854775808` right after a `-`; the
# smallest Int is written `-9223372036854775807 - 1`); strings on one line
# with the escapes `\n \t \\ \"`, and without the character NUL, which the
# C strings of the compiled code could not hold; variables `[a-z_][A-Za-z0-9_]*` with an
# optional final `?`; constructor and type names starting with a capital; `_`
# alone, the wildcard; keywords; operators, longest first. In the EBNF of
# [the language reference](../language.md#tokens), they are:
#
# ```text
# int       = "0" | nonzero { digit } ;                 (* at most 9223372036854775807 *)
# string    = '"' { character | escape } '"' ;          (* on one line *)
# escape    = "\n" | "\t" | "\\" | '\"' ;
# name      = ( lower | "_" ) { letter | digit | "_" } [ "?" ] ;   (* not a keyword, not "_" alone *)
# Name      = upper { letter | digit | "_" } ;
# wildcard  = "_" ;
# keyword   = "def" | "data" | "let" | "var" | "if" | "else" | "match" | "while"
#           | "exception" | "try" | "catch" ;
# ```
#
# The tables of the lexer, and its one regular expression: a named group per
# kind of lexeme, tried in order. The groups `open_comment`, `open_string`
# and `bad` match only mistakes, so that the lexer can say what is wrong.

# %%
#| export
KEYWORDS = {"def", "data", "let", "var", "if", "else", "match", "while", "exception", "try", "catch"}
ITEM_KEYWORDS = ("def", "data", "exception")     # they can only begin a top-level item
OPERATORS = [":=", "->", "==", "!=", "<=", ">=", "&&", "||",
             "+", "-", "*", "/", "%", "<", ">", "=", "!", "(", ")", "{", "}", ",", ".", ":"]
MAX_INT = 2**63 - 1
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}

_LEXEME = re.compile("|".join([
    r"(?P<newline>\n)",
    r"(?P<space>[ \t\r\f\v]+)",
    r"(?P<semicolon>;)",
    r"(?P<line_comment>//[^\n]*)",
    r"(?P<block_comment>/\*(?s:.*?)\*/)",
    r"(?P<open_comment>/\*)",
    r"(?P<int>[0-9][A-Za-z0-9_]*)",
    r'(?P<string>"(?:[^"\\\n]|\\.)*")',
    r'(?P<open_string>")',
    r"(?P<name>[a-z_][A-Za-z0-9_]*\??)",
    r"(?P<Name>[A-Z][A-Za-z0-9_]*)",
    "(?P<op>" + "|".join(re.escape(op) for op in OPERATORS) + ")",
    r"(?P<bad>.)",
]))


# %% [markdown]
# A string literal is decoded once, here, so that later stages see its value.
# A mistake in it — an unknown escape, a NUL — is recorded with the span of
# that escape or that character alone, and decoding goes on.

# %%
#| export
def _decode_string(text: str, span: Span, errors: list) -> str:
    out, i = [], 1
    while i < len(text) - 1:
        c = text[i]
        if c == "\0":
            at = Span(span.source, span.start + i, span.start + i + 1)
            errors.append(CompileError("a string cannot contain the character NUL (U+0000)", at))
        if c == "\\":
            if text[i + 1] not in ESCAPES:
                at = Span(span.source, span.start + i, span.start + i + 2)
                errors.append(CompileError(f"unknown escape \\{text[i + 1]} (the escapes are \\n \\t \\\\ \\\")", at))
            out.append(ESCAPES.get(text[i + 1], ""))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


# %% [markdown]
# A quick check: the text of a literal, quotes included, decodes to its
# value. The raw string `r'"tab\there"'` holds a backslash followed by `t`;
# the value holds one tab character, which Python shows as `\t` when it
# prints a string's `repr`. No span is needed, since nothing is wrong.

# %%
_decode_string(r'"tab\there"', None, [])

# %% [markdown]
# An integer lexeme is matched together with any letters glued to it
# (`12ab`), so that the error names the whole thing instead of splitting it
# into `12` and `ab`. A malformed number becomes 0 after its error is
# recorded, so that parsing can go on; a string left open runs to the end
# of its line.

# %%
#| export
def _int_value(lexeme: str, span: Span, errors: list) -> int:
    """The value of an int lexeme; or 0, after adding what is wrong with it to errors."""
    if not lexeme.isdigit():
        errors.append(CompileError(f"{lexeme} is not a number (a number is made of digits only)", span))
    elif len(lexeme) > 1 and lexeme[0] == "0":
        errors.append(CompileError("a number cannot start with 0", span))
    elif int(lexeme) > MAX_INT:
        errors.append(CompileError("this number does not fit in a 64-bit integer", span))
    else:
        return int(lexeme)
    return 0


def _unclosed_string(source: Source, span: Span, errors: list) -> tuple[str, Span]:
    """The lexeme and span of a string opened at span and not closed: to the end of its line."""
    errors.append(CompileError("this string is not closed on its line", span))
    end = source.text.find("\n", span.end)
    span = Span(source, span.start, len(source.text) if end < 0 else end)
    return source.text[span.start:span.end], span


# %% [markdown]
# `tokenize` is the entry point. It pauses Python's cyclic garbage collector
# while it works (why, is told with `parse`, below), and raises the lexical
# mistakes it found — unless the caller gives it a list to collect them in,
# as the pipeline does, so that the parser can report them together with its
# own.

# %%
#| export
def tokenize(source: Source, errors: list | None = None) -> list[Token]:
    """The tokens of a source, each with its separation before and after; then 'eof'. Its lexical
    mistakes are raised, or, given a list errors, added to it while lexing goes on."""
    found = [] if errors is None else errors
    with collector_paused():
        tokens = _tokenize(source, found)
    if errors is None:
        raise_errors(found)
    return tokens


# %% [markdown]
# `_tokenize` is the loop. Separators only raise `sep`, the strongest
# separation seen since the last token; a token records it as its `before`,
# and as the `after` of the token before it. Brackets are pushed and popped
# as they pass, so that a line break inside `(` counts as whitespace. The
# loop runs once per lexeme, blanks included, so it is written for speed:
# a blank makes no `Span`, the methods it calls are looked up once, and a
# token is made with its fields given by position (its `after` is set when
# the next token comes).

# %%
#| export
def _tokenize(source: Source, errors: list) -> list[Token]:
    """The tokens of a source; its lexical mistakes are added to errors, and lexing goes on."""
    text, tokens = source.text, []
    match, size = _LEXEME.match, len(text)
    STUCK, WHITESPACE, NEWLINE, EXPLICIT = Sep.STUCK, Sep.WHITESPACE, Sep.NEWLINE, Sep.EXPLICIT
    sep = NEWLINE                 # the start of the file separates like a line break
    brackets = []                 # open brackets: inside '(' a line break is only whitespace
    pos, line_break = 0, False    # line_break: a line break since the last token
    while pos < size:
        m = match(text, pos)
        kind, start, pos = m.lastgroup, pos, m.end()
        if kind == "space" or kind == "line_comment" or kind == "block_comment":
            if sep < WHITESPACE:
                sep = WHITESPACE
            continue
        if kind == "newline":
            strength = WHITESPACE if brackets and brackets[-1] == "(" else NEWLINE
            if sep < strength:
                sep = strength
            line_break = True
            continue
        if kind == "semicolon":
            sep = EXPLICIT
            continue
        lexeme, span = m.group(), Span(source, start, pos)
        if kind == "open_comment":    # the rest of the file is a comment
            errors.append(CompileError("this comment is never closed with */", span))
            break
        if kind == "bad":
            errors.append(CompileError(f"unexpected character {lexeme!r}", span))
            sep = max(sep, WHITESPACE)
            continue
        value = None
        if kind == "open_string":     # a string to the end of the line
            lexeme, span = _unclosed_string(source, span, errors)
            kind, value, pos = "string", "", span.end
        elif kind == "int":
            value = _int_value(lexeme, span, errors)
        elif kind == "string":
            value = _decode_string(lexeme, span, errors)
        elif kind == "name":
            kind = lexeme if lexeme in KEYWORDS else "_" if lexeme == "_" else "name"
            if kind in ITEM_KEYWORDS and line_break and brackets:    # they begin an item: close what
                brackets.clear()                                       # a mistake left open
                sep = max(sep, NEWLINE)
        elif kind == "op":
            kind = lexeme
            if lexeme in "({":
                brackets.append(lexeme)
            elif lexeme in ")}" and brackets:
                brackets.pop()
        if tokens:
            tokens[-1].after = sep
        tokens.append(Token(kind, lexeme, span, sep, NEWLINE, value))   # before, after, value
        sep, line_break = STUCK, False
    end = len(text)
    eof = Token("eof", "", Span(source, end, end), before=max(sep, NEWLINE))
    if tokens:
        tokens[-1].after = eof.before
    tokens.append(eof)
    return tokens


# %% [markdown]
# A few decisions hide in there. The bracket stack is only advisory: a `)`
# without its `(` is not the lexer's problem, the parser will say what it
# expected instead. And a lexical mistake does not stop the
# lexer: it records the error and carries on with something harmless in the
# place of the mistake — nothing for a stray character, the number 0 for a
# malformed number, a string running to the end of the line for an unclosed
# one — so that the parser can still look for mistakes further on. For the
# same reason, a `def`, `data` or `exception` at the start of a line closes whatever
# brackets are still open: they can only begin a top-level item, so a
# bracket open before them was left open by mistake, and without this rule
# a `(` left open would make every line break after it, to the end of the
# file, mere whitespace.
#
# Here are the tokens of a small function, with their separations before and
# after (`·` stuck, `_` whitespace, `⏎` newline, `;` explicit):

# %%
#| export
SEP_MARK = {Sep.STUCK: "·", Sep.WHITESPACE: "_", Sep.NEWLINE: "⏎", Sep.EXPLICIT: ";"}


def show_tokens(tokens: list[Token]) -> str:
    """One line per token: position, separation before and after, kind, text."""
    lines = []
    for t in tokens:
        line, col = t.span.source.line_col(t.span.start)
        text = "" if t.kind == t.text or not t.text else f" {t.text}"
        lines.append(f"{line:>3}:{col:<3} {SEP_MARK[t.before]}{SEP_MARK[t.after]}  {t.kind}{text}")
    return "\n".join(lines)


# %% [markdown]
# `show_tokens` writes one line per token: line and column, the separation
# before and after the token as two marks, its kind, and its text when the
# text says more than the kind (a name, a number; not `def` or `(`). It is
# also what `lc show tokens` prints, as the end of this chapter shows. The
# sample has a function of two clauses, a comment, and two statements on one
# line separated by `;`:

# %%
sample = Source("sample.l", """def fact = {
  0 -> 1
  n -> n * fact(n - 1)   // a comment
}
print(fact(5)); print(-1)""")
print(show_tokens(tokenize(sample)))

# %% [markdown]
# `fact(` is stuck (`··` on the `(` of line 3), so it will be a call, and so
# will `print(` and `fact(` on line 5; the `;` never appears as a token but
# makes the separation after `)` explicit (`·;`); the line break ending the
# comment separates `)` from the `}` on the line after it (`·⏎`, then `⏎⏎`).
#
# Notice too the two ends of the text: the first token has a line break
# *before* it (`⏎_  def`), and the last `)` has one *after* it (`·⏎`),
# although the text has no final newline — the start and the end of the
# file separate as a line break does, so the first and last statements need
# no special case. `eof` is a token of its own, so the parser always has
# something to look at.
#
# ## The syntax tree
#
# The tree has a dataclass per construct. Every node has a `span`
# field, left out of comparisons (`compare=False`), so two trees that differ
# only in where their nodes came from are equal — which is what the
# round-trip test needs. The tree keeps all of L's sugar: `def f(a, b)`,
# `e.f(x)`, `e.{ … }`, curried clauses and `if` without `else` are still
# visible here, so that it can be printed back as the programmer wrote it.
# [Chapter 4b](04b_meaning.ipynb) removes the sugar.
#
# **Expressions.** First the leaves — literals, names, the wildcard — and the
# two ways to build data: a constructor applied (or not) to arguments, and a
# tuple.

# %%
#| export
def _span():
    return field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class Int:
    value: int
    span: Span = _span()


@dataclass(slots=True)
class Str:
    value: str
    span: Span = _span()


@dataclass(slots=True)
class Unit:
    span: Span = _span()


@dataclass(slots=True)
class Var:
    name: str
    span: Span = _span()


@dataclass(slots=True)
class Wildcard:                # `_`: parsed as an expression, valid only as a pattern
    span: Span = _span()


@dataclass(slots=True)
class Con:                     # `Nil` (args None) or `Cons(1, Nil)`
    name: str
    args: list | None
    span: Span = _span()


@dataclass(slots=True)
class Tuple:                   # (e1, …, en), n ≥ 2
    items: list
    span: Span = _span()


# %% [markdown]
# Then the operations: a call, the `.` forms of reverse application, and the
# prefix and infix operators.

# %%
#| export
@dataclass(slots=True)
class Call:                    # f(e1, …, en), f{ … }
    fn: object
    args: list
    span: Span = _span()


@dataclass(slots=True)
class Dot:                     # e.f (args None), e.f(a, b), e.f{ … }
    receiver: object
    name: Var
    args: list | None
    span: Span = _span()


@dataclass(slots=True)
class DotMatch:                # e.{ clauses }
    receiver: object
    clauses: list
    span: Span = _span()


@dataclass(slots=True)
class Unary:                   # -e, !e
    op: str
    operand: object
    span: Span = _span()


@dataclass(slots=True)
class Binary:                  # e1 op e2, including && and ||
    op: str
    left: object
    right: object
    span: Span = _span()


# %% [markdown]
# Control: `if`, `match`, `while`, and assignment. `while` and `:=` are
# expressions of type `Unit` in this implementation, so
# `if (c) x := 1 else x := 2` and `if (done) () else while (…) …` need no
# braces.

# %%
#| export
@dataclass(slots=True)
class If:                      # if (c) e1 else e2; orelse None without else
    cond: object
    then: object
    orelse: object | None
    span: Span = _span()


@dataclass(slots=True)
class Match:                   # match (e) { clauses }
    scrutinee: object
    clauses: list
    span: Span = _span()


@dataclass(slots=True)
class While:                   # while (c) body
    cond: object
    body: object
    span: Span = _span()


@dataclass(slots=True)
class Assign:                  # x := e
    target: Var
    value: object
    span: Span = _span()


# %% [markdown]
# Braces hold either a block of statements or a function made of clauses;
# a clause has its patterns and a body.

# %%
#| export
@dataclass(slots=True)
class Block:                   # { s1 … sn }
    statements: list
    span: Span = _span()


@dataclass(slots=True)
class Function:                # { clause … }
    clauses: list
    span: Span = _span()


@dataclass(slots=True)
class Clause:
    """p1, …, pn -> body. Several patterns are the tuple sugar; a body that is
    a Clause (not a list of statements) is the curried sugar p -> q -> …"""
    patterns: list
    body: "list | Clause"
    span: Span = _span()


# %% [markdown]
# **Patterns** mirror the expressions that can stand for them. Each has a
# `type` slot, empty here, that [chapter 5](05_types.ipynb) fills in:

# %%
#| export
@dataclass(slots=True)
class PVar:
    name: str
    span: Span = _span()
    type: object = field(default=None, compare=False, repr=False)   # set by chapter 5


@dataclass(slots=True)
class PWild:
    span: Span = _span()
    type: object = field(default=None, compare=False, repr=False)   # set by chapter 5


@dataclass(slots=True)
class PInt:
    value: int
    span: Span = _span()
    type: object = field(default=None, compare=False, repr=False)   # set by chapter 5


@dataclass(slots=True)
class PUnit:
    span: Span = _span()
    type: object = field(default=None, compare=False, repr=False)   # set by chapter 5


@dataclass(slots=True)
class PTuple:
    items: list
    span: Span = _span()
    type: object = field(default=None, compare=False, repr=False)   # set by chapter 5


@dataclass(slots=True)
class PCon:                    # C, or C(p1, …, pn)
    name: str
    args: list | None
    span: Span = _span()
    type: object = field(default=None, compare=False, repr=False)   # set by chapter 5


# %% [markdown]
# **Statements** other than expressions: `let` and `var` bind a name for the
# statements after them, so they are not expressions.

# %%
#| export
@dataclass(slots=True)
class Let:                     # let p = e
    pattern: object
    value: object
    span: Span = _span()


@dataclass(slots=True)
class VarDecl:                 # var x := e
    name: Var
    value: object
    span: Span = _span()


# %% [markdown]
# **Types**, which appear only in the fields of `data` declarations (and of
# `exception` declarations, further down):

# %%
#| export
@dataclass(slots=True)
class TName:                   # Int, List<a>
    name: str
    args: list
    span: Span = _span()


@dataclass(slots=True)
class TVar:                    # a
    name: str
    span: Span = _span()


@dataclass(slots=True)
class TTuple:
    items: list
    span: Span = _span()


@dataclass(slots=True)
class TFun:                    # a -> b
    arg: object
    result: object
    span: Span = _span()


# %% [markdown]
# **Top-level items**: a `data` declaration with its constructors and their
# fields, a definition, and the program that holds them.

# %%
#| export
@dataclass(slots=True)
class Field:                   # [name :] type
    name: str | None
    type: object
    span: Span = _span()


@dataclass(slots=True)
class Constructor:
    name: str
    fields: list | None        # None: a constant constructor
    span: Span = _span()


@dataclass(slots=True)
class Data:                    # data Name<params> { constructors }, or data Name(fields)
    name: str
    params: list
    constructors: list
    shorthand: bool = False    # written data Name(fields)
    span: Span = _span()


@dataclass(slots=True)
class Def:                     # def name = e, or def name(params) = e (params not None)
    name: Var
    params: list | None
    value: object
    span: Span = _span()


@dataclass(slots=True)
class Program:
    items: list
    span: Span = _span()


# %% [markdown]
# `dump` shows a tree's structure, one node per line, for `lc show ast` and
# for looking at the parser's work in this chapter:

# %%
#| export
def dump(node, indent: int = 0) -> str:
    """The structure of a syntax tree, one node per line, with positions."""
    pad = "  " * indent
    if isinstance(node, list):
        return "\n".join(dump(n, indent) for n in node) if node else pad + "[]"
    if not is_dataclass(node):
        return pad + repr(node)
    leaves, children = [], []
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name == "span" or v is None or v is False or v == []:
            continue
        if isinstance(v, Var) and f.name in ("name", "target"):
            leaves.append(v.name)
        elif is_dataclass(v) or isinstance(v, list):
            children.append((f.name, v))
        elif isinstance(v, str) and not isinstance(node, Str):
            leaves.append(v)
        else:
            leaves.append(repr(v))
    where = ""
    if node.span is not None:
        line, col = node.span.source.line_col(node.span.start)
        where = f"  @{line}:{col}"
    out = [f"{pad}{type(node).__name__} {' '.join(leaves)}".rstrip() + where]
    for name, v in children:
        if len(children) > 1 or isinstance(v, list):
            out.append(f"{pad}  .{name}")
            out.append(dump(v, indent + 2))
        else:
            out.append(dump(v, indent + 1))
    return "\n".join(out)


# %% [markdown]
# ## Top-down operator precedence
#
# The heart of the parser is Pratt's *top-down operator precedence* (TDOP)
# algorithm, from 1973. It parses expressions with operators of many
# precedences with one short loop, instead of one grammar rule per precedence
# level. Each token gets up to two roles:
#
# - its **nud** ("null denotation"): what it means at the *start* of an
#   expression, where an operand is expected — a literal, a variable, an
#   opening parenthesis, a prefix `-`;
# - its **led** ("left denotation"): what it means *after* an expression,
#   where an operator is expected — an infix `-`, a `(` that calls, a `.`.
#
# and every token with a led has a **binding power**: how tightly it holds
# the expression on its left. L's binary operators, loosest to tightest:
#
# | operators | binding power |
# |---|---|
# | <code>&#124;&#124;</code> | 10 |
# | `&&` | 20 |
# | `==` `!=` | 30 |
# | `<` `<=` `>` `>=` | 40 |
# | `+` `-` | 50 |
# | `*` `/` `%` | 60 |
# | prefix `-` `!` (their operand) | 70 |
# | call `(`, block call `{`, `.` | 80 |
#
# The whole algorithm is `expression(min_bp)`: parse a nud, then, *as long as
# the next token's binding power is greater than* `min_bp`, let that token's
# led take the expression so far as its left operand. An infix operator parses
# its right operand with `expression(its own power)`, so an operator of the
# same power stops that inner loop and is picked up by the outer one: that
# makes operators left-associative.
#
# The parser below prints a trace of this loop when asked (`trace=True`),
# and we will watch it parse `a - b * c - d` as soon as the loop is written.
#
# L adds one twist: an infix operator's led only applies when the operator is
# *not* at the start of a line (`before` is `STUCK` or `WHITESPACE`), and a
# call's `(` only when it is stuck. That is the whole of "separation decides
# where statements end", inside the Pratt loop. (l-lang's `tdop.mli` gets
# the same effect another way: an operator after a line break gets a
# negative binding power, so that no loop lets it in. Here the loop tests
# the separation itself, next to the binding power.)
#
# In the grammar of [the language reference](../language.md#statements-and-expressions),
# the operators take one rule per level, from `or` down to `postfix`, and the
# Pratt loop, `Parser.expression`, implements all of them at once:
#
# ```text
# statement   = "let" pattern "=" expression
#             | "var" name ":=" expression
#             | expression ;
# expression  = name ":=" expression                   (* assignment *)
#             | or ;
# or          = and { "||" and } ;
# and         = equality { "&&" equality } ;
# equality    = comparison { ( "==" | "!=" ) comparison } ;
# comparison  = sum { ( "<" | "<=" | ">" | ">=" ) sum } ;
# sum         = product { ( "+" | "-" ) product } ;
# product     = unary { ( "*" | "/" | "%" ) unary } ;
# unary       = ( "-" | "!" ) unary | postfix ;
# postfix     = nud { call | dot } ;
# ```
#
# <div class="admonition note">
# <p class="admonition-title">Design note: one loop, not one function per level</p>
#
# The grammar above could be parsed by recursive descent as written: a
# function per rule, `or` calling `and` calling `equality` … down to `nud`.
# That is eight nested calls to read the literal `1`, and adding an operator
# level means adding a function. Pratt's loop reads `1` with two calls,
# `expression` and `nud`, and one look at the table, and a new operator is
# a new line in the table
# (`BINARY`, below). The price is that the precedence levels live in a table
# rather than in the grammar's shape, which is why this chapter keeps the
# grammar beside the code. *Precedence climbing* — Theodore Norvell's name
# for the expression parsers of Martin Richards and of Keith Clarke (1986) —
# is the same loop for binary operators read from one table; Pratt's lets
# any token bring its own nud and led, which is how calls, `.` and prefix
# operators join the loop here. Andy Chu
# ([2016](https://www.oilshell.org/blog/2016/11/01.html)) calls the two the
# same algorithm, Norvell
# ([2016](https://www.engr.mun.ca/~theo/Misc/pratt_parsing.htm)) Pratt's the
# generalisation.
#
# </div>
#
# The binding powers, as the parser uses them:

# %%
#| export
BINARY = {"||": 10, "&&": 20, "==": 30, "!=": 30, "<": 40, "<=": 40, ">": 40, ">=": 40,
          "+": 50, "-": 50, "*": 60, "/": 60, "%": 60}
PREFIX_BP = 70
POSTFIX_BP = 80
ASSIGN_BP = 5          # x := e is looser than every operator, and right-associative


# %% [markdown]
# ## The parser
#
# The parser is a class holding the token list and a position; `peek` looks
# at the current token, `advance` moves past it, `expect` moves past a token
# of a given kind or raises an error that says what was expected and what was
# found. An error is raised at the first mistake of an item, with the span of
# the token that cannot continue the program (`program`, further down,
# catches it and goes on with the next item).

# %%
#| export
def _describe(t: Token) -> str:
    if t.kind == "eof":
        return "the end of the file"
    if t.kind in ("name", "Name"):
        return f"'{t.text}'"
    if t.kind in ("int", "string"):
        return f"the literal {t.text}"
    return f"'{t.text}'"


class Parser:
    """A Pratt parser for L, driven by the separation between tokens."""

    def __init__(self, tokens: list[Token], trace: bool = False):
        self.tokens, self.pos = tokens, 0
        self.trace, self.depth = trace, 0

    # -- moving through the tokens ---------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        try:                        # the parser's hottest call: no min() and len() each time
            return self.tokens[self.pos + ahead]
        except IndexError:          # looking past the end sees the last token, eof
            return self.tokens[-1]

    def advance(self) -> Token:
        t = self.tokens[self.pos]
        if t.kind != "eof":
            self.pos += 1
        return t

    def at(self, *kinds: str) -> bool:
        return self.tokens[self.pos].kind in kinds      # self.pos never passes eof

    def error(self, message: str, token: Token | None = None, notes: list = ()):
        raise CompileError(message, (token or self.peek()).span, notes)

    def expect(self, kind: str, context: str = "", opened: Token | None = None) -> Token:
        """The next token, which must be of this kind; opened: the bracket it would close."""
        t = self.peek()
        if t.kind != kind:
            wanted = {"name": "a name", "Name": "a capitalised name"}.get(kind, f"'{kind}'")
            notes = [Note(f"the '{opened.text}' is opened here", opened.span)] if opened else []
            mean = "; did you mean '=='?" if t.kind == "=" and kind == ")" else ""
            self.error(f"expected {wanted}{context}, found {_describe(t)}{mean}", notes=notes)
        return self.advance()

    def span_from(self, start: Token) -> Span:
        """The span from the start of a token to the end of the last token consumed."""
        return start.span.to(self.tokens[max(self.pos - 1, 0)].span)


# %% [markdown]
# ### Expressions
#
# An expression starts with a nud. `nud` reads the token that starts an
# expression and dispatches on its kind, implementing the grammar's rule
# `nud` and, through the methods it calls, `constructor_use`,
# `parenthesised` and `if`:
#
# ```text
# nud         = int | string | name | wildcard
#             | constructor_use
#             | parenthesised
#             | braces
#             | if
#             | "match" parenthesised "{" clauses "}"
#             | "while" parenthesised expression
#             | try ;
# constructor_use = Name [ "·(" expression { "," expression } ")" | "·" braces ] ;
# parenthesised   = "(" [ expression { "," expression } ] ")" ;   (* (), grouping, tuple *)
# if          = "if" parenthesised expression [ "else" expression ] ;
# ```
#
# (`·` marks a token stuck to the one before it.) The prefix operators are
# nuds too — the rule `unary` — whose operand is an expression of binding
# power 70. Every token that cannot start an expression gets an error that
# says why, rather than a bare "unexpected token".
#
# The cell adds `nud` to the class of the cell before by *reopening* it:
# `class Parser(Parser):` makes a subclass of the `Parser` defined so far,
# under the same name, so that each piece of the parser runs as soon as it
# is written. The package keeps one class, not the chain; [a design note
# further down](#blocks-functions-and-clauses) says how and why.

# %%
#| export
class Parser(Parser):
    def nud(self):
        """The grammar's rules nud and unary: what a token means at the start of an expression."""
        t = self.advance()
        kind = t.kind
        if kind == "int":
            return Int(t.value, t.span)
        if kind == "string":
            return Str(t.value, t.span)
        if kind == "name":
            return Var(t.text, t.span)
        if kind == "_":
            return Wildcard(t.span)
        if kind == "Name":
            return self.constructor(t)
        if kind == "(":
            return self.parenthesised(t)
        if kind == "{":
            return self.braces(t)
        if kind in ("-", "!"):
            operand = self.expression(PREFIX_BP)
            return Unary(kind, operand, t.span.to(operand.span))
        if kind == "if":
            return self.if_(t)
        if kind == "match":
            scrutinee = self.condition("match")
            clauses = self.clause_block("match")
            return Match(scrutinee, clauses, self.span_from(t))
        if kind == "while":
            cond = self.condition("while")
            body = self.expression()
            return While(cond, body, t.span.to(body.span))
        if kind == "try":
            return self.try_(t)
        if kind in BINARY or kind in ("->", ":=", "=", ",", ".", ":"):
            if t.before >= Sep.NEWLINE and kind in BINARY:
                self.error(f"a line cannot start with the operator {kind}: "
                           "put it at the end of the previous line", t)
            self.error(f"expected an expression, found '{t.text}'", t)
        if kind == "else":
            self.error("else without an if before it", t)
        if kind == "catch":
            self.error("catch without a try before it", t)
        if kind in ITEM_KEYWORDS and t.before >= Sep.NEWLINE:
            self.error(f"'{kind}' begins a top-level item, but the item before it is unfinished", t)
        if kind == "exception":
            self.error("'exception' cannot be used here: exceptions are declared at the top level", t)
        if kind in ("let", "var", "def", "data"):
            self.error(f"'{kind}' cannot be used here: it starts a statement, not an expression", t)
        self.error(f"expected an expression, found {_describe(t)}", t)


# %% [markdown]
# Before the loop, what it prints when asked. A trace is one line per event,
# indented by the depth of the `expression` call it happens in: the call
# itself with its `min_bp`, the nud that starts the expression, each led the
# loop lets in with the comparison of binding powers that let it in, and the
# comparison that stops the loop. In a column on the right stands the
# expression built so far, `left`, written by `grouped` with *every*
# operation in parentheses, so that the trace shows how the parser grouped
# the operands — which the printer further down hides, leaving out the
# parentheses that precedence makes unnecessary. (For the forms the trace
# examples do not need, `grouped` falls back on that printer.)

# %%
#| export
def grouped(e) -> str:
    """An expression as L text with every operation in parentheses: how it is grouped."""
    match e:
        case Binary(op, left, right):
            return f"({grouped(left)} {op} {grouped(right)})"
        case Unary(op, operand):
            return f"({op}{grouped(operand)})"
        case Assign(target, value):
            return f"({target.name} := {grouped(value)})"
        case Call(fn, args) if not any(isinstance(a, (Block, Function)) for a in args):
            callee = grouped(fn)
            if isinstance(fn, (Con, Dot)) and fn.args is None:    # (x.f)(y) is not x.f(y)
                callee = f"({callee})"
            return callee + "(" + ", ".join(map(grouped, args)) + ")"
        case Dot(receiver, name, args) if args is None or not any(isinstance(a, (Block, Function)) for a in args):
            text = f"{grouped(receiver)}.{name.name}"
            return text if args is None else text + "(" + ", ".join(map(grouped, args)) + ")"
        case Var(name):
            return name
        case Int(value):
            return str(value)
    return pretty_expr(e)     # the other forms, written by the printer (below)


class Parser(Parser):
    def say(self, event: str, left=None, verb: str = "left =") -> None:
        """One line of the trace, indented by depth; the expression so far on the right."""
        line = "│ " * self.depth + event
        print(line if left is None else f"{line:<40} {verb} {grouped(left)}")

    def traced_nud(self):
        """nud, saying so: on one line for a token that is a whole expression."""
        t = self.peek()
        leaf = t.kind in ("int", "string", "name", "_")
        if not leaf:
            self.say(f"nud {t.text}")
        left = self.nud()
        self.say(f"nud {t.text}" if leaf else "", left)
        return left

    def stopped_at(self, t: Token, min_bp: int) -> str:
        """Why the Pratt loop stops before t, for the trace."""
        power = BINARY.get(t.kind, ASSIGN_BP if t.kind == ":=" else None)
        if t.kind == "eof":
            return "next: the end"
        if power is not None and t.before >= Sep.NEWLINE:
            return f"next {t.kind!r}, on a new line"
        if power is not None:
            return f"next {t.kind!r} ({power} > {min_bp}? no)"
        return f"next {t.text!r}, not an operator"


# %% [markdown]
# `expression(min_bp)` is the Pratt loop, with L's postfix forms (calls, `.`)
# and infix operators as leds: after the nud, as long as the next token is an
# operator that may continue the expression here and binds more tightly than
# `min_bp`, it takes `left` as its left operand. The tests on
# `t.before` are the separation rules; `:=` parses its right side with a
# power one below its own, which makes it right-associative.

# %%
#| export
class Parser(Parser):
    def expression(self, min_bp: int = 0):
        """The grammar's rules expression, or, and, equality, comparison, sum, product and
        postfix: the Pratt loop."""
        if self.trace:
            self.say(f"expression({min_bp})")
        self.depth += 1
        left = self.traced_nud() if self.trace else self.nud()
        while True:
            t = self.peek()
            if t.kind in ("(", "{") and t.before == Sep.STUCK and POSTFIX_BP > min_bp:
                if self.trace:
                    self.say(f"next {t.kind!r} stuck ({POSTFIX_BP} > {min_bp}): call")
                left = self.call(left)
            elif t.kind == "." and t.before < Sep.EXPLICIT and POSTFIX_BP > min_bp:
                if self.trace:
                    self.say(f"next '.' ({POSTFIX_BP} > {min_bp}): dot")
                left = self.dot(left)
            elif t.kind in BINARY and t.before <= Sep.WHITESPACE and BINARY[t.kind] > min_bp:
                op = self.advance()
                if self.trace:
                    self.say(f"next {op.kind!r} ({BINARY[op.kind]} > {min_bp}): led, right side:")
                right = self.expression(BINARY[op.kind])
                left = Binary(op.kind, left, right, left.span.to(right.span))
            elif t.kind == ":=" and t.before <= Sep.WHITESPACE and ASSIGN_BP > min_bp:
                if not isinstance(left, Var):
                    self.error("only a variable can be assigned with :=", t)
                self.advance()
                if self.trace:
                    self.say(f"next ':=' ({ASSIGN_BP} > {min_bp}): assignment, right side:")
                value = self.expression(ASSIGN_BP - 1)
                left = Assign(left, value, left.span.to(value.span))
            elif t.kind in ("(", "{") and t.before == Sep.WHITESPACE:
                self.error(f"a call needs its {t.kind} stuck to the function: "
                           f"write f{t.kind}…, not f {t.kind}…", t)
            else:
                break
            if self.trace:
                self.say("", left)
        if self.trace:
            self.say(self.stopped_at(t, min_bp), left, "return")
        self.depth -= 1
        return left


# %% [markdown]
# Here is the loop at work on `a - b * c - d`, traced. `parse_expression`
# parses one expression from a string, for the examples of this chapter:

# %%
def parse_expression(text: str, trace: bool = False):
    """Parse one expression, for examples."""
    parser = Parser(tokenize(Source("<example>", text)), trace)
    e = parser.expression()
    parser.expect("eof")
    return e


tree = parse_expression("a - b * c - d", trace=True)

# %% [markdown]
# The nud reads `a`; the first `-` binds more tightly than 0, so its led
# parses the right side with `expression(50)`. There `*` (60 > 50) grabs `b`
# first: `*` binds more tightly than `-`. Its own right side,
# `expression(60)`, stops at the second `-`, which has less power (50) than
# 60; the `expression(50)` above stops there too, since the second `-` has
# the *same* power as the first and so does not get to grab `b * c` away from
# it. Back in `expression(0)`, left is `(a - (b * c))`, and the second `-`
# takes it as its left operand: the last line, `((a - (b * c)) - d)`, is the
# left-associative grouping.
#
# The rest of the leds: a call reads its arguments, the rule `call`; a `.`
# reads a name and optional arguments, or a block of clauses, the rule `dot`:
#
# ```text
# call        = "·(" [ expression { "," expression } ] ")"    (* f(a, b) *)
#             | "·" braces ;                                   (* f{ … } *)
# dot         = "." "·" name [ call ]                          (* e.f, e.f(a), e.f{ … } *)
#             | "." "·{" clauses "}" ;                         (* e.{ clauses } *)
# ```

# %%
#| export
class Parser(Parser):
    def arguments(self, open_: Token) -> list:
        """e1, …, en up to the ')' matching open_ (already consumed): the inside of the rules
        call, constructor_use and parenthesised."""
        args = []
        if self.at(")"):
            self.advance()
            return args
        while True:
            args.append(self.expression())
            if self.at(","):
                self.advance()
                continue
            self.expect(")", " to close the '('", open_)
            return args

    def call(self, fn):
        """The grammar's rule call: f(…) or f{…}, the token after f stuck to it."""
        t = self.advance()
        args = self.arguments(t) if t.kind == "(" else [self.braces(t)]
        return Call(fn, args, fn.span.to(self.tokens[self.pos - 1].span))

    def dot(self, receiver):
        """The grammar's rule dot: e.f, e.f(…), e.f{…} or e.{ clauses }."""
        dot = self.advance()
        after = self.peek()
        if dot.after != Sep.STUCK:
            self.error("a '.' must be stuck to the name or '{' after it", dot)
        if after.kind == "{":
            self.advance()
            clauses = self.clauses(after, "'.{'")     # its span starts at the '.': a failed
            return DotMatch(receiver, clauses, self.span_from(dot))   # match is reported there
        name = self.expect("name", " after '.'")
        args = None
        if self.at("(", "{") and self.peek().before == Sep.STUCK:
            t = self.advance()
            args = self.arguments(t) if t.kind == "(" else [self.braces(t)]
        return Dot(receiver, Var(name.text, name.span), args,
                   receiver.span.to(self.tokens[self.pos - 1].span))


# %% [markdown]
# The nuds that read more than one token: a constructor with or without its
# arguments, a parenthesised group (unit, grouping or tuple), and `if`, whose
# condition is a parenthesised group and whose branches are whole
# expressions.

# %%
#| export
class Parser(Parser):
    def constructor(self, t: Token):
        """The grammar's rule constructor_use: C, C(e1, …, en) or C{…}."""
        if self.at("(") and self.peek().before == Sep.STUCK:
            open_ = self.advance()
            args = self.arguments(open_)
            if not args:
                self.error(f"{t.text}() is not allowed: a constructor without fields is written {t.text}", t)
            return Con(t.text, args, self.span_from(t))
        if self.at("{") and self.peek().before == Sep.STUCK:
            return Con(t.text, [self.braces(self.advance())], self.span_from(t))
        return Con(t.text, None, t.span)

    def parenthesised(self, open_: Token):
        """The grammar's rule parenthesised: (), (e) or (e1, …, en)."""
        items = self.arguments(open_)
        span = self.span_from(open_)
        if not items:
            return Unit(span)
        if len(items) == 1:
            return items[0]            # grouping: the parentheses leave no trace
        return Tuple(items, span)

    def condition(self, keyword: str):
        """The parenthesised condition of if and while, or the scrutinee of match."""
        open_ = self.expect("(", f" after '{keyword}'")
        return self.parenthesised(open_)

    def if_(self, t: Token):
        """The grammar's rule if."""
        cond = self.condition("if")
        then = self.expression()
        orelse = None
        if self.at("else") and self.peek().before < Sep.EXPLICIT:
            self.advance()
            orelse = self.expression()
        return If(cond, then, orelse, self.span_from(t))


# %% [markdown]
# A prefix operator against a call and a `.`: `-x.f(y) * 2` negates
# `x.f(y)`, that is `f(x, y)`, because calls and `.` bind tighter (80) than
# prefix `-` (70), which binds tighter than `*` (60):

# %%
tree = parse_expression("-x.f(y) * 2", trace=True)

# %% [markdown]
# The `.` is taken inside `expression(70)`, the operand of the `-`, because
# its power, 80, is above 70: `.f(y)` attaches to `x` before the `-` gets
# its operand. The argument `y` is read by a fresh `expression(0)`, since
# between the parentheses of a call any expression may stand. Only then
# does `*` (60) meet the whole `-x.f(y)`, in `expression(0)`: the last line
# shows the negation inside the product.

# %% [markdown]
# A few things the code above decides:
#
# - A parenthesised expression leaves no node: `(a + b)` is just the
#   `Binary`, and the printer puts parentheses back where precedence needs
#   them. `()` is the unit value and `(a, b)` a tuple.
# - The conditions of `if` and `while` and the scrutinee of `match` must be in
#   parentheses, and are parsed as a parenthesised group, not as an
#   expression: otherwise `if (c) -1 else -2` would read `(c) - 1`.
# - The branches of `if` and the body of `while` are parsed with
#   `expression(0)`, so they extend as far as an expression can:
#   `if (c) a else f(x) + 1` adds 1 in the `else` branch.
# - `else` may start a line (any separation but `;` before it): a line break
#   before `else` does not end the `if`.
# - A `.` may start a line (method chains), but must be stuck to what follows.
#
# ### Blocks, functions and clauses
#
# A `{` starts either a block, `{ s1 … sn }`, or a function,
# `{ p -> s … }`. Which one is only known after its first statement: a
# function's first statement is followed by `->` (or by `,`, the sugar
# `{ a, b -> … }`). Trying one reading and backing up to try the other would
# work but costs time and gives worse error messages. Instead, the parser
# reads the first statement as an expression — every pattern is also an
# expression: `x`, `_`, `3`, `-3`, `()`, `(p, q)`, `C`, `C(p, q)` — and if an
# arrow follows, *converts* that expression into a pattern, or reports that it
# is not one. `_` is parsed as an expression for that reason, and later
# rejected wherever it is used as a value.
#
# The grammar's rules for braces and patterns:
#
# ```text
# braces      = "{" ( block | clauses ) "}" ;
# block       = statement { sep statement } ;
# clauses     = clause { sep clause } ;
# clause      = pattern { "," pattern } "->" ( clause              (* on the same line: curried *)
#                                            | block ) ;
# pattern     = name | wildcard | [ "-" ] int
#             | "(" [ pattern { "," pattern } ] ")"       (* (), grouping, tuple *)
#             | Name [ "·(" pattern { "," pattern } ")" ] ;
# ```
#
# (`sep` is a line break or a `;`.) `to_pattern` implements the rule
# `pattern`, on an expression already parsed:

# %%
#| export
def to_pattern(e):
    """The pattern an expression denotes, or a CompileError if it denotes none."""
    match e:
        case Var(name, span):
            return PVar(name, span)
        case Wildcard(span):
            return PWild(span)
        case Int(value, span):
            return PInt(value, span)
        case Unary("-", Int(value), span):
            return PInt(-value, span)
        case Unit(span):
            return PUnit(span)
        case Tuple(items, span):
            return PTuple([to_pattern(i) for i in items], span)
        case Con(name, None, span):
            return PCon(name, None, span)
        case Con(name, args, span):
            return PCon(name, [to_pattern(a) for a in args], span)
    raise CompileError("this is not a pattern: a pattern is a name, _, a number, (), "
                       "a tuple of patterns or a constructor applied to patterns", e.span)


# %% [markdown]
# An example: a constructor pattern holding a tuple, a negative number and a
# wildcard, written as an expression, parsed as one and converted. The
# `-1` was parsed as the operator `-` applied to `1`, and becomes the
# pattern `PInt(-1)`. (The spans are left out of the `repr`, to keep it
# short.)

# %%
to_pattern(parse_expression("Cons((x, -1), _)"))

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: convert, don't backtrack</p>
#
# A parser that backtracks would try `{ x + 1 -> 2 }` as clauses, fail
# somewhere inside, back up, try a block, fail again at the `->`, and then
# have to choose which of its two failures to report. Reading the first
# statement once and converting it reports the real mistake, at the right
# place: "this is not a pattern", at `x + 1`. The same trick reads the
# parameters of `def f(a, (b, c)) = …` as arguments, and the left side of
# a destructuring assignment in languages that have one: JavaScript parses
# `[a, b] = …` and the parameters of its arrow functions this way, with what
# its specification calls *cover grammars*.
#
# </div>
#
# `braces` reads the first statement, and looks at what follows it: an arrow
# or a comma makes it the first pattern of a function's clauses, anything
# else a block, the rules `braces` and `block`. `separator` enforces the
# `sep` between two statements, with an error for each way of getting it
# wrong.

# %%
#| export
class Parser(Parser):
    def braces(self, open_: Token):
        """The grammar's rules braces and block: a block or a function; open_ is the '{',
        already consumed."""
        if self.at("}"):
            self.error("{} is empty: the unit value is written ()", open_)
        try:
            return self.braces_after(open_)
        except CompileError as error:
            if error.message.endswith("the item before it is unfinished") and not error.notes:
                error.notes.append(Note("the '{' is opened here", open_.span))   # the one never closed
            raise

    def braces_after(self, open_: Token):
        first = self.statement()
        if self.at("->", ","):
            return Function(self.clauses(open_, "'{'", first), self.span_from(open_))
        statements = [first]
        while not self.at("}"):
            self.expect_more("}", " to close the block", open_)
            self.separator("}")
            statements.append(self.statement())
            if self.at("->", ","):
                self.error("a clause cannot follow statements: this '{' is a block, "
                           "since its first statement is not followed by ->")
        self.advance()
        return Block(statements, self.span_from(open_))

    def expect_more(self, closing: str, context: str, open_: Token):
        """Inside brackets, before the next statement: the end of the file is a missing closing."""
        if self.at("eof"):
            self.expect(closing, context, open_)

    def separator(self, closing: str):
        """Between two statements: a line break or ';', unless the closing token comes."""
        t = self.peek()
        if t.before >= Sep.NEWLINE or t.kind == closing:
            return
        if t.kind in ("(", "{"):
            self.error(f"a call needs its {t.kind} stuck to the function: "
                       f"write f{t.kind}…, not f {t.kind}…", t)
        if t.kind == "eof":
            self.error(f"expected '{closing}', found the end of the file", t)
        if t.kind == "else":
            self.error("else without an if before it", t)
        before = self.tokens[self.pos - 1]
        notes = [Note("L has no return: the value of a block is its last expression, "
                      "so write the value alone", before.span)] if before.text == "return" else []
        self.error(f"expected a new line or ';' before {_describe(t)}", t, notes)


# %% [markdown]
# `clauses` reads clauses up to the closing `}`, the rule `clauses`, and
# `clause` one clause, the rule `clause`. They share one subtle point,
# explained after the code: where a clause's body ends.

# %%
#| export
class Parser(Parser):
    def clause_block(self, what: str) -> list:
        """The '{' clauses '}' of match."""
        open_ = self.expect("{", f" after the condition of '{what}'")
        return self.clauses(open_, f"'{what}'")

    pending = None    # the first pattern of the next clause, already read as a statement

    def clauses(self, open_: Token, what: str, first=None) -> list:
        """The grammar's rule clauses, up to the '}' that closes open_; first, an already parsed
        first pattern."""
        clauses = []
        while True:
            if first is None:
                first, self.pending = self.pending, None
            if first is None:
                if self.at("}"):
                    self.error(f"{what} needs at least one clause", open_)
                first = self.expression()
            clauses.append(self.clause(first, what, open_))
            first = None
            if self.pending is None:
                self.expect("}", f" to close the {what}", open_)
                return clauses

    def clause(self, first, what: str, open_: Token) -> Clause:
        """The grammar's rule clause, whose first pattern, first, is already read as an expression."""
        patterns = [to_pattern(first)]
        while self.at(","):
            self.advance()
            patterns.append(to_pattern(self.expression()))
        arrow = self.expect("->", f" after the pattern of a clause of {what}")
        if self.at("}"):
            self.error("a clause needs statements after ->")
        same_line = self.peek().before < Sep.NEWLINE
        start = self.statement()
        if self.at("->", ","):
            if not same_line:           # a pattern on the next line: this clause is empty
                self.error("a clause needs statements after ->", arrow)
            inner = self.clause(start, what, open_)    # p -> q -> s: the curried sugar
            return Clause(patterns, inner, first.span.to(inner.span))
        body = [start]
        while not self.at("}"):
            self.expect_more("}", f" to close the {what}", open_)
            self.separator("}")
            s = self.statement()
            if self.at("->", ","):      # a pattern starting a line: the next clause
                self.pending = s
                break
            body.append(s)
        return Clause(patterns, body, first.span.to(body[-1].span))


# %% [markdown]
# A clause's body ends at the `}`, or when a statement turns out to be
# followed by `->`: that statement, which starts a line or follows a `;`,
# was the first pattern of the next clause. The parser has already read it, so it leaves it in
# `pending` for `clauses` to pick up — a one-item lookahead in the tree instead
# of backtracking in the tokens. A pattern on the *same* line as the previous
# `->` is the curried sugar instead: `{ a -> b -> a - b }` is a clause whose
# body is the clause `b -> a - b`.

# %% [markdown]
# Statements are the last piece, the rule `statement`: `let` and `var` bind
# names for the statements after them; everything else is an expression.
# The pattern of a `let` is parsed with `expression(ASSIGN_BP)`, the binding
# power of `:=` itself, so that `let x := 1` stops before the `:=` (5 > 5?
# no) and gets the error that says a `=` was expected.

# %%
#| export
class Parser(Parser):
    def statement(self):
        """The grammar's rule statement."""
        t = self.peek()
        if t.kind == "let":
            self.advance()
            pattern = to_pattern(self.expression(ASSIGN_BP))    # stop before a mistaken :=
            self.expect("=", " after the pattern of 'let'")
            value = self.expression()
            return Let(pattern, value, t.span.to(value.span))
        if t.kind == "var":
            self.advance()
            name = self.expect("name", " after 'var'")
            self.expect(":=", " after the name of a 'var' (var x := value)")
            value = self.expression()
            return VarDecl(Var(name.text, name.span), value, t.span.to(value.span))
        return self.expression()


# %% [markdown]
# With statements, the parser can read braces. A function of two clauses,
# the second curried — a clause whose body is a clause:

# %%
print(dump(parse_expression("""{
  0 -> 1
  n -> m -> n * m
}""")))

# %% [markdown]
# The two clauses differ in shape. The first has one pattern, `0`, and the
# statement `1` as its body. The second has one pattern, `n`, and its body
# is not a statement but another `Clause`, with the pattern `m`: the tree
# keeps the curried sugar as the programmer wrote it, a function of `n` that
# returns a function of `m`, which is why the printer can write it back as
# `n -> m -> n * m`.

# %% [markdown]
# Reopening `Parser` cell after cell, as this chapter has done since `nud`,
# lets the chapter present the parser a piece at a time, each piece run and
# tested as soon as it is written. The package does not keep that chain:
# the exporter puts every piece into one class body, so
# `lcompiler.syntax.Parser` is one class whose methods are marked with the
# cells they come from.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a class reopened over cells, one class in the package</p>
#
# The parser could have been one class in one cell, of several hundred
# lines with a sentence before it; that is the cell this book tries not to
# have. Or its methods could have been written as functions and attached to
# the class afterwards (`Parser.braces = braces`, what nbdev's `@patch`
# does), which Python reads as assignments, not as a class. Reopening the
# class keeps each piece an ordinary class body, and the exporter
# (`tools/literate.py`) assembles the pieces so that the module reads as
# final code, not as the notebook's history: one `Parser`, with no chain of
# classes of the same name behind it, one per cell. The rule that makes both
# readings run the same code — a reopening adds or replaces whole methods,
# and never calls `super()` to reach an earlier piece — is [appendix
# A](A_errors.ipynb)'s design note on classes reopened over cells.
#
# </div>
#
# ### Top-level items and data declarations
#
# A program is a sequence of items separated by line breaks or `;`:
# definitions, `data` and `exception` declarations, and statements other than
# `let` and `var` (at the top level, names are made with `def`). A `data` declaration
# has its own little syntax of types: `Int`, `List<a>`, `(T1, T2)`,
# `T1 -> T2` (right-associative). The grammar's rules:
#
# ```text
# program     = [ item { sep item } ] ;
# item        = definition | data | exception | statement ;   (* a statement, but not let or var *)
# definition  = "def" name [ "·(" [ pattern { "," pattern } ] ")" ] "=" expression ;
# data        = "data" Name [ "<" name { "," name } ">" ]
#               ( "(" fields ")"                       (* one constructor, named Name *)
#               | "{" constructor { sep constructor } "}" ) ;
# constructor = Name [ "·(" field { "," field } ")" ] ;
# exception   = "exception" Name [ "·(" field { "," field } ")" ] ;
# fields      = [ field { "," field } ] ;
# field       = [ name ":" ] type ;
# type        = type_atom [ "->" type ] ;             (* -> groups to the right *)
# type_atom   = name                                   (* a type parameter *)
#             | Name [ "<" type { "," type } ">" ]
#             | "(" type { "," type } ")" ;            (* grouping, or a tuple type *)
# ```
#
# `program` reads items up to the end of the file, the rule `program`. An
# item with a mistake raises a `CompileError`; `program` records it, with
# where its item starts, and skips to the next item (how, is the next
# section). `item` dispatches on the first token, the rule `item`.

# %%
#| export
class Parser(Parser):
    def program(self) -> Program:
        """The items of the program; the mistakes found, with where their items start, in self.errors."""
        items, self.errors = [], []
        start, resumed, owner = self.peek(), True, 0
        while not self.at("eof"):
            first = self.pos
            try:
                if not resumed:            # after an item, a separator (after a mistake: a new line)
                    self.separator("eof")  # a missing one is a mistake of the item before (owner)
                resumed, owner = False, self.tokens[first].span.start
                items.append(self.item())
            except (CompileError, RecursionError) as error:
                if isinstance(error, RecursionError):
                    error = CompileError("the program is nested too deeply for this parser", self.peek().span)
                self.errors.append((error, owner))
                self.resynchronise(first, error)
                resumed = True
        return Program(items, start.span.to(self.peek().span))

    def item(self):
        """The grammar's rule item."""
        t = self.peek()
        if t.kind == "def":
            return self.definition()
        if t.kind == "data":
            return self.data()
        if t.kind == "exception":
            return self.exception_()
        if t.kind in ("let", "var"):
            self.error(f"'{t.kind}' cannot be used at the top level: define names with 'def'", t)
        if t.kind in (")", "}"):
            self.error(f"'{t.kind}' without an opening bracket before it", t)
        s = self.statement()
        if self.at("->", ","):
            self.error(f"unexpected '{self.peek().kind}' at the top level (a function needs braces: {{ p -> … }})")
        return s


# %% [markdown]
# A definition, the rule `definition`: its parameters are read as
# arguments and converted into patterns, as a clause's are.

# %%
#| export
class Parser(Parser):
    def definition(self) -> Def:
        """The grammar's rule definition."""
        t = self.advance()
        name = self.expect("name", " after 'def'")
        params = None
        if self.at("("):
            open_ = self.advance()
            if open_.before != Sep.STUCK:
                self.error("the parameters of a def must be stuck to its name: def f(x) = …", open_)
            params = [to_pattern(e) for e in self.arguments(open_)]
        self.expect("=", f" in the definition of {name.text}")
        value = self.expression()
        return Def(Var(name.text, name.span), params, value, t.span.to(value.span))


# %% [markdown]
# A `data` declaration, the rule `data` (and `constructor`): its name, its
# type parameters, then either one constructor's fields in parentheses — the
# shorthand `data Point(x: Int, y: Int)` — or constructors in braces,
# separated by line breaks or `;`. `fields` reads the fields of a constructor, the rules `fields` and
# `field`.

# %%
#| export
class Parser(Parser):
    def data(self) -> Data:
        """The grammar's rules data and constructor."""
        t = self.advance()
        name = self.expect("Name", " after 'data'")
        params = []
        if self.at("<"):
            self.advance()
            while True:
                params.append(TVar(self.expect("name", " (a type parameter)").text, self.tokens[self.pos - 1].span))
                if not self.at(","):
                    break
                self.advance()
            self.expect(">", " to close the type parameters")
        if self.at("("):
            open_ = self.advance()
            fields_ = self.fields(open_)
            return Data(name.text, params, [Constructor(name.text, fields_, name.span)], True, self.span_from(t))
        open_ = self.expect("{", f" or '(' after data {name.text}")
        constructors = []
        while not self.at("}"):
            self.expect_more("}", f" to close data {name.text}", open_)
            if constructors:
                self.separator("}")
            c = self.expect("Name", " (a constructor)")
            fields_ = None
            if self.at("(") and self.peek().before == Sep.STUCK:
                fields_ = self.fields(self.advance())
                if not fields_:
                    self.error(f"{c.text}() is not allowed: a constructor without fields is written {c.text}", c)
            constructors.append(Constructor(c.text, fields_, self.span_from(c)))
        if not constructors:
            self.error(f"data {name.text} needs at least one constructor", open_)
        self.advance()
        return Data(name.text, params, constructors, False, self.span_from(t))

    def fields(self, open_: Token) -> list:
        """The grammar's rules fields and field, up to the ')' that closes open_."""
        out = []
        if self.at(")"):
            self.advance()
            return out
        while True:
            start = self.peek()
            label = None
            if self.at("name") and self.peek(1).kind == ":":
                label = self.advance().text
                self.advance()
            out.append(Field(label, self.type_(), self.span_from(start)))
            if not self.at(","):
                break
            self.advance()
        self.expect(")", " to close the fields", open_)
        return out


# %% [markdown]
# Types, the rules `type` and `type_atom`: `type_` makes `->` group to the
# right by parsing its result with itself.

# %%
#| export
class Parser(Parser):
    def type_(self):
        """The grammar's rule type."""
        arg = self.type_atom()
        if self.at("->"):
            self.advance()
            result = self.type_()
            return TFun(arg, result, arg.span.to(result.span))
        return arg

    def type_atom(self):
        """The grammar's rule type_atom."""
        t = self.advance()
        if t.kind == "name":
            return TVar(t.text, t.span)
        if t.kind == "Name":
            args = []
            if self.at("<"):
                self.advance()
                while True:
                    args.append(self.type_())
                    if not self.at(","):
                        break
                    self.advance()
                self.expect(">", f" to close the arguments of {t.text}")
            return TName(t.text, args, self.span_from(t))
        if t.kind == "(":
            items = []
            while True:
                items.append(self.type_())
                if not self.at(","):
                    break
                self.advance()
            self.expect(")", " to close the type")
            return items[0] if len(items) == 1 else TTuple(items, self.span_from(t))
        self.error(f"expected a type, found {_describe(t)}", t)


# %% [markdown]
# A `data` declaration exercises every rule of types. `item` is the
# parser's entry for one top-level item, so the cell builds a `Parser` on the
# tokens by hand and asks it for one:

# %%
print(dump(Parser(tokenize(Source("<example>", "data Shape<a> { Circle(radius: Int); Poly(List<(a, a)>, a -> Int) }"))).item()))

# %% [markdown]
# Read the tree from the top: the `Data` node has its type parameter `a`
# and two constructors. `Circle`'s one field is named (`radius`); `Poly`'s
# two fields are not, so their `Field` lines show no name. `List<(a, a)>` is
# a `TName` whose one argument is a `TTuple`; `a -> Int` is a `TFun`, its
# `.arg` and `.result` below it.

# %% [markdown]
# ### Exceptions: exception, raise, try and catch
#
# L has exceptions ([the language reference](../language.md#exceptions)
# describes them; [chapter 4b](04b_meaning.ipynb) says what they mean). Three keywords, `exception`, `try` and `catch`,
# and one built-in form bring them to the syntax:
#
# - `exception Name` or `exception Name(T1, …, Tn)`, a top-level item,
#   declares an exception — a constructor, written like one of a `data`
#   declaration;
# - `raise(e)` raises an exception. Like `print`, `raise` is not a keyword:
#   the parser reads `raise(e)` as a call, and chapter 4b turns that call
#   into the built-in form;
# - `try { s1 … sn } catch { clauses }` runs the block and, if an exception
#   comes out of it, matches it against the clauses. Like `else`, `catch`
#   may start a new line: a line break before it does not end the `try`.
#
# The grammar's two new rules:
#
# ```text
# try         = "try" "{" block "}" "catch" "{" clauses "}" ;
# exception   = "exception" Name [ "·(" field { "," field } ")" ] ;
# ```
#
# Two new nodes hold them. A `try`'s block is a `Block` (a `{` whose first
# statement is followed by `->` would be a function: the parser says that
# a `try` wants a block); its clauses are those of a `match`.

# %%
#| export
@dataclass(slots=True)
class Try:                     # try { block } catch { clauses }
    body: Block
    clauses: list
    span: Span = _span()


@dataclass(slots=True)
class ExceptionDecl:           # exception Name, or exception Name(fields); its span starts at Name
    name: str
    fields: list | None        # None: an exception without fields
    span: Span = _span()


class Parser(Parser):
    def try_(self, t: Token):
        """The grammar's rule try; t is the 'try', already consumed."""
        open_ = self.expect("{", " after 'try'")
        body = self.braces(open_)
        if not isinstance(body, Block):
            self.error("the body of a try is a block, not a function: its first statement "
                       "cannot be followed by ->", open_)
        if self.at("catch") and self.peek().before >= Sep.EXPLICIT:
            self.error("a ';' cannot separate the block of a try from its catch")
        if not self.at("catch"):
            self.error(f"expected 'catch' after the block of 'try', found {_describe(self.peek())}")
        self.advance()
        open_ = self.expect("{", " after 'catch'")
        clauses = self.clauses(open_, "'catch'")
        return Try(body, clauses, self.span_from(t))

    def exception_(self):
        """The grammar's rule exception."""
        self.advance()
        name = self.expect("Name", " after 'exception' (an exception is named like a constructor)")
        fields_ = None
        if self.at("(") and self.peek().before == Sep.STUCK:
            fields_ = self.fields(self.advance())
            if not fields_:
                self.error(f"{name.text}() is not allowed: an exception without fields is written "
                           f"exception {name.text}", name)
        return ExceptionDecl(name.text, fields_, self.span_from(name))   # at its name, as a constructor


# %% [markdown]
# The two forms at work, in a program that declares an exception with a
# field, raises it, and catches it on the line after the block:

# %%
print(dump(Parser(tokenize(Source("<example>", """exception Failure(String)
def safe(f) = try { f(()) }
  catch { Failure(why) -> print(why); 0 }
print(safe{ _ -> raise(Failure("no")) })"""))).program()))

# %% [markdown]
# `raise(Failure("no"))` is, to the parser, a `Call` of the name `raise`;
# the `Try` node has the block under `.body` and the clauses under
# `.clauses`, each a `Clause` as in a `match`.

# %% [markdown]
# ### After a mistake: on to the next item
#
# When an item has a mistake, `program` records the error and looks for a
# place to start again: the next token that can begin a top-level item,
# skipping everything in between. Where to start again decides whether the
# errors that follow are real or invented by the skipping, so the rule is
# cautious. A token qualifies when it is the first thing on its line, and
# either it is `def`, `data` or `exception` — which can only begin an item,
# wherever they stand — or it could begin a statement and every bracket the failed item
# opened has been closed before it. Counting the brackets keeps the parser
# from starting again at the lines inside a broken function body, each of
# which would then be misread as a top-level statement, and its `}` as a
# bracket closing nothing.
#
# Skipping starts at the token where the error was reported, or just after
# the first token of the item, whichever is later: an error at a `def` that
# begins a line (`expected an expression, found 'def'`, when the previous
# line was cut short) starts again at that `def`, and the skipping always
# moves forward.

# %%
#| export
import bisect

BRACKETS = {"(": 1, "{": 1, ")": -1, "}": -1}
STARTERS = {"name", "Name", "int", "string", "_", "(", "{", "-", "!", "if", "match", "while", "let", "var",
            "try"}


class Parser(Parser):
    def first_on_its_line(self, t: Token) -> bool:
        text = t.span.source.text
        return text[text.rfind("\n", 0, t.span.start) + 1:t.span.start].strip() == ""

    def resynchronise(self, first: int, error: CompileError) -> None:
        """Move to the next token that can begin an item, after a mistake in the item at tokens[first]."""
        starts = [t.span.start for t in self.tokens]
        pos = max(bisect.bisect_left(starts, error.span.start), first + 1)
        depth = sum(BRACKETS.get(t.kind, 0) for t in self.tokens[first:pos])
        while self.tokens[pos].kind != "eof":
            t = self.tokens[pos]
            if self.first_on_its_line(t) and (t.kind in ITEM_KEYWORDS or depth <= 0 and t.kind in STARTERS):
                break
            depth += BRACKETS.get(t.kind, 0)
            pos += 1
        self.pos = pos


# %% [markdown]
# ### The entry point, and the promise of no other exception
#
# `parse` tokenises and parses a whole program (or parses the tokens it is
# given, with the lexical mistakes found making them). The parser is
# recursive, and Python's default recursion limit (1000 frames) would stop
# it at a nesting depth of fewer than 250 parentheses (a parenthesis costs
# four frames, as said below). CPython 3.11 runs
# Python-to-Python calls without the C stack, so `parse` raises the limit
# while it works, to twenty thousand frames more than are running when it
# starts: thousands of levels of nesting, counted from `parse` itself, so
# that a program is too deep or not whoever calls `parse` (`lc run` calls it
# from further down than `lc run --interp`). A program nested deeper still
# exhausts it; that becomes a `CompileError` at the token the parser had
# reached, like any other mistake in the input (`program` catches the
# `RecursionError` with the other errors, and starts again after it).
#
# The lexer's mistakes and the parser's are raised together, in the order of
# the source. A lexical and a syntax error in the same item are likely one
# mistake: a string left open swallows the rest of its line, and the parser
# then misses a bracket. So a syntax error is left out when a lexical error
# comes before it in the same item.
#
# `parse` (like `tokenize`) also pauses Python's cyclic garbage collector.
# Tokens, spans and tree nodes never form reference cycles, so the collector
# has nothing to find among them; but it does not know that. It looks at the
# newest objects each time 700 more have been made than freed, at older
# ones less often, and at all of them only once the objects that survived
# its earlier looks have grown by a quarter since it last looked at them
# all; so as the tree grows it walks it again and again. On large
# programs that costs a good part of the parsing time: the measurements at
# the end of the chapter show how much. ("Grown by a quarter" is CPython's
# guard against worse, in its
# [`gcmodule.c`](https://github.com/python/cpython/blob/3.11/Modules/gcmodule.c):
# with it, the collector's time grows in proportion to the tree, not
# faster.)
#
# `parse` promises no other exception, and the fuzz tests of this chapter
# (in `tests/test_syntax.py`) check it: they feed it random tokens and
# mangled programs.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: recursion with a raised limit, not an explicit stack</p>
#
# A parser can be written without recursion: an LR parser, the kind that
# parser generators such as yacc produce, keeps its own stack of states in an
# array, and a nesting depth is then bounded by how far that array may grow,
# which can be as far as memory allows (Bison's default limit,
# [`YYMAXDEPTH`](https://www.gnu.org/software/bison/manual/html_node/Memory-Management.html),
# is 10,000 entries; a grammar may raise it). This parser
# recurses instead — a method for each rule or pair of rules of the
# grammar, and the Pratt loop calling itself for each operand — which is
# what lets each method cite its rule and say in its error what it
# expected. The
# price is a depth limit, and the raised recursion limit puts it in the
# thousands of levels, far beyond what a person writes; a program generated
# by a tool could still reach it, and gets a located error instead of a
# crash. The later stages walk the tree recursively too, and raise the limit
# in the same way (chapters 4b to 7 use `recursion_limit`), so an iterative
# parser alone would not lift the limit on the whole compiler.
#
# </div>

# %% [markdown]
# The parser's recursion limit and its paused collector are what several
# stages need, so they are in [appendix B](B_support.ipynb#room-for-recursion),
# with `NESTING_LIMIT`, the room the parser asks for (twenty thousand
# frames), as do most of the later recursive stages; the conversion to CPS
# and the monomorphiser ask for fifty times as much.
# `recursion_limit(n)` gives the parser at least `n` more frames than are
# running when it starts. `parse` puts the pieces together: the tokens
# (made here, or given), the parser with the collector paused and the
# recursion limit raised, and the errors of both, in the order of the source.

# %%
#| export
def parse(source: Source, tokens: list[Token] | None = None, lexical: list = ()) -> Program:
    """The syntax tree of a whole L program, or a CompileError with every mistake found. Given its
    tokens (the pipeline's `tokens` stage makes them), with the lexical mistakes found making them,
    it does not lex again."""
    lexical = list(lexical)
    with collector_paused():
        parser = Parser(tokenize(source, lexical) if tokens is None else tokens)
        with recursion_limit(NESTING_LIMIT):
            program = parser.program()
    # a syntax error in an item after a lexical one is likely the lexer's making: leave it out
    raise_errors(lexical + [error for error, item_start in parser.errors
                            if not any(item_start <= e.span.start <= error.span.start for e in lexical)])
    return program


# %% [markdown]
# A parenthesis costs the parser four frames (`expression`, `nud`,
# `parenthesised`, `arguments`), so twenty thousand frames are some five
# thousand levels of nesting. Two thousand levels parse; ten thousand are an
# error at the parenthesis where the frames ran out, close to the 5,000th:

# %%
for depth in (2_000, 10_000):
    try:
        parse(Source("deep.l", "print(" + "(" * depth + "1" + ")" * depth + ")"))
        print(f"{depth:>6} levels: parsed")
    except CompileError as error:
        line, col = error.span.source.line_col(error.span.start)
        print(f"{depth:>6} levels: error at column {col} (the parenthesis number {col - 6}): {error.message}")

# %% [markdown]
# The error is an ordinary `CompileError`, at a place: `print(` takes
# columns 1 to 6, so column 5005 is the 4,999th of the added parentheses.
# A Python `RecursionError` never reaches the programmer, and the process
# does not crash.

# %% [markdown]
# And the tree of the small function whose tokens we saw, as `dump` shows
# it (this is what `lc show ast` prints):

# %%
print(dump(parse(sample)))

# %% [markdown]
# Each line is a node with its position, `@line:column`; the lines
# starting with `.` name the field that holds the nodes indented under
# them. The program has three items: the `def` and the two `print` calls of
# line 5, which the `;` separated. The comment has left no trace. And
# `print(-1)` holds `Unary -` applied to `Int 1`: the lexer made the tokens
# `-` and `1`, and the parser keeps them as a negation, not as the
# number −1.

# %% [markdown]
# ## A picture of the tree
#
# The same tree, drawn with [appendix A](A_errors.ipynb)'s boxes: a box per
# node, labelled with its class and its leaves (names, numbers, operators),
# and an edge per child, labelled with the field that holds it when a node
# has several. Definitions, `data` declarations, `let` and `var`
# statements and clauses are green, expressions (a top-level statement
# too) blue, patterns yellow; where a field holds a list,
# its elements hang from the node in order, numbered when there are
# several.

# %%
from lcompiler.drawing import Box, Picture

PATTERNS = (PVar, PWild, PInt, PUnit, PTuple, PCon)
ITEMS = (Def, Data, Let, VarDecl, Clause, Program)


def ast_box(node, edge: str = "") -> Box:
    """A syntax tree as boxes: its class and leaves as the label, its children below."""
    leaves, children = [], []
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name in ("span", "type") or v is None or v is False or v == []:
            continue
        if isinstance(v, Var) and f.name in ("name", "target"):
            leaves.append(v.name)
        elif isinstance(v, list):
            children += [(f.name if len(v) == 1 else f"{f.name}[{i}]", c) for i, c in enumerate(v)]
        elif is_dataclass(v):
            children.append((f.name, v))
        else:
            leaves.append(repr(v) if isinstance(node, Str) else str(v))
    style = "green" if isinstance(node, ITEMS) else "yellow" if isinstance(node, PATTERNS) else "blue"
    many = len(children) > 1
    return Box(" ".join([type(node).__name__] + leaves), [ast_box(c, name if many else "") for name, c in children],
               style, edge)


Picture([("the syntax tree of sample.l", [ast_box(item) for item in parse(sample).items])],
        alt="The syntax tree of sample.l: a Def fact whose value is a Function of two clauses — "
            "the pattern PInt 0 with the body Int 1, and the pattern PVar n with the body Binary *, "
            "of Var n and the Call of fact on Binary - of n and 1 — then a Call of print on the Call "
            "of fact on 5, and a Call of print on Unary - of Int 1.")

# %% [markdown]
# Three things to see in the picture. There are no parentheses in the tree:
# `fact(n - 1)` is a `Call` whose argument is the `Binary`, and the grouping
# is the shape. `-1` is a `Unary` applied to
# the literal 1, not a negative literal: the lexer never makes negative
# numbers, since whether a `-` is a sign or a subtraction is the parser's
# question. And the patterns of a clause are a different kind of node from
# expressions, though they were parsed as expressions first and converted.
# Here, for comparison, are the two expressions traced in the parser
# section:

# %%
Picture([(text, [ast_box(parse_expression(text))]) for text in ("a - b * c - d", "-x.f(y) * 2")],
        alt="Two expression trees. a - b * c - d: a Binary - whose left child is Binary - of a and "
            "Binary * of b and c, and whose right child is d. -x.f(y) * 2: a Binary * whose left child is "
            "Unary - of the Dot f with receiver x and argument y, and whose right child is Int 2.")

# %% [markdown]
# ## Printing L back
#
# The printer is the parser's inverse: it writes a tree as L text that parses
# back to the same tree. Its one real task is parentheses. Each expression
# form has a binding power, the same table as the parser's, and an operand is
# put in parentheses when its own power is too low for its place: the left
# operand of `-` needs parentheses if it binds more loosely than `-`; the
# right operand also if it binds *as* loosely (`a - (b - c)`), since `-` is
# left-associative. `if`, `while` and `:=` extend as far as they can,
# so they are parenthesised wherever something could follow them.
#
# Two callees need parentheses even though they bind tightly: a call of
# `x.f` is `(x.f)()`, since `x.f()` is the method-call form `f(x)`, and a
# call of a constructor value is `(C)(…)`, since `C(…)` applies the
# constructor. (The round-trip test on random trees found both, and the
# `then` branch further down.)
#
# Blocks and functions are printed on one line with `;` between statements
# when the braces and what they hold, plus the indentation of their line,
# take at most 80 columns, and otherwise one statement per line. What stands
# before the `{` on its line is not counted, so a line such as
# `def a_long_name = { … }` can come out longer than 80.

# %%
#| export
def _bp(e) -> int:
    """How tightly an expression holds together, for placing parentheses."""
    match e:
        case Binary(op):
            return BINARY[op]
        case Unary():
            return PREFIX_BP
        case If() | While() | Assign():
            return 0
        case Int(v) if v < 0:
            return PREFIX_BP
        case _:
            return 100


def _operand(e, min_bp: int) -> str:
    text = pretty_expr(e)
    return f"({text})" if _bp(e) <= min_bp else text


def _string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


# %% [markdown]
# The powers `_bp` gives, loosest first:

# %%
{text: _bp(parse_expression(text)) for text in ("if (c) a", "a || b", "a + b", "a * b", "-a", "f(x)")}

# %% [markdown]
# These are the binding powers of the parser's table, now read backwards:
# not how tightly an operator grabs its operands, but how tightly a finished
# expression holds together. An `if` (with or without `else`), a `while`
# and a `:=` hold together least (0) — they extend as far as they can — and
# a call or a name most (100).
# `_operand` puts parentheses around an expression whose power is not above
# what its place needs: `a + b` (50) as an operand of `*` (60) gets them,
# `a * b` as an operand of `+` does not. For an operator of power `bp`,
# `_operand` parenthesises a left operand whose power is at most `bp - 1`,
# and a right operand whose power is at most `bp`: a left operand of the
# operator's own power goes bare, a right one does not, which is why `(a - b) - c` is printed `a - b - c` while
# `a - (b - c)` keeps its parentheses.

# %% [markdown]
# Patterns need no parentheses but their own: a tuple's and a constructor's
# arguments.

# %%
#| export
def pretty_pattern(p) -> str:
    """A pattern as L text."""
    match p:
        case PVar(name):
            return name
        case PWild():
            return "_"
        case PInt(v):
            return str(v)
        case PUnit():
            return "()"
        case PTuple(items):
            return "(" + ", ".join(map(pretty_pattern, items)) + ")"
        case PCon(name, None):
            return name
        case PCon(name, args):
            return f"{name}(" + ", ".join(map(pretty_pattern, args)) + ")"
    raise TypeError(f"not a pattern: {p!r}")


# %% [markdown]
# Expressions are printed in two functions. `pretty_expr` writes the leaves
# and the operations; where operands meet operators, `_operand` adds the
# parentheses. Two callees need parentheses that binding powers do not give,
# `(x.f)(…)` and `(C)(…)`, as said above. A unary operator whose operand
# starts with the same operator is written with a space, `- -x`.

# %%
#| export
def _args(args: list) -> str:
    if len(args) == 1 and isinstance(args[0], (Block, Function)):
        return pretty_expr(args[0])               # f{ … }
    return "(" + ", ".join(pretty_expr(a) for a in args) + ")"


def pretty_expr(e, indent: int = 0) -> str:
    """An expression as L text."""
    match e:
        case Int(v):
            return str(v)
        case Str(s):
            return _string(s)
        case Unit():
            return "()"
        case Var(name):
            return name
        case Wildcard():
            return "_"
        case Con(name, None):
            return name
        case Con(name, args):
            return name + _args(args)
        case Tuple(items):
            return "(" + ", ".join(pretty_expr(i, indent) for i in items) + ")"
        case Call(fn, args):
            if isinstance(fn, (Con, Dot)) and fn.args is None:   # x.f() and C() would read differently
                return f"({pretty_expr(fn, indent)})" + _args(args)
            return _operand(fn, POSTFIX_BP - 1) + _args(args)
        case Dot(receiver, name, args):
            return _operand(receiver, POSTFIX_BP - 1) + "." + name.name + ("" if args is None else _args(args))
        case DotMatch(receiver, clauses):
            return _operand(receiver, POSTFIX_BP - 1) + "." + _clauses(clauses, indent)
        case Unary(op, operand):
            text = _operand(operand, PREFIX_BP - 1)
            return f"{op} {text}" if text.startswith(op) else op + text
        case Binary(op, left, right):
            bp = BINARY[op]
            return f"{_operand(left, bp - 1)} {op} {_operand(right, bp)}"
    return _pretty_control(e, indent)


# %% [markdown]
# `_pretty_control` writes the forms that hold statements or extend as far
# as they can: `if`, `while`, `:=`, `match`, `try`, blocks and functions. `indent`
# is the column the form starts at, for the blocks that do not fit on one
# line. A `then` branch that extends as far as it can is parenthesised when
# an `else` follows: an `if` without `else` would take the `else` for
# itself, and a `while` or a `:=` could end with one. The printer
# parenthesises all three, even where nothing is at stake: `if (c) x := 1
# else x := 2` comes back as `if (c) (x := 1) else x := 2`.

# %%
#| export
def _pretty_control(e, indent: int) -> str:
    """An if, while, :=, match, try, block or function as L text."""
    match e:
        case If(cond, then, orelse):
            head = f"if ({pretty_expr(cond, indent)}) "
            # a then-branch that extends as far as it can (if, while, :=) could swallow the else
            then_text = _operand(then, 0) if orelse is not None else pretty_expr(then, indent)
            if orelse is None:
                return head + then_text
            return head + then_text + " else " + pretty_expr(orelse, indent)
        case While(cond, body):
            return f"while ({pretty_expr(cond, indent)}) " + pretty_expr(body, indent)
        case Assign(target, value):
            return f"{target.name} := " + pretty_expr(value, indent)
        case Match(scrutinee, clauses):
            inner = (", ".join(pretty_expr(i, indent) for i in scrutinee.items)
                     if isinstance(scrutinee, Tuple) else pretty_expr(scrutinee, indent))
            return f"match ({inner}) " + _clauses(clauses, indent)
        case Block(statements):
            return _braces([pretty_statement(s, indent + 2) for s in statements], indent)
        case Function(clauses):
            return _clauses(clauses, indent)
        case Try(body, clauses):
            return "try " + pretty_expr(body, indent) + " catch " + _clauses(clauses, indent)
    raise TypeError(f"not an expression: {e!r}")


# %% [markdown]
# An expression in which every parenthesis matters: without them, the
# inner `if` would take the `else`; `-x.f(y)` would call `f` on `x` and
# negate the result; `a - b - c` would mean `(a - b) - c`; and the outer
# pair is needed because `*` binds tighter than `-`.
# The printer is given only the tree, which holds no parentheses:

# %%
print(pretty_expr(parse_expression("if (a) (if (b) c) else -(-x).f(y) * (a - (b - c))")))

# %% [markdown]
# The output is the input, character for character: the printer put back
# exactly the parentheses the tree needs, and none that it does not.

# %% [markdown]
# Clauses and blocks are printed as lists of lines, joined by `_braces`:
# on one line with `; ` between them when the braces, with the indentation,
# take at most 80 columns, one per line otherwise. A curried clause puts its inner patterns on the first line
# of its outer clause.

# %%
#| export
def _clause(c: Clause, indent: int) -> list[str]:
    """A clause as statements: its first line holds the patterns and arrows."""
    head = ", ".join(map(pretty_pattern, c.patterns)) + " -> "
    if isinstance(c.body, Clause):
        inner = _clause(c.body, indent)
        return [head + inner[0]] + inner[1:]
    body = [pretty_statement(s, indent + 4) for s in c.body]
    return [head + body[0]] + ["  " + line for line in body[1:]]


def _clauses(clauses: list, indent: int) -> str:
    return _braces([line for c in clauses for line in _clause(c, indent)], indent)


def _braces(lines: list[str], indent: int) -> str:
    flat = "{ " + "; ".join(lines) + " }"
    if len(flat) + indent <= 80 and "\n" not in flat:
        return flat
    pad = " " * (indent + 2)
    return "{\n" + "\n".join(pad + line for line in lines) + "\n" + " " * indent + "}"


def pretty_statement(s, indent: int = 0) -> str:
    match s:
        case Let(pattern, value):
            return f"let {pretty_pattern(pattern)} = " + pretty_expr(value, indent)
        case VarDecl(name, value):
            return f"var {name.name} := " + pretty_expr(value, indent)
    return pretty_expr(s, indent)


# %% [markdown]
# Last, types, fields and the top-level items; `pretty` prints anything from
# a whole program down to an expression.

# %%
#| export
def pretty_type(t) -> str:
    match t:
        case TVar(name):
            return name
        case TName(name, []):
            return name
        case TName(name, args):
            return f"{name}<" + ", ".join(map(pretty_type, args)) + ">"
        case TTuple(items):
            return "(" + ", ".join(map(pretty_type, items)) + ")"
        case TFun(arg, result):
            left = pretty_type(arg)
            return (f"({left})" if isinstance(arg, TFun) else left) + " -> " + pretty_type(result)
    raise TypeError(f"not a type: {t!r}")


def _fields(fs: list) -> str:
    return "(" + ", ".join((f"{f.name}: " if f.name else "") + pretty_type(f.type) for f in fs) + ")"


def pretty(node) -> str:
    """A program, item, statement or expression as L text."""
    match node:
        case Program(items):
            return "\n".join(pretty(i) for i in items) + "\n"
        case Def(name, None, value):
            return f"def {name.name} = " + pretty_expr(value)
        case Def(name, params, value):
            return f"def {name.name}(" + ", ".join(map(pretty_pattern, params)) + ") = " + pretty_expr(value)
        case Data(name, params, constructors, shorthand):
            head = f"data {name}" + ("<" + ", ".join(p.name for p in params) + ">" if params else "")
            if shorthand:
                return head + _fields(constructors[0].fields)
            return head + " {\n" + "\n".join(
                "  " + c.name + ("" if c.fields is None else _fields(c.fields)) for c in constructors) + "\n}"
        case ExceptionDecl(name, fields_):
            return f"exception {name}" + ("" if fields_ is None else _fields(fields_))
    return pretty_statement(node)


# %% [markdown]
# A whole program, with the sugar the tree keeps: a `data` declaration,
# clauses, `def f(a, b)`, curried clauses, a `.` call, an escape in a string
# (`\\n` in the Python text is `\n` in the L text) and `.{ … }`. Printed:

# %%
program = parse(Source("example.l", """\
data List<t> { Cons(t, List<t>); Nil }
def length = {
  Cons(_, tail) -> 1 + length(tail)
  Nil -> 0
}
def add(a, b) = a + b
def curried = { a -> b -> a - (b - 1) }
print(Cons(1, Cons(2, Nil)).length, add(1, 2) * -3, if (true) "yes\\n" else "no")
Cons(3, Nil).{ Cons(x, _) -> x; Nil -> 0 }.print
"""))
print(pretty(program))

# %% [markdown]
# Compare it with the text above it. The printer does not copy the layout:
# it has its own. The constructors of `List` were written on one line and
# come out one per line, as `pretty` always writes the constructors of a
# `data` declaration in braces; the clauses of `length` were written on several lines and come out
# on one, since they fit in 80 columns. The string's escape is written back as
# `\n`. What must not change is the tree, which the next cell checks by
# parsing the printed text and comparing — spans aside, since the two texts
# put the nodes in different places:

# %%
print(parse(Source("again.l", pretty(program))) == program)

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: printing the tree, not the text</p>
#
# The printer works from the tree alone, so it forgets the programmer's
# comments and layout: the lexer keeps no token for a comment or a blank,
# only the separation they make. The other road is a *lossless* syntax tree
# that keeps every token, comment and space, as code formatters and editors
# use to rewrite a file without disturbing what they do not touch. This
# compiler needs less: that what it prints is L, and means the tree it came
# from. Printing from the tree makes that one property, tested by the round
# trip, and lets the tests print random trees, and chapter 4b its
# desugared ones, that no programmer wrote.
#
# </div>

# %% [markdown]
# Printed and parsed again, the tree is the same: the round-trip promise,
# which the tests check on the programs of the corpus and the examples
# ([What the tests check](#what-the-tests-check) says which) and on random
# trees generated by Hypothesis (a Python library that makes random
# inputs for a test from a description of their shape, and shrinks a
# failing one to a small example).
#
# The next section is about the parser's other promise to its users: its
# errors.
#
# ## Errors, precisely
#
# Every mistake is reported at the token where the program stops making
# sense, with what is wrong there — most often, what the parser expected
# instead:

# %%
mistakes = {
    "call.l": "print (1)",
    "operator.l": "def x = 1\n+ 2",
    "empty.l": "def f = {}",
    "unclosed.l": "print((1, 2)",
    "constructor.l": "def x = Nil()",
    "pattern.l": "def f = { x + 1 -> 2 }",
    "toplevel.l": "let x = 1",
    "number.l": "def big = 9223372036854775808",
    "escape.l": 'print("a\\qb")',
    "dot.l": "def y = x. f",
}
for name, text in mistakes.items():
    try:
        parse(Source(name, text))
        print(f"{name}: no error!")
    except CompileError as error:
        print(error.render(), end="\n\n")

# %% [markdown]
# Each message says what is wrong at that place and, where there is one
# obvious fix, what to write instead (`f(…`, `()`, `Nil`, `def`). The
# `^~~` underlines the whole span the error is about: a token of one
# character gets a caret alone, while the keyword `let`, the constructor
# `Nil` and the number that does not fit are underlined over their whole
# length. An unclosed bracket is reported where the parser
# gave up — here the end of the file — with a note at the bracket that was
# left open, since that is where the fix usually goes.

# %% [markdown]
# And a file with several mistakes: each is reported, in order. The first
# item leaves a `(` open, so the parser, which reads on past the line break,
# stops at `y`; it skips the rest of the item — still inside its brackets —
# and starts again at the `def` of line 4. The line of `print(2 +)` is
# reported and skipped, up to the next line. The `$` is a lexical mistake,
# and does not keep the last line from being checked.

# %%
several = Source("several.l", """\
def f(x) = {
  let y = (x * 2
  y }
def g(x) = x + 1
print(2 +)
print(g(1)) $
def h = 09
""")
try:
    parse(several)
except CompileError as error:
    print(error.render())

# %% [markdown]
# ### Messages for the mistakes of a newcomer
#
# Some mistakes come from habits of other languages, and the parser knows
# them well enough to say more than "expected … found …":
#
# - `if (x = 1)`: `=` is L's binding sign (`let`, `def`), and comparison is
#   `==`. The parser stops at the `=`, where it expected the `)`, and adds
#   `did you mean '=='?` — `expect` does so whenever a `)` was wanted and an
#   `=` came;
# - `return x + 1`: L has no `return` — the value of a block is its last
#   expression — so `return` is read as a variable, and the parser stops at
#   the `x` that follows it. `separator` adds a note at the `return`;
# - a `{` left open, followed by a `def`: the parser reports the `def` (the
#   next item begins, but this one is unfinished), and `braces` adds a note
#   at the `{` that was never closed — the same note as when the file ends
#   inside the braces, since the fix goes at the same place.

# %%
newcomer = {
    "assign.l": "def f(x) = if (x = 1) 2 else 3",
    "return.l": "def f(x) = {\n  return x + 1\n}",
    "open.l": "def f(x) = {\n  let y = x + 1\n\ndef g(x) = x",
}
for name, text in newcomer.items():
    try:
        parse(Source(name, text))
        print(f"{name}: no error!")
    except CompileError as error:
        print(error.render(), end="\n\n")

# %% [markdown]
# Two more messages for newcomers belong to later chapters, because only
# they know enough: an unknown name is found by [chapter
# 4b](04b_meaning.ipynb)'s resolver, which reports every unknown name of a
# definition, not only the first; and `"n is " + n` is a type error of
# [chapter 5](05_types.ipynb), which adds a note that `+` adds Ints and that
# `print` with several arguments is how L shows a string and a number
# together.

# %% [markdown]
# ## Highlighting L
#
# The book shows L code in Markdown cells and pages, in fenced blocks marked
# `l`, and the site colours it with [Pygments](https://pygments.org), as
# nbconvert does (Jupyter's own editor colours code with another library,
# and leaves L plain). The lexer Pygments uses is not this
# chapter's: a highlighter must hand back every character of the text,
# comments and blanks included, and colour text with mistakes in it, where
# this lexer drops the blanks and reports the mistakes. It is a small table
# of regular expressions, in [appendix A](A_errors.ipynb#colours-for-l),
# which the package registers with Pygments under the name `l`.
#
# ## This chapter's two stages
#
# The compiler is a chain of stages, each handing its output to the next,
# and [chapter 4](04_pipeline.ipynb) wrote the whole chain down on one page,
# `lcompiler.pipeline.PIPELINE`. This chapter fills in its first two names:
# `tokens` runs the lexer and shows its output with `show_tokens`; `ast`
# runs the parser on those tokens and shows the tree with `dump`. The lexer
# is handed the unit's error list, so a lexical mistake does not stop it;
# the parser is handed the same list, and `parse` reports those mistakes
# together with its own.

# %%
#| export
from lcompiler import pipeline


@pipeline.stage("tokens", show=lambda tokens, unit: show_tokens(tokens))
def tokens_stage(source: Source, unit: pipeline.Unit) -> list:
    return tokenize(source, unit.errors)


@pipeline.stage("ast", show=lambda tree, unit: dump(tree))
def ast_stage(tokens: list, unit: pipeline.Unit):
    return parse(unit.source, tokens, unit.errors)


# %% [markdown]
# With them registered, `pipeline.show` prints either stage for any text:

# %%
print(pipeline.show("tokens", Source("two.l", "print(1 +\n 2)")))

# %% [markdown]
# `lc show STAGE FILE` prints any stage of the pipeline for a file, these
# two included: `lc show tokens small.l`. Reading a file that does not
# exist, or a directory, or one `lc` may not read, is a mistake in how `lc`
# was called (exit status 1), not a traceback. A file that is not UTF-8 is
# a mistake in the program's text, so it is a `CompileError` at the first
# byte that cannot be decoded, with its line. The command's code is with
# the rest of the command line, in [appendix C](C_cli.ipynb#lc-show);
# `lc(...)` runs it in a notebook, with its error messages in order among
# its output.

# %% [markdown]
# The command at work, in a temporary directory: the tokens and the tree of
# a one-line program, a file that does not exist, and a file written in
# Latin-1, where `é` is the single byte `0xe9`, which UTF-8 does not allow
# there:

# %%
import contextlib
import tempfile
from pathlib import Path

from lcompiler.cli import lc

with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("small.l").write_text("print(1 + 2 * 3)\n")
    lc("show", "tokens", "small.l")
    lc("show", "ast", "small.l")
    lc("show", "tokens", "missing.l")
    Path("latin1.l").write_bytes(b'print("caf\xe9")\n')    # written in Latin-1, not UTF-8
    lc("show", "tokens", "latin1.l")

# %% [markdown]
# The tree shows the precedence the tokens did not: `*` is the right operand
# of `+`. A node's position is that of its first token, so the `Binary +`
# is at column 7, where `1` starts. The missing file gets the `lc: error:`
# of a usage error, with no location — there is no text to point into. The
# Latin-1 file gets a located error: the byte that cannot be decoded is shown
# as `�`, the replacement character, and the caret stands under it, at
# column 11.

# %% [markdown]
# ## What the tests check
#
# `tests/test_syntax.py` and `tests/test_corpus.py` hold this chapter's
# promises:
#
# - every program of the corpus folders `run/`, `fail/`, `types/` and
#   `exceptions/` (`tests/corpus/`) and of `examples/` parses, and printing and parsing it
#   again gives the same tree; every program of `reject/` is rejected at the
#   line and column its first line names — its first error, the first in the
#   source (by this chapter for mistakes of syntax, by
#   [chapter 4b](04b_meaning.ipynb) for the others: names, scopes, the
#   arity of constructors);
# - random syntax trees generated by Hypothesis print to text that parses
#   back to the same tree;
# - random sequences of tokens, and random byte-level mutations of corpus
#   programs, give either a tree or a `CompileError` with a location — never
#   another exception — each within two seconds (Hypothesis's deadline);
# - the separation of every token is what the rules say, and the parser
#   decides calls, statement ends, minus signs, precedence, blocks and
#   clauses as the language reference says, on hand-made cases;
# - a program nested two thousand parentheses deep parses, one nested a
#   hundred thousand deep is an error (not a crash), and appendix A's
#   Pygments lexer is found under the name `l` and colours every keyword
#   (`exception`, `try` and `catch` included) and `raise`;
# - the forms of exceptions parse, print and parse back, `catch` on a line
#   of its own included, and each of their syntax errors is reported as the
#   section on exceptions says; the random trees include `try`s and
#   `exception` declarations, the random token sequences the three keywords,
#   and the mutated programs those of `tests/corpus/exceptions/`.
#
# `tests/test_errors.py` checks the several errors of one run: a file made
# of a dozen broken items, each with a different mistake, gets an error for
# each (and none for the correct items put between them), in the order of
# the source. Its golden files (`tests/errors/`) hold the exact text of
# messages of chapters 4a, 4b and 5, notes included — of this chapter, the
# newcomer's mistakes above, several errors in one file, an unclosed
# bracket, and the mistakes with exceptions.
#
# ## How fast, and how it scales
#
# `bench/parse_speed.py` generates programs of about 12,500 to 100,000
# lines, a unit of two dozen lines repeated with fresh names — `data`
# declarations, functions of several clauses, blocks with `var` and
# `while`, `match`, method chains, long argument lists (but no `let` and no
# exceptions). It times `tokenize` and `parse` on them, and `parse` again
# with the garbage collector left running, each the best of several runs,
# and writes what it measured to `bench/parse_speed.json`. The last run,
# read from that file (the cell prints the machine and the date):

# %%
import json

SPEED = json.loads(Path("../bench/parse_speed.json").read_text())
print(SPEED["command"], "—", SPEED["settings"]["clock"], "clock, best of", SPEED["settings"]["repeat"], "runs")
where = SPEED.get("machine", {})
print(f"measured {where.get('date', '?')} on {where.get('cpu', 'a machine not recorded')}, "
      f"{where.get('cores', '?')} cores, load average {where.get('load')} at the start")
print(f"{'lines':>8} {'tokens':>9} {'lex s':>7} {'parse s':>8} {'lines/s':>8} {'µs/token':>9} {'collecting s':>13} "
      f"{'collector µs/line':>18}")
for row in SPEED["sizes"]:
    lines, tokens, whole, collecting = row["lines"], row["tokens"], row["parse s"], row["parse s, collector running"]
    print(f"{lines:>8} {tokens:>9} {row['lex s']:>7.2f} {whole:>8.2f} {lines / whole:>8.0f} "
          f"{1e6 * whole / tokens:>9.2f} {collecting:>13.2f} {1e6 * (collecting - whole) / lines:>18.1f}")
first, last = SPEED["sizes"][0], SPEED["sizes"][-1]
for name in ("parse s", "parse s, collector running"):
    print(f"{name}: time per line, largest / smallest "
          f"{(last[name] / last['lines']) / (first[name] / first['lines']):.2f} (1.00 is linear)")
shares = [row["lex s"] / row["parse s"] for row in SPEED["sizes"]]
print(f"lexing's share of parse s: {min(shares):.0%} to {max(shares):.0%}")
print(f"the collector's share of the largest parse: {1 - last['parse s'] / last['parse s, collector running']:.0%}")

# %% [markdown]
# The lines per second move little from one size to the next, and so do
# the microseconds per token: the time per line of the largest program
# over that of the smallest, the first ratio printed, stays within a few
# tenths of 1.00 over eight times the program, where a step that were
# quadratic would make it eight, so lexing and parsing are linear. Lexing is a large part of the work (its
# share is printed; `parse s` includes it). With the garbage collector left
# running, its time is the last share printed of the largest parse, for
# nothing, since there are no cycles to find. Its own time per line, the
# last column, does not keep growing as the programs double: linear too, as
# CPython's quarter rule makes it, but with a large constant, since it
# walks the growing tree again and again.
#
# ## Exercises
#
# 1. Add a `>>` operator (reverse composition, `f >> g`), with a binding
#    power of your choice. Which tables change? What happens to `List<List<a>>`
#    in a `data` declaration, and how would you fix it?
# 2. After a mistake, the parser skips to the next top-level item. Make it
#    start again at the next *statement* inside a block instead, as rustc
#    does. Which mistakes then produce misleading follow-up errors?
# 3. Make `print (x)` a warning instead of an error, and think about what a
#    programmer who wrote `f (x)` most likely meant.
# 4. Write the expressions' parser the other way: one method per rule of the
#    grammar, `or` calling `and` … calling `unary` calling `postfix`, as
#    the rules are written. Check it against `Parser.expression` on the
#    corpus (`pretty` of both trees must agree), then time both with
#    `bench/parse_speed.py`. Where does the difference come from?
# 5. Draw the trace: turn the lines `Parser.say` prints into a picture of the
#    calls of `expression`, one box per call labelled with its `min_bp` and
#    what it returned, with `lcompiler.drawing`. What does the tree of calls
#    have in common with the syntax tree it builds?
# 6. Add a `finally` part to `try`: `try { … } catch { … } finally { … }`,
#    with `catch` or `finally` or both. What changes in the tables, the node,
#    the parser and the printer, and how does the round-trip test tell you
#    that the printer is right?
# 7. Make `raise` a keyword, with the rule `"raise" parenthesised`, instead
#    of a name that chapter 4b recognises. Which messages change?
#
# <details><summary>Solutions</summary>
#
# 1. `>>` goes into the lexer's `OPERATORS`, before `>` (the lexer tries them
#    in order, longest first), and into `BINARY` with its binding power —
#    below the comparisons, say 35 — which the printer reads too, for its
#    parentheses; and the desugaring of chapter 4b gets a case: `f >> g` is
#    `{ x -> g(f(x)) }`, with `f` and `g` evaluated once, first, as the
#    operands of every operator are — `{ let a = f; let b = g; { x -> b(a(x))
#    } }`, with names no one else uses. Then `List<List<a>>` no longer parses: the lexer makes one `>>` of
#    the two closing brackets. The usual fix is the one C++ made: where the
#    parser of types expects a `>` and finds a `>>`, it takes the first half
#    and leaves a `>` for the outer list — splitting the token, which the
#    spans allow.
# 2. `resynchronise` today looks for the next token that begins an item at
#    the start of a line, outside brackets. Inside a block, skip instead to
#    the next token at the start of a line at the block's own depth (or its
#    `}`), and let the block's loop go on from there. Mistakes that leave a
#    bracket open, or a `let` cut short, then produce follow-up errors: the
#    statements after them are read with the wrong nesting, and a missing `)`
#    makes every later line of the block look like an argument.
# 3. Instead of raising the error, make it a `CompileWarning` ([appendix
#    A](A_errors.ipynb#warnings)) that the parser collects and hands to
#    `report_warnings`, and go on as if the space were not there: `print (x)`
#    is almost always meant as the call `print(x)`, since L gives no other
#    meaning to a name followed by a parenthesised expression on the same
#    line. For `f (x)` the same holds; the warning is still worth giving, for
#    the programmer who meant two statements, `f` and then `(x)`, and forgot
#    the `;` between them: L now reads them as one call.
# 4. Eight methods: six for the levels of the binary operators, from `or`
#    to `product`, each a loop over the operators of its level calling the
#    next level down, then `unary` and `postfix`. On the corpus the two
#    parsers must print the same trees: `pretty` of both, program by
#    program, is the check.
#    The time goes into the calls: every expression, even a lone name, goes
#    down through every level, a Python call each, where the Pratt loop makes
#    one call and one lookup in `BINARY` per operator it meets; measure the
#    difference with `bench/parse_speed.py` on your machine.
# 5. Give `say` a stack: push a box when `expression(min_bp)` starts, pop it
#    and label it with what it returns when it ends, and draw the root with
#    `Picture`. The tree of calls is not the syntax tree: `expression` is
#    called for each right operand (and each prefix operand and argument),
#    while a left operand stays in the loop of the call that read it. So it
#    is the syntax tree with its left edges drawn together: a box holds an
#    operator, its left operand, that operand's left operand and so on down,
#    and its children are their right operands. For `a - b * c - d` the root
#    box holds both `-` and `a`, and has two children, `b * c` (with its own
#    child, `c`) and `d`, where the syntax tree nests the first `-` inside
#    the second.
# 6. `finally` joins `KEYWORDS` (and appendix A's highlighter, whose test
#    checks every keyword); `Try` gets a field `final` (a `Block`, or None)
#    and `clauses` may be empty when it is there; `try_` reads
#    `finally { block }` after the clauses, or instead of them — on a new
#    line too, as `catch` may be — and reports a `try` with neither; `nud`
#    says "finally without a try before it", as it does for `catch`; the
#    printer writes the part when it is there. The
#    test's generator must make the new trees — a `Try` with clauses, with a
#    `finally`, with both — and the round trip then fails until the printer
#    writes each as the parser reads it: a printer that forgets the new field
#    fails on every `try` with a `finally`, and one that always writes
#    `catch` fails on a `try` with only a `finally`, since `catch { }` does
#    not parse.
# 7. `raise` goes into `KEYWORDS` and `nud` gets a case that reads a
#    parenthesised expression after it, as `condition` reads that of `if`.
#    `raise` alone becomes a syntax error of this chapter ("expected '('
#    after 'raise'") instead of chapter 4b's "raise is a built-in form, not
#    a value"; `raise (x)`, with a space, today an error (a call needs its
#    `(` stuck), parses, as `if (c)` does; `raise(a, b)` becomes a tuple argument unless the rule says
#    one expression; and a variable named `raise`, which chapter 4b refuses
#    as a binding, could then not even be written. `print` and `assert` stay
#    names: the three forms would no longer be alike.
#
# </details>
