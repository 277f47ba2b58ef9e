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


SMALL = """VALUE = make(
    1,
)


@decorator
def first():
    return 1


class Outer:
    class Inner:
        pass
"""


def test_the_statement_holding_a_line_is_found_at_its_first_and_last_lines_and_none_outside():
    trees = ModuleTrees({"m.py": SMALL.encode()})
    # A small statement over three lines: its first and last lines, not the blank one after it.
    assert [isinstance(trees.block_at("m.py", line), ast.Assign) for line in (1, 3, 4)] == [True, True, False]
    # A deferred definition: from its decorator to its last line; a blank line before it is in no statement.
    assert [getattr(trees.block_at("m.py", line), "name", None) for line in (5, 6, 8)] == [None, "first", "first"]
    deferred = next(s for s in trees.statements("m.py") if isinstance(s, Deferred) and s.name == "first")
    assert trees.block_at("m.py", deferred.last).name == "first"
    assert trees.block_at("m.py", 99) is None
    assert trees.calls_at("m.py", 99) == []  # no statement there: no calls
    assert [ast.unparse(c) for c in trees.calls_at("m.py", 1)] == ["make(1)"]


def test_a_nested_class_is_found_by_its_own_name_and_line():
    trees = ModuleTrees({"m.py": SMALL.encode()})
    assert trees.class_at("m.py", 12, "Inner").name == "Inner"
    assert trees.class_at("m.py", 11, "Outer").name == "Outer"
    assert trees.class_at("m.py", 12, "Outer") is None  # not on that line


def test_a_module_parsed_whole_is_not_cut_again():
    trees = ModuleTrees({"m.py": SMALL.encode()})
    whole = trees.tree("m.py")
    assert trees.statements("m.py") == whole.body  # the whole parse's statements, none deferred


def test_a_triple_quote_is_tracked_across_strings_that_touch():
    from kvlint.analysis.census.quotes import inside_strings as _inside_strings

    assert _inside_strings('x = """"""\ny', 2) == bytearray([0, 0])  # an empty string opens and closes
    assert _inside_strings('"""a""""""\ny', 2) == bytearray([0, 1])  # one closes, the next opens right after it
    assert _inside_strings("'''\nb'''\nc", 3) == bytearray([0, 1, 0])
    assert _inside_strings("'''\n\"\"\"\nc", 3) == bytearray([0, 1, 1])  # the other kind closes nothing
    assert _inside_strings('x\n"""\na\nb', 4) == bytearray([0, 0, 1, 1])  # never closed: to the end
    assert _inside_strings('\n"""\na\n"""\nb', 5) == bytearray([0, 0, 1, 1, 0])  # a line break first counts


def test_small_statements_parsed_together_are_those_each_block_gives_alone():
    data = b'"""Doc."""\nimport a\nx = (1,\n    2)\ndef f():\n    pass\ny = 2; z = 3\n'
    statements = ModuleTrees({"m.py": data}).statements("m.py")
    kinds = [s.kind if isinstance(s, Deferred) else type(s).__name__ for s in statements]
    assert kinds == ["Expr", "Import", "Assign", "function", "Assign", "Assign"]
    assert [getattr(s, "lineno", None) for s in statements] == [1, 2, 3, None, 7, 7]
    # A block cut inside a statement (a line at column 0 within brackets) does not parse alone: the whole parse.
    split = b"x = foo(\n1, 2)\ndef f():\n    pass\n"
    assert [type(s).__name__ for s in ModuleTrees({"m.py": split}).statements("m.py")] == ["Assign", "FunctionDef"]


def test_a_small_statement_that_does_not_parse_leaves_no_statements():
    assert ModuleTrees({"m.py": b"x = (\n"}).statements("m.py") == []


def test_source_lines_are_the_lines_asked_for_without_the_last_ones_end():
    from kvlint.analysis.census.parsing import ModuleTrees

    trees = ModuleTrees({"m.py": b"class A:\n    x = 1\n\nlast = 2", "n.py": b"one\ntwo\n"})
    assert trees.source_lines("m.py", 1, 2) == "class A:\n    x = 1"
    assert trees.source_lines("m.py", 4, 4) == "last = 2"  # no newline at the end of the file
    assert trees.source_lines("m.py", 2, 9) == "    x = 1\n\nlast = 2"
    assert trees.source_lines("m.py", 0, 4) == ""  # no line 0
    assert trees.source_lines("n.py", 2, 2) == "two"
    assert trees.source_lines("n.py", 3, 3) == ""  # the empty line after the last newline
