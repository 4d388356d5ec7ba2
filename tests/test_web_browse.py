"""`veglia web` as its users browse it (issue #31): a team leader follows a workflow of
shell jobs that runs on a real daemon, from the overview down to a job and a node, and
searches the processes; pages follow the run without a reload; they hold up with 200 steps,
a very long label and a phone's screen; and the docs' screenshots are taken from them (with
``VEGLIA_DOC_SCREENSHOTS=1``). A real `veglia web` server, a real daemon, real chromium."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from veglia import engine, orm
from veglia.orm.attributes import COMPUTER, STARTED_AT, SUBMITTED_AT
from veglia.plugins.web.pages import STEPS_ROWS, TIMELINE_ROWS
from veglia_fixtures.browser import distinct_colours, expect
from veglia_fixtures.profiles import wait_for

DOC_IMAGES = Path(__file__).parent.parent / "docs" / "images"
#: A step that keeps a CPU busy for ``s`` seconds, so its trace has something to draw.
BUSY = "end=$((SECONDS+{s})); while [ $SECONDS -lt $end ]; do :; done; echo step done"
#: How long a page may take to show a change (the server reads each view once a second).
LIVE_MS = 5000
LONG_LABEL = "assemble the reads of sample " + "NA12878-replicate-" * 12 + "end"


def _doc_screenshot(page, name: str) -> None:
    """The page at 1400x900 as the docs show it; written to docs/images/``name`` when
    VEGLIA_DOC_SCREENSHOTS=1 (checked not blank in any case)."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.evaluate("window.scrollTo(0, 0)")
    png = page.screenshot()
    assert distinct_colours(png) > 5, f"{name} looks blank"
    if os.environ.get("VEGLIA_DOC_SCREENSHOTS") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        (DOC_IMAGES / name).write_bytes(png)


def _pks(page, rows: str) -> list[int]:
    return [int(pk) for pk in page.locator(f"{rows} tr[data-pk]").evaluate_all(
        "rows => rows.map(row => row.dataset.pk)"
    )]  # fmt: skip


def _fits_the_width(page, width: int) -> None:
    """Nothing on the page is wider than the window: no sideways scrolling of the page."""
    page.set_viewport_size({"width": width, "height": 900})
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= width, f"{page.url} is {wide} px wide in a {width} px window"


def test_a_team_leader_follows_a_workflow_from_the_overview_to_a_job_and_a_node(
    profile, daemon, workflows, web_server, browser_page, run_cli
):
    daemon(1)
    guard = {"guard": {"entry_point": "core.walltime_guard", "kwargs": {"fraction": 0.95}}}
    flow = engine.submit(
        workflows.NamedSteps,
        commands=orm.List([BUSY.format(s=8), BUSY.format(s=3), "echo last"]),
        monitors=orm.Dict(guard),
        metadata={"label": "nightly assembly"},
    )
    page = browser_page
    # What the browser complains of (a missing file, a script or style the page's
    # Content-Security-Policy refuses) is a page that does not work as written.
    complaints: list[str] = []
    page.on("console", lambda message: message.type == "error" and complaints.append(message.text))
    page.goto(web_server.url)
    page.wait_for_selector("#live-badge[data-state=live]")
    active = page.locator("section.active")
    expect(active.locator("tr", has_text="step 1")).to_contain_text(
        "scheduler: running", timeout=60000
    )
    _doc_screenshot(page, "web-overview.png")
    page.set_viewport_size({"width": 1200, "height": 800})
    active.get_by_role("link", name="nightly assembly").click()
    page.wait_for_url(f"{web_server.base_url}workflow/{flow.pk}")
    assert page.locator("h1").inner_text() == f"Workflow nightly assembly ({flow.pk})"
    health = page.locator("ul.health")
    expect(health).to_contain_text("0 succeeded")

    # The first step shows up and runs (the page follows); its link leads to the job.
    steps = page.locator("section.steps")
    expect(steps.get_by_role("link", name="step 1")).to_be_visible(timeout=60000)
    expect(health.locator("li.running strong")).to_have_text("1", timeout=30000)
    steps.get_by_role("link", name="step 1").click()
    page.wait_for_url(re.compile(r"/job/\d+$"))
    first = orm.load_node(int(page.url.rsplit("/", 1)[1]))
    assert first.label == "step 1" and not first.refresh().is_terminated
    page.evaluate("window.notReloaded = true")
    badge = page.locator("main .summary .state")
    expect(badge).not_to_have_text(re.compile("Finished"))

    wait_for([first], lambda n: n.is_terminated, timeout=60)
    expect(badge).to_have_text("Finished [0]", timeout=LIVE_MS)
    assert page.evaluate("window.notReloaded") is True

    # Back on the workflow, the health counts move as the other steps end.
    page.goto(f"{web_server.base_url}workflow/{flow.pk}")
    page.wait_for_selector("#live-badge[data-state=live]")
    page.evaluate("window.notReloaded = true")
    wait_for([flow], lambda n: n.is_terminated, timeout=120)
    expect(health.locator("li.succeeded strong")).to_have_text("3", timeout=LIVE_MS)
    expect(health.locator("li.running strong")).to_have_text("0")
    expect(page.locator("main .summary .state")).to_have_text("Finished [0]")
    assert page.evaluate("window.notReloaded") is True
    assert flow.is_finished_ok

    # The steps tree and the timeline, each step linked to its job.
    jobs = [orm.load_node(pk) for pk in _pks(page, "section.steps")]
    assert [job.label for job in jobs] == ["step 1", "step 2", "step 3"]
    bars = page.locator("section.timeline svg a")
    assert bars.count() == 3
    assert page.locator("section.timeline").inner_text().count("did not run") == 0
    _doc_screenshot(page, "web-workflow.png")
    second = jobs[1]
    page.set_viewport_size({"width": 1200, "height": 800})
    page.locator(f'section.timeline svg a[href="/job/{second.pk}"]').click()
    page.wait_for_url(f"{web_server.base_url}job/{second.pk}")

    # The job: what ran, where its files are and how big, what it said, who watched it,
    # and what it used.
    main = page.locator("main")
    expect(main.locator("section.command pre")).to_contain_text("SECONDS+3")
    main.locator("section.script summary").click()
    expect(main.locator("section.script pre")).to_contain_text("SECONDS+3")
    inputs, outputs = main.locator("section.inputs"), main.locator("section.outputs")
    expect(inputs.locator("tr", has_text="command")).to_contain_text("Str")
    stdout = outputs.locator("tr", has_text="stdout").first
    expect(stdout.locator("td.num").last).to_have_text("10 B")  # "step done\n"
    expect(main.locator("section.log")).to_contain_text("submitted job")
    expect(main.locator("section.monitors tr", has_text="guard")).to_contain_text(
        "core.walltime_guard"
    )
    charts = main.locator("section.trace svg")
    assert charts.count() >= 2
    labels = charts.evaluate_all("svgs => svgs.map(svg => svg.getAttribute('aria-label'))")
    assert any("CPU" in label for label in labels) and any("Memory" in label for label in labels)
    assert "No resource trace" not in main.inner_text()
    assert "{" not in main.locator("section.monitors").inner_text()  # no raw JSON
    page.reload()
    _doc_screenshot(page, "web-job.png")

    # A node's provenance: from an output's link.
    page.set_viewport_size({"width": 1200, "height": 800})
    stdout_pk = second.outputs.stdout.pk
    outputs.get_by_role("link", name=str(stdout_pk), exact=True).click()
    page.wait_for_url(f"{web_server.base_url}node/{stdout_pk}")
    assert page.locator("h1").inner_text().startswith("Provenance of SinglefileData")
    assert second.pk in _node_pks(page)

    # The processes search gives the rows `veglia process list` gives.
    page.get_by_role("link", name="Processes", exact=True).click()
    page.select_option("select[name=state]", "finished")
    page.fill("input[name=label]", "step")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"/processes\?.*state=finished"))
    listed = run_cli("-p", "test", "process", "list", "-S", "finished", "-L", "step",
                     "-D", "desc", "-P", "pk", "--raw")  # fmt: skip
    assert listed.exit_code == 0, listed.output
    assert _pks(page, "main") == [int(pk) for pk in listed.stdout.split()]
    assert sorted(_pks(page, "main")) == sorted(job.pk for job in jobs)

    page.goto(web_server.base_url)
    expect(page.locator("ul.state-counts li.count-finished strong")).to_have_text(
        str(len(jobs) + 1)
    )
    assert complaints == []


def _node_pks(page) -> list[int]:
    cells = page.locator("section.neighbours tbody tr td:first-child")
    return [int(text) for text in cells.all_inner_texts()]


def _finished_steps(count: int) -> tuple[orm.WorkflowNode, list[orm.CalcJobNode]]:
    """A finished workflow of ``count`` finished shell steps, one every 10 s (made directly:
    a daemon would take minutes to run them), the last with a very long label."""
    flow = orm.WorkflowNode(process_type="pipeline_workflows:NamedSteps")
    flow.label = "two hundred steps"
    flow.process_state = "finished"
    flow.store()
    flow.set_exit(0, None)
    began = time.time() - 10 * count - 60
    steps = []
    for index in range(count):
        step = orm.CalcJobNode(process_type="core.shell")
        step.label = LONG_LABEL if index == count - 1 else f"step {index + 1}"
        step.process_state = "finished"
        step.store()
        step.set_exit(0, None)
        step.set_attributes({
            COMPUTER: "localhost",
            SUBMITTED_AT: began + 10 * index,
            STARTED_AT: began + 10 * index + 2,
        })  # fmt: skip
        step.add_incoming(flow, "call", "CALL_CALC")
        steps.append(step)
    return flow, steps


def test_a_workflow_of_200_steps_a_long_label_and_a_phone(profile, web_server, browser_page):
    flow, steps = _finished_steps(200)
    page = browser_page
    page.goto(web_server.url)
    page.goto(f"{web_server.base_url}workflow/{flow.pk}")
    page.wait_for_selector("#live-badge[data-state=live]")

    # The steps table lists the latest, the timeline draws the latest, and both say where
    # the others are.
    listed = _pks(page, "section.steps")
    assert listed == [step.pk for step in steps[-STEPS_ROWS:]]
    timeline = page.locator("section.timeline")
    assert timeline.locator("svg g.row").count() == TIMELINE_ROWS
    assert f"{200 - TIMELINE_ROWS} more" in timeline.inner_text()
    more = timeline.get_by_role("link", name="processes search")
    assert more.get_attribute("href").startswith("/processes?")
    expect(page.locator("ul.health li.succeeded strong")).to_have_text("200")
    all_steps = page.locator("section.steps p.more").get_by_role("link", name="processes search")
    search = more.get_attribute("href")
    assert all_steps.get_attribute("href") == search

    # The long label is cut to a line, its whole text in the title.
    cut = page.locator("section.steps .cut", has_text="assemble the reads").first
    assert cut.get_attribute("title") == LONG_LABEL
    assert cut.evaluate("el => el.scrollWidth > el.clientWidth")
    assert cut.bounding_box()["width"] < 400

    for width in (1400, 390):
        _fits_the_width(page, width)

    # A job that nothing measured says so; its page fits a phone and a wide screen too.
    page.goto(f"{web_server.base_url}job/{steps[-1].pk}")
    heading = page.locator("h1 .label")
    assert heading.get_attribute("title") == LONG_LABEL
    assert heading.evaluate("el => el.scrollWidth > el.clientWidth")
    expect(page.locator("section.trace")).to_contain_text(
        "No resource trace for this job: nothing measured its CPU and memory."
    )
    for width in (390, 1400):
        _fits_the_width(page, width)

    for path in ("", "processes?state=all", f"node/{flow.pk}"):
        page.goto(f"{web_server.base_url}{path}")
        for width in (390, 1400):
            _fits_the_width(page, width)

    # The search the workflow page links to lists every step, and only them.
    page.goto(web_server.base_url + search.lstrip("/"))
    assert sorted(_pks(page, "main")) == sorted(step.pk for step in steps)
