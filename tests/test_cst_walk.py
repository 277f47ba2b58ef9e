"""kvlint.analysis.cst_walk walks a tree as libcst's own `visit` does: same nodes, same order, nothing rebuilt."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.analysis import cst_walk
from kvlint.analysis.cst_walk import children, code_positions, parent_map, preorder, walk, walk_batched

# Many node kinds, so that every child field order libcst has for them is exercised.
SOURCE = textwrap.dedent(
    '''
    """Module docstring."""
    from __future__ import annotations
    from a.b import (c as d, e)
    from . import *
    import x.y as z

    @decorator(1, *args, key=value, **kwargs)
    async def function(p: int, /, q=2, *rest, r: "str" = f"{p!r:>{q}}", **more) -> list[int]:
        global g
        async with open(p) as handle, other():
            async for item in handle:
                yield item
        try:
            value = [i ** 2 for i in range(10) if i % 2 if not i]
        except (ValueError, TypeError) as error:
            raise RuntimeError("no") from error
        else:
            pass
        finally:
            del value
        if (n := len(rest)) > 1 and n is not None or ~n:
            return {k: v for k, v in more.items()}
        elif p in {1, 2}:
            return lambda a, *, b=1: a[1:2, ::3] @ b
        while True:
            break
        else:
            continue
        match p:
            case [1, *others] | {"k": _} if others:
                pass
            case Point(x=0, y=y) as point:
                pass
        x: int
        x += 1; y = x if x else -x
        assert x, "message"
        return (yield from generator)


    class Spec(Base, metaclass=Meta):
        attribute: int = 0  # a comment

        def method(self):
            nonlocal_value = ...
            return self.attribute[0].call()(1)
    '''
)


class _Events(cst.CSTVisitor):
    def __init__(self, skip: type | None = None) -> None:
        self.events: list[tuple[str, int]] = []
        self.skip = skip

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return self.skip is None or not isinstance(node, self.skip)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node)))


def test_walk_calls_the_visitor_as_libcst_does():
    module = cst.parse_module(SOURCE)
    for skip in (None, cst.FunctionDef, cst.Call):
        expected, walked = _Events(skip), _Events(skip)
        module.visit(expected)
        walk(module, walked)
        assert walked.events == expected.events


def test_children_preorder_and_parents_match_libcst():
    module = cst.parse_module(SOURCE)
    seen = _Events()
    module.visit(seen)
    nodes = list(preorder(module))
    assert [("visit", id(n)) for n in nodes] == [e for e in seen.events if e[0] == "visit"]
    parents = parent_map(module)
    for node in nodes:
        assert [id(c) for c in children(node)] == [id(c) for c in node.children]
        for child in node.children:
            assert parents[child] is node
    assert len(parents) == len(nodes) - 1


class _Batched(cst.BatchableCSTVisitor):
    def __init__(self, log: list) -> None:
        super().__init__()
        self.log = log

    def visit_Name(self, node: cst.Name) -> None:
        self.log.append(("name", node.value))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.log.append(("def", node.name.value))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.log.append(("end", original_node.name.value))


def test_walk_batched_calls_the_hooks_as_libcst_does():
    expected: list = []
    walked: list = []
    MetadataWrapper(cst.parse_module(SOURCE), unsafe_skip_copy=True).visit_batched([_Batched(expected)])
    walk_batched(MetadataWrapper(cst.parse_module(SOURCE), unsafe_skip_copy=True), [_Batched(walked)])
    assert walked == expected and expected


class _Visits(cst.BatchableCSTVisitor):
    """Visits only, as the per-file rules have: walked in a ModuleShape's order, without recursion."""

    def __init__(self, log: list) -> None:
        super().__init__()
        self.log = log

    def visit_Name(self, node: cst.Name) -> None:
        self.log.append(("name", node.value))

    def visit_Call(self, node: cst.Call) -> None:
        self.log.append(("call", len(node.args)))


def test_walk_batched_with_a_shape_calls_visits_as_libcst_does():
    expected: list = []
    walked: list = []
    MetadataWrapper(cst.parse_module(SOURCE), unsafe_skip_copy=True).visit_batched([_Visits(expected), _Batched([])])
    wrapper = MetadataWrapper(cst.parse_module(SOURCE), unsafe_skip_copy=True)
    walk_batched(wrapper, [_Visits(walked)], cst_walk.ModuleShape(wrapper.module))
    assert walked == expected and ("call", 4) in expected


def test_code_positions_are_libcsts():
    wrapper = MetadataWrapper(cst.parse_module(SOURCE), unsafe_skip_copy=True)
    assert dict(code_positions(wrapper)) == dict(wrapper.resolve(PositionProvider))


def test_a_node_class_whose_source_reads_otherwise_falls_back_to_libcsts_children(monkeypatch):
    """If libcst's source stops matching what the walk reads (a renamed helper: no field found), the first
    node of that class shows it, and the class uses libcst's own `children` from then on."""
    assert cst_walk._reads_libcst_right(), "this libcst's source reads otherwise: every walk takes the slow path"
    monkeypatch.setattr(cst_walk, "_GETTERS", {})
    monkeypatch.setattr(cst_walk, "_child_fields", lambda node_type: ())  # reads no visited field at all
    cst_walk._reads_libcst_right.cache_clear()
    assert not cst_walk._reads_libcst_right()
    module = cst.parse_module(SOURCE)
    seen = _Events()
    module.visit(seen)
    assert [("visit", id(n)) for n in cst_walk.preorder(module)] == [e for e in seen.events if e[0] == "visit"]
    cst_walk._reads_libcst_right.cache_clear()  # the next test reads the real source again


def test_the_fields_read_from_each_node_class_are_those_its_whole_source_names():
    """The walk reads each class's visited fields from the lines its compiled method covers (not by tokenizing
    the file): for every node class of libcst, the fields are those `inspect.getsource`'s text names, in order."""
    import inspect

    classes = [
        c
        for c in vars(cst).values()
        if isinstance(c, type) and issubclass(c, cst.CSTNode) and not inspect.isabstract(c)
    ]
    assert len(classes) > 100
    for node_class in classes:
        whole = inspect.getsource(node_class._visit_and_replace_children)
        expected = tuple(dict.fromkeys(cst_walk._VISITED_FIELD.findall(whole)))
        assert cst_walk._child_fields(node_class) == expected, node_class.__name__
    assert cst_walk._child_fields(cst.FormattedStringExpression)[-1] == "format_spec"  # past a two-line `def`
