"""``python -m veglia.engine.daemon supervise N | worker``, as ``veglia daemon start`` runs it."""

from __future__ import annotations

import logging
import os
import sys

from veglia.engine.daemon.supervisor import supervise
from veglia.manage import load_profile


def main(argv: list[str]) -> None:

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    profile = load_profile(os.environ.get("VEGLIA_PROFILE"))
    if argv[:1] == ["supervise"]:
        supervise(profile, int(argv[1]) if len(argv) > 1 else 1)
    elif argv[:1] == ["worker"]:
        # Imported here: the supervisor never loads the engine it does not run.
        from veglia.engine.daemon.worker import Worker

        Worker(profile).run()
    else:
        raise SystemExit("usage: python -m veglia.engine.daemon supervise N | worker")


if __name__ == "__main__":
    main(sys.argv[1:])
