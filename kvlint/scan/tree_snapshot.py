"""The snapshot of a tree that the index cache keeps beside its index: per .py file under vllm/, its stat,
content digest and whether a change to it could change the index (kvlint.scan.index_cache says why each
file could matter); and the comparison of a new walk with the kept snapshot, which says whether the index
is stale."""

from __future__ import annotations

import os
from pathlib import Path

from kvlint.analysis.containers import NAMING_WORD
from kvlint.analysis.tree_files import is_hidden
from kvlint.analysis.vocabulary import (
    DCP_WORDS,
    INTERFACE_MODULE,
    PLATFORMS_DIR,
    RESOLVER_HOME,
    RESOLVER_NAME,
    could_construct,
    could_consume,
    could_shape_roles,
    is_worker_module,
)
from kvlint.filesystem import read_regular_file, walk_python
from kvlint.scan.storage import FileStat, content_digest, trusted_stat

INDEX_WORDS = (*(word.encode() for word in DCP_WORDS), RESOLVER_NAME.encode(), NAMING_WORD)


def could_matter(relative: str, data: bytes) -> bool | str:
    """Whether a change to this file of the tree could change its TreeIndex: True (any change), False (none),
    or, for a model or layer module the census selects by its folder, the fingerprint of what the census
    reads in it (kvlint.analysis.census): only a change of that fingerprint matters."""
    # Only when a file changed: a warm scan never loads them.
    from kvlint.analysis.census_selection import census_fingerprint, census_words, could_shape_census

    if relative in (INTERFACE_MODULE, RESOLVER_HOME) or any(word in data for word in INDEX_WORDS):
        return True
    if relative.startswith(f"{PLATFORMS_DIR}/"):  # what a platform refuses (kvlint.analysis.platform_reach)
        return True
    if is_worker_module(relative) and b"use_" in data:  # the runners a setting selects (runner_reach)
        return True
    if could_shape_roles(relative) and b"class " in data:  # the roles of code outside the tree (plugin_roles)
        return True
    if census_words(data) or could_consume(relative, data) or could_construct(data):  # census, connectors, builders
        return True
    if b"Indexer" in data and b"get_kv_cache_spec" in data:
        return True
    return census_fingerprint(data) if could_shape_census(relative, data) else False


def listed_files(root: Path, known_stats: dict) -> dict[str, list | None]:
    """Every .py file the index's readers may read (relative, "/"-separated: kvlint.analysis.tree_files'
    walk) with its stat as a list; None when stat fails."""
    found: dict[str, list | None] = {}
    base = str(root)
    prefix = len(base) + 1
    for path, _ in walk_python(os.path.join(base, "vllm"), is_hidden):
        stat = known_stats.get(path)
        if stat is None:
            try:
                stat = FileStat.of(os.stat(path))
            except OSError:
                pass
        found[path[prefix:].replace(os.sep, "/")] = None if stat is None else list(stat)
    return found


# A snapshot record, a JSON list: [stat as a list, or null when the content digest decides; the content
# digest; whether the file could matter]. Records are checked where they are used; a damaged one counts as
# changed (the file is read again) and as one that mattered (the index is rebuilt).
Record = list


def _record(value: object) -> Record | None:
    if type(value) is list and len(value) == 3 and type(value[1]) is str and type(value[2]) in (bool, str):
        return value
    return None


def compared_snapshot(
    root: Path, old: dict[str, object], current: dict[str, list | None], started_ns: int
) -> tuple[dict[str, Record], bool, bool]:
    """(the new snapshot, whether the index is stale, whether the census's inputs may have changed): files whose
    stat is unchanged keep their record; the others are read, hashed and judged again.

    The census (kvlint.analysis.census) of a stale index is kept when no change since the last snapshot touched
    what it reads: a module it reads whole, a model or layer module's fingerprint, a platform module, the spec
    interface, the listing (a file new or gone). An edit before that snapshot was judged then: one of those marked the index stale and rebuilt it;
    any other left the index as it was, census included (a comment in a model module), and leaves its census
    now too, where the digest of the census's inputs (kvlint.analysis.census_inputs) would tell it apart."""
    snapshots: dict[str, Record] = {}
    stale = census_moved = False
    for relative, stat in current.items():
        before = _record(old.get(relative))
        if before is not None and stat is not None and before[0] == stat:
            snapshots[relative] = before
            continue
        try:
            data = read_regular_file(root / relative)
        except OSError:
            stale = census_moved = True
            continue
        digest = content_digest(data)
        trusted = trusted_stat(FileStat(*stat), started_ns) if stat is not None else None
        stat_record = None if trusted is None else list(trusted)
        if before is not None and before[1] == digest:
            snapshots[relative] = [stat_record, digest, before[2]]
            continue
        matters = could_matter(relative, data)
        snapshots[relative] = [stat_record, digest, matters]
        # A census fingerprint matters only when it changed (or the file is new); True always does.
        was = before[2] if before is not None else None
        changed_shape = matters != was and (isinstance(matters, str) or isinstance(was, str))
        damaged = old.get(relative) is not None and before is None
        stale = stale or matters is True or changed_shape or damaged or old.get(relative) is not None and was is True
        # A file that mattered and matters no more may have been one the census read whole; a new file changes
        # the tree's listing, which the platform reach reads (whether a module it names exists).
        read = matters is True and _census_reads(relative, data) or was is True and matters is not True
        census_moved = census_moved or changed_shape or before is None or read
    gone = [_record(record) for relative, record in old.items() if relative not in current]
    left = any(record is None or record[2] for record in gone)
    return snapshots, stale or left, census_moved or bool(gone)


def _census_reads(relative: str, data: bytes) -> bool:
    """Whether the census, its compositions or the platform reach read this file's text (census_inputs' inputs)."""
    from kvlint.analysis.census_selection import could_shape_census

    return (
        relative == INTERFACE_MODULE or relative.startswith(f"{PLATFORMS_DIR}/") or could_shape_census(relative, data)
    )
