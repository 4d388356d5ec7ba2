"""Configuration: the configuration folder, its profiles and the catalogue of options."""

from veglia.config.config import Config, veglia_home
from veglia.config.options import Option, get_option, get_options
from veglia.config.profile import Profile

__all__ = ["Config", "Option", "Profile", "get_option", "get_options", "veglia_home"]
