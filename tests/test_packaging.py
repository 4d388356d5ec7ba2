"""The distribution maps core/, monitors/ and plugins/ into one import package."""

from __future__ import annotations

import sys
from pathlib import Path

import veglia

ROOT = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_every_subpackage_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    found = {
        ".".join((package, *init.parent.relative_to(ROOT / folder).parts))
        for package, folder in mapping.items()
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert found == set(config["packages"]), "update [tool.setuptools] packages"


def test_import_package_layout():
    import veglia.monitors
    import veglia.plugins

    assert Path(veglia.__file__).parent.name == "core"
    assert Path(veglia.monitors.__file__).parent.name == "monitors"
    assert Path(veglia.plugins.__file__).parent.name == "plugins"


def test_public_api():
    assert set(veglia.__all__) >= {
        "load_profile",
        "get_profile",
        "CalculationFactory",
        "TransportFactory",
        "SchedulerFactory",
        "MonitorFactory",
        "__version__",
    }
