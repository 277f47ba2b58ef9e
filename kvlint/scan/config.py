"""`[tool.kvlint]` from pyproject.toml, read once per run and merged with command-line options."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS
from kvlint.errors import ConfigError
from kvlint.filesystem import describe, probe_file, read_regular_file
from kvlint.types import Severity

KNOWN_KEYS = {"select", "ignore", "exclude", "per-file-ignores", "scheduler-only-paths", "fail-on", "vllm"}


@dataclass
class Config:
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    scheduler_only_paths: list[str] = field(default_factory=lambda: list(DEFAULT_SCHEDULER_ONLY_PATHS))
    # The lowest severity that fails a run (exit 1); `--fail-on` overrides it.
    fail_on: Severity = Severity.ERROR
    # The vLLM release (`"0.30.0"`) or range (`">=0.17,<0.31"`) code outside the vLLM tree targets
    # (kvlint.scan.targets); None: the project's own requirement on vllm, if any.
    vllm: str | None = None
    source: str | None = None  # the pyproject.toml it came from

    def rule_settings(self) -> dict:
        return {"scheduler-only-paths": tuple(self.scheduler_only_paths)}


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for folder in (start if start.is_dir() else start.parent, *start.parents):
        candidate = folder / "pyproject.toml"
        if probe_file(candidate):
            return candidate
    return None


def _string_list(value, key: str, path: Path) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.kvlint] {key} must be a list of strings")
    return list(value)


def _severity(value, key: str, path: Path) -> Severity:
    names = [s.value for s in Severity]
    if not isinstance(value, str) or value not in names:
        raise ConfigError(
            f"{path}: [tool.kvlint] {key} must be one of {', '.join(map(repr, names))}, not {repr(value)[:60]}"
        )
    return Severity(value)


def _vllm_target(value, path: Path) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{path}: [tool.kvlint] vllm must be a version or a range, as a string")
    return value


def load_config(path: Path | None) -> Config:
    if path is None:
        return Config()
    if sys.version_info >= (3, 11):  # only when there is a file to read
        import tomllib
    else:  # the same parser, from PyPI
        import tomli as tomllib

    try:  # the checkout's own file: read like its sources (a regular file of at most 10 MiB, never waited on)
        data = tomllib.loads(read_regular_file(path).decode("utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {describe(error)}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise ConfigError(f"{path}: invalid TOML: arrays or inline tables nested too deeply to read") from None
    table = data.get("tool", {}).get("kvlint")
    if table is None:
        return Config(source=str(path))
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.kvlint] must be a table")
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.kvlint]: {', '.join(sorted(unknown))}")
    config = Config(source=str(path))
    if "select" in table:
        config.select = _string_list(table["select"], "select", path)
    config.ignore = _string_list(table.get("ignore", []), "ignore", path)
    config.exclude = _string_list(table.get("exclude", []), "exclude", path)
    if "scheduler-only-paths" in table:
        config.scheduler_only_paths = _string_list(table["scheduler-only-paths"], "scheduler-only-paths", path)
    if "fail-on" in table:
        config.fail_on = _severity(table["fail-on"], "fail-on", path)
    config.vllm = _vllm_target(table.get("vllm"), path)
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: [tool.kvlint] per-file-ignores must be a table of glob = [codes]")
    config.per_file_ignores = {
        glob: _string_list(codes, f"per-file-ignores.{glob}", path) for glob, codes in per_file.items()
    }
    return config
