"""Storage: the SQL database of the provenance graph and the file repository beside it."""

from veglia.storage.backend import StorageBackend, create_db_engine
from veglia.storage.repository import FileRepository

__all__ = ["FileRepository", "StorageBackend", "create_db_engine"]
