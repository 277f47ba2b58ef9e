"""The census parses a module's top-level classes and functions only when it reaches them
(kvlint.analysis.census.parsing.ModuleTrees): what it reads must be what a whole parse gives."""

from __future__ import annotations

import ast

from kvlint.analysis.census.parsing import Deferred, ModuleTrees

MODULE = '''"""A docstring whose lines
start at column 0
class NotAClass:
"""
try:
    from a import B
except ImportError:
    B = None

if TYPE_CHECKING:
    from c import D
else:
    D = object


@decorator(
    "x",
)
class Layer(B):
    """Its own docstring,
with a line at column 0."""

    def __init__(self):
        self.attn = Attention()


async def helper():
    return 1
'''


def test_a_module_is_cut_into_small_statements_and_deferred_definitions():
    trees = ModuleTrees({"m.py": MODULE.encode()})
    statements = trees.statements("m.py")
    deferred = [s for s in statements if isinstance(s, Deferred)]
    # Lines inside the docstrings start nothing: `NotAClass` is text, the class is one block with its decorator.
    assert [(d.kind, d.name) for d in deferred] == [("class", "Layer"), ("function", "helper")]
    parsed = [s for s in statements if not isinstance(s, Deferred)]
    assert [type(s).__name__ for s in parsed] == ["Expr", "Try", "If"]
    layer = trees.definition("m.py", deferred[0])
    whole = ast.parse(MODULE)
    # At its own lines, as the whole parse has it (sites name "module:line").
    assert ast.dump(layer, include_attributes=True) == ast.dump(whole.body[3], include_attributes=True)
    assert trees.class_at("m.py", layer.lineno, "Layer") is layer
    assert [c.func.id for c in trees.calls_at("m.py", 24)] == ["Attention"]


def test_a_string_spanning_blocks_falls_back_to_the_whole_parse():
    # An odd triple quote in a comment makes the cut unsafe: the whole module's statements, nothing deferred.
    text = MODULE.replace("async def helper", '# a stray """ quote\nasync def helper')
    trees = ModuleTrees({"m.py": text.encode()})
    statements = trees.statements("m.py")
    assert not any(isinstance(s, Deferred) for s in statements)
    assert [type(s).__name__ for s in statements] == [type(s).__name__ for s in ast.parse(text).body]


def test_a_definition_that_does_not_parse_alone_is_found_in_the_whole_module():
    # A backslash continuation at column 0 cuts a function's block short: the whole parse has the statement.
    text = "def f():\n    return 1 + \\\n2\n"
    trees = ModuleTrees({"m.py": text.encode()})
    [deferred] = [s for s in trees.statements("m.py") if isinstance(s, Deferred)]
    statement = trees.definition("m.py", deferred)
    assert isinstance(statement, ast.FunctionDef) and statement.name == "f"
