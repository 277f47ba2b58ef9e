"""Where a function sizes blocks, and what it is: the sites the matrix evaluates, the inline DCP gates,
first-layer picks, and whether it runs on the scheduler's or a worker's view of the config.

A sizing site is `S.block_size * <DCP size>` (or `*=`), or a call of a helper given a spec. Functions
are module-level functions and methods of top-level classes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kvlint.analysis.ast_helpers import dotted, walk
from kvlint.analysis.sizing.program import Module
from kvlint.analysis.sizing.values import Opaque
from kvlint.analysis.vocabulary import is_dcp_name, sees_only_scheduler_config


def _mentions_dcp(node: ast.AST, module: Module) -> bool:
    for child in walk(node):
        name = child.id if isinstance(child, ast.Name) else child.attr if isinstance(child, ast.Attribute) else None
        if name is not None and is_dcp_name(name, module.dcp_aliases):
            return True
    return False


def _spec_like(name: str) -> bool:
    lowered = name.lower()
    return "spec" in lowered and not lowered.endswith("specs")


def _is_block_size_of_spec(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr == "block_size"):
        return False
    owner = dotted(node.value) or ast.unparse(node.value)
    return "spec" in owner.lower()


def functions(module: Module):
    """(qualname, def, enclosing class names) for module-level functions and methods of top-level classes."""
    for node in module.tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node, []
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item, [node.name]


def sizing_sites(function: ast.FunctionDef, module: Module, helpers: set[str]) -> dict[int, ast.AST]:
    """The expressions of `function` that size a block: by id (the evaluator records their values)."""
    sites: dict[int, ast.AST] = {}
    segment = module.segment(function)
    if "block_size" not in segment and not any(name in segment for name in helpers):
        return sites
    for node in walk(function):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for spec_side, other in ((node.left, node.right), (node.right, node.left)):
                if _is_block_size_of_spec(spec_side) and _mentions_dcp(other, module):
                    sites[id(node)] = node
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult):
            target = dotted(node.target) or ""
            if "block_size" in target and _mentions_dcp(node.value, module):
                sites[id(node)] = node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            if node.args and any("spec" in ast.unparse(a).lower() for a in node.args[:1]):
                sites[id(node)] = node
    return sites


def spec_roots(function: ast.FunctionDef) -> set[str]:
    return {
        a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs] if _spec_like(a.arg)
    }


def has_dcp_param(function: ast.FunctionDef, module: Module) -> bool:
    params = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    return any(is_dcp_name(a.arg, module.dcp_aliases) for a in params)


def site_spec_from_parameter(site: ast.AST, spec_params: set[str]) -> bool:
    """Whether the spec a site sizes is the enclosing function's own parameter (a helper, not a path)."""
    target = site.args[0] if isinstance(site, ast.Call) else site
    for child in walk(target):
        if isinstance(child, ast.Name) and child.id in spec_params:
            return True
        if isinstance(child, ast.Attribute) and child.attr == "kv_cache_spec":
            return False
    return False


def _parents(function: ast.FunctionDef) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in walk(function):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def widen(sites: dict[int, ast.AST], function: ast.FunctionDef) -> dict[int, ast.AST]:
    """`S.block_size * dcp if <test> else S.block_size`: the whole conditional is the span."""
    if not sites:
        return sites
    parents = _parents(function)
    widened: dict[int, ast.AST] = {}
    for node in sites.values():
        parent = parents.get(id(node))
        while isinstance(parent, ast.IfExp) and node is not parent.test:
            other = parent.orelse if node is parent.body else parent.body
            if "block_size" not in ast.unparse(other):
                break
            node, parent = parent, parents.get(id(parent))
        widened[id(node)] = node
    # A site inside another site is part of it.
    inner = {id(c) for s in widened.values() for c in walk(s) if c is not s}
    return {k: v for k, v in widened.items() if k not in inner}


def gates(function: ast.FunctionDef, module: Module) -> dict[int, ast.IfExp]:
    """`dcp if <test on a spec> else 1` and kin: inline predicates that decide DCP sharding."""
    found: dict[int, ast.IfExp] = {}
    for node in walk(function):
        if isinstance(node, ast.IfExp) and "spec" in ast.unparse(node.test).lower():
            body, orelse = _mentions_dcp(node.body, module), _mentions_dcp(node.orelse, module)
            if body != orelse and not _mentions_dcp(node.test, module):
                found[id(node)] = node
    return found


def first_layer_picks(function: ast.FunctionDef) -> list[ast.Call]:
    """`next(iter(X.kv_cache_specs.values()))`."""
    picks = []
    for node in walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "next"
            and node.args
            and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Name)
            and node.args[0].func.id == "iter"
            and "kv_cache_specs" in ast.unparse(node.args[0])
        ):
            picks.append(node)
    return picks


def role(module: Module, qualname: str, classes: list[str], scheduler_only_paths: tuple[str, ...]) -> str:
    """Which view of the config a path sees: "scheduler" (flattened), "worker" (containers) or "both"."""
    if sees_only_scheduler_config(module.path, classes, scheduler_only_paths):
        return "scheduler"
    parts = module.path.split("/")
    if any("worker" in p or "model_runner" in p for p in parts) or any(c.endswith("Worker") for c in classes):
        return "worker"
    return "both"


@dataclass
class Candidate:
    """A function that sizes blocks (a path) or decides a spec's DCP factor (a helper), with its sites."""

    module: Module
    qualname: str
    function: ast.FunctionDef
    classes: list[str]
    spec_params: set[str]
    sites: dict[int, ast.AST]

    @property
    def name(self) -> str:
        return f"{self.module.dotted}:{self.qualname}"

    @property
    def receiver(self):
        params = [*self.function.args.posonlyargs, *self.function.args.args]
        is_static = any(dotted(d) == "staticmethod" for d in self.function.decorator_list)
        if self.classes and params and not is_static and params[0].arg in ("self", "cls"):
            return Opaque(params[0].arg)
        return None
