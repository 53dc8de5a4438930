"""Chapter 10b's runtime, as C: it compiles without a warning, exports the interface that chapter 10's
back end declares and nothing else, agrees with the back end on the layout of a block, uses the
defaults that `lc --help` shows, describes its heap as it is (LC_GC_DUMP), and the notebook's cell
magic checks the C as it grows.

The collector's behaviour is tests/test_gc.py's; the runtime running every program of the corpus,
tests/test_native.py's.
"""

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lcompiler import driver, llvm_backend, runtime
from lcompiler.errors import Source

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "lcompiler" / "runtime"
C_FILES = sorted(RUNTIME.glob("*.c"))
LC = str(Path(sys.executable).parent / "lc")

# Every C compiler of the machine (cc, and clang if it is another one): each warns about other things.
COMPILERS = list({os.path.realpath(shutil.which(cc)): cc for cc in ("cc", "clang") if shutil.which(cc)}.values())
STRICT = ["-std=c11", "-pthread", "-Wall", "-Wextra", "-Werror"]


def compile_c(compiler: str, path: Path, out: Path, defines=None) -> subprocess.CompletedProcess:
    return subprocess.run([compiler, *STRICT, *(runtime.defines() if defines is None else defines),
                           "-c", str(path), "-o", str(out)], capture_output=True, text=True)


# --- The C compiles, and only with the defaults --------------------------------------------------

@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("path", C_FILES, ids=[p.name for p in C_FILES])
def test_every_file_compiles_without_a_warning(compiler, path, tmp_path):
    done = compile_c(compiler, path, tmp_path / "file.o")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("compiler", COMPILERS)
def test_a_warning_fails_the_compilation(compiler, tmp_path):
    """The check above can fail: a copy of the runtime with one unused parameter added."""
    shutil.copytree(RUNTIME, tmp_path / "runtime")
    gc = tmp_path / "runtime" / "gc.c"
    gc.write_text(gc.read_text() + "\nvoid lc_test_warning(int unused) { }\n")
    done = compile_c(compiler, gc, tmp_path / "gc.o")
    assert done.returncode != 0 and "unused" in done.stderr


def test_the_c_needs_the_defaults(tmp_path):
    done = compile_c(COMPILERS[0], RUNTIME / "heap.c", tmp_path / "heap.o", defines=[])
    assert done.returncode != 0 and "lcompiler.defaults.DEFAULTS" in done.stderr


def test_the_c_files_are_package_data():
    """`pip install .` copies them with the package (pyproject.toml's package-data)."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["lcompiler"]
    files = [p for p in RUNTIME.iterdir() if p.suffix in (".c", ".h")]
    assert len(files) >= 7
    for path in files:
        assert any(fnmatch.fnmatch(f"runtime/{path.name}", pattern) for pattern in patterns), path.name


# --- The interface: what the back end calls is what the runtime defines -------------------------

def exported(library: Path) -> set:
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                             check=True).stdout
    return {line.split()[-1] for line in symbols.splitlines() if line.split()[1] in ("T", "B", "D")}


@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm")
def test_the_library_exports_what_the_back_end_calls_and_nothing_else():
    assert exported(runtime.runtime_library("shared")) == set(llvm_backend.RUNTIME_FUNCTIONS) | {
        "lc_hp", "lc_hl", "lc_run"}


def test_lc_h_declares_each_function_as_the_back_end_calls_it():
    header = (RUNTIME / "lc.h").read_text()
    run_type = [None] * 8                               # main's call of lc_run (Backend.main) passes 8 words
    calls = dict(llvm_backend.RUNTIME_FUNCTIONS, lc_run=(llvm_backend.I32, run_type))
    for name, (result, params) in calls.items():
        m = re.search(rf"^LC_API (?:_Noreturn )?(\w+) {name}\((.*?)\);$", header, re.M | re.S)
        assert m, f"lc.h does not declare {name}"
        depth, commas = 0, 0                            # the parameters: commas outside parentheses
        for char in m.group(2):
            depth += {"(": 1, ")": -1}.get(char, 0)
            commas += char == "," and depth == 0
        assert commas + (m.group(2).strip() not in ("", "void")) == len(params), name
        assert (m.group(1) == "void") == (result is llvm_backend.VOID), name


def test_the_layout_of_a_block_is_the_back_ends():
    names = ["TAG_SHIFT", "TAG_BITS", "LAYOUT_SHIFT", "LAYOUT_FIELDS", "CONSERVATIVE_BIT", "OLD_BIT",
             "REMEMBERED_BIT", "FIELDS_MASK"]
    c = runtime.c_constants(names)
    b = llvm_backend
    assert (c["TAG_SHIFT"], c["TAG_BITS"], c["LAYOUT_SHIFT"], c["LAYOUT_FIELDS"]) == (
        b.TAG_SHIFT, b.TAG_BITS, b.LAYOUT_SHIFT, b.LAYOUT_FIELDS)
    assert (c["CONSERVATIVE_BIT"], c["OLD_BIT"], c["REMEMBERED_BIT"]) == (b.CONSERVATIVE, b.OLD, b.REMEMBERED)
    assert c["FIELDS_MASK"] == (1 << b.TAG_SHIFT) - 1


# --- The defaults: lc --help shows what the runtime uses ----------------------------------------

def help_default(variable: str) -> str:
    text = " ".join(subprocess.run([LC, "--help"], capture_output=True, text=True, check=True).stdout.split())
    return re.search(rf"{variable} .*?default (\d+[KMG]?)", text).group(1)


# A recursion that LLVM cannot turn into a loop, printing its depth every 10,000 calls: the runtime
# flushes the output at the overflow, so the last line is how deep the stack let it go.
DEPTH = "def deep(n) = { if (n % 10000 == 0) print(n) else (); 1 + deep(n + 1) * 2 }\nprint(deep(1))\n"


def test_the_stack_is_the_size_the_help_shows(tmp_path):
    exe = driver.build(Source("depth.l", DEPTH), tmp_path / "depth")

    def depth(**env) -> int:
        done = subprocess.run([str(exe)], capture_output=True, text=True,
                              env={**{k: v for k, v in os.environ.items() if k != "LC_STACK_SIZE"}, **env})
        assert done.returncode == 2 and "stack overflow" in done.stderr, done.stderr
        return int(done.stdout.split()[-1])

    shown = help_default("LC_STACK_SIZE")
    half = f"{int(shown[:-1]) // 2}{shown[-1]}"
    assert depth() == depth(LC_STACK_SIZE=shown) > depth(LC_STACK_SIZE=half) > 0


def test_the_heap_limit_is_the_one_the_help_shows(tmp_path):
    """The compiled runtime's default_heap_limit: the help's default, or a quarter of the memory."""
    reader = tmp_path / "reader.c"
    reader.write_text("#include <stdint.h>\n#include <stdio.h>\nuint64_t default_heap_limit(void);\n"
                      "int main(void) { printf(\"%llu\\n\", (unsigned long long)default_heap_limit()); return 0; }\n")
    subprocess.run([runtime.c_compiler(), str(reader), str(runtime.runtime_library("object")), "-pthread",
                    "-o", str(tmp_path / "reader")], check=True)
    limit = int(subprocess.run([str(tmp_path / "reader")], capture_output=True, text=True, check=True).stdout)
    shown = help_default("LC_HEAP_LIMIT")
    most = int(shown[:-1]) << {"K": 10, "M": 20, "G": 30}[shown[-1]]
    quarter = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    assert limit == min(most, max(quarter, runtime.LEAST_HEAP_LIMIT))


# --- LC_GC_DUMP describes the heap as it is --------------------------------------------------------

TREE = """data Tree { Leaf; Node(Tree, Int, Tree) }
def insert(t, k) = match (t) {
  Leaf -> Node(Leaf, k, Leaf)
  Node(l, x, r) -> if (k < x) Node(insert(l, k), x, r) else if (k > x) Node(l, x, insert(r, k)) else t
}
def size(t) = match (t) { Leaf -> 0; Node(l, _, r) -> size(l) + 1 + size(r) }
def build(i, t) = if (i == 0) t else build(i - 1, insert(t, i * 7919 % 1000))
print(size(build(30000, Leaf)))
"""


@pytest.mark.parametrize("n", [1, 7, 40])
def test_the_heap_dump_tiles_the_heap_up_to_its_limit(n, tmp_path):
    exe = driver.build(Source("tree.l", TREE), tmp_path / "tree")
    done = subprocess.run([str(exe)], capture_output=True, text=True,
                          env={**os.environ, "LC_NURSERY": "256K", "LC_HEAP_LIMIT": "64M", "LC_GC_DUMP": str(n)})
    assert done.stdout == "1000\n"
    lines = done.stderr.splitlines()
    (collection,) = [line.split() for line in lines if line.startswith("collection ")]
    assert collection[1] == str(n)
    heap = [(int(o), int(w), kind) for _, o, w, kind in (line.split() for line in lines if line.startswith("heap "))]
    assert [o for o, _, _ in heap] == [0] + [o + w for o, w, _ in heap[:-1]]       # each where the last ends
    assert heap[-1][0] + heap[-1][1] == 64 << 20 >> 3 and heap[-1][2] == "fresh"   # the limit, in words
    chunks = [(o, w) for o, w, kind in heap if kind == "nursery"]
    assert len(chunks) == 4 and all(o % 8192 == 0 and w == 8192 for o, w in chunks)
    assert all(w > 0 for _, w, _ in heap) and {kind for *_, kind in heap} <= {"blocks", "free", "region",
                                                                              "nursery", "fresh"}


# --- The cell magic %%c ------------------------------------------------------------------------------

def test_the_cell_magic_checks_c_as_it_grows():
    cells = runtime.CCells()
    cells.add("runtime/t.h", "#pragma once\n#include <stdint.h>\nint64_t twice(int64_t x);")
    cells.add("runtime/t.c", '#include "t.h"\n\nstatic int64_t later(int64_t x);\n'
                             "int64_t twice(int64_t x) { return later(x) + later(x); }")   # not yet defined: passes
    cells.add("runtime/t.c", "static int64_t later(int64_t x) { return x; }")
    cells.add("runtime/t.c", "static int64_t later(int64_t x) { return x; }")    # run again: not defined twice
    with pytest.raises(runtime.CError, match=r"runtime/t\.c:.*unused variable"):
        cells.add("runtime/t.c", "int64_t three(void) { int64_t unused = 0; return 3; }")
    cells.add("runtime/t.c", "int64_t three(void) { return 3; }")               # the cell, corrected
    with pytest.raises(runtime.CError, match="expected"):
        cells.add("runtime/t.h", "int64_t broken(")
    assert cells.text("runtime/t.c").count("later(int64_t x) {") == 1 and "unused" not in cells.text("runtime/t.c")
