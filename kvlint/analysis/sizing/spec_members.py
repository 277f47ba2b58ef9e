"""A spec's attributes and methods, looked up along its class's MRO in the tree's spec class bodies.

An attribute is, in this order: the block size, a container's layer dict, a value the spec was built
with, what the class's `__post_init__` sets with `object.__setattr__`, a property (run), a method
(bound), or a class-level default (evaluated). Class bodies run in the spec interface module.
"""

from __future__ import annotations

import ast
import weakref
from typing import TYPE_CHECKING

from kvlint.analysis.ast_helpers import dotted, field_default
from kvlint.analysis.sizing.values import UNKNOWN, Bound, Container, Layer, LayerDict, join, spec_class

if TYPE_CHECKING:
    from kvlint.analysis.sizing.evaluator import Evaluator

_PROPERTIES = ("property", "functools.cached_property", "cached_property")
_NOT_INSTANCE_METHODS = ("classmethod", "staticmethod")


class SpecMembers:
    def __init__(self, evaluator: Evaluator):
        # A proxy: the evaluator holds this object, and a cycle would outlive the index build (kvlint.collector).
        self.evaluator = weakref.proxy(evaluator)
        self.program = evaluator.program
        self._attribute_guard: set[tuple[int, str]] = set()  # attributes being computed: a cycle is UNKNOWN
        self._post_init_sets: dict[tuple[str, str], tuple | None] = {}

    def member(self, cls: str, name: str) -> tuple[str, ast.AST] | None:
        """The first definition of `name` along `cls`'s MRO: a method/property def or a class-level value."""
        for owner in self.program.mro(cls):
            body = self.program.classes.get(owner)
            if body is None:
                default = self.program.hierarchy.attribute_defaults.get(owner, {}).get(name)
                if default is not None:
                    try:
                        return owner, ast.parse(default, mode="eval").body
                    except SyntaxError:
                        return None
                continue
            found = _defined_in(body, name)
            if found is not None:
                return owner, found
        return None

    def attribute(self, spec: Layer | Container, attr: str):
        if attr == "block_size":
            return self.evaluator.block_size
        if isinstance(spec, Container) and attr == "kv_cache_specs":
            return LayerDict(spec.layers)
        if isinstance(spec, Layer):
            for name, value in spec.overrides:
                if name == attr:
                    return value
        guard = (id(spec), attr)
        if guard in self._attribute_guard:
            return UNKNOWN
        self._attribute_guard.add(guard)
        try:
            return self._class_attribute(spec, attr)
        finally:
            self._attribute_guard.discard(guard)

    def _class_attribute(self, spec: Layer | Container, attr: str):
        cls = spec_class(spec)
        assigned = self._post_init_value(spec, cls, attr)
        if assigned is not NotImplemented:
            return assigned
        member = self.member(cls, attr)
        if member is None:
            return UNKNOWN
        _, definition = member
        if not isinstance(definition, ast.FunctionDef):
            return self.evaluator.eval_detached(definition)
        if not any(dotted(d) in _PROPERTIES for d in definition.decorator_list):
            return Bound(spec, attr)
        module = self.evaluator.interface_module()
        if module is None:
            return UNKNOWN
        value, _ = self.evaluator.call(module, definition, [], receiver=spec)
        return value

    def _post_init_value(self, spec, cls: str, attr: str):
        """What `__post_init__` (the first along the MRO) assigns to `attr` with object.__setattr__."""
        key = (cls, attr)
        if key not in self._post_init_sets:
            member = self.member(cls, "__post_init__")
            sets = (
                member is not None
                and isinstance(member[1], ast.FunctionDef)
                and any(isinstance(n, ast.Constant) and n.value == attr for n in ast.walk(member[1]))
            )
            self._post_init_sets[key] = member if sets else None
        member = self._post_init_sets[key]
        if member is None:
            return NotImplemented
        module = self.evaluator.interface_module()
        if module is None:
            return NotImplemented
        _, frame = self.evaluator.call(module, member[1], [], receiver=spec)
        values = frame.setattrs.get(attr)
        return join(values) if values else NotImplemented

    def call_method(self, receiver, method: str, args: list, keywords: dict):
        if not isinstance(receiver, (Layer, Container)):
            return UNKNOWN
        member = self.member(spec_class(receiver), method)
        module = self.evaluator.interface_module()
        if member is None or module is None or not isinstance(member[1], ast.FunctionDef):
            return UNKNOWN
        if any(dotted(d) in _NOT_INSTANCE_METHODS for d in member[1].decorator_list):
            return UNKNOWN
        value, _ = self.evaluator.call(module, member[1], args, keywords, receiver=receiver)
        return value


def _defined_in(body: ast.ClassDef, name: str) -> ast.AST | None:
    """`name`'s definition in one class body: a def, or the value (a field's default) it is assigned."""
    for statement in body.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == name:
            return statement
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.target.id == name and statement.value is not None:
                return field_default(statement.value)
        if isinstance(statement, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in statement.targets):
                return statement.value
    return None
