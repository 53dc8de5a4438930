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
    assert options == {"file", "--interp", "-O"} and "native code" in help_ and run is cli.run_command
