"""`veglia report PK -o FILE` on a real workflow whose jobs the core.trace sampler measured:
the file draws in chromium, reaches for nothing, escapes labels, and the command refuses
what it should with one line."""

from __future__ import annotations

import re
from pathlib import Path

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.browser import expect

ShellJob = CalculationFactory("core.shell")
EVIL = "<script>alert('report')</script>"
#: Holds 50 MB for 2.5 s: the sampler sees it at least twice.
BUSY = "python3 -c 'x = bytearray(50_000_000); import time; time.sleep(2.5)'"


def _peak_mib(html: str, title: str) -> list[float]:
    """The peaks the charts titled ``title`` mark, in MiB."""
    found = re.findall(r'aria-label="' + re.escape(title) + r": peak ([0-9.]+) (KiB|MiB|GiB)", html)
    scale = {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0}
    return [float(value) * scale[unit] for value, unit in found]


def test_report_of_a_traced_workflow_draws_offline_and_escapes(
    profile, workflows, run_cli, request, tmp_path: Path
):
    _, flow = engine.run_get_node(
        workflows.CountedShell, command=orm.Str(BUSY), times=orm.Int(2), metadata={"label": EVIL}
    )
    assert flow.is_finished_ok, flow.exit_message
    report = tmp_path / "report.html"
    written = run_cli("-p", "test", "report", str(flow.pk), "-o", str(report))
    assert written.exit_code == 0, written.output
    assert f"Wrote the report of process {flow.pk} to {report}" in written.stdout
    html = report.read_text(encoding="utf-8")
    assert EVIL not in html and "&lt;script&gt;" in html
    # The trace's kB reach the chart as bytes: each job held its 50 MB.
    peaks = _peak_mib(html, "Memory (RSS)")
    assert len(peaks) == 2 and all(peak > 47 for peak in peaks), peaks

    # Chromium once the jobs ran: while Playwright is open, no engine.run works here.
    page = request.getfixturevalue("browser_page")
    requests: list[str] = []
    page.on("request", lambda asked: requests.append(asked.url))
    page.goto(report.as_uri())
    expect(page.locator("h1")).to_contain_text(EVIL)
    assert page.locator("script").count() == 0
    # The timeline, and CPU and memory for each of the two jobs.
    charts = page.locator("svg.veglia-chart")
    expect(charts).to_have_count(1 + 2 * 2)
    box = charts.first.bounding_box()
    assert box and box["width"] > 600 and box["height"] > 60
    first_job = flow.called[0].pk
    page.locator(f'svg.veglia-chart a[href="#job-{first_job}"]').click()
    expect(page.locator(f"#job-{first_job}")).to_be_visible()
    assert requests == [report.as_uri()], "the report loaded something besides itself"

    again = run_cli("-p", "test", "report", str(flow.pk), "-o", str(report))
    assert again.exit_code != 0
    assert again.stderr.strip().count("\n") == 0 and "--force" in again.stderr
    forced = run_cli("-p", "test", "report", str(flow.pk), "-o", str(report), "--force")
    assert forced.exit_code == 0, forced.output
    to_stdout = run_cli("-p", "test", "report", str(flow.pk), "-o", "-")
    assert to_stdout.exit_code == 0 and to_stdout.stdout.startswith("<!DOCTYPE html>")


def test_report_of_one_job_and_one_line_refusals(profile, run_cli, tmp_path: Path):
    _, job = engine.run_get_node(ShellJob, command=orm.Str(BUSY), metadata={"label": "one job"})
    single = run_cli("-p", "test", "report", str(job.pk), "-o", "-")
    assert single.exit_code == 0, single.output
    html = single.stdout
    assert f'id="job-{job.pk}"' in html and "one job" in html
    assert _peak_mib(html, "Memory (RSS)")[0] > 47

    missing = run_cli("-p", "test", "report", "999999", "-o", str(tmp_path / "x.html"))
    assert missing.exit_code != 0 and "999999" in missing.stderr
    assert missing.stderr.strip().count("\n") == 0
    data = orm.Int(5).store()
    not_process = run_cli("-p", "test", "report", str(data.pk), "-o", str(tmp_path / "x.html"))
    assert not_process.exit_code != 0 and "no process" in not_process.stderr
    assert not_process.stderr.strip().count("\n") == 0
    assert not (tmp_path / "x.html").exists()
