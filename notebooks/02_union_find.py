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
# # Chapter 2. Union-find, Safe and Fast
#
# A structure that keeps elements in disjoint sets, merges two sets, tells
# which set an element is in — each in nearly constant time, averaged over a
# run — and attaches a description to each set. Two variants share one
# interface: `Safe`, which detects every misuse and says which, and `Fast`,
# which checks nothing.

# %% [markdown]
# <div class="admonition abstract">
# <p class="admonition-title">Needs / Builds</p>
#
# **Needs:** nothing from earlier chapters; the pictures use
# `lcompiler.drawing` from [appendix A](A_errors.ipynb), and one plot
# matplotlib.
#
# **Builds:** the module `lcompiler.union_find`: the structures `Safe` and
# `Fast`, the class `Partition` of their handles, `Element` for examples, and
# one exception per misuse. [Chapter 5](05_types.ipynb) and
# [chapter 6](06_cps.ipynb) import it.
#
# </div>
#
# Two later chapters stand on this one. Type inference
# ([chapter 5](05_types.ipynb)) represents each type variable as an element;
# unifying two type variables is a `union`, and the description of a set is
# what the variables stand for. The CPS language ([chapter 6](06_cps.ipynb)),
# after Kennedy's *Compiling with continuations, continued*, keeps the
# occurrences of each variable in one set whose description is the variable
# itself: finding the variable an occurrence refers to is a `find`, and
# substituting one variable for another is a `union`.
#
# The chapter follows the literate union-find module of the original L
# compiler, Matthieu Lemerre's post *A literate union-find data structure* on
# the L compiler's blog (one of the sources this book grew from; see the
# [bibliography](../bibliography.md#the-seeds)), re-told in Python; we call it
# *the original* below. Its interface is
# unusual in three ways, and each has a reason given below: the structure's
# links live *inside* the elements; *partitions* (sets) are a different thing
# from *elements*; and `union` *consumes* its arguments.

# %%
#| default_exp union_find

# %% [markdown]
# ## What this chapter promises
#
# In the module `lcompiler.union_find`:
#
# - `Safe()` and `Fast()` are two union-find structures with one interface
#   (the table below): `singleton`, `find`, `union`, `description` and
#   `set_description`. On the same sequence of correct calls they give the
#   same partitions and the same descriptions.
# - `union(p1, p2, d)` consumes its two partitions: they must not be used
#   again. `Safe` detects every misuse — a consumed partition, an element
#   added twice or never added, a union of a partition with itself, a
#   partition or an element of another structure, something that is not a
#   partition — and raises an exception that names it (a subclass of
#   `UnionFindError`); `Fast` checks nothing. Chapter 5's inference uses
#   `Safe`, chapter 6's CPS language `Fast`.
# - Both link by rank and compress paths (two tricks explained below), so
#   that a sequence of m operations on n elements costs O(m α(n)), where α,
#   the inverse of Ackermann's function, is at most 4 in practice: nearly
#   constant per operation on average, though one `find` can take up to
#   log₂ n steps. And `find` never recurses on the Python stack, however
#   long the path.
#
# ## The interface
#
# A union-find structure `uf` maintains a partition of some elements into
# disjoint sets (we say *partitions*, as the original does). Each partition carries
# a *description*, any Python value the user chooses.
#
# | operation | meaning |
# |---|---|
# | `Safe()`, `Fast()` | a new, empty structure (the *create* of the original) |
# | `uf.singleton(e, d)` | add the element `e`, alone in a new partition described by `d`; return the partition |
# | `uf.find(e)` | the partition that contains `e` |
# | `uf.union(p1, p2, d)` | merge two different partitions into a new one described by `d`, and return it; `p1` and `p2` are *consumed*: they must not be used again |
# | `uf.description(p)` | the description of `p` |
# | `uf.set_description(p, d)` | change it |
#
# An element is any Python object with a writable attribute that starts as
# `None` — by default named `link` — reserved for the structure. (The name can
# be chosen: `Safe(link="uf_link")`.) A partition is an opaque handle that
# only the structure creates.
#
# A worked example before the implementation: four elements, two unions.

# %%
#| export
import operator


class Element:
    """The simplest possible element: a name and a link for the structure."""
    __slots__ = ("name", "link")

    def __init__(self, name=None):
        self.name, self.link = name, None

    def __repr__(self) -> str:
        return f"Element({self.name!r})"


# %% [markdown]
# (`Element` is for examples and tests; real users, such as the type
# variables of [chapter 5](05_types.ipynb), are their own classes with a
# `link` field.)
#
# Here is the worked example, as it will run once `Safe` is defined (it runs,
# with its output, after the implementation):
#
# ```python
# uf = Safe()
# a, b, c, d = (Element(n) for n in "abcd")
# pa, pb, pc, pd = (uf.singleton(e, e.name) for e in (a, b, c, d))
# pab = uf.union(pa, pb, "a or b")      # pa and pb are used up
# pcd = uf.union(pc, pd, "c or d")
# uf.find(a) is uf.find(b)              # True: the same partition
# uf.description(uf.find(b))            # 'a or b'
# uf.find(a) is uf.find(c)              # False
# uf.description(pa)                    # ConsumedPartition: pa was used up by a union
# ```

# %% [markdown]
# ## The representation: a forest whose roots hold the descriptions
#
# Each partition is a tree of its elements. Every element's `link` points to
# its parent element; the root's `link` points instead to the partition
# handle, a small record with the root, the description and a *rank*. So
# `find(e)` follows links upwards until it reaches something that is not an
# element — the handle — and `union` hangs one root under the other.
#
# ```text
#      handle("a or b", rank 1)        handle("c", rank 0)
#            ^                              ^
#            a  <- root                     c  <- root
#            ^
#            b
# ```
#
# The handle is what the original calls the *partition descriptor*. The original
# returns the root element itself as "the partition", and can only check that
# it is still a root; returning the handle instead lets `Safe` recognise a
# consumed partition for certain, as we will see.

# %%
#| export
class Partition:
    """The handle of one partition: its root element, rank and description."""
    __slots__ = ("root", "rank", "desc", "owner", "consumed")

    def __init__(self, root, desc, rank: int = 0, owner=None):
        self.root, self.desc, self.rank = root, desc, rank
        self.owner, self.consumed = owner, False   # used by Safe only

    def __repr__(self) -> str:
        state = ", consumed" if self.consumed else ""
        return f"<partition {self.desc!r}, rank {self.rank}{state}>"


# %% [markdown]
# ### Why the link lives in the element
#
# A textbook union-find keeps an array or a dictionary from elements to
# parents. Kennedy's CPS representation makes a `find` each time it asks an
# occurrence for its variable, and inference one per type variable it
# touches, so the parent is kept *in the element*, as in the original:
# following a link is reading one field, with no hashing and no table to
# grow. The price is small and visible: the element
# type must reserve a field, and an element that belongs to two structures
# needs two fields — the reason the link's name is a parameter.
#
# ### Why union by rank, and path compression
#
# Two classic tricks keep the trees flat. **Union by rank**: each partition
# has a rank, an upper bound on the height of its tree; `union` hangs the
# root of smaller rank under the other, so heights grow only when two equal
# ranks meet, and a tree of rank r has at least 2ʳ elements — no path is
# longer than log₂ n. **Path compression**: after `find` has walked from `e`
# to the root, it points every element on the way directly at the root, so
# the next `find` from any of them takes one step. Together they make any
# sequence of m operations on n elements cost O(m α(n)), where α, the inverse
# of Ackermann's function, is at most 4 for any n that fits in this universe
# (Tarjan, 1975; Tarjan and van Leeuwen, 1984): constant, in practice, per operation. We draw both tricks at
# work once the code exists, and measure the bound below.
#
# Path compression needs the path. The original walks up to the root with a
# tail-recursive function; Python has no tail calls and a recursion limit of
# about a thousand, so our `find` is two loops: one up to the root,
# collecting the path in a list, one over the list.
#
# <div class="admonition note">
# <p class="admonition-title">Design note: the whole path, not one element</p>
#
# The original's second pass re-links only the element `find` was called with,
# not the whole path. That is simpler, and still correct, but it is not one
# of the rules for which Tarjan and van Leeuwen (1984, in the
# [bibliography](../bibliography.md#papers-and-books)) prove the
# inverse-Ackermann bound. The bound does not need every element of the
# path pointed at the root: they prove it, with union by rank, for full
# compression and for two one-pass rules that only shorten the path, *path
# splitting* (every element of the path is pointed at its grandparent) and
# *path halving* (every other element is). Re-linking the first element
# alone leaves the rest of the path as long as it was. Our version
# compresses the whole path, so the bound holds; the measurement below
# counts the links that finds still follow, and exercise 1 tries halving.
#
# </div>
#
# ## Fast: the algorithm and nothing else

# %%
#| export
class UnionFind:
    """The interface shared by Fast and Safe; see those classes."""

    def __init__(self, link: str = "link"):
        self.link = link                          # the attribute of elements we own
        self._get = operator.attrgetter(link)

    def singleton(self, element, description) -> Partition:
        raise NotImplementedError

    def find(self, element) -> Partition:
        raise NotImplementedError

    def union(self, p1: Partition, p2: Partition, description) -> Partition:
        raise NotImplementedError

    def description(self, p: Partition):
        raise NotImplementedError

    def set_description(self, p: Partition, description) -> None:
        raise NotImplementedError


# %%
#| export
class Fast(UnionFind):
    """Union-find with union by rank and path compression, and no checks."""

    def singleton(self, element, description) -> Partition:
        p = Partition(element, description)
        setattr(element, self.link, p)
        return p

    def find(self, element) -> Partition:
        get = self._get
        up = get(element)
        if type(up) is Partition:                 # element is a root
            return up
        path, x = [element], up
        while type(up := get(x)) is not Partition:
            path.append(x)
            x = up
        name = self.link                          # x is the root, up its handle
        for y in path:
            setattr(y, name, x)
        return up

    def union(self, p1: Partition, p2: Partition, description) -> Partition:
        if p1.rank < p2.rank:
            p1, p2 = p2, p1                       # p1 keeps the root
        elif p1.rank == p2.rank:
            p1.rank += 1
        setattr(p2.root, self.link, p1.root)
        p1.desc = description
        return p1

    def description(self, p: Partition):
        return p.desc

    def set_description(self, p: Partition, description) -> None:
        p.desc = description


# %% [markdown]
# `Fast.union` reuses the surviving handle: the loser's root now points to the
# winner's root, and the winner's handle gets the new description and,
# when the ranks were equal, a rank one higher.
#
# ### Why union takes partitions and consumes them
#
# `union` could take two elements and find their roots itself. It takes
# partitions because its callers already hold them: a `singleton` just created
# is a partition, and the typical caller — unification in chapter 5 — must
# `find` both sides anyway to read their descriptions and compute the merged
# one, which is why the new description is an argument of `union`. Taking
# elements would repeat those finds.
#
# After `union(p1, p2, d)` one of the two roots is no longer a root, and in
# `Fast` the surviving handle has a new description. Keeping `p1` and
# `p2` in use after that is a mistake whichever of the two survived: the
# partition they named no longer exists. Hence the rule: **`union` consumes
# its arguments**; use what it returns, or `find` again. In a language with
# linear types the compiler would enforce this; in OCaml and Python only a
# check at run time can. The original's `Safe` checks that a partition is
# still a root, which misses the argument whose root survived; ours checks
# that it was not consumed, which catches both.
#
# ## Safe: the same interface, every misuse detected
#
# The misuses, each with its own exception, all subclasses of
# `UnionFindError` so that a caller can catch them together:
#
# | misuse | exception |
# |---|---|
# | adding an element twice, or to two structures with the same link | `AlreadyAdded` |
# | `find` on an element never added | `NotAdded` |
# | an element or partition of another structure | `ForeignStructure` |
# | using a partition that a `union` consumed | `ConsumedPartition` |
# | `union(p, p)` | `SelfUnion` |
# | something other than a partition where one is expected | `NotAPartition` |
#
# <div class="admonition note">
# <p class="admonition-title">Design note: one owner per partition, not per link</p>
#
# The original's Safe gives each structure a unique identity and stores it in
# every link next to the parent. We store it once per partition, in the
# handle's `owner`: every path ends at a handle, so checking the owner at the
# end of `find` checks the whole path, and a link stays one field. Consumption
# is recorded in the handle too, which is why `Safe.union` makes a **new**
# handle for the merged partition and marks both old ones consumed: a stale
# handle can then never be mistaken for a live one, whichever root survived.
#
# </div>

# %%
#| export
class UnionFindError(Exception):
    """A misuse of a union-find structure, detected by Safe."""


class AlreadyAdded(UnionFindError):
    """singleton on an element that already belongs to a structure."""


class NotAdded(UnionFindError):
    """find on an element that belongs to no structure."""


class ForeignStructure(UnionFindError):
    """An element or partition of another structure."""


class ConsumedPartition(UnionFindError):
    """A partition used after a union consumed it."""


class SelfUnion(UnionFindError):
    """union of a partition with itself."""


class NotAPartition(UnionFindError):
    """Something that is not a partition handle where one is expected."""


# %%
#| export
_MISSING = object()


class Safe(UnionFind):
    """Union-find that checks every use and raises a UnionFindError on misuse."""

    def _link_of(self, element):
        link = getattr(element, self.link, _MISSING)
        if link is _MISSING:
            raise NotAdded(f"{element!r} has no attribute {self.link!r}: it cannot be an element")
        return link

    def _root_handle(self, link) -> Partition:
        """The handle at the end of a path that starts with a non-empty link."""
        while type(link) is not Partition:
            link = self._link_of(link)
            if link is None:
                raise NotAdded("a path of links ends at an element that belongs to no structure")
        return link

    def _live(self, p, role: str = "the argument") -> Partition:
        if type(p) is not Partition:
            raise NotAPartition(f"expected a partition as {role}, got {p!r}")
        if p.owner is not self:
            raise ForeignStructure(f"{role}, {p!r}, belongs to another union-find structure")
        if p.consumed:
            raise ConsumedPartition(f"{role}, {p!r}, was consumed by an earlier union; "
                                    "use the partition that union returned, or find it again")
        return p


# %% [markdown]
# Those three say what is wrong once a check has failed: `_link_of` reads an
# element's link and reports an object that has none, `_root_handle`
# follows a path to its handle and reports one that ends at an element
# with no link, and `_live` says why something is not a live partition of
# this structure. `singleton` refuses an element that
# already has a link, saying whether it belongs to this structure or to
# another; `find` returns a root's handle at once, once it has checked that
# the handle is this structure's, and leaves everything else to
# `_find_path`, which reports a missing link or a foreign handle and
# otherwise compresses the path as `Fast` does:

# %%
#| export
class Safe(Safe):
    def singleton(self, element, description) -> Partition:
        link = getattr(element, self.link, _MISSING)
        if link is not None:
            link = self._link_of(element)         # reports an object without the attribute
            where = "this" if self._root_handle(link).owner is self else "another"
            raise AlreadyAdded(f"{element!r} already belongs to {where} union-find structure")
        p = Partition(element, description, owner=self)
        setattr(element, self.link, p)
        return p

    def find(self, element) -> Partition:
        link = getattr(element, self.link, _MISSING)
        if type(link) is not Partition:           # not a root: walk the path, or report
            return self._find_path(element, link)
        if link.owner is not self:
            raise ForeignStructure(f"{element!r} belongs to another union-find structure")
        return link

    def _find_path(self, element, link) -> Partition:
        if link is None or link is _MISSING:
            self._link_of(element)                # reports an object without the attribute
            raise NotAdded(f"{element!r} belongs to no union-find structure (add it with singleton)")
        name, root = self.link, link
        while type(handle := getattr(root, name, None)) is not Partition:
            if handle is None:
                self._root_handle(link)           # reports the broken path
            root = handle
        if handle.owner is not self:
            raise ForeignStructure(f"{element!r} belongs to another union-find structure")
        x = element
        while x is not root:                      # compress the path, as Fast does
            x, up = getattr(x, name), x
            setattr(up, name, root)
        return handle


# %% [markdown]
# `union` checks both arguments and refuses to merge a partition with
# itself, then links the loser's root under the winner's by rank, as
# `Fast` does, but gives the merged partition a new handle and marks both
# old ones consumed; `description` and `set_description` accept only a
# live partition of this structure:

# %%
#| export
class Safe(Safe):
    def union(self, p1: Partition, p2: Partition, description) -> Partition:
        if not (type(p1) is Partition and p1.owner is self and not p1.consumed):
            self._live(p1, "the first argument of union")
        if not (type(p2) is Partition and p2.owner is self and not p2.consumed):
            self._live(p2, "the second argument of union")
        if p1 is p2:
            raise SelfUnion(f"union of {p1!r} with itself")
        winner, loser = (p2, p1) if p1.rank < p2.rank else (p1, p2)
        rank = winner.rank + (p1.rank == p2.rank)
        merged = Partition(winner.root, description, rank, owner=self)
        setattr(loser.root, self.link, winner.root)
        setattr(winner.root, self.link, merged)
        p1.consumed = p2.consumed = True
        return merged

    def description(self, p: Partition):
        return self._live(p).desc

    def set_description(self, p: Partition, description) -> None:
        self._live(p).desc = description


# %% [markdown]
# The checks are written so that the common case costs little: `find` on a
# root and `union` of two live partitions test a couple of fields inline, and
# only when a test fails do `_live` and `_find_path` work out which misuse it
# is and say so.
#
# Two remarks on `Safe.find`. Its compression loop walks the path a second
# time instead of collecting it in a list — equally iterative, and it shows
# that the list in `Fast.find` is a convenience, not a necessity. And it
# checks the owner once, at the handle, where the original checks every link of
# the path (its "heavy check"); a path cannot leave one structure, since only
# the structure writes links, so one check sees everything the heavy one does
# except a link corrupted by hand.
#
# ## The worked example, run

# %%
uf = Safe()
a, b, c, d = (Element(n) for n in "abcd")
pa, pb, pc, pd = (uf.singleton(e, e.name) for e in (a, b, c, d))
pab = uf.union(pa, pb, "a or b")
pcd = uf.union(pc, pd, "c or d")
uf.find(a) is uf.find(b), uf.description(uf.find(b)), uf.find(a) is uf.find(c)

# %%
pabcd = uf.union(pab, pcd, "any")
[uf.find(e) for e in (a, b, c, d)], pa, pab

# %% [markdown]
# All four elements now find the same handle, of rank 2 (two unions of equal
# ranks in a row); `pa` and `pab`, used up, say so.
#
# ### The forest, drawn
#
# What do those links look like? `forest` reads them back from the elements
# and draws each partition as a tree: the handle on top (in yellow, with its
# description and rank), then the root element, then the elements below it.
# Each edge is a `link`, and its arrow points the way the link does, up
# towards the root.

# %%
from lcompiler.drawing import Box, Picture


def forest(uf: UnionFind, elements: list, moved=()) -> list[Box]:
    """The partitions of the elements as trees of boxes, read from their links;
    the elements in moved are drawn green."""
    boxes = {id(e): Box(str(e.name), style="green" if e in moved else "blue", name=str(e.name)) for e in elements}
    roots = []
    for e in elements:
        up = getattr(e, uf.link)
        if type(up) is Partition:
            roots.append(Box(f"{up.desc!r}, rank {up.rank}", [boxes[id(e)]], "yellow"))
        else:
            boxes[id(up)].children.append(boxes[id(e)])
    return roots


def links(uf: UnionFind, elements: list) -> str:
    """The links in words, for the picture's description."""
    return "; ".join(f"{e.name} → " + (f"the handle {up.desc!r}" if type(up) is Partition else str(up.name))
                     for e in elements if (up := getattr(e, uf.link)) is not None)

# %% [markdown]
# Now the three moments that matter, on a fresh structure: two partitions of
# two elements each; their `union`, which hangs the root `c` under the root
# `a` (equal ranks: the first argument keeps the root, and the rank grows);
# and a `find(d)`, which walks `d → c → a`, then points `d` straight at the
# root:

# %%
uf = Safe()
a, b, c, d = elements = [Element(n) for n in "abcd"]
pa, pb, pc, pd = (uf.singleton(e, e.name) for e in elements)
pab, pcd = uf.union(pa, pb, "a or b"), uf.union(pc, pd, "c or d")
moments = [("before union(pab, pcd)", forest(uf, elements), links(uf, elements))]
everything = uf.union(pab, pcd, "a, b, c or d")
moments.append(("after the union", forest(uf, elements), links(uf, elements)))
uf.find(d)
moments.append(("after find(d)", forest(uf, elements, moved=[d]), links(uf, elements)))
Picture([(caption, trees) for caption, trees, _ in moments], edges="up",
        alt="Three union-find forests. " + " ".join(f"{caption}: {words}." for caption, _, words in moments))

# %% [markdown]
# The union changed two links and made one new handle: `c` now points at
# `a`, and `a` at the new handle (`Safe` makes one for every union); `d` did
# not move, and its path grew to two links. The `find` changed one link (`d`'s),
# and the next `find(d)` takes one step. Union by rank keeps the trees low;
# path compression flattens what the unions could not avoid.
#
# With four elements a path has at most two links. Eight elements, joined
# two by two, then four by four, then all together, make a tree of rank 3,
# whose deepest element `h` is three links from the root; one `find(h)`
# points every element of its path at the root (the elements whose link it
# changed are green):

# %%
def rank_3_tree(uf: UnionFind) -> list[Element]:
    """Eight elements a … h in one partition of rank 3, made by unions only."""
    elements = [Element(n) for n in "abcdefgh"]
    parts = [uf.singleton(e, e.name) for e in elements]
    while len(parts) > 1:
        parts = [uf.union(p, q, uf.description(p) + uf.description(q)) for p, q in zip(parts[::2], parts[1::2])]
    return elements


uf = Safe()
eight = rank_3_tree(uf)
h, before = eight[-1], [e.link for e in eight]
deep = [("before find(h)", forest(uf, eight), links(uf, eight))]
uf.find(h)
moved = [e for e, link in zip(eight, before) if e.link is not link]
deep.append(("after find(h)", forest(uf, eight, moved=moved), links(uf, eight)))
Picture([(caption, trees) for caption, trees, _ in deep], edges="up",
        alt="Two union-find forests of eight elements. " + " ".join(f"{c}: {w}." for c, _, w in deep))

# %% [markdown]
# Before, `h` reaches the root `a` through `g` and `e`; after, `h` and `g`
# point at `a` directly (`e` already did), and the next find from either
# takes one step. The unions built the path; one find removed it.
#
# ## Every misuse, caught
#
# Each misuse from the table, tried on one small structure (and a second
# structure for the foreign ones), with the message `Safe` gives; the last
# line is one more, an object with no `link` at all:

# %%
def attempt(action) -> str:
    try:
        action()
    except UnionFindError as error:
        return f"{type(error).__name__}: {error}"
    return "no error!"


def situation(variant):
    """Two structures: x and y joined in uf, z alone in other, stranger in neither."""
    uf, other = variant(), variant()
    x, y, z, stranger = Element("x"), Element("y"), Element("z"), Element("stranger")
    px, py = uf.singleton(x, "x"), uf.singleton(y, "y")
    pxy = uf.union(px, py, "x or y")
    other.singleton(z, "z")
    return uf, other, x, y, z, stranger, px, py, pxy


uf, other, x, y, z, stranger, px, py, pxy = situation(Safe)
misuses = {                                     # each reads the names above when it runs
    "add x twice": lambda: uf.singleton(x, "again"),
    "add z, which belongs to another structure": lambda: uf.singleton(z, "z in uf"),
    "find an element never added": lambda: uf.find(stranger),
    "find an element of another structure": lambda: uf.find(z),
    "union with a partition of another structure": lambda: uf.union(pxy, other.find(z), "?"),
    "reuse a consumed partition": lambda: uf.description(px),
    "union a partition with itself": lambda: uf.union(pxy, pxy, "?"),
    "an element where a partition is expected": lambda: uf.description(x),
    "an object that cannot be an element": lambda: uf.find(42),
}
for what, action in misuses.items():
    print(f"{what}:\n    {attempt(action)}")

# %% [markdown]
# The same misuses on `Fast`, each on a fresh copy of the situation (a
# misuse can damage it), with what it returns and where `x`, `y` and `z`
# link afterwards:

# %%
uf, other, x, y, z, *_ = situation(Fast)
before = links(uf, [x, y, z])
print(f"before any misuse: {before}")
for what, action in misuses.items():
    uf, other, x, y, z, stranger, px, py, pxy = situation(Fast)
    try:
        result = f"returns {action()!r}"
    except AttributeError as error:
        result = f"AttributeError: {error}"
    after = links(uf, [x, y, z])
    print(f"{what}:\n    {result}; " + ("links unchanged" if after == before else f"links now: {after}"))

# %% [markdown]
# Three misuses stop with an `AttributeError` from deep inside, which names
# neither the misuse nor the argument. The other six return as if nothing
# were wrong: `find(z)` answers with a partition of the other structure; the
# consumed `px` answers right, by luck (it won its union, so in `Fast` it
# *is* the merged partition; exercise 3 comes back to this); and four change
# links on the way: `x`, added again, becomes the root of a new partition
# and takes `y` with it; `z`, added to `uf`, or hung under `x` by a union
# with `other`'s partition, silently leaves `other`; and the union of a
# partition with itself points `x` at itself, so the next `find` of `x` or
# `y` never returns. That is the contract of `Fast`: correct calls only. The
# original's advice is to prefer `Safe`, since the difference in speed is
# small. We check that claim below.
#
# ## Deep paths, without recursion
#
# Union by rank never builds a path longer than log₂ n, so a public-interface
# test cannot make `find` walk a million links. We build such a path by hand —
# a million elements each linked to the next, the last one a root — to check
# that `find` does not depend on Python's recursion limit, and that one `find`
# flattens the whole path.

# %%
def chain(uf: UnionFind, n: int) -> list[Element]:
    """n elements in one partition, linked by hand into a single path."""
    elements = [Element(i) for i in range(n)]
    uf.singleton(elements[-1], "the end")
    for here, there in zip(elements, elements[1:]):
        here.link = there
    return elements


for variant in (Fast, Safe):
    uf = variant()
    elements = chain(uf, 10**6)
    handle = uf.find(elements[0])
    flat = all(e.link is elements[-1] for e in elements[:-1])
    print(f"{variant.__name__}: {uf.description(handle)!r}, every link now points at the root: {flat}")

# %% [markdown]
# ## Measuring: constant cost per operation
#
# The bound says the cost per operation is essentially constant however large
# the structure grows. We measure it two ways, for n = 10³ … 10⁶ elements: n
# singletons, then n random pairs (for each, `find` on its two elements, and
# a `union` of their partitions if they differ), then n random finds.
#
# First a count that does not depend on the machine: the number of links
# `find` follows, on average and at most. A subclass counts them by walking the
# path before the real `find` runs; the random choices are seeded, so the
# counts are the same on every run. The last column is the largest rank of
# any partition at the end.

# %%
import random


def workload(n: int) -> tuple[list[tuple[int, int]], list[int]]:
    rng = random.Random(n)
    return [(rng.randrange(n), rng.randrange(n)) for _ in range(n)], [rng.randrange(n) for _ in range(n)]


def exercise(uf: UnionFind, elements: list, work) -> int:
    """Add the elements, run the workload; return the number of operations."""
    pairs, finds = work
    for e in elements:
        uf.singleton(e, None)
    find, union, ops = uf.find, uf.union, len(elements)
    for i, j in pairs:
        p, q = find(elements[i]), find(elements[j])
        ops += 2
        if p is not q:
            union(p, q, None)
            ops += 1
    for i in finds:
        find(elements[i])
    return ops + len(finds)


class CountingFast(Fast):
    """Fast, counting the links that find follows, in all and on its longest walk."""
    links = finds = longest = 0

    def find(self, element):
        self.finds += 1
        x, walked = element, 0
        while type(up := getattr(x, self.link)) is not Partition:
            walked, x = walked + 1, up
        self.links, self.longest = self.links + walked, max(self.longest, walked)
        return super().find(element)


def largest_rank(uf: UnionFind, elements: list) -> int:
    """The largest rank of the partitions, read from the handles the roots point to."""
    return max(up.rank for e in elements if type(up := getattr(e, uf.link)) is Partition)


sizes = [10**3, 10**4, 10**5, 10**6]
works = {n: workload(n) for n in sizes}
print(f"{'n':>9} {'finds':>9} {'links followed per find':>24} {'longest find':>13} {'largest rank':>13}")
for n in sizes:
    uf, elements = CountingFast(), [Element(i) for i in range(n)]
    exercise(uf, elements, works[n])
    print(f"{n:>9} {uf.finds:>9} {uf.links / uf.finds:>24.3f} {uf.longest:>13} "
          f"{largest_rank(uf, elements):>13}")

# %% [markdown]
# Under one link per find on average, flat from a thousand elements to a
# million, and no find walks more than a handful of links. Union by rank
# keeps every tree low: a rank of r needs at least 2ʳ elements, so the
# largest rank is at most log₂ n (under 20 for a million), and it is far
# below that here. Path compression then shortens whatever path a find walks.
#
# Now the time, in nanoseconds per operation, for both variants. Element
# objects are made before the clock starts, and Python's cyclic garbage
# collector is paused while it runs (as `timeit` does), so that we time the
# structure and not the allocator. One more column is a control: the cost of
# merely reading the `link` of a random element, as many times and in the same
# random order as the workload's finds start from elements. It isolates what
# the memory hierarchy costs at each size.
#
# These cells are measurements, different on every machine and every run, so
# they are marked `nbval-ignore-output`: the test suite runs them but does not
# compare what they print.

# %% tags=["nbval-ignore-output"]
import gc
import time


def timed(action) -> tuple[float, object]:
    gc.disable()
    try:
        start = time.perf_counter()
        result = action()
        return (time.perf_counter() - start) * 1e9, result
    finally:
        gc.enable()


def ns_per_op(variant, n: int) -> float:
    elements = [Element(i) for i in range(n)]
    ns, ops = timed(lambda: exercise(variant(), elements, works[n]))
    return ns / ops


def ns_per_random_read(n: int) -> float:
    pairs, finds = works[n]
    elements = [Element(i) for i in range(n)]

    def touch():
        for i, j in pairs:
            _ = elements[i].link, elements[j].link       # the two reads a pair of finds starts with
        for i in finds:
            _ = elements[i].link
        return 2 * len(pairs) + len(finds)

    ns, reads = timed(touch)
    return ns / reads


READ = "random read (control)"
timings = {"Fast": [], "Safe": [], READ: []}
for n in sizes:
    # Rounds of the three in alternation, enough for 3·10⁵ operations and at least two;
    # the best of each: the run least disturbed by the rest of the machine.
    rounds = [(ns_per_op(Fast, n), ns_per_op(Safe, n), ns_per_random_read(n))
              for _ in range(max(2, 3 * 10**5 // (4 * n)))]
    for name, column in zip(timings, zip(*rounds)):
        timings[name].append(min(column))
print(f"{'n':>9} {'Fast ns/op':>11} {'Safe ns/op':>11} {'Safe/Fast':>10} {'random read ns':>15}")
for i, n in enumerate(sizes):
    fast, safe, read = (timings[k][i] for k in timings)
    print(f"{n:>9} {fast:>11.0f} {safe:>11.0f} {safe / fast:>10.2f} {read:>15.0f}")

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt
from IPython.display import display

fig, ax = plt.subplots(figsize=(6, 3.2))
for name, values in timings.items():
    ax.plot(sizes, values, marker="o", label=name)
ax.set_xscale("log")
ax.set_ylim(0, max(max(v) for v in timings.values()) * 1.2)
ax.set_xlabel("elements n")
ax.set_ylabel("ns per operation")
ax.set_title("Cost per operation, and of one random read")
ax.legend()
above = all(s > f for s, f in zip(timings["Safe"], timings["Fast"]))
display(fig, metadata={"alt": "A plot of nanoseconds per operation against the number of elements, "
                              "from a thousand to a million on a logarithmic scale, for Fast, Safe and "
                              "the random read of the control, from "
                              + ", ".join(f"{k} {v[0]:.0f} to {v[-1]:.0f} ns" for k, v in timings.items())
                              + (": Safe stays above Fast." if above else ".")})
plt.close(fig)

# %% [markdown]
# The time per operation is higher at a million elements than at a thousand
# (neighbouring sizes can swap places in a noisy run), while the number of
# links followed per find, in the first table, did not move. The control
# column says where the time goes: merely *reading* one random element's
# link costs many times more over the same range, because a thousand
# elements sit in the processor's caches and a million Python objects do
# not. A find touches at least two objects at random places — the element
# and the partition handle — and one more for each link it follows (under
# one on average, the first table says), so an operation can pay that
# growth more than once over. The cell below reads the ratios from this
# run's measurements (they change from run to run, and from machine to
# machine):

# %% tags=["nbval-ignore-output"]
fast, safe, read = timings["Fast"], timings["Safe"], timings[READ]
print(f"from {sizes[0]:,} to {sizes[-1]:,} elements, in this run:")
print(f"  an operation of Fast costs {fast[-1] / fast[0]:.1f} times as much, one random read "
      f"{read[-1] / read[0]:.1f} times as much;")
print(f"  Fast grew by {(fast[-1] - fast[0]) / (read[-1] - read[0]):.1f} times what one random read grew;")
print(f"  Safe takes {safe[0] / fast[0]:.2f} times Fast's time at {sizes[0]:,} elements, "
      f"{safe[-1] / fast[-1]:.2f} times at {sizes[-1]:,},")
ratios = [s / f for s, f in zip(safe, fast)]
print(f"  and from {min(ratios):.2f} to {max(ratios):.2f} times across the {len(sizes)} sizes.")

# %% [markdown]
# The work per operation — the links its finds follow — stays flat, as the
# bound promises; the memory it runs on does not promise constant time per
# access. (An implementation in C
# meets the same memory hierarchy; its elements would be a few bytes each
# instead of a Python object, so it would leave the caches at a larger n.)
#
# `Safe` costs more than `Fast` (the last two lines): its extra tests and the
# new handle it makes per `union` are a fixed amount of work per operation,
# which weighs most where operations are cheapest, on small structures
# that run from the cache; on large ones both variants also wait on memory,
# which dilutes it. The two largest sizes are timed in only two rounds
# each, so their ratios are the noisiest of the table. The original calls the
# difference small, and recommends `Safe` for that reason; in Python it is
# not small, but what the checks buy is large — the misuses above are
# exactly the bugs that would otherwise surface much later as a wrong type
# or a wrong variable binding. Chapter 5's type inference
# uses `Safe`. Chapter 6's CPS language, which makes a `find` each time it
# asks an occurrence of any program for its variable, uses `Fast` — one
# structure, made in one line, which a reader hunting a bug can make a
# `Safe` instead.
#
# ## What the tests check
#
# `tests/test_union_find.py` holds the promises of this chapter as tests:
#
# - a Hypothesis state machine runs random sequences of `singleton`, `find`,
#   `union`, `description` and `set_description` against both variants and a
#   naive model (a dictionary of Python sets), checking after every step that the
#   structure agrees with the model on which elements share a partition and on
#   every description, and that a partition of rank r has at least 2ʳ
#   elements;
# - the same machine, on `Safe`, also tries misuses at random points and
#   expects the right exception each time;
# - every misuse of the table above raises its exception in `Safe`, and the
#   message for a wrong or consumed argument of `union` says which argument
#   it is;
# - a path of a million links is compressed by one `find`, in both variants.
#
# ## Exercises
#
# 1. Replace path compression by *path halving*: in one pass up the path,
#    point every other element at its grandparent. Does the count of links
#    followed per find change? The original chose compression for a reason
#    of its representation. In Tarjan's union-find a root's link points to
#    the root itself, so "point x at its grandparent" is harmless at every
#    step, even next to the root; here a root's link points to its
#    partition's handle, which is not an element. What does halving cost
#    here that it does not cost there, and is it worth it?
# 2. Remove union by rank from `Fast` (always hang `p2` under `p1`) and rerun
#    the count of links. What happens to the links followed per find? To the
#    largest rank?
# 3. Write `Safe.union` so that it reuses the winner's handle, as `Fast`
#    does. Which misuse can it no longer detect?
# 4. Draw, with `forest`, what `Fast` leaves after the three moments above.
#    Which handle does it keep, and what does `pcd` now describe?
#
# <details><summary>Solutions</summary>
#
# 1. `Halving.find`, below: at each step it reads the parent, and the
#    parent's link; if that is a handle, the parent is the root and the walk
#    ends, otherwise the element is pointed at its grandparent and the walk
#    goes on from there. That test of the grandparent is the cost: with a
#    root linked to itself, the grandparent of a child of the root is the
#    root, and the re-linking needs no test; here it must not point an
#    element at a handle. In exchange halving needs no second pass and no
#    list. The count of links followed rises a little (the cell below prints
#    both) and stays nearly flat as n grows: halving reaches the same bound
#    as full compression (Tarjan and van Leeuwen). So the original's reason
#    is a real but small cost per step, not a difference in the guarantee;
#    either choice is sound. Is it worth it? Only a measurement can say, and
#    the second cell below makes one: both variants on the workload of the
#    timing above, in alternation. Halving can come out ahead even though
#    its finds follow a few more links: on a path of one link, compression
#    builds a list and rewrites a link that already points at the root,
#    where halving returns at once. The cell prints how this run came out.
# 2. `NoRank.union`, below. The links followed per find grow with n: path
#    compression alone still flattens what the finds walk, but a union can
#    now hang a tall tree under a short one, and the guarantee falls from α
#    to a logarithm. The largest rank is 0 at every size: nothing updates
#    ranks any more, so they no longer say anything about the trees.
# 3. `ReusingSafe.union`, below, gives the merged partition the winner's
#    handle and marks only the loser's consumed. A partition passed to
#    `union` that won — `pa` after `union(pa, pb, …)` when ranks are equal —
#    is the very object `union` returns, so nothing can mark it consumed, and
#    using it after the union goes undetected: here harmlessly, since it
#    *is* the new partition, but the rule "union consumes its arguments" can
#    then be broken, for one of the two arguments of every union, without a
#    word, and code that breaks it works until the ranks come out the other
#    way.
# 4. Drawn below. `Fast` keeps `pab`'s handle (equal ranks: the first
#    argument wins), gives it the new description and rank 2. `pcd` is the
#    loser's old handle: it still says `'c or d'`, rank 1, and its root `c`
#    now points at `a`, so it describes a partition that no longer exists,
#    and `Fast` answers `description(pcd)` without complaint (the cell
#    prints its answer). No link leads to `pcd` any more; only the names
#    `pcd` in the reader's program do (in the picture, the red box, with a
#    dashed arrow to the root it still records).
#
# </details>
#
# The solutions run. Exercises 1 and 2 count the links followed, as above,
# with the two new rules:

# %%
class Halving(Fast):
    """Fast with path halving: one pass, every other element pointed at its grandparent."""

    def find(self, element) -> Partition:
        get, name, x = self._get, self.link, element
        while type(up := get(x)) is not Partition:
            if type(grand := get(up)) is Partition:   # up is the root
                return grand
            setattr(x, name, grand)
            x = grand
        return up


class NoRank(Fast):
    """Fast without union by rank: p2 always goes under p1."""

    def union(self, p1: Partition, p2: Partition, description) -> Partition:
        setattr(p2.root, self.link, p1.root)
        p1.desc = description
        return p1


class CountingHalving(CountingFast, Halving):
    pass


class CountingNoRank(CountingFast, NoRank):
    pass


print(f"{'n':>9} {'rule':>12} {'links followed per find':>24} {'largest rank':>13}")
for n in sizes[:3]:
    for rule in (CountingFast, CountingHalving, CountingNoRank):
        uf, elements = rule(), [Element(i) for i in range(n)]
        exercise(uf, elements, works[n])
        print(f"{n:>9} {rule.__name__[8:] or 'Fast':>12} {uf.links / uf.finds:>24.3f} "
              f"{largest_rank(uf, elements):>13}")
uf = Halving()
assert uf.description(uf.find(chain(uf, 10**5)[0])) == "the end"   # a long path, no recursion

# %% [markdown]
# And the time (a measurement: different on every run, so not compared by
# the tests), in rounds of the two in alternation, as many as the timing
# above makes, and the best of each:

# %% tags=["nbval-ignore-output"]
for n in sizes[:3]:
    rounds = [(ns_per_op(Fast, n), ns_per_op(Halving, n)) for _ in range(max(2, 3 * 10**5 // (4 * n)))]
    compression, halving = (min(column) for column in zip(*rounds))
    print(f"{n:>9,} elements: compression {compression:.0f} ns per operation, "
          f"halving {halving:.0f} ({halving / compression:.2f} times compression's time)")

# %% [markdown]
# Exercise 3: the winner's handle, reused, can no longer be caught.

# %%
class ReusingSafe(Safe):
    """Safe whose union reuses the winner's handle, as Fast does."""

    def union(self, p1: Partition, p2: Partition, description) -> Partition:
        for p, role in ((p1, "the first argument of union"), (p2, "the second argument of union")):
            self._live(p, role)
        if p1 is p2:
            raise SelfUnion(f"union of {p1!r} with itself")
        winner, loser = (p2, p1) if p1.rank < p2.rank else (p1, p2)
        winner.rank += p1.rank == p2.rank
        setattr(loser.root, self.link, winner.root)
        winner.desc, loser.consumed = description, True
        return winner


for variant in (Safe, ReusingSafe):
    uf = variant()
    pa, pb = uf.singleton(Element("a"), "a"), uf.singleton(Element("b"), "b")
    uf.union(pa, pb, "a or b")
    print(f"{variant.__name__:>12}: pa after the union: {attempt(lambda uf=uf, pa=pa: uf.description(pa))}; "
          f"pb: {attempt(lambda uf=uf, pb=pb: uf.description(pb))}")

# %% [markdown]
# Exercise 4: the three moments again, on `Fast`, with the stale handle
# `pcd` drawn beside the forest.

# %%
uf = Fast()
a, b, c, d = elements = [Element(n) for n in "abcd"]
pa, pb, pc, pd = (uf.singleton(e, e.name) for e in elements)
pab, pcd = uf.union(pa, pb, "a or b"), uf.union(pc, pd, "c or d")
everything = uf.union(pab, pcd, "a, b, c or d")
uf.find(d)
print(f"union returned pab: {everything is pab}; pcd is {pcd!r}, c now links to {c.link!r}, "
      f"and description(pcd) answers {uf.description(pcd)!r}")
stale = Box(f"pcd: {pcd.desc!r}, rank {pcd.rank}", style="red", name="pcd")
Picture([("Fast, after the union and find(d)", forest(uf, [a, b, d, c], moved=[d]) + [stale])], edges="up",
        arrows=[("pcd", pcd.root.name)],
        alt="A union-find forest left by Fast: " + links(uf, elements)
            + f"; and the stale handle pcd, {pcd.desc!r}, rank {pcd.rank}, whose root is still {pcd.root.name}, "
              "though no link leads to it.")
