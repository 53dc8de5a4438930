"""lcompiler.support (appendix B): what the stages share, defined once, and doing what it promises."""

import ast
import ctypes
import faulthandler
import gc
import importlib
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lcompiler import support
from lcompiler.support import (
    NESTING_LIMIT, Result, collector_looks_every, collector_paused, in_frame_room, libc, on_big_stack,
    recursion_limit, run_in_child, target_machine)

PACKAGE = Path(support.__file__).parent


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_no_other_module_defines_a_name_of_support():
    shared = set(support.__all__) | {"_libc"}
    defined = {path.stem: top_level_names(path) & shared
               for path in sorted(PACKAGE.glob("*.py")) if path.stem != "support"}
    assert {module: names for module, names in defined.items() if names} == {}


def test_the_stages_use_support_s_own_objects():
    for path in sorted(PACKAGE.glob("*.py")):
        module = importlib.import_module(f"lcompiler.{path.stem}")
        for name in support.__all__:
            if hasattr(module, name):
                assert getattr(module, name) is getattr(support, name), f"{path.stem}.{name}"


def test_the_collector_is_paused_inside_and_as_it_was_after_even_after_an_exception():
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                pass
            assert not gc.isenabled(), "a pause inside a pause leaves the collector paused"
            raise ZeroDivisionError
    assert gc.isenabled()


def test_recursion_limit_gives_room_counted_from_its_caller_and_restores_the_limit():
    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    before = sys.getrecursionlimit()
    with pytest.raises(RecursionError):
        depth(before + 10)
    with pytest.raises(ValueError):
        with recursion_limit(NESTING_LIMIT):
            assert depth(NESTING_LIMIT - 100) == NESTING_LIMIT - 100
            raise ValueError
    assert sys.getrecursionlimit() == before


def test_the_collector_looks_less_often_inside_and_as_before_after():
    before = gc.get_threshold()
    with pytest.raises(KeyError):
        with collector_looks_every(123_456):
            assert gc.get_threshold() == (123_456, *before[1:])
            raise KeyError
    assert gc.get_threshold() == before


def test_a_child_s_streams_and_status_are_captured():
    r = run_in_child(lambda: os.write(1, b"out\n") and os.write(2, b"err\n") and 7)
    assert r == Result("out\n", "err\n", 7)


def test_what_c_buffered_in_the_child_is_not_lost():
    # printf into a file is buffered, and os._exit drops C's buffers: the child must flush them. Run
    # in a Python without PYTHONUNBUFFERED, which would make C's stdout unbuffered and hide the loss.
    code = ("from lcompiler.support import libc, run_in_child\n"
            "print(repr(run_in_child(lambda: libc.printf(b'no newline') and 0).stdout))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout == "'no newline'\n", done.stderr


def test_a_crash_ends_the_child_not_the_caller():
    def crash() -> int:
        faulthandler.disable()          # pytest's would write the child's traceback to the test's stderr
        os.kill(os.getpid(), signal.SIGSEGV)
        return 0
    assert run_in_child(crash).status == -signal.SIGSEGV


def test_a_child_that_runs_too_long_is_killed_and_says_why():
    start = time.monotonic()
    r = run_in_child(lambda: time.sleep(30) or 0, timeout=0.3)
    assert time.monotonic() - start < 10
    assert r == Result("", "stopped: the program ran longer than 0.3 s\n", -signal.SIGTERM)


def test_the_time_limit_counts_from_the_start_even_after_the_child_closes_its_output():
    def quiet() -> int:
        os.write(1, b"started\n")
        time.sleep(1.5)
        os.closerange(1, 4096)          # every copy of the pipe's end: the output closes; the child runs on
        time.sleep(30)
        return 0
    start = time.monotonic()
    r = run_in_child(quiet, timeout=2.0)
    # stopped at 2 s, not 1.5 s of reading and then 2 s more of waiting
    assert 2.0 <= time.monotonic() - start < 3.2
    assert r == Result("started\n", "stopped: the program ran longer than 2 s\n", -signal.SIGKILL)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period():
    def stubborn() -> int:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.write(1, b"started\n")
        time.sleep(30)
        return 0
    shown = []
    r = run_in_child(stubborn, timeout=0.3, output=shown.append)
    assert r == Result("started\n", "stopped: the program ran longer than 0.3 s\n", -signal.SIGKILL)
    assert shown == ["started\n"]


def test_on_big_stack_hands_back_results_and_exceptions_and_has_a_big_c_stack():
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    with recursion_limit(1_000_000):
        assert len(on_big_stack(repr, nested)) == 200_002        # recursion in C, deeper than 8 MiB allows
    with pytest.raises(ValueError, match="forty"):
        on_big_stack(int, "forty")
    assert in_frame_room(sum, [1, 2, 3]) == 6


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the instructions checked are x86-64's")
def test_the_jit_and_an_executable_get_the_code_models_they_need():
    text = "declare i64 @f(i64)\ndefine i64 @g(i64 %x) {\n  %y = call i64 @f(i64 %x)\n  ret i64 %y\n}\n"
    import llvmlite.binding as llvm
    jit = target_machine().emit_assembly(llvm.parse_assembly(text))
    executable = target_machine(executable=True).emit_assembly(llvm.parse_assembly(text))
    assert "movabsq\t$f" in jit and "callq\t*%rax" in jit                    # large code model
    assert "callq\tf@PLT" in executable and "movabs" not in executable      # small, position independent
    assert target_machine() is not target_machine(), "an engine owns its target machine: one each"
    assert isinstance(libc, ctypes.CDLL)
