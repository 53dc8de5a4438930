"""The site, as a reader gets it: on a phone and a desktop, light and dark, with the notebooks to
download, the diagrams at full size and L highlighted where the chapters print it.

The checks of issue 28, section 7. Those that look at the pages in a browser run in a headless
Chromium (tools/site_check.py drives it) when the machine has one, and are skipped otherwise;
CI installs it (.ci/run).
"""

import base64
import html
import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import literate  # noqa: E402
import site_check  # noqa: E402
import site_hooks  # noqa: E402
import book_stats  # noqa: E402

NOTEBOOKS = literate.notebook_paths()
CHAPTERS = [f"notebooks/{p.stem}" for p in NOTEBOOKS]
PAGES = [".", "preface", "language", "glossary", "bibliography"]
needs_chromium = pytest.mark.skipif(site_check.chromium() is None,
                                    reason="no Chromium on this machine (apt-get install chromium; .ci/run does)")


# --- the notebooks, to download -----------------------------------------------------------

def links(page: Path) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'<a\b[^>]*\bhref="([^"]*)"', page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_chapter_offers_its_notebook_and_its_text_twin(built_site, notebook):
    page = built_site / "notebooks" / notebook.stem / "index.html"
    offered = [link for link in links(page) if link.startswith("../../downloads/") or link == "../../notebooks.zip"]
    assert offered == [f"../../downloads/{notebook.stem}.ipynb", f"../../downloads/{notebook.stem}.py",
                       "../../notebooks.zip"]
    for source in (notebook, notebook.with_suffix(".py")):
        assert (built_site / "downloads" / source.name).read_bytes() == source.read_bytes()


def test_the_home_page_offers_all_the_notebooks_in_one_archive(built_site):
    assert "notebooks.zip" in links(built_site / "index.html")
    with zipfile.ZipFile(built_site / "notebooks.zip") as archive:
        names = archive.namelist()
        expected = [f"notebooks/{p.name}" for nb in NOTEBOOKS for p in (nb, nb.with_suffix(".py"))]
        assert names == expected + ["notebooks/jupytext.toml"]
        for name in names:
            assert archive.read(name) == (ROOT / name).read_bytes()


def test_the_archive_is_the_same_for_the_same_notebooks(tmp_path):
    a, b = tmp_path / "a.ipynb", tmp_path / "b.py"
    a.write_text("{}")
    b.write_text("# %%\n")
    first = site_hooks.notebook_archive([a, b])
    assert first == site_hooks.notebook_archive([a, b])
    b.write_text("# %%\n1\n")
    assert first != site_hooks.notebook_archive([a, b])


# --- pictures at full size ----------------------------------------------------------------

IMAGE = re.compile(r'<a class="book-figure" href="([^"]+)"[^>]*>\s*<img\b[^>]*?\bsrc="data:image/[^;]+;base64,([^"]*)"')


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_picture_opens_at_full_size(built_site, notebook):
    folder = built_site / "notebooks" / notebook.stem
    text = (folder / "index.html").read_text(encoding="utf-8")
    pictures = len(re.findall(r'<div class="jp-Render(?:edImage|edSVG)', text))
    linked = IMAGE.findall(text)
    assert len(linked) == pictures
    for target, data in linked:
        assert (folder / target).read_bytes() == base64.b64decode(data)


# --- L in outputs -------------------------------------------------------------------------

def rendered(tmp_path: Path, cells: list[dict]) -> str:
    """A small notebook rendered as mkdocs-jupyter renders a chapter."""
    from mkdocs_jupyter.convert import nb2html

    notebook = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(notebook))
    return nb2html(str(path))


def code_cell(n: int, text: str, tags=(), stream="stdout") -> dict:
    return {"cell_type": "code", "id": f"c{n}", "execution_count": n, "metadata": {"tags": list(tags)},
            "source": "print(program)", "outputs": [{"output_type": "stream", "name": stream, "text": text}]}


def test_l_that_a_tagged_cell_prints_is_highlighted_as_l(tmp_path):
    program = 'def twice(f, x) = f(f(x))\nprint("<&>", twice({ n -> n + 1 }, 40))\n'
    text = rendered(tmp_path, [code_cell(1, program, tags=[site_hooks.L_OUTPUT]),
                               code_cell(2, program),
                               code_cell(3, "x.l:1:1: error: def\n", tags=[site_hooks.L_OUTPUT], stream="stderr")])
    out = site_hooks._highlight_l_outputs(text)
    cells = re.split(r'id="cell-id=', out)[1:]
    assert len(cells) == 3
    # the tagged cell: L's keywords, builtins, numbers and strings as Pygments marks them
    assert '<div class="highlight-ipynb hl-l l-output"><pre><span class="k">def</span>' in cells[0]
    assert '<span class="nb">print</span>' in cells[0] and '<span class="mi">40</span>' in cells[0]
    assert '<span class="s">"&lt;&amp;&gt;"</span>' in cells[0]
    # the same text untagged, and an error a tagged cell writes to stderr, stay plain
    assert "hl-l" not in cells[1] and "hl-l" not in cells[2]
    assert "<pre>def twice(f, x) = f(f(x))" in cells[1]


def test_a_notebook_without_the_tag_is_left_as_it_is(tmp_path):
    text = rendered(tmp_path, [code_cell(1, "def f(x) = x\n")])
    assert site_hooks._highlight_l_outputs(text) == text


# --- in a browser: phone and desktop, light and dark ----------------------------------------

@pytest.fixture(scope="module")
def browser():
    with site_check.Browser() as b:
        yield b


@pytest.mark.slow
@needs_chromium
def test_the_colour_scheme_follows_the_system(built_site, browser):
    for dark, scheme in ((False, "default"), (True, "slate")):
        browser.open(site_check.page_url(built_site, "notebooks/01_addlang"), *site_check.PHONE, dark=dark)
        assert browser.evaluate(site_check.SCHEME_JS) == scheme
    # the toggle is still there, and takes the reader from the system's choice to light
    assert browser.evaluate("document.querySelectorAll('form[data-md-component=palette] input').length") == 3


@pytest.mark.slow
@needs_chromium
def test_no_page_breaks_a_word_or_cuts_code_on_a_phone_or_a_desktop(built_site, browser):
    found = site_check.check(browser, built_site, PAGES + CHAPTERS)
    assert {page: problems for page, problems in found.items() if problems} == {}


@needs_chromium
def test_the_browser_check_can_fail(tmp_path, browser):
    """JupyterLab's own rule for outputs, a table too wide with nothing to scroll it, code cut
    by its box, list items run on as raw Markdown into a paragraph, and a table made too wide
    by its cells' minimum width: each is found."""
    long_line = " ".join(["overflow"] * 30)
    (tmp_path / "index.html").write_text(f"""<!doctype html>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  .jp-OutputArea-output pre {{ word-break: break-all; white-space: pre-wrap; }}
  .jp-InputArea-editor {{ overflow: hidden; }}
  .jp-InputArea-editor pre {{ overflow: visible; width: max-content; }}
  table {{ border-collapse: collapse; }}
</style>
<div class="md-content"><div class="jp-Cell">
  <div class="jp-InputArea-editor"><pre>{long_line}</pre></div>
  <div class="jp-OutputArea-output"><pre>{long_line}</pre></div>
  <table><tr><td>{"&nbsp;".join(["wide"] * 40)}</td></tr></table>
</div><ul><li><p>A first item, its last paragraph.
- <a id="next"></a>The next item, run on, with [a link](https://example.org).</p></li></ul>
<div class="md-typeset__table"><table id="narrow"><tr><th style="min-width: 200px">a</th>
  <th style="min-width: 200px">b</th></tr></table></div></div>""")
    browser.open((tmp_path / "index.html").as_uri(), *site_check.PHONE)
    found = browser.evaluate(site_check.CHECKS_JS)
    assert any(f.startswith("an output (cell 1): the word 'overflow' is broken") for f in found), found
    assert "an output (cell 1): its lines wrap (white-space: pre-wrap)" in found
    assert "a code cell (cell 1): it is wider than its box, which cuts it" in found
    assert "a table (cell 1): it is wider than the text column and nothing scrolls it" in found
    assert any(f.startswith("the page is ") for f in found), found
    assert "the prose (p) shows a list item as raw Markdown: 'A first item, its last paragraph.\n-'" in found
    assert any(f.startswith("the prose (p) shows a link as raw Markdown: 'The next item") for f in found), found
    assert "a table (table): it is wider than the text column only because of its cells' minimum width" in found


# --- the licence, and the tools -----------------------------------------------------------

def test_the_licence_is_the_one_the_package_declares():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]["text"]
    text = (ROOT / "LICENSE").read_text()
    assert declared == "MIT" and text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text and "lcompiler" in text


def test_book_stats_prints_its_usage_and_refuses_an_unknown_notebook():
    def run(*args):
        return subprocess.run([sys.executable, str(ROOT / "tools" / "book_stats.py"), *args],
                              capture_output=True, text=True)
    done = run("--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: book_stats.py")
    done = run("no_such_chapter")
    assert done.returncode == 2 and "no such notebook: notebooks/no_such_chapter.ipynb" in done.stderr
    done = run("01_addlang")
    assert done.returncode == 0 and done.stdout.splitlines()[1].startswith("01_addlang ")


@pytest.mark.parametrize("notebook", sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9A-Z]*.ipynb")))
def test_every_exercise_has_a_folded_solution(notebook):
    asked, answered = book_stats.exercises(book_stats.markdown_of(ROOT / "notebooks" / f"{notebook}.ipynb"))
    assert asked, "a chapter without exercises"
    assert asked == list(range(1, len(asked) + 1)) and answered == asked


def test_the_count_of_solutions_can_fail():
    text = "## Exercises\n\n1. One?\n2. Two?\n\n<details><summary>Solutions</summary>\n\n1. One.\n\n</details>\n"
    assert book_stats.exercises(text) == ([1, 2], [1])
    assert book_stats.exercises("no exercises") == ([], [])


# --- the glossary ----------------------------------------------------------------------------

GLOSSARY = site_hooks.glossary_terms((ROOT / "book" / "glossary.md").read_text(encoding="utf-8"))


def test_the_glossary_has_its_terms_in_order():
    assert len(GLOSSARY) >= 40
    names = [t.name.lower().replace("η", "eta").replace("φ", "phi") for t in GLOSSARY]
    assert names == sorted(names)


@pytest.mark.parametrize("term", GLOSSARY, ids=[t.anchor for t in GLOSSARY])
def test_each_term_is_used_in_the_chapter_said_to_define_it(term):
    twin = (ROOT / "book" / term.chapter).with_suffix(".py")
    prose = "\n".join(line[2:] for line in twin.read_text(encoding="utf-8").splitlines() if line.startswith("# "))
    assert any(re.search(rf"(?<![\w-]){re.escape(form)}(?![\w-])", prose, re.I) for form in term.forms), \
        f"{twin.name} never says {term.forms}"


def chapter_html(*paragraphs: str) -> str:
    cell = '<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput" data-mime-type="text/markdown">'
    return "".join(f"{cell}{p}</div>" for p in paragraphs)


def test_the_first_use_of_a_term_in_the_prose_is_linked_and_only_it():
    terms = [t for t in GLOSSARY if t.name in ("Closure", "Closure conversion", "Tail call")]
    page = chapter_html('<h2>Closure conversion</h2><p>A <code>closure</code> is built by <a href="x">closure '
                        'conversion</a>; closure conversion makes closures.</p>',
                        "<p>Tail calls, a closure, tail calls again.</p>")
    page += '<div class="jp-OutputArea"><pre>closure</pre></div>'
    linked = site_hooks.link_glossary(page, terms, lambda t: f"#{t.anchor}")
    uses = re.findall(r'<a class="book-glossary" href="#([\w-]+)"[^>]*>([^<]*)</a>', linked)
    assert uses == [("closure-conversion", "closure conversion"), ("closure", "closures"), ("tail-call", "Tail calls")]
    assert linked.endswith('<div class="jp-OutputArea"><pre>closure</pre></div>')   # an output is not prose
    assert "<h2>Closure conversion</h2>" in linked and '<code>closure</code>' in linked


def test_every_chapter_links_the_glossary_where_it_exists(built_site):
    page = (built_site / "glossary" / "index.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    assert {t.anchor for t in GLOSSARY} <= ids
    for chapter in CHAPTERS:
        targets = [h for h in links(built_site / chapter / "index.html") if "glossary/#" in h]
        assert targets, f"{chapter} links no term of the glossary"
        assert {h.split("#")[1] for h in targets} <= ids
    level = "level-of-a-type-variable"          # its words mean something else outside chapter 5
    assert any(h.endswith("#" + level) for h in links(built_site / "notebooks/05_types/index.html"))
    assert not any(h.endswith("#" + level) for h in links(built_site / "notebooks/12_measuring/index.html"))
