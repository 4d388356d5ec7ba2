"""What every command shares: the chosen profile name and lazily loaded config/profile."""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from veglia.config.config import Config
from veglia.config.profile import Profile
from veglia.manage import active_profile, load_profile

__all__ = ["CliState", "pass_state"]


@dataclass
class CliState:
    profile_name: str | None = None
    verbose: bool = False
    _config: Config | None = field(default=None, repr=False)

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = Config()
        return self._config

    @property
    def profile(self) -> Profile:
        """The profile chosen with ``-p``, or the default one; made the active profile."""

        current = active_profile()
        if current is not None and current.name == (self.profile_name or current.name):
            return current
        return load_profile(self.profile_name)


pass_state = click.make_pass_decorator(CliState, ensure=True)
