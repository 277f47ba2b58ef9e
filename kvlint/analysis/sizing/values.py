"""The abstract values the sizing evaluator computes with, and how they combine.

A value is a Python constant (numbers, strings, booleans, None, tuples of values), a spec (`Layer`, or a
`Container` of layers), one of the small shapes below that vLLM's sizing code handles (a group, the
group list, a container's layer dict, a class reference, …) or UNKNOWN: what the code cannot be
evaluated to statically. UNKNOWN never becomes a guess: joins, comparisons and truth tests stay unknown.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from kvlint.analysis.vocabulary import CONTAINER_CLASS

# The sizes the evaluation binds: every DCP size to DCP, every block size to BLOCK_SIZE. Two different
# numbers, neither 1, so that a result tells which of them (if any) it was scaled by.
DCP = 2
BLOCK_SIZE = 16


class Unknown:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self):
        return (Unknown, ())


UNKNOWN: Any = Unknown()


@dataclass(frozen=True)
class Layer:
    """A layer-level spec: one class of the hierarchy, with attribute values its constructor sets."""

    cls: str
    overrides: tuple[tuple[str, object], ...] = ()
    role: str = ""  # e.g. "indexer", only for labels

    @property
    def label(self) -> str:
        return self.role or self.cls


@dataclass(frozen=True)
class Container:
    """A `UniformTypeKVCacheSpecs` holding these layers, in dict order."""

    layers: tuple[Layer, ...]


def spec_class(spec: Layer | Container) -> str:
    return spec.cls if isinstance(spec, Layer) else CONTAINER_CLASS


@dataclass(frozen=True)
class Group:
    """One KV cache group, whose spec is the kind under evaluation."""

    spec: object


@dataclass(frozen=True)
class Groups:
    """`kv_cache_config.kv_cache_groups`: every group is of the kind under evaluation."""

    spec: object


@dataclass(frozen=True)
class LayerDict:
    """A container's `kv_cache_specs`: layer name → layer spec."""

    layers: tuple[Layer, ...]


@dataclass(frozen=True)
class Seq:
    """A list whose elements are known."""

    items: tuple


@dataclass(frozen=True)
class Iter:
    """An iterator (or generator) whose elements are known."""

    items: tuple


@dataclass(frozen=True)
class ClassRef:
    """A class, or a union of classes (`A | B`), named in the code."""

    names: frozenset[str]


@dataclass(frozen=True)
class Opaque:
    """An unknown object whose attributes we still follow by name (`vllm_config.parallel_config`)."""

    name: str


@dataclass(frozen=True)
class Function:
    """A function of the program, by name."""

    name: str


@dataclass(frozen=True)
class Bound:
    """A method of a known receiver (a spec's method, a layer dict's `values`)."""

    receiver: object
    method: str


def truth(value) -> bool | None:
    """The truth of a value; None when it is not known."""
    if value is UNKNOWN or isinstance(value, (Opaque, Function, Bound)):
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return bool(value)
    if isinstance(value, (Seq, LayerDict)):
        return bool(value.items if isinstance(value, Seq) else value.layers)
    if isinstance(value, tuple):
        return bool(value)
    if isinstance(value, (Layer, Container, Group, Groups, ClassRef)):
        return True
    return None


def known_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def same(a, b) -> bool:
    """Whether two values are known to be equal (UNKNOWN equals nothing, not even itself)."""
    if a is UNKNOWN or b is UNKNOWN:
        return False
    try:
        return type(a) is type(b) and a == b
    except Exception:  # noqa: BLE001 - odd values compare unequal
        return False


def join(values: list):
    """The one value every path gave; UNKNOWN when they differ or there is none."""
    if not values:
        return UNKNOWN
    first = values[0]
    return first if all(same(first, v) for v in values[1:]) else UNKNOWN


def merge(a: dict | None, b: dict | None) -> dict | None:
    """Two environments after two paths: a name keeps its value only where both agree (None: no path)."""
    if a is None:
        return b
    if b is None:
        return a
    merged = dict(a)
    for key in set(a) | set(b):
        if key not in a or key not in b or not same(a[key], b[key]):
            merged[key] = UNKNOWN
    return merged


def compare(op: ast.cmpop, left, right) -> bool | None:
    """One comparison of a `Compare`; None when it cannot be decided."""
    if (
        left is UNKNOWN
        or right is UNKNOWN
        or isinstance(left, (Opaque, Function))
        or isinstance(right, (Opaque, Function))
    ):
        return None
    if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
        return _equality(op, left, right)
    if isinstance(op, (ast.In, ast.NotIn)):
        return _membership(op, left, right)
    if known_number(left) and known_number(right):
        return {ast.Lt: left < right, ast.LtE: left <= right, ast.Gt: left > right, ast.GtE: left >= right}.get(
            type(op)
        )
    return None


def _equality(op: ast.cmpop, left, right) -> bool | None:
    if isinstance(left, ClassRef) or isinstance(right, ClassRef):
        if not (isinstance(left, ClassRef) and isinstance(right, ClassRef)):
            return False if isinstance(op, (ast.Is, ast.Eq)) else True
        equal = left.names == right.names and len(left.names) == 1
    elif isinstance(left, (int, str, float, type(None))) and isinstance(right, (int, str, float, type(None))):
        equal = (
            left is right if isinstance(op, (ast.Is, ast.IsNot)) and (left is None or right is None) else left == right
        )
    else:
        return None
    return equal if isinstance(op, (ast.Is, ast.Eq)) else not equal


def _membership(op: ast.cmpop, left, right) -> bool | None:
    if not isinstance(right, tuple):
        return None
    found = None if any(r is UNKNOWN for r in right) else False
    for item in right:
        if compare(ast.Eq(), left, item) is True:
            found = True
    if found is None:
        return None
    return found if isinstance(op, ast.In) else not found


def iterated(value) -> list:
    """The elements iterating `value` yields; [] when unknown."""
    if isinstance(value, Groups):
        return [Group(value.spec)]
    if isinstance(value, (Seq, Iter)):
        return list(value.items)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, LayerDict):
        return [UNKNOWN] * len(value.layers)  # keys: layer names
    return []
