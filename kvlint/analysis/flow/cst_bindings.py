"""The syntax provenance reads with libcst: dotted names, the bindings a name has in a scope (assignments,
loops, parameters, comprehensions), the calls of a function and the container checks on a variable.

Plain helpers without any notion of groups or layers; kvlint.analysis.flow.provenance gives them meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from kvlint.analysis.cst_walk import children, walk
from kvlint.analysis.vocabulary import CONTAINER_CLASS

FUNCTION_LIKE = (cst.FunctionDef, cst.Lambda)
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def dotted(node: cst.CSTNode) -> str:
    """Source-like text for names and attribute chains (`self.kv_cache_config.kv_cache_groups`)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    if isinstance(node, cst.Call):
        return f"{dotted(node.func)}(…)"
    if isinstance(node, cst.Subscript):
        return f"{dotted(node.value)}[…]"
    return "…"


def call_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Name):
            return node.func.value
        if isinstance(node.func, cst.Attribute):
            return node.func.attr.value
    return None


@dataclass
class Binding:
    value: cst.BaseExpression | None  # the assigned value, or the loop's iterable
    path: tuple[int, ...]  # position inside a destructured target
    is_loop: bool
    param: cst.Param | None = None
    function: cst.FunctionDef | None = None
    # Known not to be a UniformTypeKVCacheSpecs container here (an isinstance test said so).
    narrowed: bool = False


def annotation_name(param: cst.Param) -> str | None:
    if param.annotation is None:
        return None
    annotation = param.annotation.annotation
    if isinstance(annotation, cst.SimpleString):
        return (
            annotation.evaluated_value.split(".")[-1].strip() if isinstance(annotation.evaluated_value, str) else None
        )
    if isinstance(annotation, (cst.Name, cst.Attribute)):
        return dotted(annotation).split(".")[-1]
    return None


def all_params(params: cst.Parameters) -> list[cst.Param]:
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            found.append(extra)
    return found


def positional_index(function: cst.FunctionDef, param: cst.Param) -> int | None:
    positional = [*function.params.posonly_params, *function.params.params]
    for index, candidate in enumerate(positional):
        if candidate is param:
            return index
    return None


def is_static(function: cst.FunctionDef) -> bool:
    """`@staticmethod`: called through an attribute, it takes no bound first argument."""
    return any(dotted(decorator.decorator) == "staticmethod" for decorator in function.decorators)


def argument_for(call: cst.Call, name: str, position: int | None, via_attribute: bool) -> cst.BaseExpression | None:
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == name:
            return argument.value
    if position is None:
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    # `self.method(x)`: the bound `self` takes position 0 of the definition.
    index = position - 1 if via_attribute else position
    return positional[index] if 0 <= index < len(positional) else None


def target_names(target: cst.BaseExpression, path: tuple[int, ...] = ()) -> list[tuple[str, tuple[int, ...]]]:
    if isinstance(target, cst.Name):
        return [(target.value, path)]
    if isinstance(target, (cst.Tuple, cst.List)):
        found = []
        for index, element in enumerate(target.elements):
            found.extend(target_names(element.value, (*path, index)))
        return found
    return []


def comprehension_bindings(comprehension: cst.CSTNode, name: str) -> list[Binding]:
    found = []
    clause = comprehension.for_in
    while clause is not None:
        for bound, path in target_names(clause.target):
            if bound == name:
                found.append(Binding(clause.iter, path, True))
        clause = clause.inner_for_in
    return found


class BindingCollector(cst.CSTVisitor):
    """Names bound in one function body (not in nested functions, classes or comprehensions)."""

    def __init__(self, function: cst.FunctionDef | None):
        self.function = function
        self.bindings: dict[str, list[Binding]] = {}

    def _add(self, target: cst.BaseExpression, value: cst.BaseExpression | None, is_loop: bool) -> None:
        for name, path in target_names(target):
            self.bindings.setdefault(name, []).append(Binding(value, path, is_loop))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.bindings.setdefault(node.name.value, []).append(Binding(None, (), False))
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return False

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return False

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return False

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._add(target.target, node.value, False)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._add(node.target, node.value, False)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._add(node.target, None, False)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._add(node.target, node.value, False)

    def visit_For(self, node: cst.For) -> None:
        self._add(node.target, node.iter, True)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._add(node.asname.name, None, False)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._add(node.name.name, None, False)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            bound = alias.asname.name if alias.asname else alias.name
            if isinstance(bound, cst.Name):
                self._add(bound, None, False)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            bound = alias.asname.name if alias.asname else alias.name
            if isinstance(bound, cst.Name):
                self._add(bound, None, False)


class ContainerCheckFinder(cst.CSTVisitor):
    """The subjects (dotted) of every `isinstance(<subject>, …UniformTypeKVCacheSpecs…)` test."""

    def __init__(self) -> None:
        self.tested: set[str | None] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if call_name(node) == "isinstance" and len(node.args) == 2:
            if CONTAINER_CLASS in cst.Module([]).code_for_node(node.args[1].value):
                self.tested.add(dotted(node.args[0].value))


# `SpecFlow.remembered(question, node, answer)`: what a reader takes of a whole function, block or statement, read
# once for all the checks and sites in it (read per site, a crafted function of many sites cost their square or cube).
Remembered = Callable[[str, cst.CSTNode, Callable[[cst.CSTNode], object]], object]


def asked(question: str, node: cst.CSTNode, answer: Callable[[cst.CSTNode], object], remembered: Remembered | None):
    """`answer(node)`, kept by `remembered` when given (a lint's); without one (a caller outside a lint), read now."""
    return remembered(question, node, answer) if remembered is not None else answer(node)


def statement_places(block: cst.IndentedBlock) -> dict[int, int]:
    """Each statement of `block` by id → its place in the block (asked of SpecFlow.remembered as "statement
    places": a site's place read once per block, not by a scan of the block per site)."""
    return {id(statement): place for place, statement in enumerate(block.body)}


def container_subjects(statement: cst.CSTNode, memo: dict) -> frozenset[str | None]:
    """The subjects `statement` tests for a container, kept in `memo` per statement; an `if` heading an `elif`
    chain holds the rest of the chain, so each `elif` is read once and its answer shared up the chain."""
    chain: list[cst.CSTNode] = []
    node, below = statement, frozenset()
    while ("container tests", node) not in memo:
        chain.append(node)
        if not (isinstance(node, cst.If) and isinstance(node.orelse, cst.If)):
            break
        node = node.orelse
    else:
        below = memo["container tests", node]
    for node in reversed(chain):
        below = below | _container_subjects_here(node)
        memo["container tests", node] = below
    return below


def _container_subjects_here(statement: cst.CSTNode) -> frozenset[str | None]:
    """The subjects `statement` tests for a container, but in an `elif` that follows it (read as its own)."""
    finder = ContainerCheckFinder()
    if isinstance(statement, cst.If) and isinstance(statement.orelse, cst.If):
        for child in children(statement):
            if child is not statement.orelse:
                walk(child, finder)
    else:
        walk(statement, finder)
    return frozenset(finder.tested)


class _ReturnFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.values: list[cst.BaseExpression] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function's returns are its own

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.values.append(node.value)


def returned_values(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    finder = _ReturnFinder()
    walk(function.body, finder)
    return finder.values
