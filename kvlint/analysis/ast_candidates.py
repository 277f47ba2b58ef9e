"""Whether a module holds a node a per-file rule could report on, read from Python's own syntax tree.

libcst's parse costs about ten times Python's (`ast`), and most files a rule's text triggers let through
hold nothing it reports. These tests are what the rules' libcst visitors ask first of a node, asked of the
`ast` tree instead: a file where none holds is left unparsed by libcst. Each test may answer yes where the
rule then finds nothing, never no where it would report (tests/test_preparse.py holds them to that): the
shapes are the libcst ones (`kvlint.analysis.scaling.match_scaling`, KV101's `isinstance` and `type(x) is`
tests), every name compared as libcst spells it — the caller hands a tree only when the file's code
(strings and comments aside) is ASCII, where Python's normalised identifiers are the written ones.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping

from kvlint.analysis.vocabulary import dcp_aliases, is_dcp_name

# `type(x) <op> C`: the operators KV101 reads as a type test.
_TYPE_TEST_OPERATORS = (ast.Is, ast.Eq, ast.In, ast.IsNot, ast.NotEq, ast.NotIn)


# The word before a `*` (or `*=`), across closing parentheses, blanks, line continuations and comments: a
# product's left operand ends so (a name or attribute ends in its identifier, a gate `… else 1` in `1`).
_WORD_BEFORE_TIMES = re.compile(r"\b(\w+)[\s)\\]*(?:#[^\r\n]*[\r\n][\s)\\]*)*\*(?!\*)")

_WORD_AFTER_TIMES = re.compile(r"(?<!\*)\*=?[ \t(]*(\w+)")

NodesByType = Mapping[type, list[ast.AST]]


def nodes_by_type(tree: ast.AST) -> dict[type, list[ast.AST]]:
    """Every node of `tree` by its class, in one walk: the rules' tests each read a few classes of it."""
    found: dict[type, list[ast.AST]] = {}
    pending = [tree]
    while pending:
        node = pending.pop()
        kind = type(node)
        bucket = found.get(kind)
        if bucket is None:
            bucket = found[kind] = []
        bucket.append(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                pending.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                pending.append(value)
    return found


def identifier(node: ast.AST) -> str | None:
    """A name's or an attribute's last name (`kvlint.analysis.scaling.identifier` for `ast`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _names_under(node: ast.AST) -> frozenset[str]:
    return frozenset(name for child in ast.walk(node) if (name := identifier(child)) is not None)


def type_test_names(nodes: NodesByType) -> Iterator[frozenset[str]]:
    """For every `isinstance(…)` call of two arguments and every one-comparison `type(x) <op> …`, the names
    under it: a superset of the classes it tests (its subject's names come along)."""
    for node in nodes.get(ast.Call, ()):
        # libcst counts positional, keyword and starred arguments alike
        if _called(node, "isinstance") and len(node.args) + len(node.keywords) == 2:
            yield _names_under(node)
    for node in nodes.get(ast.Compare, ()):
        left = node.left
        if (
            isinstance(left, ast.Call)
            and _called(left, "type")
            and len(left.args) + len(left.keywords) == 1
            and len(node.ops) == 1
            and isinstance(node.ops[0], _TYPE_TEST_OPERATORS)
        ):
            yield _names_under(node)


def _called(call: ast.Call, name: str) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == name


def has_scaling_candidate(nodes: NodesByType, aliases: frozenset[str]) -> bool:
    """Whether some product or `*=` has the shape `match_scaling` accepts before it asks the module where
    a name comes from: a block size (a name or attribute naming `block_size`) times a DCP size, gated
    (`dcp if … else 1`) or not."""
    for node in nodes.get(ast.BinOp, ()):
        if isinstance(node.op, ast.Mult):
            for size, factor in ((node.left, node.right), (node.right, node.left)):
                if _names_block_size(size) and _dcp_factor(factor, aliases):
                    return True
                # What plugins write: `bs * dcp` (a name holding a block size), `pcp * dcp` (an alias's value)
                if isinstance(size, ast.Name) and is_dcp_name(identifier(factor), aliases):
                    return True
    for node in nodes.get(ast.AugAssign, ()):
        if isinstance(node.op, ast.Mult) and _dcp_factor(node.value, aliases):
            if isinstance(node.target, ast.Name) or _names_block_size(node.target):
                return True
    return False


def may_hold_scaling(text: str, aliases: frozenset[str]) -> bool:
    """The text-level half of `has_scaling_candidate`, decided before Python parses the file: whichever
    operand of a scaling comes first, the word before its `*` is a block size's name, a DCP size's or the
    `1` of a gate."""
    if any(is_dcp_name(word, aliases) for word in _WORD_AFTER_TIMES.findall(text)):  # `bs * dcp`, `x *= dcp`
        return True
    return any(
        word == "1" or "block_size" in word or is_dcp_name(word, aliases) for word in _WORD_BEFORE_TIMES.findall(text)
    )


def _names_block_size(node: ast.AST) -> bool:
    name = identifier(node)
    return name is not None and "block_size" in name


def _dcp_factor(node: ast.AST, aliases: frozenset[str]) -> bool:
    if is_dcp_name(identifier(node), aliases):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):  # `dcp * pcp`
        return _dcp_factor(node.left, aliases) or _dcp_factor(node.right, aliases)
    # `dcp if <gate> else 1`, `1 if <gate> else dcp`; any constant equal to 1 stands for libcst's Integer "1"
    if not isinstance(node, ast.IfExp):
        return False
    for size, other in ((node.body, node.orelse), (node.orelse, node.body)):
        if is_dcp_name(identifier(size), aliases) and isinstance(other, ast.Constant) and other.value == 1:
            return True
    return False


def tests_a_layer_class(nodes: NodesByType, layer_classes: frozenset[str], containers) -> bool:
    """KV101's first two questions of each type test: does it test a layer class, and can a container the
    tree builds (`containers`: a ContainerReachability; None: not read, any can) hold one?"""
    for names in type_test_names(nodes):
        checked = names & layer_classes
        if checked and (containers is None or any(map(containers.may_hold_instance_of, checked))):
            return True
    return False


def could_hold_scaling(text: str, nodes: Callable[[], NodesByType | None]) -> bool:
    """KV102's shape, from the text first, then from the tree `nodes()` gives (None: no tree, so yes)."""
    aliases = dcp_aliases(text)
    if not may_hold_scaling(text, aliases):
        return False
    found = nodes()
    return found is None or has_scaling_candidate(found, aliases)
