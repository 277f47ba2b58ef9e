"""The `kvlint review` click command (filled in below)."""

from __future__ import annotations

import click


@click.command()
def review():
    """Lint what a pull request changes and emit (or post) a GitHub review."""
