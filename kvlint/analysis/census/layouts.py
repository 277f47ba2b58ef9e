"""The KV cache layouts of a tree (kvlint.analysis.census): which members of the layout enum put the block
dimension outermost, and the setting a user picks a layout with. Parsed with `ast`: no pattern runs over
the module's text."""

from __future__ import annotations

import ast
import re

from kvlint.analysis.census.parsing import parsed


def _layout_enums(texts: dict[str, bytes]) -> list[tuple[ast.ClassDef, ast.Module]]:
    """The classes defining `is_block_outermost` (the layout enum), parsed with `ast`."""
    found = []
    for relative, data in texts.items():
        if b"def is_block_outermost" not in data:
            continue
        module = parsed(data, relative)
        if module is None:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(item, ast.FunctionDef) and item.name == "is_block_outermost" for item in node.body
            ):
                found.append((node, module))
    return found


def block_outermost(texts: dict[str, bytes]) -> frozenset[str]:
    """The layout enum's members whose `is_block_outermost` holds: `self.value[K] == NAME` read from it."""
    for enum, module in _layout_enums(texts):
        test = next(
            item for item in enum.body if isinstance(item, ast.FunctionDef) and item.name == "is_block_outermost"
        )
        compared = _value_test(test)
        if compared is None:
            continue
        position, name = compared
        constant = _constant(module, name)
        if constant is None:
            continue
        members = []
        for item in enum.body:
            if (
                isinstance(item, ast.Assign)
                and len(item.targets) == 1
                and isinstance(item.targets[0], ast.Name)
                and isinstance(item.value, ast.Tuple)
                and position < len(item.value.elts)
            ):
                value = item.value.elts[position]
                if isinstance(value, ast.Constant) and value.value == constant:
                    members.append(item.targets[0].id)
        return frozenset(members)
    return frozenset()


def _value_test(function: ast.FunctionDef) -> tuple[int, str] | None:
    """`return self.value[K] == NAME` as the function's first return: (K, NAME)."""
    returned = next((node.value for node in ast.walk(function) if isinstance(node, ast.Return)), None)
    if not (isinstance(returned, ast.Compare) and len(returned.ops) == 1 and isinstance(returned.ops[0], ast.Eq)):
        return None
    left, right = returned.left, returned.comparators[0]
    if not (
        isinstance(left, ast.Subscript)
        and isinstance(left.value, ast.Attribute)
        and left.value.attr == "value"
        and isinstance(left.slice, ast.Constant)
        and isinstance(left.slice.value, int)
        and isinstance(right, ast.Name)
    ):
        return None
    return left.slice.value, right.id


def _constant(module: ast.Module, name: str) -> int | None:
    """The integer a module-level `NAME = 1` or `A, NAME = 0, 1` binds."""
    for statement in module.body:
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        target, value = statement.targets[0], statement.value
        pairs = (
            zip(target.elts, value.elts)
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts)
            else [(target, value)]
        )
        for one, constant in pairs:
            if isinstance(one, ast.Name) and one.id == name and isinstance(constant, ast.Constant):
                if isinstance(constant.value, int):
                    return constant.value
    return None


_SETTING = re.compile(rb"envs\.(VLLM_\w+)")


def layout_setting(texts: dict[str, bytes]) -> str:
    """The environment variable the KV cache layout resolution reads (`envs.VLLM_KV_CACHE_LAYOUT`): read in a
    module that uses the layout enum (the class defining `is_block_outermost`)."""
    enums = {enum.name.encode() for enum, _ in _layout_enums(texts)}
    for data in texts.values():
        if b"envs." in data and any(enum in data for enum in enums):
            for found in _SETTING.findall(data):
                if b"LAYOUT" in found:
                    return found.decode()
    return ""


_PADDED = b"mamba_page_size_padded"
_OTHER_PLATFORM_MODULES = ("rocm", "cpu", "xpu", "tpu", "hpu", "neuron")


def mamba_page_padding(texts: dict[str, bytes]) -> str:
    """Where the default platform sets `….mamba_page_size_padded = …` (a module under a `platforms`
    package, not another platform's own): "module:line", or "" when the tree pads no Mamba page."""
    for relative, data in sorted(texts.items()):
        parts = relative.split("/")
        if _PADDED not in data or "platforms" not in parts[:-1]:
            continue
        if parts[-1].removesuffix(".py") in _OTHER_PLATFORM_MODULES:
            continue
        module = parsed(data, relative)
        if module is None:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Attribute) and target.attr == _PADDED.decode() for target in node.targets
            ):
                return f"{relative}:{node.lineno}"
    return ""
