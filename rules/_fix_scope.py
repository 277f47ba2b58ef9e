"""What a KV101 fix must know of the scope it writes into (rules/_unwrap_fix.py).

- the names the rewrite calls (`all`, `iter_layer_specs`, the tree's helper) that the check's scope rebinds:
  a parameter or local `all`, `from numpy import all`, a module's own `iter_layer_specs` — the rewrite would
  call that instead, so there is no fix;
- a use of the checked value the check guards (`spec.mamba_type` after it), through any expression bound to
  that value (`spec = g.kv_cache_spec` makes `g.kv_cache_spec` and `spec` one value);
- the calls of a per-spec function that reach that very function, not another class's method of its name;
- a loop name the rewritten check does not already use.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import chain, count

import libcst as cst

from kvlint.analysis.cst_walk import children, preorder
from kvlint.analysis.flow.cst_bindings import (
    COMPREHENSIONS,
    all_params,
    comprehension_bindings,
    dotted,
    target_names,
)
from kvlint.analysis.flow.provenance import STATEMENTS
from kvlint.analysis.layer_helpers import LAYER_ITERATOR
from kvlint.analysis.vocabulary import INTERFACE_MODULE

# The names a rewrite may call that live in no import: the builtins it relies on.
BUILTINS = ("all", "any", "isinstance", "type")
_LOOP_NAMES = ("spec", "layer_spec", "layer")
# A block that ends so skips what follows it: after `if not check: continue`, the rest is narrowed.
_EXITS = (cst.Continue, cst.Break, cst.Return, cst.Raise)
INTERFACE = INTERFACE_MODULE.removesuffix(".py").replace("/", ".")


def rebinding(flow, node: cst.CSTNode, names: tuple[str, ...], own_module: str) -> str | None:
    """How the scope of `node` rebinds one of `names` (a sentence naming the name and where), or None.

    The interface module's own functions and an import of them from there are the names the fix means."""
    current = flow.parent(node)
    while current is not None:
        if isinstance(current, COMPREHENSIONS):
            for name in names:
                if comprehension_bindings(current, name):
                    return f"`{name}` is a comprehension variable here"
        elif isinstance(current, (cst.FunctionDef, cst.Lambda)):
            bound = {p.name.value for p in all_params(current.params)}
            for name in names:
                if name in bound:
                    return f"`{name}` is a parameter here"
            if isinstance(current, cst.FunctionDef):
                # The function's bindings, its parameters among them: none of `names` is one (returned above).
                bindings = flow.scope_bindings(current)
                for name in names:
                    if name in bindings and not _only_interface_imports(current, name, own_module):
                        return f"`{name}` is bound in `{current.name.value}`"
        elif isinstance(current, cst.Module):
            # Read once per module (a walk of it for each check was quadratic in a module of many checks).
            bindings = flow.scope_bindings(current)
            for name in names:
                if name in bindings and not _only_interface_imports(current, name, own_module):
                    return f"`{name}` is bound at module level"
        current = flow.parent(current)
    return None


def _only_interface_imports(scope: cst.CSTNode, name: str, own_module: str) -> bool:
    """Every binding of `name` in `scope` is `from <interface> import name` (or, in the interface module
    itself, its own `def name`): the function the fix means."""
    if name in BUILTINS:
        return False
    meant = 0
    bindings = 0
    for node in _scope_nodes(scope):
        if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            module = "." * len(node.relative) + (dotted(node.module) if node.module is not None else "")
            for alias in node.names:
                bound = alias.asname.name if alias.asname else alias.name
                if isinstance(bound, cst.Name) and bound.value == name:
                    bindings += 1
                    meant += module == INTERFACE and alias.asname is None
        elif isinstance(node, cst.FunctionDef) and node.name.value == name:
            bindings += 1
            meant += own_module == INTERFACE
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr, cst.Import)):
            bindings += 1 if name in _bound_by(node) else 0
    return bindings == meant


def _scope_nodes(scope: cst.CSTNode):
    """The nodes of one scope, nested functions and classes named but not entered."""
    stack = list(reversed(list(scope.body if isinstance(scope, cst.Module) else scope.body.body)))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda, *COMPREHENSIONS)):
            continue
        stack.extend(reversed(children(node)))


def _bound_by(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Assign):
        return {n for t in node.targets for n, _ in target_names(t.target)}
    if isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.For)):
        return {n for n, _ in target_names(node.target)}
    if isinstance(node, cst.Import):
        return {
            (a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else dotted(a.name).split(".")[0])
            for a in node.names
        }
    return set()


def guarded_use(flow, node: cst.CSTNode, subject: cst.BaseExpression) -> str | None:
    """A read of the checked expression in the statement holding the check (outside the check and other
    class tests), or after it in its block when that statement exits early or binds the check's answer."""
    # `spec = g.kv_cache_spec` before the check: a read of either is a read of the checked value
    wanted = same_value(flow, subject)
    statement = flow.enclosing(node, STATEMENTS)
    if statement is None:
        return None
    region: list[cst.CSTNode] = [statement]
    block = flow.parent(statement)
    exits = isinstance(statement, cst.If) and _ends_in_exit(statement.body)
    if (exits or isinstance(statement, cst.SimpleStatementLine)) and hasattr(block, "body"):
        siblings = list(block.body)
        region += siblings[siblings.index(statement) + 1 :] if statement in siblings else []
    inside = set(preorder(node))
    for top in region:
        for found in preorder(top):
            if found in inside or not isinstance(found, (cst.Name, cst.Attribute, cst.Subscript)):
                continue
            if dotted(found) in wanted and not _is_class_test_argument(flow, found):
                parent = flow.parent(found)
                shown = parent if isinstance(parent, cst.Attribute) and parent.value is found else found
                return dotted(shown)
    return None


def _ends_in_exit(body: cst.BaseSuite) -> bool:
    statements = list(body.body)
    last = statements[-1] if statements else None
    small = last.body if isinstance(last, cst.SimpleStatementLine) else [last] if last is not None else []
    return (
        any(isinstance(s, _EXITS) for s in small)
        or isinstance(body, cst.SimpleStatementSuite)
        and any(isinstance(s, _EXITS) for s in body.body)
    )


def _is_class_test_argument(flow, node: cst.CSTNode) -> bool:
    """`isinstance(x, …)`, `type(x)`, `iter_layer_specs(x)`: a look at the spec, not a use of it as a layer."""
    argument = flow.parent(node)
    call = flow.parent(argument) if isinstance(argument, cst.Arg) else None
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in _LOOKS


_LOOKS = ("isinstance", "type", LAYER_ITERATOR, "is_full_attention_spec")


def same_value(flow, subject: cst.BaseExpression) -> set[str]:
    """The dotted forms of `subject` and of every name bound to the same value in its function (one
    assignment deep, both ways, to a fixed point): `spec = g.kv_cache_spec` makes both one value."""
    wanted = dotted(subject)
    function = flow.enclosing_function(subject)
    if function is None:
        return {wanted}
    return set(flow.remembered("same values", function, _same_values).get(wanted, (wanted,)))


def _same_values(function: cst.FunctionDef) -> dict[str, frozenset[str]]:
    """Each dotted form → all those one value with it: the fixed point `same_value` describes is the connected
    component of the `name = value` pairs (read once per function: flow.remembered)."""
    linked: dict[str, set[str]] = {}
    for name, value in _value_pairs(function):
        if "…" not in value:
            linked.setdefault(name, set()).add(value)
            linked.setdefault(value, set()).add(name)
    found: dict[str, frozenset[str]] = {}
    for start in linked:
        if start not in found:
            component, pending = {start}, [start]
            while pending:
                for other in linked[pending.pop()] - component:
                    component.add(other)
                    pending.append(other)
            found.update(dict.fromkeys(component, frozenset(component)))
    return found


def _value_pairs(function: cst.FunctionDef) -> Iterator[tuple[str, str]]:
    """The `name = value` pairs of the function (its own scope and its comprehensions; nested functions aside)."""
    for node in preorder(function.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Name):
                yield target.value, dotted(node.value)
        elif isinstance(node, (cst.AnnAssign, cst.NamedExpr)) and node.value is not None:
            if isinstance(node.target, cst.Name):
                yield node.target.value, dotted(node.value)


def resolved_calls(flow, function: cst.FunctionDef) -> tuple[list[cst.Call], list[cst.Call]]:
    """(the calls in the module that reach `function`, those of its name that may reach it or not). Found by
    name alone, another class's method of that name would have its call sites rewritten from this
    function's tests: a call reaches a method through `self.`/`cls.` inside its class or `Class.`, a
    module function through its bare name (defined once), a nested one likewise."""
    name = function.name.value
    owner = flow.parent(flow.parent(function))  # FunctionDef → IndentedBlock → ClassDef/Module/FunctionDef
    owner = owner if isinstance(owner, (cst.ClassDef, cst.Module)) else flow.module if owner is None else owner
    defined_once = len(flow.functions_named(name)) == 1
    reaching, unknown = [], []
    for call in flow.callers(name):
        func = call.func
        if isinstance(owner, cst.ClassDef):
            if not isinstance(func, cst.Attribute):
                continue  # a bare name never reaches a method
            receiver = func.value
            inside = flow.enclosing(call, (cst.ClassDef,)) is owner
            mine = isinstance(receiver, cst.Name) and (
                receiver.value == owner.name.value or (receiver.value in ("self", "cls") and inside)
            )
            (reaching if mine else unknown).append(call)
        elif isinstance(func, cst.Name):
            (reaching if defined_once else unknown).append(call)
        # `x.name(…)` never reaches a module's or a nested function
    return reaching, unknown


def free_name(code: str) -> str:
    """A loop name `code` does not mention: `spec`, `layer_spec`, `layer`, then `layer_spec_1`, `_2`, …"""
    candidates = chain(_LOOP_NAMES, (f"layer_spec_{i}" for i in count(1)))
    return next(n for n in candidates if not re.search(rf"\b{n}\b", code))
