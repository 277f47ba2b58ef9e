"""The `kvlint` command line: the command group. Each command lives in kvlint/commands/, one module each."""

from __future__ import annotations

import importlib
import os
import sys

import click

from kvlint import __version__
from kvlint.collector import tune_collector
from kvlint.engine.summary import EXIT_CLEAN, EXIT_ERROR
from kvlint.errors import KvlintError

# 128 + SIGINT: what a shell reports for a command stopped with Ctrl-C (1 would read as "findings").
EXIT_INTERRUPTED = 130

# Command name -> (module, attribute). A command's module is imported only when it is invoked (or help
# lists it): `kvlint check` starts without the others.
COMMANDS = {
    "check": ("kvlint.commands.check", "check"),
    "containers": ("kvlint.commands.containers", "containers"),
    "explain": ("kvlint.commands.rules", "explain"),
    "fix": ("kvlint.commands.fix", "fix"),
    "paths": ("kvlint.commands.paths", "paths"),
    "review": ("kvlint.commands.review", "review"),
    "rules": ("kvlint.commands.rules", "list_rules"),
    "verify": ("kvlint.commands.verify", "verify"),
}


class KvlintGroup(click.Group):
    """Turns any error into one line and exit 2 (click's usage errors too); a traceback only with
    --verbose; Ctrl-C exits 130. Loads commands lazily."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        tune_collector()
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name or "kvlint", complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:  # click's word for KeyboardInterrupt (and EOF at a prompt)
            click.echo("kvlint: interrupted", err=True)
            from kvlint.scan.jobs import stopped_a_pool

            if stopped_a_pool():  # the interpreter's exit would join the stopped pool's thread (3.10: for ever)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(EXIT_INTERRUPTED)
            sys.exit(EXIT_INTERRUPTED)
        except click.ClickException as error:
            if type(error).__name__ == "NoArgsIsHelpError":  # `kvlint` alone: click shows the help (click >= 8.2)
                error.show()
                sys.exit(error.exit_code)
            click.echo(f"kvlint: error: {_one_line(error)}", err=True)
            sys.exit(EXIT_ERROR)
        sys.exit(code if isinstance(code, int) else EXIT_CLEAN)

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


def _one_line(error: click.ClickException) -> str:
    """click's message on one line, control characters escaped, with where to read the usage."""
    text = " ".join(error.format_message().split())
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    context = getattr(error, "ctx", None)
    if isinstance(error, click.UsageError) and context is not None:
        text += f" (see `{context.command_path} --help`)"
    return text


@click.group(cls=KvlintGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvlint")
def main() -> None:
    """kvlint: find and fix KV-cache sizing bugs in vLLM (DCP scaling on container specs)."""
