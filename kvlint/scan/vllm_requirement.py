"""Which vLLM a project outside the vLLM tree says it runs with: its own requirement on `vllm`.

A KV connector or platform plugin declares it in `pyproject.toml` (`[project] dependencies`) or in a
requirements file (`requirements*.txt`, also under `requirements/`) beside it. Read as pip reads them
(`packaging`'s Requirement and SpecifierSet, the field's standard), never executed. A requirement that
admits every version (`vllm` alone, `vllm[extra]` with no specifier) pins nothing and is not a target; one
under an environment marker that leaves it out for this interpreter is not one either.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from kvlint.errors import ConfigError
from kvlint.filesystem import describe, notice, probe_file, read_regular_file


@dataclass(frozen=True)
class VllmRequirement:
    specifier: SpecifierSet
    source: str  # where it was read: a file, and for pyproject.toml the table

    @property
    def text(self) -> str:
        return spelled(self.specifier)


def spelled(specifier: SpecifierSet) -> str:
    """`>=0.17,<0.31`: lower bounds first, as people write a range (packaging sorts them as text)."""
    return ",".join(sorted(map(str, specifier), key=lambda s: (not s.startswith((">", "~", "=")), s)))


def parse_specifier(text: str, where: str) -> SpecifierSet:
    """`0.30.0` (one release) or a PEP 440 specifier set (`>=0.17,<0.31`); a ConfigError naming `where` otherwise."""
    stripped = text.strip()
    if stripped and stripped[0].isdigit():
        stripped = f"=={stripped}"
    try:
        specifier = SpecifierSet(stripped)
    except InvalidSpecifier:
        raise ConfigError(f"{where}: not a vLLM version or version range: {text[:80]!r}") from None
    if not str(specifier):
        raise ConfigError(f"{where}: an empty vLLM version range: {text[:80]!r}")
    return specifier


def find_vllm_requirement(start: Path) -> VllmRequirement | None:
    """The requirement on `vllm` of the project `start` belongs to (the nearest folder above it holding a
    pyproject.toml or a requirements file), or None when it declares none that narrows the version."""
    start = start.resolve()
    for folder in (start if start.is_dir() else start.parent, *start.parents):
        pyproject = folder / "pyproject.toml"
        files = _requirement_files(folder)
        if not probe_file(pyproject) and not files:
            continue
        found = _from_pyproject(pyproject) if probe_file(pyproject) else None
        for path in files:
            found = found or _from_requirements(path)
        return found
    return None


def _requirement_files(folder: Path) -> list[Path]:
    notice("folder", folder)  # listed by the globs: a requirements file appearing changes what is found
    notice("folder", folder / "requirements")
    candidates = [*folder.glob("requirements*.txt"), *(folder / "requirements").glob("*.txt")]
    return sorted(path for path in candidates if path.is_file())


def _from_pyproject(path: Path) -> VllmRequirement | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    try:
        data = tomllib.loads(read_regular_file(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None  # the project's own file, unreadable here: kvlint's configuration reader says why
    project = data.get("project")
    dependencies = project.get("dependencies") if isinstance(project, dict) else None
    if not isinstance(dependencies, list):
        return None
    return _first_vllm([d for d in dependencies if isinstance(d, str)], f"{path} ([project] dependencies)")


def _from_requirements(path: Path) -> VllmRequirement | None:
    try:
        text = read_regular_file(path).decode("utf-8", "replace")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {describe(error)}") from None
    lines = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):  # options (-r, -e, --index-url) name no requirement
            lines.append(line)
    return _first_vllm(lines, str(path))


def _first_vllm(entries: list[str], source: str) -> VllmRequirement | None:
    for entry in entries:
        try:
            requirement = Requirement(entry)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != "vllm" or not str(requirement.specifier):
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        return VllmRequirement(requirement.specifier, source)
    return None
