"""Data nodes: values, files and folders, immutable once stored; :func:`to_node` wraps a
plain Python value in one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, ClassVar

from veglia.orm.attributes import COMPUTER
from veglia.orm.nodes import Node, StoredBlob
from veglia.relative_paths import checked_relative
from veglia.wording import a_or_an

__all__ = [
    "Bool",
    "Data",
    "Dict",
    "Float",
    "FolderData",
    "Int",
    "List",
    "RemoteData",
    "SinglefileData",
    "Str",
    "to_node",
]


class Data(Node):
    """Data: immutable once stored."""

    node_type = "data"


class _BaseType(Data):
    _python_type: ClassVar[type] = object

    def __init__(self, value: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if value is None:
            value = self._python_type()
        try:
            self._attributes["value"] = self._python_type(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"{type(self).__name__} needs {a_or_an(self._python_type.__name__)}, not {value!r}"
            ) from None

    @property
    def value(self) -> Any:
        return self._attributes["value"]

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.value!r}{'' if self.is_stored else ' unstored'}>"


class Int(_BaseType):
    node_type = "data.int"
    _python_type = int


class Float(_BaseType):
    node_type = "data.float"
    _python_type = float


class Str(_BaseType):
    node_type = "data.str"
    _python_type = str


class Bool(_BaseType):
    node_type = "data.bool"
    _python_type = bool


class Dict(Data):
    """A JSON-serialisable dictionary."""

    node_type = "data.dict"

    def __init__(self, value: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attributes.update(copy.deepcopy(value or {}))

    def get_dict(self) -> dict[str, Any]:
        return self.attributes

    def __getitem__(self, key: str) -> Any:
        return self.get_attribute(key)


class List(Data):
    node_type = "data.list"

    def __init__(self, value: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attributes["list"] = list(value or [])

    def get_list(self) -> list[Any]:
        result: list[Any] = self.get_attribute("list")
        return result


class SinglefileData(Data):
    """One file, kept in the repository."""

    node_type = "data.singlefile"

    def __init__(
        self,
        content: bytes | str | StoredBlob | None = None,
        filename: str = "file.txt",
        *,
        file: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if file is not None:
            filename = Path(file).name if filename == "file.txt" else filename
            content = Path(file).read_bytes()
        # A blob (another node's file, ``get_object_blob``) is shared, not copied.
        data = content.encode() if isinstance(content, str) else (content or b"")
        filename = checked_relative(filename)
        self._attributes["filename"] = filename
        self._pending_files[filename] = data

    @property
    def filename(self) -> str:
        result: str = self._attributes["filename"]
        return result

    def get_content(self) -> bytes:
        return self.get_object_content(self.filename)


class FolderData(Data):
    """A tree of files, kept in the repository."""

    node_type = "data.folder"


class RemoteData(Data):
    """A folder on a computer (a job's work directory)."""

    node_type = "data.remote"

    def __init__(self, remote_path: str = "", computer_label: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attributes.update({"remote_path": remote_path, COMPUTER: computer_label})

    @property
    def remote_path(self) -> str:
        result: str = self._attributes["remote_path"]
        return result


def to_node(value: Any) -> Node:
    """Wrap a plain Python value in a data node (as the engine does for inputs)."""
    if isinstance(value, Node):
        return value
    for python_type, node_class in ((bool, Bool), (int, Int), (float, Float), (str, Str)):
        if isinstance(value, python_type):
            return node_class(value)
    if isinstance(value, dict):
        return Dict(value)
    if isinstance(value, list | tuple):
        return List(list(value))
    raise TypeError(f"Cannot store {value!r} of type {type(value).__name__} as a node.")
