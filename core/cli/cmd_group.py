"""``veglia group``: named sets of nodes, as ``verdi group``."""

from __future__ import annotations

import click

from veglia.cli.output import console, echo_success, print_table, raw_option
from veglia.cli.process_format import format_time, relative_time
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import InvalidOptionError, StorageError
from veglia.orm.groups import Group, group_sizes, load_group
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node
from veglia.orm.process_nodes import ProcessNode
from veglia.views.node import type_name
from veglia.views.rows import format_state


@click.group("group")
def group_group() -> None:
    """Create groups of nodes, fill them, and list what is in them."""


def _load_nodes(identifiers: tuple[str, ...]) -> list[Node]:
    """Every node named (pk or UUID prefix), or NotExistent naming the first unknown one."""
    return [load_node(identifier) for identifier in identifiers]


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'' if number == 1 else 's'}"


@group_group.command("create")
@click.argument("label")
@click.option("-d", "--description", default="", help="What the group is for.")
@pass_state
def group_create(state: CliState, label: str, description: str) -> None:
    """Create an empty group LABEL (labels are unique)."""
    state.profile  # noqa: B018 -- load the chosen profile
    group = Group(label, description=description).store()
    echo_success(
        f"Created group {group.label!r} (pk {group.pk}); add nodes with "
        f"`veglia group add {group.label} PK...`."
    )


@group_group.command("add")
@click.argument("group_id", metavar="GROUP")
@click.argument("identifiers", nargs=-1, required=True, metavar="PK...")
@pass_state
def group_add(state: CliState, group_id: str, identifiers: tuple[str, ...]) -> None:
    """Add nodes (by PK or UUID prefix) to GROUP (its label, pk or UUID)."""
    state.profile  # noqa: B018
    group = load_group(group_id)
    nodes = _load_nodes(identifiers)
    added = group.add_nodes(nodes)
    already = len({node.pk for node in nodes}) - added
    note = f"; {_count(already, 'node')} in it already" if already else ""
    echo_success(
        f"Added {_count(added, 'node')} to group {group.label!r} (it holds {group.count()}){note}."
    )


@group_group.command("remove")
@click.argument("group_id", metavar="GROUP")
@click.argument("identifiers", nargs=-1, metavar="PK...")
@click.option("--clear", is_flag=True, help="Remove every node from the group.")
@pass_state
def group_remove(state: CliState, group_id: str, identifiers: tuple[str, ...], clear: bool) -> None:
    """Take nodes out of GROUP (the nodes are not deleted)."""
    state.profile  # noqa: B018
    if bool(identifiers) == clear:
        raise InvalidOptionError(
            "Name the nodes to take out of the group (PK...), or give --clear to empty it."
        )
    group = load_group(group_id)
    if clear:
        removed = group.clear()
        echo_success(f"Removed {_count(removed, 'node')} from group {group.label!r}; it is empty.")
        return
    nodes = _load_nodes(identifiers)
    removed = group.remove_nodes(nodes)
    absent = len({node.pk for node in nodes}) - removed
    note = f"; {_count(absent, 'node')} not in it" if absent else ""
    echo_success(
        f"Removed {_count(removed, 'node')} from group {group.label!r} "
        f"(it holds {group.count()}){note}."
    )


# verdi's forms: the group as -G GROUP, and -f (veglia asks nothing before adding or removing).
@group_group.command("add-nodes", hidden=True)
@click.option("-G", "--group", "group_id", required=True, metavar="GROUP")
@click.option("-f", "--force", is_flag=True, hidden=True)
@click.argument("identifiers", nargs=-1, required=True, metavar="PK...")
@click.pass_context
def group_add_nodes(
    ctx: click.Context, group_id: str, force: bool, identifiers: tuple[str, ...]
) -> None:
    """verdi's `group add-nodes -G GROUP PK...`: `veglia group add GROUP PK...`."""
    ctx.invoke(group_add, group_id=group_id, identifiers=identifiers)


@group_group.command("remove-nodes", hidden=True)
@click.option("-G", "--group", "group_id", required=True, metavar="GROUP")
@click.option("-c", "--clear", is_flag=True)
@click.option("-f", "--force", is_flag=True, hidden=True)
@click.argument("identifiers", nargs=-1, metavar="PK...")
@click.pass_context
def group_remove_nodes(
    ctx: click.Context, group_id: str, clear: bool, force: bool, identifiers: tuple[str, ...]
) -> None:
    """verdi's `group remove-nodes -G GROUP PK...`: `veglia group remove GROUP PK...`."""
    ctx.invoke(group_remove, group_id=group_id, identifiers=identifiers, clear=clear)


@group_group.command("list")
@raw_option
@pass_state
def group_list(state: CliState, raw: bool) -> None:
    """List the groups with how many nodes each holds."""
    state.profile  # noqa: B018
    groups = Group.list()
    sizes = group_sizes(group.pk for group in groups)
    rows = [
        (
            group.pk,
            group.label,
            sizes.get(group.pk, 0),
            format_time(group.time) if raw else relative_time(group.time),
            group.description,
        )
        for group in groups
    ]
    if not rows and not raw:
        console.print("No groups yet; create one with `veglia group create LABEL`.")
        return
    print_table(("PK", "Label", "Nodes", "Created", "Description"), rows, raw=raw)


@group_group.command("show")
@click.argument("group_id", metavar="GROUP")
@raw_option
@pass_state
def group_show(state: CliState, group_id: str, raw: bool) -> None:
    """Show GROUP and the nodes in it."""
    state.profile  # noqa: B018
    group = load_group(group_id)
    nodes = group.nodes
    members = []
    for node in nodes:
        members.append(
            (
                node.pk,
                node.uuid if raw else node.uuid[:8],
                type_name(node.node_type),
                node.process_type if isinstance(node, ProcessNode) else "",
                node.label,
                format_time(node.ctime) if raw else relative_time(node.ctime),
                format_state(node.process_state, node.exit_status)
                if isinstance(node, ProcessNode)
                else "",
            )
        )
    headers = ("PK", "UUID", "Type", "Process type", "Label", "Created", "State")
    if raw:
        print_table(headers, members, raw=True)
        return
    properties = [
        ("label", group.label),
        ("pk", group.pk),
        ("uuid", group.uuid),
        ("description", group.description),
        ("created", f"{format_time(group.time)} ({relative_time(group.time)})"),
        ("nodes", len(nodes)),
    ]
    print_table(("Property", "Value"), [row for row in properties if row[1] not in (None, "")])
    console.print("")
    if members:
        print_table(headers, members, title=f"Nodes in {group.label}")
    else:
        console.print(f"No nodes; add some with `veglia group add {group.label} PK...`.")


@group_group.command("delete")
@click.argument("group_id", metavar="GROUP")
@click.option(
    "-f", "--force", is_flag=True, help="Delete the group even if it holds nodes (they stay)."
)
@pass_state
def group_delete(state: CliState, group_id: str, force: bool) -> None:
    """Delete GROUP; never the nodes in it."""
    state.profile  # noqa: B018
    group = load_group(group_id)
    size = group.count()
    if size and not force:
        raise StorageError(
            f"Group {group.label!r} holds {_count(size, 'node')}. Delete it anyway with "
            f"`veglia group delete {group.label} --force` (the nodes stay), or empty it first "
            f"with `veglia group remove {group.label} --clear`."
        )
    label = group.label
    group.delete()
    kept = f"; its {_count(size, 'node')} stay" if size else ""
    echo_success(f"Deleted group {label!r}{kept}.")


COMMANDS = [group_group]
