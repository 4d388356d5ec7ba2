"""A parser, written against veglia's plugin API only."""

from veglia.orm import SinglefileData
from veglia.plugin_api import Parser


class WordCount(Parser):
    """Count the words of the job's stdout into the output ``files.word_count``."""

    def parse(self, retrieved, outcome):
        if "stdout" not in retrieved.list_object_names():
            return self.exit_codes.ERROR_PARSER_FAILED.format(message="no stdout retrieved")
        words = len(retrieved.get_object_content("stdout").split())
        self.out("files.word_count", SinglefileData(str(words).encode(), "word_count"))
        return None
