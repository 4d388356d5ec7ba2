pytest_plugins = [
    "veglia_fixtures.services",
    "veglia_fixtures.profiles",
    "veglia_fixtures.mail",
]
