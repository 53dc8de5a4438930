"""lcompiler.drawing (chapter 1): the layout of trees, and what a picture says."""

import re
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
