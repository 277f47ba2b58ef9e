"""The tree index of a scan, kept between scans next to the result cache, and what a file's result may
depend on in it (its digests).

Building the index reads the tree (the sizing analysis picks its modules by their text) and costs most of
a second, more than a warm scan may take. It is kept together with a snapshot of the tree: per .py file
under vllm/, its stat, content hash and whether it could matter. A file "could matter" when it is one the
index reads whatever its text (the interface, the resolver's home) or its text holds what the index's
readers select files by: a DCP word (every module `read_program` parses mentions one), the resolver's
name (`find_resolver`), a DSA indexer's `get_kv_cache_spec` (`read_program` reads the indexer layer
from it), or the interface's module name (`containers` reads every file that may name a spec class). The index is rebuilt when a file that could matter (before or after) changed, appeared or
vanished; a change elsewhere cannot reach the index, so the old one is reused. tests/test_semantics.py
checks on real releases that reading only these files gives the same analysis as reading them all.

Both files are signed JSON records (scan/storage.py), the index encoded by scan/cache_codec.py: data only,
checked when read, "not cached" unless this user's kvlint wrote them for this tree and kvlint. The tree is
walked and read as the index's readers walk and read it (kvlint.analysis.tree_files: regular files only,
size capped, never through a link out of the tree). An index whose analysis failed somewhere is not kept:
the next scan tries again, and says so again.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kvlint.analysis.hierarchy import builtin_hierarchy
from kvlint.analysis.tree_root import find_tree_root
from kvlint.analysis.vocabulary import (
    DEFAULT_SCHEDULER_ONLY_PATHS,
)
from kvlint.collector import paused_while_building
from kvlint.filesystem import read_regular_file
from kvlint.scan.apart import run_apart
from kvlint.scan.cache_codec import CodecError, index_from_data, index_to_data
from kvlint.scan.storage import (
    load_record,
    own_source_digest,
    save_record,
    stable_repr,
)
from kvlint.scan.tree_snapshot import compared_snapshot, listed_files

if TYPE_CHECKING:
    from kvlint.analysis.target_names import TargetNames
    from kvlint.analysis.tree_index import TreeIndex

_INDEX_FORMAT = 14


class IndexHandle:
    """A tree index known by its digests, built or loaded only when something needs its content.

    A scan answered from the result cache needs only the digests (they are part of the cache keys), so
    the index itself — the sizing analysis can be large — is never decoded then.
    """

    def __init__(self, root: str | None, load, digests: IndexDigests | None = None, index: TreeIndex | None = None):
        self.root = root  # what TreeIndex.root will be
        self._load = load
        self._digests = digests
        self._index = index
        # The tree the index was made from, when a cache snapshot read it whole: relative path → (content
        # digest, whether it could matter). What the index of a fixed tree is keyed on (kvlint.scan.fixed_index).
        self.tree: dict[str, tuple[str, bool | str]] | None = None
        # Build (or load) the index in a forked child (kvlint.scan.apart): the scan sets this when worker
        # processes will be forked after it, so that they do not start as large as the index build left it.
        self.apart = False

    @property
    def index(self) -> TreeIndex:
        if self._index is None:
            self._index = run_apart(self._load) if self.apart else self._load()
        return self._index

    @property
    def digests(self) -> IndexDigests:
        if self._digests is None:
            self._digests = index_digests(self.index)
        return self._digests

    def targeting(
        self, target: TargetNames | None, headers: tuple = (), package: tuple = (), outside: bool = False
    ) -> IndexHandle:
        """This index for code outside its tree that targets the releases `target` reads: the names every one
        of them defines go with the index to the rules, and so do the scanned code's own spec classes among
        its class `headers` (kvlint.analysis.own_specs) and the roles its `package` classes inherit
        (kvlint.analysis.package_classes); all go into the digests a file's result is keyed on. `outside`: the
        scanned code is outside the tree (its copies of the tree's functions: kvlint.engine.copies)."""
        if target is None and not headers and not package and not outside:
            return self
        load = self._load if self._index is None else (lambda: self._index)

        def targeted() -> TreeIndex:
            from kvlint.analysis.own_specs import own_spec_bases, with_own_specs

            index = replace(load(), target=target, judges_outside=outside)
            index = replace(index, roles=index.roles.with_package(package)) if package else index
            return with_own_specs(index, own_spec_bases(headers, index.hierarchy))

        handle = IndexHandle(self.root, targeted)
        handle._digests = replace(
            self.digests, shared=_digest((self.digests.shared, target, headers, package, outside))
        )
        return handle

    @property
    def failures(self) -> tuple[str, ...]:
        """What the index's analysis could not do, when it was built or loaded in this run (a kept index
        never has any: one with failures is not kept)."""
        return self._index.failures if self._index is not None else ()


@dataclass(frozen=True)
class IndexDigests:
    """What a file's result may depend on in the index, hashed in two parts.

    Rules read the sizing analysis only through `divergences_in(module_path)`, so a module's result
    depends on the divergences placed in that module, not on the whole analysis: editing one sizing
    module re-lints the modules whose divergences changed, not every file that mentions a block size.
    """

    shared: str  # everything but the analysis' divergences (hierarchy, resolver, root, whether there is an analysis)
    modules: dict[str, str]  # module path → digest of the divergences placed there (absent: none)

    def of_module(self, module_path: str) -> str:
        return self.modules.get(module_path, "")


def _digest(value: object) -> str:
    return hashlib.sha256(stable_repr(value).encode("utf-8", "backslashreplace")).hexdigest()


def index_digests(index: TreeIndex) -> IndexDigests:
    sizing = index.sizing
    by_module: dict[str, list] = {}
    for divergence in sizing.divergences if sizing is not None else ():
        by_module.setdefault(divergence.module_path, []).append(divergence)
    # census_inputs and construction_sites only say what was read from; what it said is in the other fields.
    shared = _digest((replace(index, sizing=None, census_inputs="", construction_sites=()), sizing is not None))
    return IndexDigests(shared, {module: _digest(found) for module, found in by_module.items()})


def build_project_index(
    paths: list[Path],
    cache_dir: Path | None = None,
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS,
) -> TreeIndex:
    """The index of the tree `paths` belong to; with `cache_dir`, reused while the tree's relevant files are unchanged."""
    return open_project_index(paths, cache_dir, scheduler_only_paths=scheduler_only_paths).index


def open_project_index(
    paths: list[Path],
    cache_dir: Path | None = None,
    known_stats: dict | None = None,
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS,
    reference: Path | None = None,
) -> IndexHandle:
    """The index of the tree `paths` belong to, as a handle. `known_stats` (absolute path → FileStat)
    spares a second stat of the files the scan itself has just looked at; `scheduler_only_paths` is the
    configuration's, which the sizing analysis' roles follow as the per-file container rule does.
    `reference`: the root of a vLLM tree the paths are judged against, apart from them (code outside the
    tree and the release it targets: kvlint.scan.targets)."""
    candidates = [reference] if reference is not None else paths
    root = next((r for r in (find_tree_root(p) for p in candidates) if r is not None), None)
    if root is None:
        from kvlint.analysis.tree_index import TreeIndex

        return IndexHandle(None, None, index=TreeIndex(root=None, hierarchy=builtin_hierarchy()))
    roles = tuple(scheduler_only_paths)
    if cache_dir is None and reference is not None:
        # A release fetched for code outside the tree: its index is the release's, kept beside it (the results
        # folder next to its `releases/`) whatever --no-cache says of the scan's own results, so that judging a
        # plugin costs its own files, not the release's index (kept and checked like any index: §3).
        cache_dir = _release_index_folder(Path(reference))
    if cache_dir is None:
        return IndexHandle(str(root), lambda: _build_index(root, roles))
    return _open_cached(root, cache_dir, known_stats or {}, roles)


def class_headers_of(paths: list[str]) -> tuple[tuple, tuple]:
    """The class headers of code outside the vLLM tree (kvlint.analysis.own_specs: its own spec classes) and its
    classes with their bases' origins (kvlint.analysis.package_classes: the roles they inherit), its files read
    as the scan reads them; a file that cannot be read is the scan's to say."""
    from kvlint.analysis.own_specs import class_headers
    from kvlint.analysis.package_classes import read_package_classes

    texts = []
    for path in paths:
        try:
            texts.append(read_regular_file(path))
        except OSError:
            continue
    return class_headers(texts), read_package_classes(texts)


def _release_index_folder(reference: Path) -> Path | None:
    """The results folder beside the `releases/` folder holding a fetched release (kvlint.scan.releases);
    None for a reference anywhere else (a checkout named by hand), whose index is built each time."""
    parent = reference.resolve().parent
    if parent.name != "releases":
        return None
    return parent.parent / "results"  # made (0755 at most) and checked by storage when written


def _build_index(
    root: Path,
    scheduler_only_paths: tuple[str, ...],
    could_matter_files: frozenset[str] | None = None,
    overlay: dict[str, bytes] | None = None,
    earlier: TreeIndex | None = None,
    census_kept: bool = False,
) -> TreeIndex:
    """The tree's index, built by kvlint.analysis.tree_index, which is imported here, on first use: a warm
    scan, whose index the cache vouches for, never loads the analysis (a sixth of its time). `overlay`:
    texts standing in for some of the tree's files (a fix not written: kvlint.scan.fixed_index); `earlier`:
    the kept index of this tree before a change (its census is reused when its inputs did not change, or when
    `census_kept`: the snapshot saw no change the census reads, kvlint.scan.tree_snapshot)."""
    from kvlint.analysis.tree_index import build_tree_index

    with paused_while_building():
        return build_tree_index(
            root, scheduler_only_paths, could_matter_files, overlay=overlay, earlier=earlier, census_kept=census_kept
        )


def _digests_from_data(data: object) -> IndexDigests | None:
    if type(data) is not dict or set(data) != {"shared", "modules"} or type(data["shared"]) is not str:
        return None
    modules = data["modules"]
    if type(modules) is not dict or not all(type(v) is str for v in modules.values()):
        return None
    return IndexDigests(data["shared"], modules)


def _digests_to_data(digests: IndexDigests) -> dict:
    return {"shared": digests.shared, "modules": digests.modules}


def _open_cached(root: Path, cache_dir: Path, known_stats: dict, scheduler_only_paths: tuple[str, ...]) -> IndexHandle:
    """The snapshot file maps each .py file under vllm/ to (stat or None, content digest, could matter)."""
    started_ns = time.time_ns()
    key = hashlib.sha256(
        repr((_INDEX_FORMAT, str(root), own_source_digest(), scheduler_only_paths)).encode("utf-8", "backslashreplace")
    ).hexdigest()
    snapshot_path = cache_dir / f"project-{key}.json"
    index_path = cache_dir / f"project-{key}-index.json"
    stored = load_record(snapshot_path, "snapshot", key)
    digests = _digests_from_data(stored.get("digests")) if type(stored) is dict else None
    old = stored.get("files") if digests is not None and type(stored.get("files")) is dict else None
    current = listed_files(root, known_stats)
    snapshots, stale, census_moved = compared_snapshot(root, old or {}, current, started_ns)
    # A change the census reads that left the index as it was (a new module: the listing) is remembered in the
    # snapshot until the index is next rebuilt, which then reads the census again.
    census_moved = census_moved or (old is not None and stored.get("census_moved") is True)
    # Every file read and judged: the snapshot says what the whole tree held (a file that could not be read
    # leaves it unknown).
    tree = {relative: (record[1], record[2]) for relative, record in snapshots.items()}
    whole = tree if len(tree) == len(current) else None

    if digests is not None and old is not None and not stale:
        kept_digests = digests

        def load() -> TreeIndex:
            kept = load_record(index_path, "index", key)
            if type(kept) is dict and _digests_from_data(kept.get("digests")) == kept_digests:
                try:
                    return index_from_data(kept.get("index"))
                except CodecError:
                    pass
            # The index file is gone or damaged: the unchanged tree rebuilds the same index.
            return _build_index(root, scheduler_only_paths)

        if snapshots != old or census_moved and stored.get("census_moved") is not True:
            record = {"digests": _digests_to_data(digests), "files": snapshots}
            save_record(snapshot_path, "snapshot", key, {**record, "census_moved": True} if census_moved else record)
        handle = IndexHandle(str(root), load, digests=digests)
        handle.tree = whole
        return handle
    index = _build_index(
        root,
        scheduler_only_paths,
        frozenset(relative for relative, snapshot in snapshots.items() if snapshot[2]),
        earlier=_kept_index(index_path, key, digests) if digests is not None else None,
        census_kept=not census_moved,
    )
    digests = index_digests(index)
    if not index.failures:  # an analysis that failed is tried again, and said again, next time
        _keep(index, digests, snapshots, index_path, snapshot_path, key)
    handle = IndexHandle(str(root), lambda: index, digests=digests, index=index)
    handle.tree = whole
    return handle


def _kept_index(index_path: Path, key: str, digests: IndexDigests) -> TreeIndex | None:
    """The index kept for this tree before the change that made it stale, when it is intact; else None."""
    kept = load_record(index_path, "index", key)
    if type(kept) is not dict or _digests_from_data(kept.get("digests")) != digests:
        return None
    try:
        return index_from_data(kept.get("index"))
    except CodecError:
        return None


def _keep(
    index: TreeIndex, digests: IndexDigests, snapshots: dict, index_path: Path, snapshot_path: Path, key: str
) -> None:
    try:
        data = index_to_data(index)
    except CodecError:
        return  # an index holding what the codec cannot write is rebuilt each time
    # The index first: a snapshot never names an index that is not on disk.
    if save_record(index_path, "index", key, {"digests": _digests_to_data(digests), "index": data}):
        save_record(snapshot_path, "snapshot", key, {"digests": _digests_to_data(digests), "files": snapshots})
