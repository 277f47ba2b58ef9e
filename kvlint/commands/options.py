"""What `check` and `fix` share: their options, the tree and configuration those options name, the scan."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kvlint.analysis.tree_root import find_tree_root
from kvlint.commands.quiet import is_quiet, progress_display, quiet_option
from kvlint.engine.registry import codes_left_on
from kvlint.errors import ConfigError, TargetError
from kvlint.escaping import printable
from kvlint.reporters import FORMATS, LEGACY_FORMATS
from kvlint.scan.config import Config, find_pyproject, load_config
from kvlint.scan.jobs import ignored_for
from kvlint.scan.progress import Display
from kvlint.scan.runner import ScanResult, scan
from kvlint.scan.target_scan import merge_scans
from kvlint.types import UNREADABLE_CODE, Severity

if TYPE_CHECKING:
    from kvlint.analysis.target_names import TargetNames


@dataclass(frozen=True)
class Options:
    paths: list[Path]
    config: Config
    select: list[str] | None
    ignore: list[str]
    jobs: int | None
    cache_dir: Path | None  # the result cache's folder; None: --no-cache
    # What the text output shows paths relative to: the release's root for --vllm-release (said on
    # stderr), else the working folder.
    base: Path
    # Code outside the vLLM tree: the roots of the releases it is judged against (oldest first), their
    # versions, and the names every one of them defines (kvlint.scan.targets, kvlint.analysis.target_names).
    references: tuple[Path, ...] = ()
    versions: tuple[str, ...] = ()
    target_names: TargetNames | None = None


def split_codes(values: tuple[str, ...]) -> list[str]:
    """`--select KV101,KV102 --select KV103` → ["KV101", "KV102", "KV103"]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def scan_options(function):
    """The options of a command that scans a tree (`check`, `fix`)."""
    options = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option(
            "--vllm-release",
            "release",
            metavar="VERSION",
            help="Fetch this vLLM release's sources from PyPI and scan them; with PATHs outside the vLLM tree, "
            "judge them against it (a version, or a range such as '>=0.17,<0.31').",
        ),
        click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma-separated)."),
        click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip (comma-separated)."),
        click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False),
            help="pyproject.toml to read [tool.kvlint] from.",
        ),
        click.option(
            "--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores)."
        ),
        click.option("--verbose", "-v", is_flag=True, help="Show tracebacks of internal errors."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the per-file result cache."),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False),
            envvar="KVLINT_CACHE_DIR",
            help="Cache folder (default: ~/.cache/kvlint).",
        ),
        quiet_option,
    ]
    for option in reversed(options):
        function = option(function)
    return function


def output_format_options(function):
    """`--output-format full|concise|json|sarif|github`, and the older `--format text|json|sarif|github`
    (`text` is `full`)."""
    function = click.option(
        "--format",
        "legacy_format",
        type=click.Choice(sorted(set(LEGACY_FORMATS) | set(FORMATS))),
        default=None,
        help="The older name of --output-format (`text` is `full`).",
    )(function)
    return click.option(
        "--output-format",
        "output_format",
        type=click.Choice(FORMATS),
        default=None,
        help="full (default: a headline per finding, details indented), concise (one line per finding), "
        "json, sarif or github.",
    )(function)


# `paths` and `containers`: a table or JSON, under the name `check` uses for its format.
tree_format_option = click.option(
    "--output-format",
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text or json (`--format` is the same option, as for `check`).",
)


def resolve_output_format(output_format: str | None, legacy_format: str | None) -> str:
    """The format the two options name (`full` when neither is given)."""
    legacy = LEGACY_FORMATS.get(legacy_format, legacy_format) if legacy_format else None
    if output_format and legacy and output_format != legacy:
        raise click.UsageError(f"--output-format {output_format} and --format {legacy_format} disagree: give one")
    return output_format or legacy or "full"


def color_option(function):
    """`--color auto|always|never`: colour in the text output (kvlint.reporters.colour says how `auto` decides)."""
    return click.option(
        "--color",
        "color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour the full layout: `auto` on a terminal unless NO_COLOR is set (FORCE_COLOR forces it); "
        "`always` and `never` win over the environment.",
    )(function)


def fail_on_option(function):
    """`--fail-on`: which findings fail the run (`check`, `review`, and `fix` for the findings it leaves)."""
    return click.option(
        "--fail-on",
        type=click.Choice([s.value for s in Severity]),
        default=None,
        help="Lowest severity that makes the run exit 1: `error` (the default: warnings are reported but "
        "exit 0) or `warning` (every finding fails). Overrides `fail-on` in [tool.kvlint].",
    )(function)


def resolve_fail_on(value: str | None, configured: Config | Severity) -> Severity:
    """The command line's --fail-on, else the configuration's (which defaults to error)."""
    if value:
        return Severity(value)
    return configured if isinstance(configured, Severity) else configured.fail_on


def resolve_options(
    paths: tuple[str, ...],
    release: str | None,
    config_path: str | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    jobs: int | None,
    no_cache: bool,
    cache_dir: str | None,
    quiet: bool,
) -> Options:
    """The targets, configuration and cache folder the command line names; says on stderr which tree
    (unless `quiet` or --quiet)."""
    quiet = quiet or is_quiet()
    pyproject = Path(config_path) if config_path else find_pyproject(Path.cwd())
    if config_path and not pyproject.is_file():
        raise ConfigError(f"{config_path}: no such config file")
    # --ignore joins the configuration's `ignore`: `fix` and the scan apply both alike (kvlint.engine.suppress).
    config = load_config(pyproject)
    config = replace(config, ignore=[*config.ignore, *split_codes(ignore)])
    cache = Path(cache_dir) if cache_dir else None
    in_tree = any(os.path.exists(p) and find_tree_root(Path(p)) is not None for p in paths)
    if release and in_tree:
        raise click.UsageError(
            "--vllm-release with PATHs judges code outside the vLLM tree against that release: these PATHs are "
            "in a vLLM tree, judged against it"
        )
    # Code outside the vLLM tree (a PATH that is not there is the scan's error to say, before any fetch).
    outside = bool(paths) and not in_tree and all(os.path.exists(p) for p in paths)
    reference = judged_against(paths, release, config, quiet, cache) if outside else None
    targets = _targets(paths, None if paths else release, quiet, cache)
    base = targets[0].parent if release and not paths else Path.cwd()
    options = Options(
        targets,
        config,
        split_codes(select) or None,
        split_codes(ignore),
        jobs,
        _cache_folder(no_cache, cache_dir),
        base,
    )
    return replace(options, **reference) if reference else options


def judged_against(
    paths: tuple[str, ...], release: str | None, config: Config, quiet: bool, cache_dir: Path | None
) -> dict | None:
    """For PATHs outside the vLLM tree: the releases they are judged against (--vllm-release, else
    [tool.kvlint] vllm, else the project's requirement on vllm), fetched; said on stderr's first line.
    None (and the built-in reference said) when nothing names one."""
    from kvlint.scan.targets import choose_target, no_target_line

    chosen = choose_target(release, config.vllm, config.source, [Path(p) for p in paths])
    if chosen is None:
        if not quiet:
            click.echo(no_target_line(), err=True)
        return None
    return fetch_target(chosen, quiet, cache_dir)


def fetch_target(chosen: tuple[str, str], quiet: bool, cache_dir: Path | None) -> dict:
    """The releases a chosen target (specifier, origin) admits, fetched, and what every one defines."""
    from kvlint.analysis.target_names import read_target_names
    from kvlint.scan.releases import release_sources  # pip and zip handling: only when fetching
    from kvlint.scan.targets import VllmTarget, admitted_versions

    specifier, origin = chosen
    versions = admitted_versions(specifier, origin, cache_dir, quiet)
    if not quiet:
        click.echo(VllmTarget(specifier, origin, versions).line(), err=True)
    roots = {version: release_sources(version, quiet=quiet, cache_dir=cache_dir) for version in versions}
    for version, root in roots.items():
        if find_tree_root(root / "vllm") is None:
            raise TargetError(f"vllm {version}: no vllm/v1/kv_cache_interface.py: kvlint cannot judge code against it")
    names = read_target_names(roots)
    return {"references": tuple(roots.values()), "versions": versions, "target_names": names}


def _targets(paths: tuple[str, ...], release: str | None, quiet: bool, cache_dir: Path | None) -> list[Path]:
    if release:
        from kvlint.scan.releases import release_sources  # pip and zip handling: only when fetching

        root = release_sources(release, quiet=quiet, cache_dir=cache_dir)  # --cache-dir holds releases too
        if not quiet:
            click.echo(f"kvlint: scanning vLLM {release} as released; paths are relative to {root}", err=True)
        return [root / "vllm"]
    if paths:
        return [Path(p) for p in paths]
    from kvlint.scan.targets import default_target

    target, line = default_target(Path.cwd())
    if not quiet:
        click.echo(line, err=True)
    return [target]


def _cache_folder(no_cache: bool, cache_dir: str | None) -> Path | None:
    if no_cache:
        return None
    from kvlint.scan.storage import cache_root

    return (Path(cache_dir) if cache_dir else cache_root()) / "results"


def run_scan(options: Options, progress: bool = True) -> ScanResult:
    """Run the rules as the options say, showing the scan's phases on stderr (`progress_display`). Says on
    stderr when the configuration excluded every file."""
    results = [
        scan(
            options.paths,
            options.config,
            options.select,
            options.ignore,
            options.jobs,
            cache_dir=options.cache_dir,
            progress=progress_display() if progress else Display.NONE,
            reference=reference,
            target=options.target_names,
        )
        for reference in options.references or (None,)
    ]
    result = merge_scans(results, options.versions)
    source = f" ({printable(options.config.source)})" if options.config.source else ""
    if result.excluded_by_configuration:
        click.echo(
            f"kvlint: {result.excluded_by_configuration} file(s) excluded by the configuration's `exclude`{source}:"
            " nothing checked",
            err=True,
        )
    switched_off = _what_switches_every_rule_off(options, result)
    if switched_off is not None:
        kept = any(codes_left_on((UNREADABLE_CODE,), ignored_for(f.path, options.config)) for f in result.files)
        others = f"every rule but {UNREADABLE_CODE}" if kept and UNREADABLE_CODE in result.codes else "every rule"
        where = source if switched_off.startswith("the configuration") else ""
        click.echo(f"kvlint: {switched_off}{where} switches {others} off: nothing checked", err=True)
    return result


def _what_switches_every_rule_off(options: Options, result: ScanResult) -> str | None:
    """The setting that leaves no rule but KV000 (a file that cannot be read) to report in any file scanned,
    or None when some rule checks some file. A checkout's own configuration can do it; it is said, not silent."""
    rules = tuple(code for code in result.codes if code != UNREADABLE_CODE)
    if not result.files or any(codes_left_on(rules, ignored_for(f.path, options.config)) for f in result.files):
        return None
    if not rules:
        return "`--select`" if options.select is not None else "the configuration's `select`"
    if not codes_left_on(rules, options.ignore):
        return "`--ignore`"
    if not codes_left_on(rules, options.config.ignore):
        return "the configuration's `ignore`"
    return "the configuration's `per-file-ignores`"


def say_degradations(result: ScanResult) -> bool:
    """Say on stderr what the cross-file analysis could not do (one line each); True when there was some:
    the command then exits 2. Asked last, when every use of the tree index has happened."""
    for line in result.degradations:
        click.echo(f"kvlint: error: {printable(line)}", err=True)
    return bool(result.degradations)


def vllm_tree_target(path: str | None, release: str | None, quiet: bool) -> tuple[Path, Path]:
    """(what to read, the root of its vLLM tree) for a command that needs one tree (`paths`, `containers`):
    PATH, a fetched release, or the default target; a one-line error when it is not in a vLLM tree."""
    if path and release:
        raise click.UsageError("give either PATH or --vllm-release, not both")
    if release:
        from kvlint.scan.releases import release_sources

        target = release_sources(release, quiet=quiet)
    elif path:
        target = Path(path)
    else:
        from kvlint.scan.targets import default_target

        target, line = default_target(Path.cwd())
        click.echo(line, err=True)
    if not target.exists():
        raise TargetError(f"{target}: no such file or directory")
    root = find_tree_root(target)
    if root is None:
        raise TargetError(f"{target}: not in a vLLM tree (no vllm/v1/kv_cache_interface.py found)")
    return target, Path(root)
