"""The nodes a command's PK arguments name, of the kind the command works on.

A node that exists but is of another kind is, to that command, no such process (or calc
job): every command says so the same way, and exits as for a missing node (exit 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.exceptions import WrongNodeTypeError
from veglia.wording import a_or_an

if TYPE_CHECKING:
    from veglia.orm.nodes import Node
    from veglia.orm.process_nodes import CalcJobNode, ProcessNode

__all__ = ["load_calcjob", "load_process"]


def _of_kind(identifier: str | int, kind: type[Node], what: str) -> Node:
    # Lazy: the ORM is a quarter of a command's start-up, and commands that import this
    # module may end without loading a node (process list).
    from veglia.orm.loading import load_node

    node = load_node(identifier)
    if not isinstance(node, kind):
        raise WrongNodeTypeError(
            f"Node {identifier} is {a_or_an(type(node).__name__)}, not {what}. "
            f"Inspect it with `veglia node show {identifier}`."
        )
    return node


def load_process(identifier: str | int) -> ProcessNode:
    """The process node with this pk or UUID (prefix); NotExistent, or WrongNodeTypeError."""
    # Lazy: the ORM, as in _of_kind.
    from veglia.orm.process_nodes import ProcessNode

    return _of_kind(identifier, ProcessNode, "a process")  # type: ignore[return-value]


def load_calcjob(identifier: str | int) -> CalcJobNode:
    """The calc job node with this pk or UUID (prefix); NotExistent, or WrongNodeTypeError."""
    # Lazy: the ORM, as in _of_kind.
    from veglia.orm.process_nodes import CalcJobNode

    return _of_kind(identifier, CalcJobNode, "a calc job")  # type: ignore[return-value]
