"""Whether a module holds a node a per-file rule could report on, read from Python's own syntax tree.

libcst's parse costs about ten times Python's (`ast`), and most files a rule's text triggers let through
hold nothing it reports. These tests are what the rules' libcst visitors ask first of a node, asked of the
`ast` tree instead: a file where none holds is left unparsed by libcst. Each test may answer yes where the
rule then finds nothing, never no where it would report (tests/test_preparse.py holds them to that): the
shapes are the libcst ones (`kvlint.analysis.scaling.match_scaling`'s block size and DCP factor, KV101's
`isinstance` and `type(x) is` tests of a subject a group's spec may reach, `kvlint.analysis.flow.ast_group_flow`),
every name compared as libcst spells it — the caller hands a tree only when the file's code
(strings and comments aside) is ASCII, where Python's normalised identifiers are the written ones.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping

from kvlint.analysis.ast_spec_owners import SpecOwners, dotted_as_libcst
from kvlint.analysis.flow.ast_group_flow import group_flow
from kvlint.analysis.vocabulary import RESOLVER_NAME, dcp_aliases, is_dcp_name, sees_only_scheduler_config
from kvlint.analysis.words_before_times import words_before_times

# `type(x) <op> C`: the operators KV101 reads as a type test.
_TYPE_TEST_OPERATORS = (ast.Is, ast.Eq, ast.In, ast.IsNot, ast.NotEq, ast.NotIn)


_WORD_AFTER_TIMES = re.compile(r"(?<!\*)\*=?[ \t(]*(\w+)")

NodesByType = Mapping[type, list[ast.AST]]


def nodes_by_type(tree: ast.AST) -> dict[type, list[ast.AST]]:
    """Every node of `tree` by its class, in one walk: the rules' tests each read a few classes of it."""
    found: dict[type, list[ast.AST]] = {}
    pending = [tree]
    pop, push = pending.pop, pending.append
    while pending:
        node = pop()
        kind = type(node)
        bucket = found.get(kind)
        if bucket is None:
            bucket = found[kind] = []
        bucket.append(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:  # a loop, not `extend` of a generator: a quarter less on 54 files of 0.29.0
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)
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


def type_tests(nodes: NodesByType) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
    """Every `isinstance(…)` call of two arguments and every one-comparison `type(x) <op> …`, with the
    arguments of its call: its subject among them (libcst's first argument, positional, keyword or starred)."""
    for node in nodes.get(ast.Call, ()):
        # libcst counts positional, keyword and starred arguments alike
        if _called(node, "isinstance") and len(node.args) + len(node.keywords) == 2:
            yield node, _arguments(node)
    for node in nodes.get(ast.Compare, ()):
        left = node.left
        if (
            isinstance(left, ast.Call)
            and _called(left, "type")
            and len(left.args) + len(left.keywords) == 1
            and len(node.ops) == 1
            and isinstance(node.ops[0], _TYPE_TEST_OPERATORS)
        ):
            yield node, _arguments(left)


def _arguments(call: ast.Call) -> list[ast.AST]:
    return [*call.args, *(keyword.value for keyword in call.keywords)]


def _called(call: ast.Call, name: str) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == name


def has_scaling_candidate(nodes: NodesByType, aliases: frozenset[str], text: str = "") -> bool:
    """Whether some product or `*=` has a shape `match_scaling` accepts and KV102 goes on to judge: a block size
    times a DCP factor, outside the resolver itself. A block size is the `.block_size` of what may be a spec
    (kvlint.analysis.ast_spec_owners), or a name or attribute some `=` of the module assigns one (`bs =
    spec.block_size`: `match_scaling` asks that every assignment of it in its function is one); a factor is
    what `kvlint.analysis.scaling.dcp_factor_of` accepts, with any binding of a name standing for all. `text`:
    the module's. The cheap questions first: most products are of no block size, or by no DCP factor."""
    sizes = _BlockSizes(nodes, text)
    factors = _Factors(nodes, aliases)
    products = [
        (node, size, factor)
        for node in nodes.get(ast.BinOp, ())
        if isinstance(node.op, ast.Mult)
        for size, factor in ((node.left, node.right), (node.right, node.left))
    ]
    products += [
        (node, node.target, node.value) for node in nodes.get(ast.AugAssign, ()) if isinstance(node.op, ast.Mult)
    ]
    return any(
        sizes.may_be_named(size) and factors.may_scale(factor) and sizes.may_be_a_specs(size) and sizes.judged(node)
        for node, size, factor in products
    )


class _BlockSizes:
    """`kvlint.analysis.scaling._block_size_from_spec`'s necessary half, in two steps: the shape of a block size
    (`may_be_named`: `S.block_size`, or a name or attribute an `= X.block_size` assigns), then whether it may be a
    spec's (`may_be_a_specs`: S, or every X, may be a spec), read only for a product by a DCP factor."""

    def __init__(self, nodes: NodesByType, text: str):
        self._nodes = nodes
        self._owners = SpecOwners(nodes[ast.Module][0], nodes, text)
        # `<target> = <owner>.block_size`: (target dotted, owner)
        self._assigned = [
            (dotted_as_libcst(target), node.value.value)
            for node in nodes.get(ast.Assign, ())
            if isinstance(node.value, ast.Attribute) and node.value.attr == "block_size"
            for target in node.targets
        ]
        self._named = frozenset(target for target, _ in self._assigned)
        self._holders: frozenset[str] | None = None
        self._yardstick: set[int] | None = None

    def may_be_named(self, node: ast.AST) -> bool:
        name = identifier(node)
        if isinstance(node, ast.Attribute) and name == "block_size":
            return True
        # an attribute must name one (`self.kv_block_size`); any name may hold one
        return (
            name is not None
            and (isinstance(node, ast.Name) or "block_size" in name)
            and dotted_as_libcst(node) in self._named
        )

    def may_be_a_specs(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "block_size" and self._owners.may_own_spec(node.value):
            return True
        if self._holders is None:
            # As `kvlint.analysis.scaling` reads an assignment (`cst.Assign` only), its target the same dotted text.
            self._holders = frozenset(t for t, owner in self._assigned if self._owners.may_own_spec(owner))
        return dotted_as_libcst(node) in self._holders

    def judged(self, node: ast.AST) -> bool:
        """Outside a function named as the resolver (KV102's yardstick)."""
        if self._yardstick is None:
            self._yardstick = _inside_resolvers(self._nodes)
        return id(node) not in self._yardstick


def _inside_resolvers(nodes: NodesByType) -> set[int]:
    """The ids of the nodes whose innermost function is one named as the resolver: KV102 takes its products for
    the yardstick itself, never reports them (a function nested in it is its own)."""
    found: set[int] = set()
    for function in [*nodes.get(ast.FunctionDef, ()), *nodes.get(ast.AsyncFunctionDef, ())]:
        if function.name != RESOLVER_NAME:
            continue
        pending = list(ast.iter_child_nodes(function))
        while pending:
            node = pending.pop()
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.add(id(node))
                pending.extend(ast.iter_child_nodes(node))
    return found


class _Factors:
    """`kvlint.analysis.scaling.dcp_factor_of` (and its gate) for `ast`, answering yes where it could: a
    name's bindings are every plain `=`, annotated `=` and `:=` of that name in the module."""

    def __init__(self, nodes: NodesByType, aliases: frozenset[str]):
        self.aliases = aliases
        self.values: dict[str, list[ast.AST]] = {}
        for node in nodes.get(ast.Assign, ()):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.values.setdefault(target.id, []).append(node.value)
        for kind in (ast.AnnAssign, ast.NamedExpr):
            for node in nodes.get(kind, ()):
                if isinstance(node.target, ast.Name) and node.value is not None:
                    self.values.setdefault(node.target.id, []).append(node.value)

    def may_scale(self, node: ast.AST, depth: int = 0) -> bool:
        if depth > 3:  # dcp_factor_of's own bound
            return False
        if is_dcp_name(identifier(node), self.aliases):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):  # `dcp * pcp`
            return self.may_scale(node.left, depth) or self.may_scale(node.right, depth)
        if isinstance(node, ast.IfExp):
            # `dcp if <gate> else 1`, `1 if <gate> else <factor>`; a constant equal to 1 stands for libcst's "1"
            if _is_one(node.orelse) and is_dcp_name(identifier(node.body), self.aliases):
                return True
            return _is_one(node.body) and self.may_scale(node.orelse, depth + 1)
        if isinstance(node, ast.Name):
            return any(self.may_scale(value, depth + 1) for value in self.values.get(node.id, ()))
        return False


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1


def may_hold_scaling(text: str, aliases: frozenset[str]) -> bool:
    """The text-level half of `has_scaling_candidate`, decided before Python parses the file: whichever
    operand of a scaling comes first, the word before its `*` is a block size's name, a DCP size's or the
    `1` of a gate."""
    if any(is_dcp_name(word, aliases) for word in _WORD_AFTER_TIMES.findall(text)):  # `bs * dcp`, `x *= dcp`
        return True
    return any(word == "1" or "block_size" in word or is_dcp_name(word, aliases) for word in words_before_times(text))


def tests_a_layer_class(
    tree: ast.Module | None,
    nodes: NodesByType | None,
    module_path: str,
    scheduler_paths: tuple[str, ...],
    layer_classes: frozenset[str],
    containers,
    can_differ: Callable[[frozenset[str]], bool] | None = None,
) -> bool:
    """KV101's first questions of each type test: is it outside code that sees only the scheduler's config (a
    module `scheduler_paths` names, a class named `…Scheduler`), does it test a layer class, can a container
    the tree builds (`containers`: a ContainerReachability; None: not read, any can) hold one, does one the
    census builds answer it apart from its layers (`can_differ`, given the classes tested; None: yes), and can
    its subject be a KV cache group's spec (`kvlint.analysis.flow.ast_group_flow`)? No tree (`nodes` of `tree`): yes."""
    if sees_only_scheduler_config(module_path, [], scheduler_paths):
        return False
    if tree is None or nodes is None:
        return True
    flow, skipped = None, None
    for node, arguments in type_tests(nodes):
        checked = _names_under(node) & layer_classes
        if (
            checked
            and (containers is None or any(map(containers.may_hold_instance_of, checked)))
            and (can_differ is None or can_differ(checked))
        ):
            skipped = _in_scheduler_classes(nodes) if skipped is None else skipped
            if id(node) in skipped:
                continue
            flow = group_flow(tree) if flow is None else flow
            if any(flow.may_hold_group_spec(argument, flow.chains[id(node)]) for argument in arguments):
                return True
    return False


def _in_scheduler_classes(nodes: NodesByType) -> set[int]:
    """The ids of the nodes inside a class `sees_only_scheduler_config` gives the scheduler's config."""
    classes = (node for node in nodes.get(ast.ClassDef, ()) if sees_only_scheduler_config("", [node.name], ()))
    return {id(inner) for node in classes for inner in ast.walk(node)}


def could_hold_scaling(text: str, nodes: Callable[[], NodesByType | None]) -> bool:
    """KV102's shape, from the text first, then from the tree `nodes()` gives (None: no tree, so yes)."""
    aliases = dcp_aliases(text)
    if not may_hold_scaling(text, aliases):
        return False
    found = nodes()
    return found is None or has_scaling_candidate(found, aliases, text)
