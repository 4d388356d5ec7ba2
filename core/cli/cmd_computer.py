"""``veglia computer``."""

COMMANDS: list = []
