"""Debugging information (`lc build -g`, chapter 10) and backtraces (`LC_BACKTRACE=1`, chapter 10b).

gdb, driven in batch mode, is the oracle for the debugging information: it must stop at an L line,
step from line to line, and name L functions and lines in a backtrace. The backtraces are compared
with golden files checked by hand (tests/backtraces/README.md)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lcompiler import driver, llvm_backend
from lcompiler.errors import Source

LC = [str(Path(sys.executable).parent / "lc")]
HERE = Path(__file__).parent / "backtraces"
EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.l"))
GOLDEN = ["divide", "nomatch", "tail"]
GDB = shutil.which("gdb")


def lc(*args: str, cwd: Path = HERE, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(LC + list(args), cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def build(name: str, tmp_path: Path, *options: str) -> Path:
    exe = tmp_path / (name + "".join(options).replace("-", "_"))
    done = lc("build", *options, f"{name}.l", "-o", str(exe))
    assert done.returncode == 0, done.stderr
    return exe


def run_exe(exe: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe)], cwd=HERE, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def gdb(exe: Path, *commands: str) -> str:
    args = [GDB, "-nx", "-batch"] + [a for c in commands for a in ("-ex", c)] + [str(exe)]
    return subprocess.run(args, cwd=HERE, capture_output=True, text=True, timeout=120).stdout


def functions_but_main(obj: bytes, tmp_path: Path) -> str:
    """The disassembly of an object file's code, but for `main`: with -g, main passes the call
    sites' count negated (the names of their functions follow their messages, chapter 10b)."""
    o = tmp_path / "part.o"
    o.write_bytes(obj)
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(o)], capture_output=True, text=True,
                          check=True).stdout
    blocks = text.split("\n\n")[1:]                 # the file's name first
    return "\n\n".join(b for b in blocks if not b.lstrip().split("\n")[0].endswith("<main>:"))


# --- -g: the code is the same, the DWARF is there ----------------------

@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_debug_information_does_not_change_the_machine_code(path, tmp_path):
    source = Source(path.name, path.read_text())
    plain = driver.compile_source(source, executable=True, parts=1)
    with llvm_backend.debug_information():
        debug = driver.compile_source(source, executable=True, parts=1)
    assert functions_but_main(plain[0], tmp_path) == functions_but_main(debug[0], tmp_path)
    assert b".debug_line" in debug[0] and b".debug_line" not in plain[0]


def test_the_module_without_g_has_no_debugging_information():
    """Without -g the module is what it was: NoDebug, locations that number call sites."""
    text = str(llvm_backend.to_llvm(Source("fib.l", (HERE / "fib.l").read_text())))
    assert "emissionKind: NoDebug" in text and "!lc.sites" not in text and "column: 0" in text
    with llvm_backend.debug_information():
        text = str(llvm_backend.to_llvm(Source("fib.l", (HERE / "fib.l").read_text())))
    assert "emissionKind: FullDebug" in text and "!lc.sites" in text and '"Dwarf Version"' in text


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_dwarf_names_the_functions_and_lines(tmp_path):
    exe = build("fib", tmp_path, "-g", "-O0")
    info = subprocess.run(["readelf", "--debug-dump=info", str(exe)], capture_output=True, text=True).stdout
    names = set(re.findall(r"DW_AT_name\s*:\s*(?:\(indirect string, offset: \S+\):\s*)?(\S+)", info))
    assert {"fib.l", "fib", "show", "lcompiler"} <= names | set(re.findall(r"DW_AT_producer.*?(lcompiler)", info))
    lines = subprocess.run(["objdump", "--dwarf=decodedline", str(exe)], capture_output=True, text=True).stdout
    assert {3, 6, 7, 8, 11} <= {int(n) for n in re.findall(r"^fib\.l\s+(\d+)\s", lines, re.M)}


def test_a_backtrace_is_the_same_with_and_without_g_but_for_the_names(tmp_path):
    plain = run_exe(build("tail", tmp_path), {"LC_BACKTRACE": "1"})
    debug = run_exe(build("tail", tmp_path, "-g"), {"LC_BACKTRACE": "1"})
    assert plain.returncode == debug.returncode == 2
    assert re.sub(r" \(in \w+\)", "", debug.stderr) == plain.stderr
    assert "(in descend)" in debug.stderr


# --- gdb, in batch mode ------------------------------------------------

@pytest.mark.skipif(GDB is None, reason="gdb is not installed (.ci/run installs it)")
def test_gdb_stops_at_an_l_line_and_names_l_functions(tmp_path):
    for options in (("-g",), ("-g", "-O0")):
        out = gdb(build("fib", tmp_path, *options), "break fib.l:3", "run", "bt", "info source")
        assert re.search(r"Breakpoint 1 at 0x[0-9a-f]+: file fib\.l, line 3\.", out), out
        assert re.search(r"hit Breakpoint 1, fib \(\) at fib\.l:3\n3\t  else fib\(n - 1\) \+ fib\(n - 2\)", out), out
        assert re.search(r"^#0  fib \(\) at fib\.l:3$", out, re.M), out
        assert "Current source file is fib.l" in out and "Producer is lcompiler." in out
    assert re.search(r"^#1  0x[0-9a-f]+ in show \(\) at fib\.l:6$", out, re.M), out     # -O0: show's frame


@pytest.mark.skipif(GDB is None, reason="gdb is not installed (.ci/run installs it)")
def test_gdb_steps_from_l_line_to_l_line(tmp_path):
    out = gdb(build("fib", tmp_path, "-g", "-O0"), "break fib.l:6", "run", "next", "next")
    lines = re.findall(r"^(\d+)\t", out, re.M)
    assert lines == ["6", "7", "8"], out


# --- LC_BACKTRACE=1 ----------------------------------------------------

@pytest.mark.parametrize("name", GOLDEN)
def test_backtrace_of_the_jit_is_golden(name):
    done = lc("run", f"{name}.l", env={"LC_BACKTRACE": "1"})
    assert done.returncode == 2
    assert done.stderr == (HERE / f"{name}.run.stderr").read_text()


@pytest.mark.parametrize("name", GOLDEN)
def test_backtrace_of_an_unoptimised_executable_is_golden(name, tmp_path):
    exe = build(name, tmp_path, "-g", "-O0")
    done = run_exe(exe, {"LC_BACKTRACE": "1"})
    assert done.returncode == 2
    assert done.stderr == (HERE / f"{name}.g0.stderr").read_text()
    without = run_exe(exe, {"LC_BACKTRACE": "0"})
    assert without.stderr == "".join(l for l in done.stderr.splitlines(True) if not l.startswith("  called")
                                     and not l.startswith("  (the call above"))


@pytest.mark.parametrize("name", GOLDEN)
def test_without_lc_backtrace_the_output_is_the_interpreters(name):
    """The message alone, as the reference interpreter prints it (and as before backtraces)."""
    env = {k: v for k, v in os.environ.items() if k != "LC_BACKTRACE"}
    compiled = subprocess.run(LC + ["run", f"{name}.l"], cwd=HERE, capture_output=True, text=True, env=env)
    interpreted = subprocess.run(LC + ["run", "--interp", f"{name}.l"], cwd=HERE, capture_output=True, text=True,
                                 env=env)
    assert (compiled.stdout, compiled.stderr, compiled.returncode) == \
        (interpreted.stdout, interpreted.stderr, interpreted.returncode)
    assert "called from" not in compiled.stderr


def test_a_tail_call_leaves_no_line():
    """down calls check in tail position: its frame is gone, so no line is `(in down)`."""
    golden = (HERE / "tail.g0.stderr").read_text()
    assert "(in descend)" in golden and "(in down)" not in golden


def test_a_stack_overflow_has_a_backtrace_too(tmp_path):
    exe = build("overflow", tmp_path, "-g", "-O0")
    done = run_exe(exe, {"LC_BACKTRACE": "1", "LC_STACK_SIZE": "256K"})
    assert done.returncode == 2
    head, *rest = done.stderr.split("\n", 3)[3].splitlines()
    lines = [head] + rest
    assert done.stderr.startswith("overflow.l:2:17: runtime error: stack overflow")
    assert lines[:4] == ["  called from overflow.l:1:19 (in down)", "  called from overflow.l:2:17 (in up)"] * 2
    assert lines[-1] == "  ..." and len(lines) == 51          # BACKTRACE_LINES, then "..."
    jit = lc("run", "overflow.l", env={"LC_BACKTRACE": "1", "LC_STACK_SIZE": "256K"})
    assert jit.returncode == 2 and re.search(r"^  \(the call above, \d+ more times\)$", jit.stderr, re.M)
