"""Integrity from the workflow page: verify an ended workflow's files, see a damaged one
named, re-run the step that made it on a real daemon; with a real server and chromium."""

from __future__ import annotations

import hashlib
import re

import httpx
import sqlalchemy as sa

from veglia import engine, orm
from veglia.manage import get_storage
from veglia.orm.attributes import NOT_REPRODUCIBLE, RERUN_OF
from veglia.storage.models import Node
from veglia_fixtures.browser import expect
from veglia_fixtures.profiles import damaged_unstable_job, wait_for

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


def test_a_job_recorded_as_not_reproducible_is_not_offered_a_rerun_and_one_posted_is_refused(
    profile, web_server, run_cli
):
    # A rerun cannot remake this job's damaged output: `veglia verify --rerun` records it.
    job, _ = damaged_unstable_job()
    assert run_cli("-p", "test", "verify", str(job.pk), "--rerun").exit_code == 1
    recorded = orm.load_node(job.pk).get_attribute(NOT_REPRODUCIBLE)
    # What `veglia verify` says of it from now on, and the page must say too.
    reason = f"process {job.pk}: not reproducible (rerun {recorded['rerun']} made other content)"
    cli = run_cli("-p", "test", "verify", str(job.pk))
    assert reason in " ".join(cli.stdout.split())

    before = _calcjob_pks()
    with httpx.Client(base_url=web_server.base_url, timeout=30) as client:
        client.get("/", params={"token": web_server.token}, follow_redirects=True)
        asked = client.get(f"/action/verify/{job.pk}").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', asked).group(1)
        checked = client.post(f"/action/verify/{job.pk}", data={"csrf_token": token})
        assert checked.status_code == 200
        assert reason in checked.text and f"recorded {recorded['at']}" in checked.text
        assert f"/action/rerun/{job.pk}" not in checked.text

        confirm = client.get(f"/action/rerun/{job.pk}")
        assert reason in confirm.text and "There is nothing to re-run." in confirm.text
        assert f'action="/action/rerun/{job.pk}"' not in confirm.text

        posted = client.post(f"/action/rerun/{job.pk}", data={"csrf_token": token})
        assert posted.status_code == 409
        said = " ".join(posted.text.split())
        assert f"P{reason[1:]}" in said and "Nothing was run again" in said
    assert _calcjob_pks() == before
    assert orm.load_node(job.pk).get_attribute(NOT_REPRODUCIBLE) == recorded
