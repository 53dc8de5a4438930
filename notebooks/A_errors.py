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
# # Appendix A. Errors, pictures and colours
#
# How the book's compiler shows things to a person: a mistake in a program,
# at its line and column, with the line and a caret under the place; a tree
# of boxes, drawn as a picture that also says in words what it shows; L code
# in colour. The chapters use these three small modules throughout: the
# errors in chapter 1's parser of additions and in every chapter from 4
# on, which read L; the pictures in all but chapters 9, 10b and 12; the
# colours wherever the site shows L. None of them is what a chapter is
# about, so they live here, in the first of the book's three appendices —
# the workshop — instead of in the chapter that happened to need them
# first.

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** Python, and [Pygments](https://pygments.org) for the colours.
# The three modules need nothing from the chapters, which all stand on
# them; only one picture below borrows the type checker of [chapter
# 5](05_types.ipynb), to find a real mistake in a program.
#
# **Builds:** the module `lcompiler.errors` — `Source`, `Span`,
# `Diagnostic`, `CompileError` with its notes, `Note`, `CompileErrors`,
# `raise_errors`, `CompileWarning` and `report_warnings`, `POLICY` (the
# switches `lc`'s options set), `COLOURS` and `paint`, `RunError`; the module
# `lcompiler.drawing` — `Box` and `Picture`; and the module
# `lcompiler.highlight`, the Pygments lexer `LLexer`.
#
# </div>
#
# The code of this appendix was first written where it was first needed:
# the error format and the drawings in [chapter 1](01_addlang.ipynb), notes,
# several errors at a time and the colours in [chapter
# 4a](04a_syntax.ipynb), runtime errors in [chapter 4b](04b_meaning.ipynb).
# Those chapters still show it at work, and say that its code is here. The
# other two appendices hold the rest of the workshop: [appendix
# B](B_support.ipynb) what the compiler's stages share with the machine they
# run on, [appendix C](C_cli.ipynb) the command line, `lc`.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: the workshop, in three appendices</p>
#
# Before the appendices, chapter 1 spent more of its lines on drawing,
# errors, the command line and a parser than on the compiler it is about,
# chapter 4a carried the command line and the colours, and chapter 4b the
# machinery of threads and stacks. Each stage's chapter is now about its
# stage, and says where the rest lives. The workshop could have been one
# appendix; it is three because it serves three kinds of reader: one who
# wants to know how an error or a picture is made (this appendix), one who
# wants to know what the compiler asks of Python and of the machine
# (appendix B), and one who uses `lc` (appendix C). Each has its own "What
# this appendix promises", which the exporter puts at the top of the
# modules it builds. The support module could also have been chapter 1's,
# since chapter 1 is the first to run machine code in a child process; but
# chapter 1 uses two of its tools, and the others — the paused collector,
# the recursion limits, the big stacks — would have made the first chapter
# about Python's insides. So chapter 1 says what it uses, and why, and links
# to appendix B for how.
#
# </div>

# %%
#| default_exp errors

# %% [markdown]
# ## What this appendix promises
#
# - `Source(name, text)` is a named text, and `Span(source, start, end)` a
#   stretch of it, which prints as the place it starts, `FILE:LINE:COL`
#   (lines and columns counted from 1).
# - A `Diagnostic` is an exception at a span. `render()` shows it as
#   `FILE:LINE:COL: KIND: message`, then the line of the source, then a caret
#   under the place (`^~~` under a span of several characters); its `status`
#   is the exit status `lc` stops with. `CompileError` (kind `error`, status
#   1) is the one exception the compiler raises for a mistake in its input,
#   and carries notes — other places, rendered after it as `note`;
#   `CompileErrors` is several of them, rendered in the order of the source;
#   `raise_errors(found)` raises nothing, the one error found, or a group.
#   `RunError` (kind `runtime error`, status 2) is a mistake found while a
#   program runs.
# - A `CompileWarning` renders like an error, with `warning`, and is not
#   raised: `report_warnings` hands a compilation's warnings, in the order
#   of the source, to `POLICY["sink"]` (a file, a list, or nowhere), or,
#   with `POLICY["warnings_are_errors"]` (`-Werror`), raises them as errors.
#   With `POLICY["color"]` on, every message is painted, in the colours
#   of gcc and clang.
# - A `Picture` of trees of `Box`es is SVG text, the same on every run, in
#   which the boxes of one level never overlap and a parent is centred over
#   its children; Jupyter shows it as a picture, and its `alt`, a description
#   in words, goes with it, for the site and for readers who do not see it.
# - `LLexer`, which Pygments finds under the name `l` once the package is
#   installed, colours any text, L or not, and hands back every character of
#   it.
#
# ## Where a mistake is: sources and spans
#
# Every error this book's compiler reports looks the same, the way C
# compilers report them: the file, the line and the column, the message,
# then the line itself with a caret under the place. Here is what chapter
# 1's little parser of additions says of `3 + + 4`:
#
# ```text
# <expression>:1:5: error: expected a number, a variable or '('
# 3 + + 4
#     ^
# ```
#
# That format is the contract of every stage, from that parser to the
# type checker of chapter 5 and the runtime errors of the native code.
# Its pieces are a `Source` (a name and its text), a `Span` (a stretch of
# a source), and `Diagnostic`, an exception that knows where the mistake
# is and how to show it.

# %%
#| export
import bisect
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """A named text: a file, a notebook cell, a command-line argument."""
    name: str
    text: str
    line_starts: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        starts = [0] + [m.end() for m in re.finditer("\n", self.text)]    # not a Python loop per character
        object.__setattr__(self, "line_starts", tuple(starts))

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def line_text(self, line: int) -> str:
        start = self.line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]


# %% [markdown]
# A `Source` numbers its lines once, when it is made, so that finding the
# line and column of an offset is a binary search. A `Span` is a stretch of
# a source, and prints as the place it starts, `FILE:LINE:COL`:

# %%
#| export
@dataclass(frozen=True)
class Span:
    """The characters [start, end) of a source."""
    source: Source
    start: int
    end: int

    def __repr__(self) -> str:
        line, col = self.source.line_col(self.start)
        return f"{self.source.name}:{line}:{col}"

    def to(self, other: "Span") -> "Span":
        """The span from the start of this one to the end of other."""
        return Span(self.source, self.start, other.end)


# %% [markdown]
# A `Diagnostic` is an exception with a span. It knows how to show itself in
# the format above, and which exit status `lc` should stop with. The cell
# also holds `POLICY`, the switches that `lc`'s options set, and `paint`,
# which colours a piece of a message when colour is on; the sections
# "Warnings" and "Colour on a terminal" below say what they are for:

# %%
#| export
POLICY = {"color": False,                  # lc's --color and NO_COLOR decide: see "Colour on a terminal"
          "warnings_are_errors": False,    # lc's -Werror: see "Warnings"
          "sink": None}                    # where the warnings go: a file (lc: stderr), a list, or nowhere
COLOURS = {"error": "1;31", "runtime error": "1;31", "warning": "1;35", "note": "1;36",   # as gcc's
           "place": "1", "caret": "1;32"}                                                  # as clang's


def paint(what: str, text: str) -> str:
    """TEXT in the colour of WHAT (an ANSI escape sequence), when colour is on; a kind of message with no
    colour of its own (an internal compiler error's, which names its stage) is painted as an error."""
    return f"\x1b[{COLOURS.get(what, COLOURS['error'])}m{text}\x1b[0m" if POLICY["color"] else text


class Diagnostic(Exception):
    """A mistake in a program, with where it is; render() shows it to a person."""

    kind = "error"     # what the message calls it
    status = 1         # the exit status of lc when it stops on this

    def __init__(self, message: str, span: Span):
        super().__init__(message)
        self.message, self.span = message, span

    def render(self) -> str:
        """FILE:LINE:COL: error: message, the source line, and a caret under the place."""
        source = self.span.source
        line, col = source.line_col(self.span.start)
        text = source.line_text(line)
        pad = "".join("\t" if c == "\t" else " " for c in text[:col - 1])
        width = max(1, min(self.span.end, source.line_starts[line - 1] + len(text)) - self.span.start)
        return (f"{paint('place', f'{source.name}:{line}:{col}:')} {paint(self.kind, self.kind + ':')} "
                f"{self.message}\n{text}\n{pad}{paint('caret', '^' + '~' * (width - 1))}")

    def __str__(self) -> str:
        return self.render()


class CompileError(Diagnostic):
    """A mistake found before the program runs: the compiler's one error type."""



# %% [markdown]
# The caret line copies the tabs of the source line, so the caret stays under
# the right character whatever the terminal's tab width; a span longer than one
# character is underlined with `~`, as clang does. The example above, and a
# span of four characters after a tab:

# %%
text = Source("<expression>", "3 + + 4")
print(CompileError("expected a number, a variable or '('", Span(text, 4, 5)).render())
tabbed = Source("tab.l", "def f(x) =\n\tx + true\n")
print(CompileError("expected Int, found Bool", Span(tabbed, 16, 20)).render())

# %% [markdown]
# A span is two offsets into the text, and everything else — the line,
# the column, the caret — is computed from them and from the `line_starts`
# its `Source` numbered once. The picture below draws the second example's
# program, `tab.l`, a character to a cell, each with its offset under it
# (`⇥` is the tab, `⏎` a line break, `·` a blank); the mistake is a real
# one, which the type checker of [chapter 5](05_types.ipynb) finds, at the
# span the example gave by hand. Look at line 2 first: it starts at offset
# 11, so the span's start, 16, is column 16 − 11 + 1 = 6, the tab counting
# as one column. Then at the last two rows, what `render()` prints under
# its first line: the line itself, and the caret line made of that line's
# characters turned into blanks, tabs kept, so that its `^~~~` sits under
# the shaded characters whatever width a terminal gives a tab.
#
# A row of characters is not a tree of boxes, so this picture writes its
# SVG itself, with the colours and the width of a character of
# `lcompiler.drawing` (the section "Pictures of the book's data" below), as
# chapter 5's picture of its components does. Like a `Picture`, it is shown
# with its description in words (the section says why):

# %%
import html
from dataclasses import dataclass

from lcompiler import drawing, errors          # errors: the package's, which the compiler raises
from lcompiler.types import check_types       # chapter 5's type checker: it finds the mistake

SHOWN = {"\n": "⏎", "\t": "⇥", " ": "·"}      # the characters a cell cannot show as themselves
CELL, ROW = 24, 44                            # pixels: a character's cell, a row of cells with its offsets


@dataclass
class Drawing:
    """SVG text that Jupyter shows as a picture, with alt, its description in words, as its plain-text
    form and in its metadata, as a Picture is shown."""
    svg: str
    alt: str

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/svg+xml": self.svg, "text/plain": self.alt}, {"alt": self.alt}


# %%
def span_picture(source: Source) -> Drawing:
    """The source character by character, with offsets, the span of the error the compiler finds in it
    shaded, and render()'s three lines, the last two cell for cell under the line they show."""
    try:
        check_types(source)
    except errors.CompileError as found:    # not this notebook's CompileError: the package's
        error = found
    span, (line, col) = error.span, source.line_col(error.span.start)
    shapes, y, x0 = [], 20, 170

    def cells(chars, offsets, kind, y, shaded=()):
        for i, (c, offset) in enumerate(zip(chars, offsets)):
            fill, stroke = drawing.STYLES["red" if offset in shaded else "plain"]
            data = f' data-offset="{offset}"' if kind == "source" else ""
            shapes.append(f'<rect class="{kind}"{data} data-code="{ord(c)}" x="{x0 + i * CELL}" y="{y}" '
                          f'width="{CELL - 2}" height="{CELL - 2}" fill="{fill}" stroke="{stroke}"/>')
            shapes.append(f'<text x="{x0 + i * CELL + 11}" y="{y + 15}" text-anchor="middle">'
                          f'{html.escape(SHOWN.get(c, c))}</text>')
            if kind == "source":
                shapes.append(f'<text x="{x0 + i * CELL + 11}" y="{y + 34}" text-anchor="middle" '
                              f'font-size="9" fill="#64748b">{offset}</text>')

    for n, start in enumerate(source.line_starts, 1):
        end = source.line_starts[n] if n < len(source.line_starts) else len(source.text)
        if start == end:
            continue
        shapes.append(f'<text x="8" y="{y + 15}">line {n}, from {start}</text>')
        cells(source.text[start:end], range(start, end), "source", y, range(span.start, span.end))
        y += ROW
    shapes.append(f'<text class="place" x="8" y="{y + 15}" fill="{drawing.STYLES["red"][1]}">Span({span.start}, '
                  f'{span.end}): line {line}, column {span.start} − {source.line_starts[line - 1]} + 1 = {col}'
                  f'</text>')
    header, shown, caret = error.render().split("\n")
    shapes.append(f'<text x="8" y="{y + 49}" font-weight="bold">render():</text>'
                  f'<text class="render" x="{x0}" y="{y + 49}">{html.escape(header)}</text>')
    cells(shown, range(len(shown)), "shown", y + 64)
    cells(caret, range(len(caret)), "caret", y + 64 + CELL, [i for i, c in enumerate(caret) if c in "^~"])
    height = y + 64 + 2 * CELL + 8
    width = round(x0 + max((max(map(len, source.text.split("\n"))) + 1) * CELL, len(header) * drawing.CHAR_W) + 10)
    alt = (f"The file {source.name} drawn a character to a cell, each numbered with its offset; "
           + "; ".join(f"line {n} starts at offset {s}" for n, s in enumerate(source.line_starts, 1)
                       if s < len(source.text))
           + f". The compiler's error '{error.message}' is at Span({span.start}, {span.end}), shaded: "
           f"{source.text[span.start:span.end]!r}, at line {line}, column {col}. Below, what render() "
           f"prints: {header}, then the line, and under it the caret line, which copies the line's tabs, "
           f"so that its {caret.strip()} sits under the shaded characters.")
    return Drawing("\n".join(
        [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12" fill="#0f172a">',
         f"<title>{html.escape(alt)}</title>", f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
         *shapes, "</svg>"]), alt)


span_picture(tabbed)

# %% [markdown]
# ## Notes, and several mistakes at a time
#
# Two things make errors easier to act on, and the stages that read the
# program — the parser of [chapter 4a](04a_syntax.ipynb), the resolver of
# [chapter 4b](04b_meaning.ipynb), the type checker of [chapter
# 5](05_types.ipynb) — use them:
#
# - **notes**: a second place in the program that explains the first. When
#   the two branches of an `if` disagree, the error is at one branch and a
#   note points at the other, where the other type came from. A note renders
#   like an error, with `note` for `error`;
# - **several errors per run**: a programmer who fixes one mistake and
#   compiles again, only to be shown the next, wastes a round trip per
#   mistake. Where it is safe — where going on cannot invent mistakes that
#   are not there — a stage collects its errors and reports them all, in the
#   order of the source. `CompileErrors` is such a group; its own message and
#   span are those of the first error, so code that looks at "the" error of
#   a run sees the first one.
#
# Four definitions. `Note` is a `Diagnostic` that calls itself `note`
# instead of `error`, and is never raised. `CompileError` keeps its
# message and span and adds a list of notes, which `render` prints after the
# error itself: the cell *reopens* the class of the cell above, `class
# CompileError(CompileError):`, the way the chapters grow their classes a
# few methods at a time (the design note below says what becomes of it in
# the package). `CompileErrors` is several errors as one exception: it
# sorts them by where they start in the source and takes its message, span
# and notes from the first. `raise_errors` is what a stage calls at the end:
# nothing if it found no mistake, the error itself if it found one, and a
# group if it found several — a group among them is flattened into its
# members, so that a group never holds a group.

# %%
#| export
class Note(Diagnostic):
    """A remark attached to an error: another place in the program, that explains it."""

    kind = "note"


class CompileError(CompileError):
    """A mistake found before the program runs, with notes that point at other places."""

    def __init__(self, message: str, span: Span, notes: list | tuple = ()):
        super().__init__(message, span)
        self.notes = list(notes)

    def render(self) -> str:
        return "\n".join([super().render()] + [note.render() for note in self.notes])


class CompileErrors(CompileError):
    """Several mistakes of one program, in the order of the source."""

    def __init__(self, errors: list):
        self.errors = sorted(errors, key=lambda e: e.span.start)
        first = self.errors[0]
        super().__init__(first.message, first.span, first.notes)

    def render(self) -> str:
        return "\n".join(error.render() for error in self.errors)


def raise_errors(errors: list) -> None:
    """Raise the errors found, if any: one alone, or several as a group."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise CompileErrors([e for error in errors for e in getattr(error, "errors", [error])])


# %% [markdown]
# ## Warnings
#
# Some programs are legal but almost surely not what their author meant: a
# `match` that forgets a case, a clause that can never be reached, a
# pattern `true` that binds a new variable instead of testing a Bool.
# [Chapter 5](05_types.ipynb#warnings-for-pattern-matching) finds them. A
# `CompileWarning` renders like an error, with `warning` for `error`, and
# is not raised: `report_warnings` hands the warnings of a compilation, in
# the order of the source, to `POLICY["sink"]`, and the compilation goes on.
# The sink is where the warnings go: `lc` makes it its standard error; the
# REPL and the `%%L` cell magic of [chapter 11](11_running.ipynb) make it a
# list, whose warnings they show with the entry's output;
# by default, for a program that calls the compiler as a library — the
# notebooks, the tests — it is `None`, and the warnings are dropped
# (`pattern_warnings`, in chapter 5, computes them for whoever wants them).
# With `warnings_are_errors` set — `lc run -Werror`, `lc build -Werror` —
# it raises them instead, as errors, and `lc` stops with status 1. The REPL
# ([chapter 11](11_running.ipynb)) compiles its whole session again at each
# entry, and shows only the warnings of the new entry, where the entry's
# errors go.

# %%
#| export
class CompileWarning(CompileError):
    """A program that is legal but probably wrong: reported, and the compilation goes on."""

    kind = "warning"


def report_warnings(warnings: list, file=None) -> None:
    """Write the warnings on standard error (FILE), in source order; or, with -Werror, raise them."""
    warnings = sorted(warnings, key=lambda w: w.span.start)
    if POLICY["warnings_are_errors"]:
        raise_errors([CompileError(w.message, w.span, w.notes) for w in warnings])
    sink = file or POLICY["sink"]
    if isinstance(sink, list):
        sink.extend(warnings)
    elif sink is not None:
        for w in warnings:
            print(w.render(), file=sink)


# %% [markdown]
# A warning, made by hand with the message and the span chapter 5 gives
# it, and the same with `-Werror`. (Chapter 5 finds two more in this line:
# `false` binds a new variable too, and its clause can never match, since
# the variable `true` before it matches every value.)

# %%
import sys

text = Source("bool.l", 'def yes(b) = match (b) { true -> "yes"; false -> "no" }\n')
warning = CompileWarning("this binds a new variable 'true'; to test a Bool, use if", Span(text, 25, 29))
report_warnings([warning], file=sys.stdout)
POLICY["warnings_are_errors"] = True
try:
    report_warnings([warning], file=sys.stdout)
except CompileError as error:
    print(error.render())
POLICY["warnings_are_errors"] = False



# %% [markdown]
# Here is one error with a note — made by hand here, as
# [chapter 5](05_types.ipynb) makes it — then two errors of the same text as
# a group, which come out in the order of the source whatever the order they
# were found in:

# %%
text = Source("two.l", 'def f(n) = if (n > 0) "pos" else 0\ndef g = h(1)\n')
branch = CompileError("expected String, found Int", Span(text, 33, 34),
                      [Note("the then branch has type String", Span(text, 22, 27))])
unknown = CompileError("unknown variable h", Span(text, 43, 44))
print(branch.render(), end="\n\n")
print(CompileErrors([unknown, branch]).render())


# %% [markdown]
# Read the two renderings line by line. The first is one error: its own
# three lines (place, source line, caret), then its note in the same shape,
# with `note` where the error has `error` and `^~~~~` under the note's
# span — the five characters of `"pos"`, quotes included. The
# second rendering was given the errors in the wrong order, `unknown` first,
# and prints them in the order of the text: line 1 before line 2. The note
# travels with its error. Why the order of the text, and how the parser
# avoids inventing errors after a first one, is [chapter
# 4a](04a_syntax.ipynb#mistakes-several-at-a-time)'s to tell.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: a class reopened over cells, and one class body</p>
#
# A notebook explains a class the way a person explains it: the data
# first, then a method, a paragraph, the next method. So the chapters grow
# their classes over many cells: chapter 4a's `Parser` gets its expressions,
# then its blocks, then its top-level items; chapter 6's `Printer`,
# `Parser` and `Checker` a construct of the CPS language at a time;
# chapter 10's `Backend` a method per construct of the CPS language.
# Python allows it as it is: `class Parser(Parser):` makes a new class under the old name, whose
# parent is the class of the cell before, and everything after sees the
# new one. The cell above does it to `CompileError`.
#
# The package is not read in that order, but searched, stepped through in
# a debugger, and read from the top by someone who wants to know what a
# `Parser` is. There a chain of classes of the same name, each holding a
# few methods, would be the history of the notebook instead of a program:
# a method would have to be looked for in every link, and `type(x).__mro__`
# would name `Parser` once for every cell that grew it. So the exporter,
# `tools/literate.py`, assembles the pieces. Where a cell of the same module says
# `class X(X):`, its body is moved into the first definition of `X`, under
# a comment that names the cell and its section, and its docstring becomes
# a comment; `lcompiler/errors.py` has one `CompileError`, whose body holds
# the notes. The price is a rule the chapters keep: a reopening adds or
# replaces methods whole, and its `super()` means the class's parent — in
# the package there is no earlier `X` for it to reach. The `__init__` and
# `render` above call `super()` for `Diagnostic`'s, which the first
# `CompileError` did not override, so both readings run the same code. The
# alternative — each class written once, in one cell, with the prose in its
# docstrings or before it — would keep the package and the notebook alike
# at the cost of the explanation, a method at a time, that the notebooks
# exist for.
#
# </div>

# %% [markdown]
# ## Colour on a terminal
#
# On a terminal, colour helps the eye find the word that says what a line
# is: `lc` paints `error:` and `runtime error:` red, `warning:` magenta
# and the place `FILE:LINE:COL:` bold, as gcc and clang both do, `note:`
# cyan, as gcc does, and the caret green, as clang does (gcc paints it in
# the colour of its message). Colour is made of ANSI escape sequences,
# `ESC [ 1;31 m` … `ESC [ 0 m`, which a terminal obeys and a file keeps as
# garbage; so `lc` paints only when asked. `lc run --color=always` (and
# the same option of `lc build`, `lc show` and `lc repl`) paints,
# `--color=never` does not, and `--color=auto`, the default, paints when
# standard error is a terminal and the environment variable `NO_COLOR` is
# unset or empty (the convention of no-color.org). The switch is
# `POLICY["color"]`, read by `paint` each time a message is rendered;
# everything else — the notebooks, `%%L`, and the golden files of the
# tests (the messages they expect, word for word, in `tests/errors/`),
# but for the one `.ansi` file that holds what `--color=always` writes —
# renders without colour. The escape sequences of one warning, made
# visible with `repr`:

# %%
painted = Source("paint.l", "def f(n) = match (n) { _ -> 1; 0 -> 2 }\n")
POLICY["color"] = True
print(repr(CompileWarning("this clause can never match", Span(painted, 31, 32)).render()))
POLICY["color"] = False


# %% [markdown]
# ## Mistakes while a program runs
#
# A mistake that only shows when the program runs — a division by zero, a
# failed assertion, a match that no clause matches — is located and rendered
# with the same caret, by the reference interpreter of [chapter
# 4b](04b_meaning.ipynb) and by the runtime of the native code
# ([chapter 10](10_llvm.ipynb) renders its messages in the same format).
# The class changes only two attributes, the word printed after the
# position and the exit status of `lc`:

# %%
#| export
class RunError(Diagnostic):
    """An error while an L program runs: printed as 'runtime error', exit status 2."""

    kind = "runtime error"
    status = 2


# %%
source = Source("half.l", 'print("one")\nprint(1 / (1 - 1))\n')
error = RunError("division by zero", Span(source, 21, 22))
print(error.render())
print("exit status", error.status)

# %% [markdown]
# ## Pictures of the book's data
#
# The book draws the structures it builds — chapter 1's chains of
# instructions, chapter 4a's syntax trees, chapter 6's CPS terms, chapter
# 11's split of a module — with a small module of its own,
# `lcompiler.drawing`. A `Box` has a label, the boxes below it, a colour,
# and a label for the edge that comes down to it:

# %%
#| export drawing
"""Pictures of the book's data: trees of labelled boxes, drawn as SVG."""

from dataclasses import dataclass, field
from html import escape

# fill and stroke of each style of box: the colours of chapter 6's diagrams
STYLES = {
    "plain": ("#f1f5f9", "#64748b"),
    "blue": ("#dbeafe", "#3b82f6"),
    "yellow": ("#fef9c3", "#ca8a04"),
    "green": ("#dcfce7", "#16a34a"),
    "red": ("#fee2e2", "#dc2626"),
}


@dataclass
class Box:
    """A node of a drawing: its label, the boxes below it, its style, and the label of
    the edge that comes down to it from its parent. A name lets an arrow point at it."""
    label: str
    children: list = field(default_factory=list)
    style: str = "plain"
    edge: str = ""
    name: str | None = None


# %% [markdown]
# A picture lays its trees out the simplest way that keeps the promises: a
# leaf takes the width of its box, made to fit its label; a parent is
# centred over its children, whose subtrees sit side by side in bands that
# never overlap — a parent wider than its children makes its band wider,
# not its neighbours' boxes hidden. (A tidier layout, Reingold and
# Tilford's of 1981
# ([bibliography](../bibliography.md#papers-and-books)), moves two
# neighbouring subtrees as close together as their outlines allow, level
# by level; a band leaves empty the room beside a narrow top, and needs no
# outlines.) Every position is computed from the data, with no
# randomness, so the picture is the same on every run and the tests can
# compare it like any other output (`tests/test_drawing.py` checks the
# layout on random trees).

# %%
#| export drawing
CHAR_W, BOX_H, GAP, LEVEL = 7.2, 22, 14, 46     # pixels: a character, a box, between boxes, between levels


def _width(box: Box) -> float:
    return len(box.label) * CHAR_W + 14


def _layout(box: Box, left: float, depth: int, places: dict) -> float:
    """Place box and its subtree in a band of the picture that starts at x = left; return the
    band's width. places[id(box)] = (x of the box's centre, depth)."""
    w = _width(box)
    if not box.children:
        places[id(box)] = (left + w / 2, depth)
        return w
    x = 0.0                                        # the children's bands side by side, from 0
    for child in box.children:
        x += _layout(child, x, depth + 1, places) + GAP
    inner = x - GAP
    centre = (places[id(box.children[0])][0] + places[id(box.children[-1])][0]) / 2
    shift = max(0.0, w / 2 - centre)               # room on the left for a parent wider than them
    _move(box.children, left + shift, places)
    places[id(box)] = (left + shift + centre, depth)
    return max(inner + shift, shift + centre + w / 2)


def _move(boxes: list, dx: float, places: dict) -> None:
    """Move the boxes and everything below them dx to the right."""
    stack = list(boxes)
    while stack:
        box = stack.pop()
        x, depth = places[id(box)]
        places[id(box)] = (x + dx, depth)
        stack += box.children


# %% [markdown]
# An edge's label goes beside its edge, at the edge's middle, on the outer
# side: left of an edge that goes down to the left, right of one that goes
# down to the right or straight down. So the labels of a parent's first and
# last children lean away from each other, and on a chain of boxes every
# label is on the right. When that place covers something drawn before it
# — a box, or another label — the label tries a quarter of the way from the
# child's end, then the other side, then a quarter from the parent's end;
# if all six places are taken, it keeps the first (the tests check that
# no picture of the book comes to that). Each label is measured as
# monospace text, `CHAR_W` per character. A label that sticks out left of
# the first box makes the picture wider, by moving everything right.

# %%
#| export drawing
def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two rectangles (left, top, right, bottom) cover a common area (touching is not)."""
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def _label_place(edge: tuple, text: str, taken: list) -> tuple:
    """Where the label of the edge (px, py, cx, cy) -- from the parent's bottom to the child's top --
    goes: (x, baseline y, anchor) of its first place that overlaps nothing in taken (rectangles of
    boxes and of labels), or of the first place if none is free; the outer side of the edge first.
    Adds its rectangle to taken."""
    px, py, cx, cy = edge
    width = len(text) * CHAR_W
    outer = -1 if cx < px - 0.5 else 1             # the side away from the parent's other children
    places = [(px + t * (cx - px) + side * 6, py + t * (cy - py) + 4, "start" if side > 0 else "end")
              for t, side in ((0.5, outer), (0.75, outer), (0.5, -outer), (0.75, -outer), (0.25, outer),
                              (0.25, -outer))]

    def covers(place):
        left = place[0] if place[2] == "start" else place[0] - width
        return (left, place[1] - 10, left + width, place[1] + 2)
    chosen = next((p for p in places if not any(_overlap(covers(p), r) for r in taken)), places[0])
    taken.append(covers(chosen))
    return chosen


# %% [markdown]
# `_draw` turns laid-out trees into SVG shapes: a rectangle and a label per
# box, a line per edge, under the boxes, and the edge's label in its place.

# %%
#| export drawing
def _draw(roots: list, places: dict, top: float, edges: str, shapes: list, named: dict) -> float:
    """SVG shapes for laid-out trees: a rectangle and a label per box, a line per edge (its
    arrow pointing "down" to the child, "up" to the parent, or "none"; "hidden": no line, the
    tree only lays the boxes out), the edge's label
    beside it. Records in named where the boxes with a name are; returns the lowest y, and the x where
    the leftmost edge label starts (inf if there is none)."""
    bottom = 0
    stack, every = [(r, None) for r in roots], list(roots)
    taken = []                                       # the boxes' rectangles, then the labels' too
    while every:
        box = every.pop()
        cx, depth = places[id(box)]
        taken.append((cx - _width(box) / 2, top + depth * LEVEL, cx + _width(box) / 2, top + depth * LEVEL + BOX_H))
        every += box.children
    boxes = len(taken)
    while stack:
        box, parent = stack.pop()
        cx, depth = places[id(box)]
        y = top + depth * LEVEL
        bottom = max(bottom, y + BOX_H)
        if box.name:
            named[box.name] = (cx + _width(box) / 2, y)     # arrows meet a box's right side
        fill, stroke = STYLES[box.style]
        w = _width(box)
        shapes.append(f'<rect x="{cx - w / 2:.1f}" y="{y}" width="{w:.1f}" height="{BOX_H}" rx="5" '
                      f'fill="{fill}" stroke="{stroke}"/>')
        shapes.append(f'<text x="{cx:.1f}" y="{y + 15}" text-anchor="middle">{escape(box.label)}</text>')
        if parent is not None and edges != "hidden":
            px, py = parent
            line = f'M{cx:.1f},{y} L{px:.1f},{py + BOX_H}' if edges == "up" else f'M{px:.1f},{py + BOX_H} L{cx:.1f},{y}'
            marker = '' if edges == "none" else ' marker-end="url(#arrow)"'
            shapes.insert(0, f'<path d="{line}" stroke="#475569" fill="none"{marker}/>')   # under the boxes
            if box.edge:
                x, baseline, anchor = _label_place((px, py + BOX_H, cx, y), box.edge, taken)
                shapes.append(f'<text x="{x:.1f}" y="{baseline:.1f}"'
                              + ('' if anchor == "start" else f' text-anchor="{anchor}"')
                              + f' fill="#7c3aed">{escape(box.edge)}</text>')
        stack += [(c, (cx, y)) for c in reversed(box.children)]
    return bottom, min((r[0] for r in taken[boxes:]), default=float("inf"))


# %% [markdown]
# A `Picture` holds panels of trees side by side, each with a caption, adds
# arrows between named boxes (dashed and red, or solid and grey when an
# arrow names that style; an arrow from a box to itself is a loop on its
# right side), and becomes SVG text. Jupyter shows it
# as an image: `_repr_mimebundle_` gives the SVG, and a description in words,
# `alt`, as its plain-text form and as metadata, where the book's site finds
# it (for readers who do not see the picture).

# %%
#| export drawing
@dataclass
class Picture:
    """Panels of trees side by side, each with a caption; edges from parent to child
    (arrows "down", "up" towards the parent, "none", or "hidden"); extra arrows between named boxes,
    dashed unless an arrow says "solid". Shown in Jupyter as SVG, with alt, a description in
    words, for the site."""
    panels: list                   # [(caption, [root Box, ...]), ...]
    alt: str
    edges: str = "down"
    arrows: list = field(default_factory=list)   # [(name of the box it leaves, name of the box it reaches)
    #                                               or the same and "dashed" or "solid"]

    def svg(self) -> str:
        places, shapes, x0 = {}, [], 10
        named = {}
        height, leftmost = 0, float("inf")
        for caption, roots in self.panels:
            x, top = x0, 34 if caption else 10
            for root in roots:
                x += _layout(root, x, 0, places) + 2 * GAP
            right = max(x - 2 * GAP, x0 + len(caption) * CHAR_W)
            if caption:
                shapes.append(f'<text x="{(x0 + right) / 2:.1f}" y="18" text-anchor="middle" '
                              f'font-weight="bold">{escape(caption)}</text>')
            bottom, labels_left = _draw(roots, places, top, self.edges, shapes, named)
            height, leftmost = max(height, bottom), min(leftmost, labels_left)
            x0 = right + 4 * GAP
        widest = 0
        for source, target, *style in self.arrows:
            (x1, y1), (x2, y2) = named[source], named[target]
            bend = max(x1, x2) + 30 + abs(y1 - y2) / 5
            a, b = (y1 + BOX_H / 2, y2 + BOX_H / 2) if source != target else (y1 + 5, y1 + BOX_H - 5)
            look = ('stroke="#475569"' if style == ["solid"] else 'stroke="#dc2626" stroke-dasharray="5,3"')
            shapes.append(f'<path d="M{x1:.1f},{a} C{bend:.1f},{a - (source == target) * 12} '
                          f'{bend:.1f},{b + (source == target) * 12} {x2 + 1:.1f},{b}" {look} '
                          f'fill="none" marker-end="url(#arrow)"/>')
            widest = max(widest, bend)
        width, height = max(x0 - 4 * GAP, widest) + 10, height + 10
        shift = max(0.0, 2 - leftmost)                  # room for a label left of the first box
        if shift:
            width += shift
            shapes = [f'<g transform="translate({shift:.1f},0)">', *shapes, '</g>']
        return "\n".join(
            [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
             f'viewBox="0 0 {width:.0f} {height}" font-family="monospace" font-size="12" fill="#0f172a">',
             f'<title>{escape(self.alt)}</title>',
             '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
             '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>',
             f'<rect width="{width:.0f}" height="{height}" fill="#ffffff"/>', *shapes, '</svg>'])

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/svg+xml": self.svg(), "text/plain": self.alt}, {"alt": self.alt}


# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: why draw by hand</p>
#
# Graphviz draws graphs better than a hundred-odd lines of Python, but it
# is a program to install, its SVG changes with its version, and the book must
# build on a machine that has only Python's packages and the C compiler
# the runtime needs. Matplotlib is installed, but a
# plot is a poor way to show boxes and arrows. Writing the SVG ourselves costs
# those hundred-odd lines (the five cells above), keeps every picture
# deterministic (the tests compare the stored pictures with fresh ones,
# text for text) and lets a picture carry
# its description.
#
# </div>

# %% [markdown]
# Two panels, an arrow between two named boxes, labels on edges, and
# edges that point up, to the parent — in both panels, since `edges` is
# the whole picture's: the ways the chapters use a picture. The edges of
# the chain go straight up, so each label is right of its edge's middle.

# %%
sum_tree = Box("+", [Box("3"), Box("+", [Box("2"), Box("4")], "blue", name="inner")], "blue")
chain_up = Box("Halt()", [Box("Print(%2)", [Box("%2 = add 3, %1", [Box("%1 = add 2, 4", name="first", edge="%1")],
                                                edge="%2")])], "red")
Picture([("3 + (2 + 4)", [sum_tree]), ("its instructions, each pointing at the next", [chain_up])],
        alt="Two panels. The tree of 3 + (2 + 4), each edge pointing up from a child to its parent: a + whose "
            "left child is 3 and whose right child is a + of 2 and 4. Beside it, the instructions that compute "
            "it, from the last, Halt, up to the first, %1 = add 2, 4, each edge pointing up to the instruction "
            "that follows it; the edge that leaves %1 = add 2, 4 is labelled %1, the one that leaves "
            "%2 = add 3, %1 is labelled %2: the value each hands on. A dashed arrow goes from the inner + of "
            "the tree to the first instruction, which computes it.",
        edges="up", arrows=[("inner", "first")])

# %% [markdown]
# The `alt` of a picture is its description in words: Jupyter keeps it as
# the picture's plain-text form (what a frontend that cannot show SVG
# shows), and the site uses it as the image's `alt` text.
# Whoever draws a picture writes it, since only they know what the picture
# is meant to show; the tests of the site require one on every picture.
#
# ## Colours for L
#
# The book shows L code in Markdown cells and pages (fenced blocks marked
# `l`), and the site colours code with [Pygments](https://pygments.org), as
# do nbconvert and many other tools. A Pygments lexer for L is a small table of
# regular expressions — much like the first half of our own lexer, minus the
# separations. The package registers it under the name `l` through the
# `pygments.lexers` entry point (in `pyproject.toml`), so any tool that uses
# Pygments finds it once `lcompiler` is installed.

# %%
#| export highlight
"""A Pygments lexer for L, registered as `l` through the pygments.lexers entry point."""

from pygments.lexer import RegexLexer, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text


class LLexer(RegexLexer):
    """Pygments lexer for the L language of the book."""

    name = "L"
    aliases = ["l", "l-lang"]
    filenames = ["*.l"]

    tokens = {
        "root": [
            (r"\s+", Text),
            (r"//[^\n]*", Comment.Single),
            (r"/\*(.|\n)*?\*/", Comment.Multiline),
            (words(("def", "data", "let", "var", "if", "else", "match", "while", "exception", "try", "catch"),
                   suffix=r"\b"), Keyword),
            (words(("print", "assert", "raise"), suffix=r"\b"), Name.Builtin),
            (words(("true", "false"), suffix=r"\b"), Keyword.Constant),
            (r"[0-9]+", Number.Integer),
            (r'"(\\.|[^"\\\n])*"', String),
            (r"[A-Z][A-Za-z0-9_]*", Name.Class),
            (r"[a-z_][A-Za-z0-9_]*\??", Name),
            (r":=|->|==|!=|<=|>=|&&|\|\||[-+*/%<>=!.:]", Operator),
            (r"[(){},;]", Punctuation),
        ]
    }


# %% [markdown]
# Pygments finds a lexer by name through the entry point, so asking for `l`
# checks that the package is installed and registers ours; the lexer's
# table has a rule a line:

# %%
from pygments.lexers import get_lexer_by_name

lexer = get_lexer_by_name("l")
print(type(lexer).__name__, "with", len(lexer.tokens["root"]), "rules")

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: a second lexer, for colours</p>
#
# Pygments also accepts a lexer written by hand, so our own lexer could
# have been wrapped instead of written again as a table. It would be the
# wrong tool: a highlighter must hand back every character of the text —
# comments and blanks included, to be printed in their colours — while our
# lexer drops comments and blanks, keeping only the separation they make.
# And a highlighter must colour text that has mistakes in it — this
# appendix's own error examples — where our lexer reports them. The
# twelve regular expressions of its table do the job; the price is that a new keyword must be
# added in two places — as `exception`, `try` and `catch` were — which
# `tests/test_syntax.py` checks: every keyword of chapter 4a's lexer is a
# keyword here.
#
# </div>

# %% [markdown]
# The site uses the same lexer for every fenced block marked `l`, like this
# one:
#
# ```l
# def fact = {
#   0 -> 1
#   n -> n * fact(n - 1)
# }
# print(fact(10))   // 3628800
# ```
#
# ## What the tests check
#
# - `tests/test_errors.py` holds the exact messages of the compiler in
#   golden files (`tests/errors/`) — notes, "did you mean", several errors in
#   the order of the source — and checks that one error alone is a plain
#   `CompileError` while a group starts with its first; `tests/test_corpus.py`
#   checks that every rejected program of the corpus is rejected, and every
#   failing one stops, at the line and column its first line names, which
#   is `Span`'s arithmetic. The golden files `warn_*.l` hold warnings, with
#   the program run (status 0); `tests/test_warnings.py` checks `-Werror`
#   (status 1), the colours of `--color=always` byte for byte against a golden file, that every kind
#   of message has a colour (a painted runtime error, an uncaught exception,
#   keeps status 2), and, through a pseudo-terminal, that `auto` paints a
#   terminal unless `NO_COLOR` is set.
# - `tests/test_drawing.py` lays out random trees and checks that the boxes
#   of one level never overlap and that a parent is centred over its
#   children; that a picture is well-formed SVG holding every label, and its
#   description; that arrows between named boxes widen the picture
#   enough to hold them; and that an arrow drawn solid has no dashes, one
#   from a box to itself comes back at another height, and `edges="hidden"`
#   draws no line between a parent and its child. It also reads back the
#   picture of `tab.l` above: its cells are the text's characters, at the
#   line and column it counts itself, and the shaded ones are the span of
#   the error the compiler reports today, with the caret under them.
# - `tests/test_syntax.py` asks Pygments for the lexer `l` and colours a
#   line of L with it; `tests/test_book.py` and `tests/test_site.py` check
#   that the site colours L where the chapters print it.
#
# ## Exercises
#
# 1. Make `render` show the line before the one in error too, dimmed, as
#    some compilers do. Which golden files of `tests/errors/` change?
# 2. A `Span` that crosses a line break is underlined only to the end of its
#    first line. Render such a span with every line it covers, each
#    underlined, and try it on an unclosed string.
# 3. Give `Picture` a `direction` in which trees grow from left to right
#    instead of top to bottom. What changes in `_layout`, and what in `_draw`?
# 4. Pygments' lexer marks `x.f` as a name, an operator and a name. Colour
#    the name after a `.` as a function instead.
#
# <details><summary>Solutions</summary>
#
# 1. In `Diagnostic.render`, when `line > 1`, add `source.line_text(line -
#    1)` before the line in error (dimmed with the terminal's `\x1b[2m` and
#    `\x1b[0m` only when colour is on, as `paint` does: the `.err` golden
#    files must stay plain text). Every golden file with a message (an
#    error, a note or a warning) below line 1 changes — which is most of
#    them, and is why a change of format is a change of the contract, made
#    once for every stage.
# 2. Loop from the span's first line to the line of `span.end - 1`: print
#    each line, with the caret under the start on the first, `~` from the
#    first column on the lines in between, and up to the end column on the
#    last. An unclosed string does not show the difference: its error points
#    at the opening quote alone (the token the lexer makes of it ends at the
#    end of its line). It needs a span that does cross lines: a `match` left
#    without its closing brace, whose error could span from its `{` to the
#    end of the file.
# 3. `_layout` places siblings side by side, each subtree in a band as wide
#    as it needs, and `_draw` turns a box's depth into its y. Swap the
#    roles. In `_layout`, siblings are stacked down the page: a leaf's band
#    is the height of a box, `BOX_H`, instead of the width of its label,
#    and a parent's y is the middle of its children's (the room kept for a
#    parent wider than its children is no longer needed: every box has the
#    same height). A box's x comes from its depth, but the levels are no
#    longer equally deep: the x of depth d is the sum, over the depths
#    before it, of the widest box at that depth plus a gap, which needs a
#    first walk that finds the widest box of each depth. `_draw` swaps x and
#    y for rectangles and edges, and an edge leaves the right side of the
#    parent for the left side of the child; `Picture.svg` computes the
#    picture's width and height from the new extents. The tests of
#    `tests/test_drawing.py` carry over with the axes swapped.
# 4. Add a rule before the one for names, matching a `.` followed by a name,
#    with `bygroups(Operator, Name.Function)` from `pygments.lexer`; the
#    order of the rules is the order Pygments tries them.
#
# </details>
