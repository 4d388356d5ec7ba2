"""Calc-job options that plugins add through the ``calcjob_options`` hook.

:meth:`CalcJob.define <veglia.engine.calcjob.CalcJob.define>` adds each as a
``metadata.options.<name>`` port after the built-in ones, so a plugin's option is built,
validated and documented like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veglia.exceptions import ConfigurationError

__all__ = ["CalcJobOption", "plugin_calcjob_options"]


@dataclass(frozen=True)
class CalcJobOption:
    """One calc-job option a plugin adds.

    ``validator(value, port)`` returns ``None`` when the value is fine and a message
    otherwise (as the built-in options' validators). ``default``, when not ``None``, is set
    on every job that does not give the option (and so stored on its node); leave it
    ``None`` to tell "not given" apart.
    """

    name: str
    valid_type: type | tuple[type, ...]
    help: str
    validator: Callable[[Any, Any], str | None] | None = None
    default: Any = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(
                f"Calc-job option name {self.name!r} must be a lower-case word, like "
                "'myplugin_run' (underscores allowed)"
            )
        if not self.help:
            raise ValueError(f"Calc-job option {self.name!r} needs a help text")


def plugin_calcjob_options(builtin: set[str]) -> list[CalcJobOption]:
    """The options of the loaded plugins, in registration order; an error names the plugin
    that returned something else than options, or the two sides of a clash."""
    from veglia.plugin_manager import get_plugin_manager

    origin = dict.fromkeys(builtin, "veglia")
    options: list[CalcJobOption] = []
    # pluggy lists the last registered first: reversed, the entry points' order.
    for impl in reversed(get_plugin_manager().hook.calcjob_options.get_hookimpls()):
        for option in impl.function() or []:
            if not isinstance(option, CalcJobOption):
                raise ConfigurationError(
                    f"Plugin {impl.plugin_name!r} returned {option!r} from calcjob_options; "
                    "it must return veglia.engine.job_options.CalcJobOption objects."
                )
            if option.name in origin:
                raise ConfigurationError(
                    f"Calc-job option {option.name!r} of plugin {impl.plugin_name!r} clashes "
                    f"with the one of {origin[option.name]!r}; one of them must rename it."
                )
            origin[option.name] = impl.plugin_name
            options.append(option)
    return options
