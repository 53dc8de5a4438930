"""MkDocs hooks: what the site does to the chapters that mkdocs-jupyter renders (see mkdocs.yml).

mkdocs-jupyter turns each notebook into a page, but unlike MkDocs' own Markdown pages it
leaves three things as they are in the notebook, where they are right for Jupyter and wrong
for the site. This hook, run on every chapter's HTML after it is rendered (so also when
mkdocs-jupyter serves it from its cache), fixes them:

- links: a notebook links to another chapter as ``04b_meaning.ipynb`` and to a page of the
  book as ``../language.md``, relative to ``notebooks/``, which is what Jupyter and a
  repository browser follow. On the site a chapter lives at ``notebooks/04a_syntax/``, so each
  such link is rewritten to the page's address, anchor kept; a link to a file that is not in
  the book is a warning, so ``mkdocs build --strict`` fails on it, as it does for MkDocs'
  own pages;
- ``%%L`` cells: highlighted as L (chapter 4a's lexer, ``lcompiler.highlight``), not Python;
- images: an image a cell displays gets the ``alt`` text stored with it, in the output's
  metadata (``display(picture, metadata={"alt": "..."})``, or a ``_repr_mimebundle_`` that
  returns it), where nbconvert would write "No description has been provided for this image".

It also adds what a reader of the site needs and a notebook does not:

- full-size pictures: each image a cell displays (the chapters' diagrams are SVG) is written to
  a file of its own beside the chapter's page (``notebooks/01_addlang/figure-1.svg``) and
  becomes a link to it, which opens the picture at its own size, to zoom on a phone;
- L in outputs: the text outputs of a code cell tagged ``l-output`` are L source (a program
  the cell prints) and are highlighted as L, like a ``%%L`` cell;
- the glossary: the first use of each term of ``glossary.md`` in a chapter's prose links to
  the term's entry, with the entry's first sentence as the link's title (shown on hover);
- downloads: each chapter links its notebook and the notebook's text twin
  (``downloads/01_addlang.ipynb``, ``downloads/01_addlang.py``), and ``notebooks.zip``, made at
  each build, holds all the notebooks with their twins (the home page links it).
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import posixpath
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.site_hooks")

NO_ALT = "No description has been provided for this image"
IMAGE_TYPES = ("image/svg+xml", "image/png", "image/jpeg", "image/gif")

_HREF = re.compile(r'(<a\b[^>]*?\bhref=")([^"#?:]+\.(?:ipynb|md))(#[^"]*)?(")')
_CODE = re.compile(r'<div class="highlight-ipynb hl-python"><pre>.*?</pre></div>\s*'
                   r'<div class="clipboard-copy-txt" id="cell-\d+">(.*?)</div>', re.S)
_OUTPUT_IMAGE = re.compile(r'(<div class="jp-Render(?:edImage|edSVG)[^"]*"[^>]*>\s*<img\b)([^>]*>)')
_IMAGE = re.compile(r'(<div class="jp-Render(?:edImage|edSVG)[^"]*"[^>]*>\s*)'
                    r'(<img\b[^>]*?\bsrc="data:image/(svg\+xml|png|jpeg|gif);base64,([^"]*)"[^>]*>)')
_EXTENSIONS = {"svg+xml": "svg", "png": "png", "jpeg": "jpg", "gif": "gif"}
_CELL = re.compile(r'<div class="(jp-Cell [^"]*)"')
_TEXT_OUTPUT = re.compile(r'(<div class="jp-RenderedText jp-OutputArea-output[^"]*" data-mime-type="text/plain"[^>]*>\s*)'
                          r'<pre>(.*?)</pre>', re.S)
_TITLE_END = re.compile(r'</h1>')

# A code cell with this tag prints L source: its text outputs are highlighted as L.
L_OUTPUT = "l-output"
# The zip of all the notebooks, at the site's root; each chapter's files are under downloads/.
ARCHIVE, DOWNLOADS = "notebooks.zip", "downloads"


def _is_chapter(page) -> bool:
    return page.file.src_uri.endswith(".ipynb")


def _rewrite_links(text: str, page, files) -> str:
    """Links to .ipynb and .md files, relative to the notebook's folder, become page addresses."""
    folder = posixpath.dirname(page.file.src_uri)

    def replace(m: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(folder, html.unescape(m.group(2))))
        file = files.get_file_from_path(target)
        if file is None:
            log.warning("%s links to '%s', which is not a page of the book", page.file.src_uri, m.group(2))
            return m.group(0)
        return m.group(1) + file.url_relative_to(page.file) + (m.group(3) or "") + m.group(4)

    return _HREF.sub(replace, text)


def _l_lexer():
    from pygments.lexer import bygroups, inherit
    from pygments.token import Comment

    from lcompiler.highlight import LLexer

    class LCellLexer(LLexer):
        """L, after a first line that is the %%L cell magic."""
        tokens = {"root": [(r"\A(%%L)([^\n]*)", bygroups(Comment.Preproc, Comment.Preproc)), inherit]}

    return LCellLexer()


def _highlight_l_cells(text: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    formatter, lexer = HtmlFormatter(cssclass="highlight-ipynb hl-l"), None

    def replace(m: re.Match) -> str:
        nonlocal lexer
        source = html.unescape(m.group(1))
        if not source.startswith("%%L"):
            return m.group(0)
        lexer = lexer or _l_lexer()
        copy = m.group(0)[m.group(0).index('<div class="clipboard-copy-txt"'):]
        return highlight(source, lexer, formatter) + copy

    return _CODE.sub(replace, text)


def _highlight_l_outputs(text: str) -> str:
    """The text outputs of cells tagged ``l-output`` highlighted as L (stderr is left as it is).

    nbconvert gives each cell's tags as classes of its ``<div class="jp-Cell ...">``."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    from lcompiler.highlight import LLexer

    starts = [(m.start(), f"celltag_{L_OUTPUT}" in m.group(1).split()) for m in _CELL.finditer(text)]
    if not any(tagged for _, tagged in starts):
        return text
    lexer, formatter = LLexer(), HtmlFormatter(nowrap=True)

    def replace(m: re.Match) -> str:
        code = highlight(html.unescape(m.group(2)), lexer, formatter)
        return f'{m.group(1)}<div class="highlight-ipynb hl-l l-output"><pre>{code}</pre></div>'

    pieces, done = [], 0
    for (start, tagged), (end, _) in zip(starts, starts[1:] + [(len(text), False)]):
        if tagged:
            pieces += [text[done:start], _TEXT_OUTPUT.sub(replace, text[start:end])]
            done = end
    return "".join(pieces) + text[done:]


def _full_size_figures(text: str, page, config, files) -> str:
    """Each image a cell displays, written to a file beside the page and linked to it."""
    folder = posixpath.dirname(page.file.dest_uri)
    count = 0

    def replace(m: re.Match) -> str:
        nonlocal count
        count += 1
        name = f"figure-{count}.{_EXTENSIONS[m.group(3)]}"
        files.append(File.generated(config, posixpath.join(folder, name), content=base64.b64decode(m.group(4))))
        return (f'{m.group(1)}<a class="book-figure" href="{name}" target="_blank" '
                f'title="Open the picture at full size">{m.group(2)}'
                f'<span class="book-figure-hint">full size ↗</span></a>')

    return _IMAGE.sub(replace, text)


def _download_links(text: str, page, files) -> str:
    """A line under the chapter's title: its notebook, its text twin, and all the notebooks."""
    stem = Path(page.file.src_uri).stem
    link = lambda uri: files.get_file_from_path(uri).url_relative_to(page.file)  # noqa: E731
    line = (f'<p class="book-downloads">Download this chapter: '
            f'<a href="{link(f"{DOWNLOADS}/{stem}.ipynb")}" download>the notebook, {stem}.ipynb</a>, '
            f'or <a href="{link(f"{DOWNLOADS}/{stem}.py")}" download>its text twin, {stem}.py</a>; '
            f'or <a href="{link(ARCHIVE)}" download>all the notebooks</a> (zip).</p>')
    m = _TITLE_END.search(text)
    return text[:m.end()] + "\n" + line + text[m.end():] if m else line + text


GLOSSARY = "glossary.md"
_ENTRY = re.compile(r"^## ([^\n]+)\nDefined in \[[^\]\n]+\]\(([^)\n]+)\)(, and linked only there)?\."
                    r"(?: Also: ([^\n]+?)\.)?\n\n"
                    r"(.+?)(?:\n\n|\n?\Z)", re.M | re.S)
_MARKDOWN = re.compile(r'<div class="[^"]*\bjp-RenderedMarkdown\b[^"]*"[^>]*>')
_TOKEN = re.compile(r"<(/?)([a-zA-Z][\w-]*)[^>]*?(/?)>|<!--.*?-->|[^<]+", re.S)
# Inside these elements a word is code, a title or already a link: never linked.
_UNLINKED = {"a", "code", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "svg", "script", "style", "kbd", "summary"}


@dataclass(frozen=True)
class Term:
    name: str            # the heading of its entry
    anchor: str          # the entry's id on the glossary page
    forms: tuple         # the words that name it in prose: the name and its other forms
    chapter: str         # the notebook that defines it, e.g. notebooks/05_types.ipynb
    summary: str         # the entry's first sentence
    only_there: bool     # linked only in its own chapter (its words mean something else elsewhere)


def glossary_terms(text: str) -> list[Term]:
    """The entries of glossary.md, in order (its comment at the top says how an entry is written)."""
    from markdown.extensions.toc import slugify

    terms = []
    for m in _ENTRY.finditer(text):
        name, chapter, also, definition = m.group(1).strip(), m.group(2), m.group(4), " ".join(m.group(5).split())
        forms = (name, *(f.strip() for f in (also or "").split(",") if f.strip()))
        summary = re.split(r"(?<=\.)\s", definition.replace("`", ""), maxsplit=1)[0]
        terms.append(Term(name, slugify(name, "-"), forms, chapter, summary, bool(m.group(3))))
    return terms


def link_glossary(text: str, terms: list[Term], href) -> str:
    """Link the first use of each term in the prose of text (the markdown cells of a chapter).

    A use is a whole word (or words) equal to one of the term's forms, ignoring case, outside
    code, headings and links; href(term) is the link's address."""
    patterns = [(term, re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in
                                  sorted(term.forms, key=len, reverse=True)) + r")(?![\w-])", re.I))
                for term in terms]
    pending = list(range(len(patterns)))
    out, depth, skipping = [], 0, []        # depth: open divs inside a markdown cell, 0: outside
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        tag = (m.group(2) or "").lower()
        if m.group(2) is not None:
            closing, empty = m.group(1) == "/", m.group(3) == "/"
            if depth == 0:
                if _MARKDOWN.match(token):
                    depth = 1
            elif tag == "div" and not empty:
                depth += -1 if closing else 1
            elif tag in _UNLINKED and not empty:
                if closing and skipping and skipping[-1] == tag:
                    skipping.pop()
                elif not closing:
                    skipping.append(tag)
            out.append(token)
            continue
        if depth == 0 or skipping or token.startswith("<!--") or not pending:
            out.append(token)
            continue
        done, placed = 0, []
        while pending:                            # the earliest use of a term not yet linked, the longest there
            uses = [(use.start(), -use.end(), i) for i in pending if (use := patterns[i][1].search(token, done))]
            if not uses:
                break
            start, end, i = min(uses)
            term = patterns[i][0]
            placed += [token[done:start], f'<a class="book-glossary" href="{href(term)}" '
                                          f'title="{html.escape(term.summary)}">{token[start:-end]}</a>']
            done = -end
            pending.remove(i)
        out.append("".join(placed) + token[done:])
    return "".join(out)


def _link_glossary(text: str, page, files) -> str:
    glossary = files.get_file_from_path(GLOSSARY)
    if glossary is None:
        return text
    terms = [t for t in glossary_terms(Path(glossary.abs_src_path).read_text(encoding="utf-8"))
             if not t.only_there or t.chapter == page.file.src_uri]
    address = glossary.url_relative_to(page.file)
    return link_glossary(text, terms, lambda term: f"{address}#{term.anchor}")


def notebook_archive(notebooks: list[Path]) -> bytes:
    """A zip of the notebooks, their text twins and Jupytext's pairing, under ``notebooks/``.

    The same notebooks give the same bytes: the files are in order, with a fixed date."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in notebooks:
            info = zipfile.ZipInfo(f"notebooks/{path.name}", date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def on_files(files, config):
    """The chapters' notebooks and text twins as downloads, and the zip of them all."""
    chapters = sorted((f for f in files if f.src_uri.startswith("notebooks/") and f.src_uri.endswith(".ipynb")),
                      key=lambda f: f.src_uri)
    everything = []
    for chapter in chapters:
        notebook = Path(chapter.abs_src_path)
        twin = notebook.with_suffix(".py")
        for path in (notebook, twin):
            files.append(File.generated(config, f"{DOWNLOADS}/{path.name}", abs_src_path=str(path)))
            everything.append(path)
    pairing = Path(config.docs_dir) / "notebooks" / "jupytext.toml"
    files.append(File.generated(config, ARCHIVE, content=notebook_archive(everything + [pairing])))
    return files


def _image_alts(notebook: Path) -> list[str | None]:
    """The alt text stored with each image output of a notebook, in order (None: none stored)."""
    alts = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            mime = next((t for t in IMAGE_TYPES if t in data), None)
            if mime is None:
                continue
            metadata = output.get("metadata", {})
            alts.append(metadata.get("alt") or metadata.get(mime, {}).get("alt"))
    return alts


def _set_alts(text: str, page) -> str:
    alts = iter(_image_alts(Path(page.file.abs_src_path)))

    def replace(m: re.Match) -> str:
        alt = next(alts, None)
        if not alt:
            return m.group(0)
        attributes = re.sub(r'\salt="[^"]*"', "", m.group(2))
        return f'{m.group(1)} alt="{html.escape(alt)}"{attributes}'

    return _OUTPUT_IMAGE.sub(replace, text)


def on_page_content(text: str, page, config, files) -> str:
    if not _is_chapter(page):
        return text
    text = _set_alts(_highlight_l_cells(_rewrite_links(text, page, files)), page)
    text = _full_size_figures(_highlight_l_outputs(_link_glossary(text, page, files)), page, config, files)
    return _download_links(text, page, files)
