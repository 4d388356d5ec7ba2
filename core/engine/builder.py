"""Process builders: fill a process's inputs with attribute access, validated by port."""

from __future__ import annotations

import reprlib
from collections.abc import Iterator, MutableMapping
from typing import Any, Generic, Protocol, TypeVar

from plumpy.ports import Port, PortNamespace

from veglia.exceptions import InputValidationError

__all__ = ["InputValidationError", "ProcessBuilder"]


class ProcessBuilderNamespace(MutableMapping[str, Any]):
    """The inputs of one port namespace."""

    def __init__(self, namespace: PortNamespace, path: str = "") -> None:
        object.__setattr__(self, "_namespace", namespace)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_data", {})

    def _full(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "__orig_class__":
            # typing sets it on what ``ProcessBuilder[MyCalc](MyCalc)`` makes: not an input.
            object.__setattr__(self, name, value)
            return
        self[name] = value

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no input {self._full(name)!r}") from None

    def __setitem__(self, name: str, value: Any) -> None:
        port = self._namespace.get(name)
        if port is None and not self._namespace.dynamic:
            known = ", ".join(sorted(self._namespace)) or "none"
            raise InputValidationError(
                f"Unknown input {self._full(name)!r}; the inputs here are: {known}."
            )
        if isinstance(port, PortNamespace) and isinstance(value, dict):
            sub = ProcessBuilderNamespace(port, self._full(name))
            for key, item in value.items():
                sub[key] = item
            self._data[name] = sub
            return
        if isinstance(port, Port):
            error = port.validate(value)
            if error is not None:
                why = _wrong_type(port, value) or f": {error.message}"
                raise InputValidationError(f"Input {self._full(name)!r}{why}")
        self._data[name] = value

    def __getitem__(self, name: str) -> Any:
        if name not in self._data:
            port = self._namespace.get(name)
            if isinstance(port, PortNamespace):
                self._data[name] = ProcessBuilderNamespace(port, self._full(name))
            else:
                raise KeyError(name)
        return self._data[name]

    def __delitem__(self, name: str) -> None:
        del self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __dir__(self) -> list[str]:
        return sorted(set(self._namespace) | set(self._data))

    def to_dict(self) -> dict[str, Any]:
        """The inputs as nested dicts, empty namespaces left out."""
        result = {}
        for name, value in self._data.items():
            if isinstance(value, ProcessBuilderNamespace):
                value = value.to_dict()
                if not value:
                    continue
            result[name] = value
        return result


def _wrong_type(port: Port, value: Any) -> str | None:
    """`` must be dict (what it is), not list: [1].`` when ``value`` is not of the port's
    type (plumpy's own message names classes: ``Got '<class 'list'>'``), else None."""
    valid = port.valid_type
    if valid is None or isinstance(value, valid):
        return None
    names = " or ".join(kind.__name__ for kind in (valid if isinstance(valid, tuple) else (valid,)))
    what = f" ({port.help.rstrip('.')})" if port.help else ""
    return f" must be {names}{what}, not {type(value).__name__}: {reprlib.repr(value)}."


class _Spec(Protocol):
    @property
    def inputs(self) -> PortNamespace: ...


class Buildable(Protocol):
    """What a builder needs of the process class it fills inputs for: its spec's input
    ports. (``Process`` meets it; naming the class itself would have this module and
    ``veglia.engine.process``, which makes builders, import each other.)"""

    @classmethod
    def spec(cls) -> _Spec: ...


ProcessT = TypeVar("ProcessT", bound=Buildable)


class ProcessBuilder(ProcessBuilderNamespace, Generic[ProcessT]):
    """``builder = MyCalc.get_builder(); builder.x = Int(1); engine.run(builder)``: a
    ``ProcessBuilder[MyCalc]``."""

    #: Declared for type checkers: set with object.__setattr__ (an attribute set as usual
    #: would be an input).
    process_class: type[ProcessT]

    def __init__(self, process_class: type[ProcessT]) -> None:
        super().__init__(process_class.spec().inputs)
        object.__setattr__(self, "process_class", process_class)

    def __repr__(self) -> str:
        return f"<ProcessBuilder for {self.process_class.__name__}: {self.to_dict()!r}>"
