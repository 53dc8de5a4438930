"""The literate workflow: the package is what the notebooks generate, pairs agree, the site builds."""

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import literate  # noqa: E402


@pytest.mark.slow
def test_the_package_is_exactly_what_the_notebooks_generate():
    assert literate.stale_modules() == []


@pytest.mark.slow
def test_every_notebook_agrees_with_its_text_twin():
    assert literate.unpaired_notebooks() == []


def test_every_generated_module_names_its_notebook():
    for path in (ROOT / "lcompiler").glob("*.py"):
        first = path.read_text().splitlines()[0]
        assert first.startswith(literate.MARK), f"{path.name} was not generated"
        if path.name != "__init__.py":
            assert "notebooks/" in first and ".ipynb" in first


def test_every_notebook_is_a_chapter_of_the_site():
    class Loader(yaml.SafeLoader):
        """mkdocs.yml's one Python tag (it sets NO_MKDOCS_2_WARNING) is read as None."""
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    nav = json.dumps(yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)["nav"])
    for notebook in literate.notebook_paths():
        assert f"notebooks/{notebook.name}" in nav, f"{notebook.name} is missing from mkdocs.yml's nav"


def test_notebooks_store_outputs_and_no_execution_timings():
    for path in literate.notebook_paths():
        cells = json.loads(path.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert any(c["outputs"] for c in code), f"{path.name} has no stored outputs"
        assert all(c.get("execution_count") is not None for c in code if c["outputs"]), \
            f"{path.name} was not executed top to bottom"
        assert not any("execution" in c["metadata"] for c in code), f"{path.name} records timings"


@pytest.fixture
def copy_of_the_book(tmp_path, monkeypatch):
    """The notebooks and the package, copied where the checks can be fooled safely."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    monkeypatch.setattr(literate, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr(literate, "PACKAGE", tmp_path / "lcompiler")
    literate.export()
    assert literate.stale_modules() == [] and literate.unpaired_notebooks() == []
    return tmp_path


@pytest.mark.slow
def test_a_hand_edit_of_the_package_is_detected(copy_of_the_book):
    module = copy_of_the_book / "lcompiler" / "union_find.py"
    module.write_text(module.read_text().replace("p1.rank += 1", "p1.rank += 2"))
    assert literate.stale_modules() == ["%s differs from what its notebook generates" % module]


@pytest.mark.slow
def test_a_module_written_by_hand_is_detected(copy_of_the_book):
    (copy_of_the_book / "lcompiler" / "extra.py").write_text("x = 1\n")
    assert any("extra.py is not generated" in p for p in literate.stale_modules())


@pytest.mark.slow
def test_an_edit_of_one_side_of_a_pair_is_detected(copy_of_the_book):
    twin = copy_of_the_book / "notebooks" / "02_union_find.py"
    twin.write_text(twin.read_text().replace("p1.rank += 1", "p1.rank += 2"))
    (problem,) = literate.unpaired_notebooks()
    assert "02_union_find.ipynb and 02_union_find.py differ from cell" in problem


def test_an_export_directive_moves_code_and_nothing_else():
    directives, code = literate.split_directives("#| export cli\n#| hide\nx = 1\n# a comment\n")
    assert directives == [("export", "cli"), ("hide", "")] and code == "x = 1\n# a comment"
    assert literate.public_names("def f(): pass\n_g = 1\nclass C: pass\nh: int = 2") == ["f", "C", "h"]


def test_the_site_builds_strictly(built_site):
    chapter = (built_site / "notebooks" / "01_addlang" / "index.html").read_text()
    assert "Result(stdout=" in chapter, "the chapter page shows the notebook's stored outputs"
    assert "highlight-ipynb" in chapter, "code cells are highlighted"
    assert not (built_site / "notebooks" / "01_addlang.py").exists(), "twins are not pages"


def test_no_heading_has_inline_code():
    # mkdocs-jupyter drops inline code from the table of contents: "`lc run` and …" shows as " and …"
    for notebook in literate.notebook_paths():
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                for line in "".join(cell["source"]).splitlines():
                    assert not (line.startswith("#") and "`" in line), f"{notebook.name}: {line}"


# --- The exporter's own rules, on small notebooks made for the purpose --------------------------

def write_notebook(folder: Path, name: str, cells: list[tuple[str, str]]) -> Path:
    """A notebook of (kind, source) cells: kind 'md' or 'code'."""
    import nbformat
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) if k == "md" else nbformat.v4.new_code_cell(s)
                for k, s in cells]
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def small_book(tmp_path, monkeypatch):
    monkeypatch.setattr(literate, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr(literate, "PACKAGE", tmp_path / "pkg")
    return tmp_path


def test_a_class_grown_over_cells_becomes_one_class_body(small_book):
    write_notebook(small_book / "notebooks", "01_demo", [
        ("md", "# Chapter 1. Demo\n\nA first paragraph.\n\n## What this chapter promises\n\n"
               "- `A` counts.\n\n## The class"),
        ("code", "#| default_exp demo"),
        ("code", "#| export\nclass A:\n    \"\"\"A counter.\"\"\"\n    def f(self):\n        return 1"),
        ("md", "## More"),
        ("code", "#| export\nclass A(A):\n    \"\"\"It learns g.\"\"\"\n\n    def g(self):\n"
                 "        return self.f() + 1\n\nB = A().g()"),
    ])
    literate.export()
    text = (small_book / "pkg" / "demo.py").read_text()
    assert text.count("class A") == 1
    assert "    # cell 5: More\n    # It learns g." in text and "# cell 3" in text
    assert "What this chapter promises:\n\n- `A` counts." in text
    namespace = {}
    exec(compile(text, "demo.py", "exec"), namespace)
    assert namespace["B"] == 2 and len(namespace["A"].__mro__) == 2
    assert namespace["__all__"] == ["A", "B"]


def test_a_module_an_appendix_fills_gets_its_docstring_and_the_appendix_promises(small_book):
    write_notebook(small_book / "notebooks", "A_demo", [
        ("md", "# Appendix A. Demo\n\nA first paragraph.\n\n## What this appendix promises\n\n"
               "- `x` is one.\n\n## The code"),
        ("code", "#| default_exp first"),
        ("code", "#| export\nx = 1"),
        ("code", "#| export second\n\"\"\"The second module.\"\"\"\n\ny = 2"),
    ])
    literate.export()
    first, second = ((small_book / "pkg" / f"{m}.py").read_text() for m in ("first", "second"))
    assert '"""Appendix A. Demo\n\nA first paragraph.\n\nWhat this appendix promises:\n\n- `x` is one.' in first
    assert '"""The second module.\n\nWhat this appendix promises:\n\n- `x` is one.' in second
    assert "A_demo.ipynb" in second.splitlines()[0]


def test_a_replaced_definition_leaves_the_module_and_a_wrong_name_is_an_error(small_book):
    cells = [("code", "#| default_exp demo"),
             ("code", "#| export\n@staticmethod\ndef run():\n    return 'first'"),
             ("code", "#| export\n#| replaces run\ndef run():\n    return 'second'")]
    write_notebook(small_book / "notebooks", "01_demo", cells)
    literate.export()
    text = (small_book / "pkg" / "demo.py").read_text()
    assert "'first'" not in text and "staticmethod" not in text and "'second'" in text
    cells[2] = ("code", "#| export\n#| replaces runn\ndef run():\n    return 'second'")
    write_notebook(small_book / "notebooks", "01_demo", cells)
    with pytest.raises(literate.ExportError, match=r"01_demo.ipynb, cell 3: '#\| replaces runn'"):
        literate.export()


def test_a_syntax_error_is_reported_with_its_notebook_and_cell(small_book):
    write_notebook(small_book / "notebooks", "01_demo", [
        ("code", "#| default_exp demo"), ("md", "## Code"), ("code", "#| export\nx = 1\ny = (2\n")])
    with pytest.raises(literate.ExportError, match=r"01_demo.ipynb, cell 3, line 2: syntax error"):
        literate.export()


def test_c_cells_become_a_c_file_of_the_package(small_book):
    write_notebook(small_book / "notebooks", "01_demo", [
        ("code", "#| default_exp demo"), ("md", "## The runtime"),
        ("code", "%%c runtime/lc.c\n#include <stdint.h>\nint64_t one(void) { return 1; }"),
        ("code", "%%c runtime/lc.c\nint64_t two(void) { return one() + one(); }")])
    literate.export()
    text = (small_book / "pkg" / "runtime" / "lc.c").read_text()
    assert text.startswith(literate.C_MARK) and text.index("one(void)") < text.index("two(void)")
    assert "/* cell 3 */" in text and "/* --- The runtime" in text
    (small_book / "pkg" / "runtime" / "lc.c").write_text(text + "\n")
    assert literate.stale_modules() == [f"{small_book}/pkg/runtime/lc.c differs from what its notebook generates"]
