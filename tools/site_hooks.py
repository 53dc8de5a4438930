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
"""

from __future__ import annotations

import html
import json
import logging
import posixpath
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.site_hooks")

NO_ALT = "No description has been provided for this image"
IMAGE_TYPES = ("image/svg+xml", "image/png", "image/jpeg", "image/gif")

_HREF = re.compile(r'(<a\b[^>]*?\bhref=")([^"#?:]+\.(?:ipynb|md))(#[^"]*)?(")')
_CODE = re.compile(r'<div class="highlight-ipynb hl-python"><pre>.*?</pre></div>\s*'
                   r'<div class="clipboard-copy-txt" id="cell-\d+">(.*?)</div>', re.S)
_OUTPUT_IMAGE = re.compile(r'(<div class="jp-Render(?:edImage|edSVG)[^"]*"[^>]*>\s*<img\b)([^>]*>)')


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
    from pygments.token import Comment, Text

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
    return _set_alts(_highlight_l_cells(_rewrite_links(text, page, files)), page)
