"""The provenance graph as Python objects: nodes, groups, computers, codes, users.

The names below are loaded when first used (PEP 562), so that importing one submodule
(``veglia.orm.attributes``, say, from a plugin's hook module) does not open the storage
layer and SQLAlchemy with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.lazy import lazy_exports

if TYPE_CHECKING:
    from veglia.orm.computers import Code, Computer, load_code, load_computer
    from veglia.orm.data import (
        Bool,
        Data,
        Dict,
        Float,
        FolderData,
        Int,
        List,
        RemoteData,
        SinglefileData,
        Str,
        to_node,
    )
    from veglia.orm.groups import Group, load_group
    from veglia.orm.loading import load_node
    from veglia.orm.nodes import Node
    from veglia.orm.process_nodes import CalcJobNode, ProcessNode, WorkflowNode
    from veglia.orm.users import User, get_default_user

#: Public name -> the module that defines it.
_EXPORTS = {
    "Bool": "veglia.orm.data",
    "CalcJobNode": "veglia.orm.process_nodes",
    "Code": "veglia.orm.computers",
    "Computer": "veglia.orm.computers",
    "Data": "veglia.orm.data",
    "Dict": "veglia.orm.data",
    "Float": "veglia.orm.data",
    "FolderData": "veglia.orm.data",
    "Group": "veglia.orm.groups",
    "Int": "veglia.orm.data",
    "List": "veglia.orm.data",
    "Node": "veglia.orm.nodes",
    "ProcessNode": "veglia.orm.process_nodes",
    "RemoteData": "veglia.orm.data",
    "SinglefileData": "veglia.orm.data",
    "Str": "veglia.orm.data",
    "User": "veglia.orm.users",
    "WorkflowNode": "veglia.orm.process_nodes",
    "get_default_user": "veglia.orm.users",
    "load_code": "veglia.orm.computers",
    "load_computer": "veglia.orm.computers",
    "load_group": "veglia.orm.groups",
    "load_node": "veglia.orm.loading",
    "to_node": "veglia.orm.data",
}

__all__ = [
    "Bool",
    "CalcJobNode",
    "Code",
    "Computer",
    "Data",
    "Dict",
    "Float",
    "FolderData",
    "Group",
    "Int",
    "List",
    "Node",
    "ProcessNode",
    "RemoteData",
    "SinglefileData",
    "Str",
    "User",
    "WorkflowNode",
    "get_default_user",
    "load_code",
    "load_computer",
    "load_group",
    "load_node",
    "to_node",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
