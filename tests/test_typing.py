"""What type checkers see of veglia: the package says it is typed, and the ORM classes'
annotations name exactly their table's columns (they are written by hand beside it)."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from sqlalchemy.orm import DeclarativeBase, Mapped

import veglia
from veglia.plugins.tower import models as tower_models
from veglia.storage import models


def test_package_ships_py_typed() -> None:
    # PEP 561: without the marker a plugin's type checker ignores veglia's annotations.
    assert (Path(veglia.__file__).parent / "py.typed").is_file()


def _mapped_classes() -> list[type[DeclarativeBase]]:
    found = []
    for module in (models, tower_models):
        for value in vars(module).values():
            if isinstance(value, type) and "__table__" in vars(value):
                found.append(value)
    return found


@pytest.mark.parametrize("cls", _mapped_classes(), ids=lambda cls: cls.__name__)
def test_model_annotations_match_table(cls: type[DeclarativeBase]) -> None:
    annotations = typing.get_type_hints(cls, vars(models) | vars(tower_models))
    mapped = {name for name, hint in annotations.items() if typing.get_origin(hint) is Mapped}
    columns = {column.key for column in cls.__table__.columns}
    assert mapped == columns, (
        f"{cls.__name__}: annotated {sorted(mapped)}, columns {sorted(columns)}"
    )
    for column in cls.__table__.columns:
        optional = type(None) in typing.get_args(typing.get_args(annotations[column.key])[0])
        assert optional == bool(column.nullable and not column.primary_key), (
            f"{cls.__name__}.{column.key}: nullable={column.nullable}, annotated "
            f"{annotations[column.key]}"
        )


def test_a_builder_made_with_its_process_class_named_takes_inputs_as_any() -> None:
    """``ProcessBuilder`` is generic in the process class it fills (so that it need not
    import ``veglia.engine.process``); a builder made as ``ProcessBuilder[Process](Process)``
    works like one from ``get_builder``."""
    from veglia.engine.builder import InputValidationError, ProcessBuilder
    from veglia.engine.process import Process

    builder = ProcessBuilder[Process](Process)
    builder.metadata.label = "named"
    assert builder.process_class is Process
    assert builder.to_dict() == Process.get_builder().to_dict() | {"metadata": {"label": "named"}}
    with pytest.raises(InputValidationError, match="Unknown input 'nothing'"):
        builder.nothing = 1


def test_what_a_monitor_reads_of_its_node_is_in_the_protocol_it_may_annotate_with() -> None:
    """docs/monitors.md lists what a monitor reads of its node; a monitor annotating it
    `CalcJobNodeLike` must be able to read all of it, and the real node and the test
    stand-in must have it."""
    from veglia.orm.process_nodes import CalcJobNode
    from veglia.plugin_types import CalcJobNodeLike
    from veglia.testing import FakeNode

    read = {"options", "remote_workdir", "job_id", "last_job_info", "submitted_at"}
    read |= {"started_at", "get_attribute", "add_log"}
    members = {name for name in dir(CalcJobNodeLike) if not name.startswith("_")}
    assert read <= members, sorted(read - members)
    job = CalcJobNode()  # some members are set on the instance (its columns)
    present = set(dir(CalcJobNode)) | set(vars(job))
    assert members <= present, sorted(members - present)
    assert read <= set(dir(FakeNode)), sorted(read - set(dir(FakeNode)))
