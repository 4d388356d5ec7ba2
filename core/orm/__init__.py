"""The provenance graph as Python objects: nodes, groups, computers, codes, users."""

from veglia.orm.computers import Code, Computer, load_code, load_computer
from veglia.orm.groups import Group, load_group
from veglia.orm.nodes import (
    Bool,
    CalcJobNode,
    Data,
    Dict,
    Float,
    FolderData,
    Int,
    List,
    Node,
    ProcessNode,
    RemoteData,
    SinglefileData,
    Str,
    WorkflowNode,
    load_node,
    to_node,
)
from veglia.orm.users import User, get_default_user

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
