"""Which vLLM release `kvlint review` judges a repository outside the vLLM tree against: --vllm-release, else
the base revision's `vllm` under [tool.kvlint] or its requirement on vllm (a pull request cannot choose the
release it is judged against for itself, as it cannot switch rules off). A range is judged against its newest
release, with the names every release of the range defines (remedies and fixes), as `check` does."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kvlint.analysis.tree_root import find_tree_root
from kvlint.commands.options import fetch_target
from kvlint.review.git import read_blob, resolve_commit
from kvlint.scan.config import load_config
from kvlint.scan.targets import choose_target, no_target_line

if TYPE_CHECKING:
    from kvlint.analysis.target_names import TargetNames


def review_target(
    repo: Path, base: str, config_path: str | None, release: str | None, quiet: bool
) -> tuple[Path | None, TargetNames | None]:
    """(the root of the release the review judges against, what every targeted release defines); (None,
    None) for a vLLM checkout, or when nothing names a release (then the built-in reference is said)."""
    if find_tree_root(repo) is not None:
        if release:
            raise click.UsageError("--vllm-release judges code outside the vLLM tree: this repository is a vLLM tree")
        return None, None
    with tempfile.TemporaryDirectory(prefix="kvlint-review-target-") as scratch:
        data = read_blob(repo, resolve_commit(repo, base), "pyproject.toml")
        pyproject = Path(scratch) / "pyproject.toml"
        if data is not None:
            pyproject.write_bytes(data)
        config = load_config(Path(config_path) if config_path else pyproject if data is not None else None)
        chosen = choose_target(release, config.vllm, config.source, [Path(scratch)])
    if chosen is None:
        if not quiet:
            click.echo(no_target_line(), err=True)
        return None, None
    fetched = fetch_target(chosen, quiet, None)
    return fetched["references"][-1], fetched["target_names"]
