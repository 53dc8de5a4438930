"""The book is true to itself: stored outputs hold no crash, the notebooks' code has no
undefined name, and the site has no broken link and no picture without a description.

The checks of issue 18. Each reads the notebooks as they are stored, or the site built once
for all of them (the `built_site` fixture of conftest.py): together they take seconds.
"""

import ast
import html.parser
import json
import posixpath
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from pyflakes import checker, messages

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import literate  # noqa: E402

NOTEBOOKS = literate.notebook_paths()
# A cell that exists to show a crash says so with this tag (the one nbclient and nbval know:
# the cell is expected to raise, and running the notebook goes on after it).
SHOWS_AN_ERROR = "raises-exception"
CRASH_MARKS = ("internal compiler error", "Traceback (most recent call last)")


def code_cells(notebook: Path) -> list[dict]:
    return [c for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]


def output_text(output: dict) -> str:
    """Everything an output shows as text: a stream, a result, an error and its traceback."""
    data = output.get("data", {})
    return "".join(output.get("text", "")) + "".join(data.get("text/plain", "")) + "\n".join(
        [output.get("ename", ""), output.get("evalue", "")] + output.get("traceback", []))


def crashes(notebook: Path) -> list[str]:
    """Stored outputs that show a crash, in cells not tagged as showing one."""
    found = []
    for n, cell in enumerate(code_cells(notebook), 1):
        if SHOWS_AN_ERROR in cell["metadata"].get("tags", []):
            continue
        for output in cell["outputs"]:
            text = output_text(output)
            if output["output_type"] == "error":
                found.append(f"{notebook.name}, code cell {n}: {output['ename']}: {output['evalue']}")
            elif marks := [m for m in CRASH_MARKS if m in text]:
                line = next(l for l in text.splitlines() if any(m in l for m in marks))
                found.append(f"{notebook.name}, code cell {n}: {line.strip()}")
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_stored_output_shows_a_crash(notebook):
    assert crashes(notebook) == []


def test_the_crash_check_can_fail(tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "source": "lc('show', 'closure', 'x.l')",
            "outputs": [{"output_type": "stream", "name": "stderr",
                         "text": "lc: internal compiler error: NameError: name 'x' is not defined\n"}]}
    error = {"cell_type": "code", "metadata": {}, "source": "1 / 0",
             "outputs": [{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
                          "traceback": []}]}
    shown = dict(error, metadata={"tags": [SHOWS_AN_ERROR]})
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps({"cells": [cell, error, shown]}))
    assert crashes(path) == ["99_x.ipynb, code cell 1: lc: internal compiler error: NameError: name 'x' is not defined",
                             "99_x.ipynb, code cell 2: ZeroDivisionError: division by zero"]


# --- undefined names ----------------------------------------------------------------------

UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)
KERNEL_BUILTINS = {"get_ipython", "display", "In", "Out", "exit", "quit"}


def kernel_code(cells: list[str]) -> tuple[str, list[int]]:
    """The cells as the kernel runs them, one after another: IPython syntax (%magics, %%L
    cells, !shell) turned into the Python IPython runs; and the cell each line comes from."""
    transform = TransformerManager().transform_cell
    lines, owners = [], []
    for n, source in enumerate(cells, 1):
        python = transform(source).splitlines()
        lines += python
        owners += [n] * len(python)
    return "\n".join(lines) + "\n", owners


def undefined_names(cells: list[str], name: str) -> list[str]:
    code, owners = kernel_code(cells)
    found = checker.Checker(ast.parse(code), filename=name, builtins=KERNEL_BUILTINS).messages
    return [f"{name}, code cell {owners[m.lineno - 1]}: {m.message % m.message_args}"
            for m in found if isinstance(m, UNDEFINED)]


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_undefined_name_in_a_notebook(notebook):
    cells = ["".join(c["source"]) for c in code_cells(notebook)]
    assert undefined_names(cells, notebook.name) == []


@pytest.mark.slow
def test_no_undefined_name_in_the_package():
    found = []
    for module in sorted((ROOT / "lcompiler").glob("*.py")):
        for m in checker.Checker(ast.parse(module.read_text()), filename=module.name).messages:
            if isinstance(m, UNDEFINED):
                found.append(f"{module.name}:{m.lineno}: {m.message % m.message_args}")
    assert found == []


def test_the_lint_sees_what_the_kernel_sees():
    cells = ["%load_ext lcompiler.driver", "%%L fib.l\ndef fib(n) = n\nprint(undefined_in_L)",
             "def f():\n    return later()", "x = y + 1", "def later(): return display(In)", "f()"]
    assert undefined_names(cells, "t.ipynb") == ["t.ipynb, code cell 4: undefined name 'y'"]


# --- the site: links, anchors, pictures ---------------------------------------------------

class Page(html.parser.HTMLParser):
    """The ids a page defines, the links it makes, and its images' alt texts."""

    def __init__(self, text: str):
        super().__init__()
        self.ids, self.links, self.images = set(), [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key) and (key == "id" or tag == "a"):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in ("img", "script") and attrs.get("src"):
            self.links.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "img":
            self.images.append(attrs.get("alt"))


def site_pages(site: Path) -> dict[str, Page]:
    return {p.relative_to(site).as_posix(): Page(p.read_text(encoding="utf-8"))
            for p in sorted(site.rglob("*.html")) if p.name != "404.html"}


def broken_links(site: Path) -> list[str]:
    """Internal links of the site that lead to no file, or to no element with the anchor."""
    pages, broken = site_pages(site), []
    for name, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("data:"):
                continue
            path = unquote(parts.path)
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), path)) if path else name
            if (site / target).is_dir():
                target = posixpath.join(target, "index.html")
            if not (site / target).is_file():
                broken.append(f"{name}: {link} (no such file)")
            elif parts.fragment and target in pages and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{name}: {link} (no such anchor)")
    return broken


@pytest.mark.slow
def test_every_link_of_the_site_leads_somewhere(built_site):
    assert broken_links(built_site) == []


def test_the_link_check_can_fail(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2><a href="#here">ok</a><a href="#gone">1</a>'
                                               '<a href="../b/">2</a><a href="../c.md">3</a><a href="../">ok</a>')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "index.html").write_text('<a href="../a/#here">ok</a><a href="../a/#there">4</a>')
    (tmp_path / "index.html").write_text('<img src="a/" alt="x"><a href="https://example.org/#x">ok</a>')
    assert broken_links(tmp_path) == ["a/index.html: #gone (no such anchor)", "a/index.html: ../c.md (no such file)",
                                      "b/index.html: ../a/#there (no such anchor)"]


def test_chapters_link_to_each_other_as_pages(built_site):
    page = (built_site / "notebooks" / "04a_syntax" / "index.html").read_text()
    assert 'href="../04b_meaning/"' in page and 'href="../../language/' in page


@pytest.mark.slow
def test_every_picture_has_a_description(built_site):
    missing = [name for name, page in site_pages(built_site).items()
               for alt in page.images if not alt or alt == "No description has been provided for this image"]
    assert missing == []


def test_l_cells_are_highlighted_as_l(built_site):
    page = (built_site / "notebooks" / "11_running" / "index.html").read_text()
    assert 'class="highlight-ipynb hl-l"><pre><span></span><span class="cp">%%L' in page


def numbered_continuations(text: str) -> list[str]:
    """Lines that continue a bullet of a Markdown list but begin with a number and a full stop:
    Python-Markdown (MkDocs' pages) reads them as a new numbered item, so that a year at the start
    of a wrapped line ("  2001. When ...") splits a bibliography entry in two."""
    found, in_bullet = [], False
    for line in text.splitlines():
        if line.startswith(("- ", "* ")):
            in_bullet = True
        elif not line.strip():
            in_bullet = False
        elif in_bullet and re.match(r"\s+\d+\.\s", line):
            found.append(line)
    return found


def test_no_wrapped_line_of_a_page_starts_like_a_numbered_item():
    found = {page.name: numbered_continuations(page.read_text()) for page in (ROOT / "book").glob("*.md")}
    assert not {name: lines for name, lines in found.items() if lines}


def test_the_numbered_continuation_check_can_fail():
    assert numbered_continuations('- A. "Title". *ICFP*\n  2001. What it is.\n') == ["  2001. What it is."]
    assert numbered_continuations("1. one\n2. two\n- a bullet\n  with 2 lines\n") == []
