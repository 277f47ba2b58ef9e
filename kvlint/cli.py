"""The `kvlint` command line: each command parses options, runs the scan, renders, and picks the exit code."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from kvlint import __version__
from kvlint.scan.config import Config, ConfigError, find_pyproject, load_config
from kvlint.errors import KvlintError
from kvlint.engine.registry import all_rules, rule_by_code
from kvlint.reporters import FORMATS, load_reporter
from kvlint.scan.runner import ScanResult, scan
from kvlint.engine.source import DecodedSource, UnreadableSource, decode_source
from kvlint.types import Finding

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


# Commands in their own packages, imported only when invoked: `kvlint check` starts without them.
LAZY_COMMANDS = {
    "paths": ("kvlint.commands.paths", "paths"),
    "review": ("kvlint.commands.review", "review"),
    "verify": ("kvlint.commands.verify", "verify"),
}


class KvlintGroup(click.Group):
    """Turns any error into one line and exit 2; a traceback only with --verbose. Loads big commands lazily."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str):
        if name in LAZY_COMMANDS and name not in self.commands:
            import importlib

            module_name, attribute = LAZY_COMMANDS[name]
            self.add_command(getattr(importlib.import_module(module_name), attribute), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KvlintError as error:
            click.echo(f"kvlint: error: {error}", err=True)
            ctx.exit(EXIT_ERROR)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as error:
            if "--verbose" in sys.argv or "-v" in sys.argv:
                import traceback

                traceback.print_exc()
            click.echo(f"kvlint: internal error: {type(error).__name__}: {error} (re-run with --verbose for details)", err=True)
            ctx.exit(EXIT_ERROR)


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@dataclass
class Options:
    paths: list[Path]
    config: Config
    select: list[str] | None
    ignore: list[str]
    jobs: int | None
    cache_dir: Path | None = None


def _cache_folder(no_cache: bool, cache_dir: str | None) -> Path | None:
    if no_cache:
        return None
    from kvlint.scan.result_cache import cache_root

    return (Path(cache_dir) if cache_dir else cache_root()) / "results"


def _scan(options: Options, no_cache: bool, cache_dir: str | None, progress: bool) -> ScanResult:
    """Run the rules as the options say; the progress line only ever goes to a terminal."""
    return scan(
        options.paths,
        options.config,
        options.select,
        options.ignore,
        options.jobs,
        cache_dir=_cache_folder(no_cache, cache_dir),
        progress=progress and sys.stderr.isatty(),
    )


def _resolve(paths: tuple[str, ...], release: str | None, config_path: str | None, select, ignore, jobs, quiet: bool) -> Options:
    if release and paths:
        raise click.UsageError("give either PATHs or --vllm-release, not both")
    if release:
        from kvlint.scan.releases import release_sources  # pip and zip handling: only when fetching

        root = release_sources(release, quiet=quiet)
        targets = [root / "vllm"]
        click.echo(f"kvlint: scanning vLLM {release} from PyPI ({root})", err=True)
    elif paths:
        targets = [Path(p) for p in paths]
    else:
        from kvlint.scan.targets import default_target

        target, line = default_target(Path.cwd())
        click.echo(line, err=True)
        targets = [target]
    pyproject = Path(config_path) if config_path else find_pyproject(Path.cwd())
    if config_path and not pyproject.is_file():
        raise ConfigError(f"{config_path}: no such config file")
    config = load_config(pyproject)
    return Options(targets, config, _split(select) or None, _split(ignore), jobs)


def _common(function):
    options = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option("--vllm-release", "release", metavar="VERSION", help="Fetch this vLLM release's sources from PyPI and scan them."),
        click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma-separated)."),
        click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip (comma-separated)."),
        click.option("--config", "config_path", type=click.Path(dir_okay=False), help="pyproject.toml to read [tool.kvlint] from."),
        click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores)."),
        click.option("--verbose", "-v", is_flag=True, help="Show tracebacks of internal errors."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the per-file result cache."),
        click.option("--cache-dir", type=click.Path(file_okay=False), envvar="KVLINT_CACHE_DIR", help="Cache folder (default: ~/.cache/kvlint)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group(cls=KvlintGroup)
@click.version_option(__version__, prog_name="kvlint")
def main() -> None:
    """kvlint: find and fix KV-cache sizing bugs in vLLM (DCP scaling on container specs)."""


@main.command()
@_common
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of findings (text format).")
def check(paths, release, select, ignore, config_path, jobs, verbose, no_cache, cache_dir, output_format, exit_zero, statistics):
    """Report findings. Exit 0 clean, 1 findings, 2 usage/config/internal error."""
    reporter = load_reporter(output_format)()
    options = _resolve(paths, release, config_path, select, ignore, jobs, quiet=reporter.MACHINE)
    result = _scan(options, no_cache, cache_dir, progress=not reporter.MACHINE)
    if statistics and output_format == "text":
        counts: dict[str, int] = {}
        for f in result.findings:
            counts[f"{f.code} {f.name}"] = counts.get(f"{f.code} {f.name}", 0) + 1
        for name, count in sorted(counts.items()):
            click.echo(f"{count:6d}  {name}")
    else:
        click.echo(reporter.render(result.findings, result.rules if reporter.USES_RULE_DOCS else ()), nl=False)
    if not reporter.MACHINE:
        _summary(result)
    if verbose:
        for file_result in result.files:
            if getattr(file_result, "detail", None):
                click.echo(f"kvlint: details for {file_result.path}:\n{file_result.detail}", err=True)
    sys.exit(EXIT_CLEAN if exit_zero or not result.findings else EXIT_FINDINGS)


def _summary(result: ScanResult) -> None:
    fixable_count = sum(1 for f in result.findings if f.fix and f.fix.applicability.value == "safe")
    unsafe_count = sum(1 for f in result.findings if f.fix and f.fix.applicability.value == "unsafe")
    files = len(result.files)
    if not result.findings:
        click.echo(f"kvlint: {files} files checked, no findings.", err=True)
        return
    extra = []
    if fixable_count:
        extra.append(f"{fixable_count} fixable with `kvlint fix`")
    if unsafe_count:
        extra.append(f"{unsafe_count} more with `--unsafe-fixes`")
    tail = f" ({'; '.join(extra)})" if extra else ""
    click.echo(f"kvlint: {len(result.findings)} finding(s) in {files} files checked{tail}.", err=True)


@main.command()
@_common
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff of the fixes and write nothing.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour beyond the intended one.")
def fix(paths, release, select, ignore, config_path, jobs, verbose, no_cache, cache_dir, show_diff, unsafe_fixes):
    """Apply safe fixes in place, atomically. Exit 0 when no finding is left, 1 when some remain."""
    from kvlint.fixing.apply import FixError, fixable  # libcst's codemod machinery: only `fix` needs it
    options = _resolve(paths, release, config_path, select, ignore, jobs, quiet=False)
    result = _scan(options, no_cache, cache_dir, progress=True)
    remaining: list[Finding] = []
    changed_files = 0
    failed = False
    by_file: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_file.setdefault(f.path, []).append(f)
    for path, findings in sorted(by_file.items()):
        if not any(fixable(f, unsafe_fixes) for f in findings):
            remaining.extend(findings)
            continue
        try:
            applied, left, diff = _fix_file(Path(path), findings[0], result, options, unsafe_fixes, show_diff)
        except (FixError, UnreadableSource, OSError) as error:
            click.echo(f"{path}: not fixed: {error}", err=True)
            remaining.extend(findings)
            failed = True
            continue
        if applied:
            changed_files += 1
            if show_diff:
                click.echo(diff, nl=False)
            else:
                codes = ", ".join(sorted({f.code for f in applied}))
                click.echo(f"{path}: fixed {len(applied)} finding(s) ({codes})", err=True)
        remaining.extend(left)
    for f in sorted(remaining, key=Finding.sort_key):
        note = ""
        if f.fix_unavailable:
            note = f" — {f.fix_unavailable}"
        elif f.fix is not None and not unsafe_fixes and f.fix.applicability.value == "unsafe":
            note = " — unsafe fix not applied (use --unsafe-fixes)"
        click.echo(f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}{note}")
    verb = "would fix" if show_diff else "fixed"
    click.echo(f"kvlint: {verb} {changed_files} file(s); {len(remaining)} finding(s) left.", err=True)
    if show_diff:
        sys.exit(EXIT_FINDINGS if changed_files or remaining else EXIT_CLEAN)
    sys.exit(EXIT_FINDINGS if remaining or failed else EXIT_CLEAN)


def _fix_file(path: Path, sample: Finding, result: ScanResult, options: Options, unsafe: bool, show_diff: bool):
    """Re-lint a fresh snapshot of the file, apply its fixes, verify, write atomically. Returns (applied, left, diff)."""
    from kvlint.engine.lint import lint_bytes
    from kvlint.fixing.apply import apply_fixes, check_compiles, encode_like, write_atomically
    original = path.read_bytes()
    decoded: DecodedSource = decode_source(original)
    request = _request_for(path, sample, result, options)
    current = lint_bytes(request, original)
    outcome = apply_fixes(decoded.text, list(current.findings), unsafe)
    if not outcome.applied:
        return (), list(current.findings), ""
    check_compiles(outcome.text, str(path))
    left = [f for f in current.findings if f not in outcome.applied]
    # Re-lint the result: what is left is what the user still has to look at (and proves idempotence).
    after = lint_bytes(request, encode_like(outcome.text, decoded.encoding))
    left = list(after.findings)
    import difflib

    diff = "".join(
        difflib.unified_diff(
            decoded.text.splitlines(keepends=True),
            outcome.text.splitlines(keepends=True),
            fromfile=f"a/{sample.path}",
            tofile=f"b/{sample.path}",
        )
    )
    if not show_diff:
        write_atomically(path, original, encode_like(outcome.text, decoded.encoding))
    return outcome.applied, left, diff


def _request_for(path: Path, sample: Finding, result: ScanResult, options: Options):
    from kvlint.engine.lint import LintRequest
    from kvlint.scan.runner import module_path_of, rules_for

    rules = rules_for(sample.path, result.rules, options.config)
    return LintRequest(sample.path, module_path_of(path, result.project.root), result.project, rules, options.config.rule_settings())


@main.command("rules")
def list_rules():
    """List every rule with its code, name and fix availability."""
    for rule in all_rules():
        fix = "fix" if rule.FIX_TITLE else "   "
        click.echo(f"{rule.CODE}  {rule.NAME:<28} {fix}  {_first_sentence(rule)}")


def _first_sentence(rule) -> str:
    for block in rule.documentation().split("## ")[1:]:
        title, _, body = block.partition("\n")
        if title.strip() == "What it does":
            text = " ".join(body.split())
            return text.split(". ")[0].rstrip(".") + "."
    return ""


@main.command()
@click.argument("code")
def explain(code):
    """Explain a rule: what it finds, why it is wrong, an example, the fix and its safety."""
    rule = rule_by_code(code)
    if rule is None:
        raise click.UsageError(f"unknown rule {code!r}; `kvlint rules` lists them")
    click.echo(f"# {rule.CODE} {rule.NAME}\n")
    click.echo(rule.documentation())
    if rule.FIX_TITLE:
        click.echo(f"\nFix: {rule.FIX_TITLE}")
    if rule.INVALID:
        click.echo("\n## Flagged (from the rule's tests)\n```python")
        click.echo(rule.INVALID[0].source.rstrip())
        click.echo("```")
    if rule.VALID:
        click.echo("\n## Not flagged (from the rule's tests)\n```python")
        click.echo(rule.VALID[0].source.rstrip())
        click.echo("```")
