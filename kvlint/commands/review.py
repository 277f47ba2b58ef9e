"""The `kvlint review` command: diff → scan the changed files → keep what the diff touches → render/post."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click

from kvlint.engine.source import decode_source
from kvlint.engine.summary import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from kvlint.errors import ConfigError, RegistryError, UnreadableSource
from kvlint.scan.config import load_config
from kvlint.scan.files import is_excluded
from kvlint.review import github_api
from kvlint.scan.index_cache import build_project_index
from kvlint.review.crossfile import findings_through_touched_targets, issue_key
from kvlint.review.diff import (
    ReviewError,
    changed_files,
    git,
    materialise_python_tree,
    read_blob,
    repository_root,
    resolve_commit,
)
from kvlint.review.render import github_review, markdown, rdjson
from kvlint.review.review import Review, build_review
from kvlint.scan.runner import scan

FORMATS = ("github-review", "markdown", "rdjson")


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _load_review_config(repo: Path, base: str, config_path: str | None, scratch: Path):
    """--config, else the base revision's pyproject.toml: a pull request cannot switch rules off for itself."""
    if config_path:
        path = Path(config_path)
        if not path.is_file():
            raise ConfigError(f"{config_path}: no such config file")
        return load_config(path)
    data = read_blob(repo, base, "pyproject.toml")
    if data is None:
        return load_config(None)
    copy = scratch / "base-pyproject.toml"
    copy.write_bytes(data)
    return load_config(copy)


def make_review(repo: Path, base: str, head: str | None, config_path: str | None, select, ignore, jobs) -> tuple[Review, dict[str, str]]:
    base_commit = resolve_commit(repo, base)
    head_commit = resolve_commit(repo, head) if head else None
    change = changed_files(repo, base_commit, head_commit)
    refused = list(change.refused)
    with tempfile.TemporaryDirectory(prefix="kvlint-review-") as scratch_name:
        scratch = Path(scratch_name)
        config = _load_review_config(repo, base_commit, config_path, scratch)
        if head_commit is not None:
            tree = scratch / "head"
            tree.mkdir()
            refused += materialise_python_tree(repo, head_commit, tree)
        else:
            tree = repo
        python = sorted(
            path for path in change.files if path.endswith(".py") and not is_excluded(path, config.exclude) and (tree / path).is_file()
        )
        findings, texts, files_checked = [], {}, 0
        if python:
            # Paths relative to the tree: findings, excludes and per-file-ignores see repository paths.
            result = scan([Path(p) for p in python], config, _split(select) or None, _split(ignore), jobs, cache_dir=None, display_root=tree)
            for path in python:
                try:
                    texts[path] = decode_source((tree / path).read_bytes()).text
                except (UnreadableSource, OSError):
                    continue
            findings = [f for f in result.findings if f.path in change.files]
            files_checked = len(result.files)

            def base_issue_keys() -> set[tuple[str, str, str, str]]:
                base_tree = scratch / "base"
                base_tree.mkdir(exist_ok=True)
                materialise_python_tree(repo, base_commit, base_tree)
                inside = [base_tree / p for p in python if (base_tree / p).is_file()] or [base_tree]
                sizing = build_project_index(inside, scheduler_only_paths=tuple(config.scheduler_only_paths)).sizing
                return {issue_key(issue) for issue in (sizing.divergences if sizing is not None else ())}

            anchored, replaced = findings_through_touched_targets(
                result.project, tree, change.files, texts, findings, result.rules, config, base_issue_keys
            )
            findings = [f for f in findings if f not in replaced] + anchored
    review = build_review(findings, change.files, texts, refused, files_checked)
    review.commit = head_commit or _head_commit(repo)
    return review, texts


def _head_commit(repo: Path) -> str | None:
    try:
        return git(repo, "rev-parse", "HEAD").decode().strip() or None
    except ReviewError:
        return None


@click.command()
@click.option("--base", metavar="REF", help="The branch or commit the pull request merges into (required unless --payload).")
@click.option("--head", metavar="REF", help="The pull request's commit (default: the working tree). Read with git, never run.")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="github-review", show_default=True)
@click.option("--post", is_flag=True, help="Post the review to GitHub (GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_API_URL).")
@click.option("--pr", "pull", type=click.IntRange(min=1), help="Pull request number (default: from GITHUB_EVENT_PATH).")
@click.option("--payload", "payload_path", type=click.Path(dir_okay=False), help="Post this saved github-review JSON instead of reviewing (the second stage of a fork-safe workflow).")
@click.option("--repo", "repo_path", type=click.Path(file_okay=False), default=".", help="The git checkout (default: the current folder).")
@click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip (comma-separated).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="pyproject.toml to read (default: the base revision's).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when the diff has findings.")
def review(base, head, output_format, post, pull, payload_path, repo_path, select, ignore, config_path, jobs, exit_zero):
    """Lint only what a pull request changes; emit (or --post) a GitHub review with suggestions.

    Exit 0 when the lines the pull request changes are clean, 1 when they have findings, 2 on errors.
    """
    try:
        if payload_path:
            sys.exit(_post_saved(payload_path, pull))
        if not base:
            raise click.UsageError("--base REF is required (the branch or commit the pull request merges into)")
        # Settings for posting are checked before the scan: a missing token fails fast.
        client, number = (github_api.client_from_environment(), github_api.pull_request_number(pull)) if post else (None, None)
        repo = repository_root(Path(repo_path))
        result, texts = make_review(repo, base, head, config_path, select, ignore, jobs)
        payload = github_review(result)
        if output_format == "github-review":
            click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        elif output_format == "markdown":
            click.echo(markdown(result), nl=False)
        else:
            click.echo(json.dumps(rdjson(result, texts), indent=2, ensure_ascii=False))
        for line in result.refused:
            click.echo(f"kvlint: not read: {line}", err=True)
        if client is not None:
            outcome = github_api.sync_review(client, number, payload)
            click.echo(f"kvlint: review posted: {outcome.posted} new comment(s), {outcome.kept} kept, {outcome.deleted} outdated deleted.", err=True)
        outside = f"; {len(result.outside_diff)} more in the changed files, outside the diff" if result.outside_diff else ""
        click.echo(f"kvlint: {len(result.in_diff)} finding(s) on changed lines in {result.files_checked} file(s){outside}.", err=True)
    except (ReviewError, github_api.GitHubError, ConfigError, RegistryError) as error:
        click.echo(f"kvlint: error: {' '.join(str(error).split())}", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_CLEAN if exit_zero or not result.in_diff else EXIT_FINDINGS)


def _post_saved(payload_path: str, pull: int | None) -> int:
    """Second stage of the fork-safe workflow: post a review the first stage produced, after checking its shape."""
    try:
        with open(payload_path, encoding="utf-8") as stream:
            payload = json.load(stream)
    except (OSError, ValueError) as error:
        raise ReviewError(f"{payload_path}: cannot read the saved review: {error}") from None
    payload = github_api.validate_payload(payload)
    client = github_api.client_from_environment()
    number = github_api.pull_request_number(pull)
    github_api.check_head(client, number, payload)
    outcome = github_api.sync_review(client, number, payload)
    click.echo(f"kvlint: review posted: {outcome.posted} new comment(s), {outcome.kept} kept, {outcome.deleted} outdated deleted.", err=True)
    return EXIT_CLEAN
