"""Walk a libcst tree without rebuilding it.

libcst's `node.visit(visitor)` serves transformers too, so it builds a new copy of every node it passes
(and validates it), even for a visitor that changes nothing: that was most of a cold scan's time. These
walks call the same visitor methods on the same nodes in the same order — a node's children in the order
libcst visits them, read once per node class from its `_visit_and_replace_children` — and build nothing.
The `visit_<Node>_<attribute>` hooks are not called: kvlint's visitors define none (a batch that does is
handed to libcst).
"""

from __future__ import annotations

import linecache
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from functools import cache

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

# libcst visits each child field through one of these helpers, naming the field as a string literal.
_VISITED_FIELD = re.compile(
    r'visit_(?:required|optional|sentinel|iterable|sequence|body_iterable|body_sequence)\(\s*self,\s*"(\w+)"'
)
_SEQUENCES = (tuple, list)
_MISSING = object()
_NO_SOURCE = object()
# Per node class: a getter of the visited fields' values (as a tuple), None when there are none, or
# _NO_SOURCE when libcst's source cannot be read (its own `children` answers then).
_GETTERS: dict[type, object] = {}
_HOOK_NAMES: dict[type, tuple[str, ...]] = {}


def _child_fields(node_type: type) -> tuple[str, ...] | None:
    """The fields libcst visits, in its order; None when its source cannot be read."""
    source = _method_source(node_type._visit_and_replace_children)
    return None if source is None else tuple(dict.fromkeys(_VISITED_FIELD.findall(source)))


def _method_source(function) -> str | None:
    """A method's lines, from its first to the last that holds code (its compiled lines say which).
    `inspect.getsource` finds the end by tokenizing the file from the method on: 60 ms in each process
    that walks a libcst tree, once for each of ~170 node classes."""
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    last = max((line for _, _, line in code.co_lines() if line is not None), default=0)
    return "".join(lines[code.co_firstlineno - 1 : last]) if lines and last else None


def _getter_of(node_type: type) -> Callable[[cst.CSTNode], tuple] | None | object:
    fields = _child_fields(node_type)
    if fields is None:
        getter = _NO_SOURCE
    elif not fields:
        getter = None
    elif len(fields) == 1:
        one = operator.attrgetter(fields[0])
        getter = lambda node: (one(node),)  # noqa: E731 - attrgetter of one name gives the value, not a tuple
    else:
        getter = operator.attrgetter(*fields)
    return getter


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`node.children` without rebuilding `node`."""
    getter = _GETTERS.get(type(node), _MISSING)
    if getter is _MISSING:
        getter = _GETTERS[type(node)] = _getter_of(type(node)) if _reads_libcst_right() else _NO_SOURCE
    if getter is _NO_SOURCE:
        return list(node.children)
    if getter is None:
        return []
    # _fields_of, inline: this runs once for every node of every linted file
    found: list[cst.CSTNode] = []
    for value in getter(node):
        kind = type(value)
        if kind in _SEQUENCES:
            found.extend(value)
        else:
            is_node = _IS_NODE.get(kind)
            if is_node is None:
                is_node = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
            if is_node:
                found.append(value)
    return found


# Per type of a field's value: whether it is a node. libcst's classes are ABCs, whose isinstance check runs
# Python code on every call; a type's answer never changes.
_IS_NODE: dict[type, bool] = {}


# Common constructs, walked once per process both ways before the fields read from libcst's source are
# trusted: a libcst whose source reads otherwise (a renamed helper, another order) then gets its own
# `children` everywhere — slower, never a subtree skipped.
_PROBE = """
@decorator(1, *args, key=value)
def function(p: int, q=2, *rest, **more) -> list[int]:
    for item in (yield p):
        value = [i ** 2 for i in range(10) if i % 2]
    try:
        group.kv_cache_spec.block_size *= dcp if isinstance(spec, (A, B)) else 1
    except (ValueError, TypeError) as error:
        raise RuntimeError("no") from error
    return {k: v for k, v in more.items()}, lambda a, *, b=1: a[1:2, ::3]


class Spec(Base, metaclass=Meta):
    attribute: int = 0  # a comment
"""


@cache
def _reads_libcst_right() -> bool:
    probe = cst.parse_module(_PROBE)
    theirs: list[int] = []

    class _Record(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            theirs.append(id(node))
            return True

    probe.visit(_Record())
    getters: dict[type, object] = {}
    ours, pending = [], [probe]
    while pending:
        current = pending.pop()
        ours.append(id(current))
        if type(current) not in getters:
            getters[type(current)] = _getter_of(type(current))
        getter = getters[type(current)]
        pending.extend(reversed(list(current.children) if getter is _NO_SOURCE else _fields_of(getter, current)))
    return ours == theirs


def _fields_of(getter, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes in the fields `getter` reads, in order."""
    if getter is None:
        return []
    found: list[cst.CSTNode] = []
    for value in getter(node):
        if type(value) in _SEQUENCES:
            found.extend(value)  # a field's sequence holds nodes only
        elif isinstance(value, cst.CSTNode):
            found.append(value)  # not None or MaybeSentinel.DEFAULT
    return found


def preorder(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node under it, in the order a visitor's `on_visit` sees them."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(reversed(children(current)))


def parent_map(node: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Every node under `node` → its parent."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    pending = [node]
    while pending:
        current = pending.pop()
        for child in children(current):
            parents[child] = current
            pending.append(child)
    return parents


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a visitor that only reads: `on_visit` (False skips the children), `on_leave`."""
    if visitor.on_visit(node):
        for child in children(node):
            walk(child, visitor)
    visitor.on_leave(node)


class ModuleShape:
    """One walk of a module, shared by everything that asks about its structure: each node's parent and
    children, and its nodes in the order a visitor sees them (each of these cost a walk of its own)."""

    def __init__(self, module: cst.Module):
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        # Keyed by id(node): a node's own __hash__ is a Python call, paid on every lookup of the rules' walk.
        self.children: dict[int, list[cst.CSTNode]] = {}
        self.preorder: list[cst.CSTNode] = []
        pending: list[cst.CSTNode] = [module]
        while pending:
            current = pending.pop()
            self.preorder.append(current)
            found = children(current)
            if found:
                self.children[id(current)] = found
                for child in found:
                    self.parents[child] = current
                pending.extend(reversed(found))


def walk_batched(
    wrapper: MetadataWrapper, visitors: Iterable[cst.BatchableCSTVisitor], shape: ModuleShape | None = None
) -> None:
    """`wrapper.visit_batched(visitors)`: metadata resolved as libcst does, then one walk for all (through
    `shape`'s children when given)."""
    visitors = list(visitors)
    methods: dict[str, list[Callable[[cst.CSTNode], None]]] = {}
    for visitor in visitors:
        for name in _hook_names(visitor):
            methods.setdefault(name, []).append(getattr(visitor, name))
    if any(name.count("_") > 1 for name in methods):  # a visit_<Node>_<attribute> hook: libcst calls those
        wrapper.visit_batched(visitors)
        return
    with ExitStack() as stack:
        for visitor in visitors:
            stack.enter_context(visitor.resolve(wrapper))
        if shape is not None and not any(name.startswith("leave_") for name in methods):
            _visit_in_order(shape.preorder, methods)  # visits alone need no recursion: the order is the walk's
        elif shape is not None:
            _walk_shape(wrapper.module, methods, {}, shape.children)
        else:
            _walk_dispatching(wrapper.module, methods, {})


def _hook_names(visitor: cst.BatchableCSTVisitor) -> tuple[str, ...]:
    """The names `get_visitors()` gives, once per visitor class: it inspects every member of the instance."""
    names = _HOOK_NAMES.get(type(visitor))
    if names is None:
        names = _HOOK_NAMES[type(visitor)] = tuple(visitor.get_visitors())
    return names


def _walk_dispatching(node: cst.CSTNode, methods: dict, by_type: dict) -> None:
    hooks = by_type.get(type(node))
    if hooks is None:
        name = type(node).__name__
        hooks = by_type[type(node)] = (methods.get(f"visit_{name}", ()), methods.get(f"leave_{name}", ()))
    for visit in hooks[0]:
        visit(node)
    for child in children(node):
        _walk_dispatching(child, methods, by_type)
    for leave in hooks[1]:
        leave(node)


def _visit_in_order(nodes: list[cst.CSTNode], methods: dict) -> None:
    """Each node's `visit_<Node>` hooks, in the order of `nodes` (a ModuleShape's preorder)."""
    by_type: dict[type, tuple] = {}
    for node in nodes:
        visits = by_type.get(type(node))
        if visits is None:
            visits = by_type[type(node)] = tuple(methods.get(f"visit_{type(node).__name__}", ()))
        for visit in visits:
            visit(node)


def _walk_shape(node: cst.CSTNode, methods: dict, by_type: dict, kids: dict) -> None:
    """_walk_dispatching with the children read from a ModuleShape."""
    hooks = by_type.get(type(node))
    if hooks is None:
        name = type(node).__name__
        hooks = by_type[type(node)] = (methods.get(f"visit_{name}", ()), methods.get(f"leave_{name}", ()))
    for visit in hooks[0]:
        visit(node)
    for child in kids.get(id(node), ()):
        _walk_shape(child, methods, by_type, kids)
    for leave in hooks[1]:
        leave(node)


def code_positions(wrapper: MetadataWrapper) -> Mapping[cst.CSTNode, CodeRange]:
    """`wrapper.resolve(PositionProvider)` without what libcst's resolver runs after every provider that is not
    batchable: a batched traversal with no visitors, which rebuilds the whole module for nothing."""
    if not hasattr(PositionProvider, "_gen"):  # a libcst whose provider API changed: its own way
        return wrapper.resolve(PositionProvider)
    return PositionProvider()._gen(wrapper)
