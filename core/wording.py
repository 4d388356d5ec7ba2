"""Small rules of English for messages built from names: "an Int", "a Str"."""

from __future__ import annotations

__all__ = ["a_or_an", "plural"]

#: Words that start with a vowel letter but a consonant sound ("a UUID", "a unit").
_YOU_SOUND = ("uni", "usa", "use", "usu", "uuid", "uti")


def a_or_an(word: str) -> str:
    """``word`` with its indefinite article: ``an Int``, ``an ArrayData``, ``a Str``."""
    lower = word.lower()
    vowel = lower[:1] in ("a", "e", "i", "o", "u") and not lower.startswith(_YOU_SOUND)
    return f"{'an' if vowel else 'a'} {word}"


def plural(number: int | float, what: str) -> str:
    """``number`` and ``what``, plural unless the number is one: "1 node", "3 nodes"."""
    shown = f"{number:g}" if isinstance(number, float) else str(number)
    return f"{shown} {what}{'' if number == 1 else 's'}"
