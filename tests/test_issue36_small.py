"""Issue #36's small things (sections 4 and 5): deleting a PostgreSQL profile drops its
tables, a rerun that made other content is recorded once, the daemon says when it runs an
older plugin than the one installed, and `plugin list` says which plugins are loaded."""

from __future__ import annotations

import re

import pytest


def _tables(url: str) -> list[str]:
    import sqlalchemy as sa

    engine = sa.create_engine("postgresql+psycopg://" + url.split("://", 1)[1])
    try:
        with engine.connect() as connection:
            return sorted(sa.inspect(connection).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.services
def test_deleting_a_postgresql_profile_drops_its_tables(run_cli, postgres_database):
    import psycopg

    with psycopg.connect(postgres_database, autocommit=True) as connection:
        connection.execute("CREATE TABLE mine (x integer)")
    made = run_cli("setup", "-n", "--profile-name", "pg", "--storage-url", postgres_database)
    assert made.exit_code == 0, made.output
    assert "nodes" in _tables(postgres_database)

    deleted = run_cli("profile", "delete", "pg", "--force")
    assert deleted.exit_code == 0, deleted.output
    line = " ".join(deleted.stdout.split())
    assert "Deleted profile 'pg', its folder and its" in line
    assert f"tables in {postgres_database} (the database itself stays)." in line
    # Only the table veglia did not make is left.
    assert _tables(postgres_database) == ["mine"]


@pytest.mark.services
def test_deleting_a_postgresql_profile_with_keep_data_keeps_its_tables(run_cli, postgres_database):
    made = run_cli("setup", "-n", "--profile-name", "pg", "--storage-url", postgres_database)
    assert made.exit_code == 0, made.output
    before = _tables(postgres_database)

    deleted = run_cli("profile", "delete", "pg", "--force", "--keep-data")
    assert deleted.exit_code == 0, deleted.output
    line = " ".join(deleted.stdout.split())
    assert f"and its tables in {postgres_database} (--keep-data)." in line
    assert "Deleted profile 'pg'; kept its folder" in line
    assert _tables(postgres_database) == before
    # The same database makes a profile again, migrated from where it was.
    again = run_cli("setup", "-n", "--profile-name", "pg2", "--storage-url", postgres_database)
    assert again.exit_code == 0, again.output


def test_a_rerun_that_made_other_content_is_recorded_and_not_offered_again(profile, run_cli):
    from veglia.orm import load_node
    from veglia_fixtures.profiles import damaged_unstable_job

    node, record = damaged_unstable_job()

    rerun = run_cli("-p", "test", "verify", str(node.pk), "--rerun")
    assert rerun.exit_code == 1, rerun.output
    rerun_pk = load_node(node.pk).get_attribute("not_reproducible")["rerun"]
    said = " ".join(rerun.stdout.split())
    assert f"process {node.pk} is not reproducible (rerun {rerun_pk} made other content)" in said
    assert load_node(node.pk).get_attribute("not_reproducible")["sha256"] == [record.sha256]

    for _ in range(2):  # known now: reported, no rerun offered, no failure
        later = run_cli("-p", "test", "verify", str(node.pk))
        assert later.exit_code == 0, later.output
        said = " ".join(later.stdout.split())
        assert f"process {node.pk}: not reproducible (rerun {rerun_pk} made other content)" in said
        assert "They were made by" not in said and "--rerun" not in said
        assert said.count("not reproducible") == 1


def _example_copy(root, version: str):
    """A copy of the example plugin package at ``version``."""
    import shutil
    from pathlib import Path

    source = Path(__file__).parent / "plugin_packages" / "veglia-example-plugin"
    package = root / f"example-{version}"
    shutil.copytree(source, package)
    pyproject = package / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('version = "0.1.0"', f'version = "{version}"')
    )
    return package


def _install(package, site) -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    command += ["--no-deps", "--upgrade", "--target", str(site), str(package)]
    subprocess.run(command, check=True, timeout=300)


def test_the_daemon_says_when_it_runs_an_older_plugin_than_is_installed(
    run_cli, daemon, tmp_path, monkeypatch
):
    import time

    site = tmp_path / "site"
    _install(_example_copy(tmp_path, "0.1.0"), site)
    monkeypatch.setenv("PYTHONPATH", str(site))  # the CLI and the daemon it starts
    assert run_cli("presto", "--no-broker", "--profile-name", "test").exit_code == 0
    daemon(1)
    deadline = time.monotonic() + 30
    while not list((tmp_path / "veglia-home").rglob("worker-*.json")):
        assert time.monotonic() < deadline, "no worker status file"
        time.sleep(0.2)
    same = run_cli("-p", "test", "daemon", "status")
    assert same.exit_code == 0 and "restart" not in same.output, same.output
    assert run_cli("-p", "test", "status").exit_code == 0

    _install(_example_copy(tmp_path, "0.2.0"), site)  # pip install of a new version
    change = "veglia-example-plugin 0.1.0 -> 0.2.0"
    shown = run_cli("-p", "test", "daemon", "status")
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.stderr.split())
    assert "runs the plugin code it started with, not what is installed now" in said
    assert f"({change}): restart it with `veglia daemon restart`." in said

    status = run_cli("-p", "test", "status")
    assert status.exit_code == 1, status.output
    said = " ".join(status.stdout.split())
    assert "✘ daemon: running, supervisor pid" in said and change in said
    assert "hint: restart it with `veglia daemon restart`" in said

    submitted = run_cli("-p", "test", "shell", "--submit", "true")
    assert submitted.exit_code == 0, submitted.output
    assert change in " ".join(submitted.stderr.split())

    assert run_cli("-p", "test", "daemon", "restart").exit_code == 0
    deadline = time.monotonic() + 30
    while "restart" in (again := run_cli("-p", "test", "daemon", "status")).output:
        assert time.monotonic() < deadline, again.output
        time.sleep(0.5)
    assert run_cli("-p", "test", "status").exit_code == 0


def test_the_monitor_signature_is_one_in_the_docs_and_the_code():
    import re
    from pathlib import Path

    import veglia.engine.calcjob.monitors as monitors
    from veglia.plugin_api import Monitor

    docs = Path(__file__).resolve().parent.parent / "docs"
    texts = {
        "docs/monitors.md": (docs / "monitors.md").read_text(),
        "docs/plugins.md": (docs / "plugins.md").read_text(),
        "the module": monitors.__doc__ or "",
        "Monitor": Monitor.__doc__ or "",
    }
    found = {}
    for where, text in texts.items():
        text = " ".join(text.replace("\\|", "|").split())
        for signature in re.findall(r"(?<!\w)monitor\(node, transport[^`]*", text):
            found.setdefault(signature.strip(), []).append(where)
    assert list(found) == [
        "monitor(node, transport, /, *args, **kwargs) -> str | MonitorResult | None"
    ]
    assert {where for places in found.values() for where in places} == set(texts)


@pytest.mark.parametrize(
    "name", ["FileStat", "FileSlice", "FileWatch", "LiveTrace", "TraceSample", "MonitorResult"]
)
def test_every_type_a_monitor_is_given_is_documented(name):
    import dataclasses
    import inspect
    from pathlib import Path

    import veglia.plugin_api as api

    text = (Path(__file__).resolve().parent.parent / "docs" / "monitors.md").read_text()
    kind = getattr(api, name)
    assert f"`{name}" in text, name
    if dataclasses.is_dataclass(kind):
        names = [field.name for field in dataclasses.fields(kind)]
    else:
        names = list(getattr(kind, "_fields", ()))
    names += [
        key
        for key, value in vars(kind).items()
        if not key.startswith("_") and (isinstance(value, property) or inspect.isfunction(value))
    ]
    assert names, name
    missing = [n for n in names if not re.search(rf"[`.(]{n}\b", text)]
    assert not missing, f"{name}: {missing} not in docs/monitors.md"


def _installed_by_hand(site, name: str, module: str, source: str) -> None:
    """A distribution as pip leaves it (its dist-info), with one ``veglia.plugins`` entry."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[veglia.plugins]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(source)


def test_plugin_list_says_which_plugins_are_loaded_and_why_not(run_cli, tmp_path):
    site = tmp_path / "site"
    _installed_by_hand(site, "broken", "broken_hooks", "import not_a_module_anywhere\n")
    env = {"PYTHONPATH": str(site)}

    listed = run_cli("plugin", "list", "plugins", "--raw", env=env)
    assert listed.exit_code == 0, listed.output
    loaded = {row.split("\t")[1]: row.split("\t")[4] for row in listed.stdout.splitlines()}
    assert loaded["broken"] == (
        "failed to import: ModuleNotFoundError: No module named 'not_a_module_anywhere'"
    )
    assert loaded["core.web"] == "not registered: plugin 'broken' failed to import, so none is"

    left_out = run_cli(
        "plugin", "list", "plugins", "--raw", env={**env, "VEGLIA_PLUGINS": "core.web"}
    )
    loaded = {row.split("\t")[1]: row.split("\t")[4] for row in left_out.stdout.splitlines()}
    assert loaded["broken"] == "not loaded: VEGLIA_PLUGINS leaves it out"
    assert loaded["core.web"] == "registered"

    others = run_cli("plugin", "list", "monitors", "--raw", env=env).stdout.splitlines()
    assert others and all(row.endswith("\twhen used") for row in others)


def test_verdis_delete_data_flag_deletes_the_profile_s_folder(run_cli, veglia_home):
    assert run_cli("presto", "--no-broker").exit_code == 0
    deleted = run_cli("profile", "delete", "presto", "--force", "--delete-data")
    assert deleted.exit_code == 0, deleted.output
    assert "Deleted profile 'presto' and its folder" in deleted.stdout
    assert not (veglia_home / "profiles" / "presto").exists()


def test_a_profile_whose_daemon_runs_is_not_deleted(run_cli, profile, daemon, veglia_home):
    """Its workers would go on running jobs into a folder and tables that are gone."""
    daemon(1)
    for flags in ((), ("--keep-data",)):
        refused = run_cli("profile", "delete", "test", "--force", *flags)
        assert refused.exit_code == 10, refused.output
        assert refused.stderr.strip() == (
            "Error: The daemon of profile 'test' is running: stop it first "
            "(`veglia -p test daemon stop`), then delete the profile."
        )
    assert (veglia_home / "profiles" / "test").is_dir()
    assert "test" in run_cli("profile", "list").stdout
