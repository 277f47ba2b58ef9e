"""-q/--quiet, and how a command shows its progress on stderr: not at all with --quiet, a live line on a
terminal, one line per phase elsewhere (a CI log). stdout never carries progress: JSON and SARIF stay clean.

The flag is kept in the click context rather than passed as a parameter, so that every command reads it
the same way (`is_quiet()`) and no command function has to thread it through.
"""

from __future__ import annotations

import click

from kvlint.scan.progress import Display, display_for

_QUIET = "kvlint.quiet"


def _remember_quiet(context: click.Context, _parameter, value: bool) -> None:
    context.meta[_QUIET] = context.meta.get(_QUIET, False) or value


def quiet_option(function):
    """The -q/--quiet option, for any command."""
    return click.option(
        "--quiet",
        "-q",
        is_flag=True,
        expose_value=False,
        callback=_remember_quiet,
        help="No progress or status lines on stderr; findings, errors and the summary still appear.",
    )(function)


def is_quiet() -> bool:
    """Whether the running command was given --quiet."""
    context = click.get_current_context(silent=True)
    return bool(context is not None and context.meta.get(_QUIET))


def progress_display() -> Display:
    """How the running command shows its progress on stderr."""
    return display_for(is_quiet())
