"""Built-in calculations: ``core.shell`` and ``core.arithmetic.add``."""
