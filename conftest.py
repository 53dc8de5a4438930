"""Shared test settings.

The notebooks' kernels inherit this environment: a fixed hash seed keeps any
set or dict ordering that depends on string hashes the same in every run.

Two loops: `pytest` runs everything (the README's test command: every test,
every notebook under nbval, the site); `pytest -m "not slow"` is the quick loop
for a reader changing one chapter, about a minute. A test is slow when it is
marked so in its file (the property-based runs, the corpus run every way, the
benchmarks), and, here, every notebook and every test that needs the built site.

A shell that starts the tests in the background without job control (`pytest &` in a
script) makes them ignore SIGINT, and every program they start inherits that: an L
program then ignores Ctrl-C, as a background job should (chapter 10b), and the tests of
Ctrl-C would wait for ever. The tests run as from a terminal: SIGINT is restored here.
"""
import os
import signal

import pytest

os.environ["PYTHONHASHSEED"] = "0"
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb" or "built_site" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
