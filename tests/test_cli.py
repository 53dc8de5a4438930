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
    assert options == {"file", "--interp", "-O", "-Werror", "--color", "--no-cache"}
    assert "native code" in help_ and run is cli.run_command


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
    ("LC_BUFFER", "lines", "line or block"),
    ("LC_GC_STATS", "yes", "0 or 1"),
    ("LC_GC_TRACE", "x", "0 or 1")])
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


MODULES = "lc-test-import: "
MEASURE = """import runpy, sys
class Log:                         # first on the path of finders: told of every module imported
    def find_spec(self, name, path=None, target=None):
        print(MARK + name, file=sys.stderr, flush=True)
sys.meta_path.insert(0, Log())
sys.argv = ARGV
runpy.run_path(sys.argv[0], run_name="__main__")"""


def lc_measured(*argv: str, **run) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`lc ARGV`, the installed script, in a child; what it did (its stderr without the measurement) and
    the modules it imported, each reported as it is imported by a finder put first on sys.meta_path.
    Unlike `python -X importtime`, this also sees the modules imported by name with
    importlib.import_module, as pipeline.load imports the stages; unlike reading sys.modules at exit, it
    also sees them when a runtime error ends the process from C."""
    code = MEASURE.replace("MARK", repr(MODULES)).replace("ARGV", repr([LC, *argv]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, **run)
    lines = done.stderr.splitlines(keepends=True)
    done.stderr = "".join(line for line in lines if not line.startswith(MODULES))
    modules = {line[len(MODULES):].strip() for line in lines if line.startswith(MODULES)}
    assert "lcompiler.cli" in modules, done.stderr[-2000:]     # the measurement sees lc's own modules
    return done, modules


def imported(*argv: str) -> set[str]:
    """The modules that `lc ARGV` has loaded when it ends (lc_measured)."""
    done, modules = lc_measured(*argv)
    assert done.returncode == 0, done.stderr[-2000:]
    return modules


def test_the_stage_modules_are_known():
    """STAGES names every module of the package but those lc needs to answer --help."""
    modules = {f"lcompiler.{p.stem}" for p in Path(cli.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert STAGES < modules
    assert modules - STAGES == {"lcompiler.cli", "lcompiler.runtime", "lcompiler.defaults", "lcompiler.errors",
                                "lcompiler.support",
                                "lcompiler.drawing", "lcompiler.highlight", "lcompiler.cache"} & modules


@pytest.mark.parametrize("option, allowed", [("--help", {"lcompiler", "lcompiler.cli", "lcompiler.defaults"}),
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


# --- Issue 26: lc run's cache of compiled programs (chapter 11) -------------------------------

import signal  # noqa: E402
import time  # noqa: E402

from lcompiler import cache  # noqa: E402
from lcompiler.errors import Source  # noqa: E402


def run_(*argv, cache_folder, cwd=None, env=None, input=None) -> tuple[subprocess.CompletedProcess, bool]:
    """lc ARGV with LC_CACHE=cache_folder: what it did, and whether it compiled (loaded the pipeline)."""
    done, modules = lc_measured(*argv, cwd=cwd, input=input,
                                env={**os.environ, "LC_CACHE": str(cache_folder), **(env or {})})
    return done, "lcompiler.pipeline" in modules


def seen(done: subprocess.CompletedProcess) -> tuple:
    return done.stdout, done.stderr, done.returncode


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "programs").glob("*.lcp"))


@pytest.mark.parametrize("text, expected_status", [
    ('print("hello", 6 * 7)\n', 0),
    ('print("one")\nprint(1 / (1 - 1))\n', 2),                              # a runtime error
    ('def f(x) = x.{ 0 -> "zero" }\nprint(f(0))\n', 0),                     # a warning
    ('def f(x) = x.{ 0 -> "zero" }\nprint(f(1))\n', 2)])                    # a warning, then a match failure
def test_a_program_run_again_is_not_compiled_and_behaves_the_same(tmp_path, text, expected_status):
    (tmp_path / "p.l").write_text(text)
    first, compiled = run_("run", "p.l", cache_folder=tmp_path / "cache", cwd=tmp_path)
    assert compiled and first.returncode == expected_status and "Traceback" not in first.stderr
    again, compiled = run_("run", "p.l", cache_folder=tmp_path / "cache", cwd=tmp_path)
    assert not compiled and seen(again) == seen(first)
    uncached, compiled = run_("run", "--no-cache", "p.l", cache_folder=tmp_path / "other", cwd=tmp_path)
    assert compiled and seen(uncached) == seen(first) and entries(tmp_path / "other") == []
    assert len(entries(tmp_path / "cache")) == 1


def test_an_edit_an_option_or_a_setting_compiles_again_with_the_new_result(tmp_path):
    folder, p = tmp_path / "cache", tmp_path / "p.l"
    p.write_text('def f(x) = x.{ 0 -> "zero" }\nprint(f(0))\n')
    warned, compiled = run_("run", str(p), cache_folder=folder)
    assert compiled and warned.stdout == "zero\n" and "warning: this match does not cover 1" in warned.stderr
    refused, compiled = run_("run", "-Werror", str(p), cache_folder=folder)           # an option
    assert compiled and refused.returncode == 1 and "error: this match does not cover 1" in refused.stderr
    assert refused.stdout == ""
    unoptimised, compiled = run_("run", "-O0", str(p), cache_folder=folder)
    assert compiled and seen(unoptimised) == seen(warned)
    coloured, compiled = run_("run", "--color=always", str(p), cache_folder=folder)
    assert compiled and "\x1b[" in coloured.stderr
    p.write_text('def f(x) = x.{ 0 -> "nought"; _ -> "other" }\nprint(f(0))\n')         # an edit
    edited, compiled = run_("run", str(p), cache_folder=folder)
    assert compiled and seen(edited) == ("nought\n", "", 0)
    small, compiled = run_("run", str(p), cache_folder=folder, env={"LC_STACK_SIZE": "abc"})   # a setting
    assert compiled and small.stderr.startswith("error: the environment variable LC_STACK_SIZE is 'abc'")
    for argv, compiles in ((["run", str(p)], False), (["run", "-O0", str(p)], True), (["run", "-O0", str(p)], False)):
        done, compiled = run_(*argv, cache_folder=folder)
        assert compiled == compiles and seen(done) == ("nought\n", "", 0)
    renamed = tmp_path / "q.l"                           # the name is in the messages: another program
    renamed.write_text(p.read_text())
    assert run_("run", str(renamed), cache_folder=folder)[1]


@pytest.mark.parametrize("damage", [lambda b: b[:-100], lambda b: b[:10], lambda b: b"",
                                    lambda b: b[:-1] + bytes([b[-1] ^ 1]), lambda b: b[:60] + b"x" + b[61:]],
                         ids=["cut short", "cut to the format", "empty", "last byte changed", "hash changed"])
def test_a_damaged_entry_is_compiled_again(tmp_path, damage):
    folder, p = tmp_path / "cache", tmp_path / "p.l"
    p.write_text('print("one")\nprint(1 / (1 - 1))\n')
    first, _ = run_("run", str(p), cache_folder=folder)
    [entry] = entries(folder)
    entry.write_bytes(damage(entry.read_bytes()))
    again, compiled = run_("run", str(p), cache_folder=folder)
    assert compiled and seen(again) == seen(first)
    assert cache.unpack(entry.read_bytes()) is not None        # written anew, whole
    assert not run_("run", str(p), cache_folder=folder)[1]


def test_a_cache_that_cannot_be_written_keeps_nothing_and_the_program_runs(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "programs").write_text("a file where the folder should be")
    (tmp_path / "p.l").write_text('print(1)\n')
    for _ in range(2):
        done, compiled = run_("run", str(tmp_path / "p.l"), cache_folder=tmp_path / "cache")
        assert compiled and seen(done) == ("1\n", "", 0)


def as_from_a_terminal() -> None:
    """(In the child, before exec:) SIGINT to its default. A program started by a background job
    inherits SIGINT ignored, and an L program keeps it so (chapter 10b): the test would wait."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_a_program_from_the_cache_as_before(tmp_path):
    (tmp_path / "loop.l").write_text('print("step 1")\ndef spin(n) = spin(n + 1)\nspin(0)\n')
    env = {**os.environ, "LC_CACHE": str(tmp_path / "cache"), "LC_BUFFER": "line"}
    for _ in range(2):                                   # compiled, then from the cache
        child = subprocess.Popen([LC, "run", str(tmp_path / "loop.l")], stdout=subprocess.PIPE, text=True, env=env,
                                 preexec_fn=as_from_a_terminal)
        assert child.stdout.readline() == "step 1\n"
        child.send_signal(signal.SIGINT)
        assert (child.stdout.read(), child.wait(timeout=60)) == ("", -signal.SIGINT)
    assert len(entries(tmp_path / "cache")) == 1


def test_a_program_from_the_cache_imports_no_stage_of_the_compiler(tmp_path):
    (tmp_path / "p.l").write_text('print("hello")\n')
    run_("run", str(tmp_path / "p.l"), cache_folder=tmp_path / "cache")
    done, modules = lc_measured("run", str(tmp_path / "p.l"),
                                env={**os.environ, "LC_CACHE": str(tmp_path / "cache")})
    assert done.stdout == "hello\n" and "lcompiler.cache" in modules and not modules & STAGES
    assert not {m for m in modules if m.startswith("llvmlite.binding")}    # the command runs an executable
    compiling, modules = lc_measured("run", "--no-cache", str(tmp_path / "p.l"))
    assert compiling.stdout == "hello\n" and modules & STAGES == STAGES - {"lcompiler.anf"}   # chapter 3's ANF
    # lowerings are not used by lc; the stages loaded by name, cps_convert, closure and shrink among
    # them, are what -X importtime did not see


REFUSED = """import os, runpy, sys
def execve(*arguments):                  # a system that will not run a file in memory (vm.memfd_noexec=2)
    open("execve-refused", "a").write("refused\\n")
    raise PermissionError(13, "Permission denied")
os.supports_fd.add(execve)
os.execve = execve
sys.argv = ARGV
runpy.run_path(sys.argv[0], run_name="__main__")"""


def test_a_command_whose_executable_the_system_will_not_run_runs_it_through_the_jit(tmp_path):
    (tmp_path / "p.l").write_text('def f(x) = x.{ 0 -> "one" }\nprint(f(0))\nprint(1 / (1 - 1))\n')
    env = {**os.environ, "LC_CACHE": str(tmp_path / "cache")}
    expected = seen(subprocess.run([LC, "run", "p.l"], capture_output=True, text=True, cwd=tmp_path, env=env))
    for _ in range(2):                                   # compiled, then from the cache
        done = subprocess.run([sys.executable, "-c", REFUSED.replace("ARGV", repr([LC, "run", "p.l"]))],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        assert seen(done) == expected == ("one\n", expected[1], 2) and "runtime error" in expected[1]
        assert expected[1].count("warning: this match does not cover") == 1            # said once
    assert (tmp_path / "execve-refused").read_text() == "refused\n" * 2     # it did try, each time


COLLECTOR = """import atexit, gc, runpy, sys
atexit.register(lambda: print("collector on:", gc.isenabled(), file=sys.stderr))
sys.argv = ARGV
runpy.run_path(sys.argv[0], run_name="__main__")"""


@pytest.mark.parametrize("argv, stdin, on", [(["build", "p.l", "-o", "p"], None, False),
                                              (["run", "--interp", "p.l"], None, True),
                                              (["repl"], "1 + 1\n", True)])
def test_the_command_turns_the_collector_off_only_where_it_only_compiles(tmp_path, argv, stdin, on):
    (tmp_path / "p.l").write_text('print(1)\n')
    done = subprocess.run([sys.executable, "-c", COLLECTOR.replace("ARGV", repr([LC, *argv]))], input=stdin,
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "LC_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0 and f"collector on: {on}" in done.stderr, done.stderr[-2000:]


def test_the_entry_name_changes_with_every_file_of_the_compiler(tmp_path):
    import shutil
    package = Path(shutil.copytree(cache.PACKAGE, tmp_path / "lcompiler", ignore=shutil.ignore_patterns("__pycache__")))
    hello, policy = Source("hello.l", 'print("hello")\n'), {"color": False, "warnings_are_errors": False}
    name = cache.entry_name(hello, True, policy, {}, package)
    assert cache.entry_name(hello, True, policy, {"HOME": "/x", "LC_CACHE": "/y"}, package) == name
    files = sorted(p for p in package.rglob("*") if p.suffix in (".py", ".c", ".h"))
    assert len(files) > 20 and any(p.suffix == ".c" for p in files)
    names = {name}
    for path in files:
        before = path.read_bytes()
        path.write_bytes(before + b" ")
        names.add(cache.entry_name(hello, True, policy, {}, package))
        path.write_bytes(before)
    assert len(names) == len(files) + 1
    assert cache.entry_name(hello, True, policy, {}, package) == name
    others = {cache.entry_name(hello, True, policy, {"LC_EXCEPTIONS": "setjmp"}, package),
              cache.entry_name(hello, True, policy, {"CC": "clang"}, package),
              cache.entry_name(hello, False, policy, {}, package),
              cache.entry_name(Source("./hello.l", hello.text), True, policy, {}, package)}
    assert len(others) == 4 and name not in others


def test_keep_keeps_the_entries_used_last(tmp_path):
    for i in range(6):
        cache.keep(tmp_path / f"{i}.lcp", cache.pack("", [bytes([i])]), most=3)
        os.utime(tmp_path / f"{i}.lcp", (i, i))             # as if written at second i
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3.lcp", "4.lcp", "5.lcp"]
    assert cache.kept(tmp_path / "3.lcp") == ("", [b"\x03"])   # used now: the last to go
    cache.keep(tmp_path / "6.lcp", cache.pack("w", [b"\x06"]), most=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3.lcp", "5.lcp", "6.lcp"]
    assert time.time() - (tmp_path / "3.lcp").stat().st_mtime < 600
    for name, age in ((".new-old", 7200), (".new-recent", 60)):   # left by an lc killed while writing
        (tmp_path / name).write_bytes(b"half")
        os.utime(tmp_path / name, (time.time() - age, time.time() - age))
    cache.keep(tmp_path / "7.lcp", cache.pack("", [b"\x07"]), most=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".new-recent", "3.lcp", "6.lcp", "7.lcp"]
