"""The provenance graph as Python objects: nodes, groups, computers, codes, users."""

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
from veglia.orm.nodes import Node, load_node
from veglia.orm.process_nodes import CalcJobNode, ProcessNode, WorkflowNode
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
