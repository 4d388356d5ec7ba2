"""Caching: an identical finished job is reused, with its outputs copied and its source named."""

from __future__ import annotations

from veglia import engine, orm
from veglia.config import Config
from veglia.entry_points import CalculationFactory

ShellJob = CalculationFactory("core.shell")


def _job(command="echo cached > out.txt; echo hi", content=b"x"):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(command)
    builder.files = {"in.txt": orm.SinglefileData(content, "in.txt")}
    builder.outputs = orm.List(["out.txt"])
    return builder


def test_identical_job_is_not_run_again_when_caching_is_on(profile, veglia_home):
    _, first = engine.run_get_node(_job())
    assert first.is_finished_ok
    Config().set_option("test", "caching.enabled", "yes")
    profile.options["caching.enabled"] = True
    outputs, second = engine.run_get_node(_job())
    assert second.is_finished_ok
    assert second.get_attribute("cached_from") == {"pk": first.pk, "uuid": first.uuid}
    assert second.job_id is None  # never submitted
    assert outputs["files"]["out_txt"].get_content() == b"cached\n"
    assert outputs["stdout"].pk != first.outputs.stdout.pk
    assert any("cached from process" in log.message for log in second.logs)


def test_different_input_content_runs_again(profile):
    engine.run_get_node(_job(content=b"a"))
    builder = _job(content=b"b")
    builder.metadata.cache = True
    _, second = engine.run_get_node(builder)
    assert second.get_attribute("cached_from") is None and second.job_id is not None


def test_caching_is_off_by_default(profile):
    engine.run_get_node(_job())
    _, second = engine.run_get_node(_job())
    assert second.get_attribute("cached_from") is None


def test_failed_jobs_are_not_reused(profile):
    engine.run_get_node(_job(command="exit 2"))
    builder = _job(command="exit 2")
    builder.metadata.cache = True
    _, second = engine.run_get_node(builder)
    assert second.get_attribute("cached_from") is None


def test_process_show_says_where_a_cached_job_came_from(profile, run_cli):
    _, first = engine.run_get_node(_job())
    builder = _job()
    builder.metadata.cache = True
    _, second = engine.run_get_node(builder)
    shown = run_cli("-p", "test", "process", "show", str(second.pk))
    assert any(
        line.split()[:2] == ["cached", "from"] and line.split()[2:] == ["process", str(first.pk)]
        for line in shown.stdout.splitlines()
    ), shown.stdout
