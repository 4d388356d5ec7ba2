"""``veglia computer``: set up, configure, test, list, show, change and delete computers, as
``verdi computer``.

The group is here; each job's commands are in a module of their own: ``setup`` in
:mod:`.cmd_computer_setup`, ``configure`` in :mod:`.cmd_computer_configure`, ``test`` in
:mod:`.cmd_computer_checks`, ``list`` and ``show`` in :mod:`.cmd_computer_show`, ``set``,
``relabel`` and ``duplicate`` in :mod:`.cmd_computer_edit`, ``delete`` in
:mod:`.cmd_computer_delete`, ``enable`` and ``disable`` in :mod:`.cmd_computer_enable`.
"""

from __future__ import annotations

import click

from veglia.cli.cmd_computer_checks import computer_test
from veglia.cli.cmd_computer_configure import computer_configure
from veglia.cli.cmd_computer_delete import computer_delete
from veglia.cli.cmd_computer_edit import computer_duplicate, computer_relabel, computer_set
from veglia.cli.cmd_computer_enable import computer_disable, computer_enable
from veglia.cli.cmd_computer_setup import computer_setup
from veglia.cli.cmd_computer_show import computer_list, computer_show

__all__ = ["COMMANDS", "computer_group"]


@click.group(
    "computer",
    commands=[
        computer_setup,
        computer_configure,
        computer_test,
        computer_list,
        computer_show,
        computer_set,
        computer_relabel,
        computer_duplicate,
        computer_delete,
        computer_enable,
        computer_disable,
    ],
)
def computer_group() -> None:
    """Set up, configure, test, change and delete computers."""


COMMANDS = [computer_group]
