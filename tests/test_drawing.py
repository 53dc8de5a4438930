"""lcompiler.drawing (appendix A): the layout of trees, and what a picture says; and the pictures the
chapters store that claim facts about the compiler (chapters 4, 5, 5b, 7 and 10, appendices A, B and C), read
back from the notebooks and checked against what they claim."""

import ast
import json
import re
from pathlib import Path
from xml.etree import ElementTree

from hypothesis import given, settings, strategies as st

from lcompiler.drawing import BOX_H, Box, Picture, _layout, _width

labels = st.text(alphabet="abcdefgh %=⊕<>&\"", min_size=1, max_size=12)
trees = st.recursive(st.builds(Box, labels),
                     lambda children: st.builds(Box, labels, st.lists(children, min_size=1, max_size=4)),
                     max_leaves=25)


def boxes(root: Box) -> list[Box]:
    out, stack = [], [root]
    while stack:
        box = stack.pop()
        out.append(box)
        stack += box.children
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(trees, min_size=1, max_size=3))
def test_boxes_on_one_level_never_overlap_and_parents_sit_over_their_children(roots):
    places, x = {}, 0
    for root in roots:
        x += _layout(root, x, 0, places) + 10
    every = [b for r in roots for b in boxes(r)]
    for depth in {places[id(b)][1] for b in every}:
        level = sorted((places[id(b)][0] - _width(b) / 2, places[id(b)][0] + _width(b) / 2)
                       for b in every if places[id(b)][1] == depth)
        assert all(right <= next_left + 1e-9 for (_, right), (next_left, _) in zip(level, level[1:]))
    for b in every:
        if b.children:
            xs = [places[id(c)][0] for c in b.children]
            assert abs(places[id(b)][0] - (xs[0] + xs[-1]) / 2) < 1e-9
            assert all(places[id(c)][1] == places[id(b)][1] + 1 for c in b.children)


@settings(max_examples=30, deadline=None)
@given(trees, labels)
def test_a_picture_is_well_formed_svg_that_holds_every_label_and_its_description(root, alt):
    svg = Picture([("caption", [root])], alt=alt).svg()
    document = ElementTree.fromstring(svg)                      # escapes < > & " in labels
    texts = [t.text for t in document.iter("{http://www.w3.org/2000/svg}text")]
    assert sorted(texts) == sorted(["caption"] + [b.label for b in boxes(root)])
    assert document.find("{http://www.w3.org/2000/svg}title").text == alt
    assert len(list(document.iter("{http://www.w3.org/2000/svg}rect"))) == len(boxes(root)) + 1  # + background


def test_the_picture_is_shown_with_its_description():
    picture = Picture([("", [Box("a", [Box("b", edge="x")])])], alt="a above b", edges="up")
    data, metadata = picture._repr_mimebundle_()
    assert data["text/plain"] == "a above b" and metadata == {"alt": "a above b"}
    assert data["image/svg+xml"] == picture.svg()
    heights = [float(h) for h in re.findall(r'<rect x="[^"]*" y="([^"]*)"', picture.svg())]
    assert heights == [10, 10 + 46] and BOX_H < 46


def test_arrows_between_named_boxes_widen_the_picture():
    left = Box("join point j", [Box("jump j", name="jump")], name="j")
    plain = Picture([("", [left])], alt="").svg()
    arrowed = Picture([("", [left])], alt="", arrows=[("jump", "j")]).svg()
    width = lambda svg: float(re.search(r'width="([0-9.]+)"', svg).group(1))
    assert width(arrowed) > width(plain) and 'stroke-dasharray="5,3"' in arrowed


def edge_labels_and_boxes(svg: str) -> tuple[list, list]:
    """The rectangles an SVG's edge labels (purple text) and boxes cover, measured as _draw measures them."""
    from lcompiler.drawing import CHAR_W
    labels, boxes_ = [], []
    for tag in ElementTree.fromstring(svg).iter():
        if tag.tag.endswith("}text") and tag.get("fill") == "#7c3aed":
            x, y, w = float(tag.get("x")), float(tag.get("y")), len(tag.text) * CHAR_W
            left = x - w if tag.get("text-anchor") == "end" else x
            labels.append((left, y - 10, left + w, y + 2, tag.text))
        elif tag.tag.endswith("}rect") and tag.get("rx") == "5":
            x, y = float(tag.get("x")), float(tag.get("y"))
            boxes_.append((x, y, x + float(tag.get("width")), y + float(tag.get("height")), "box"))
    return labels, boxes_


def crossings(svg: str) -> list[str]:
    """The edge labels that cover a box or another edge label."""
    from lcompiler.drawing import _overlap
    labels, boxes_ = edge_labels_and_boxes(svg)
    return [f"{a[4]!r} on {b[4]!r}" for i, a in enumerate(labels) for b in labels[i + 1:] + boxes_ if _overlap(a, b)]


def test_the_labels_of_two_edges_under_a_narrow_parent_do_not_run_into_each_other():
    tree = Box("m", [Box("a", edge="patterns"), Box("b", edge="body")])
    svg = Picture([("", [tree])], alt="").svg()
    assert len(edge_labels_and_boxes(svg)[0]) == 2 and crossings(svg) == []
    crowded = Box("m", [Box("a", edge="patterns"), Box("b", edge="body"), Box("c", edge="receiver")])
    assert crossings(Picture([("", [crowded])], alt="").svg()), "three long labels over 35 px: no room left"
    assert svg.count('text-anchor="end"') == 1, "the left child's label is left of its edge"
    chain = Picture([("", [Box("a", [Box("b", edge="x")])])], alt="").svg()
    assert 'text-anchor="end"' not in chain, "on a chain a label is right of the edge"


def test_no_edge_label_in_the_book_covers_a_box_or_another_label():
    found = {}
    for notebook in sorted(Path(__file__).resolve().parent.parent.glob("notebooks/*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            for output in cell.get("outputs", []):
                svg = "".join(output.get("data", {}).get("image/svg+xml", ""))
                if 'fill="#7c3aed"' in svg and crossings(svg):
                    found.setdefault(notebook.name, []).extend(crossings(svg))
    assert found == {}


# --- The pictures the chapters store, read back and checked against what they claim --------

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SVG = "{http://www.w3.org/2000/svg}"


def stored_picture(notebook: str, call: str) -> tuple[str, ElementTree.Element]:
    """The source of the code cell of notebook that ends with call, and the SVG it stored."""
    cells = json.loads((NOTEBOOKS / notebook).read_text())["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and "".join(cell["source"]).rstrip().endswith(call):
            svgs = ["".join(o["data"]["image/svg+xml"]) for o in cell["outputs"] if "image/svg+xml" in o.get("data", {})]
            assert len(svgs) == 1, f"{notebook}: the cell {call} stored {len(svgs)} pictures"
            sources = "".join("".join(c["source"]) for c in cells[:i] if c["cell_type"] == "code")
            return sources, ElementTree.fromstring(svgs[0])
    raise AssertionError(f"{notebook}: no cell ends with {call}")


def test_the_components_picture_of_chapter_5_draws_the_program_its_uses_and_the_order_of_inference():
    from lcompiler import types
    from lcompiler.errors import Source
    from lcompiler.interp import check

    sources, svg = stored_picture("05_types.ipynb", "components_picture(LEVELLED)")
    text = re.search(r'LEVELLED = """\\\n(.*?)"""', sources, re.S).group(1)
    # the oracle: the program's text, read with regular expressions, not with the compiler
    heads = list(re.finditer(r"^def (\w+)(\([^)]*\))? =", text, re.M))
    defs = [h.group(1) for h in heads]
    uses = set()
    for h, after in zip(heads, heads[1:] + [None]):
        body = text[h.end():after.start() if after else len(text)]
        params = set(re.findall(r"\w+", h.group(2) or ""))
        uses |= {(h.group(1), w) for w in re.findall(r"[A-Za-z_]\w*", body) if w in defs and w not in params}
    reach = {(u, v) for u, v in uses} | {(d, d) for d in defs}
    for _ in defs:
        reach |= {(u, w) for u, v in reach for v2, w in reach if v == v2}

    boxes = {r.get("data-name"): r for r in svg.iter(SVG + "rect") if r.get("class") == "definition"}
    arrows = [(p.get("data-from"), p.get("data-to"), p.get("d")) for p in svg.iter(SVG + "path")
              if p.get("class") == "uses"]
    frames = sorted((int(r.get("data-order")), r.get("data-members").split(), r.get("data-after").split(), r)
                    for r in svg.iter(SVG + "rect") if r.get("class") == "component")
    assert sorted(boxes) == sorted(defs), "every definition is a box, and only they"
    assert sorted((u, v) for u, v, _ in arrows) == sorted(uses), "every use is an arrow, every arrow a use"
    assert [order for order, *_ in frames] == list(range(1, len(frames) + 1))
    assert sorted(n for _, members, *_ in frames for n in members) == sorted(defs)
    order = {n: o for o, members, *_ in frames for n in members}
    for u in defs:
        for v in defs:
            assert (order[u] == order[v]) == ((u, v) in reach and (v, u) in reach), "a frame is a component"
    for u, v, d in arrows:
        assert order[v] <= order[u], "a definition is inferred after what it uses"
        if order[v] < order[u]:
            (x1, y1), (x2, y2) = [tuple(map(float, xy.split(","))) for xy in re.findall(r"[\d.]+,[\d.]+", d)]
            assert y2 < y1, "an arrow to an earlier component points up"
    for _, members, _, frame in frames:
        for n in members:
            box = boxes[n]
            assert float(frame.get("x")) < float(box.get("x")) < float(frame.get("x")) + float(frame.get("width"))
            assert float(frame.get("y")) < float(box.get("y")) < float(frame.get("y")) + float(frame.get("height"))

    class Visits(types.Inference):                     # the order the compiler's inference takes
        def component(self, group):
            self.seen.append([d.name.name for d in group])
            super().component(group)
    inference = Visits()
    inference.seen = []
    inference.program(check(Source("levels.l", text)))
    assert inference.seen == [members for _, members, *_ in frames]

    # the levels after: ∀ for a quantified variable (a, b…), 1 for a weak one (_a, _b…) in the printed types
    printed = dict(line.split(" : ", 1) for line in types.show_types(Source("levels.l", text)).splitlines())
    for _, members, after, _ in frames:
        variables = {v for n in members for v in re.findall(r"\b_?[a-z]\b", printed[n])}
        assert ("∀" in after) == any(not v.startswith("_") for v in variables), (members, after)
        assert ("1" in after) == any(v.startswith("_") for v in variables), (members, after)
        assert set(after) <= {"∀", "1"}


def test_the_context_picture_of_chapter_7_shades_a_context_that_the_continuation_computes():
    from lcompiler import cps, types
    from lcompiler.cps_convert import convert
    from lcompiler.errors import Source

    sources, svg = stored_picture("07_cps_convert.ipynb", 'context_picture("def h(g, x) = g(x) + 1")')
    trees, diagram = list(svg.iter(SVG + "svg"))[1:]           # the two pictures side by side
    colour = {"#dbeafe": "blue", "#fef9c3": "yellow", "#f1f5f9": "plain"}
    panels, box = [[]], None
    for shape in trees:
        if shape.tag == SVG + "rect" and shape.get("fill") in colour:
            box = colour[shape.get("fill")]
        elif shape.tag == SVG + "text" and box is None and panels[-1]:
            panels.append([])                                   # the caption of the second tree
        elif shape.tag == SVG + "text" and box is not None:
            panels[-1].append((box, shape.text))
            box = None
    (whole, context) = panels
    subexpression = [label for style, label in whole if style == "blue"]
    rest = [label for style, label in whole if style == "yellow"]
    assert sorted(subexpression) == ["call", "g", "x"]
    assert sorted(context) == sorted([("yellow", label) for label in rest] + [("plain", "□")]), \
        "the context is the tree with a hole in place of the subexpression"

    # the CPS drawn is what the converter makes of the example today
    lines = ["".join(t.itertext()) for t in diagram.iter(SVG + "text")]
    program, _ = types.check_types(Source("example.l", "def h(g, x) = g(x) + 1"))
    assert "\n".join(lines) + "\n" == cps.show(convert(program))
    # the continuation the caption names is the one the call returns to, and it holds the context:
    # it receives the hole's value, does the yellow operation to it, and returns where the tree says
    captions = [t.text for t in svg.findall(SVG + "text")]
    k = re.fullmatch(r"CPS: the context is the continuation (\w+)", captions[1]).group(1)
    call, = [line for line in lines if line.strip().startswith("call ")]
    assert f"-> {k} /" in call
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"cont {k}("))
    hole = re.match(rf"\s*cont {k}\((\w+)\)", lines[start]).group(1)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == " " * indent + "}")
    body = lines[start + 1:end]
    ret = next(label for _, label in whole if label.startswith("return to ")).removeprefix("return to ")
    operator, constant = sorted(label for label in rest if not label.startswith("return to "))
    assert any(re.fullmatch(rf"\s*\w+ = {hole} {re.escape(operator)} \w+", line) for line in body), body  # □ + …
    assert any(re.fullmatch(rf"\s*\w+ = {constant}", line) for line in body), body                   # … 1
    assert re.fullmatch(rf"\s*{ret}\(\w+\)", body[-1]), body                                  # returned
    assert not any(re.search(r"\b(g|x)_\d+\b", line) for line in body), "the call is not in its context"


def test_arrows_can_be_solid_and_an_arrow_to_its_own_box_is_a_loop():
    column = Box("a", [Box("b", name="b")], name="a")
    svg = Picture([("", [column])], alt="", edges="hidden",
                  arrows=[("a", "b", "solid"), ("b", "b"), ("a", "a", "dashed")]).svg()
    paths = re.findall(r"<path d=\"M([0-9.]+),([0-9.]+) C[^\"]*\" ([^/]*)/>", svg)
    assert len(paths) == 3                                    # "hidden": no line between a and b
    assert 'stroke-dasharray' not in paths[0][2] and all('stroke-dasharray' in p[2] for p in paths[1:])
    for x, y, _ in paths[1:]:                                 # a loop leaves and comes back beside the box
        assert re.search(rf'{re.escape(x)},{re.escape(y)} C[0-9.]+,[0-9.]+ [0-9.]+,[0-9.]+ [0-9.]+,'
                         rf'(?!{re.escape(y)}")', svg)


# --- chapter 10: the split of functions into fastcc, tailcc and loops ---------------------------

CALL = re.compile(r'(tail )?call (fastcc|tailcc) i64 (@"?([\w.]+)"?|%"?[\w.]+"?)\(')


def module_facts(text: str) -> tuple[dict, set]:
    """From the back end's LLVM text alone: {function: (convention, has a loop block)} and the set of
    calls (caller, callee or None for a closure, in tail position?); a tail position is a call whose
    result the next instruction returns, or the jump to `recur` that replaced a self tail call."""
    functions, calls, name, lines = {}, set(), None, text.splitlines()
    for i, line in enumerate(lines):
        if (m := re.match(r'define linkonce_odr (fastcc|tailcc) i64 @"?([\w.]+)"?\(', line)):
            name = m.group(2)
            functions[name] = (m.group(1), False)
        elif line.startswith("define"):
            name = None
        elif name is not None and (m := CALL.search(line)):
            result = line.split("=")[0].strip()
            tail = lines[i + 1].strip().startswith(f"ret i64 {result}")
            calls.add((name, m.group(4), tail))
        elif name is not None and re.match(r'\s*br label %"?recur"?', line):
            functions[name] = (functions[name][0], True)
            calls.add((name, name, True))
    return functions, calls


def test_the_picture_of_the_split_is_the_back_ends_classification():
    from lcompiler import pipeline
    from lcompiler.errors import Source
    from lcompiler.llvm_backend import UNKNOWN, Backend, split_picture

    chapter = (Path(__file__).parent.parent / "notebooks" / "10_llvm.py").read_text()
    programs = {"split.l": re.search(r'SPLIT = """(.*?)"""', chapter, re.S).group(1)}
    programs |= {f"{n}.l": (Path(__file__).parent.parent / "bench" / "programs" / f"{n}.l").read_text()
                 for n in ("fold", "nqueens", "cpstak")}
    for name, text in programs.items():
        for optimise in (False, True):
            closed, unit = pipeline.compile_to("shrink", Source(name, text), optimise)
            backend = Backend(closed, unit.datas, name)
            functions, calls = module_facts(str(backend.compile()))
            picture = split_picture(backend, name)
            boxes, box = [], picture.panels[0][1][0]
            while box is not None:
                boxes.append(box)
                box = box.children[0] if box.children else None
            drawn = {b.name: b for b in boxes if b.name != UNKNOWN}
            assert set(drawn) == set(functions), name
            for f, (convention, loop) in functions.items():
                label, style = drawn[f].label, drawn[f].style
                if f.startswith("init."):
                    assert convention == "tailcc" and style == "blue" and "initialiser" in label, (name, f)
                else:
                    assert label.startswith(f"{f}: {convention}") and style == {"fastcc": "green",
                                                                               "tailcc": "yellow"}[convention]
                assert ("a loop (recur)" in label) == loop, (name, f)
            arrows = {(a, None if b == UNKNOWN else b, style == "dashed") for a, b, style in picture.arrows}
            assert arrows == calls, (name, optimise, arrows ^ calls)
            svg = picture.svg()
            assert svg.count("stroke-dasharray") == sum(tail for *_, tail in calls), name


# --- chapter 4: the pipeline, drawn from a run --------------------------------------------------

def boxes_and_edges(svg: ElementTree.Element) -> tuple[list, list]:
    """[(y, fill of the box, its label)] and [(y, edge label)] of a picture of trees, top to bottom."""
    boxes, edges, fill = [], [], None
    for shape in svg:
        if shape.tag == SVG + "rect" and shape.get("rx"):
            fill = shape.get("fill")
        elif shape.tag == SVG + "text" and shape.get("fill") == "#7c3aed":
            edges.append((float(shape.get("y")), shape.text))
        elif shape.tag == SVG + "text" and fill is not None:
            boxes.append((float(shape.get("y")), fill, shape.text))
            fill = None
    return sorted(boxes), sorted(edges)


def test_the_pipeline_picture_of_chapter_4_is_the_pipeline_and_its_stages():
    from lcompiler import pipeline
    from lcompiler.drawing import STYLES
    from lcompiler.errors import Source

    sources, svg = stored_picture("04_pipeline.ipynb", "pipeline_picture(SMALL)")
    small = Source("small.l", ast.literal_eval(re.search(r'SMALL = Source\("small.l", (".*?")\)', sources).group(1)))
    boxes, edges = boxes_and_edges(svg)
    first, *stages, last = boxes
    assert first[2] == "source text" and last[2] == pipeline.PIPELINE[-1][3]
    drawn = [re.fullmatch(r"(\S+) \(chapter (\w+)\)((?:  [✓▶] \w+)*)", label).groups() for _, _, label in stages]
    assert [(name, chapter) for name, chapter, _ in drawn] == [(n, ch) for n, _, ch, _ in pipeline.PIPELINE]
    yellow = [name for (name, *_), (_, fill, _) in zip(drawn, stages) if fill == STYLES["yellow"][0]]
    assert yellow == list(pipeline.OPTIMISATIONS)
    assert all(fill == STYLES["blue"][0] for (name, *_), (_, fill, _) in zip(drawn, stages) if name not in yellow)
    registered = {s.name: s for s in pipeline.load()}
    for name, _, marks in drawn:
        assert ("✓ checker" in marks) == (registered[name].check is not None), name
        assert ("▶ interpreter" in marks) == (registered[name].interpret is not None), name
    # each edge is the class of what the run hands on: from the source, then from each stage in turn
    handed = [small] + [value for _, value, _ in pipeline.stages_of(small)]
    assert len(edges) == len(handed)
    for (_, label), value in zip(edges, handed):
        kind, (module, _, name) = type(value), label.split(" of ")[0].rpartition(".")
        assert name == kind.__name__, (label, kind)
        assert kind.__module__.startswith(module if module.startswith("llvmlite") else f"lcompiler.{module}"
                                          if module else "builtins"), (label, kind)
        if " of " in label:
            assert {type(v).__name__ for v in value} == {label.split(" of ")[1]}, label


# --- chapter 5b: the calls of a polymorphic definition, and the copies they call ---------------

def calls_in(line: str, names: set) -> list[tuple[str, str]]:
    """(the name, the text of the call) of every call in line of a function named in names, in order."""
    out = []
    for m in re.finditer(r"(\w+)\(", line):
        depth, end = 0, m.end() - 1
        for end in range(m.end() - 1, len(line)):
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            if depth == 0:
                break
        out.append((m.group(1), line[m.start():end + 1]))
    return [(name, text) for name, text in out if name in names]


def test_the_calls_picture_of_chapter_5b_is_the_monomorphisers_copies_and_calls():
    from lcompiler import pipeline
    from lcompiler.core import Def
    from lcompiler.errors import Source
    from lcompiler.types import show_type

    sources, svg = stored_picture("05b_mono.ipynb", "calls_picture(SHOW)")
    show = Source("show.l", re.search(r'SHOW = Source\("show.l", """(.*?)"""\)', sources, re.S).group(1))
    rects = {kind: [r for r in svg.iter(SVG + "rect") if r.get("class") == kind] for kind in ("definition", "copy",
                                                                                           "call")}
    paths = {kind: {(p.get("data-from"), p.get("data-to")) for p in svg.iter(SVG + "path") if p.get("class") == kind}
             for kind in ("copied", "calls")}
    # the oracle: the texts chapter 5 and the pass print, `lc show types` and `lc show mono`, read with regexes
    schemes = dict(line.split(" : ", 1) for line in pipeline.show("types", show).splitlines())
    polymorphic = {name: t for name, t in schemes.items() if re.search(r"\b[a-z]\b", t)}
    assert {(r.get("data-name"), r.get("data-type")) for r in rects["definition"]} == set(polymorphic.items())
    mono = pipeline.show("mono", show).splitlines()
    copies = [m.group(1) for line in mono if (m := re.match(r"def (\w+) =", line))
              and m.group(1) not in set(schemes) - set(polymorphic)]
    assert sorted(r.get("data-name") for r in rects["copy"]) == sorted(copies), "the copies are the pass's defs"
    typed = {d.name.name: show_type(d.value.type) for d in pipeline.compile_to("mono", show)[0].items
             if isinstance(d, Def)}
    for r in rects["copy"]:
        name, t = r.get("data-name"), r.get("data-type")
        assert typed[name] == t, name
        origin, = [p for p in polymorphic if re.fullmatch(rf"{p}(_\d+)?", name)]
        assert (origin, name) in paths["copied"]
        pattern, seen = "", set()                # the copy's type is an instance of the scheme: a = …, each a alike
        for k, part in enumerate(re.split(r"\b([a-z])\b", polymorphic[origin])):
            pattern += re.escape(part) if k % 2 == 0 else f"(?P={part})" if part in seen else f"(?P<{part}>.+)"
            seen.add(part)
        assert re.fullmatch(pattern, t), (name, t, polymorphic[origin])
    assert len(paths["copied"]) == len(copies)
    # each call, as written, to the copy the pass's program calls in its place: statement by statement
    last_def = lambda lines: max(i for i, line in enumerate(lines) if line.startswith("def "))
    written = show.text.splitlines()
    before, after = written[last_def(written) + 1:], mono[last_def(mono) + 1:]
    assert len(before) == len(after)
    expected = set()
    for line, copied in zip(before, after):
        calls, now = calls_in(line, set(polymorphic)), calls_in(copied, set(copies))
        assert len(calls) == len(now)
        expected |= {(text, name) for (_, text), (name, _) in zip(calls, now)}
    assert paths["calls"] == expected
    assert sorted(r.get("data-text") for r in rects["call"]) == sorted(text for text, _ in expected)


# --- appendix A: a span over its source, and the caret under it ---------------------------------

def test_the_span_picture_of_appendix_a_is_the_compilers_mistake_where_the_text_has_it():
    from lcompiler.drawing import STYLES
    from lcompiler.errors import CompileError, Source
    from lcompiler.types import check_types

    sources, svg = stored_picture("A_errors.ipynb", "span_picture(tabbed)")
    text = ast.literal_eval(re.search(r'tabbed = Source\("tab.l", (".*?")\)', sources).group(1))
    try:
        check_types(Source("tab.l", text))
        raise AssertionError("the compiler finds no mistake in tab.l")
    except CompileError as found:
        error = found
    cells = {kind: [r for r in svg.iter(SVG + "rect") if r.get("class") == kind] for kind in ("source", "shown",
                                                                                          "caret")}
    chars = lambda kind: "".join(chr(int(r.get("data-code"))) for r in cells[kind])
    shaded = lambda kind: [float(r.get("x")) for r in cells[kind] if r.get("fill") == STYLES["red"][0]]
    # every character once, in the order of its offsets, a line to a row, a column to a cell: the oracle
    # counts line breaks itself instead of asking Source
    assert [int(r.get("data-offset")) for r in cells["source"]] == list(range(len(text)))
    assert chars("source") == text
    ys, xs = (sorted({float(r.get(a)) for r in cells["source"]}) for a in ("y", "x"))
    for r in cells["source"]:
        offset = int(r.get("data-offset"))
        line, column = text.count("\n", 0, offset), offset - (text.rfind("\n", 0, offset) + 1)
        assert (ys.index(float(r.get("y"))), xs.index(float(r.get("x")))) == (line, column), offset
    start, end = error.span.start, error.span.end
    assert [int(r.get("data-offset")) for r in cells["source"] if r.get("fill") == STYLES["red"][0]] == \
        list(range(start, end)), "the shaded cells are the span of the error the compiler reports"
    place = next(t.text for t in svg.iter(SVG + "text") if t.get("class") == "place")
    line, column = text.count("\n", 0, start) + 1, start - text.rfind("\n", 0, start)
    begins = text.rfind("\n", 0, start) + 1
    assert place == f"Span({start}, {end}): line {line}, column {start} − {begins} + 1 = {column}"
    # what render() prints, the line and its caret cell for cell, the caret under the shaded characters
    header, shown, caret = error.render().split("\n")
    assert next(t.text for t in svg.iter(SVG + "text") if t.get("class") == "render") == header
    assert header.startswith(f"tab.l:{line}:{column}: error: ")
    assert chars("shown") == shown == text.split("\n")[line - 1] and chars("caret") == caret
    assert shaded("caret") == shaded("source") and len(shaded("caret")) == end - start


# --- appendix B: who uses what of lcompiler.support -------------------------------------------

def test_the_users_picture_of_appendix_b_is_the_packages_imports_of_support():
    import lcompiler.support

    _, svg = stored_picture("B_support.ipynb", "users_picture(users, chapter)")
    # the oracle: the package's files, read as text; an import of support may span several lines
    package = Path(lcompiler.support.__file__).parent
    imports, notebook = set(), {}
    for path in package.glob("*.py"):
        text = path.read_text()
        for m in re.finditer(r"from lcompiler\.support import (\([^)]*\)|[^\n]*)", text):
            names = re.findall(r"\w+", re.sub(r"#[^\n]*", "", m.group(1)))
            imports |= {(name, path.stem) for name in names}
            notebook[path.stem] = re.match(r"# AUTOGENERATED by tools/literate.py from notebooks/(\w+)\.ipynb",
                                           text).group(1)
    assert imports and not re.search(r"import lcompiler\.support|from lcompiler import[^\n]*\bsupport\b",
                                     "".join(p.read_text() for p in package.glob("*.py") if p.stem != "support"))
    dots = [(c.get("data-name"), c.get("data-module"), float(c.get("cx")), float(c.get("cy")))
            for c in svg.iter(SVG + "circle") if c.get("class") == "uses"]
    assert sorted((name, module) for name, module, *_ in dots) == sorted(imports), "a dot is an import"
    columns = [(t.get("data-module"), t.text) for t in svg.iter(SVG + "text") if t.get("class") == "module"]
    rows = [t.get("data-name") for t in svg.iter(SVG + "text") if t.get("class") == "name"]
    assert [m for m, _ in columns] == sorted(notebook, key=lambda m: (notebook[m], m)), "in the chapters' order"
    assert all(text == f"{m} ({notebook[m].split('_')[0].lstrip('0')})" for m, text in columns)
    assert rows == [n for n in lcompiler.support.__all__ if n in {name for name, _ in imports}]
    # each dot in its module's column and its name's row
    xs = {m: float(t.get("x")) for t in svg.iter(SVG + "text") if (m := t.get("data-module"))}
    ys = {n: float(t.get("y")) for t in svg.iter(SVG + "text") if (n := t.get("data-name"))}
    assert all(x == xs[module] and y + 4 == ys[name] for name, module, x, y in dots)
    assert len(set(xs.values())) == len(xs) and len(set(ys.values())) == len(ys)


# --- appendix B: a parent and its child, watched ------------------------------------------------

def profiled_run(main, **options):
    """run_in_child(main, **options), watched another way than the notebook does: with sys.setprofile,
    which the child inherits; the names of the system's functions each process called from support
    or main, in order, and the Result."""
    import os
    import sys
    import tempfile

    from lcompiler import support

    watched = {"pipe", "fork", "close", "dup2", "write", "read", "kill", "waitpid", "_exit", "select", "sleep"}
    parent, log, write, seen = os.getpid(), tempfile.TemporaryFile(), os.write, []
    places = {support.__file__, main.__code__.co_filename}

    def profile(frame, event, function):
        if (event == "c_call" and getattr(function, "__module__", None) in ("posix", "select", "time")
                and function.__name__ in watched and frame.f_code.co_filename in places):
            if os.getpid() == parent:
                seen.append(function.__name__)
            else:
                write(log.fileno(), f"{function.__name__}\n".encode())

    sys.setprofile(profile)
    try:
        result = support.run_in_child(main, **options)
    finally:
        sys.setprofile(None)
    log.seek(0)
    return seen, log.read().decode().split(), result


def test_the_child_picture_of_appendix_b_is_what_run_in_child_does():
    import os
    import signal
    import time

    from lcompiler import support

    _, svg = stored_picture("B_support.ipynb", "child_picture(runs)")
    twin = (NOTEBOOKS / "B_support.py").read_text()
    runs = next(n for n in ast.walk(ast.parse(twin)) if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "runs")
    calls = [n for n in ast.walk(runs) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "watched_run"]
    captions = [(float(t.get("y")), t.text) for t in svg.iter(SVG + "text") if t.get("font-weight") == "bold"]
    assert len(captions) == len(calls) == 2
    rects = [(float(r.get("y")), r.get("class"), r) for r in svg.iter(SVG + "rect") if r.get("class")]
    texts = {(float(t.get("x")), float(t.get("y"))): t.text for t in svg.iter(SVG + "text")}
    label = lambda r: texts[(round(float(r.get("x")) + 7, 1), float(r.get("y")) + 15)]
    arrows = [(p.get("data-what"), p.get("data-from"), p.get("data-to"),
               *[tuple(map(float, xy.split(","))) for xy in re.findall(r"[\d.]+,[\d.]+", p.get("d"))])
              for p in svg.iter(SVG + "path") if p.get("class") == "passes"]
    name = lambda text: re.match(r"(?:os|select|time)\.(\w+)\(", text).group(1)
    for k, call in enumerate(calls):
        main = eval(ast.get_source_segment(twin, call.args[0]), {"os": os, "time": time})
        options = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
        parent, child, result = profiled_run(main, **options)
        low, high = captions[k][0], captions[k + 1][0] if k + 1 < len(captions) else float("inf")
        mine = {kind: [label(r) for y, c, r in sorted(rects, key=lambda e: e[0]) if c == kind and low < y < high]
                for kind in ("parent", "child", "result", "end")}
        # the calls drawn are the calls made, in the order each process made them
        assert [name(text) for text in mine["parent"]] == parent, k
        assert [name(text) for text in mine["child"]] == child, k
        code = Path(support.__file__).read_text() + ast.get_source_segment(twin, call.args[0])
        assert all(text.split("  → ")[0] in code for text in mine["parent"] + mine["child"]), "calls as written"
        assert mine["result"] == [repr(result)]
        ends = f"killed by {signal.Signals(-result.status).name}" if result.status < 0 else f"exit status {result.status}"
        assert mine["end"] == [ends]
        # what passes: each arrow joins the boxes it names, never goes up (back in time), and says the truth
        centre = {label(r): float(r.get("y")) + BOX_H / 2 for y, c, r in rects if low < y < high}
        run = [a for a in arrows if low < a[3][1] < high]
        assert all(centre[source] == y1 and centre[target] == y2 and y2 >= y1
                   for _, source, target, (_, y1), (_, y2) in run), k
        kinds = sorted(what for what, *_ in run)
        wrote = [(int(m.group(1)), ast.literal_eval(m.group(2))) for text in mine["child"]
                 if (m := re.fullmatch(r"os\.write\((\d), (b.*)\)", text))]
        assert kinds == sorted(["fork", "status"] + ["the pipe" if fd == 1 else "the file" for fd, _ in wrote]
                               + ([signal.Signals(-result.status).name] if result.status < 0 else []))
        for what, source, target, *_ in run:
            if what == "fork":
                assert (source, target) == ("os.fork()", mine["child"][0])
            elif what == "the pipe":
                sent = ast.literal_eval(re.fullmatch(r"os\.write\(1, (b.*)\)", source).group(1))
                assert name(target) == "read" and ast.literal_eval(target.split("  → ")[1]) == sent
            elif what == "the file":
                sent = ast.literal_eval(re.fullmatch(r"os\.write\(2, (b.*)\)", source).group(1))
                assert target == repr(result) and result.stderr.startswith(sent.decode())
            elif what == "status":
                assert source == ends and name(target) == "waitpid" and target.endswith(f"→ {result.status}")
            else:
                assert source.startswith("os.kill(") and source.endswith(f"signal.{what})") and target == ends
        assert "".join(sent.decode() for fd, sent in wrote if fd == 1) == result.stdout


# --- appendix C: the commands of lc, and the modules each command imports ----------------------

def panels_of(svg: ElementTree.Element) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(caption, [(fill, label) of each box, in the order drawn])] of a picture of trees."""
    panels, fill = [], None
    for shape in svg:
        if shape.tag == SVG + "text" and shape.get("font-weight") == "bold":
            panels.append((shape.text, []))
        elif shape.tag == SVG + "rect" and shape.get("rx"):
            fill = shape.get("fill")
        elif shape.tag == SVG + "text" and fill is not None:
            panels[-1][1].append((fill, shape.text))
            fill = None
    return panels


def test_the_commands_picture_of_appendix_c_is_the_registry_as_argparse_reads_it(capsys):
    """Each command of lc, and under it its arguments as `lc CMD --help` writes them in its usage line:
    green the positional ones, yellow the options with a value, grey the switches; in declared order."""
    from lcompiler import cli
    from lcompiler.drawing import STYLES

    _, svg = stored_picture("C_cli.ipynb", "commands_picture()")
    (_, boxes), = panels_of(svg)
    assert boxes[0] == (STYLES["plain"][0], "lc")
    drawn = {}
    for fill, label in boxes[1:]:             # drawn depth first: a command, then its column
        if fill == STYLES["blue"][0]:
            drawn[label] = []
        else:
            drawn[list(drawn)[-1]].append((fill, label))
    assert list(drawn) == list(cli.COMMANDS)
    for name, arguments in drawn.items():
        assert cli.main([name, "--help"]) == 0
        usage = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
        assert usage.startswith(f"usage: lc {name} [-h]"), usage
        optional = [o for o in re.findall(r"\[([^\]]+)\]", usage) if o != "-h"]
        positional = re.sub(r"\[[^\]]+\]", "", usage).split()[3:]
        assert [label for fill, label in arguments if fill == STYLES["green"][0]] == positional, name
        assert sorted(label for fill, label in arguments if fill != STYLES["green"][0]) == sorted(optional), name
        for fill, label in arguments:
            if fill != STYLES["green"][0]:
                assert fill == STYLES["yellow" if " " in label else "plain"][0], (name, label)
        declared = [names[0] for names, _ in cli.COMMANDS[name][1]]
        assert [label.split()[0] for _, label in arguments] == declared, name


CHILD = """import json, os, runpy, sys
def report():
    print(json.dumps(sorted(sys.modules)), file=sys.stderr, flush=True)
def execve(*arguments, execve=os.execve):     # lc run hands its process to the program: report first
    report()
    execve(*arguments)
os.supports_fd.add(execve)
os.execve = execve
sys.argv = {argv!r}
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
report()"""


def test_the_modules_picture_of_appendix_c_is_what_each_command_imports(tmp_path):
    """Each panel holds the modules of lcompiler and llvmlite that its command, run by the installed lc
    in a child, has loaded at its end (or when lc run hands its process to the program) and the command
    on its left has not; blue exactly the modules that register a stage of the pipeline, and none before
    the run that compiles."""
    import os
    import subprocess
    import sys

    from lcompiler import pipeline
    from lcompiler.drawing import STYLES

    lc = str(Path(sys.executable).parent / "lc")
    hello = tmp_path / "hello.l"
    hello.write_text('print("hello")\n')
    env = {**os.environ, "LC_CACHE": str(tmp_path / "cache")}

    def modules(*argv: str) -> set[str]:
        done = subprocess.run([sys.executable, "-c", CHILD.format(argv=[lc, *argv])], capture_output=True,
                              text=True, env=env, timeout=300)
        return {m for m in json.loads(done.stderr.splitlines()[-1]) if m.split(".")[0] in ("lcompiler", "llvmlite")}

    compiling = modules("run", str(hello))
    measured = {"lc --version": modules("--version"), "lc --help": modules("--help"),
                "lc run, from the cache": modules("run", str(hello)), "lc run, compiling": compiling}
    registering = {s.run.__module__ for s in pipeline.load()}
    _, svg = stored_picture("C_cli.ipynb", "modules_picture(runs)")
    panels = panels_of(svg)
    assert [caption for caption, _ in panels] == list(measured)
    before = set()
    for (caption, boxes), now in zip(panels, measured.values()):
        new, before = now - before, now
        package = {m for m in new if m.startswith("lcompiler")}
        llvm = len(new) - len(package)
        names = [label if label == "lcompiler" else f"lcompiler.{label}" for _, label in boxes
                 if not label.startswith("llvmlite")]
        assert sorted(names) == sorted(package), caption
        assert [label for _, label in boxes if label.startswith("llvmlite")] == \
            ([f"llvmlite: {llvm} modules"] if llvm else []), caption
        for fill, label in boxes:
            blue = not label.startswith("llvmlite") and f"lcompiler.{label}" in registering
            assert fill == STYLES["blue" if blue else "yellow" if label.startswith("llvmlite") else "plain"][0], label
        assert any(fill == STYLES["blue"][0] for fill, _ in boxes) == (caption == "lc run, compiling")
