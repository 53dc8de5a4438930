"""Union-find (chapter 2): both variants against a naive model; every misuse caught by Safe."""

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from lcompiler.union_find import (
    AlreadyAdded, ConsumedPartition, Element, Fast, ForeignStructure, NotAdded, NotAPartition,
    Partition, Safe, SelfUnion, UnionFindError)


class Machine(RuleBasedStateMachine):
    """Random sequences of operations, checked step by step against a model: numbered groups, each a set of elements."""

    variant = Fast
    elements = Bundle("elements")

    @initialize()
    def setup(self):
        self.uf = self.variant()
        self.group = {}        # element -> group number (the model)
        self.members = {}      # group number -> set of elements
        self.desc = {}         # group number -> description
        self.consumed = []     # partitions a union has used up
        self.fresh = 0

    def same(self, a, b) -> bool:
        return self.group[a] == self.group[b]

    @rule(target=elements, desc=st.integers())
    def add(self, desc):
        e = Element(self.fresh)
        p = self.uf.singleton(e, desc)
        assert self.uf.description(p) == desc and self.uf.find(e) is p
        g, self.fresh = self.fresh, self.fresh + 1
        self.group[e], self.members[g], self.desc[g] = g, {e}, desc
        return e

    @rule(a=elements, b=elements, desc=st.integers())
    def union(self, a, b, desc):
        p, q = self.uf.find(a), self.uf.find(b)
        assert (p is q) == self.same(a, b)
        if p is q:
            return
        r = self.uf.union(p, q, desc)
        assert self.uf.find(a) is r and self.uf.find(b) is r and self.uf.description(r) == desc
        ga, gb = self.group[a], self.group[b]
        for e in self.members[gb]:
            self.group[e] = ga
        self.members[ga] |= self.members.pop(gb)
        del self.desc[gb]
        self.desc[ga] = desc
        self.consumed += [x for x in (p, q) if x is not r]

    @rule(a=elements, b=elements)
    def compare(self, a, b):
        assert (self.uf.find(a) is self.uf.find(b)) == self.same(a, b)

    @rule(a=elements)
    def describe(self, a):
        assert self.uf.description(self.uf.find(a)) == self.desc[self.group[a]]

    @rule(a=elements, desc=st.integers())
    def redescribe(self, a, desc):
        self.uf.set_description(self.uf.find(a), desc)
        self.desc[self.group[a]] = desc

    @invariant()
    def agrees_with_model(self):
        if not hasattr(self, "uf"):
            return
        handles = {}
        for g, members in self.members.items():
            found = {id(self.uf.find(e)): self.uf.find(e) for e in members}
            assert len(found) == 1, "one partition holds each group"
            (p,) = found.values()
            assert self.uf.description(p) == self.desc[g]
            assert 2 ** p.rank <= len(members), "union by rank: rank r means at least 2**r elements"
            handles[id(p)] = g
        assert len(handles) == len(self.members), "different groups, different partitions"


class SafeMachine(Machine):
    """The same machine on Safe, which also tries misuses at random and expects them caught."""

    variant = Safe

    @precondition(lambda self: self.consumed)
    @rule(data=st.data())
    def reuse_consumed(self, data):
        p = data.draw(st.sampled_from(self.consumed))
        with pytest.raises(ConsumedPartition):
            self.uf.description(p)
        with pytest.raises(ConsumedPartition):
            self.uf.set_description(p, 0)

    @precondition(lambda self: self.consumed)
    @rule(data=st.data(), a=Machine.elements)
    def union_with_consumed(self, data, a):
        p = data.draw(st.sampled_from(self.consumed))
        with pytest.raises(ConsumedPartition):
            self.uf.union(self.uf.find(a), p, 0)
        with pytest.raises(ConsumedPartition):
            self.uf.union(p, self.uf.find(a), 0)

    @rule(a=Machine.elements)
    def add_again(self, a):
        with pytest.raises(AlreadyAdded):
            self.uf.singleton(a, 0)
        with pytest.raises(AlreadyAdded):
            Safe().singleton(a, 0)

    @rule(a=Machine.elements)
    def self_union(self, a):
        p = self.uf.find(a)
        with pytest.raises(SelfUnion):
            self.uf.union(p, p, 0)

    @rule(a=Machine.elements)
    def foreign(self, a):
        other = Safe()
        with pytest.raises(ForeignStructure):
            other.find(a)
        with pytest.raises(ForeignStructure):
            other.description(self.uf.find(a))


run_settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestFast = pytest.mark.slow(Machine.TestCase)
TestFast.settings = run_settings
TestSafe = SafeMachine.TestCase
TestSafe.settings = run_settings


def test_every_misuse_raises_in_safe():
    uf, other = Safe(), Safe()
    x, y, z, stranger = Element("x"), Element("y"), Element("z"), Element("stranger")
    px, py = uf.singleton(x, 1), uf.singleton(y, 2)
    pxy = uf.union(px, py, 3)
    pz = other.singleton(z, 4)
    cases = [
        (AlreadyAdded, lambda: uf.singleton(x, 0)),            # added twice
        (AlreadyAdded, lambda: uf.singleton(z, 0)),            # added to two structures
        (NotAdded, lambda: uf.find(stranger)),                 # never added
        (NotAdded, lambda: uf.find(object())),                 # cannot be an element
        (ForeignStructure, lambda: uf.find(z)),                # element of another structure
        (ForeignStructure, lambda: uf.union(pxy, pz, 0)),      # partition of another structure
        (ForeignStructure, lambda: uf.description(pz)),
        (ConsumedPartition, lambda: uf.description(px)),       # consumed partition reused
        (ConsumedPartition, lambda: uf.set_description(py, 0)),
        (ConsumedPartition, lambda: uf.union(px, pxy, 0)),
        (SelfUnion, lambda: uf.union(pxy, pxy, 0)),            # union(p, p)
        (NotAPartition, lambda: uf.description(x)),            # an element for a partition
        (NotAPartition, lambda: uf.union(pxy, "p", 0)),
    ]
    for error, action in cases:
        with pytest.raises(error):
            action()
        assert issubclass(error, UnionFindError)
    # and nothing above damaged the structure
    assert uf.find(x) is uf.find(y) is pxy and uf.description(pxy) == 3


def test_a_misuse_message_says_which_argument_is_wrong():
    uf = Safe()
    x, y = Element("x"), Element("y")
    px = uf.singleton(x, "x")
    with pytest.raises(NotAPartition, match=r"^expected a partition as the argument, got Element\('x'\)$"):
        uf.description(x)
    with pytest.raises(NotAPartition, match="^expected a partition as the second argument of union, got 'p'$"):
        uf.union(px, "p", 0)
    pxy = uf.union(px, uf.singleton(y, "y"), "x or y")
    with pytest.raises(ConsumedPartition, match="^the first argument of union, <partition 'x', rank 0, consumed>,"):
        uf.union(px, pxy, 0)


def test_a_consumed_partition_is_caught_even_when_its_root_survived():
    uf = Safe()
    a, b = Element("a"), Element("b")
    pa, pb = uf.singleton(a, "a"), uf.singleton(b, "b")
    merged = uf.union(pa, pb, "ab")
    assert merged.root is pa.root            # a's root survived the union ...
    with pytest.raises(ConsumedPartition):   # ... and pa is caught all the same
        uf.description(pa)


def test_a_path_that_ends_at_an_unadded_element_is_reported():
    uf = Safe()
    a, b = Element("a"), Element("b")
    uf.singleton(a, "a")
    a.link = b                               # corrupt by hand: b belongs to nothing
    with pytest.raises(NotAdded):
        uf.find(a)


@pytest.mark.slow
@pytest.mark.parametrize("variant", [Fast, Safe])
def test_find_compresses_a_path_of_a_million_links_without_recursion(variant):
    uf = variant()
    n = 10**6
    elements = [Element(i) for i in range(n)]
    uf.singleton(elements[-1], "end")
    for here, there in zip(elements, elements[1:]):
        here.link = there                    # a path union by rank would never build
    assert uf.description(uf.find(elements[0])) == "end"
    assert all(e.link is elements[-1] for e in elements[:-1])


@pytest.mark.parametrize("variant", [Fast, Safe])
def test_an_element_can_live_in_two_structures_through_two_links(variant):
    class TwoLinks:
        __slots__ = ("link", "other")

        def __init__(self):
            self.link = self.other = None

    first, second = variant(), variant(link="other")
    a, b = TwoLinks(), TwoLinks()
    pa, pb = first.singleton(a, "a"), first.singleton(b, "b")
    second.singleton(a, "A")
    second.singleton(b, "B")
    first.union(pa, pb, "ab")
    assert first.find(a) is first.find(b)
    assert second.find(a) is not second.find(b)
    assert second.description(second.find(b)) == "B"


def test_union_by_rank_keeps_the_higher_rank_root():
    for variant in (Fast, Safe):
        uf = variant()
        es = [Element(i) for i in range(3)]
        ps = [uf.singleton(e, i) for i, e in enumerate(es)]
        p01 = uf.union(ps[0], ps[1], "01")     # rank 1
        p = uf.union(ps[2], p01, "all")        # rank 0 under rank 1
        assert p.rank == 1 and p.root is es[0] and isinstance(p, Partition)
