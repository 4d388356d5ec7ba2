"""Workflows: processes whose steps launch and await other processes."""

from veglia.engine.workflow.workchain import (
    ToContext,
    WorkChain,
    WorkChainSpec,
    append_,
    if_,
    return_,
    while_,
)

__all__ = ["ToContext", "WorkChain", "WorkChainSpec", "append_", "if_", "return_", "while_"]
