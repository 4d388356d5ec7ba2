"""``veglia code``."""

COMMANDS: list = []
