"""The grouping paths of a tree: where its grouping code builds a `UniformTypeKVCacheSpecs` container, for
which of a model's layers, and under which setting.

Read from the code's shape, not from function names: every `UniformTypeKVCacheSpecs.from_specs(specs)` call
under vllm/v1/core (0.34: kv_cache_planning.py; earlier kv_cache_utils.py) is a path. Its function
- is gated on the layout when it tests `is_block_outermost` (the packed path: it returns early otherwise);
- builds one container per uniform-type bucket when it buckets with `is_uniform_type` (the packed path's
  buckets), else one container of every layer it is handed, when they share a type (the single container);
- sees only some layers when `specs` was filtered (`{k: v … if isinstance(v, C)}` keeps C, a caller's
  `… if not isinstance(v, C)}` drops C: hidden-state layers never reach the packed path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FUNCTION = re.compile(r"^([ \t]*)def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)


@dataclass(frozen=True)
class GroupingPath:
    module: str
    function: str
    line: int  # the `from_specs` call
    layout_gated: bool  # only under a block-outermost layout
    buckets: bool  # one container per uniform-type bucket (else one of all the layers handed in)
    only: frozenset[str]  # the spec classes the path is handed (empty: every class)
    excluded: frozenset[str]  # spec classes filtered out before the path
    # The path returns early unless the model has layers of each of these classes (`if not any(isinstance(…))`).
    requires: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return f"{self.module}:{self.function}"


def read_grouping_paths(texts: dict[str, bytes], container_class: str) -> tuple[GroupingPath, ...]:
    call = f"{container_class}.from_specs("
    paths = []
    for relative, data in sorted(texts.items()):
        if not relative.startswith("vllm/v1/core/") or call.encode() not in data:
            continue
        text = data.decode("utf-8", "replace")
        functions = _functions(text)
        for match in re.finditer(re.escape(call) + r"\s*(\w+)", text):
            line = text.count("\n", 0, match.start()) + 1
            owner = next((f for f in reversed(functions) if f[1] < line <= f[2]), None)
            if owner is None:
                continue
            name, first, last = owner
            body = "\n".join(text.split("\n")[first - 1 : last])
            argument = match.group(1)
            split = rf"\b{re.escape(argument)}\s*(?::[^=\n]+)?=\s*(?:\{{[^{{}}]*|[^\n]*)\.kv_cache_specs\["
            if re.search(split, body):
                continue  # re-splits a container another path built: no composition of its own
            paths.append(
                GroupingPath(
                    relative,
                    name,
                    line,
                    "is_block_outermost" in body,
                    "is_uniform_type(" in body,
                    _filtered(body, argument, keep=True) | _filled(body, argument),
                    _excluded_by_callers(text, functions, name) | _filtered(body, argument, keep=False),
                    _required(body),
                )
            )
    return tuple(paths)


def _functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of every def, by indentation."""
    lines = text.split("\n")
    found = []
    for match in _FUNCTION.finditer(text):
        first = text.count("\n", 0, match.start())
        indent = len(match.group(1))
        last = first + 1
        while last < len(lines):
            line = lines[last]
            if line.strip() and not line.strip().startswith("#") and len(line) - len(line.lstrip()) <= indent:
                if not line.lstrip().startswith((")", "]", "}")):
                    break
            last += 1
        found.append((match.group(2), first + 1, last))
    return found


def _filtered(body: str, name: str, keep: bool) -> frozenset[str]:
    """The classes of `name = {k: v for … if [not] isinstance(v, C)}` in the body."""
    negation = r"not\s+" if not keep else r"(?<!not )"
    pattern = (
        rf"\b{re.escape(name)}\s*(?::[^=\n]+)?=\s*\{{[^{{}}]*?\bif\s+{negation}"
        r"isinstance\(\s*\w+\s*,\s*\(?([\w\s,]+?)\)?\s*\)"
    )
    found = re.findall(pattern, body, re.DOTALL)
    return frozenset(c.strip() for classes in found for c in classes.split(",") if c.strip())


_ANY_OF = r"any\(\s*isinstance\(\s*\w+\s*,\s*(\w+)\s*\)"


def _required(body: str) -> frozenset[str]:
    """Classes the function returns early without: `if not any(isinstance(s, C) …): return None`, and
    `has_c = any(isinstance(s, C) …)` … `if not (has_a and has_b): return None`."""
    required = set(re.findall(r"if\s+not\s+" + _ANY_OF, body))
    flags = dict(re.findall(r"(\w+)\s*=\s*" + _ANY_OF, body))
    for names in re.findall(r"if\s+not\s+\(([\w\s]+)\)\s*:\s*\n\s*return\s+None", body):
        parts = [part.strip() for part in names.split(" and ")]
        if all(part in flags for part in parts):
            required |= {flags[part] for part in parts}
    return frozenset(required)


def _filled(body: str, name: str) -> frozenset[str]:
    """The classes of `if isinstance(spec, C): name[key] = spec` (or `elif`) in a loop that fills `name`."""
    pattern = rf"isinstance\(\s*\w+\s*,\s*(\w+)\s*\)\s*:\s*\n\s*{re.escape(name)}\["
    return frozenset(re.findall(pattern, body))


def _excluded_by_callers(text: str, functions: list[tuple[str, int, int]], name: str) -> frozenset[str]:
    """Classes every call of `name` in this module filters out of the specs it passes (`filtered_spec`)."""
    lines = text.split("\n")
    excluded: set[str] | None = None
    for match in re.finditer(rf"\b{re.escape(name)}\(\s*[^,()]*,\s*(\w+)\s*\)", text):
        line = text.count("\n", 0, match.start()) + 1
        caller = next((f for f in reversed(functions) if f[1] < line <= f[2]), None)
        if caller is None:
            continue
        body = "\n".join(lines[caller[1] - 1 : line])
        found = set(_filtered(body, match.group(1), keep=False))
        excluded = found if excluded is None else excluded & found
    return frozenset(excluded or ())
