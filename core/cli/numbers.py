"""The number types of veglia's options and arguments: click's ranges, named as a user reads
them ("'abc' is not a valid whole number", not click's "integer range")."""

from __future__ import annotations

import click

__all__ = ["Number", "WholeNumber"]


class WholeNumber(click.IntRange):
    """A whole number, within ``min`` and ``max`` when given."""

    name = "whole number"


class Number(click.FloatRange):
    """A number (a decimal point allowed), within ``min`` and ``max`` when given."""

    name = "number"
