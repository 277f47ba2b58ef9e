"""`kvlint check`: scan, render the findings in the chosen format, summarise, exit."""

from __future__ import annotations

import sys

import click

from kvlint.commands.baseline import baseline_option, resolve_baseline, without_old_findings
from kvlint.commands.options import (
    color_option,
    fail_on_option,
    output_format_options,
    resolve_fail_on,
    resolve_options,
    resolve_output_format,
    run_scan,
    say_degradations,
    scan_options,
)
from kvlint.engine.summary import Summary
from kvlint.escaping import printable
from kvlint.reporters import Reporter, load_reporter
from kvlint.reporters.colour import use_colour
from kvlint.reporters.wrap import terminal_width
from kvlint.scan.replay import keep_run


@click.command()
@scan_options
@output_format_options
@color_option
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@fail_on_option
@baseline_option
@click.option(
    "--statistics",
    is_flag=True,
    help="Print counts of root causes per rule and severity instead of findings (text format); a finding "
    "with related locations counts once.",
)
def check(
    paths,
    release,
    select,
    ignore,
    config_path,
    jobs,
    verbose,
    no_cache,
    cache_dir,
    output_format,
    legacy_format,
    color,
    exit_zero,
    fail_on,
    baseline_commit,
    statistics,
):
    """Report findings, one per root cause (the other findings of that cause are its related locations).

    Exit 0 clean, 1 findings at or above --fail-on (default: error, so warnings alone exit 0), 2
    usage/config/internal error.
    """
    output_format = resolve_output_format(output_format, legacy_format)
    # Status and progress go to stderr whatever the format (a CI log wants them; stdout stays the report).
    if baseline_commit is not None and release:
        raise click.UsageError("--baseline-commit compares with a git commit: give PATHs, not --vllm-release")
    options = resolve_options(paths, release, config_path, select, ignore, jobs, no_cache, cache_dir, quiet=False)
    baseline = resolve_baseline(baseline_commit, paths) if baseline_commit is not None else None
    reporter = chosen_reporter(output_format, options.base, color)
    result = run_scan(options)
    findings, left_out = without_old_findings(result.findings, options, baseline) if baseline else (result.findings, 0)
    summary = Summary(findings, len(result.files), resolve_fail_on(fail_on, options.config))
    if statistics and output_format in ("full", "concise"):
        for line in summary.statistics():
            click.echo(line)
    else:
        report = reporter.render(findings, result.rules if reporter.USES_RULE_DOCS else ())
        # click strips colour where stdout is no terminal unless told: `--color always` keeps it there.
        click.echo(report, nl=False, color=True if getattr(reporter, "colour", False) else None)
    if not reporter.MACHINE:
        click.echo(summary.line(baseline=(baseline.name, left_out) if baseline else None), err=True)
    if verbose:
        for file_result in result.files:
            if file_result.detail:
                click.echo(f"kvlint: details for {printable(file_result.path)}:\n{file_result.detail}", err=True)
    # A cross-file analysis that failed is an error, not a clean result.
    degraded = say_degradations(result)
    status = summary.exit_code(exit_zero, error=degraded)
    # Kept to be replayed (kvlint.scan.replay) only when the same files are sure to give the same output.
    repeatable = not (degraded or verbose or release or baseline or options.references) and not any(
        file_result.detail for file_result in result.files
    )
    keep_run(status, options.cache_dir, repeatable)
    sys.exit(status)


def chosen_reporter(output_format: str, base, color: str) -> Reporter:
    """The chosen format's reporter; the full layout as wide as the terminal (or its default, off one), coloured
    as `--color` and the environment say."""
    if output_format != "full":
        return load_reporter(output_format)(base)
    return load_reporter(output_format)(base, width=terminal_width(sys.stdout), colour=use_colour(color, sys.stdout))
