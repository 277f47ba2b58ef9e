"""Decide what tree a command scans when the user names no path, and which vLLM release(s) code outside the
vLLM tree is judged against."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from kvlint.analysis.tree_root import find_tree_root
from kvlint.errors import ConfigError, TargetError
from kvlint.filesystem import probe_file


def default_target(cwd: Path) -> tuple[Path, str]:
    """(path to scan, one line saying which tree it is)."""
    if probe_file(cwd / "vllm" / "v1" / "kv_cache_interface.py") or find_tree_root(cwd) is not None:
        root = find_tree_root(cwd) or cwd
        return root / "vllm", f"kvlint: scanning the vLLM checkout at {root}"
    spec = importlib.util.find_spec("vllm")  # locates the package without importing it
    if spec is not None and spec.submodule_search_locations:
        location = Path(next(iter(spec.submodule_search_locations)))
        return location, f"kvlint: scanning the installed vllm package at {location}"
    raise TargetError(
        "no vLLM tree here: the current folder is not a vLLM checkout and no vllm package is installed; "
        "pass a PATH or --vllm-release VERSION"
    )


# What a scan of code outside the vLLM tree is compared with when no target is named (kvlint.analysis.hierarchy's
# and kvlint.analysis.sizing.single_file's built-in definitions).
BUILTIN_REFERENCE = "vLLM 0.29.0"
HOW_TO_CHOOSE = (
    'choose one with --vllm-release VERSION, `vllm = "VERSION or RANGE"` under [tool.kvlint], or a requirement '
    "on vllm in the project's pyproject.toml or requirements file"
)


@dataclass(frozen=True)
class VllmTarget:
    """The vLLM release(s) code outside the vLLM tree is judged against: one, or a range's oldest and newest."""

    specifier: str  # "==0.29.0", ">=0.17,<0.31"
    origin: str  # where it was chosen: the option, the configuration, the project's requirement
    versions: tuple[str, ...]  # the releases judged against, oldest first; the newest is the primary one

    def line(self) -> str:
        """The first stderr line of a scan against it."""
        if len(self.versions) == 1:
            which = f"vLLM {self.versions[0]}"
        else:
            which = f"vLLM {' and '.join(self.versions)} (the oldest and newest releases `{self.specifier}` admits)"
        return f"kvlint: judging against {which}, from {self.origin}; only the PATHs' files are reported"


def no_target_line() -> str:
    return f"kvlint: no target vLLM for code outside the vLLM tree: assuming kvlint's built-in {BUILTIN_REFERENCE}; {HOW_TO_CHOOSE}"


def choose_target(
    option: str | None, configured: str | None, config_source: str | None, paths: list[Path]
) -> tuple[str, str] | None:
    """(the specifier text, where it came from) for a scan of `paths` outside the vLLM tree: --vllm-release,
    else `vllm` under [tool.kvlint], else the scanned project's own requirement on vllm; None when none names one."""
    from kvlint.scan.vllm_requirement import find_vllm_requirement, parse_specifier, spelled

    if option:
        return spelled(parse_specifier(option, "--vllm-release")), "--vllm-release"
    if configured:
        where = f"[tool.kvlint] vllm in {config_source}"
        return spelled(parse_specifier(configured, where)), where
    for path in paths:
        requirement = find_vllm_requirement(path)
        if requirement is not None:
            return requirement.text, f"the requirement `vllm{requirement.text}` in {requirement.source}"
    return None


def admitted_versions(specifier: str, origin: str, cache_dir: Path | None, quiet: bool) -> tuple[str, ...]:
    """The releases a target is judged against: the one it pins, else the oldest and the newest release it
    admits among those the package index lists (kvlint.scan.release_listing)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    from kvlint.scan.release_listing import listed_versions
    from kvlint.scan.versions import normalize

    specifiers = SpecifierSet(specifier)
    pins = [s for s in specifiers if s.operator in ("==", "===") and not s.version.endswith(".*")]
    if len(pins) == 1:
        try:
            pinned = normalize(pins[0].version)
        except ValueError:
            raise ConfigError(f"{origin}: not a version number: {pins[0].version!r}") from None
        if len(specifiers) == 1 or specifiers.contains(pinned, prereleases=True):
            return (pinned,)
    listed = []
    for version in listed_versions(cache_dir, quiet):
        try:
            listed.append(Version(version))
        except InvalidVersion:
            continue
    admitted = sorted(specifiers.filter(listed))
    if not admitted:
        raise ConfigError(f"{origin}: no vLLM release the package index lists is admitted by `{specifier}`")
    return tuple(dict.fromkeys(str(v) for v in (admitted[0], admitted[-1])))
