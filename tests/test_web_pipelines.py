"""The web view's pipeline pages (issue #33): the setups with how far each got, and one
setup's settings, last look at its source and elements, as a person sees them in chromium
and a script reads them from /api. The state is what the daemon's intake records, written
here without a daemon."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from test_pipeline_setups import setup_text
from test_web_browse import _doc_screenshot

import veglia.plugins.web
from veglia import orm
from veglia.datasources import Element, Listing
from veglia.exceptions import NotExistent
from veglia.orm.attributes import PIPELINE_RUN
from veglia.pipeline_elements import (
    claim_new,
    mark_refused,
    mark_started,
    pipeline_progress,
    record_listing,
)
from veglia.pipeline_setups import PipelineSetup, parse_setup_toml, set_pipeline_enabled
from veglia.plugins.web.live import Changes
from veglia.plugins.web.pages import PAGES, TEMPLATE_GLOBALS
from veglia.views.pipelines import FIRST_OF_EACH, pipeline_view, pipelines_view
from veglia_fixtures.browser import expect
from veglia_fixtures.profiles import EVIL_LABEL, stored_process

NAME = "count-lines"
#: Elements recorded: one done, one failed run, one refused, one running, the rest to start.
ELEMENTS = 25
REFUSAL = "sample-02.txt went missing before its run was made"
#: A setup's name holds no space, but may hold a slash or markup.
ODD = "team/<b>align</b>"


def _campaign(
    tmp_path: Path, left_out: str = "notes.md", name: str = NAME
) -> dict[str, orm.ProcessNode]:
    """A setup whose source listed :data:`ELEMENTS` elements (and left a file out, and
    waits for one being written), with the runs the intake would have made."""
    runs = tmp_path / name
    runs.mkdir()
    setup = PipelineSetup.from_dict(parse_setup_toml(setup_text(runs, name))).store()
    setup = set_pipeline_enabled(name, True)
    elements = tuple(
        Element(f"sample-{i:02}", (f"{runs}/sample-{i:02}.txt",), f"{i:064x}")
        for i in range(ELEMENTS)
    )
    record_listing(
        setup,
        Listing(
            elements,
            problems=(f"{left_out}: the pattern does not match it",),
            waiting=("sample-99",),
        ),
    )
    claimed = {row.identity: row for row in claim_new(setup, None, "w")}

    def run(identity: str, state: str, exit_status: int | None = None) -> orm.ProcessNode:
        row = claimed[identity]
        link = {"setup": name, "version": setup.version, "element": row.id, "identity": identity}
        node = stored_process(
            orm.CalcJobNode,
            state,
            label=f"count {identity}",
            exit_status=exit_status,
            **{PIPELINE_RUN: link},
        )
        mark_started([(row.id, node.pk)], "w")
        return node

    runs_made = {
        "done": run("sample-00", "finished", 0),
        "failed": run("sample-01", "finished", 3),
        "running": run("sample-03", "running"),
    }
    mark_refused(claimed["sample-02"].id, REFUSAL, "w")
    return runs_made


def test_a_person_follows_a_pipeline_from_the_list_to_a_failed_run(
    profile, tmp_path, web_server, browser_page
):
    runs = _campaign(tmp_path)
    page = browser_page
    page.goto(web_server.url)
    page.get_by_role("link", name="Pipelines").click()
    page.wait_for_url(f"{web_server.base_url}pipelines")

    row = page.locator(f'tr[data-setup="{NAME}"]')
    assert row.locator("td.done").inner_text() == "1"
    assert row.locator("td.running").inner_text() == "1"
    assert row.locator("td.to-start").inner_text() == str(ELEMENTS - 4)
    assert row.locator("td.failed").inner_text() == "2"
    assert row.locator("td.eta").inner_text() not in ("", "unknown")  # one run is done

    _doc_screenshot(page, "web-pipelines.png")

    row.get_by_role("link", name=NAME).click()
    page.wait_for_url(f"{web_server.base_url}pipeline/{NAME}")
    expect(page.locator("h1")).to_contain_text(f"Pipeline {NAME}")
    _doc_screenshot(page, "web-pipeline.png")
    counts = page.locator("section.progress ul.state-counts").inner_text()
    assert re.search(r"1\s+done", counts) and re.search(r"2\s+failed", counts), counts
    assert re.search(rf"{ELEMENTS - 4}\s+to start", counts), counts

    # The last look: what it left out and what it waits for.
    look = page.locator("section.source-look")
    expect(look).to_contain_text("notes.md: the pattern does not match it")
    expect(look).to_contain_text("sample-99")

    # Failed first, with why; the refused one has no run.
    failed = page.locator('.element-group[data-state="failed"]')
    expect(failed.locator("h3")).to_have_text("Failed (2)")
    refused = failed.locator('tr[data-identity="sample-02"]')
    expect(refused.locator(".state")).to_have_text("refused")
    expect(refused.locator("td.problem")).to_have_text(REFUSAL)
    assert refused.get_by_role("link").count() == 0
    expect(failed.locator('tr[data-identity="sample-01"] td.problem')).to_have_text("exit 3")

    # 21 to start, the first 20 listed, and a way to all of them.
    waiting = page.locator('.element-group[data-state="to_start"]')
    assert waiting.locator("tbody tr").count() == FIRST_OF_EACH
    expect(waiting).to_contain_text(f"1 to {FIRST_OF_EACH} of {ELEMENTS - 4} shown")

    # The settings, as `pipeline show` gives them.
    settings = page.locator("section.settings")
    expect(settings).to_contain_text("wc -l *.txt > counts.txt")
    expect(settings.locator("table.facts").first).to_contain_text("core.folder")

    # The filter by state keeps one kind, and pages through it.
    page.select_option("select[name=state]", "to_start")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(re.compile(r"\?state=to_start$"))
    assert page.locator(".element-group").count() == 1
    assert page.locator('tr[data-identity="sample-24"]').count() == 1

    # A failed run links to its job's page.
    page.goto(f"{web_server.base_url}pipeline/{NAME}?state=failed")
    page.locator('tr[data-identity="sample-01"]').get_by_role("link").click()
    page.wait_for_url(f"{web_server.base_url}job/{runs['failed'].pk}")
    expect(page.locator("h1")).to_contain_text("count sample-01")


def test_a_script_reads_the_pipelines_from_the_api_with_the_token(profile, tmp_path, web_server):
    runs = _campaign(tmp_path)
    folder = tmp_path / "odd"
    folder.mkdir()
    PipelineSetup.from_dict(parse_setup_toml(setup_text(folder, ODD))).store()
    header = {"Authorization": f"token {web_server.token}"}
    with httpx.Client(base_url=web_server.base_url, timeout=30) as client:
        assert client.get("/api/pipelines").status_code == 401
        listed = client.get("/api/pipelines", headers=header).json()
        setup, _ = listed["setups"]
        assert setup["name"] == NAME and setup["enabled"] is True
        assert setup["url"] == f"/pipeline/{NAME}"
        assert {k: setup["progress"][k] for k in ("done", "running", "to_start", "failed")} == {
            "done": 1,
            "running": 1,
            "to_start": ELEMENTS - 4,
            "failed": 2,
        }

        answer = client.get(
            f"/api/pipeline/{NAME}", params={"state": "to_start", "page": "2"}, headers=header
        )
        view = answer.json()
        [group] = view["elements"]["groups"]
        # 200 a page: the second page of 21 is empty, and says where it would start.
        assert (group["state"], group["total"], group["rows"], group["more"]) == (
            "to_start",
            ELEMENTS - 4,
            [],
            False,
        )
        view = client.get(f"/api/pipeline/{NAME}", headers=header).json()
        failed = next(g for g in view["elements"]["groups"] if g["state"] == "failed")
        assert [
            (e["identity"], e["run"] and e["run"]["url"], e["problem"]) for e in failed["rows"]
        ] == [
            ("sample-01", f"/job/{runs['failed'].pk}", "exit 3"),
            ("sample-02", None, REFUSAL),
        ]
        assert view["source"]["waiting"] == ["sample-99"] and view["source"]["listed"] == ELEMENTS
        assert 'name = "count-lines"' in view["toml"]

        # A name may hold a slash or markup: its address still leads to it.
        url = next(setup["url"] for setup in listed["setups"] if setup["name"] == ODD)
        assert url == "/pipeline/team%2F%3Cb%3Ealign%3C%2Fb%3E"
        assert client.get(f"/api{url}", headers=header).json()["setup"]["name"] == ODD

        missing = client.get("/api/pipeline/no-such-setup", headers=header)
        assert (
            missing.status_code == 404
            and "No pipeline setup 'no-such-setup'" in (missing.json()["error"])
        )
        bad = client.get(f"/api/pipeline/{NAME}", params={"state": "lost"}, headers=header)
        assert bad.json()["errors"] == [
            "state must be one of to_start, running, done, failed, superseded, not 'lost'"
        ]


def test_the_element_counts_agree_with_pipeline_progress_on_both_databases(
    any_profile, tmp_path, monkeypatch
):
    """The page lists each element as `pipeline_progress` counts it (in SQL, a page at a
    time), on SQLite and PostgreSQL."""
    _campaign(tmp_path)
    progress = pipeline_progress(NAME)
    monkeypatch.setattr("veglia.views.pipelines.PAGE_ROWS", 4)
    totals = {}
    for state in ("to_start", "running", "done", "failed"):
        view = pipeline_view(NAME, {"state": state})
        [group] = view["elements"]["groups"]
        totals[state] = group["total"]
        assert len(group["rows"]) == min(4, group["total"])
        assert {row["state"] for row in group["rows"]} <= {state}
    assert totals == {
        "to_start": progress.to_start,
        "running": progress.running,
        "done": progress.done,
        "failed": progress.failed_total,
    }
    last = pipeline_view(NAME, {"state": "to_start", "page": "6"})["elements"]["groups"][0]
    assert [row["identity"] for row in last["rows"]] == ["sample-24"] and last["first"] == 21
    assert pipelines_view()["setups"][0]["progress"]["failed"] == 2
    with pytest.raises(NotExistent):
        pipeline_view("no-such-setup")


def test_the_pipeline_templates_use_only_what_the_views_give(profile, tmp_path):
    """Drawn with StrictUndefined, with and without elements, and escaped."""
    templates = Path(veglia.plugins.web.__file__).parent / "templates"
    strict = Environment(
        loader=FileSystemLoader(templates), autoescape=True, undefined=StrictUndefined
    )
    strict.globals.update(TEMPLATE_GLOBALS)
    pages = {page.name: page for page in PAGES}

    def draw(name: str, params: dict) -> str:
        page = pages[name]
        view = page.load(params)
        assert page.title(view)
        return strict.get_template(page.template).render(
            view=view, user=None, csrf_token="t", can_operate=False
        )

    assert "No pipeline setups yet" in draw("pipelines", {})
    _campaign(tmp_path, left_out=EVIL_LABEL)
    empty = tmp_path / "empty"
    empty.mkdir()
    PipelineSetup.from_dict(parse_setup_toml(setup_text(empty, "nothing-yet"))).store()
    PipelineSetup.from_dict(parse_setup_toml(setup_text(empty, EVIL_LABEL))).store()
    html = draw("pipelines", {})
    assert EVIL_LABEL not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert f'href="/pipeline/{NAME}"' in html and 'href="/pipeline/nothing-yet"' in html
    assert "not yet" in html
    html = draw("pipeline", {"name": NAME})
    assert EVIL_LABEL not in html and "&lt;script&gt;" in html
    assert "Not looked at yet" in draw("pipeline", {"name": "nothing-yet"})
    # An element whose content changed before it started: listed when asked for.
    setup = set_pipeline_enabled(NAME, True)
    for checksum in ("a" * 64, "b" * 64):
        record_listing(setup, Listing((Element("late", ("/data/late.txt",), checksum),)))
    html = draw("pipeline", {"name": NAME, "state": "superseded"})
    assert "Superseded (1)" in html and 'data-identity="late"' in html


def test_the_live_probe_sees_a_new_setup_an_enable_and_new_elements(profile, tmp_path):
    """None of these writes a node: the pipeline pages, which show everything, are loaded
    again at the next probe all the same, not a minute later."""
    from veglia.plugins.web.probe import ChangeProbe

    probe = ChangeProbe(outside=None)
    probe()
    assert probe() == Changes()
    runs = tmp_path / "runs"
    runs.mkdir()
    setup = PipelineSetup.from_dict(parse_setup_toml(setup_text(runs))).store()
    assert probe() == Changes(frozenset(), elsewhere=True)
    setup = set_pipeline_enabled(NAME, True)
    assert probe() == Changes(frozenset(), elsewhere=True)
    assert probe() == Changes()
    record_listing(setup, Listing((Element("a", ("/data/a.txt",), "a" * 64),)))
    assert probe() == Changes(frozenset(), elsewhere=True)
    assert probe() == Changes()
