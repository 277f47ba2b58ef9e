"""What the caches store, as JSON data and back: a file's result and a tree's index. Data only — nothing that
can run code on load (the caches used pickle, which runs whatever a planted file says).

Encoding follows each record's own field annotations, and only the record classes listed here may appear:
a dataclass becomes an object tagged with its class name ({"$": "Finding", "path": …}), a tuple or a
frozenset a list, an enum its value, a free `object` value (a layer's literal keyword arguments) one of
the JSON scalars. Decoding checks every value against the same annotations — the exact fields, the exact
scalar types (a bool is no int), a listed class where the field allows it — and rebuilds the records;
anything else raises CodecError, which the caches read as "not cached". A record that holds something this
codec cannot write (a bytes constant, a field of a type not listed below) raises CodecError when encoded,
and is then simply not cached.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import TYPE_CHECKING

from kvlint.types import Applicability, FileResult, Finding, Fix, ImportChange, RelatedLocation, Severity, TextEdit

if TYPE_CHECKING:
    from kvlint.analysis.tree_index import TreeIndex

# Every record class the caches may hold, by the name it is tagged with: a file's result's here; the tree
# index's are added on the first index encoded or decoded (_with_index_records), so that a warm scan, which
# reads only file results, never imports the analysis.
RECORDS: dict[str, type] = {
    cls.__name__: cls for cls in (FileResult, Finding, RelatedLocation, Fix, TextEdit, ImportChange)
}
ENUMS = frozenset({Applicability, Severity})
_SCALARS = (str, int, float, bool, type(None))
_TAG = "$"


class CodecError(ValueError):
    """Data that is not a record this codec writes (on decoding), or a record it cannot write (on encoding)."""


def result_to_data(result: FileResult) -> dict:
    return _encode(result, FileResult)


def result_from_data(data: object) -> FileResult:
    return _decode(data, FileResult)


def index_to_data(index: TreeIndex) -> dict:
    return _encode(index, _with_index_records())


def index_from_data(data: object) -> TreeIndex:
    return _decode(data, _with_index_records())


@cache
def _with_index_records() -> type:
    """Add the tree index's record classes to RECORDS (once); the TreeIndex class."""
    from kvlint.analysis.census.compositions import ContainerComposition
    from kvlint.analysis.census.reading import Census, LayerClass, Model
    from kvlint.analysis.construction_sites import ModuleSites
    from kvlint.analysis.containers import ContainerReachability
    from kvlint.analysis.hierarchy import SpecHierarchy
    from kvlint.analysis.kind_table import KindRow, KindTable
    from kvlint.analysis.platform_reach import PlatformReach
    from kvlint.analysis.plugin_roles import TreeRoles
    from kvlint.analysis.sizing.divergences import FirstLayerPick, PathDivergence, PredicateDivergence
    from kvlint.analysis.sizing.kinds import SpecKind
    from kvlint.analysis.sizing.results import SizingAnalysis, SizingPath
    from kvlint.analysis.sizing.values import Container, Layer
    from kvlint.analysis.target_names import TargetNames
    from kvlint.analysis.tree_index import TreeIndex

    index_records = (TreeIndex, SpecHierarchy, ContainerReachability, KindTable, KindRow, SizingAnalysis, SizingPath)
    index_records += (SpecKind, Layer, Container, PathDivergence, PredicateDivergence, FirstLayerPick)
    index_records += (Census, LayerClass, Model, ContainerComposition, TargetNames, PlatformReach, TreeRoles)
    index_records += (ModuleSites,)
    RECORDS.update((cls.__name__, cls) for cls in index_records)
    return TreeIndex


@cache
def _fields(cls: type) -> tuple[tuple[str, object], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def _union_members(annotation: object) -> tuple[object, ...] | None:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(annotation)
    return None


def _encode(value: object, annotation: object) -> object:
    members = _union_members(annotation)
    if members is not None:
        member = next((m for m in members if _instance_of(value, m)), None)
        if member is None:
            raise CodecError(f"{type(value).__name__} is none of {annotation}")
        return _encode(value, member)
    if annotation in (object, typing.Any):
        if type(value) not in _SCALARS:
            raise CodecError(f"a free value of type {type(value).__name__} cannot be stored")
        return value
    if annotation in _SCALARS or annotation in ENUMS or annotation in RECORDS.values():
        if type(value) is not annotation:
            raise CodecError(f"{type(value).__name__} where {annotation.__name__} belongs")
        if annotation in ENUMS:
            return value.value
        if annotation in RECORDS.values():
            return {_TAG: annotation.__name__, **{n: _encode(getattr(value, n), a) for n, a in _fields(annotation)}}
        return value
    return _encode_collection(value, annotation)


def _encode_collection(value: object, annotation: object) -> object:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple and isinstance(value, tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return [_encode(item, args[0]) for item in value]
        if len(args) != len(value):
            raise CodecError(f"a tuple of {len(value)} where {len(args)} belong")
        return [_encode(item, arg) for item, arg in zip(value, args)]
    if origin is frozenset and isinstance(value, frozenset):
        return sorted(_encode(item, args[0]) for item in value)
    if origin is dict and isinstance(value, dict) and args[0] is str:
        if not all(type(key) is str for key in value):
            raise CodecError("a dict key that is not a string")
        return {key: _encode(item, args[1]) for key, item in value.items()}
    raise CodecError(f"cannot store {type(value).__name__} as {annotation}")


def _instance_of(value: object, annotation: object) -> bool:
    if annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    return isinstance(value, origin if origin is not None else annotation)


def _decode(data: object, annotation: object) -> object:
    members = _union_members(annotation)
    if members is not None:
        return _decode_union(data, members, annotation)
    if annotation in (object, typing.Any):
        if type(data) not in _SCALARS:
            raise CodecError(f"a free value of type {type(data).__name__}")
        return data
    if annotation in _SCALARS:
        if type(data) is not annotation:
            raise CodecError(f"{type(data).__name__} where {annotation.__name__} belongs")
        return data
    if annotation in ENUMS:
        try:
            return annotation(data)
        except (ValueError, TypeError):
            raise CodecError(f"{data!r} is no {annotation.__name__}") from None
    if annotation in RECORDS.values():
        return _decode_record(data, annotation)
    return _decode_collection(data, annotation)


def _decode_collection(data: object, annotation: object) -> object:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple and type(data) is list:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(item, args[0]) for item in data)
        if len(args) != len(data):
            raise CodecError(f"a list of {len(data)} where {len(args)} belong")
        return tuple(_decode(item, arg) for item, arg in zip(data, args))
    if origin is frozenset and type(data) is list:
        return frozenset(_decode(item, args[0]) for item in data)
    if origin is dict and type(data) is dict and args[0] is str:
        return {key: _decode(item, args[1]) for key, item in data.items()}
    raise CodecError(f"{type(data).__name__} where {annotation} belongs")


def _decode_union(data: object, members: tuple[object, ...], annotation: object) -> object:
    if data is None:
        if type(None) in members:
            return None
        raise CodecError(f"null where {annotation} belongs")
    if type(data) is dict:  # a record: its tag says which member
        tag = data.get(_TAG)
        for member in members:
            if member in RECORDS.values() and member.__name__ == tag:
                return _decode_record(data, member)
        raise CodecError(f"a {tag!r} record where {annotation} belongs")
    others = [m for m in members if m is not type(None) and m not in RECORDS.values()]
    if len(others) != 1:
        raise CodecError(f"{type(data).__name__} where {annotation} belongs")
    return _decode(data, others[0])


def _decode_record(data: object, cls: type) -> object:
    if type(data) is not dict or data.get(_TAG) != cls.__name__:
        raise CodecError(f"not a {cls.__name__} record")
    fields = _fields(cls)
    if len(data) != len(fields) + 1:
        raise CodecError(f"a {cls.__name__} record with other fields")
    values = {}
    for name, annotation in fields:
        if name not in data:
            raise CodecError(f"a {cls.__name__} record without {name}")
        values[name] = _decode(data[name], annotation)
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise CodecError(f"a {cls.__name__} record that does not build: {error}") from None
