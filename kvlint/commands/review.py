"""The `kvlint review` command: review a pull request (kvlint.review.pipeline), render it, post it.

Every line this command writes goes through `_Output`: control characters in file names are escaped (no
line can be injected into a log or a workflow command), and the token is replaced by *** wherever it
would appear, internal errors included.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import click

from kvlint.commands.options import fail_on_option, resolve_fail_on
from kvlint.commands.quiet import progress_display, quiet_option
from kvlint.engine.summary import EXIT_CLEAN, EXIT_ERROR, exit_code, failing
from kvlint.errors import KvlintError
from kvlint.review import github_api, saved
from kvlint.review.diff import repository_root
from kvlint.review.render import (
    github_review,
    markdown,
    printable,
    rdjson,
    review_payload,
)
from kvlint.review.review import DEFAULT_MAX_COMMENTS, limit_review, summarise

FORMATS = ("github-review", "markdown", "rdjson", "review-data")


class _Output:
    def __init__(self):
        self.redact = github_api.redactor(github_api.token_from_environment())

    def out(self, text: str, newline: bool = True) -> None:
        click.echo(self.redact(text), nl=newline)

    def say(self, text: str) -> None:
        """One line on stderr: escaped, then redacted."""
        click.echo(self.redact(printable(text)), err=True)


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@click.command()
@click.option(
    "--base", metavar="REF", help="The branch or commit the pull request merges into (required unless --payload)."
)
@click.option(
    "--head", metavar="REF", help="The pull request's commit (default: the working tree). Read with git, never run."
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="github-review",
    show_default=True,
    help="review-data: the review as data, the only input --payload accepts.",
)
@click.option(
    "--post", is_flag=True, help="Post the review to GitHub (GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_API_URL)."
)
@click.option("--pr", "pull", type=click.IntRange(min=1), help="Pull request number (default: from GITHUB_EVENT_PATH).")
@click.option(
    "--payload",
    "payload_path",
    type=click.Path(dir_okay=False),
    help="Post this saved review (written with --format review-data) instead of reviewing: the second stage of a fork-safe workflow.",
)
@click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False),
    default=".",
    help="The git checkout (default: the current folder).",
)
@click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip (comma-separated).")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="pyproject.toml to read (default: the base revision's).",
)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option(
    "--max-comments",
    type=click.IntRange(min=1, max=1000),
    default=DEFAULT_MAX_COMMENTS,
    show_default=True,
    help="Comments per review; findings past it are counted in the review's body.",
)
@click.option(
    "--vllm-release",
    "release",
    metavar="VERSION",
    help="For a repository outside the vLLM tree (a plugin, a connector): the vLLM release or range it is judged "
    "against (default: the base revision's [tool.kvlint] vllm, else its requirement on vllm).",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when the diff has findings.")
@fail_on_option
@click.option("--verbose", "-v", is_flag=True, help="Show the traceback of an internal error.")
@quiet_option
def review(
    base,
    head,
    output_format,
    post,
    pull,
    payload_path,
    repo_path,
    select,
    ignore,
    config_path,
    jobs,
    max_comments,
    release,
    exit_zero,
    fail_on,
    verbose,
):
    """Lint only what a pull request changes; emit (or --post) a GitHub review with suggestions.

    Exit 0 when the lines the pull request changes have no finding at or above --fail-on (default: the base
    revision's `fail-on`, else error), 1 when they have or when the cross-file analysis could not read a file
    of the pull request it needs (listed in the review), 2 on errors (an analysis that failed for another
    reason included, even with --exit-zero).
    """
    output = _Output()
    try:
        if payload_path:
            sys.exit(_post_saved(output, payload_path, pull, max_comments))
        if not base:
            raise click.UsageError("--base REF is required (the branch or commit the pull request merges into)")
        # Settings for posting are checked before the scan: a missing or malformed token fails fast.
        client, number = (
            (github_api.client_from_environment(), github_api.pull_request_number(pull)) if post else (None, None)
        )
        repo = repository_root(Path(repo_path))
        from kvlint.commands.review_target import review_target
        from kvlint.review.pipeline import (
            make_review,  # the scan and the analysis, only once the settings hold
        )

        reference, target = review_target(repo, base, config_path, release, quiet=False)
        result, texts = make_review(
            repo,
            base,
            head,
            config_path,
            _split(select) or None,
            _split(ignore),
            jobs,
            progress_display(),
            reference,
            target,
        )
        result.fail_on = resolve_fail_on(fail_on, result.fail_on)
        limit_review(result, max_comments)
        payload = github_review(result, max_comments)
        if output_format == "github-review":
            output.out(json.dumps(payload, indent=2, ensure_ascii=False))
        elif output_format == "markdown":
            output.out(markdown(result, max_comments), newline=False)
        elif output_format == "rdjson":
            output.out(json.dumps(rdjson(result, texts), indent=2, ensure_ascii=False))
        else:
            output.out(
                json.dumps(saved.review_data(result, summarise(result, max_comments)), indent=2, ensure_ascii=False)
            )
        _say_not_read(output, result)
        if result.suppressions_added:
            output.say(
                f"kvlint: the pull request adds {len(result.suppressions_added)} `# kvlint: ignore` comment(s) (said in the review)."
            )
        if client is not None:
            outcome = github_api.sync_review(client, number, payload)
            output.say(
                f"kvlint: review posted: {outcome.posted} new comment(s), {outcome.kept} kept, {outcome.deleted} outdated deleted."
            )
        output.say(_summary_line(result))
        # A cross-file analysis that failed is an error, as in `check`: the review says it too, and is posted.
        for line in result.incomplete:
            output.say(f"kvlint: error: {line}")
    except KvlintError as error:
        output.say(f"kvlint: error: {' '.join(str(error).split())}")
        sys.exit(EXIT_ERROR)
    except click.exceptions.ClickException:
        raise
    except Exception as error:  # noqa: BLE001 — said here, not by the group, so that it is escaped and redacted
        if verbose:
            for line in traceback.format_exc().splitlines():
                output.say(line)
        output.say(
            f"kvlint: internal error: {type(error).__name__}: {' '.join(str(error).split())} (re-run with --verbose for details)"
        )
        sys.exit(EXIT_ERROR)
    sys.exit(_exit_code(result, exit_zero))


def _say_not_read(output: _Output, result) -> None:
    """Each file the review could not read, with why; then whether the cross-file analysis needed some."""
    for path, why in result.refused:
        output.say(f"kvlint: not read: {path}: {why}")
    if result.analysis_unread:
        output.say(
            f"kvlint: the cross-file analysis did not read {result.analysis_unread} of these file(s), which it "
            "reads: findings that compare sizing paths across files may be missing (the review says so)."
        )


def _summary_line(result) -> str:
    outside = f"; {len(result.outside_diff)} more in the changed files, outside the diff" if result.outside_diff else ""
    passing = (
        f"; none fails the run (--fail-on {result.fail_on.value})"
        if result.in_diff and not failing(result.in_diff, result.fail_on)
        else ""
    )
    return (
        f"kvlint: {len(result.in_diff)} finding(s) on changed lines in {result.files_checked} file(s)"
        f"{outside}{passing}."
    )


def _exit_code(result, exit_zero: bool) -> int:
    """The one table (kvlint.engine.summary.exit_code): 2 when the cross-file analysis could not do what it
    does, else 1 for findings on changed lines at or above --fail-on, or for files it needed and could not
    read (the pull request's: listed in the review, which is posted), unless --exit-zero, else 0."""
    failed = bool(failing(result.in_diff, result.fail_on)) or bool(result.analysis_unread)
    return exit_code(failed, exit_zero=exit_zero, error=bool(result.incomplete))


def _post_saved(output: _Output, payload_path: str, pull: int | None, max_comments: int) -> int:
    """Second stage of the fork-safe workflow: render the saved review's fields (checked) and post that."""
    saved_review = saved.review_from_data(saved.load(payload_path))
    summary, comments = saved.with_limit(saved_review, max_comments)
    payload = review_payload(summary, comments, saved_review.commit)
    client = github_api.client_from_environment()
    number = github_api.pull_request_number(pull)
    github_api.check_head(client, number, saved_review.commit)
    outcome = github_api.sync_review(client, number, payload)
    output.say(
        f"kvlint: review posted: {outcome.posted} new comment(s), {outcome.kept} kept, {outcome.deleted} outdated deleted."
    )
    return EXIT_CLEAN
