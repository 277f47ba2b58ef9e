"""The builtins sizing code decides with: isinstance, type, all, any, len, iter, next and bool.

Each handler gets the call's argument nodes and answers a value, or NotImplemented when the call has
another shape (the evaluator then treats it as an ordinary call).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from kvlint.analysis.sizing.values import (
    UNKNOWN,
    ClassRef,
    Container,
    Groups,
    Iter,
    Layer,
    LayerDict,
    Seq,
    spec_class,
    truth,
)
from kvlint.analysis.vocabulary import CONTAINER_CLASS

if TYPE_CHECKING:
    from kvlint.analysis.sizing.evaluator import Evaluator
    from kvlint.analysis.sizing.frame import Frame


def call(evaluator: Evaluator, name: str, args: list[ast.expr], env: dict, frame: Frame):
    handler = _BUILTINS.get(name)
    return NotImplemented if handler is None else handler(evaluator, args, env, frame)


def isinstance_of(evaluator: Evaluator, value, classes) -> object:
    """`isinstance(value, classes)` for a spec against class references of the hierarchy."""
    if isinstance(classes, tuple):
        names: set[str] = set()
        for item in classes:
            if not isinstance(item, ClassRef):
                return UNKNOWN
            names |= item.names
    elif isinstance(classes, ClassRef):
        names = set(classes.names)
    else:
        return UNKNOWN
    if not isinstance(value, (Layer, Container)):
        return UNKNOWN
    hierarchy = evaluator.program.hierarchy
    return any(hierarchy.is_subclass(spec_class(value), name) for name in names)


def _isinstance(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if len(args) != 2:
        return NotImplemented
    return isinstance_of(evaluator, evaluator.eval(args[0], env, frame), evaluator.eval(args[1], env, frame))


def _type(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if len(args) != 1:
        return NotImplemented
    value = evaluator.eval(args[0], env, frame)
    if isinstance(value, Layer):
        return ClassRef(frozenset({value.cls}))
    if isinstance(value, Container):
        return ClassRef(frozenset({CONTAINER_CLASS}))
    return UNKNOWN


def _decisions(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame) -> list | None:
    """The truth of each element `all(…)`/`any(…)` iterates; None when the elements are not known."""
    if isinstance(args[0], (ast.GeneratorExp, ast.ListComp)):
        items = evaluator.comprehension(args[0], env, frame)
    else:
        value = evaluator.eval(args[0], env, frame)
        known = not isinstance(value, Groups) and (truth(value) is not None or isinstance(value, tuple))
        items = evaluator.items(value) if known else None
    return None if items is None else [truth(v) for v in items]


def _all(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if len(args) != 1:
        return NotImplemented
    decisions = _decisions(evaluator, args, env, frame)
    if decisions is None:
        return UNKNOWN
    return False if False in decisions else (UNKNOWN if None in decisions else True)


def _any(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if len(args) != 1:
        return NotImplemented
    decisions = _decisions(evaluator, args, env, frame)
    if decisions is None:
        return UNKNOWN
    return True if True in decisions else (UNKNOWN if None in decisions else False)


def _len(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if len(args) != 1:
        return NotImplemented
    value = evaluator.eval(args[0], env, frame)
    if isinstance(value, (Seq, Iter)):
        return len(value.items)
    if isinstance(value, LayerDict):
        return len(value.layers)
    if isinstance(value, tuple):
        return len(value)
    if isinstance(value, Groups) and frame.layout is not None:
        return frame.layout
    return UNKNOWN


def _known_items(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame) -> tuple | None:
    """The items of the one argument when the evaluator knows them (a list, an iterator, a tuple), else None."""
    value = evaluator.eval(args[0], env, frame)
    if isinstance(value, (Seq, Iter)):
        return value.items
    return value if isinstance(value, tuple) else None


def _iter(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if len(args) != 1:
        return NotImplemented
    items = _known_items(evaluator, args, env, frame)
    return UNKNOWN if items is None else Iter(items)


def _next(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if not args:
        return NotImplemented
    value = evaluator.eval(args[0], env, frame)
    if isinstance(value, Iter) and value.items:
        return value.items[0]
    return UNKNOWN


def _sequence(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    """`list(x)` / `tuple(x)` of a sequence whose items are known (e.g. a container's layer specs): those items."""
    if len(args) != 1:
        return NotImplemented
    items = _known_items(evaluator, args, env, frame)
    return UNKNOWN if items is None else Seq(items)


def _bool(evaluator: Evaluator, args: list[ast.expr], env: dict, frame: Frame):
    if len(args) != 1:
        return NotImplemented
    decided = truth(evaluator.eval(args[0], env, frame))
    return UNKNOWN if decided is None else decided


_Builtin = Callable[["Evaluator", list, dict, "Frame"], object]
_BUILTINS: dict[str, _Builtin] = {
    "isinstance": _isinstance,
    "type": _type,
    "all": _all,
    "any": _any,
    "len": _len,
    "iter": _iter,
    "next": _next,
    "bool": _bool,
    "list": _sequence,
    "tuple": _sequence,
}
