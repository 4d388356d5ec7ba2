"""Names a package exports but imports only when first used (PEP 562).

``import veglia`` runs at every CLI start and in every plugin, and importing one submodule
runs its package's ``__init__``: a package that imported the modules behind its public names
at once would load the ORM, SQLAlchemy or the engine for a caller that wants none of them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module_name: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package ``module_name``, whose public
    names ``homes`` maps to the modules that define them.

    Use it at the end of the package's ``__init__``, keeping the names' imports under
    ``TYPE_CHECKING`` for type checkers and editors::

        __getattr__, __dir__ = lazy_exports(__name__, {"Node": "veglia.orm.nodes"})

    A name is imported from its home on first use and then kept in the package, so the next
    use is a plain attribute; ``dir()`` lists the names not yet imported too.
    """
    namespace = sys.modules[module_name].__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
