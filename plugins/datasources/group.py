"""``core.group``: the nodes in a veglia group, one element each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import DataSource, Element, Listing, NotExistent, Setting

if TYPE_CHECKING:
    from veglia.plugin_api import Transport

__all__ = ["GroupSource"]


def group_label(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("give the label of a group, as `veglia group list` shows it")
    return value


class GroupSource(DataSource):
    """The nodes in the group ``group``: identity the node's UUID, checksum the digest of its
    content (type, attributes, files' sha256) that caching compares."""

    name = "core.group"
    needs_transport = False
    accepted_settings = (
        Setting("group", "the label of a veglia group, e.g. group = 'raw-reads'", group_label),
    )

    def elements(
        self, transport: Transport | None = None, known: Mapping[str, Any] | None = None
    ) -> Listing:
        # Lazy: the storage layer and the engine load only when a group is listed.
        from veglia.plugin_api import load_group, node_hashes

        try:
            nodes = load_group(self.settings["group"]).nodes
        except NotExistent as exc:
            raise self.error(str(exc)) from None
        hashes = node_hashes(nodes)
        elements = []
        for node in nodes:
            metadata = {"pk": str(node.pk), "type": node.node_type}
            if node.label:
                metadata["label"] = node.label
            elements.append(Element(node.uuid, (node.uuid,), hashes[node.uuid], metadata))
        return Listing(tuple(sorted(elements, key=lambda element: element.identity)))
