"""A scanned package's own classes and what their bases are, across its modules: its roles by inheritance.

A plugin's scheduler may derive from vLLM's in one module (`class NpuScheduler(Scheduler)` in
`plugin/core/scheduler.py`) and be subclassed in another (`from plugin.core.scheduler import NpuScheduler`;
`class TunedScheduler(NpuScheduler)`). One file's view (kvlint.analysis.plugin_roles.FileRoles) sees only the
import; the package's classes, read here once per scan from all its files, say that the base is the
target's scheduler by descent. A base is `vllm` (imported from a vllm module, named as vllm defines it), the
`package`'s (defined in the file or imported from any other module: a relative import, or the package's own
absolute one — by name, the package's classes being one namespace), or unknown (not counted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

VLLM = "vllm"
PACKAGE = "package"

# (class name, ((origin, base name), …)) for each class of the package with a base kvlint can place.
PackageClasses = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


# Bounded patterns (no two unbounded runs side by side): a class header with its bases, the two import forms.
_CLASS = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]{0,400})\)[ \t]*:", re.MULTILINE)
_FROM = re.compile(
    rb"^[ \t]*from[ \t]+(\.{0,10}[\w.]{0,200})[ \t]+import[ \t]+(\([^)]{0,4000}\)|[^\n#;]{0,1000})", re.MULTILINE
)
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([^\n#;]{0,1000})", re.MULTILINE)


def read_package_classes(texts: Iterable[bytes]) -> PackageClasses:
    """Each class of the texts (Python files of code outside the tree) with the origin of each base. Read from
    the text with bounded patterns, as the class headers of kvlint.analysis.own_specs are: a warm scan reads
    every file of the package each time, and a parse of each would cost more than the rest of such a scan."""
    found = []
    for data in texts:
        if b"class " in data:
            found.extend(_classes_of(data))
    return tuple(found)


def _classes_of(data: bytes) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    names: dict[str, tuple[str, str]] = {}  # local name → (origin, the name its module defines)
    modules: dict[str, str] = {}  # local name of an imported module → its origin
    for match in _FROM.finditer(data):
        module = match.group(1).decode()
        origin = VLLM if module.split(".")[0] == VLLM else PACKAGE
        for name, bound in _aliases(match.group(2).decode("utf-8", "replace")):
            names[bound] = (origin, name)
    for match in _IMPORT.finditer(data):
        for name, bound in _aliases(match.group(1).decode("utf-8", "replace")):
            origin = VLLM if name.split(".")[0] == VLLM else PACKAGE
            modules[bound if bound != name else name.split(".")[0]] = origin
    headers = [(m.group(1), m.group(2)) for m in _CLASS.finditer(data)]
    local = {name.decode() for name, _ in headers}
    result = []
    for name, bases_text in headers:
        bases = []
        for base in bases_text.decode("utf-8", "replace").split(","):
            base = base.split("[")[0].strip()
            if not base or "=" in base:
                continue  # a keyword (`metaclass=…`) is no base
            root, _, last = base.rpartition(".")
            if not root and base in local:
                bases.append((PACKAGE, base))
            elif not root and base in names:
                bases.append(names[base])
            elif root and root.split(".")[0] in modules:
                bases.append((modules[root.split(".")[0]], last))
            elif root and root.split(".")[0] in names:  # `from plugin.core import bases`; `bases.NpuPolicy`
                bases.append((names[root.split(".")[0]][0], last))
        result.append((name.decode(), tuple(bases)))
    return result


def _aliases(text: str) -> list[tuple[str, str]]:
    """(name, the name it is bound to) of each part of an import list (`a as b, c`)."""
    found = []
    for part in text.strip().strip("()").replace("\\", " ").split(","):
        words = part.split()
        if len(words) == 1 and words[0] != "*":
            found.append((words[0], words[0]))
        elif len(words) == 3 and words[1] == "as":
            found.append((words[0], words[2]))
    return found


def derived_from(classes: PackageClasses, targets: frozenset[str]) -> frozenset[str]:
    """The package's classes that derive, through its own, from one of the target's classes `targets`: those with
    a vLLM base among `targets`, then down along the package's bases to their subclasses, each class visited once
    (a fixpoint rescanning every class per round was quadratic in a chain of classes)."""
    subclasses: dict[str, list[str]] = {}  # a package class's name → the classes naming it a package base
    found: set[str] = set()
    for name, bases in classes:
        for origin, base in bases:
            if origin == PACKAGE:
                subclasses.setdefault(base, []).append(name)
            elif origin == VLLM and base in targets:
                found.add(name)
    waiting = list(found)
    while waiting:
        for name in subclasses.get(waiting.pop(), ()):
            if name not in found:
                found.add(name)
                waiting.append(name)
    return frozenset(found)
