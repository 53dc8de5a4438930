"""Ctrl-C, Ctrl-D and output as it comes, driven as a person drives them: through a pseudo-terminal
(the standard library's pty), with lc run, an executable of lc build, and lc repl (issue 27)."""

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lcompiler import driver, runtime

LC = str(Path(sys.executable).parent / "lc")
CACHE = str(runtime.cache_directory())          # the runtime compiled once, not again for a new HOME
LOOP = 'print("step 1")\ndef spin(n) = spin(n + 1)\nspin(0)\n'


class Terminal:
    """A program run on a pseudo-terminal, as on a person's terminal: its output, keys typed to it."""

    def __init__(self, argv: list, cwd: Path, env: dict | None = None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:                          # the child: a session of its own, the pty its terminal
            try:
                os.chdir(cwd)
                signal.signal(signal.SIGINT, signal.SIG_DFL)   # as from a terminal, not a background job
                os.execve(argv[0], argv, {**os.environ, "TERM": "dumb", **(env or {})})
            finally:
                os._exit(127)
        self.seen = ""

    def expect(self, text: str, seconds: float = 120) -> str:
        """Read until text appears in what the program wrote since the last expect; return that."""
        deadline = time.monotonic() + seconds
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} did not appear; the terminal shows {self.seen!r}"
            if select.select([self.fd], [], [], left)[0]:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:                    # EIO: the program ended, the pty is closed
                    data = b""
                if not data:
                    assert text in self.seen, f"{text!r} did not appear; the terminal shows {self.seen!r}"
                self.seen += data.decode(errors="replace").replace("\r\n", "\n")
        shown, self.seen = self.seen, self.seen[self.seen.index(text) + len(text):]
        return shown

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def status(self, seconds: float = 30) -> int:
        """The exit status of the program (-N: killed by signal N), which must end within seconds."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with_output = select.select([self.fd], [], [], 0.05)[0]
            if with_output:
                try:
                    self.seen += os.read(self.fd, 4096).decode(errors="replace").replace("\r\n", "\n")
                except OSError:
                    pass
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        pytest.fail(f"the program did not end; the terminal shows {self.seen!r}")


@pytest.fixture
def loop(tmp_path) -> Path:
    (tmp_path / "loop.l").write_text(LOOP)
    return tmp_path / "loop.l"


@pytest.mark.slow
def test_ctrl_c_stops_lc_run_at_once_after_its_output(loop):
    t = Terminal([LC, "run", str(loop)], loop.parent)
    t.expect("step 1\n")                            # on a terminal, each line as it is printed
    t.type("\x03")
    assert t.status() == -signal.SIGINT             # what a shell shows as status 130


@pytest.mark.slow
def test_ctrl_c_stops_an_executable_of_lc_build(loop):
    subprocess.run([LC, "build", str(loop), "-o", str(loop.parent / "loop")], check=True)
    t = Terminal([str(loop.parent / "loop")], loop.parent)
    t.expect("step 1\n")
    t.type("\x03")
    assert t.status() == -signal.SIGINT


@pytest.mark.slow
@pytest.mark.parametrize("how", ["run", "build"])
def test_sigterm_into_a_pipe_writes_everything_printed_first(tmp_path, how):
    # 110,000 bytes: the first block (64 KiB at most) shows the program runs; the rest is in the buffer when
    # SIGTERM comes, and must be written before the program ends.
    (tmp_path / "spam.l").write_text('def spam(i) = if (i == 0) () else { print("0123456789"); spam(i - 1) }\n'
                                     'spam(10000)\ndef spin(n) = spin(n + 1)\nspin(0)\n')
    argv = [LC, "run", str(tmp_path / "spam.l")]
    if how == "build":
        subprocess.run([LC, "build", str(tmp_path / "spam.l"), "-o", str(tmp_path / "spam")], check=True)
        argv = [str(tmp_path / "spam")]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    out = os.read(p.stdout.fileno(), 1 << 16)
    while len(out) < 60_000:                        # the first block: the program runs
        out += os.read(p.stdout.fileno(), 1 << 16)
    time.sleep(1)                                   # the rest, printed in a millisecond: in the buffer
    p.send_signal(signal.SIGTERM)
    out += p.stdout.read()
    assert p.wait(timeout=30) == -signal.SIGTERM     # a shell's 143
    assert out == b"0123456789\n" * 10000


@pytest.mark.slow
def test_the_repl_survives_ctrl_c_and_ctrl_d_and_keeps_its_history(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    t = Terminal([LC, "repl"], tmp_path, {"HOME": str(home), "XDG_STATE_HOME": "", "LC_CACHE": CACHE})
    t.expect("L> ")
    t.type("def x = 2\n")
    t.expect("x : Int\n")
    t.type("def f(n) = f(n + 1)\n")
    t.expect("f : Int -> a\n")
    t.type('{ print("looping"); f(0) }\n')
    t.expect("\nlooping")             # the program's output as it is printed (not the echo of the entry)
    t.type("\x03")                                 # Ctrl-C while it runs: back to the prompt
    t.expect("Interrupted.\nL> ")
    t.type("def y = (\n")
    t.expect("... ")
    # CPython's readline writes the prompt, then waits in select() for a key; a SIGINT that arrives
    # between the two is noticed only at the next key (the handler runs, select() is not interrupted).
    # No hand types that fast; the test waits as a hand would, so that the Ctrl-C finds select().
    time.sleep(0.5)
    t.type("\x03")                                 # Ctrl-C on a half-typed entry: abandoned
    t.expect("L> ")
    t.type("def z = (\n")
    t.expect("... ")
    t.type("\x04")                                 # Ctrl-D on a continuation line: abandoned
    t.expect("L> ")
    t.type("x * 21\n")                             # every definition kept
    assert "42 : Int" in t.expect("L> ")
    t.type(":tpye x\n")
    assert "did you mean :type?" in t.expect("L> ")
    t.type("y\n")
    assert "unknown variable y" in t.expect("L> ")
    t.type("\x04")                                 # Ctrl-D on an empty prompt: the end
    assert t.status() == 0
    assert "x * 21" in (home / ".lc_history").read_text()


BOOM = "exception Boom(Int)\ndef f(n) = if (n > 2) raise(Boom(n)) else n\n"


@pytest.mark.slow
def test_an_uncaught_exception_in_the_repl_is_reported_as_lc_run_reports_it_and_the_session_goes_on(tmp_path):
    """On a terminal, where lc paints its messages (appendix A): lc run, --interp and an executable stop
    with status 2; the REPL shows the same message, its line counted from the entry, and goes on."""
    (tmp_path / "boom.l").write_text(BOOM + "print(f(1))\nraise(Boom(3))\n")
    env = {"LC_CACHE": CACHE, "NO_COLOR": ""}
    assert subprocess.run([LC, "build", "boom.l", "-o", "boom"], cwd=tmp_path, timeout=300).returncode == 0
    for argv in ([LC, "run", "boom.l"], [LC, "run", "--interp", "boom.l"], [str(tmp_path / "boom")]):
        t = Terminal(argv, tmp_path, env)
        assert t.status(120) == 2
        assert plain(t.seen) == "1\nboom.l:4:1: runtime error: uncaught exception Boom(3)\nraise(Boom(3))\n" \
                                "^~~~~~~~~~~~~~\n", argv
    home = tmp_path / "home"
    home.mkdir()
    t = Terminal([LC, "repl"], tmp_path, {**env, "HOME": str(home), "XDG_STATE_HOME": ""})
    t.expect("L> ")
    for line in BOOM.splitlines():
        t.type(line + "\n")
    t.expect("f : Int -> Int\nL> ")
    t.type("raise(Boom(3))\n")                      # raised in the entry
    shown = t.expect("L> ")
    assert "\x1b[1;31mruntime error:" in shown      # painted
    assert plain(shown) == "raise(Boom(3))\n<repl>:1:1: runtime error: uncaught exception Boom(3)\n" \
                           "raise(Boom(3))\n^~~~~~~~~~~~~~\nL> "
    t.type("def g = f(9)\n")                        # raised in a function defined earlier: where it raises
    assert "\n<repl>:2:23: runtime error: uncaught exception Boom(9)\n" in plain(t.expect("L> "))
    t.type("try { f(8) } catch { Boom(k) -> k * 10 }\n")     # the session goes on, f still there
    assert "80 : Int" in t.expect("L> ")
    t.type("g\n")                                   # a definition that raised is not kept
    assert "unknown variable g" in plain(t.expect("L> "))
    t.type("\x04")
    assert t.status() == 0


def plain(text: str) -> str:
    """The text without its colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_an_uncaught_exception_in_an_l_cell_is_reported_and_the_session_goes_on(capsys):
    driver.SESSION = None
    for line, cell in [("", BOOM), ("", "print(f(2))\nraise(Boom(3))"), ("", "f(2) * 7"),
                       ("--fresh", "exception E\nprint(1)\nraise(E)"), ("", "def g = f(9)"), ("", "f(1)")]:
        driver.l_cell_magic(line, cell)
    assert capsys.readouterr().out == (
        "exception Boom(Int)\nf : Int -> Int\n"
        "2\ncell.l:2:1: runtime error: uncaught exception Boom(3)\nraise(Boom(3))\n^~~~~~~~~~~~~~\n"
        "14 : Int\n"
        "1\ncell.l:3:1: runtime error: uncaught exception E\nraise(E)\n^~~~~~~~\n"
        "cell.l:2:23: runtime error: uncaught exception Boom(9)\ndef f(n) = if (n > 2) raise(Boom(n)) else n\n"
        "                      ^~~~~~~~~~~~~~\n"
        "1 : Int\n")


def test_run_l_shows_what_a_program_printed_before_its_time_ran_out(capsys):
    result = driver.run_l(LOOP, timeout=2)
    assert capsys.readouterr().out == "step 1\nstopped: the program ran longer than 2 s\n"
    assert result.status == -signal.SIGTERM


def test_run_source_hands_over_each_line_as_it_is_printed():
    start = time.monotonic()

    def output(text):
        assert text == "step 1\n"
        raise KeyboardInterrupt                     # stops the child: it would loop until the time limit
    with pytest.raises(KeyboardInterrupt):
        driver.run_source(driver.Source("loop.l", LOOP), timeout=120, output=output)
    assert time.monotonic() - start < 60            # well before the limit: not written at the end


def test_l_cells_share_a_session_unless_fresh_or_reset(capsys):
    driver.SESSION = None
    for line, cell in [("", "def x = 1"), ("", "x + 1"), ("", 'print("hello")'), ("--fresh", "x"),
                       ("--reset", "x"), ("", "data List<t> { Cons(t, List<t>); Nil }")]:
        driver.l_cell_magic(line, cell)
    unknown = "cell.l:1:1: error: unknown variable x\nx\n^\n"
    assert capsys.readouterr().out == ("x : Int\n2 : Int\nhello\n" + unknown + unknown
                                       + "data List<t> { Cons(t, List<t>); Nil }\n")


def test_from_a_pipe_the_repl_loads_files_and_writes_no_history(tmp_path):
    (tmp_path / "lib.l").write_text('def double(x) = 2 * x\nprint("loaded")\n')
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run([LC, "repl"], input=f":load {tmp_path / 'lib.l'}\ndouble(21)\n:type double\n:reset\n"
                          "double(1)\n:quit\n1 + 1\n", capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "HOME": str(home), "XDG_STATE_HOME": "", "LC_CACHE": CACHE}, timeout=300)
    assert done.stdout == ("double : Int -> Int\nloaded\n42 : Int\ndouble : Int -> Int\nthe session is empty\n"
                           "<repl>:1:1: error: unknown variable double\ndouble(1)\n^~~~~~\n")
    assert done.returncode == 0 and not (home / ".lc_history").exists()


def test_a_failure_of_lc_itself_in_an_entry_is_said_in_one_line_and_the_session_goes_on(monkeypatch):
    """A bug in the compiler (here, a stage made to fail on one entry) is what `lc` reports as an
    internal compiler error with status 3: the session says so, drops the entry, keeps the rest."""
    real, failed = driver.types.check_types, []

    def failing(source, *args, **kwargs):
        if "boom" in source.text and not failed:       # once: the entry that defines boom
            failed.append(source)
            raise ZeroDivisionError("a bug")
        return real(source, *args, **kwargs)
    monkeypatch.setattr(driver.types, "check_types", failing)
    shown = []
    driver.repl(iter(["def x = 2", "def boom = 1", "x * 21", "boom"]), shown.append, prompt=False)
    assert "".join(shown) == ("x : Int\n"
                              "internal compiler error: ZeroDivisionError: a bug\n"
                              "(the entry is dropped; the session goes on)\n"
                              "42 : Int\n"
                              "<repl>:1:1: error: unknown variable boom\nboom\n^~~~\n")
