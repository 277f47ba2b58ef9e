"""The index of a tree once a fix's texts replace some of its files (`kvlint fix` lints the fixed tree again):
kept beside the project's own index, keyed on every file's digest with the fixed ones put in, so a repeated
`fix --diff` rebuilds nothing (issue 30)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kvlint.scan.apart import run_apart
from kvlint.scan.cache_codec import CodecError, index_from_data, index_to_data
from kvlint.scan.index_cache import (
    IndexHandle,
    _build_index,
    _digest,
    _digests_from_data,
    _digests_to_data,
    index_digests,
)
from kvlint.scan.storage import content_digest, load_record, own_source_digest, save_record
from kvlint.scan.tree_snapshot import could_matter

if TYPE_CHECKING:
    from kvlint.analysis.tree_index import TreeIndex

_FIXED_FORMAT = 1


def fixed_tree_index(
    before: IndexHandle, overlay: dict[str, bytes], written: bool, cache_dir: Path | None, roles: tuple[str, ...]
) -> IndexHandle:
    """The index of `before`'s tree once `overlay` (relative path → the fixed bytes) replaces those files:
    already on disk when `written`, else read in their place. With a cache and a tree its snapshot read
    whole, it is kept, keyed on every file's digest with the overlay's put in (a record beside the
    project's, signed and checked like it), and built reading only the files that could matter."""
    root = Path(str(before.root))
    in_place = {} if written else overlay

    def build(could_matter_files: frozenset[str] | None) -> TreeIndex:
        # The census of the tree before the fix is kept when no file it reads changed (tree_index: `earlier`;
        # asked only here: a fixed index the cache keeps needs no index of the tree before); the build runs
        # apart (scan.apart), so that the workers that lint the fixed files start small.
        earlier = before.index
        return run_apart(lambda: _build_index(root, roles, could_matter_files, in_place, earlier))

    if cache_dir is None or before.tree is None:
        index = build(None)
        return IndexHandle(str(root), lambda: index, index=index)
    files = {relative: digest for relative, (digest, _) in before.tree.items()}
    matters = {relative for relative, (_, could) in before.tree.items() if could}
    for relative, data in overlay.items():
        files[relative] = content_digest(data)
        if could_matter(relative, data):
            matters.add(relative)
    key = _digest((_FIXED_FORMAT, str(root), own_source_digest(), roles, files))
    path = cache_dir / f"project-fixed-{key}.json"
    kept = load_record(path, "fixed-index", key)
    digests = _digests_from_data(kept.get("digests")) if type(kept) is dict else None
    if digests is not None:

        def load() -> TreeIndex:
            try:
                return index_from_data(kept.get("index"))
            except CodecError:  # damaged: the same files build the same index
                return build(frozenset(matters))

        return IndexHandle(str(root), load, digests=digests)
    index = build(frozenset(matters))
    digests = index_digests(index)
    if not index.failures:
        try:
            save_record(path, "fixed-index", key, {"digests": _digests_to_data(digests), "index": index_to_data(index)})
        except CodecError:
            pass  # an index the codec cannot write is built each time
    return IndexHandle(str(root), lambda: index, digests=digests, index=index)
