"""What a whole vLLM tree knows, read statically: its spec class hierarchy and where the resolver lives.

Built once per scan in the parent process and handed to every file's rules as plain, picklable data.
The scanned code is parsed with `ast`, never imported.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

from kvlint.analysis.containers import NAMING_WORD, ContainerReachability, container_reachability
from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS

INTERFACE_MODULE = "vllm/v1/kv_cache_interface.py"
RESOLVER_NAME = "resolve_dcp_kv_block_size"
# Where upstream defines the resolver; searched first, then the whole tree.
RESOLVER_HOME = "vllm/v1/core/kv_cache_utils.py"
ATTENTION_ROOT = "AttentionSpec"
CONTAINER_CLASS = "UniformTypeKVCacheSpecs"

# Used only when a scan has no kv_cache_interface.py (a lone file or fixture): vLLM 0.29.0's hierarchy.
_DEFAULT_BASES: dict[str, tuple[str, ...]] = {
    "KVCacheSpec": (),
    "AttentionSpec": ("KVCacheSpec",),
    "FullAttentionSpec": ("AttentionSpec",),
    "MLAAttentionSpec": ("FullAttentionSpec",),
    "HiddenStateCacheSpec": ("MLAAttentionSpec",),
    "RSWASpec": ("FullAttentionSpec",),
    "ChunkedLocalAttentionSpec": ("AttentionSpec",),
    "SlidingWindowSpec": ("AttentionSpec",),
    "CircularBufferSpec": ("AttentionSpec",),
    "SlidingWindowMLASpec": ("SlidingWindowSpec",),
    "MambaSpec": ("KVCacheSpec",),
    "EncoderOnlyAttentionSpec": ("AttentionSpec",),
    "CrossAttentionSpec": ("AttentionSpec",),
    "SinkFullAttentionSpec": ("FullAttentionSpec",),
    "UniformTypeKVCacheSpecs": ("KVCacheSpec",),
}


@dataclass(frozen=True)
class SpecHierarchy:
    """Spec classes by name, each with its direct base class names, as the tree declares them."""

    bases: dict[str, tuple[str, ...]]
    # Class-level attribute defaults as source text, e.g. {"AttentionSpec": {"dcp_sharded": "True"}}.
    attribute_defaults: dict[str, dict[str, str]] = field(default_factory=dict)
    source: str = "built-in default (vLLM 0.29.0)"

    def ancestors(self, name: str) -> set[str]:
        seen: set[str] = set()
        stack = [name]
        while stack:
            for base in self.bases.get(stack.pop(), ()):
                if base not in seen:
                    seen.add(base)
                    stack.append(base)
        return seen

    def is_subclass(self, name: str, ancestor: str) -> bool:
        return name == ancestor or ancestor in self.ancestors(name)

    def attention_family(self) -> frozenset[str]:
        return frozenset(name for name in self.bases if self.is_subclass(name, ATTENTION_ROOT))

    def attribute_default(self, name: str, attribute: str) -> str | None:
        """The class-level default of `attribute` for `name`, looked up along its bases (depth first)."""
        stack, seen = [name], set()
        while stack:
            current = stack.pop(0)
            if current in seen:
                continue
            seen.add(current)
            value = self.attribute_defaults.get(current, {}).get(attribute)
            if value is not None:
                return value
            stack.extend(self.bases.get(current, ()))
        return None


@dataclass(frozen=True)
class ProjectIndex:
    root: str | None
    hierarchy: SpecHierarchy
    resolver_module: str | None = None
    resolver_path: str | None = None
    # The classes the resolver's per-layer isinstance check accepts (0.29/0.30: AttentionSpec);
    # empty when it decides otherwise (0.33: reads `dcp_sharded`).
    resolver_layer_classes: frozenset[str] = frozenset()
    # 0.31+: the resolver reads `spec.dcp_sharded` instead of checking classes.
    resolver_reads_dcp_sharded: bool = False
    # Cross-file sizing analysis (kvlint.analysis.sizing.semantics), computed once per scan; None when not built.
    sizing: object | None = None
    # Which spec classes a container the tree builds can hold (kvlint.analysis.containers); None: not read.
    containers: ContainerReachability | None = None

    @property
    def has_resolver(self) -> bool:
        return self.resolver_module is not None

    def resolver_scales(self, spec_class: str) -> bool | None:
        """Whether the tree's resolver applies the DCP factor to a (non-container) spec of this class.

        None when the resolver's rule cannot be read statically.
        """
        if self.resolver_layer_classes:
            return any(self.hierarchy.is_subclass(spec_class, c) for c in self.resolver_layer_classes)
        if self.resolver_reads_dcp_sharded:
            default = self.hierarchy.attribute_default(spec_class, "dcp_sharded")
            return {"True": True, "False": False}.get(default or "")
        return None


def find_tree_root(path: Path) -> Path | None:
    """The folder that holds `vllm/v1/kv_cache_interface.py`, looking at `path`, below it and above it."""
    path = path.resolve()
    start = path if path.is_dir() else path.parent
    for candidate in (start, *start.parents):
        if (candidate / INTERFACE_MODULE).is_file():
            return candidate
    return None


def build_project_index(paths: list[Path], cache_dir: Path | None = None, scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS) -> ProjectIndex:
    """The index of the tree `paths` belong to; with `cache_dir`, reused while the tree's relevant files are unchanged."""
    return open_project_index(paths, cache_dir, scheduler_only_paths=scheduler_only_paths).index


class IndexHandle:
    """A project index known by its digests, built or loaded only when something needs its content.

    A scan answered from the result cache needs only the digests (they are part of the cache keys), so
    the index itself — the sizing analysis can be large — is never unpickled then.
    """

    def __init__(self, root: str | None, load, digests: IndexDigests | None = None, index: ProjectIndex | None = None):
        self.root = root  # what ProjectIndex.root will be
        self._load = load
        self._digests = digests
        self._index = index

    @property
    def index(self) -> ProjectIndex:
        if self._index is None:
            self._index = self._load()
        return self._index

    @property
    def digests(self) -> IndexDigests:
        if self._digests is None:
            self._digests = index_digests(self.index)
        return self._digests


@dataclass(frozen=True)
class IndexDigests:
    """What a file's result may depend on in the index, hashed in two parts.

    Rules read the sizing analysis only through `issues_for(module_path, code)`, so a module's result
    depends on the issues placed in that module, not on the whole analysis: editing one sizing module
    re-lints the modules whose issues changed, not every file that mentions a block size.
    """

    shared: str  # everything but the analysis' issues (hierarchy, resolver, root, whether there is an analysis)
    modules: dict[str, str]  # module path → digest of the issues placed there (absent: none)

    def of_module(self, module_path: str) -> str:
        return self.modules.get(module_path, "")


def index_digests(index: ProjectIndex) -> IndexDigests:
    import hashlib
    from dataclasses import replace

    from kvlint.scan.result_cache import stable_repr

    def digest(value: object) -> str:
        return hashlib.sha256(stable_repr(value).encode("utf-8", "backslashreplace")).hexdigest()

    sizing = index.sizing
    issues = getattr(sizing, "issues", None)
    if sizing is not None and issues is None:  # an analysis of another shape: the whole of it is shared
        return IndexDigests(digest(index), {})
    by_module: dict[str, list] = {}
    for issue in issues or ():
        by_module.setdefault(issue.module_path, []).append(issue)
    shared = digest((replace(index, sizing=None), sizing is not None))
    return IndexDigests(shared, {module: digest(found) for module, found in by_module.items()})


def open_project_index(
    paths: list[Path],
    cache_dir: Path | None = None,
    known_stats: dict | None = None,
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS,
) -> IndexHandle:
    """The index of the tree `paths` belong to, as a handle. `known_stats` (absolute path → FileStat)
    spares a second stat of the files the scan itself has just looked at; `scheduler_only_paths` is the
    configuration's, which the sizing analysis' roles follow as KV101 does."""
    root = next((r for r in (find_tree_root(p) for p in paths) if r is not None), None)
    if root is None:
        return IndexHandle(None, None, index=ProjectIndex(root=None, hierarchy=SpecHierarchy(bases=dict(_DEFAULT_BASES))))
    roles = tuple(scheduler_only_paths)
    if cache_dir is None:
        return IndexHandle(str(root), lambda: _build(root, roles))
    return _open_cached(root, cache_dir, known_stats or {}, roles)


def _build(root: Path, scheduler_only_paths: tuple[str, ...], could_matter_files: frozenset[str] | None = None) -> ProjectIndex:
    """`could_matter_files`: when known, the only files whose text the sizing analysis needs to read."""
    hierarchy = _read_hierarchy(root / INTERFACE_MODULE)
    from kvlint.analysis.sizing.reading import build_sizing_analysis  # imports this module

    sizing = build_sizing_analysis(root, hierarchy, could_matter_files, scheduler_only_paths)
    containers = container_reachability(root, hierarchy, could_matter_files, interface_module=INTERFACE_MODULE, container_class=CONTAINER_CLASS)
    resolver_path = _find_resolver(root)
    if resolver_path is None:
        return ProjectIndex(root=str(root), hierarchy=hierarchy, sizing=sizing, containers=containers)
    relative = resolver_path.relative_to(root).with_suffix("")
    return ProjectIndex(
        root=str(root),
        hierarchy=hierarchy,
        resolver_module=".".join(relative.parts),
        resolver_path=str(resolver_path),
        resolver_layer_classes=_resolver_layer_classes(resolver_path),
        resolver_reads_dcp_sharded="dcp_sharded" in _resolver_source(resolver_path),
        sizing=sizing,
        containers=containers,
    )


# ------------------------------------------------------------------------------------ the index cache
#
# Building the index reads the tree (the sizing analysis picks its modules by their text) and costs
# most of a second, more than a warm scan may take. It is kept next to the result cache together with a
# snapshot of the tree: per .py file under vllm/, its stat, content hash and whether it could matter.
# A file "could matter" when it is one the index reads whatever its text (the interface, the resolver's
# home) or its text holds what the index's readers select files by: a DCP word (every module
# `sizing_index.read_program` parses mentions one), the resolver's name (`_find_resolver`), or a DSA
# indexer's `get_kv_cache_spec` (`read_program` reads the indexer layer from it), or the interface's
# module name (`containers` reads every file that may name a spec class). The index is rebuilt
# when a file that could matter (before or after) changed, appeared or vanished; a change elsewhere
# cannot reach the index, so the old one is reused. tests/test_semantics.py checks on real releases that
# reading only these files gives the same analysis as reading them all.

_INDEX_WORDS = (b"dcp", b"decode_context_parallel", RESOLVER_NAME.encode(), NAMING_WORD)
_INDEX_FORMAT = 4


def could_matter(relative: str, data: bytes) -> bool:
    """Whether a change to this file of the tree could change its ProjectIndex."""
    if relative in (INTERFACE_MODULE, RESOLVER_HOME) or any(word in data for word in _INDEX_WORDS):
        return True
    return b"Indexer" in data and b"get_kv_cache_spec" in data


def _tree_files(root: Path, known_stats: dict) -> dict[str, tuple | None]:
    """Every .py file under root/vllm (relative, "/"-separated) with its stat as a tuple; None when stat fails."""
    from kvlint.scan.result_cache import FileStat

    found: dict[str, tuple | None] = {}
    base = str(root)
    prefix = len(base) + 1
    stack = [os.path.join(base, "vllm")]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
            except OSError:
                continue
            if entry.name.endswith(".py"):
                relative = entry.path[prefix:].replace(os.sep, "/")
                stat = known_stats.get(entry.path)
                if stat is None:
                    try:
                        stat = FileStat.of(os.stat(entry.path))
                    except OSError:
                        pass
                found[relative] = None if stat is None else tuple(stat)
    return found


def _open_cached(root: Path, cache_dir: Path, known_stats: dict, scheduler_only_paths: tuple[str, ...]) -> IndexHandle:
    """The snapshot file maps each .py file under vllm/ to (stat or None, content digest, could matter)."""
    import hashlib
    import time

    from kvlint.scan.result_cache import FileStat, content_digest, load_pickle, own_source_digest, save_pickle, trusted_stat

    started_ns = time.time_ns()
    key = hashlib.sha256(repr((_INDEX_FORMAT, str(root), own_source_digest(), scheduler_only_paths)).encode("utf-8", "backslashreplace")).hexdigest()
    snapshot_path = cache_dir / f"project-{key}.pickle"
    index_path = cache_dir / f"project-{key}-index.pickle"
    stored = load_pickle(snapshot_path)
    valid = isinstance(stored, dict) and isinstance(stored.get("digests"), IndexDigests) and isinstance(stored.get("files"), dict)
    old: dict[str, tuple] = {k: v for k, v in stored["files"].items() if type(v) is tuple and len(v) == 3} if valid else {}
    current = _tree_files(root, known_stats)
    snapshots: dict[str, tuple] = {}
    stale = not valid
    for relative, stat in current.items():
        before = old.get(relative)
        if before is not None and stat is not None and before[0] == stat:
            snapshots[relative] = before
            continue
        try:
            data = (root / relative).read_bytes()
        except OSError:
            stale = True
            continue
        digest = content_digest(data)
        trusted = trusted_stat(FileStat(*stat), started_ns) if stat is not None else None
        record = None if trusted is None else tuple(trusted)
        if before is not None and before[1] == digest:
            snapshots[relative] = (record, digest, before[2])
            continue
        matters = could_matter(relative, data)
        snapshots[relative] = (record, digest, matters)
        stale = stale or matters or (before is not None and before[2])
    stale = stale or any(snapshot[2] for relative, snapshot in old.items() if relative not in current)

    if not stale:
        digests = stored["digests"]

        def load() -> ProjectIndex:
            kept = load_pickle(index_path)
            if isinstance(kept, dict) and kept.get("digests") == digests and isinstance(kept.get("index"), ProjectIndex):
                return kept["index"]
            return _build(root, scheduler_only_paths)  # the index file is gone or damaged: the unchanged tree rebuilds the same index

        if snapshots != old:
            save_pickle(snapshot_path, {"digests": digests, "files": snapshots})
        return IndexHandle(str(root), load, digests=digests)
    index = _build(root, scheduler_only_paths, frozenset(relative for relative, snapshot in snapshots.items() if snapshot[2]))
    digests = index_digests(index)
    # The index first: a snapshot never names an index that is not on disk.
    if save_pickle(index_path, {"digests": digests, "index": index}):
        save_pickle(snapshot_path, {"digests": digests, "files": snapshots})
    return IndexHandle(str(root), lambda: index, digests=digests, index=index)


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # Generic[...] and the like
        return _base_name(node.value)
    return None


def _read_hierarchy(interface: Path) -> SpecHierarchy:
    module = _parse(interface)
    if module is None:
        return SpecHierarchy(bases=dict(_DEFAULT_BASES))
    bases: dict[str, tuple[str, ...]] = {}
    defaults: dict[str, dict[str, str]] = {}
    for node in module.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases[node.name] = tuple(b for b in map(_base_name, node.bases) if b)
        attributes: dict[str, str] = {}
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                if statement.value is not None:
                    attributes[statement.target.id] = ast.unparse(_field_default(statement.value))
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        attributes[target.id] = ast.unparse(statement.value)
        defaults[node.name] = attributes
    # Keep only the spec family: classes that reach KVCacheSpec.
    hierarchy = SpecHierarchy(bases=bases, attribute_defaults=defaults, source=str(interface))
    family = {n for n in bases if hierarchy.is_subclass(n, "KVCacheSpec")}
    return SpecHierarchy(
        bases={n: b for n, b in bases.items() if n in family},
        attribute_defaults={n: a for n, a in defaults.items() if n in family},
        source=str(interface),
    )


def _field_default(value: ast.expr) -> ast.expr:
    """`field(default=X, …)` declares the default X."""
    if isinstance(value, ast.Call) and _base_name(value.func) == "field":
        for keyword in value.keywords:
            if keyword.arg == "default":
                return keyword.value
    return value


def _defines_resolver(path: Path) -> bool:
    # A bytes search finds an ASCII name exactly where the decoded text has it, without decoding the tree.
    try:
        return f"def {RESOLVER_NAME}(".encode() in path.read_bytes()
    except OSError:
        return False


def _find_resolver(root: Path) -> Path | None:
    home = root / RESOLVER_HOME
    if home.is_file() and _defines_resolver(home):
        return home
    for folder, dirs, files in os.walk(root / "vllm"):
        dirs.sort()
        for name in sorted(files):
            candidate = Path(folder) / name
            if name.endswith(".py") and _defines_resolver(candidate):
                return candidate
    return None


def _resolver_source(path: Path) -> str:
    module = _parse(path)
    for node in ast.walk(module) if module is not None else ():
        if isinstance(node, ast.FunctionDef) and node.name == RESOLVER_NAME:
            return ast.unparse(node)
    return ""


def _resolver_layer_classes(path: Path) -> frozenset[str]:
    module = _parse(path)
    if module is None:
        return frozenset()
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef) and node.name == RESOLVER_NAME:
            classes: set[str] = set()
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id == "isinstance"
                    and len(call.args) == 2
                ):
                    classes.update(_class_names(call.args[1]))
            return frozenset(classes)
    return frozenset()


def _class_names(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Tuple):
        return set().union(*(_class_names(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _class_names(node.left) | _class_names(node.right)
    name = _base_name(node)
    return {name} if name else set()
