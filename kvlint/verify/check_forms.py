"""A rewritten KV101 check as data the verify child evaluates, never as code.

The tree `verify --rewrites` reads is input: a check in it may be any expression (`isinstance(x,
open(…).MambaSpec)` is a check to kvlint's analysis, which reads a class by its last name). So the child is sent
what kvlint parsed — the test (`isinstance`, `type(…) OP`, or the tree's helper), the class names (a name, or the
last name of an attribute chain of names; tuples and `|` unions of them), and the quantifier over the layers —
and looks each name up in the vLLM interface it imported. A check whose classes are anything else (a call, a
subscript, a starred element) is not evaluated and is said with its reason.

A description is a dict:
- `{"test": "isinstance", "classes": C, "layers": None | "all" | "any"}`
- `{"test": "type", "operator": "is" | "==" | "in" | "is not" | "!=" | "not in", "classes": C, "layers": …}`
- `{"test": "helper", "helper": NAME}` (the interface's function, called on the spec)

where C is a class name, a list (a tuple of classes) or `{"union": [C, C]}`; `layers` None tests the spec itself,
else each of `iter_layer_specs(spec)` taken with `all`/`any`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kvlint.analysis.layer_helpers import LAYER_ITERATOR, QUANTIFIERS

_OPERATORS = {ast.Is: "is", ast.Eq: "==", ast.In: "in", ast.IsNot: "is not", ast.NotEq: "!=", ast.NotIn: "not in"}


class NotEvaluable(ValueError):
    """A check (or its rewrite) the child is not sent: the reason, said in the table."""


@dataclass(frozen=True)
class Described:
    before: dict
    after: dict
    outer: str  # the rewrite's function: `all`/`any`, or the tree's helper


def describe_rewrite(original: str, replacement: str) -> Described | None:
    """The check and its rewrite as descriptions; None when `original` is no class test (a call-site rewrite).
    Raises NotEvaluable for a class test kvlint will not send (its classes are not names)."""
    try:
        before = ast.parse(f"(\n{original}\n)", mode="eval").body
        after = ast.parse(f"(\n{replacement}\n)", mode="eval").body
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        raise NotEvaluable("the check is nested too deeply to read") from None
    try:
        parsed = _class_test(before)
        if parsed is None:
            return None
        subject, before_test = parsed
        outer, after_test = _rewrite(after, subject)
    except RecursionError:
        raise NotEvaluable("the check is nested too deeply to read") from None
    return Described(before_test, after_test, outer)


def _class_test(node: ast.expr) -> tuple[ast.expr, dict] | None:
    """(the tested expression, the test) of `isinstance(x, C)` or `type(x) OP C`; None for anything else."""
    if _is_call_of(node, "isinstance", 2):
        return node.args[0], {"test": "isinstance", "classes": _classes(node.args[1]), "layers": None}
    if (
        isinstance(node, ast.Compare)
        and _is_call_of(node.left, "type", 1)
        and len(node.ops) == 1
        and type(node.ops[0]) in _OPERATORS
    ):
        operator = _OPERATORS[type(node.ops[0])]
        test = {"test": "type", "operator": operator, "classes": _classes(node.comparators[0]), "layers": None}
        return node.left.args[0], test
    return None


def _rewrite(node: ast.expr, subject: ast.expr) -> tuple[str, dict]:
    """`helper(subject)` or `all|any(TEST(name) for name in iter_layer_specs(subject))`."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords or len(node.args) != 1:
        raise NotEvaluable("the rewrite is not a form the harness evaluates")
    outer, argument = node.func.id, node.args[0]
    if outer not in QUANTIFIERS:
        if not _same(argument, subject):
            raise NotEvaluable("the rewrite tests another expression than the check")
        return outer, {"test": "helper", "helper": outer}
    generator = argument.generators[0] if isinstance(argument, ast.GeneratorExp) else None
    if (
        generator is None
        or len(argument.generators) != 1
        or generator.ifs
        or generator.is_async
        or not isinstance(generator.target, ast.Name)
        or not _is_call_of(generator.iter, LAYER_ITERATOR, 1)
        or not _same(generator.iter.args[0], subject)
    ):
        raise NotEvaluable(f"the rewrite is not `{outer}(… for … in {LAYER_ITERATOR}(…))` of the checked expression")
    layer_test = _class_test(argument.elt)
    tested = layer_test[0] if layer_test is not None else None
    if not isinstance(tested, ast.Name) or tested.id != generator.target.id:
        raise NotEvaluable("the rewrite does not test each layer")
    return outer, {**layer_test[1], "layers": outer}


def _classes(node: ast.expr) -> str | list | dict:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and _is_name_chain(node.value):
        return node.attr  # kvlint's analysis reads `module.Class` by its class name; so does the child
    if isinstance(node, ast.Tuple):
        return [_classes(element) for element in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return {"union": [_classes(node.left), _classes(node.right)]}
    raise NotEvaluable(f"`{_shown(node)}` is not a class named by a name or an attribute chain of names")


def _is_name_chain(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_call_of(node: ast.expr, name: str, arity: int) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and not node.keywords
        and len(node.args) == arity
        and not any(isinstance(argument, ast.Starred) for argument in node.args)
    )


def _same(left: ast.expr, right: ast.expr) -> bool:
    return ast.dump(left) == ast.dump(right)


def _shown(node: ast.expr, limit: int = 80) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
