"""Built-in data sources: ``core.folder``, ``core.fofn`` and ``core.group``."""
