"""Which vLLM releases kvlint can fetch: the versions pip's index lists for `vllm`, remembered a day.

A range target (`vllm>=0.17,<0.31`) is judged against releases it admits, and only a release the index
lists can be fetched. The index is asked at most once a day (a pre-commit hook must not wait on it each
time); the answer is kept as a signed record next to the releases (scan/storage.py). Without an answer —
no network, an index that refuses — the last one kept is used, however old, else the releases already
fetched into the cache: said on stderr, never guessed further.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kvlint.errors import KvlintError, ReleaseError
from kvlint.scan.release_store import releases_folder, staging_folder
from kvlint.scan.storage import load_record, save_record
from kvlint.scan.versions import normalize

LISTING_MAX_AGE_S = 24 * 3600
_KIND = "vllm-release-listing"
_TIME_LIMIT_S = 60


def listed_versions(cache_dir: Path | None, quiet: bool = False) -> tuple[str, ...]:
    """Every vLLM version the index lists a file for (PEP 440 normal form), as remembered or asked now."""
    releases = releases_folder(cache_dir)
    record_path = releases / "listing.json"
    kept = _kept(record_path)
    if kept is not None and time.time() - kept[0] < LISTING_MAX_AGE_S:
        return kept[1]
    try:
        versions = ask_index(releases)
    except KvlintError as error:
        if kept is not None:
            if not quiet:
                print(
                    f"kvlint: the package index did not answer ({error}); using its list of vLLM releases "
                    f"from {time.strftime('%Y-%m-%d', time.localtime(kept[0]))}",
                    file=sys.stderr,
                )
            return kept[1]
        fetched = cached_versions(releases)
        if not fetched:
            raise ReleaseError(f"cannot list vLLM's releases: {error}") from None
        if not quiet:
            print(
                f"kvlint: the package index did not answer ({error}); choosing among the releases already "
                f"fetched ({', '.join(fetched)})",
                file=sys.stderr,
            )
        return fetched
    save_record(record_path, _KIND, _KIND, {"time": time.time(), "versions": list(versions)})
    return versions


def ask_index(releases: Path) -> tuple[str, ...]:
    """The versions of every file the index lists for `vllm` (sdists and wheels)."""
    from kvlint.scan.package_index import pip_settings, project_files

    with staging_folder(releases) as scratch:
        settings = pip_settings(scratch)
    files = project_files(settings, "vllm", time.monotonic() + _TIME_LIMIT_S)
    versions = set()
    for file in files:
        name = file.filename
        if name.endswith(".tar.gz"):
            spelled = name[len("vllm-") : -len(".tar.gz")]
        elif name.endswith(".whl"):
            spelled = name.split("-")[1] if name.count("-") >= 4 else ""
        else:
            continue
        try:
            versions.add(normalize(spelled))
        except ValueError:
            continue
    return tuple(sorted(versions))


def cached_versions(releases: Path) -> tuple[str, ...]:
    """The releases whose sources are already in the cache."""
    found = []
    for folder in sorted(releases.iterdir()) if releases.is_dir() else ():
        name = folder.name
        if name.startswith("vllm-") and not name.endswith("-tests") and (folder / "vllm" / "__init__.py").is_file():
            try:
                found.append(normalize(name[len("vllm-") :]))
            except ValueError:
                continue
    return tuple(found)


def _kept(path: Path) -> tuple[float, tuple[str, ...]] | None:
    value = load_record(path, _KIND, _KIND)
    if (
        type(value) is not dict
        or type(value.get("time")) not in (int, float)
        or type(value.get("versions")) is not list
    ):
        return None
    versions = value["versions"]
    if not all(type(v) is str for v in versions):
        return None
    return float(value["time"]), tuple(versions)
