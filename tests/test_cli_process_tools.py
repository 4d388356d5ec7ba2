"""What a ``verdi`` user looks for in ``veglia process``: list filters and order, the call
tree (``process status``), a dump to a folder (``process dump``), what a calculation takes
(``plugin show``) and shell completion; on SQLite and PostgreSQL where the database is asked."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from click.shell_completion import ShellComplete

from veglia import engine, orm
from veglia.cli.main import cli
from veglia.entry_points import CalculationFactory
from veglia.orm import queries
from veglia.orm.attributes import CALL_KEY, PAUSED, PAUSED_REASON
from veglia_fixtures.profiles import stored_process

LONG_REASON = "upload failed on every attempt: the computer refused the connection " * 2


@pytest.fixture
def made(any_profile):
    """A finished workflow ``relax_si`` that called ``scf 1`` (ok) and ``scf 2`` (410), which
    called ``inner``; a failed ``relax_ge`` (410); a paused ``Bands`` with a long reason."""
    workflow = stored_process(orm.WorkflowNode, "finished", "relax_si", 0)
    scf1 = stored_process(orm.CalcJobNode, "finished", "scf 1", 0, workflow, **{CALL_KEY: "0.0"})
    scf2 = stored_process(orm.WorkflowNode, "finished", "scf 2", 410, workflow, **{CALL_KEY: "1.0"})
    inner = stored_process(orm.CalcJobNode, "finished", "inner", 410, scf2)
    failed = stored_process(orm.CalcJobNode, "finished", "relax_ge", 410)
    paused = stored_process(
        orm.CalcJobNode, "waiting", "Bands", **{PAUSED: True, PAUSED_REASON: LONG_REASON}
    )
    return workflow, scf1, scf2, inner, failed, paused


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def _pks(run_cli, *args: str) -> list[int]:
    out = ok(run_cli("-p", "test", "process", "list", "--raw", "-P", "pk", *args)).stdout
    return [int(line) for line in out.split()]


# -- list ------------------------------------------------------------------------------------------
def test_listed_processes_by_label_exit_status_and_order(made):
    workflow, scf1, scf2, inner, failed, paused = made

    def pks(*args, **kwargs):
        return [row.pk for row in queries.list_processes(*args, **kwargs)]

    assert pks(label_pattern="relax") == [workflow.pk, failed.pk]  # a substring
    assert pks(label_pattern="SCF") == [scf1.pk, scf2.pk]  # in any case
    assert pks(label_pattern="relax_*") == [workflow.pk, failed.pk]  # a glob: the whole label
    assert pks(label_pattern="*_s?") == [workflow.pk]
    assert pks(label_pattern="scf_") == [] and pks(label_pattern="%") == []  # no SQL wildcards
    assert pks(label_pattern="lax") == [workflow.pk, failed.pk]
    assert pks(label_pattern="lax*") == []
    assert pks(exit_status=410) == [scf2.pk, inner.pk, failed.pk]
    assert pks(exit_status=0, label_pattern="scf") == [scf1.pk]

    everything = [workflow.pk, scf1.pk, scf2.pk, inner.pk, failed.pk, paused.pk]
    assert pks(order_by="pk") == everything == pks()
    assert pks(order_by="pk", descending=True) == everything[::-1]
    assert pks(order_by="label") == [paused.pk, inner.pk, failed.pk, workflow.pk, scf1.pk, scf2.pk]
    assert pks(order_by="label", limit=2) == [scf1.pk, scf2.pk]  # the last two by label
    assert pks(order_by="ctime", descending=True, limit=2) == [paused.pk, failed.pk]
    scf1.set_attribute(PAUSED_REASON, "touched")  # now the last modified
    assert pks(order_by="mtime")[-1] == scf1.pk and pks(order_by="mtime", limit=1) == [scf1.pk]
    assert pks(pks=[inner.pk, workflow.pk]) == [workflow.pk, inner.pk]
    with pytest.raises(ValueError, match="order_by must be one of pk, ctime, mtime, label"):
        queries.list_processes(order_by="size")


def test_process_list_filters_orders_and_says_when_nothing_is_active(run_cli, made):
    workflow, scf1, scf2, inner, failed, paused = made
    assert _pks(run_cli, "-L", "relax") == []  # active processes only, by default
    assert _pks(run_cli, "-a", "-L", "relax") == [workflow.pk, failed.pk]
    assert _pks(run_cli, "-a", "-L", "relax_*") == [workflow.pk, failed.pk]
    assert _pks(run_cli, "-E", "410") == [scf2.pk, inner.pk, failed.pk]  # implies -a
    assert _pks(run_cli, "-E", "410", "-L", "scf") == [scf2.pk]
    assert _pks(run_cli, "-a", "-O", "pk", "-D", "desc", "-l", "2") == [paused.pk, failed.pk]
    assert _pks(run_cli, "-a", "-O", "label", "-l", "1") == [scf2.pk]
    wrong = run_cli("-p", "test", "process", "list", "-O", "size")
    assert wrong.exit_code == 2 and "'size' is not one of 'pk', 'ctime', 'mtime', 'label'" in (
        wrong.stderr
    )

    # The table nests called processes under their caller in any order.
    table = ok(run_cli("-p", "test", "process", "list", "-a", "-O", "label", "-D", "desc"))
    lines = table.stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [
        str(pk) for pk in (workflow.pk, scf2.pk, inner.pk, scf1.pk, failed.pk, paused.pk)
    ]
    assert "└─ demo.wf" in lines[1] and "   └─ core.shell" in lines[2]

    # A long status is cut in the table; --raw and `process show` have all of it.
    active = ok(run_cli("-p", "test", "process", "list")).stdout
    assert (
        "upload failed on every attempt: the computer re…" in active and LONG_REASON not in active
    )
    raw = ok(run_cli("-p", "test", "process", "list", "--raw", "-P", "pk,status")).stdout
    assert raw == f"{paused.pk}\t{LONG_REASON}\n"
    shown = ok(run_cli("-p", "test", "process", "show", str(paused.pk))).stdout
    assert LONG_REASON.strip() in " ".join(shown.split())

    paused.set_state_and_checkpoint("finished", None)
    nothing = ok(run_cli("-p", "test", "process", "list"))
    assert nothing.stdout == "Nothing active; use -a to list finished processes too.\n"
    assert ok(run_cli("-p", "test", "process", "list", "--raw")).stdout == ""
    matching = ok(run_cli("-p", "test", "process", "list", "-L", "x")).stdout
    assert matching == "No active process matches; use -a to list finished processes too.\n"
    assert ok(run_cli("-p", "test", "process", "list", "-E", "7")).stdout == "No process matches.\n"


# -- status ----------------------------------------------------------------------------------------
def test_process_list_called_by_lists_the_steps_of_a_workflow(run_cli, made):
    workflow, scf1, scf2, inner, _, _ = made
    listed = ok(run_cli("process", "list", "-a", "-C", str(workflow.pk), "-P", "pk", "--raw"))
    assert listed.output.split() == [str(scf1.pk), str(scf2.pk)]  # not inner: scf2 called it
    listed = ok(run_cli("process", "list", "-a", "--called-by", str(inner.pk)))
    assert listed.output.strip() == "No process matches."


def test_process_status_shows_the_call_tree(run_cli, made):
    workflow, scf1, scf2, inner, failed, paused = made
    paused.add_incoming(scf2, "call", "CALL")  # a second, active child of scf 2
    shown = ok(run_cli("-p", "test", "process", "status", str(workflow.pk))).stdout
    tree = [line.rstrip() for line in shown.splitlines()]
    assert tree == [
        f"demo.wf<{workflow.pk}> relax_si  ✔ Finished [0]",
        f"├── core.shell<{scf1.pk}> scf 1  ✔ Finished [0]",
        f"└── demo.wf<{scf2.pk}> scf 2  ⨯ Finished [410]  · exit 410",
        f"    ├── core.shell<{inner.pk}> inner  ⨯ Finished [410]  · exit 410",
        f"    └── core.shell<{paused.pk}> Bands  ⏸ Paused  · {LONG_REASON.strip()}",
    ]
    shallow = ok(run_cli("-p", "test", "process", "status", str(workflow.pk), "-m", "1")).stdout
    assert shallow.splitlines()[2:] == [
        f"└── demo.wf<{scf2.pk}> scf 2  ⨯ Finished [410]  · exit 410",
        "    └── … 2 more (--max-depth 1)",
    ]
    alone = ok(run_cli("-p", "test", "process", "status", str(failed.pk))).stdout
    assert alone == f"core.shell<{failed.pk}> relax_ge  ⨯ Finished [410]  · exit 410\n"
    data = orm.Int(1).store()
    wrong = run_cli("-p", "test", "process", "status", str(data.pk))
    assert wrong.exit_code == 4 and "not a process" in wrong.stderr


# -- dump ------------------------------------------------------------------------------------------
def test_process_dump_writes_a_workflow_and_its_jobs_to_rerun_by_hand(
    run_cli, any_profile, workflows, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    _, flow = engine.run_get_node(
        workflows.CountedShell,
        command=orm.Str("echo hi"),
        times=orm.Int(2),
        metadata={"label": "counted"},
    )
    first, second = flow.called
    dumped = ok(run_cli("-p", "test", "process", "dump", str(flow.pk))).stdout
    folder = tmp_path / f"dump-CountedShell-{flow.pk}"
    assert f"Wrote process {flow.pk}, with 2 called processes to {folder.name}" in dumped
    readme = (folder / "README.md").read_text()
    assert readme.startswith(f"# Process CountedShell {flow.pk} (counted)\n")
    assert f"- `01-core.shell-{first.pk}/`: core.shell {first.pk}, finished [0]" in readme
    meta = json.loads((folder / "veglia_process.json").read_text())
    assert meta["pk"] == flow.pk and meta["exit_status"] == 0
    assert meta["inputs"]["times"] == {
        "pk": flow.inputs["times"].pk,
        "uuid": flow.inputs["times"].uuid,
        "type": "Int",
        "value": 2,
        "path": "inputs/times.json",
    }
    assert json.loads((folder / "inputs" / "command.json").read_text()) == "echo hi"
    assert (folder / "outputs" / "last" / "stdout").read_text() == "hi\nrun 2\n"
    assert [c["folder"] for c in meta["called"]] == [
        f"01-core.shell-{first.pk}",
        f"02-core.shell-{second.pk}",
    ]
    step = folder / f"02-core.shell-{second.pk}"
    assert "echo hi; echo run 2" in (step / "job" / "_veglia_submit.sh").read_text()
    assert (step / "retrieved" / "stdout").read_text() == "hi\nrun 2\n"
    assert (step / "outputs" / "stdout" / "stdout").read_text() == "hi\nrun 2\n"
    step_meta = json.loads((step / "veglia_process.json").read_text())
    assert step_meta["job_id"] == second.job_id and step_meta["computer"] == "localhost"
    assert "retrieved/stdout" in step_meta["retrieved"] and "retrieved" not in step_meta["outputs"]
    assert "## Run it again by hand" in (step / "README.md").read_text()

    # A calc job with an input file: run again by hand from the dump, as its README says.
    _, job = engine.run_get_node(
        CalculationFactory("core.shell"),
        command=orm.Str("wc -w < data; echo 7 > out.txt"),
        files={"data": orm.SinglefileData(b"1 2 3\n", "in.txt")},
        outputs=orm.List(["out.txt"]),
    )
    target = tmp_path / "job"
    ok(run_cli("-p", "test", "process", "dump", str(job.pk), "-o", str(target)))
    assert (target / "inputs" / "files__data" / "in.txt").read_bytes() == b"1 2 3\n"
    assert (target / "outputs" / "files__out_txt" / "out.txt").read_text() == "7\n"
    rerun = tmp_path / "rerun"
    rerun.mkdir()
    for path in (target / "job").iterdir():
        (rerun / path.name).write_bytes(path.read_bytes())
    (rerun / "data").write_bytes((target / "inputs" / "files__data" / "in.txt").read_bytes())
    subprocess.run(["bash", "_veglia_submit.sh"], cwd=rerun, check=True, timeout=60)
    assert (rerun / "stdout").read_text() == (target / "retrieved" / "stdout").read_text() == "3\n"

    # A non-empty folder is kept, unless --overwrite and it holds an earlier dump.
    (target / "mine.txt").write_text("notes")
    again = run_cli("-p", "test", "process", "dump", str(job.pk), "-o", str(target))
    assert again.exit_code == 3 and f"The folder {target} is not empty" in again.stderr
    assert "--overwrite" in again.stderr and (target / "mine.txt").exists()
    ok(run_cli("-p", "test", "process", "dump", str(job.pk), "-o", str(target), "--overwrite"))
    assert not (target / "mine.txt").exists() and (target / "README.md").exists()
    refused = run_cli("-p", "test", "process", "dump", str(job.pk), "-o", str(rerun), "--overwrite")
    assert refused.exit_code == 3 and "holds no earlier dump" in refused.stderr
    assert (rerun / "data").exists()


# -- plugin show -----------------------------------------------------------------------------------
def _table_row(text: str, first: str) -> list[str]:
    """The cells of the table row starting with ``first`` (two or more spaces apart)."""
    line = next(line for line in text.splitlines() if line.startswith(f"{first} "))
    return re.split(r"\s{2,}", line.strip())


def test_plugin_show_lists_inputs_outputs_and_exit_codes_of_a_calculation(run_cli):
    shown = ok(run_cli("plugin", "show", "calculations", "core.shell")).stdout
    assert shown.startswith("core.shell  (veglia.calculations)\n")
    assert "Run a shell command line" in shown and "signature:" not in shown
    assert _table_row(shown, "Inputs") == ["Inputs", "Type", "Required", "Help"]
    assert _table_row(shown, "command") == [
        "command", "Str", "no", "A bash command line (when there is no code)."
    ]  # fmt: skip
    assert _table_row(shown, "files") == [
        "files",
        "namespace of SinglefileData | FolderData, any names",
        "no",
        "Files copied into the work dir.",
    ]
    assert _table_row(shown, "metadata.options.max_wallclock_seconds") == [
        "metadata.options.max_wallclock_seconds", "int", "no", "Wall time the job may run."
    ]  # fmt: skip
    assert _table_row(shown, "stdout") == ["stdout", "SinglefileData", "no"]
    assert _table_row(shown, "400") == [
        "400", "ERROR_NONZERO_EXIT_STATUS", "The command exited with status {status}."
    ]  # fmt: skip
    assert _table_row(shown, "100")[1] == "ERROR_NO_RETRIEVED_FILES"  # the CalcJob's own

    added = ok(run_cli("plugin", "show", "calculations", "core.arithmetic.add")).stdout
    inputs = [line.split()[0] for line in added.split("Inputs")[1].splitlines()[1:6]]
    assert inputs[:2] == ["x", "y"]  # required first
    assert _table_row(added, "x") == ["x", "Int | Float", "yes"]
    assert _table_row(added, "sum") == ["sum", "Int | Float", "yes"]

    restart = ok(run_cli("plugin", "show", "workflows", "core.restart")).stdout
    assert _table_row(restart, "job") == [
        "job", "namespace, any names", "yes", "The inputs of the calc job."
    ]  # fmt: skip
    assert "Outputs: none" in restart and _table_row(restart, "401")[1] == "ERROR_MAX_ATTEMPTS"
    scheduler = ok(run_cli("plugin", "show", "schedulers", "core.direct")).stdout
    assert "signature: core.direct" in scheduler and "Inputs" not in scheduler


# -- shell completion ------------------------------------------------------------------------------
def _offered(*words: str) -> list[tuple[str, str | None]]:
    """What <TAB> offers after ``veglia WORDS...`` (the last word being typed), as click's
    shell completion asks the CLI."""
    *args, incomplete = words
    complete = ShellComplete(cli, {}, "veglia", "_VEGLIA_COMPLETE")
    return [(item.value, item.help) for item in complete.get_completions(args, incomplete)]


def test_completion_offers_recent_process_pks_nodes_computers_codes_and_plugins(made):
    workflow, scf1, scf2, inner, failed, paused = made
    processes = [paused, failed, inner, scf2, scf1, workflow]  # newest first
    data = orm.Int(5).store()
    offered = _offered("process", "show", "")
    assert [value for value, _ in offered] == [str(p.pk) for p in processes]
    assert dict(offered)[str(paused.pk)] == "core.shell 'Bands' waiting"
    assert dict(offered)[str(failed.pk)] == "core.shell 'relax_ge' finished [410]"
    assert dict(offered)[str(workflow.pk)] == "demo.wf 'relax_si' finished [0]"
    # The digits typed so far: every PK starting with them, however old.
    typed = str(scf1.pk)
    assert [v for v, _ in _offered("process", "show", typed)] == [typed]
    assert _offered("process", "show", "x") == [] and _offered("process", "show", "999") == []
    for command in (("process", "status"), ("process", "dump"), ("process", "kill")):
        assert [v for v, _ in _offered(*command, "")] == [str(p.pk) for p in processes]
    assert _offered("process", "report", str(workflow.pk), "")[0][0] == str(paused.pk)
    calcjobs = [v for v, _ in _offered("calcjob", "res", "")]
    assert calcjobs == [str(p.pk) for p in (paused, failed, inner, scf1)]  # no workflow
    assert _offered("node", "show", "")[0] == (str(data.pk), "data.int")
    assert _offered("-p", "test", "process", "watch", "")[0][0] == str(paused.pk)
    assert _offered("-p", "nope", "process", "show", "") == []  # no such profile: nothing

    orm.Code(label="echo", computer=orm.load_computer("localhost"), executable="/bin/echo").store()
    assert _offered("computer", "show", "") == [("localhost", "localhost")]
    assert _offered("computer", "test", "x") == []
    assert _offered("code", "show", "") == [("echo@localhost", "/bin/echo")]
    assert _offered("code", "create", "--computer", "lo") == [("localhost", "localhost")]
    assert [v for v, _ in _offered("plugin", "show", "calculations", "")] == [
        "core.arithmetic.add",
        "core.shell",
    ]
    assert _offered("plugin", "show", "workflows", "core.r")[0][0] == "core.restart"
    assert [v for v, _ in _offered("monitor", "show", "core.w")] == ["core.walltime_guard"]
    assert queries.recent_nodes("", node_type="process", limit=2) == [
        (paused.pk, "process.calcjob", "Bands", "core.shell", "waiting", None),
        (failed.pk, "process.calcjob", "relax_ge", "core.shell", "finished", 410),
    ]


def test_completion_through_the_shell_protocol(run_cli, made):
    script = ok(run_cli("-p", "test", env={"_VEGLIA_COMPLETE": "bash_source"})).stdout
    assert "complete -o nosort -F _veglia_completion veglia" in script
    workflow = made[0]
    typed = {"COMP_WORDS": f"veglia process show {workflow.pk}", "COMP_CWORD": "3"}
    offered = run_cli(env={**typed, "_VEGLIA_COMPLETE": "bash_complete"})
    assert ok(offered).stdout.splitlines()[0] == f"plain,{workflow.pk}"
