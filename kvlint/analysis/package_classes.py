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

import ast
from collections.abc import Iterable

VLLM = "vllm"
PACKAGE = "package"

# (class name, ((origin, base name), …)) for each class of the package with a base kvlint can place.
PackageClasses = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


def read_package_classes(texts: Iterable[bytes]) -> PackageClasses:
    """Each class of the texts (Python files of code outside the tree) with the origin of each base."""
    found = []
    for data in texts:
        if b"class " not in data:
            continue
        try:
            module = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the scan reports a file it cannot parse
        found.extend(_classes_of(module))
    return tuple(found)


def _classes_of(module: ast.Module) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    names: dict[str, tuple[str, str]] = {}  # local name → (origin, the name its module defines)
    vllm_modules: set[str] = set()  # local names of imported vllm modules
    classes = []
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom):
            origin = VLLM if not node.level and (node.module or "").split(".")[0] == VLLM else PACKAGE
            for alias in node.names:
                names[alias.asname or alias.name] = (origin, alias.name)
        elif isinstance(node, ast.Import):
            vllm_modules.update(a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == VLLM)
        elif isinstance(node, ast.ClassDef):
            classes.append(node)
    local = {node.name for node in classes}
    result = []
    for node in classes:
        bases = []
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in local:
                bases.append((PACKAGE, base.id))
            elif isinstance(base, ast.Name) and base.id in names:
                bases.append(names[base.id])
            elif isinstance(base, ast.Attribute) and _root(base) in vllm_modules:
                bases.append((VLLM, base.attr))
        result.append((node.name, tuple(bases)))
    return result


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def derived_from(classes: PackageClasses, targets: frozenset[str]) -> frozenset[str]:
    """The package's classes that derive, through its own, from one of the target's classes `targets`."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, bases in classes:
            if name in found:
                continue
            if any(
                (origin == VLLM and base in targets) or (origin == PACKAGE and base in found) for origin, base in bases
            ):
                found.add(name)
                changed = True
    return frozenset(found)
