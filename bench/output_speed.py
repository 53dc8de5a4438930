"""Does the runtime of issue 27 (output flushed on every exit path, line-buffered on a terminal, a
signal handler) slow down programs that print a lot into a pipe? Each program is linked twice: with
the runtime as it is, and with the runtime of BEFORE, the commit before issue 27 (its C files read
from git); a third column runs the new one with LC_BUFFER=line, as in the REPL and %%L.

    python bench/output_speed.py [--json bench/output_speed.json] [--repeat 9]

The executables run in alternation (old, new, new line-buffered, old, ...), their output into a pipe
read by `wc -c`; times are user + system CPU seconds of the program. The ratio new/old is the
median of the ratios of each new run to the old run beside it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from lcompiler import driver, runtime
from lcompiler.errors import Source

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe, lines  # noqa: E402

BEFORE = "32e7a33"          # main before issue 27: the runtime with the 64 KiB buffer only
ROOT = Path(__file__).resolve().parent.parent

PROGRAMS = {
    "ints": "def n = 10000000\n"
            "def loop(i) = if (i == n) () else { print(i); loop(i + 1) }\nloop(0)\n",
    "strings": "def n = 10000000\n"
               "def loop(i) = if (i == n) () else { print(\"a line of text\"); loop(i + 1) }\nloop(0)\n",
    "tuples": "def n = 3000000\n"
              "def loop(i) = if (i == n) () else { print((i, \"x\", i * 2)); loop(i + 1) }\nloop(0)\n",
}


def old_runtime(folder: Path) -> Path:
    """The runtime object of BEFORE, compiled as runtime_library compiles it."""
    src = folder / "old"
    src.mkdir()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{BEFORE}:lcompiler/runtime"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        (src / name).write_bytes(subprocess.run(["git", "show", f"{BEFORE}:lcompiler/runtime/{name}"], cwd=ROOT,
                                                capture_output=True, check=True).stdout)
    c_files = [str(src / n) for n in names if n.endswith(".c")]
    subprocess.run([runtime.c_compiler(), *runtime.CFLAGS, *runtime.defines(), "-c", *c_files], cwd=src, check=True)
    subprocess.run([runtime.c_compiler(), "-r", *[c.replace(".c", ".o") for c in c_files], "-o", "lcrt.o"],
                   cwd=src, check=True)
    return src / "lcrt.o"


def link(objects: list, rt: Path, exe: Path) -> Path:
    files = []
    for i, code in enumerate(objects):
        files.append(exe.with_name(f"{exe.name}.{i}.o"))
        files[-1].write_bytes(code)
    subprocess.run([runtime.c_compiler(), *map(str, files), str(rt), "-o", str(exe), "-lpthread"], check=True)
    return exe


def cpu_seconds(exe: Path, env: dict) -> tuple[float, int]:
    """The CPU seconds of one run, its output read by `wc -c` at the end of a pipe; and its size."""
    child = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, env={**os.environ, **env})
    size = subprocess.run(["wc", "-c"], stdin=child.stdout, capture_output=True, text=True, check=True).stdout
    child.stdout.close()
    _, status, usage = os.wait4(child.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_utime + usage.ru_stime, int(size)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=str(Path(__file__).with_name("output_speed.json")))
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    record = {"machine": describe(), "before": BEFORE, "repeat": args.repeat, "programs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        old = old_runtime(Path(tmp))
        new = runtime.runtime_library("object")
        for name, text in PROGRAMS.items():
            objects = driver.compile_source(Source(f"{name}.l", text), executable=True)
            runs = {"old": (link(objects, old, Path(tmp, f"{name}-old")), {}),
                    "new": (link(objects, new, Path(tmp, f"{name}-new")), {}),
                    "new, line-buffered": (link(objects, new, Path(tmp, f"{name}-line")), {"LC_BUFFER": "line"})}
            times, sizes = {k: [] for k in runs}, set()
            for _ in range(args.repeat):
                for kind, (exe, env) in runs.items():
                    seconds, size = cpu_seconds(exe, env)
                    times[kind].append(seconds)
                    sizes.add(size)
            assert len(sizes) == 1, f"{name}: the runtimes printed different outputs"
            record["programs"][name] = {
                "bytes": sizes.pop(), "seconds": {k: statistics.median(v) for k, v in times.items()},
                "new/old": statistics.median(n / o for n, o in zip(times["new"], times["old"])),
                "line/old": statistics.median(n / o for n, o in zip(times["new, line-buffered"], times["old"]))}
    Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    print("\n".join(lines(record["machine"])))
    print(table(record))


def table(record: dict) -> str:
    rows = [f"{'program':10} {'output':>10} {'old s':>7} {'new s':>7} {'new/old':>8} {'line s':>7} {'line/old':>9}"]
    for name, r in record["programs"].items():
        s = r["seconds"]
        rows.append(f"{name:10} {r['bytes'] / 1e6:>8.1f}MB {s['old']:>7.3f} {s['new']:>7.3f} {r['new/old']:>8.3f} "
                    f"{s['new, line-buffered']:>7.3f} {r['line/old']:>9.2f}")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
