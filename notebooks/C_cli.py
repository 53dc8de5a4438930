# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Appendix C. The command line: lc
#
# The package installs a command, `lc`, with which a reader runs the
# compiler on programs of their own: compile and run, build an executable,
# show what one stage hands to the next, type definitions into a REPL. Each
# of its commands does the work of one chapter or more; this appendix is the
# command line itself, in one place and as it is at the end of the book: the
# registry of its commands, the parser of its arguments, and the one
# function through which every failure becomes a message and an exit status,
# never a Python traceback.

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** every chapter that has something to run: [chapter
# 1](01_addlang.ipynb) for `lc add`; [chapter 4](04_pipeline.ipynb)'s
# pipeline, whose stages chapters 4a to 10 fill in, for `lc show`; the
# reference interpreter of [chapter 4b](04b_meaning.ipynb), the type checker
# of [chapter 5](05_types.ipynb) and the driver of [chapter
# 11](11_running.ipynb) for `lc run`, `lc build` and `lc repl`; the
# runtime of [chapter 10b](10b_runtime.ipynb), for the environment variables it
# reads; and [appendix A](A_errors.ipynb)'s errors, which `lc` reports.
#
# **Builds:** the module `lcompiler.cli`: `main`, which `lc` runs; its
# commands `add`, `show`, `run`, `build` and `repl`; and `lc(...)`, which
# runs the command in a notebook.
#
# </div>
#
# The code of this appendix was written a command at a time, in the chapters
# whose work each command does: chapter 1 started the registry with `lc
# add`, chapter 4a added `lc show`, chapters 4b, 5 and 11 each wrote a `lc
# run` of their own, and chapter 11 added `lc build` and `lc repl`. Those
# chapters still show the commands at work. [Appendix A](A_errors.ipynb)
# holds the errors and the drawings, [appendix B](B_support.ipynb) what the
# stages share with the machine they run on.

# %%
#| default_exp cli

# %% [markdown]
# ## What this appendix promises
#
# - `lc add EXPR` compiles an expression of chapter 1 and runs it (`--llvm`
#   prints its LLVM module, `--interp` runs chapter 1's interpreter).
# - `lc show STAGE FILE` prints what the stage `STAGE` of [chapter
#   4](04_pipeline.ipynb)'s pipeline hands to the next, for an L file.
# - `lc run FILE` compiles an L program to native code and runs it (`lc
#   run -` reads it from standard input, named `<stdin>` in messages);
#   `lc run --interp FILE` type-checks it and runs chapter 4b's reference
#   interpreter instead; `lc build FILE -o EXE` writes an executable (without
#   `-o`, in the working directory, named after the source: `hello.l` gives
#   `hello`); `lc repl` reads definitions and expressions one at a time,
#   with the commands `:help`, `:type`, `:load`, `:reset` and `:quit`, and
#   on a terminal with line editing and a history. `-O0` leaves out chapter
#   9's optimiser.
#   `lc run` runs a program it has compiled before, unchanged, without
#   compiling it again ([chapter
#   11](11_running.ipynb#running-again-without-compiling-a-cache-of-programs));
#   `--no-cache` compiles it all the same.
# - A setting of the environment that a program reads (`LC_STACK_SIZE`,
#   `LC_HEAP_LIMIT`, `LC_BUFFER`, …) that cannot be read is an error naming
#   the variable and what it accepts (status 2), under `--interp` too; a
#   `CC` that names no program says that the C compiler was not found; a
#   misspelt stage of `lc show` gets a suggestion.
# - `lc` ends with exit status 0 when all went well; 1 for a mistake in the
#   program found before it runs (every error found, rendered as `FILE:LINE:COL:
#   error: …`), or in how `lc` was called, or in the machine (`lc: error: …`);
#   2 for a runtime error (`FILE:LINE:COL: runtime error: …`); 130 when
#   interrupted (a program stopped by Ctrl-C ends by `SIGINT`, which a
#   shell shows as 130); and 3 only for a bug of `lc` itself, `lc: internal
#   compiler error: …` in one line (or at its place in the program, when
#   [chapter 5b](05b_mono.ipynb)'s check finds that the compiler made an
#   ill-typed program). No Python traceback reaches the user.
# - `lc --help` lists the commands and the environment variables of `lc`
#   and its programs that a user sets most (the collector's own, such as
#   `LC_NURSERY`, and `LC_BACKTRACE` are left to chapter 10b); `lc
#   --version` names the version. Neither loads a
#   stage of the compiler: each command imports what it needs when it runs.
# - `lc(*arguments)` runs the command in a notebook, what `lc` writes to
#   standard error in order with its output, and returns the exit status.
#
# ## A registry of commands
#
# The command line is a small registry: `COMMANDS` maps each sub-command to
# its help text, its arguments and the function that runs it, and
# `ENVIRONMENT` the environment variables that its help describes. A
# `UsageError` is a mistake in how `lc` was called rather than in a program:
# a file that cannot be read, say.

# %%
#| export
import argparse
import gc
import os
import sys
import textwrap
from typing import Callable

VERSION = "0.1.0"                      # pyproject.toml's; tests/test_cli.py checks that they agree
COMMANDS: dict[str, tuple[str, tuple, Callable]] = {}
ENVIRONMENT: dict[str, str] = {}       # the variables lc reads, for --help: name -> what it does


class UsageError(Exception):
    """A problem with how lc was called, not with a program: a file it cannot read, say."""


# %% [markdown]
# A sub-command is registered by decorating the function that runs it with
# `command`, which records its help and its arguments; each argument is
# written `arg(...)`, with exactly what `argparse`'s `add_argument` takes,
# so that the registry needs no parser until `lc` runs.

# %%
#| export
def arg(*names, **options) -> tuple:
    """One argument of a sub-command, as argparse's add_argument takes it."""
    return names, options


def command(name: str, help: str, *arguments: tuple) -> Callable:
    """Register `lc NAME`, run by the decorated function(args) -> exit status."""
    def register(run: Callable) -> Callable:
        COMMANDS[name] = (help, arguments, run)
        return run
    return register


# %%
print(arg("--llvm", action="store_true", help="print the LLVM module instead of running it"))


# %% [markdown]
# `argparse` exits with status 2 when the arguments are wrong, which for
# `lc` would mean a runtime error; our parser says 1, a usage error. And
# `lc --version` names the package's version and Python's. The version is
# the constant `VERSION`, not asked of the installed package's metadata:
# importing `importlib.metadata` to read it was a good part of the time
# `lc --version` took (see "How fast lc answers", below).

# %%
#| export
class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):      # argparse's status is 2, a runtime error's for lc: use 1
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")

    def format_help(self) -> str:       # an epilog that is a function is written when the help is shown
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def version() -> str:
    return f"lc {VERSION} (Python {sys.version.split()[0]})"


# %% [markdown]
# A program's output goes to standard output, which may be a pipe whose
# reader has gone (`lc run p.l | head -1`) or a full disk. `flush_output`
# flushes it at the end, or before an error message, so that what the
# program printed comes first; if it cannot, it sends the rest nowhere and
# says why — except for a closed pipe, which is no error of anyone's.

# %%
#| export
def flush_output() -> str | None:
    """Flush standard output; why it cannot be written, if it cannot (None for a closed pipe)."""
    try:
        sys.stdout.flush()
        return None
    except OSError as error:    # nothing more can go there: send what is buffered nowhere, quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return None if isinstance(error, BrokenPipeError) else error.strerror or str(error)


# %% [markdown]
# `main` builds the parser from the registry, with the environment
# variables of `ENVIRONMENT` listed under `lc --help` (`environment_help`,
# called only when the help is shown), then runs
# the sub-command. Everything that can go wrong becomes a message and an
# exit status: a `Diagnostic` — a mistake in the L program, or a runtime
# error — is shown with its place and its own status (1 or 2; 3 for
# chapter 5b's `IllTyped`, a mistake of the compiler found at a place); a
# `UsageError` or a failure of the system (a full disk, no C compiler) is
# `lc: error: …` with status 1, and so are an input nested too deeply for
# Python's recursion and memory run out; an interrupt is 130; and any other
# exception is a bug in `lc`, reported in one line as an internal compiler
# error with status 3, never as a traceback. Called with no arguments,
# `main` is the command `lc` itself, whose arguments are the process's and
# whose process is its own: `args.own_process` tells `lc run` that it may
# hand the process to the program (chapter 11's cache); called with a list,
# from Python (`lc(…)` below, a test), it must not. The command also turns
# Python's cycle collector off for good when all it does is compile: its
# process ends when the command does, and the collector's first look after
# compiling would walk every object the compiler made, for memory no one
# reuses ([appendix B](B_support.ipynb#the-garbage-collector-paused)
# measures that look). It leaves the collector on where Python goes on to
# run L: `lc repl`, and the interpreter of `--interp`, whose heap of
# bounded size (chapter 4b) counts on it.

# %%
#| export
def environment_help() -> str:
    """The end of lc --help: the variables of ENVIRONMENT, `{default}` in a text being the runtime's."""
    return "environment variables:\n" + "\n".join(
        textwrap.fill(text.replace("{default}", runtime_default(name)) if "{default}" in text else text,
                      79, initial_indent=f"  {name:15} ", subsequent_indent=" " * 18)
        for name, text in ENVIRONMENT.items())


def main(argv: list[str] | None = None) -> int:
    """Run lc; return its exit status (0 ok, 1 error in the input or the system, 2 failure at run
    time, 3 a bug in lc)."""
    parser = ArgumentParser(prog="lc", description="The L compiler of the book.",
                            epilog=environment_help if ENVIRONMENT else None,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help, arguments, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        for names, options in arguments:
            p.add_argument(*names, **options)
        p.set_defaults(run=run)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:          # --help, --version, or a mistake in the arguments
        return exit.code
    args.own_process = argv is None    # lc, the command: its process is its own (lc run replaces it)
    if args.own_process and args.command != "repl" and not getattr(args, "interp", False):
        gc.disable()                   # for good: the process ends when the command does (appendix B)
    from lcompiler.errors import POLICY, Diagnostic    # not before: lc --help needs none of the compiler
    POLICY.update(color=colour_wanted(getattr(args, "color", "auto")),
                  warnings_are_errors=getattr(args, "werror", False), sink=sys.stderr)
    try:
        status = args.run(args)
    except Diagnostic as error:
        flush_output()                 # what the program printed comes first
        print(error.render(), file=sys.stderr)
        return error.status
    except UsageError as error:
        print(f"lc: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:            # the reader of the output is gone (lc … | head): stop, quietly
        flush_output()
        return 1
    except OSError as error:           # the system, not the program or lc: a full disk, no C compiler
        flush_output()
        where = f"{error.filename}: " if error.filename else ""
        print(f"lc: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1
    except (RecursionError, MemoryError) as error:
        print("lc: error: " + ("the input is nested too deeply for this compiler"
                               if isinstance(error, RecursionError) else "out of memory"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug in lc, not in the input: say so, briefly
        print(f"lc: internal compiler error: {type(error).__name__}: {error}", file=sys.stderr)
        return 3
    finally:                           # lc may be called in a process that goes on (lcompiler.cli.lc)
        POLICY.update(color=False, warnings_are_errors=False, sink=None)
    if problem := flush_output():
        print(f"lc: error: cannot write the output: {problem}", file=sys.stderr)
        return 1
    return status



# %% [markdown]
# ## Reading a program
#
# `show`, `run` and `build` read an L file; `-` stands for standard input,
# as for most Unix tools, and the program is then called `<stdin>` in its
# messages. Reading a file that does not
# exist, or a directory, or one `lc` may not read, is a `UsageError` (exit
# status 1), not a traceback. A file that is not UTF-8 is a mistake in the
# program's text, so it is a `CompileError` at the first byte that cannot
# be decoded, with its line. `OPTIMISE` is the option `-O` of the commands
# that compile: `-O0` asks for the stages without the optimiser of
# [chapter 9](09_shrink.ipynb). Two more options shape the messages:
# `-Werror` (of `lc run` and `lc build`) makes the warnings of [chapter
# 5](05_types.ipynb#warnings-for-pattern-matching) errors, so that a
# program with a warning is not run or built and `lc` exits with status 1;
# `--color=always|never|auto` paints the messages ([appendix
# A](A_errors.ipynb#colour-on-a-terminal)), and `colour_wanted` decides
# what `auto` means: a terminal on standard error, and no `NO_COLOR`. `main`
# sets both in `POLICY` before it runs a command, with standard error as
# the place the warnings go, and puts them back after.

# %%
#| export
from pathlib import Path


def read_source(path: str):
    """The text of an L file (`-`: standard input, named `<stdin>`), a Source; a UsageError if it cannot
    be read, a CompileError if it is not UTF-8."""
    from lcompiler.errors import CompileError, Source, Span
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        path = "<stdin>" if path == "-" else path
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return Source(path, data.decode("utf-8"))
    except UnicodeDecodeError as error:        # located: the line is shown with the bad byte replaced
        source = Source(path, data.decode("utf-8", errors="replace"))
        at = len(data[:error.start].decode("utf-8", errors="replace"))
        raise CompileError(f"this file is not UTF-8: byte 0x{data[error.start]:02x} cannot appear here "
                           "(L source files are UTF-8)", Span(source, at, at + 1)) from None


OPTIMISE = arg("-O", dest="level", type=int, choices=(0, 1), default=1, metavar="LEVEL",
               help="-O0: without the optimiser of chapter 9 (-O1, the default: with it)")
COLOR = arg("--color", choices=("auto", "always", "never"), default="auto",
            help="colour the messages: always, never, or auto (the default: when standard error is a "
                 "terminal and NO_COLOR is not set)")
WERROR = arg("-Werror", dest="werror", action="store_true", help="make the warnings errors (exit status 1)")


def colour_wanted(choice: str) -> bool:
    """--color=always|never|auto: auto colours a terminal, unless NO_COLOR is set (no-color.org)."""
    if choice != "auto":
        return choice == "always"
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")


# %% [markdown]
# ## The commands
#
# ### lc add
#
# The first command, from [chapter 1](01_addlang.ipynb), compiles and runs
# an expression of additions. An expression with a variable in it has no
# value to print, so it is an error, at the variable.

# %%
#| export
@command("add", "compile an expression of additions to LLVM and run it (chapter 1)",
         arg("expression", help="for example '3 + (2 + 4)'"),
         arg("--llvm", action="store_true", help="print the LLVM module instead of running it"),
         arg("--interp", action="store_true", help="run the interpreter instead of native code"))
def add_command(args) -> int:
    from lcompiler import addlang
    from lcompiler.errors import CompileError
    e, spans = addlang.parse(args.expression)
    if unbound := addlang.free_variables(e):
        raise CompileError(f"unbound variable {unbound[0]}: lc add compiles closed expressions",
                           spans[unbound[0]])
    program = addlang.compile(e, lambda result: addlang.Llvm.Print(result, addlang.Llvm.Halt()))
    if args.llvm:
        print(addlang.llvm_module(program), end="")
        return 0
    if args.interp:
        output, _ = addlang.evaluate(program)
        print(output, end="")
        return 0
    run = addlang.jit_run(addlang.llvm_module(program))
    print(run.stdout, end="")
    if run.status != 0:
        print(f"lc: the compiled program failed with status {run.status}", file=sys.stderr)
        return 2
    return 0


# %% [markdown]
# ### lc show
#
# `lc show STAGE FILE` prints the output of one stage of [chapter
# 4](04_pipeline.ipynb)'s pipeline for a file: `lc show tokens small.l`,
# `lc show cps small.l`, `lc show asm small.l`. The pipeline knows its
# stages and how to print each; the command only checks the name, and
# suggests the nearest one (as chapter 4's `stage` does, with `difflib`)
# when it is misspelt.

# %%
#| export
@command("show", "print what one stage of the compiler hands to the next, for an L file",
         arg("stage", help="the stage: tokens, ast, core, types, mono, cps, opt, closure, shrink, llvm, "
                           "llvm-opt, asm"),
         arg("file", help="an L source file"), OPTIMISE, COLOR)
def show_command(args) -> int:
    from difflib import get_close_matches

    from lcompiler import pipeline
    if args.stage not in pipeline.names():
        near = get_close_matches(args.stage, pipeline.names(), n=1)
        raise UsageError(f"unknown stage {args.stage!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                         + f"; the stages are: {', '.join(pipeline.names())}")
    print(pipeline.show(args.stage, read_source(args.file), optimise=args.level > 0))
    return 0



# %% [markdown]
# ### lc run
#
# `lc run` grew with the book. In [chapter 4b](04b_meaning.ipynb) it ran the
# reference interpreter, the only way to run L then. From [chapter
# 5](05_types.ipynb) on it type-checked the program first, so that an
# ill-typed program is refused before anything runs. From [chapter
# 11](11_running.ipynb) on it compiles to native code, and `--interp` runs
# the reference interpreter instead — after the type checker, as in chapter
# 5. The package holds that last version only; the chapters tell the story,
# and show the command at work with `--interp`. The native path runs the
# program in this process (`cache.run`, which compiles it with
# `driver.compile_source` and loads the machine code as `driver.jit` does,
# but takes it from [chapter 11's cache of
# programs](11_running.ipynb#running-again-without-compiling-a-cache-of-programs)
# when the program was compiled before, unless `--no-cache`): its output
# and its runtime errors are written by the program itself, and a runtime
# error ends the process with status 2, which is `lc`'s.

# %%
#| export
@command("run", "compile an L program to native code and run it",
         arg("file", help="an L source file, or - for standard input"),
         arg("--interp", action="store_true", help="run it with the reference interpreter of chapter 4b instead"),
         OPTIMISE, WERROR, COLOR,
         arg("--no-cache", dest="cached", action="store_false",
             help="compile the program even if it was compiled and kept before, and keep nothing (chapter 11)"))
def run_command(args) -> int:
    source = read_source(args.file)
    if args.interp:
        from lcompiler import interp, types
        program, _ = types.check_types(source)
        if problem := setting_problem():          # as the compiled runtime checks them
            flush_output()
            print(problem, file=sys.stderr)
            return 2
        interp.Interpreter().run(program)
        return 0
    from lcompiler import cache
    return cache.run(source, optimiser=args.level > 0, cached=args.cached, replace=args.own_process)


SIZES = ("LC_STACK_SIZE", "LC_HEAP_LIMIT", "LC_NURSERY", "LC_GC_STRESS", "LC_GC_DUMP")
CHOICES = {"LC_BUFFER": ("line", "block"), "LC_GC_STATS": ("0", "1"), "LC_GC_TRACE": ("0", "1")}


def setting_problem() -> str | None:
    """What chapter 10b's check_settings says of the LC_ variables, for the interpreter."""
    from lcompiler import interp
    for name in SIZES:
        value = os.environ.get(name)
        if value and interp.env_size(name, 1) == 1 and interp.env_size(name, 2) == 2:
            return (f"error: the environment variable {name} is '{value}', not a size "
                    "(bytes, or a number followed by K, M or G, as in 256M)")
    for name, choices in CHOICES.items():
        value = os.environ.get(name)
        if value and value not in choices:
            return f"error: the environment variable {name} is '{value}', not {' or '.join(choices)}"
    return None


# %% [markdown]
# ### lc build
#
# `lc build FILE -o EXE` writes an executable ([chapter
# 11](11_running.ipynb)); without `-o`, it is written in the working
# directory and named after the source, as `cc` names its `a.out` but
# more usefully: `lc build src/hello.l` writes `hello`. What can be checked
# before compiling, which may take a while, is checked first: that the
# place asked for is not a directory, that its directory exists, and that
# the executable would not overwrite the source. With `-g` the executable carries debugging
# information for gdb ([chapter 10](10_llvm.ipynb), section "Debug
# information, for gdb"), made within `debug_information`; `-g -O0` turns
# LLVM's optimiser off as well as chapter 9's, for stepping that follows
# the source (without `-g`, `-O0` keeps its meaning, chapter 9's optimiser
# off).

# %%
#| export
@command("build", "compile an L program to a native executable",
         arg("file", help="an L source file"),
         arg("-o", dest="output", metavar="EXE",
             help="the executable to write (default: the source's name without .l, here)"),
         OPTIMISE, WERROR, COLOR,
         arg("-g", dest="debug", action="store_true",
             help="with debugging information for gdb (chapter 10); -g -O0 also turns LLVM's optimiser off, "
                  "for stepping that follows the source"))
def build_command(args) -> int:
    if args.output is None and args.file == "-":
        raise UsageError("lc build - needs -o EXE: standard input has no name to give the executable")
    source, output = read_source(args.file), Path(args.output or Path(args.file).stem)
    if output.is_dir():                 # checked before compiling, which may take a while
        raise UsageError(f"cannot write {output}: it is a directory")
    if not output.parent.is_dir():
        raise UsageError(f"cannot write {output}: there is no directory {output.parent}")
    if output.exists() and args.file != "-" and output.samefile(args.file):
        raise UsageError(f"cannot write {output}: it is the source file")
    from lcompiler import driver, llvm_backend
    if not args.debug:
        driver.build(source, output, optimiser=args.level > 0)
        return 0
    with llvm_backend.debug_information(optimised=args.level > 0):
        driver.build(source, output, level=2 if args.level > 0 else 0, optimiser=args.level > 0)
    return 0


# %% [markdown]
# ### lc repl, and the environment
#
# `lc --help` lists the environment variables of `lc` and the programs it
# compiles that a user sets most (chapter 10b has the others it reads, for
# the collector and for backtraces). The runtime's are chapter 10b's, with the defaults that
# the runtime's C is compiled with (chapter 10b's `DEFAULTS`, passed to the
# C compiler as macros: one place for both), so the help stays true when
# the runtime changes; a text says `{default}` where the runtime's default
# goes, and `environment_help` reads it from `lcompiler.defaults`, the
# small module chapter 10b keeps them in, when the help is shown. The heap's also depends on the machine, as chapter
# 10b explains, and the help says how.
# `lc repl` runs [chapter 11](11_running.ipynb)'s REPL: on a terminal,
# `driver.terminal_repl`, with the prompt, line editing and a history
# (`~/.lc_history`, or `$XDG_STATE_HOME/lc_history`); from a file or a
# pipe, `driver.repl`, without a prompt and without history — the way the
# tests drive it. On a terminal, Ctrl-C abandons the entry being typed or
# stops the one running, Ctrl-D on a continuation line abandons the entry,
# and Ctrl-D on an empty prompt ends the session (status 0).
#
# A variable of the environment that the runtime reads must be readable:
# `LC_STACK_SIZE=abc` used to be ignored, and the program ran with the
# default, which is not what its user asked for. The compiled runtime
# checks the settings before the program starts (chapter 10b's
# `check_settings`); `lc run --interp` checks the same variables the same
# way (`setting_problem`, with the interpreter's reading of a size: the
# sizes, `LC_BUFFER`, and the switches `LC_GC_STATS` and `LC_GC_TRACE`,
# which the interpreter accepts and ignores), so that both say the same
# thing with the same status, 2 (a test runs five bad settings both ways).

# %%
#| export
def runtime_default(variable: str) -> str:
    """The default the runtime of chapter 10b gives a variable, as K, M or G: 268435456 is 256M."""
    from lcompiler.defaults import DEFAULTS
    size = DEFAULTS[variable]
    unit = next(u for u, shift in (("G", 30), ("M", 20), ("K", 10), ("", 0)) if size % (1 << shift) == 0)
    return f"{size >> {'G': 30, 'M': 20, 'K': 10, '': 0}[unit]}{unit}"


ENVIRONMENT.update({
    "LC_HEAP_LIMIT": "the most memory a compiled program's heap may take; a program that needs more "
                     "stops with a runtime error (bytes, or with K, M or G; default "
                     "{default}, or a quarter of the machine's memory if that is less)",
    "LC_STACK_SIZE": "the stack of a compiled program, which bounds how deep its calls may nest "
                     "(default {default})",
    "LC_CACHE": "where lc keeps what it compiles: the runtime, and the programs lc run compiled, "
                "so that a program run again unchanged is not compiled again (default ~/.cache/lcompiler; "
                "lc run --no-cache keeps nothing)",
    "LC_BUFFER": "line: a compiled program writes its output at every line; block: in blocks of 64 KiB "
                 "(default: line on a terminal, block into a file or a pipe)",
    "CC": "the C compiler that compiles the runtime and links executables (default cc)",
})


@command("repl", "read L definitions and expressions, and run them one at a time", COLOR)
def repl_command(args) -> int:
    from lcompiler import driver
    if sys.stdin.isatty():
        print("L, compiled to native code one entry at a time. :help for help, Ctrl-D to end.")
        driver.terminal_repl()
    else:
        driver.repl(sys.stdin, driver.print_text, prompt=False)
    return 0



# %% [markdown]
# ### The commands, drawn
#
# With `repl` the registry is complete. Drawn from `COMMANDS` itself, the
# table that `main` hands to `argparse`: `lc` at the top, a box for each
# command below it, and under each command a column of its arguments, in
# the order the command declares them: green for what must be given (an
# expression, a stage, a file), yellow for an option that takes a value
# (written after it as `--help` writes it: the value's name, or its
# choices), grey for a switch. `argparse` adds `-h` to each command, which
# the registry does not declare.

# %%
from lcompiler.drawing import Box, Picture


def argument_box(names: tuple, options: dict) -> Box:
    """An argument of the registry as a box, labelled as lc CMD --help writes it in its usage line."""
    if not names[0].startswith("-"):
        return Box(options.get("metavar", names[0]), style="green")
    if options.get("action") in ("store_true", "store_false"):
        return Box(names[0])
    choices = options.get("choices")
    value = options.get("metavar") or ("{" + ",".join(map(str, choices)) + "}" if choices
                                       else options.get("dest", names[0].lstrip("-")).upper())
    return Box(f"{names[0]} {value}", style="yellow")


def column(boxes: list) -> list:
    """Boxes hung one under the other: the first, with the rest below it."""
    for upper, lower in zip(boxes, boxes[1:]):
        upper.children = [lower]
    return boxes[:1]


def commands_picture() -> Picture:
    commands = [Box(name, column([argument_box(*a) for a in arguments]), "blue")
                for name, (_, arguments, _) in COMMANDS.items()]
    alt = "; ".join(f"lc {name}: " + ", ".join(" ".join(names) for names, _ in arguments)
                    for name, (_, arguments, _) in COMMANDS.items())
    return Picture([("the commands of lc, and their arguments", [Box("lc", commands)])], edges="none",
                   alt=f"A tree: lc, its commands below it, and under each command its arguments. {alt}.")


commands_picture()

# %% [markdown]
# ## How fast lc answers
#
# `lc --help` should answer at once; it used to take several times as
# long as Python needs to start, because
# importing `lcompiler.cli` imported the whole compiler: the commands'
# modules were imported at the top of the module, and each imports the
# stages it runs, down to LLVM's binding. Now a command imports what it
# needs in its own body, when it runs: `lc --help` and `lc --version` load
# `argparse` and this module, and `lc --help` chapter 10b's `defaults` for
# the defaults it prints (which are not in chapter 10b's `runtime`, whose
# imports cost more than all the rest of `lc --help`); `lc run` on a program found in chapter 11's cache
# loads the runtime and LLVM's binding, and still no stage. Two more things
# cost time for nothing: `importlib.metadata`, to read the version of the
# installed package, which the constant `VERSION` replaces (a test checks
# that it is `pyproject.toml`'s), and the runtime's defaults in the help,
# now asked for only when the help is shown (`environment_help`). Which
# modules of the package `lc` imports, as Python's `-X importtime` lists
# them:

# %%
import subprocess

LC = str(Path(sys.executable).parent / "lc")     # the lc that pip installed with the package


def imported(*argv: str) -> list[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", LC, *argv], capture_output=True, text=True)
    modules = {line.split("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return sorted(m for m in modules if m.split(".")[0] in ("lcompiler", "llvmlite"))


for argv in (["--version"], ["--help"]):
    print(f"lc {' '.join(argv)}: {', '.join(imported(*argv))}")

# %% [markdown]
# Drawn, with `lc run` as well, on a program run twice: the first time it
# is compiled, the second time it is found in the cache. Here the modules
# are read from `sys.modules` when `lc` ends, or when `lc run` hands its
# process to the program, in a child process that runs
# the installed `lc`: that also counts the modules imported by name with
# `importlib.import_module`, as chapter 4's `pipeline.load` imports the
# stages, which `-X importtime` does not list. Each panel shows what its
# command imports beyond the panel on its left, whose modules it imports
# too; a module of the package is named without `lcompiler.`. Blue is a
# module that registers a stage of [chapter 4](04_pipeline.ipynb)'s
# pipeline, grey the others of the package (and `lcompiler` itself),
# yellow LLVM's binding, `llvmlite`, whose modules are counted in one box.
# Only the run that compiles has blue. The run from the cache loads two
# modules of llvmlite, the package and its version, which the name of an
# entry includes; not its binding, LLVM itself: it hands its process to
# the executable it kept ([chapter
# 11](11_running.ipynb#running-again-without-compiling-a-cache-of-programs)).

# %%
import json
import tempfile

from lcompiler import pipeline

MEASURE = """import atexit, json, os, runpy, sys
def report():
    print(json.dumps(sorted(sys.modules)), file=sys.stderr, flush=True)
def execve(*arguments, execve=os.execve):      # lc run hands its process to the program: report first
    atexit.unregister(report)
    report()
    execve(*arguments)
atexit.register(report)
os.supports_fd.add(execve)                     # as os.execve is: it takes a file descriptor
os.execve = execve
sys.argv = ARGV
runpy.run_path(sys.argv[0], run_name="__main__")"""


def modules_of(*argv: str, env: dict | None = None) -> set[str]:
    """The modules of lcompiler and llvmlite loaded when `lc ARGV` ends, in a child process."""
    done = subprocess.run([sys.executable, "-c", MEASURE.replace("ARGV", repr([LC, *argv]))],
                          capture_output=True, text=True, env=env)
    return {m for m in json.loads(done.stderr.splitlines()[-1]) if m.split(".")[0] in ("lcompiler", "llvmlite")}


def modules_picture(runs: list) -> Picture:
    """A panel per (command, modules): the modules it imports that the command before it does not."""
    stages, panels, before, words = {f"lcompiler.{m}" for _, m, _, _ in pipeline.PIPELINE}, [], set(), []
    for command, modules in runs:
        assert before <= modules, (command, before - modules)
        new, before = sorted(modules - before), modules
        llvm = [m for m in new if m.startswith("llvmlite")]
        boxes = [Box(m.removeprefix("lcompiler."), style="blue" if m in stages else "plain")
                 for m in new if m.startswith("lcompiler")]
        boxes += [Box(f"llvmlite: {len(llvm)} modules", style="yellow")] if llvm else []
        panels.append((command, [column(boxes[i:i + 6])[0] for i in range(0, len(boxes), 6)]))
        words.append(f"{command} adds {', '.join(b.label for b in boxes)}")
    return Picture(panels, edges="hidden",
                   alt="The modules each command of lc imports, beyond those of the command before it: "
                       + "; ".join(words) + ".")


with tempfile.TemporaryDirectory() as tmp:
    Path(tmp, "hello.l").write_text('print("hello")\n')
    env = {**os.environ, "LC_CACHE": str(Path(tmp, "cache"))}
    compiling = modules_of("run", str(Path(tmp, "hello.l")), env=env)
    cached = modules_of("run", str(Path(tmp, "hello.l")), env=env)
    runs = [("lc --version", modules_of("--version")), ("lc --help", modules_of("--help")),
            ("lc run, from the cache", cached), ("lc run, compiling", compiling)]
modules_picture(runs)

# %% [markdown]
# And how long `lc --help` and `lc --version` take on this machine, the
# median of twenty runs of each, in alternation, beside Python doing
# nothing (`python -c pass`), which is the floor: the time depends on the
# machine and its load, so the cell's output is not checked.

# %% tags=["nbval-ignore-output"]
import statistics
import time

times = {"python -c pass": [], "lc --version": [], "lc --help": []}
commands = {"python -c pass": [sys.executable, "-c", "pass"], "lc --version": [LC, "--version"],
            "lc --help": [LC, "--help"]}
for _ in range(20):
    for name, argv in commands.items():
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True)
        times[name].append(time.perf_counter() - start)
for name, seconds in times.items():
    print(f"{name:15} {statistics.median(seconds):.3f} s")

# %% [markdown]
# ## lc in a notebook
#
# In a notebook, the error messages `lc` writes to standard error and the
# output it writes to standard output travel to the page separately, and
# their order is not guaranteed. `lc(...)` runs the command in this
# process, with the arguments a shell would pass, but sends both to
# standard output, in the order they happen, and returns the exit status:
# the chapters use it to show the command at work. It cannot redirect what
# a compiled program writes itself, below Python, nor stop a runtime error
# from ending the process, the notebook's kernel: so a chapter runs a
# program that may fail with `lc run --interp`, as below, or in a child
# process.

# %%
#| export
import contextlib


def lc(*argv: str) -> int:
    """Run lc with these arguments, its error output merged into standard output (for notebooks)."""
    with contextlib.redirect_stderr(sys.stdout):
        return main(list(argv))



# %% [markdown]
# The command at work, in a temporary directory: an addition, an addition
# with a variable, a program run by the interpreter that fails at run time,
# a file that does not exist, and a command that does not:

# %%
import contextlib  # noqa: F811  (a cell's own imports)
import tempfile

with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("half.l").write_text('print("one")\nprint(1 / (1 - 1))\n')
    for argv in (["add", "3 + (2 + 4)"], ["add", "1 + x"], ["run", "--interp", "half.l"],
                 ["run", "missing.l"], ["frobnicate"]):
        print(f"$ lc {' '.join(argv)}")
        print(f"(exit status {lc(*argv)})\n")

# %% [markdown]
# Each mistake is said in the terms of the one who made it: the
# expression's variable and the program's division are located, with the
# line and a caret; the file that cannot be read and the command that does
# not exist are `lc`'s business with its user, and have no place in a
# program to point at. Each mistake ends `lc` with status 1, but the
# runtime error, with 2.
#
# The smaller conveniences, as a shell shows them: a program on standard
# input, and one with a mistake, which the message calls `<stdin>`; a stage
# misspelt; a size that cannot be read (compiled and interpreted); a C
# compiler that is not there; `lc build` without `-o`, which writes `hello`
# beside `hello.l` (the directory's listing, at the end); and a setting
# that has two values given a third:

# %%
import os  # noqa: F811  (a cell's own imports)
import subprocess

LC = str(Path(sys.executable).parent / "lc")
with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
    Path("hello.l").write_text('print("hello")\n')
    for argv, env, stdin in [(["run", "-"], {}, 'print("from standard input")\n'),
                             (["run", "-"], {}, "print(1 + true)\n"),
                             (["show", "tyeps", "hello.l"], {}, None),
                             (["run", "hello.l"], {"LC_STACK_SIZE": "abc"}, None),
                             (["run", "--interp", "hello.l"], {"LC_HEAP_LIMIT": "2X"}, None),
                             (["build", "hello.l"], {"CC": "no-such-cc"}, None),
                             (["build", "hello.l"], {}, None),
                             (["run", "hello.l"], {"LC_BUFFER": "never"}, None)]:
        done = subprocess.run([LC, *argv], input=stdin, capture_output=True, text=True, env={**os.environ, **env})
        shown = " ".join(f"{k}={v}" for k, v in env.items())
        print(f"$ {shown + ' ' if shown else ''}lc {' '.join(argv)}\n{done.stdout}{done.stderr}"
              f"(exit status {done.returncode})\n")
    print(sorted(os.listdir(".")))

# %% [markdown]
# And `lc --help`, as a shell shows it:

# %%
import subprocess
import sys

done = subprocess.run([str(Path(sys.executable).parent / "lc"), "--help"], capture_output=True, text=True)
print(done.stdout, end="")

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">Design note: one command line, written once, at the end</p>
#
# The first edition grew `lc` with the book: each chapter that had
# something to run added a command in a cell exported to `lcompiler.cli`,
# and a chapter that improved a command registered it again. The last
# registration won, so `lc` did the right thing; but the module held three
# functions for `lc run`, the dead two still in its `__all__`, and read as
# the history of the book rather than as a program. Here the command line is
# written once, as it ends up. The chapters lose little: a command is a few
# lines around calls of the chapters' own functions (`types.check_types`,
# `interp.Interpreter().run`, `cache.run`, `driver.build`), and the chapters
# show those functions and the command at work; what they no longer carry is the
# registry, the parser of arguments and the sorting of failures, which are
# about the command line, not about their stage. `tests/test_cli.py` checks
# that every command is registered once and that every command function of
# the module is one `lc` runs.
#
# </div>
#
# ## What the tests check
#
# - `tests/test_errors.py` runs `lc` as a user would, on the mistakes of a
#   user and of the machine: an executable that cannot be written, inputs
#   that cannot be read, no C compiler, an output that cannot be written, a
#   bad option; each gets a clear message and exit status 1, never a
#   traceback, never 3. A reader of the output that goes away (`lc run p.l
#   | head -1`) is no one's mistake: `lc` stops, or carries on, quietly. It
#   checks `--version`, `--help` with its environment variables, and the
#   golden messages through `lc`.
# - `tests/test_corpus.py` runs `lc run` and `lc show` on the corpus, with
#   exit statuses 0, 1 and 2 where the programs say; `tests/test_native.py`
#   checks `lc run` against `lc run --interp`, the executable of `lc build`
#   against `lc run`, `lc show`'s LLVM before and after LLVM's optimiser,
#   and `lc repl` on its standard input;
#   `tests/test_addlang.py` runs `lc add`, natively and interpreted, and on
#   mistakes — an unbound variable, reported at its place; an expression
#   nested five thousand parentheses deep — which must be errors with status
#   1, never tracebacks.
# - `tests/test_cli.py` checks the registry: each command once, and no
#   function of the module that no command runs; that `lc --help` and `lc
#   --version` import no stage of the compiler (the modules a child process
#   imports, each reported by a finder put first on `sys.meta_path`, which
#   also sees the modules imported by name), that `VERSION` is
#   `pyproject.toml`'s; the smaller conveniences shown above (standard
#   input, `lc build` without `-o`, five settings that cannot be read, both
#   ways, a C compiler that is not there, a misspelt stage); and chapter
#   11's cache of programs through `lc run`.
# - `tests/test_drawing.py` reads this appendix's two pictures back from the
#   stored notebook: the commands and their arguments must be those that
#   `lc COMMAND --help` writes in its usage line, and the modules those that
#   a child process running `lc` has loaded, measured again.
#
# ## Exercises
#
# 1. Add `lc check FILE`, which type-checks a program and prints nothing
#    when it is well typed. What does it return for an ill-typed program,
#    and which test of `tests/test_errors.py` would you copy for it?
# 2. `lc show` takes one stage. Let it take several, `lc show core,cps
#    FILE`, printing each under a heading. Where does the check of the names
#    go?
# 3. `main` turns a `RecursionError` into "nested too deeply". Which input
#    of `lc add` gets that message, and why is it not a located error, as the
#    same mistake is in L?
#
# <details><summary>Solutions</summary>
#
# 1. A registration and a function of three lines: `@command("check",
#    "type-check an L program", arg("file", help="an L source file"))` on a
#    `check_command(args)` that imports `types`, calls
#    `types.check_types(read_source(args.file))` and returns 0. An
#    ill-typed program raises a `CompileError`, which `main` renders with
#    status 1, as for `lc run`; `test_lc_writes_the_golden_messages_and_exits_with_status_1`
#    is the test to extend: add `["check"]` to the commands it tries
#    (`tests/test_solutions.py` runs this command).
# 2. Split the argument on commas, check every name against
#    `pipeline.names()` before running anything (one `UsageError` that names
#    every unknown stage), then print `pipeline.show(name, source)` for each,
#    under `== name ==`. Each `show` compiles from the start; to compile once,
#    walk `pipeline.stages_of(source, upto=...)`, up to the last of the
#    stages asked for, and print those as they come, each with its `stage.show(value, unit)` (before the next
#    stage runs, since a later stage may change the graph of an earlier one
#    in place; `tests/test_solutions.py` checks that both ways print the
#    same).
# 3. An expression nested deeper than Python's recursion limit, such as a
#    thousand parentheses: chapter 1's parser is recursive and does not
#    raise the limit. L's parser (chapter 4a) catches the `RecursionError`
#    itself, at the token it had reached, and makes it a located
#    `CompileError`; chapter 1's parser could do the same in `parse`, and
#    then `main`'s message would be left for a bug, a recursion in `lc`
#    that should not happen.
#
# </details>
