"""Which of the interface's functions answer a class test for every layer of a group spec.

vLLM 0.29+ defines `is_full_attention_spec(spec)`: `all(isinstance(s, FullAttentionSpec) for s in
iter_layer_specs(spec))` (after a `len(...) > 0`). A function of that shape is the tree's own idiom for
"is this group of class C", container or not: the container-blind check's fix calls it where the check is of that class.
Read with `ast` from the interface module; a function of any other shape is not a helper.
"""

from __future__ import annotations

import ast

# The function that yields a group spec's layers (a container's, or the spec itself).
LAYER_ITERATOR = "iter_layer_specs"
QUANTIFIERS = ("all", "any")


def layer_helpers(module: ast.Module) -> dict[str, tuple[str, str]]:
    """Helper name → (quantifier, class): `name(spec)` is `quantifier(isinstance(s, class) for s in
    iter_layer_specs(spec))` for every non-empty group."""
    helpers: dict[str, tuple[str, str]] = {}
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and len(node.args.args) == 1 and not node.decorator_list:
            found = _helper_test(node)
            if found is not None:
                helpers[node.name] = found
    return helpers


def _helper_test(function: ast.FunctionDef) -> tuple[str, str] | None:
    parameter = function.args.args[0].arg
    layers = {parameter}  # names that hold `iter_layer_specs(parameter)` (and the call itself, below)
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    for statement in body[:-1]:
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and _is_layer_call(statement.value, parameter)
        ):
            return None
        layers.add(statement.targets[0].id)
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    value = body[-1].value
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And) and len(value.values) == 2:
        if not _is_non_empty(value.values[0], layers - {parameter}):
            return None
        value = value.values[1]
    return _quantified_isinstance(value, parameter, layers - {parameter})


def _is_layer_call(node: ast.AST, parameter: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == LAYER_ITERATOR
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == parameter
    )


def _is_non_empty(node: ast.AST, layer_names: set[str]) -> bool:
    """`len(layers) > 0`: True for every group the tree builds (a container holds at least one layer)."""
    return (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Call)
        and isinstance(node.left.func, ast.Name)
        and node.left.func.id == "len"
        and len(node.left.args) == 1
        and isinstance(node.left.args[0], ast.Name)
        and node.left.args[0].id in layer_names
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.Gt)
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value == 0
    )


def _quantified_isinstance(node: ast.AST, parameter: str, layer_names: set[str]) -> tuple[str, str] | None:
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in QUANTIFIERS
        and len(node.args) == 1
        and isinstance(node.args[0], ast.GeneratorExp)
    ):
        return None
    generator = node.args[0]
    if len(generator.generators) != 1 or generator.generators[0].ifs:
        return None
    loop = generator.generators[0]
    source = loop.iter
    from_layers = (isinstance(source, ast.Name) and source.id in layer_names) or _is_layer_call(source, parameter)
    test = generator.elt
    if not (
        from_layers
        and isinstance(loop.target, ast.Name)
        and isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0], ast.Name)
        and test.args[0].id == loop.target.id
        and isinstance(test.args[1], ast.Name)
    ):
        return None
    return node.func.id, test.args[1].id
