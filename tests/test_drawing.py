"""lcompiler.drawing (chapter 1): the layout of trees, and what a picture says."""

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
