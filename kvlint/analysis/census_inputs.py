"""What the census, its compositions and the platform reach are read from, as one digest: an index rebuilt
because a sizing or connector file changed keeps the census of the index before it when the digest is the
same (the census is most of an index build on a large tree, and an edit outside the model and layer code
cannot change it).

The digest covers every input of those readers: the texts the census selects (`could_shape_census`), the
platform modules the reach parses, the tree's file listing (the reach asks whether a module a platform names
exists, and lists its folder), and the spec hierarchy the census classifies layers by. Anything else they
read is kvlint's own code, which the index cache's key already holds.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.tree_files import TreeFiles, python_files
from kvlint.analysis.vocabulary import PLATFORMS_DIR


def census_inputs_digest(census_texts: dict[str, bytes], files: TreeFiles, hierarchy: SpecHierarchy) -> str:
    digest = hashlib.sha256()

    def add(*parts: bytes | str) -> None:
        for part in parts:
            data = part.encode("utf-8", "backslashreplace") if isinstance(part, str) else part
            # Each part prefixed by its length: no two different sequences of parts hash alike.
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)

    add("census", str(len(census_texts)))
    for relative in sorted(census_texts):
        add(relative, hashlib.sha256(census_texts[relative]).digest())
    listing = python_files(Path(files.root))
    add("listing", str(len(listing)), *sorted(listing))
    platforms = sorted(r for r in listing if r.startswith(f"{PLATFORMS_DIR}/") and r.count("/") == 2)
    add("platforms", str(len(platforms)))
    for relative in platforms:
        data = files.overlay.get(relative)
        data = data if data is not None else files.read_if_present(relative)
        add(relative, hashlib.sha256(data).digest() if data is not None else b"")
    add("hierarchy", repr(sorted((name, bases) for name, bases in hierarchy.bases.items())))
    add(repr(sorted((name, sorted(values.items())) for name, values in hierarchy.attribute_defaults.items())))
    add(repr(sorted(hierarchy.functions)), repr(sorted(hierarchy.layer_helpers.items())))
    return digest.hexdigest()
