"""The message broker (RabbitMQ): reachability checks. Task and RPC traffic uses kiwipy."""

from __future__ import annotations

import asyncio

from veglia.config.profile import mask_url
from veglia.exceptions import BrokerError

__all__ = ["ping_broker"]


async def _ping(url: str, timeout: float) -> str:
    import aio_pika

    connection = await aio_pika.connect(url, timeout=timeout)
    try:
        transport = connection.transport
        assert transport is not None  # connected above
        properties = transport.connection.server_properties or {}
        product = _text(properties.get("product", "AMQP broker"))
        version = _text(properties.get("version", ""))
        return f"{product} {version}".strip()
    finally:
        await connection.close()


def _text(value: object) -> str:
    """A server property as text: AMQP may send it as bytes."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def ping_broker(url: str, timeout: float = 5.0) -> str:
    """Open and close one AMQP connection; return the server's name and version."""
    try:
        return asyncio.run(asyncio.wait_for(_ping(url, timeout), timeout + 1))
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise BrokerError(
            f"Cannot reach the broker at {mask_url(url)} ({reason}). Check that RabbitMQ runs "
            "and that broker.url and broker.password are right, or unset broker.url to run "
            "without a broker."
        ) from None
