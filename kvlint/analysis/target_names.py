"""Which names every vLLM release a scan targets defines, in the modules a remedy or a fix may name.

Code outside the vLLM tree may run with any release of a range (`vllm>=0.17,<0.31`): a remedy that names
`iter_layer_specs` or a fix that imports `resolve_dcp_kv_block_size` holds only if every targeted release
defines it (both appeared in 0.29.0). Read statically from each release's own modules (`ast`, never
imported): the names a module defines at its top level — functions, classes, assignments and the names it
imports (a re-export is a definition to its importers).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from kvlint.analysis.tree_files import TreeFiles
from kvlint.analysis.vocabulary import INTERFACE_MODULE, RESOLVER_HOME


@dataclass(frozen=True)
class TargetNames:
    """Per targeted release (oldest first), the `module:name`s it defines in the modules read."""

    versions: tuple[str, ...]
    modules: frozenset[str]  # dotted modules read in every release
    defined: tuple[frozenset[str], ...]  # by release, aligned with `versions`

    def lacked_by(self, module: str, name: str) -> tuple[str, ...]:
        """The targeted releases that do not define `name` in `module` (dotted); () when all do, or when the
        module is not one that was read (then nothing is known against it)."""
        if module not in self.modules:
            return ()
        wanted = f"{module}:{name}"
        return tuple(v for v, names in zip(self.versions, self.defined) if wanted not in names)


def dotted(module_path: str) -> str:
    """`vllm/v1/kv_cache_interface.py` → `vllm.v1.kv_cache_interface`."""
    return module_path.removesuffix(".py").replace("/", ".")


def read_target_names(roots: dict[str, Path], extra_modules: tuple[str, ...] = ()) -> TargetNames:
    """The names each release (version → its tree's root) defines in the interface module, the resolver's
    usual home and `extra_modules` (dotted: where the primary release defines its resolver)."""
    modules = tuple(dict.fromkeys((dotted(INTERFACE_MODULE), dotted(RESOLVER_HOME), *extra_modules)))
    versions = tuple(roots)
    defined = tuple(_defined_in(roots[version], modules) for version in versions)
    return TargetNames(versions, frozenset(modules), defined)


def _defined_in(root: Path, modules: tuple[str, ...]) -> frozenset[str]:
    files = TreeFiles(root, None)
    names: set[str] = set()
    for module in modules:
        data = files.read_if_present(module.replace(".", "/") + ".py")
        if data is None:
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError):
            continue
        names.update(f"{module}:{name}" for name in _top_level_names(tree.body))
    return frozenset(names)


def _top_level_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.If, ast.Try)):  # `if TYPE_CHECKING:`, `try: import …`: defined on some path
            for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ()))):
                names.update(_top_level_names(block))
    return names
