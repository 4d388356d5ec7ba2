"""A test package that registers veglia's fake transport and scheduler, and a parser."""
