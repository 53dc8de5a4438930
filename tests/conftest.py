"""Fixtures shared by the test modules."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The book's site, built once with `mkdocs build --strict` for every test that reads it."""
    site = tmp_path_factory.mktemp("site")
    environment = {k: v for k, v in os.environ.items() if k != "NO_MKDOCS_2_WARNING"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, env=environment)
    assert done.returncode == 0, done.stderr
    assert "end of life" not in done.stderr, "mkdocs.yml sets NO_MKDOCS_2_WARNING for every build"
    return site
