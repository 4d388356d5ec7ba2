"""Integrity from the workflow page: verify an ended workflow's files, see a damaged one
named, re-run the step that made it on a real daemon; with a real server and chromium."""

from __future__ import annotations

import hashlib
import re

import httpx
import sqlalchemy as sa

from veglia import engine, orm
from veglia.manage import get_storage
from veglia.orm.attributes import RERUN_OF
from veglia.storage.models import Node
from veglia_fixtures.browser import expect
from veglia_fixtures.profiles import wait_for

PASSWORD = "correct horse battery staple 7"


def _damaged_workflow(workflows):
    """A finished two-step workflow whose second step's stdout was overwritten in the
    repository afterwards: the workflow, that step, and its damaged output."""
    _, flow = engine.run_get_node(
        workflows.CountedShell, command=orm.Str("echo data"), times=orm.Int(2)
    )
    assert flow.is_finished_ok, flow.exit_message
    _, second = flow.called
    damaged = second.outputs.stdout
    record = damaged.list_objects()[0]
    blob = get_storage().repository.objects / record.sha256[:2] / record.sha256[2:]
    blob.write_bytes(b"tampered\n")
    return flow, second, damaged, record.sha256


def _calcjob_pks() -> set[int]:
    with get_storage().session() as session:
        query = sa.select(Node.id).where(Node.node_type == "process.calcjob")
        return set(session.scalars(query))


def test_verify_names_the_damaged_file_and_rerun_remakes_it(
    profile, workflows, daemon, web_server, request
):
    flow, second, damaged, digest = _damaged_workflow(workflows)
    daemon(1)
    page = request.getfixturevalue("browser_page")
    page.goto(web_server.url)
    page.goto(f"{web_server.base_url}workflow/{flow.pk}")
    page.click(f'a[href="/action/verify/{flow.pk}"]')
    assert page.locator("h1").inner_text() == f"Verify the files of process {flow.pk}?"
    page.click("button[type=submit]:has-text('Verify')")
    # The stdout node, and the retrieved folder's copy of the same blob.
    row = page.locator("table.damaged tr", has=page.locator(f'a[href="/node/{damaged.pk}"]'))
    expect(row).to_contain_text("stdout")
    expect(row).to_contain_text(digest)  # what was stored
    expect(row).to_contain_text(hashlib.sha256(b"tampered\n").hexdigest())  # what is there
    expect(page.locator("main")).to_contain_text(f"({second.pk})")

    before = _calcjob_pks()
    page.click(f'a[href="/action/rerun/{flow.pk}"]')
    expect(page.locator("ul.producers")).to_contain_text(f"({second.pk})")
    page.click("button.danger")
    flash = page.locator(".flash")
    expect(flash).to_contain_text(f"Process {second.pk} runs again as process")
    [new] = _calcjob_pks() - before
    assert page.url == f"{web_server.base_url}job/{new}"
    # The new job's page follows it, without a reload, until it has finished.
    expect(page.locator("main")).to_contain_text(re.compile("finished", re.I), timeout=90_000)
    rerun = orm.load_node(new)
    wait_for([rerun], lambda n: n.is_terminated)
    assert rerun.is_finished_ok and rerun.get_attribute(RERUN_OF) == second.pk
    assert damaged.get_content() == b"data\nrun 2\n"

    page.goto(f"{web_server.base_url}action/verify/{flow.pk}")
    page.click("button[type=submit]:has-text('Verify')")
    expect(page.locator("p.intact")).to_contain_text(re.compile(r"All \d+ files intact"))


def test_readers_see_no_verify_and_a_form_without_its_token_does_nothing(
    profile, workflows, web_server, run_cli, request
):
    flow, _, _, _ = _damaged_workflow(workflows)
    added = run_cli(
        "-p", "test", "web", "user", "add", "reader", "--role", "read", "--password-stdin",
        input=PASSWORD + "\n",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    before = _calcjob_pks()
    with httpx.Client(base_url=web_server.base_url, timeout=30) as client:
        client.get("/", params={"token": web_server.token}, follow_redirects=True)
        page = client.get(f"/workflow/{flow.pk}").text
        assert f"/action/verify/{flow.pk}" in page
        for path in (f"/action/verify/{flow.pk}", f"/action/rerun/{flow.pk}"):
            forged = client.post(path, data={"csrf_token": "forged"})
            assert forged.status_code == 403 and "CSRF" in forged.text
    assert _calcjob_pks() == before

    page = request.getfixturevalue("browser_page")
    page.goto(web_server.base_url)
    page.fill("input[name=username]", "reader")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(web_server.base_url)
    page.goto(f"{web_server.base_url}workflow/{flow.pk}")
    expect(page.locator("h1")).to_contain_text(f"({flow.pk})")
    assert page.locator(f'a[href="/action/verify/{flow.pk}"]').count() == 0
    for path in (f"action/verify/{flow.pk}", f"action/rerun/{flow.pk}"):
        answer = page.goto(f"{web_server.base_url}{path}")
        assert answer is not None and answer.status == 403
        assert page.locator('form[action^="/action/"]').count() == 0
    assert _calcjob_pks() == before
