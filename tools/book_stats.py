"""How much of each chapter is prose, how many pictures and exercises it has, how long its longest
code cell is.

    python tools/book_stats.py [NB ...]     a table, one line per notebook (all by default)

- prose share: the characters (and, in brackets, the lines) of markdown cells, as a share of
  the characters (lines) of all cells' sources; outputs are not counted;
- pictures: stored outputs that are images (SVG, PNG, JPEG), plus images in markdown cells;
- exercises: the numbered items (``1. ``, at the start of a line) of the section "Exercises",
  up to its folded block ``<details>``; solutions: the numbered items inside that block.
  ``solutions()`` says which numbers differ, for a test to check that every exercise is answered;
- longest code cell: its number of lines, and the first line that is not a directive
  (``#| export``) or blank, to find it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
IMAGE_TYPES = ("image/svg+xml", "image/png", "image/jpeg")
MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(|<img\b|<svg\b")
NUMBERED = re.compile(r"^(\d+)\. ", re.MULTILINE)


def exercises(markdown: str) -> tuple[list[int], list[int]]:
    """The numbers of the exercises of a chapter's markdown, and of the solutions folded below them."""
    start = markdown.find("## Exercises")
    if start < 0:
        return [], []
    fold = markdown.find("<details", start)
    fold = len(markdown) if fold < 0 else fold
    end = markdown.find("</details>", fold)
    end = len(markdown) if end < 0 else end
    return ([int(n) for n in NUMBERED.findall(markdown, start, fold)],
            [int(n) for n in NUMBERED.findall(markdown, fold, end)])


def markdown_of(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def stats(path: Path) -> dict:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    chars = {"markdown": 0, "code": 0}
    lines = {"markdown": 0, "code": 0}
    pictures, longest, longest_head = 0, 0, ""
    for cell in cells:
        source = "".join(cell["source"])
        kind = cell["cell_type"]
        if kind not in chars:
            continue
        chars[kind] += len(source)
        lines[kind] += len(source.splitlines())
        if kind == "markdown":
            pictures += len(MARKDOWN_IMAGE.findall(source))
            continue
        pictures += sum(1 for o in cell.get("outputs", [])
                        if any(t in o.get("data", {}) for t in IMAGE_TYPES))
        n = len(source.splitlines())
        if n > longest:
            body = [l for l in source.splitlines() if l.strip() and not l.startswith("#|")]
            longest, longest_head = n, (body[0] if body else "")[:40]
    asked, answered = exercises(markdown_of(path))
    return {
        "exercises": len(asked),
        "solutions": len(set(answered) & set(asked)),
        "prose": chars["markdown"] / max(1, sum(chars.values())),
        "prose_lines": lines["markdown"] / max(1, sum(lines.values())),
        "pictures": pictures,
        "longest": longest,
        "longest_head": longest_head,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="book_stats.py",
        description="How much of each chapter is prose, how many pictures and exercises it has, "
                    "how long its longest code cell is.")
    parser.add_argument("notebooks", nargs="*", metavar="NB",
                        help="notebooks, by name (03_anf, 03_anf.ipynb or notebooks/03_anf.py); all by default")
    names = parser.parse_args(argv).notebooks
    paths = [NOTEBOOKS / (Path(n).stem + ".ipynb") for n in names] or sorted(NOTEBOOKS.glob("[0-9A-Z]*.ipynb"))
    missing = [str(p.relative_to(ROOT)) for p in paths if not p.is_file()]
    if missing:
        parser.error("no such notebook: " + ", ".join(missing))
    print(f"{'notebook':18} {'prose (chars)':>13} {'(lines)':>8} {'pictures':>9} {'exercises':>10} "
          f"{'solved':>7} {'longest code cell':>18}")
    for path in paths:
        s = stats(path)
        print(f"{path.stem:18} {s['prose']:>13.0%} {s['prose_lines']:>8.0%} {s['pictures']:>9} "
              f"{s['exercises']:>10} {s['solutions']:>7} {s['longest']:>8} lines  {s['longest_head']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
