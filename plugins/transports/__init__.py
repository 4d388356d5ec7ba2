"""Built-in transports: ``core.local`` and ``core.ssh``."""
