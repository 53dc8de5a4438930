"""The machine a measurement was taken on, recorded in every JSON file that bench/ writes.

    from machine import describe, lines       # (bench/ is on sys.path when a script of bench/ runs)
    record["machine"] = describe()
    print("\\n".join(lines(record["machine"])))

    python bench/machine.py                   # print this machine's description

describe() reads the CPU model and the cache sizes (from /sys/devices/system/cpu/cpu0/cache,
else from lscpu), the core count, the operating system and kernel, the load average, the
niceness, the date and time of the reading (with the offset from UTC), and the versions of the
compilers the benchmarks compare
(gcc, clang, ocamlopt, Chez Scheme, CPython, and the LLVM that llvmlite bundles). A tool that is
not installed is recorded as missing, not guessed. Every script of bench/ calls it, so that a
chapter that prints a figure can also print where it was measured; each calls it as it starts,
before its first measurement, so that the load average is the one the measurement started under.
"""
import datetime
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def caches() -> dict[str, str]:
    """{'L1d': '32K', 'L1i': '32K', 'L2': '512K', 'L3': '32768K'}: the caches of one core (cpu0)."""
    found = {}
    for index in sorted(CACHE.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        found[name] = size
    if found:
        return found
    if shutil.which("lscpu"):                    # the whole machine's caches, summed over instances
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip().endswith("cache"):
                found[key.strip().split()[0]] = value.strip()
    return found


def os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def first_line(command: list[str]) -> str:
    """The first line a tool prints about its version, or 'missing'."""
    if shutil.which(command[0]) is None:
        return "missing"
    done = subprocess.run(command, capture_output=True, text=True)
    text = (done.stdout + done.stderr).strip()
    return text.splitlines()[0] if text else "?"


def compilers() -> dict[str, str]:
    versions = {
        "gcc": first_line(["gcc", "--version"]),
        "clang": first_line(["clang", "--version"]),
        "ocamlopt": "ocamlopt " + first_line(["ocamlopt", "-version"]),
        "chez": "Chez Scheme " + first_line(["scheme", "--version"]),
        "python": f"CPython {platform.python_version()}",
    }
    try:
        from llvmlite import binding
        versions["llvm"] = "LLVM " + ".".join(map(str, binding.llvm_version_info)) + " (llvmlite)"
    except ImportError:
        versions["llvm"] = "missing"
    return versions


def describe() -> dict:
    """The machine, now: a JSON-able dict."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    try:
        cpus = sorted(os.sched_getaffinity(0))          # the cores this process may run on (taskset)
    except AttributeError:                              # not Linux
        cpus = None
    return {"cpu": cpu_model(), "caches": caches(), "cores": os.cpu_count(), "cpus": cpus, "os": os_name(),
            "kernel": platform.release(), "system": platform.platform(), "load": load, "nice": os.nice(0),
            "compilers": compilers(), "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def lines(machine: dict) -> list[str]:
    """The machine in three or four lines, to print above a table."""
    if not machine:
        return ["machine: not recorded"]
    cache = ", ".join(f"{k} {v}" for k, v in machine.get("caches", {}).items()) or "caches unknown"
    cpus = machine.get("cpus")
    pinned = f" (run on cpu {', '.join(map(str, cpus))})" if cpus and len(cpus) < machine.get("cores", 0) else ""
    out = [f"machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores{pinned}; caches of cpu0: {cache}",
           f"system: {machine.get('os', '?')}, kernel {machine.get('kernel', '?')}; "
           f"niceness {machine.get('nice')}; load average {machine.get('load')} at {machine.get('date', '?')}"]
    tools = machine.get("compilers", {})
    if tools:
        out.append("compilers: " + "; ".join(f"{v}" for v in tools.values() if not v.endswith("missing")))
    return out


if __name__ == "__main__":
    print("\n".join(lines(describe())))
    sys.exit(0)
