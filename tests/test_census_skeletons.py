"""A class parsed without its methods (kvlint.analysis.census.skeletons): each method, once asked for, is what a
whole parse of the class gives — decorators, lines and columns — and a class whose methods cannot be cut by
their lines is not given a skeleton."""

from __future__ import annotations

import ast
from textwrap import dedent

import pytest

from kvlint.analysis.census.constructor_shapes import method
from kvlint.analysis.census.parsing import ModuleTrees
from kvlint.analysis.census.skeletons import complete, parse_skeleton

HARD = '''
@register
class Model(Base, metaclass=Meta):
    """A docstring.
def not_a_method(self):
    """
    kind = "mla"

    def __init__(self, config):
        self.attn = self._build(config)

    @property
    def name(
        self,
    ) -> str:
        text = """
    def inside_a_string(self):
"""
        return text

    @staticmethod
    @cache
    def _build(config):
        def nested():
            return Attention()
        # a comment at the body's indentation
    # and one shallower
        values = [
            1,
    ]
        return nested()

    async def fetch(self):
        return 1

    def last(self):
        return {
            "a": 1,
        }  # trailing
'''


def _full(text: str, first: int) -> ast.ClassDef:
    module = ast.parse("\n" * (first - 1) + text)
    cls = module.body[0]
    assert isinstance(cls, ast.ClassDef)
    return cls


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=True)


def _stubs(cls: ast.ClassDef) -> list[str]:
    """The methods still stubs: one line, `...` for a body."""
    return [
        s.name
        for s in cls.body
        if isinstance(s, ast.FunctionDef)
        and s.end_lineno == s.lineno
        and isinstance(s.body[0], ast.Expr)
        and getattr(s.body[0].value, "value", None) is ...
    ]


@pytest.mark.parametrize("first", [1, 40])
def test_each_method_asked_for_is_what_a_whole_parse_gives(first):
    text = dedent(HARD).strip("\n")
    skeleton = parse_skeleton(text, first, "m.py")
    whole = _full(text, first)
    assert skeleton is not None
    assert _stubs(skeleton) == ["name", "_build", "last"]  # the constructor is parsed, the rest waits
    for name in ("_build", "name", "last", "__init__"):
        real = next(s for s in whole.body if getattr(s, "name", None) == name)
        assert _dump(method(skeleton, name)) == _dump(real)
    assert _stubs(skeleton) == []
    assert method(skeleton, "fetch") is None  # an async method is no constructor helper, as before
    assert skeleton.end_lineno == whole.end_lineno  # the class ends at its last method's last line of code
    skeleton.end_col_offset = whole.end_col_offset  # (its column is the line's end, comment included)
    assert _dump(complete(skeleton)) == _dump(whole)


def test_a_class_whose_methods_cannot_be_cut_by_their_lines_gets_no_skeleton():
    unpaired = "class A:\n    def f(self):\n        return ''' one\n\n    def g(self):\n        return 1\n"
    assert parse_skeleton(unpaired, 1, "m.py") is None
    shallow_continuation = (
        "class A:\n    def f(self):\n        return foo(1,\n    2)\n\n    def g(self):\n        pass\n"
    )
    assert parse_skeleton(shallow_continuation, 1, "m.py") is None
    only_a_constructor = "class A:\n    def __init__(self):\n        pass\n"
    assert parse_skeleton(only_a_constructor, 1, "m.py") is None


def test_the_module_trees_give_a_skeleton_to_the_walk_and_a_whole_class_to_the_platform_reach():
    data = ("import x\n\n\n" + dedent(HARD).strip("\n") + "\n").encode()
    trees = ModuleTrees({"m.py": data})
    (deferred,) = [s for s in trees.statements("m.py") if not isinstance(s, ast.stmt)]
    cls = trees.definition("m.py", deferred)
    assert isinstance(cls, ast.ClassDef)
    assert _stubs(cls) == ["name", "_build", "last"]
    line = next(i for i, text in enumerate(data.decode().split("\n"), 1) if "return Attention()" in text)
    assert [ast.unparse(call) for call in trees.calls_at("m.py", line)] == ["Attention()"]
    block, whole = trees.block_at("m.py", line), ast.parse(data).body[1]
    assert block is cls and _stubs(cls) == []
    cls.end_col_offset = whole.end_col_offset  # type: ignore[attr-defined]
    assert _dump(cls) == _dump(whole)


BROKEN_NEIGHBOUR = """class A:
    def __init__(self):
        self.x = 1

    def good(self, value):
        return value + 1

    def broken(self):
        return (
"""


def test_a_method_is_parsed_alone_so_a_broken_neighbour_neither_hides_it_nor_crashes_the_walk():
    # The class cannot be parsed whole (as Python could not import it); its stubbed methods can each be asked
    # for: the good one is what its own lines say, the broken one is none.
    skeleton = parse_skeleton(BROKEN_NEIGHBOUR, 1, "m.py")
    assert skeleton is not None
    good = method(skeleton, "good")
    assert good is not None and ast.unparse(good) == "def good(self, value):\n    return value + 1"
    assert (good.lineno, good.col_offset) == (5, 4)
    assert method(skeleton, "broken") is None
    assert complete(skeleton) is skeleton


def test_a_method_that_does_not_parse_alone_is_taken_from_the_whole_class():
    from kvlint.analysis.census.skeletons import _parse_method

    whole = "class A:\n    def g(self):\n        return 0\n\n    def f(self):\n        return 1\n"
    # Its own lines out of their class (no indentation to sit in): the whole class, at its lines, is parsed.
    found = _parse_method("def f(self):\n        return 1", 7, whole, 3)
    assert found is not None and found.name == "f" and (found.lineno, found.col_offset) == (7, 4)
    assert _parse_method("def f(self):\n        return (", 7, whole.replace("1\n", "(\n"), 3) is None


def test_a_one_line_method_ends_on_its_own_line():
    text = "class A:\n    def kind(self): return 1\n    layer_cls = Attention\n\n    def other(self):\n        pass\n"
    skeleton = parse_skeleton(text, 1, "m.py")
    assert skeleton is not None
    assert [type(s).__name__ for s in skeleton.body] == ["FunctionDef", "Assign", "FunctionDef"]
    assert ast.unparse(method(skeleton, "kind")) == "def kind(self):\n    return 1"
