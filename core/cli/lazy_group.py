"""A click group whose sub-commands are imported only when one of them runs.

Each command names its module, the command's attribute there, and its short help, so that
``--help`` lists the group without importing what the commands need (the ORM, the engine);
tests/test_cli_startup.py keeps those help texts in step with the commands' own.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

__all__ = ["LazyCommands", "LazyGroup"]

#: name -> (module, attribute, short help)
LazyCommands = dict[str, tuple[str, str, str]]


class LazyGroup(click.Group):
    """A group of ``lazy_commands``, plus any added to it the usual way."""

    def __init__(self, *args: Any, lazy_commands: LazyCommands | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands: LazyCommands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.lazy_commands, *self.commands})

    def get_command(self, ctx: click.Context | None, name: str) -> click.Command | None:
        if name in self.lazy_commands:
            module, attribute, _ = self.lazy_commands[name]
            command: click.Command | None = getattr(importlib.import_module(module), attribute)
            return command
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            limit = formatter.width - 6 - len(name)
            if name in self.lazy_commands:
                # Shortened as click shortens a loaded command's help.
                stand_in = click.Command(name, help=self.lazy_commands[name][2])
                rows.append((name, stand_in.get_short_help_str(limit)))
            else:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
