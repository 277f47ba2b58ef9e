"""The `kvlint` command line: the command group. Each command lives in kvlint/commands/, one module each."""

from __future__ import annotations

import importlib
import sys

import click

from kvlint import __version__
from kvlint.engine.summary import EXIT_ERROR
from kvlint.errors import KvlintError

# Command name -> (module, attribute). A command's module is imported only when it is invoked (or help
# lists it): `kvlint check` starts without the others.
COMMANDS = {
    "check": ("kvlint.commands.check", "check"),
    "explain": ("kvlint.commands.rules", "explain"),
    "fix": ("kvlint.commands.fix", "fix"),
    "paths": ("kvlint.commands.paths", "paths"),
    "review": ("kvlint.commands.review", "review"),
    "rules": ("kvlint.commands.rules", "list_rules"),
    "verify": ("kvlint.commands.verify", "verify"),
}


class KvlintGroup(click.Group):
    """Turns any error into one line and exit 2; a traceback only with --verbose. Loads commands lazily."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, name: str):
        if name in COMMANDS and name not in self.commands:
            module_name, attribute = COMMANDS[name]
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
            click.echo(
                f"kvlint: internal error: {type(error).__name__}: {error} (re-run with --verbose for details)", err=True
            )
            ctx.exit(EXIT_ERROR)


@click.group(cls=KvlintGroup)
@click.version_option(__version__, prog_name="kvlint")
def main() -> None:
    """kvlint: find and fix KV-cache sizing bugs in vLLM (DCP scaling on container specs)."""
