"""The pipeline of chapter 4: one list, stages that register into it, every stage checked and run.

- The page: the stages and their order are those of PIPELINE, and nothing else can register.
- Every stage, checked and run (Essentials of Compilation's `test_pass`): every corpus program and
  example, and every program of the exception corpus, goes through the pipeline, with and without the
  optimiser; after each stage that has a checker, the checker accepts the stage's output, and after each
  stage that has an interpreter, the interpreter prints what the reference interpreter prints and stops
  with the same runtime error. The LLVM stages are verified; what their machine code prints is compared
  by tests/test_native.py.
- No import cycle among the modules of lcompiler (imports at the top of a module).
- `lc show asm` shows the machine code of the executable `lc build` writes (small code model).
"""

import ast
import io
import re
from pathlib import Path

import pytest

from lcompiler import pipeline
from lcompiler.errors import RunError

from test_convert import IDS, PROGRAMS, SLOW, expected_outcome, source
from test_exceptions import EXCEPTIONS

ROOT = Path(__file__).resolve().parent.parent


def test_the_page_lists_every_stage_in_order_and_each_is_registered():
    assert pipeline.names() == ["tokens", "ast", "core", "types", "mono", "cps", "opt", "closure", "shrink",
                                "llvm", "llvm-opt", "asm"]
    assert [s.name for s in pipeline.load()] == pipeline.names()
    assert set(pipeline.OPTIMISATIONS) <= set(pipeline.names())


def test_a_name_that_is_not_on_the_page_cannot_register():
    with pytest.raises(ValueError, match=r"'closures' is not a stage of the pipeline \(did you mean 'closure'\?\)"):
        pipeline.stage("closures")
    assert "closures" not in pipeline.STAGES


def test_minus_O0_leaves_out_the_optimisations():
    src = source(ROOT / "examples" / "hello.l")
    ran = [s.name for s, _, _ in pipeline.stages_of(src, optimise=False)]
    assert ran == [n for n in pipeline.names() if n not in pipeline.OPTIMISATIONS]


def interpreted(stage, value, unit) -> tuple:
    out = io.StringIO()
    try:
        stage.interpret(value, unit, out)
        error = None
    except RunError as e:
        error = e.render()
    return out.getvalue(), error


# Every eighth program is in the fast loop (`pytest -m "not slow"`), the others only in the full run.
SAMPLED = [pytest.param(path, id=name, marks=() if k % 8 == 0 else pytest.mark.slow)
           for k, (path, name) in enumerate(zip(PROGRAMS + EXCEPTIONS,
                                                IDS + [f"exceptions/{p.stem}" for p in EXCEPTIONS]))]
# Programs the walk leaves to tests/test_exceptions.py, which runs them each way once: a million raises in
# each of seven interpreters; and 100,001 nested calls, one more than the CPS interpreter allows by default.
HEAVY = {"million_raises", "handler_tail_calls", "deep_recursion_escape"}


@pytest.mark.parametrize("optimise", [True, False], ids=["optimised", "O0"])
@pytest.mark.parametrize("path", SAMPLED)
def test_every_stage_checks_and_runs_the_program(path, optimise):
    if path.stem in SLOW:
        pytest.skip("a million tail calls in each of seven interpreters: tests/test_convert.py runs it")
    if path.stem in HEAVY:
        pytest.skip("too deep or too long for the walk's interpreters: tests/test_exceptions.py runs it")
    want = expected_outcome(path)
    seen = []
    for stage, value, unit in pipeline.stages_of(source(path), upto="llvm-opt", optimise=optimise, checked=True):
        seen.append(stage.name)
        if stage.interpret is not None:
            assert interpreted(stage, value, unit) == want, f"after the stage {stage.name}"
    assert seen[-1] == "llvm-opt"


def test_no_import_cycle_among_the_modules():
    graph = {}
    for path in (ROOT / "lcompiler").glob("*.py"):
        deps = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lcompiler"):
                deps |= {a.name for a in node.names} if node.module == "lcompiler" else {node.module.split(".")[1]}
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith("lcompiler.")}
        graph[path.stem] = deps & {p.stem for p in (ROOT / "lcompiler").glob("*.py")}
    done, cycles = set(), []

    def visit(module, path):
        if module in path:
            cycles.append(path[path.index(module):] + [module])
            return
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, path + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []
    assert graph["pipeline"] <= {"errors"}, "the pipeline imports the stages by name, when it first runs"


def test_lc_show_asm_shows_the_executables_code():
    text = pipeline.show("asm", source(ROOT / "examples" / "queens.l"))
    assert not re.search(r"movabsq\t\$[A-Za-z_.]", text), "a symbol's address in a register: the JIT's code"
    assert "callq\t*%rax" not in text, "a direct call through a register: the JIT's large code model"
    assert "@PLT" in text and "lc_sites" in text, "position-independent calls, and the table of call sites"
