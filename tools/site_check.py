"""Look at the built site as a reader's browser shows it: headless Chromium, at a phone's width
and a desktop's, in the light scheme and the dark.

    python tools/site_check.py check SITE [PAGE ...]       what breaks, page by page (all chapters by default)
    python tools/site_check.py shots SITE OUT [PAGE ...]   screenshots: 390 and 1440 px, light and dark,
                                                          each page whole, top to bottom

SITE is a folder that ``mkdocs build`` wrote (``site/`` by default); a PAGE is a page's folder
in it (``notebooks/12_measuring``, ``.`` for the home page). The checks, on each page at 390 px
(light and dark) and at 1440 px:

- no word of an output is broken across two lines (``overf|low``), and no ``pre`` of an output
  or a code cell wraps at all: a long line scrolls sideways;
- a code cell's box never cuts its code: what does not fit scrolls;
- every table that is wider than the text column is inside a box that scrolls sideways, and
  no word of a table is broken across two lines; no table is wider than the column only
  because its cells are given a minimum width (it would fit without);
- a picture is never wider than its output (it is a link to itself at full size);
- the page itself is no wider than the window (nothing sticks out to the right);
- the prose shows no raw Markdown: no list item run on into the paragraph before it, and no
  ``[link](url)``, ``**bold**`` or backquoted code left as it was written.

The browser is driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``):
JSON messages, each ended by a NUL byte, on the browser's file descriptors 3 (in) and 4 (out).
No port, no extra package: the standard library and a Chromium (``apt-get install chromium``).
``tests/test_site.py`` runs the checks on the site the tests build.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHONE, DESKTOP = (390, 844), (1440, 900)
PIECE = 4000  # the height of a page that one whole-page screenshot holds, at most

# The flags a headless Chromium needs on a machine without a network or a display: without the
# background-networking ones it waits for servers it cannot reach.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--remote-debugging-pipe"]


def chromium() -> str | None:
    """The Chromium on this machine, if there is one."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


class Browser:
    """A headless Chromium, one tab, commands sent and answered over the DevTools pipe."""

    def __init__(self, executable: str | None = None, timeout: float = 60):
        executable = executable or chromium()
        if executable is None:
            raise RuntimeError("no Chromium on this machine (apt-get install chromium)")
        self.timeout, self.profile = timeout, tempfile.mkdtemp(prefix="site-check-")
        to_browser, self._out = os.pipe()     # we write, the browser reads (its fd 3)
        self._in, from_browser = os.pipe()    # the browser writes (its fd 4), we read

        def on_fds_3_and_4():
            # lift both ends above 4 first, so that neither is overwritten by the other's dup2
            a, b = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser))
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=on_fds_3_and_4, pass_fds=(3, 4))
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._events, self._next_id = b"", [], 0
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable", session=True)
        self.send("Runtime.enable", session=True)

    # --- the protocol ---------------------------------------------------------------------

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: bool = False, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def wait_for(self, event: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, message in enumerate(self._events):
                if message.get("method") == event:
                    del self._events[: i + 1]
                    return message.get("params", {})
            self._events.clear()
            self._events.append(self._read(deadline))

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- what a test does with a page -----------------------------------------------------

    def open(self, url: str, width: int, height: int, dark: bool = False) -> None:
        """Load a page in a window of that size, the system's colour scheme light or dark."""
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=width < 600)
        self.send("Emulation.setEmulatedMedia", session=True,
                  features=[{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}])
        self._events.clear()
        self.send("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        self.evaluate("document.fonts.ready.then(() => true)")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", session=True, expression=expression,
                           returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"in the page: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, clip: dict | None = None) -> None:
        """The window as it is; or, with a clip (x, y, width, height and scale, in the page's
        pixels), that part of the page, drawn whole even where it lies outside the window.
        A part far below the window was once drawn with a cell's box left blank, its tiles not
        yet painted: such a picture is taken again until two in a row are the same."""
        extra = {"clip": clip, "captureBeyondViewport": True} if clip else {}
        data = None
        for _ in range(4 if clip else 1):
            again = self.send("Page.captureScreenshot", session=True, format="png", **extra)["data"]
            if again == data:
                break
            data = again
        path.write_bytes(base64.b64decode(data))

    def whole_page(self, path: Path, scale: float = 1) -> list[Path]:
        """The page from top to bottom, in pieces of at most PIECE of its pixels in height:
        path-01.png, path-02.png, ... (a long chapter is tens of thousands of pixels high)."""
        width, height = self.evaluate("[document.documentElement.clientWidth, document.documentElement.scrollHeight]")
        made = []
        for n, top in enumerate(range(0, height, PIECE), 1):
            piece = path.with_name(f"{path.stem}-{n:02d}{path.suffix}")
            self.screenshot(piece, {"x": 0, "y": top, "width": width, "height": min(PIECE, height - top), "scale": scale})
            made.append(piece)
        return made


# What the checks run in the page: they return a list of findings, each a short sentence.
CHECKS_JS = r"""
(() => {
  const found = [];
  const content = document.querySelector('.md-content') || document.body;
  const where = el => {
    const cell = el.closest('.jp-Cell');
    const cells = [...document.querySelectorAll('.jp-Cell')];
    const heading = cell ? cells.indexOf(cell) + 1 : 0;
    return heading ? `cell ${heading}` : el.tagName.toLowerCase();
  };
  const lines = rects => new Set([...rects].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
  // A word is broken when the line boxes its letters lie in are more than one.
  const brokenWords = (el, what) => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode()); ) {
      for (const m of node.data.matchAll(/[^\s\-\/]{2,}/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        if (lines(range.getClientRects()) > 1) {
          found.push(`${what} (${where(el)}): the word '${m[0].slice(0, 40)}' is broken across lines`);
          return;
        }
      }
    }
  };
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  // outputs, and code cells: a pre never wraps, and what does not fit scrolls
  const pres = [...content.querySelectorAll('.jp-OutputArea-output pre, .jp-InputArea-editor pre')];
  for (const pre of pres) {
    const what = pre.closest('.jp-OutputArea-output') ? 'an output' : 'a code cell';
    brokenWords(pre, what);
    const range = document.createRange();
    range.selectNodeContents(pre);
    const logical = pre.textContent.replace(/\n+$/, '').split('\n').length;
    if (lines(range.getClientRects()) > logical)
      found.push(`${what} (${where(pre)}): its lines wrap (white-space: ${getComputedStyle(pre).whiteSpace})`);
    if (pre.scrollWidth > pre.clientWidth + 1 && !scrolls(pre))
      found.push(`${what} (${where(pre)}): it is cut, not scrolled (overflow-x: ${getComputedStyle(pre).overflowX})`);
    // wider than the cell's box, which hides what overflows, unless a box between them scrolls
    const box = pre.closest('.jp-InputArea-editor, .jp-OutputArea-output');
    let scrolled = false;
    for (let el = pre.parentElement; box && el && !scrolled; el = el === box ? null : el.parentElement)
      scrolled = scrolls(el);
    if (box && !scrolled && pre.getBoundingClientRect().right > box.getBoundingClientRect().right + 1)
      found.push(`${what} (${where(pre)}): it is wider than its box, which cuts it`);
  }
  // tables: wider than the column only inside a box that scrolls; no word broken
  const column = content.getBoundingClientRect();
  for (const table of content.querySelectorAll('table')) {
    if (table.closest('.highlight, .highlighttable')) continue;
    brokenWords(table, 'a table');
    // the nearest box around it (or itself) that scrolls sideways and ends inside the window
    let scroller = null;
    for (let el = table; el && el !== document.body; el = el.parentElement)
      if (scrolls(el) && el.getBoundingClientRect().right <= window.innerWidth + 1) { scroller = el; break; }
    const wide = table.getBoundingClientRect().right > column.right + 1;
    if (wide && !scroller)
      found.push(`a table (${where(table)}): it is wider than the text column and nothing scrolls it`);
    // wider only because its cells are given a minimum width (Material gives a header cell
    // 5rem): without it, its words would fit the column, where now its last column is squeezed
    // to a few words a line and cut at the window's edge
    if (wide) {
      const cells = [...table.querySelectorAll('th, td')];
      const before = cells.map(cell => cell.style.minWidth);
      cells.forEach(cell => { cell.style.minWidth = '0'; });
      if (table.getBoundingClientRect().right <= column.right + 1)
        found.push(`a table (${where(table)}): it is wider than the text column only because of its cells' minimum width`);
      cells.forEach((cell, n) => { cell.style.minWidth = before[n]; });
    }
  }
  // pictures: never wider than their output
  for (const img of content.querySelectorAll('.jp-OutputArea-output img')) {
    const box = img.closest('.jp-OutputArea-output');
    if (img.getBoundingClientRect().right > box.getBoundingClientRect().right + 1)
      found.push(`a picture (${where(img)}): it is wider than its output`);
  }
  // prose shows no raw Markdown: a list item run on into the paragraph before it (a line that
  // begins with '- ' or '1. '), a link, bold text or code that was not converted
  const prose = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
  const markup = [[/\n[ \t]*([-*+]|\d+[.)])([ \t]|$)/, 'a list item'], [/\]\(/, 'a link'],
                  [/\*\*/, 'bold text'], [/`/, 'code']];
  for (let node; (node = prose.nextNode()); ) {
    const el = node.parentElement;
    if (el.closest('pre, code, kbd, script, style, .jp-OutputArea, .jp-InputArea')) continue;
    const raw = markup.find(([re]) => re.test(node.data));
    if (raw)
      found.push(`the prose (${where(el)}) shows ${raw[1]} as raw Markdown: '${node.data.trim().slice(0, 40)}'`);
  }
  // (a phone zooms out to show a page wider than itself: the layout's width is the screen's)
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1)
    found.push(`the page is ${root.scrollWidth} px wide in a ${root.clientWidth} px window`);
  return found;
})()
"""

# Which colour scheme Material shows: the `data-md-color-scheme` of the body.
SCHEME_JS = "document.body.getAttribute('data-md-color-scheme')"


def page_url(site: Path, page: str) -> str:
    return (site.resolve() / page / "index.html").as_uri()


def chapters(site: Path) -> list[str]:
    return sorted(p.parent.relative_to(site).as_posix() for p in (site / "notebooks").glob("*/index.html"))


# A phone's width and a desktop's, each light (False) and dark (True).
VIEWS = ((PHONE, False), (PHONE, True), (DESKTOP, False), (DESKTOP, True))


def check(browser: Browser, site: Path, pages: list[str]) -> dict[str, list[str]]:
    """What is broken on each page: at a phone's width, light and dark, and at a desktop's."""
    found = {}
    for page in pages:
        problems = []
        for (width, height), dark in VIEWS[:3]:
            browser.open(page_url(site, page), width, height, dark=dark)
            scheme = "dark" if dark else "light"
            problems += [f"at {width} px, {scheme}, {problem}" for problem in browser.evaluate(CHECKS_JS)]
        found[page] = problems
    return found


def shots(browser: Browser, site: Path, out: Path, pages: list[str], scroll_to: str | None = None,
          views=VIEWS, scale: float = 1) -> list[Path]:
    """Screenshots of the pages at 390 and 1440 px, light and dark (or the views given), each
    page whole, cut in pieces (page-390-light-01.png, ...); with a CSS selector, only the window,
    scrolled so that the selector's first match is at the top."""
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for page in pages:
        for (width, height), dark in views:
            browser.open(page_url(site, page), width, height, dark=dark)
            path = out / f"{page.strip('./').replace('/', '_') or 'home'}-{width}-{'dark' if dark else 'light'}.png"
            if scroll_to:
                browser.evaluate(f"(e => e && e.scrollIntoView())(document.querySelector({json.dumps(scroll_to)}))")
                time.sleep(0.5)  # the header's title changes to the section's, in a transition
                browser.screenshot(path)
                made.append(path)
            else:
                made += browser.whole_page(path, scale)
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="site_check.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("check", help="what breaks on each page")
    c.add_argument("site", type=Path, nargs="?", default=ROOT / "site")
    c.add_argument("pages", nargs="*")
    s = commands.add_parser("shots", help="screenshots at 390 and 1440 px, light and dark")
    s.add_argument("site", type=Path)
    s.add_argument("out", type=Path)
    s.add_argument("pages", nargs="*")
    s.add_argument("--scroll-to", metavar="SELECTOR", help="only the window, scrolled so that the first element "
                   "the selector matches is at the top")
    s.add_argument("--scale", type=float, default=1, help="the pictures' size, as a share of the page's (0.5: half)")
    s.add_argument("--views", default="390-light,390-dark,1440-light,1440-dark",
                   help="which of the widths and schemes, separated by commas")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        parser.error(f"{args.site} is not a built site (mkdocs build writes one)")
    pages = args.pages or chapters(args.site)
    with Browser() as browser:
        if args.command == "shots":
            views = [v for v in VIEWS if f"{v[0][0]}-{'dark' if v[1] else 'light'}" in args.views.split(",")]
            for path in shots(browser, args.site, args.out, pages, args.scroll_to, views, args.scale):
                print(path)
            return 0
        failed = 0
        for page, problems in check(browser, args.site, pages).items():
            print(f"{page}: {'ok' if not problems else f'{len(problems)} problems'}")
            for problem in problems:
                print("   ", problem)
            failed += bool(problems)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
