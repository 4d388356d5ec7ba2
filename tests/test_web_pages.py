"""The web pages' templates drawn over the real views: each page shows its view's facts,
links between pages by the rows' URLs, escapes every value, and offers actions only to
someone allowed to operate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from jinja2 import Environment, FileSystemLoader, StrictUndefined

import veglia.plugins.web
from veglia import orm
from veglia.exceptions import NotExistent
from veglia.orm.attributes import BLOCKED, PAUSED, PAUSED_REASON
from veglia.plugins.web.pages import PAGES, TEMPLATE_GLOBALS, Page
from veglia_fixtures.profiles import EVIL_LABEL

EVIL = EVIL_LABEL
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
TEMPLATES = Path(veglia.plugins.web.__file__).parent / "templates"


@pytest.fixture(scope="module")
def jinja() -> Environment:
    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True)
    environment.globals.update(TEMPLATE_GLOBALS)
    return environment


def _page(name: str) -> Page:
    return next(page for page in PAGES if page.name == name)


def render(jinja: Environment, name: str, params: dict, can_operate: bool = False) -> str:
    page = _page(name)
    view = page.load(params)
    assert page.title(view)
    return jinja.get_template(page.template).render(
        view=view, user=None, csrf_token="t", can_operate=can_operate
    )


@pytest.fixture
def ran(evil_workflow):
    """A finished workflow labelled EVIL with two jobs, and a waiting blocked job."""
    blocked = orm.CalcJobNode(process_type="core.shell")
    blocked.label = EVIL
    blocked.process_state = "waiting"
    blocked.store()
    blocked.set_attributes({BLOCKED: {"reason": f"queue {EVIL} refused"}})
    return evil_workflow, blocked


def test_every_page_of_the_contract_is_there():
    assert {page.name: page.path for page in PAGES} == {
        "overview": "/",
        "workflow": "/workflow/{pk:int}",
        "job": "/job/{pk:int}",
        "node": "/node/{pk:int}",
        "processes": "/processes",
        "pipelines": "/pipelines",
        "pipeline": "/pipeline/{name:path}",
    }
    for page in PAGES:
        template = (TEMPLATES / page.template).read_text()
        assert template.startswith('{% extends "base.html" %}')
        assert "{% block content %}" in template
    assert {"timeline_svg", "usage_svg"} <= set(TEMPLATE_GLOBALS)


def test_the_overview_page_lists_links_and_escapes(jinja, ran):
    flow, blocked = ran
    html = render(jinja, "overview", {})
    assert EVIL not in html and ESCAPED in html
    assert f'href="/workflow/{flow.pk}"' in html and f'href="/job/{blocked.pk}"' in html
    assert f"veglia process unblock {blocked.pk}" in html
    assert "localhost" in html and "veglia daemon start" in html
    assert "/action/" not in html


def test_the_workflow_page_shows_steps_health_and_timeline(jinja, ran):
    flow, _ = ran
    html = render(jinja, "workflow", {"pk": flow.pk})
    assert EVIL not in html and ESCAPED in html
    assert "<strong>2</strong> succeeded" in html and "<strong>0</strong> failed" in html
    for child in flow.called:
        assert f'href="/job/{child.pk}"' in html
    assert '<svg class="timeline"' in html or "<svg" in html
    assert "/action/" not in html  # it has ended: nothing to do


def test_the_job_page_shows_its_files_script_and_log(jinja, ran):
    flow, _ = ran
    job = flow.called[0]
    html = render(jinja, "job", {"pk": job.pk})
    assert "✔ Finished [0]" in html and f'href="/workflow/{flow.pk}"' in html
    assert "_veglia_submit.sh" in html and "echo hi; echo run 1" in html
    assert "stdout" in html and "localhost" in html


def test_actions_show_only_to_an_operator(jinja, ran):
    _, blocked = ran
    html = render(jinja, "job", {"pk": blocked.pk})
    assert EVIL not in html and ESCAPED in html and "/action/" not in html
    html = render(jinja, "job", {"pk": blocked.pk}, can_operate=True)
    for verb in ("kill", "pause", "unblock"):
        assert f'href="/action/{verb}/{blocked.pk}"' in html
    paused = orm.CalcJobNode(process_type="core.shell")
    paused.process_state = "waiting"
    paused.store()
    paused.set_attributes({PAUSED: True, PAUSED_REASON: "by me"})
    html = render(jinja, "job", {"pk": paused.pk}, can_operate=True)
    assert f'href="/action/play/{paused.pk}"' in html and "/action/pause/" not in html


def test_the_node_page_draws_the_graph_escaped(jinja, ran):
    flow, _ = ran
    html = render(jinja, "node", {"pk": flow.pk, "depth": "2"})
    assert EVIL not in html
    assert "<svg" in html or "digraph" in html
    for child in flow.called:
        assert f'href="/job/{child.pk}"' in html


def test_the_processes_page_filters_and_keeps_the_form(jinja, ran):
    flow, blocked = ran
    html = render(jinja, "processes", {"state": "all", "label": "script"})
    assert EVIL not in html and ESCAPED in html
    assert f'href="/workflow/{flow.pk}"' in html and f'href="/job/{blocked.pk}"' in html
    assert 'value="script"' in html and '<option value="all" selected>' in html
    bad = render(jinja, "processes", {"limit": f'1"{EVIL}'})
    assert "limit must be a whole number" in bad and EVIL not in bad


def test_the_processes_page_draws_its_rows_a_page_at_a_time(jinja, ran, monkeypatch):
    """A search of many rows is drawn a page at a time, newest first, with links that keep
    the filters; its /api answer holds the same page of rows and their total."""
    pks = [row["pk"] for row in _page("processes").load({"state": "all"})["rows"]]
    monkeypatch.setattr("veglia.views.processes.PAGE_ROWS", 2)
    view = _page("processes").load({"state": "all"})
    assert view["total"] == 4 == len(pks)  # the workflow, its two jobs, the blocked job
    assert [row["pk"] for row in view["rows"]] == pks[:2]

    def drawn(page: str) -> tuple[list[int], str]:
        html = render(jinja, "processes", {"state": "all", "page": page})
        return [int(pk) for pk in re.findall(r'<tr data-pk="(\d+)"', html)], html

    first, html = drawn("1")
    assert first == pks[:2] and "1 to 2 shown" in html
    query = "state=all&amp;label=&amp;type=&amp;called_by=&amp;past_days=&amp;limit=100"
    assert f'href="/processes?{query}&amp;page=2"' in html
    assert 'rel="prev"' not in html
    second, html = drawn("2")
    assert second == pks[2:4] and "3 to 4 shown" in html and 'rel="next"' not in html
    assert drawn("3")[0] == []
    assert "page must be 1 or more" in drawn("0")[1]


def test_a_node_page_too_big_to_draw_lists_its_first_nodes_and_points_to_the_rest(ran, monkeypatch):
    from veglia.views import node as node_module

    flow, _ = ran
    monkeypatch.setattr(node_module, "DRAWN_NODES", 1)
    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True)
    environment.globals.update({**TEMPLATE_GLOBALS, "NODE_ROWS": 2})
    view = _page("node").load({"pk": flow.pk})
    assert len(view["nodes"]) > 2 and view["dot"].startswith("digraph")
    html = environment.get_template("node.html").render(
        view=view, user=None, csrf_token="t", can_operate=False
    )
    assert "too many to draw" in html and "digraph" not in html  # no megabyte of dot text
    assert len(re.findall(r'<td class="num"><a href="/(?:node|job|workflow|data)/', html)) == 2
    assert f"The first 2 of {len(view['nodes'])} nodes are listed" in html
    assert f'href="/api/node/{flow.pk}?depth=1"' in html


def test_each_page_tells_the_live_hub_which_nodes_it_shows(ran):
    """A watched page is loaded again only when one of these changed (the overview and the
    search show everything)."""
    flow, _ = ran
    job = flow.called[0]
    linked = {node.pk for _, node in [*job.inputs.items(), *job.outputs.items()]}
    assert linked and all(pk != job.pk for pk in linked)

    def covers(name: str, pk: int | None = None) -> frozenset[int] | None:
        page = _page(name)
        view = page.load({} if pk is None else {"pk": pk})
        return None if page.covers is None else page.covers(view)

    assert covers("workflow", flow.pk) == {flow.pk, *(child.pk for child in flow.called)}
    assert covers("job", job.pk) == {job.pk, *linked}
    assert {flow.pk, job.pk} | linked <= covers("node", job.pk)
    assert covers("overview") is None and covers("processes") is None


@pytest.mark.parametrize("name", ["workflow", "job", "node"])
def test_a_missing_pk_is_not_existent(profile, name):
    with pytest.raises(NotExistent):
        _page(name).load({"pk": 987654})


def test_templates_use_only_what_the_views_give(jinja, ran):
    """Drawn with StrictUndefined, a template naming a key no view has fails."""
    flow, blocked = ran
    strict = jinja.overlay(undefined=StrictUndefined)
    for name, params in (
        ("overview", {}),
        ("workflow", {"pk": flow.pk}),
        ("job", {"pk": blocked.pk}),
        ("node", {"pk": flow.pk}),
        ("processes", {"state": "all"}),
    ):
        page = _page(name)
        strict.get_template(page.template).render(
            view=page.load(params), user=None, csrf_token="t", can_operate=True
        )
