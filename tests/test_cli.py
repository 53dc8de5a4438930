"""lcompiler.cli (appendix C): one registration per command, and no command function left dead."""

import ast
from pathlib import Path

from lcompiler import cli

SOURCE = Path(cli.__file__).read_text()


def registrations() -> list[tuple[str, str]]:
    """(command name, function name) for each @command(...) in the module, in order."""
    found = []
    for node in ast.parse(SOURCE).body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "command":
                    found.append((d.args[0].value, node.name))
    return found


def test_every_command_is_registered_once():
    names = [name for name, _ in registrations()]
    assert sorted(names) == sorted(set(names)) == ["add", "build", "repl", "run", "show"]
    assert sorted(cli.COMMANDS) == sorted(names)


def test_every_command_function_of_the_module_is_one_lc_runs():
    running = {run for _, _, run in cli.COMMANDS.values()}
    functions = [function for _, function in registrations()]
    assert all(getattr(cli, name) in running for name in functions)
    dead = [name for name in cli.__all__ if name.endswith("_command") and getattr(cli, name) not in running]
    assert dead == []


def test_lc_run_has_the_options_of_the_last_chapter():
    help_, arguments, run = cli.COMMANDS["run"]
    options = {n for names, _ in arguments for n in names}
    assert options == {"file", "--interp", "-O", "-Werror", "--color"} and "native code" in help_ and run is cli.run_command


# --- The smaller things of issue 27 --------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

LC = str(Path(sys.executable).parent / "lc")


def lc_(*argv, cwd=None, env=None, input=None) -> subprocess.CompletedProcess:
    return subprocess.run([LC, *argv], capture_output=True, text=True, cwd=cwd, input=input,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_lc_run_dash_reads_the_program_from_standard_input():
    done = lc_("run", "-", input='print("from stdin")\n')
    assert (done.stdout, done.returncode) == ("from stdin\n", 0)
    done = lc_("run", "-", input="print(1 + true)\n")
    assert done.stderr.startswith("<stdin>:1:11: error: ") and done.returncode == 1


@pytest.mark.slow
def test_lc_build_without_o_names_the_executable_after_the_source(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hello.l").write_text('print("built")\n')
    done = lc_("build", "src/hello.l", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert subprocess.run([str(tmp_path / "hello")], capture_output=True, text=True).stdout == "built\n"


@pytest.mark.parametrize("variable, value, syntax", [
    ("LC_STACK_SIZE", "abc", "a size (bytes, or a number followed by K, M or G, as in 256M)"),
    ("LC_HEAP_LIMIT", "12X", "a size (bytes, or a number followed by K, M or G, as in 256M)"),
    ("LC_BUFFER", "lines", "line or block")])
@pytest.mark.parametrize("interp", [False, True])
def test_a_setting_that_cannot_be_read_is_an_error_naming_it(tmp_path, variable, value, syntax, interp):
    (tmp_path / "p.l").write_text('print("not run")\n')
    done = lc_("run", *(["--interp"] if interp else []), str(tmp_path / "p.l"), env={variable: value})
    assert done.stderr == f"error: the environment variable {variable} is '{value}', not {syntax}\n"
    assert (done.stdout, done.returncode) == ("", 2)


def test_a_c_compiler_that_is_not_there_is_named(tmp_path):
    (tmp_path / "p.l").write_text('print(1)\n')
    done = lc_("build", str(tmp_path / "p.l"), "-o", str(tmp_path / "p"), env={"CC": "no-such-cc"})
    assert done.stderr == "lc: error: C compiler 'no-such-cc' not found (set CC to a C compiler, e.g. gcc)\n"
    assert done.returncode == 1


def test_lc_show_suggests_the_stage_meant(tmp_path):
    (tmp_path / "p.l").write_text('print(1)\n')
    done = lc_("show", "typse", str(tmp_path / "p.l"))
    assert "unknown stage 'typse' (did you mean 'types'?)" in done.stderr and done.returncode == 1


# --- Issue 26: lc answers --help and --version without loading the compiler -----------------

import tomllib  # noqa: E402

STAGES = {"lcompiler.addlang", "lcompiler.anf", "lcompiler.pipeline", "lcompiler.syntax", "lcompiler.core",
          "lcompiler.primitives", "lcompiler.interp", "lcompiler.types", "lcompiler.mono", "lcompiler.cps",
          "lcompiler.cps_convert", "lcompiler.closure", "lcompiler.shrink", "lcompiler.llvm_backend",
          "lcompiler.driver", "lcompiler.union_find"}


def imported(*argv: str) -> set[str]:
    """The modules that `lc ARGV`, the installed script, imports (python -X importtime, in a child)."""
    done = subprocess.run([sys.executable, "-X", "importtime", LC, *argv], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.split("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
            and not line.split("|")[2].strip().startswith("imported package")}


def test_the_stage_modules_are_known():
    """STAGES names every module of the package but those lc needs to answer --help."""
    modules = {f"lcompiler.{p.stem}" for p in Path(cli.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert STAGES < modules
    assert modules - STAGES == {"lcompiler.cli", "lcompiler.runtime", "lcompiler.errors", "lcompiler.support",
                                "lcompiler.drawing", "lcompiler.highlight", "lcompiler.cache"} & modules


@pytest.mark.parametrize("option, allowed", [("--help", {"lcompiler", "lcompiler.cli", "lcompiler.runtime"}),
                                             ("--version", {"lcompiler", "lcompiler.cli"})])
def test_lc_help_and_version_import_none_of_the_compiler(option, allowed):
    modules = imported(option)
    assert {"lcompiler", "lcompiler.cli"} <= modules     # the measurement sees lc's own modules
    assert {m for m in modules if m.startswith("lcompiler")} <= allowed
    assert not {m for m in modules if m.startswith("llvmlite") or m == "importlib.metadata"}


def test_the_version_is_pyprojects():
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    assert cli.VERSION == project["version"]
    assert lc_("--version").stdout == f"lc {project['version']} (Python {sys.version.split()[0]})\n"
