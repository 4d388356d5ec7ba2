"""Options, profiles and the secrets file."""

from __future__ import annotations

import json
import stat

import pytest

from veglia.config import Config
from veglia.config.options import get_option, parse_duration, parse_queues, parse_size_mb
from veglia.exceptions import ConfigurationError, InvalidOptionError, ProfileNotFoundError


@pytest.mark.parametrize(
    ("text", "megabytes"), [("4G", 4096), ("512M", 512), ("512", 512), ("1.5g", 1536)]
)
def test_sizes(text, megabytes):
    assert parse_size_mb(text) == megabytes


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("1h30m", 5400), ("2d", 172800), ("01:30:00", 5400), ("45", 45)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_queues_keep_their_order_and_limits():
    assert parse_queues("short:mem=4G:time=1h:cpus=8; long:time=2d") == [
        {"name": "short", "max_memory_mb": 4096, "max_walltime_seconds": 3600, "max_cpus": 8},
        {"name": "long", "max_walltime_seconds": 172800},
    ]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("jobs.max_per_user", "0", "greater than 0"),
        ("jobs.max_per_user", "many", "not a whole number"),
        ("notify.email", "nobody", "e-mail address"),
        ("broker.url", "http://x", "amqp://"),
        ("scheduler.queues", "short:gpu=1", "unknown queue limit"),
        ("scheduler.queues", "a:time=1h;a", "named twice"),
        ("scheduler.default", "core.nonexistent", "not one of core.direct"),
        ("caching.enabled", "perhaps", "yes or no"),
    ],
)
def test_invalid_values_explain_what_is_allowed(name, value, message):
    with pytest.raises(InvalidOptionError, match=message):
        get_option(name).validate(value)


def test_notify_email_takes_addresses_separated_by_commas():
    option = get_option("notify.email")
    assert option.validate("ada@example.org,ops@example.org") == "ada@example.org, ops@example.org"
    assert option.validate(" ada@example.org ,  ") == "ada@example.org"
    assert option.validate("") == ""
    with pytest.raises(InvalidOptionError, match="'nobody' is not an e-mail address"):
        option.validate("ada@example.org, nobody")
    with pytest.raises(InvalidOptionError, match="e-mail address"):
        get_option("user.email").validate("ada@example.org,ops@example.org")


def test_the_address_a_profile_without_one_uses_can_be_set():
    """`veglia presto` makes the user root@localhost: setting it again is no error."""
    assert get_option("user.email").validate("root@localhost") == "root@localhost"
    for bad in ("a b@x", "@x", "a@.x", "a@"):
        with pytest.raises(InvalidOptionError, match="is not an e-mail address"):
            get_option("user.email").validate(bad)


def test_setup_takes_several_notify_addresses(run_cli):
    result = run_cli(
        "setup", "-n", "--profile-name", "site", "--notify-email", "a@example.org,b@example.org"
    )
    assert result.exit_code == 0, result.output
    shown = run_cli("-p", "site", "config", "get", "notify.email")
    assert shown.stdout.strip() == "a@example.org, b@example.org"


def test_unknown_option_suggests_a_close_name():
    with pytest.raises(InvalidOptionError, match="Did you mean jobs.max_per_user"):
        get_option("jobs.max_per_usr")


def test_secrets_live_in_a_private_file_and_urls_lose_their_password(veglia_home):
    config = Config()
    config.add_profile(
        "p",
        {
            "storage.url": "postgresql://ada:s3cret@db.example.org/veglia",
            "broker.url": "amqp://ada:b40ker@mq.example.org:5672/",
        },
    )
    assert stat.S_IMODE((veglia_home / "secrets.json").stat().st_mode) == 0o600
    public = (veglia_home / "config.json").read_text()
    assert "s3cret" not in public and "b40ker" not in public
    profile = Config().get_profile("p")
    assert profile.storage_url == "postgresql://ada:s3cret@db.example.org/veglia"
    assert profile.storage_url_masked == "postgresql://ada:****@db.example.org/veglia"
    assert profile.broker_url_masked == "amqp://ada:****@mq.example.org:5672/"


def test_invalid_set_changes_nothing(veglia_home):
    config = Config()
    config.add_profile("p", {"jobs.max_per_user": "10"})
    before = (veglia_home / "config.json").read_text()
    with pytest.raises(InvalidOptionError):
        config.set_option("p", "jobs.max_per_user", "-1")
    assert (veglia_home / "config.json").read_text() == before
    assert Config().get_profile("p").get_option("jobs.max_per_user") == 10


def test_set_and_unset_fall_back_to_defaults(veglia_home):
    config = Config()
    config.add_profile("p")
    config.set_option("p", "engine.poll_interval", "2.5")
    assert Config().get_profile("p").get_option("engine.poll_interval") == 2.5
    config.unset_option("p", "engine.poll_interval")
    assert Config().get_profile("p").get_option("engine.poll_interval") == 5.0
    with pytest.raises(InvalidOptionError, match="not set"):
        config.unset_option("p", "engine.poll_interval")


def test_missing_profiles_say_how_to_create_one(veglia_home, monkeypatch):
    with pytest.raises(ProfileNotFoundError, match="veglia presto"):
        Config().get_profile()
    Config().add_profile("one")
    with pytest.raises(ProfileNotFoundError, match="profiles: one"):
        Config().get_profile("two")
    monkeypatch.setenv("VEGLIA_PROFILE", "one")
    assert Config().get_profile().name == "one"


def test_profile_names_are_checked_and_unique(veglia_home):
    config = Config()
    with pytest.raises(ConfigurationError, match="not allowed"):
        config.add_profile("../evil")
    config.add_profile("ok")
    with pytest.raises(ConfigurationError, match="already exists"):
        config.add_profile("ok")


def test_broken_config_file_is_reported_not_overwritten(veglia_home):
    veglia_home.mkdir(parents=True)
    (veglia_home / "config.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        Config()
    assert (veglia_home / "config.json").read_text() == "{not json"


def test_config_from_a_newer_release_is_refused(veglia_home):
    veglia_home.mkdir(parents=True)
    (veglia_home / "config.json").write_text(json.dumps({"version": 99, "profiles": {}}))
    with pytest.raises(ConfigurationError, match="newer veglia"):
        Config()


def test_a_default_computer_that_is_not_there_is_refused_when_set(run_cli, profile):
    before = run_cli("config", "get", "computer.default").stdout
    refused = run_cli("config", "set", "computer.default", "nosuch")
    assert refused.exit_code == 4, refused.output
    assert "No computer 'nosuch' (computers: localhost)" in refused.stderr
    assert run_cli("config", "get", "computer.default").stdout == before
    assert run_cli("config", "set", "computer.default", "localhost").exit_code == 0
