import pytest

pytest_plugins = [
    "veglia_fixtures.services",
    "veglia_fixtures.profiles",
    "veglia_fixtures.mail",
    "veglia_fixtures.seqera_platform",
    "veglia_fixtures.browser",
]

# The plugin packages' own tests run in their own pytest, with the package installed
# (tests/test_contracts_for_plugins.py); here their entry points are not there.
collect_ignore = ["plugin_packages"]

#: Tests run in parallel (pytest-xdist, ``--dist loadgroup``) share the machine's services.
#: Those that use one instance they change, or depend on its clock, run one after the
#: other on one worker: the single-node SLURM (a test kills slurmd, fills its queue, waits
#: for its own clock to purge jobs). Every SLURM fixture builds on ``slurm``.
SLURM_FIXTURE = "slurm"
#: Tests that change what every other test uses run alone, after the parallel run
#: (``-m exclusive``): they stop RabbitMQ, or pip-install a plugin package into the venv
#: (its entry points would reach every test meanwhile).
EXCLUSIVE_FIXTURES = {
    "restartable_rabbitmq",
    "example_plugin",
    "example_datasource",
    "fake_computer_package",
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own hook)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & EXCLUSIVE_FIXTURES:
            item.add_marker(pytest.mark.exclusive)
        if SLURM_FIXTURE in fixtures:
            item.add_marker(pytest.mark.xdist_group("slurm"))
