"""Small fixes found in review: each test shows what a user sees."""

from __future__ import annotations

import re

from veglia import engine, orm
from veglia.entry_points import CalculationFactory

ShellJob = CalculationFactory("core.shell")


def test_workdir_root_is_the_workdir_default_that_setup_offers_show_shows_and_jobs_use(
    profile, run_cli, tmp_path
):
    root = tmp_path / "jobs"
    root.mkdir(mode=0o700)
    assert run_cli("-p", "test", "config", "set", "workdir.root", str(root)).exit_code == 0
    profile.options["workdir.root"] = str(root)  # what a process loading the profile now reads

    # Every field a flag but workdir (and the plugins' properties): asked, the root offered.
    setup = run_cli(
        "-p", "test", "computer", "setup", "-L", "rooted", "-H", "localhost", "-D", "",
        "-T", "core.local", "-S", "core.direct", "--safe-interval", "0",
        "--minimum-poll-interval", "0.1",
        input="\n" * 20,
    )  # fmt: skip
    assert setup.exit_code == 0, setup.output
    assert f"workdir [{root}]:" in setup.output

    shown = run_cli("-p", "test", "computer", "show", "rooted")
    assert shown.exit_code == 0, shown.output
    assert re.search(rf"workdir\s+{re.escape(str(root))} \(default\)", shown.stdout)

    orm.load_computer("rooted").configure()
    _, node = engine.run_get_node(
        ShellJob, command=orm.Str("true"), metadata={"computer": "rooted"}
    )
    assert node.is_finished_ok, node.exit_message
    assert node.remote_workdir.startswith(f"{root}/"), node.remote_workdir
