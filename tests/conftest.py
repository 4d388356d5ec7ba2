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
