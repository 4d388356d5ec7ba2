"""A data source that needs no computer: one element per word of a setting."""

from __future__ import annotations

import hashlib

from veglia.plugin_api import DataSource, Element, Listing, Setting


def words(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(w, str) and w for w in value):
        raise ValueError("give a list of words, such as ['alpha', 'beta']")
    return value


class WordsSource(DataSource):
    """One element per word of ``words``; its checksum is the word's sha256."""

    name = "example.words"
    needs_transport = False
    accepted_settings = (Setting("words", "the words, e.g. words = ['alpha', 'beta']", words),)

    def elements(self, transport=None, known=None):
        return Listing(
            tuple(
                Element(
                    word, (), hashlib.sha256(word.encode()).hexdigest(), {"length": str(len(word))}
                )
                for word in sorted(set(self.settings["words"]))
            )
        )
