"""Which layers code that runs on one platform only can meet, read from the tree's platform modules.

A platform module (`vllm/platforms/<name>.py`) names the classes that run only on it (`worker_cls =
"vllm.v1.worker.cpu_worker.CPUWorker"`, a `get_*_cls` returning such a string), and refuses some layers when
it selects their attention backend (`if selector_config.use_mla: raise NotImplementedError(...)`). Code in
such a module, or in a module beside it that carries the platform's name (`cpu_model_runner.py` next to
`cpu_worker.py`), never meets a container holding a refused layer: no model with such a layer starts there.

A layer needs a flag when its class passes it as a literal True to the backend selection
(`get_attn_backend(..., use_mla=True)`), or names its own backend whose class says so of itself (`is_sparse`
returning True: `use_sparse`), itself or through a base class the census also lists. Read with
`ast`, never imported; whatever cannot be read leaves the code reachable by every container, as before.

A flag decided at run time (vLLM's `MLAAttention(..., use_sparse=self.is_sparse)`, which the class hands on
to its backend selection) proves neither: a container holding such a layer, built where the flag is not a
literal False, is only *possible* on that platform (kvlint.analysis.platform_flags), and the link it cannot
prove is said.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kvlint.analysis.ast_helpers import walk
from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.analysis.census.parsing import ModuleTrees
from kvlint.analysis.census.reading import Census
from kvlint.analysis.platform_flags import judged, passed_flags, site_flags
from kvlint.analysis.tree_files import TreeFiles
from kvlint.analysis.vocabulary import PLATFORMS_DIR

_NOT_PLATFORMS = frozenset({"__init__", "interface"})
_DOTTED_CLASS = re.compile(r"^vllm(?:\.\w+)+\.[A-Z]\w*$")


@dataclass(frozen=True)
class PlatformReach:
    # module (relative path) → the layer classes no platform it runs on accepts.
    refused: tuple[tuple[str, frozenset[str]], ...] = ()
    # module → the platforms it runs on, for the words that explain a dropped witness.
    platforms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # module → the selection flags every platform it runs on refuses.
    refused_flags: tuple[tuple[str, frozenset[str]], ...] = ()
    # (layer class, flag, how): a flag its class passes its backend selection by a value it is handed
    # ("parameter") or computes (the code, and where).
    passed: tuple[tuple[str, str, str], ...] = ()
    # (site "module:line", layer class, flag, value as written): a model builds the layer there with that flag;
    # flag "" when the site only names the class (the value it is built with is not read there).
    sites: tuple[tuple[str, str, str, str], ...] = ()

    def refused_layers(self, module_path: str) -> frozenset[str]:
        return dict(self.refused).get(module_path, frozenset())

    def on(self, module_path: str, compositions: tuple[ContainerComposition, ...]) -> tuple[ContainerComposition, ...]:
        """The compositions code in `module_path` can meet: none with a layer its platforms refuse; one whose
        layer is built with a refused flag decided at run time only possible, the unproven link said."""
        flags = dict(self.refused_flags).get(module_path, frozenset())
        refused = self.refused_layers(module_path)
        names = dict(self.platforms).get(module_path, ())
        kept = tuple(c for c in compositions if not c.layer_classes & refused and not built_elsewhere(c, names))
        if not flags:
            return kept
        return judged(kept, flags, names, self.passed, self.sites)

    def platforms_of(self, module_path: str) -> tuple[str, ...]:
        return dict(self.platforms).get(module_path, ())


# A model package's implementation for one platform (0.34.0's `models/deepseek_v4/{nvidia,amd,xpu,cpu}/`, which
# its `__init__` picks by `current_platform` at import): the folder's name → the platform module's.
_VENDOR_FOLDERS = {
    "nvidia": "cuda",
    "cuda": "cuda",
    "amd": "rocm",
    "rocm": "rocm",
    "xpu": "xpu",
    "cpu": "cpu",
    "tpu": "tpu",
}


def built_elsewhere(composition: ContainerComposition, platforms: tuple[str, ...]) -> bool:
    """Whether the census read the composition's model through another platform's implementation than those of
    `platforms` (the platforms a module runs on; none: every platform): a layer of it is built in another
    platform's folder, so the model class read is that platform's (the default platform's, as the census
    follows its `current_platform` tests), and on these platforms another class, or none, stands for it."""
    if not platforms:
        return False
    for _, places in composition.built_at:
        for place in places.split(", "):
            vendor = _vendor(place) if place else None
            if vendor is not None and not any(vendor in name for name in platforms):
                return True
    return False


def _vendor(place: str) -> str | None:
    folders = place.rsplit(":", 1)[0].split("/")[:-1]
    return next((_VENDOR_FOLDERS[f] for f in folders if f in _VENDOR_FOLDERS), None)


def read_platform_reach(
    root: Path, files: TreeFiles, census: Census | None, texts: dict[str, bytes], trees: ModuleTrees | None = None
) -> PlatformReach:
    """The reach of the tree at `root` (`texts`: the module texts the census read, by relative path; `trees`:
    those parsed, as the census left them)."""
    trees = trees if trees is not None and trees.texts is texts else ModuleTrees(texts)
    if census is None:
        return PlatformReach()
    owners: dict[str, list[str]] = {}  # module → platforms
    refusals: dict[str, frozenset[str]] = {}  # platform → refused flags
    for name in _platform_names(root):
        tree = _parse(files.read_if_present(f"{PLATFORMS_DIR}/{name}.py"))
        if tree is None:
            continue
        refusals[name] = _refused_flags(tree)
        for module in _own_modules(root, name, tree):
            owners.setdefault(module, []).append(name)
    if not any(refusals.values()):
        return PlatformReach()
    needs = _layer_flags(census, trees)
    refused, platforms, refused_flags = [], [], []
    for module, names in sorted(owners.items()):
        # Code more than one platform runs meets what any of them accepts: only a flag all refuse.
        flags = frozenset.intersection(*(refusals[n] for n in names))
        layers = frozenset(layer for layer, needed in needs.items() if needed & flags)
        if layers:
            refused.append((module, layers))
        if flags:
            refused_flags.append((module, flags))
        platforms.append((module, tuple(names)))
    passed = passed_flags(census, trees)
    built = site_flags(census, trees) if passed else ()
    return PlatformReach(tuple(refused), tuple(platforms), tuple(refused_flags), passed, built)


def _platform_names(root: Path) -> list[str]:
    try:
        entries = sorted(os.listdir(root / PLATFORMS_DIR))
    except OSError:
        return []
    return [e[: -len(".py")] for e in entries if e.endswith(".py") and e[: -len(".py")] not in _NOT_PLATFORMS]


def _parse(data: bytes | None) -> ast.Module | None:
    if data is None:
        return None
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _refused_flags(tree: ast.Module) -> frozenset[str]:
    """`if <x>.use_…: raise …` in the platform's backend selection: the flags it refuses."""
    flags = set()
    for function in walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or "backend" not in function.name:
            continue
        for node in walk(function):
            if not isinstance(node, ast.If) or not any(isinstance(s, ast.Raise) for s in node.body):
                continue
            test = node.test
            name = test.attr if isinstance(test, ast.Attribute) else test.id if isinstance(test, ast.Name) else None
            if name is not None and name.startswith("use_"):
                flags.add(name)
    return frozenset(flags)


def _own_modules(root: Path, platform: str, tree: ast.Module) -> set[str]:
    """The modules whose classes the platform names as strings, and their siblings named after it."""
    named = set()
    for node in walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED_CLASS.match(node.value):
            relative = "/".join(node.value.split(".")[:-1]) + ".py"
            if (root / relative).is_file():
                named.add(relative)
    own = set(named)
    for relative in named:
        folder = relative.rsplit("/", 1)[0]
        try:
            entries = os.listdir(root / folder)
        except OSError:
            continue
        own.update(f"{folder}/{e}" for e in entries if e.startswith(f"{platform}_") and e.endswith(".py"))
    return own


def _layer_flags(census: Census, trees: ModuleTrees) -> dict[str, frozenset[str]]:
    """Layer class → the selection flags it passes as a literal True (its own, or a listed base class's)."""
    own: dict[str, frozenset[str]] = {}
    bases: dict[str, list[str]] = {}
    statements = _ClassStatements(trees)
    for layer in census.layers:
        module, _, line = layer.where.rpartition(":")
        found = trees.class_at(module, int(line or 0), layer.name)
        if found is None:
            continue
        passed = frozenset(
            k.arg
            for n in walk(found)
            if isinstance(n, ast.Call)
            for k in n.keywords
            if k.arg and k.arg.startswith("use_") and isinstance(k.value, ast.Constant) and k.value.value is True
        )
        own[layer.name] = passed | _own_backend_flags(found, statements)
        bases[layer.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in found.bases]
    return _inherited(own, bases)


def _inherited(own: dict[str, frozenset[str]], bases: dict[str, list[str]]) -> dict[str, frozenset[str]]:
    """Each class's flags with those of its listed bases, however deep: a class is read again only when a base's
    flags grew, at most once a flag (every class once per class listed cost 4,000 layer classes 30 s)."""
    subclasses: dict[str, list[str]] = {}
    for name, names in bases.items():
        for base in names:
            subclasses.setdefault(base, []).append(name)
    flags, grown = dict(own), list(own)
    while grown:
        base = grown.pop()
        for name in subclasses.get(base, ()):
            if not flags[base] <= flags[name]:
                flags[name] = flags[name] | flags[base]
                grown.append(name)
    return flags


def _own_backend_flags(layer: ast.ClassDef, statements: _ClassStatements) -> frozenset[str]:
    """A layer that names its own backend (`def get_attn_backend(self) -> type[B]` or `return B`) needs what
    the backend declares of itself: `is_sparse` returning True is `use_sparse`, `is_mla` is `use_mla`."""
    names = set()
    for method in layer.body:
        if not isinstance(method, ast.FunctionDef) or method.name != "get_attn_backend":
            continue
        returns = method.returns
        if isinstance(returns, ast.Subscript):
            returns = returns.slice
        names.update(
            n.id
            for n in (returns, *(r.value for r in walk(method) if isinstance(r, ast.Return)))
            if isinstance(n, ast.Name)
        )
    flags = set()
    for name in names:
        backend = statements.find(name)
        for method in backend.body if backend is not None else ():
            if (
                isinstance(method, ast.FunctionDef)
                and method.name.startswith("is_")
                and any(
                    isinstance(r, ast.Return) and isinstance(r.value, ast.Constant) and r.value.value is True
                    for r in walk(method)
                )
            ):
                flags.add("use_" + method.name.removeprefix("is_"))
    return frozenset(flags)


class _ClassStatements:
    """Where the texts state `class <name>(`, read in one pass on the first question (a pass per backend
    asked was a twentieth of a cold scan), each at its line (counted on from the last: one pass)."""

    _STATEMENT = re.compile(rb"class ([^\s(]+)\(")

    def __init__(self, trees: ModuleTrees):
        self._trees = trees
        self._places: dict[str, list[tuple[str, int]]] | None = None

    def find(self, name: str) -> ast.ClassDef | None:
        """The first class `name` whose statement parses, in the texts' order."""
        if self._places is None:
            self._places = {}
            for module, data in self._trees.texts.items():
                line, at = 1, 0
                for match in self._STATEMENT.finditer(data):
                    line, at = line + data.count(b"\n", at, match.start()), match.start()
                    self._places.setdefault(match.group(1).decode("utf-8", "replace"), []).append((module, line))
        for module, line in self._places.get(name, ()):
            found = self._trees.class_at(module, line, name)
            if found is not None:
                return found
        return None
