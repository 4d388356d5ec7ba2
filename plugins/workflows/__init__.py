"""Built-in workflows (``veglia.workflows`` entry points)."""
