pytest_plugins = [
    "veglia_fixtures.services",
    "veglia_fixtures.profiles",
    "veglia_fixtures.mail",
    "veglia_fixtures.seqera_platform",
    "veglia_fixtures.browser",
]
