"""Which modules the census reads (kvlint.analysis.census), and what it reads of a model or layer module it
selects by its folder alone: the index cache asks this of every changed file to know whether the index still
holds (kvlint.scan.tree_snapshot). Apart from the census package, whose import (~20 ms: every reader and its
patterns) a check after an edit of one model file would otherwise pay to judge that file."""

from __future__ import annotations

import hashlib
import re

# Text that selects a module for the census (the project cache rebuilds the index when such a file changes).
_WORDS = (
    b"get_kv_cache_spec",
    b"supported_kv_cache_layouts",
    b"is_block_outermost",
    b".from_specs(",  # the grouping paths (kvlint.analysis.census.paths)
    b"uniform_type_base_spec",  # the spec registry (kvlint.analysis.census.compositions)
    b"mamba_page_size_padded",
    b"def merge(",  # the spec classes' merges (kvlint.analysis.census.merges)  # the platform's page alignment of hybrid models (kvlint.analysis.census.layouts)
)
_MODEL_DIRS = ("/models/", "/layers/")
_NAMED_BYTES = re.compile(rb"\b[A-Z]\w*|\b[a-z_]\w*[ \t]*[(=]|\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'")


def could_shape_census(relative: str, data: bytes) -> bool:
    return any(part in relative for part in _MODEL_DIRS) or any(word in data for word in _WORDS)


def census_words(data: bytes) -> bool:
    """A module the census reads in full (a layer's spec, a backend's layouts, the grouping code)."""
    return any(word in data for word in _WORDS)


_SHAPE_LINES = re.compile(
    rb"^[ \t]*(?:class[ \t].*|(?:from|import)[ \t].*|def[ \t]+\w+.*|return[ \t]+[\w.]+[ \t]*)$"
    rb"|self\.\w+[ \t]*(?::[^=\n]{1,200})?=(?!=)|^[ \t]+\w+[ \t]*(?::[^=\n]{1,200})?=[ \t]*(?:True|False|None)\b",
    re.MULTILINE,
)


def census_fingerprint(data: bytes) -> str:
    """What the census reads of a model or layer module it selects by path alone, each at its line (it names sites
    by it): class, import and def lines, constant returns and assignments, every class name, call, keyword, string."""
    digest = hashlib.sha256()
    for pattern in (_SHAPE_LINES, _NAMED_BYTES):
        line = start = 0  # the line of each match, counted on from the last one: one pass per pattern
        for match in pattern.finditer(data):
            line, start = line + data.count(b"\n", start, match.start()), match.start()
            digest.update(b"%d:%s\n" % (line, match.group().strip()))
    return digest.hexdigest()[:16]
