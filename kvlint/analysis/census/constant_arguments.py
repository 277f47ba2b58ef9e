"""Branches a constructor's caller decides by a constant argument.

Whisper's attention builds a `CrossAttention` only when its `attn_type` is `AttentionType.ENCODER_DECODER`;
Ultravox's audio tower builds it with `attn_type=AttentionType.ENCODER`, so its layers never take that branch.
A call's constant arguments (an enum member, a literal) are kept beside the names it passes
(constructor_shapes.passed_parameters) as `name=<the constant as written>`, and a test in the constructor that
compares such a parameter (or the `self.<name>` the constructor copies it to) with another constant is decided.
Two different dotted constants of one class (`AttentionType.ENCODER` vs `.ENCODER_DECODER`) are different
members; anything else stays undecided.
"""

from __future__ import annotations

import ast
import weakref
from collections import Counter

from kvlint.analysis.ast_helpers import walk
from kvlint.analysis.census.constructor_shapes import parameter_default, self_assignments

GIVEN = "="
_UNKNOWN = "*"
# What a constructor is given where its class object is only named (called elsewhere, through a local): not known,
# so not its defaults either.
UNKNOWN_ARGUMENTS = frozenset({f"{_UNKNOWN}{GIVEN}True"})


def constant_arguments(call: ast.Call, init: ast.FunctionDef | ast.AsyncFunctionDef | None) -> frozenset[str]:
    """`name=<constant>` for each parameter the call gives a constant."""
    given = [(k.arg, k.value) for k in call.keywords if k.arg]
    if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        given.append((_UNKNOWN, ast.Constant(True)))  # what `*args`/`**kwargs` hand on is not known here
    if init is not None:
        names = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        for index, argument in enumerate(call.args):
            if isinstance(argument, ast.Starred) or index >= len(names):
                break
            given.append((names[index], argument))
    return frozenset(f"{name}{GIVEN}{text}" for name, value in given if (text := _constant(value)) is not None)


def decide(
    test: ast.expr, passed: frozenset[str], init: ast.FunctionDef | ast.AsyncFunctionDef, depth: int = 0
) -> bool | None:
    """The value of `test` in a constructor given `passed`; None when the constants do not settle it."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = decide(test.operand, passed, init, depth)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [decide(value, passed, init, depth) for value in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else True if all(v is True for v in values) else None
        return True if True in values else False if all(v is False for v in values) else None
    if isinstance(test, (ast.Name, ast.Attribute)):
        return _truth(test, passed, init, depth)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    value = _given(_parameter(test.left, init), passed, init)
    if value is None:
        return None
    right, op = test.comparators[0], test.ops[0]
    options = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
    answers = [_same(value, _constant(option)) for option in options]
    if None in answers:
        return None
    if isinstance(op, (ast.Eq, ast.Is)) and len(options) == 1:
        return answers[0]
    if isinstance(op, (ast.NotEq, ast.IsNot)) and len(options) == 1:
        return not answers[0]
    if isinstance(op, ast.In):
        return any(answers)
    if isinstance(op, ast.NotIn):
        return not any(answers)
    return None


def _given(name: str | None, passed: frozenset[str], init: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The constant the parameter `name` holds: the caller's, or (not passed, and the call hands on nothing
    unknown) its default's; None when not a constant."""
    if name is None or _bindings(init)[name] > 1:
        return None  # a parameter the constructor binds again (`use_mla = use_mla or …`) holds more than was given
    given = {p.partition(GIVEN)[0]: p.partition(GIVEN)[2] for p in passed if GIVEN in p}
    if name in given:
        return given[name]
    if name in passed or _UNKNOWN in given:
        return None
    default = parameter_default(init, name)
    return _constant(default) if default is not None else None


# Locals followed to the one value they are assigned (`is_sparse = force_sparse or …`; `if is_sparse:`).
_MAX_LOCALS = 8


def _truth(
    test: ast.Name | ast.Attribute, passed: frozenset[str], init: ast.FunctionDef | ast.AsyncFunctionDef, depth: int
) -> bool | None:
    """A test of a name's truth: a boolean parameter the caller (or its default) gives as a literal, or a local
    assigned once, from a value that is decided (MiniMax-M3's MTP block builds its decoder layer with
    `force_sparse_attn=True`: only the sparse attention, in every layer)."""
    value = _given(_parameter(test, init), passed, init)
    if value is not None:
        return True if value == "True" else False if value == "False" else None
    if isinstance(test, ast.Name) and depth < _MAX_LOCALS:
        assigned = _only_assignment(init, test.id)
        return decide(assigned, passed, init, depth + 1) if assigned is not None else None
    return None


def _only_assignment(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.expr | None:
    """The value of the one plain assignment that binds the local `name` in `function`, or None when anything
    else binds it too (another assignment, a loop, a parameter, `:=`, `with … as`, an import, a definition)."""
    bindings, values = _read_bindings(function)
    return values.get(name) if bindings[name] == 1 else None


def _bindings(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Counter[str]:
    """How many times each name is bound in `function` (its parameters included)."""
    return _read_bindings(function)[0]


# Per function: how often each name is bound, and the value of each plain assignment to a name (read in one
# walk: a constructor's every test may ask, and a walk per question would be quadratic in its size).
_BINDINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _read_bindings(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[Counter[str], dict[str, ast.expr]]:
    found = _BINDINGS.get(function)
    if found is None:
        names: list[str] = []  # counted once at the end: a Counter's update per node cost most of this walk
        values: dict[str, ast.expr] = {}
        for node in walk(function):
            if type(node) is ast.Name:  # most nodes: a name read binds nothing
                if type(node.ctx) is not ast.Load:
                    names.append(node.id)
            elif node is not function:
                names.extend(_bound_names(node))
            if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                values[node.targets[0].id] = node.value
        found = _BINDINGS[function] = (Counter(names), values)
    return found


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [] if isinstance(node.ctx, ast.Load) else [node.id]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[0]]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    name = getattr(node, "name", None)  # a def, a class, `except … as`, a match capture
    return [name] if isinstance(name, str) else []


def _parameter(node: ast.expr, init: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The parameter a test reads: itself, or `self.<x>` that the constructor sets only from it."""
    parameters = {a.arg for a in [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs]}
    if isinstance(node, ast.Name):
        return node.id if node.id in parameters else None
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"):
        return None
    values = self_assignments(init).get(node.attr, [])
    if len(values) == 1 and isinstance(values[0], ast.Name) and values[0].id in parameters:
        return values[0].id
    return None


def _constant(node: ast.expr) -> str | None:
    """A literal (its repr) or a dotted name of at least two parts (`AttentionType.ENCODER`); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, bool)) and node.value is not None:
        return repr(node.value)
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and parts:
        return ".".join([node.id, *reversed(parts)])
    return None


def _same(given: str, other: str | None) -> bool | None:
    """Whether two constants are equal: literals by value, dotted members of one class by name; None when
    they cannot be compared (a member of another class, an import alias)."""
    if other is None:
        return None
    if given == other:
        return True
    if given[:1] in "'\"0123456789-" or given in ("True", "False"):
        return False if other[:1] in "'\"0123456789-" or other in ("True", "False") else None
    if "." in given and "." in other and given.split(".")[-2] == other.split(".")[-2]:
        return False  # two members of one class (the part before the member's name)
    return None
