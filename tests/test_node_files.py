"""A node's files (`veglia node repo ls / cat`), a calc job's input files (`veglia calcjob
inputls / inputcat`, files given with `veglia shell -f` too), and cleaning a calc job's work
dir (`veglia calcjob cleanworkdir`), as a user sees them."""

from __future__ import annotations

import re
from pathlib import Path


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def one_line_error(result, code: int) -> str:
    assert result.exit_code == code, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and message.startswith("Error: "), message
    return message


def run_shell(run_cli, *args: str):
    """`veglia shell ...` in the foreground; the finished job's node."""
    from veglia.orm import load_node

    result = ok(run_cli("shell", *args))
    pk = re.search(r"Process (\d+) finished", result.stdout).group(1)
    return load_node(int(pk))


def test_node_repo_ls_and_cat(run_cli, profile):
    from veglia import orm

    folder = orm.FolderData()
    folder.put_objects({"a.txt": b"alpha\n", "sub/b.txt": b"bee", "sub/deeper/c.bin": b"\x00\xff"})
    folder.store()
    pk = str(folder.pk)
    assert ok(run_cli("node", "repo", "ls", pk)).stdout.split() == ["a.txt", "sub/"]
    assert ok(run_cli("node", "repo", "ls", pk, "sub")).stdout.split() == ["b.txt", "deeper/"]
    assert ok(run_cli("node", "repo", "ls", pk, "sub/")).stdout.split() == ["b.txt", "deeper/"]
    long = ok(run_cli("node", "repo", "ls", "-l", pk)).stdout.splitlines()
    assert [line.split() for line in long] == [["6", "a.txt"], ["5", "sub/"]]
    assert ok(run_cli("node", "repo", "ls", pk, "sub/b.txt")).stdout == "b.txt\n"
    assert ok(run_cli("node", "repo", "cat", pk, "a.txt")).stdout == "alpha\n"
    assert ok(run_cli("node", "repo", "cat", pk, "sub/b.txt")).stdout == "bee"

    message = one_line_error(run_cli("node", "repo", "cat", pk, "nope.txt"), 4)
    assert f"Node {pk} has no file 'nope.txt' (files: a.txt, sub/b.txt" in message
    message = one_line_error(run_cli("node", "repo", "cat", pk, "sub"), 4)
    assert "'sub' is a folder in Node" in message
    message = one_line_error(run_cli("node", "repo", "ls", pk, "elsewhere"), 4)
    assert "has no file or folder 'elsewhere'" in message

    number = orm.Int(3).store()
    empty = ok(run_cli("node", "repo", "ls", str(number.pk)))
    assert empty.stdout == "" and f"Node {number.pk} (Int) has no files." in empty.stderr
    single = orm.SinglefileData(b"one file", "note.txt").store()
    assert ok(run_cli("node", "repo", "cat", str(single.pk), "note.txt")).stdout == "one file"


def test_calcjob_inputls_lists_files_given_with_shell_f(run_cli, profile, tmp_path):
    from veglia import orm

    given = tmp_path / "input.txt"
    given.write_text("from the user\n")
    job = run_shell(run_cli, "cat input.txt > copy.txt", "-f", str(given), "-o", "copy.txt")
    assert job.is_finished_ok
    pk = str(job.pk)
    assert ok(run_cli("calcjob", "inputls", pk)).stdout.split() == [
        "_veglia_submit.sh",
        "_veglia_trace.sh",  # the trace sampler the script sources (core.trace)
        "input.txt",
    ]
    (source,) = [node for _, node in job.inputs.items() if isinstance(node, orm.SinglefileData)]
    long = ok(run_cli("calcjob", "inputls", "-l", pk)).stdout
    assert re.search(rf"^\s+14  input.txt  \(from node {source.pk}: input.txt\)$", long, re.M)
    assert ok(run_cli("calcjob", "inputcat", pk, "input.txt")).stdout == "from the user\n"
    assert ok(run_cli("calcjob", "inputcat", pk)).stdout.startswith("#!/bin/bash")
    message = one_line_error(run_cli("calcjob", "inputcat", pk, "other.txt"), 4)
    assert "files: _veglia_submit.sh, _veglia_trace.sh, input.txt" in message
    # The job's own repository holds only what the job itself wrote.
    assert ok(run_cli("node", "repo", "ls", pk)).stdout.split() == [
        "_veglia_submit.sh",
        "_veglia_trace.sh",
    ]
    retrieved = str(job.outputs.retrieved.pk)
    assert ok(run_cli("node", "repo", "cat", retrieved, "copy.txt")).stdout == "from the user\n"


def test_cleanworkdir_removes_the_work_dir_and_says_so_after(run_cli, profile):
    from veglia import orm

    job = run_shell(run_cli, "echo kept > result.txt", "-o", "result.txt")
    workdir = Path(job.remote_workdir)
    assert (workdir / "result.txt").exists()
    pk = str(job.pk)

    refused = run_cli("calcjob", "cleanworkdir", pk, input="n\n")
    assert refused.exit_code == 1 and "Nothing done." in refused.stdout
    assert "Error" not in refused.stderr and "Aborted" not in refused.output
    assert re.search(rf"{pk}\s+localhost\s+{workdir}", refused.stdout)
    assert "Remove this work dir and everything in it?" in refused.stdout
    assert workdir.exists()

    cleaned = ok(run_cli("calcjob", "cleanworkdir", pk, input="y\n"))
    assert "Removed 1 work dir; the retrieved files stay" in cleaned.stdout
    assert not workdir.exists() and workdir.parent.exists()
    job = orm.load_node(job.pk)
    assert job.get_attribute("workdir_cleaned")["time"] > 0
    assert job.outputs.remote_folder.extras == {"cleaned": True}

    listed = ok(run_cli("calcjob", "outputls", pk))
    assert "result.txt" in listed.stdout.split()
    assert f"The work dir of calc job {pk} (localhost:{workdir}) was cleaned on" in listed.stderr
    message = one_line_error(run_cli("calcjob", "gotocomputer", pk), 4)
    assert "was cleaned on" in message and f"veglia calcjob outputls {pk}" in message
    assert ok(run_cli("calcjob", "outputcat", pk, "result.txt")).stdout == "kept\n"

    again = ok(run_cli("calcjob", "cleanworkdir", pk, "--force"))
    assert f"Skipping calc job {pk}: its work dir was cleaned already." in again.stdout
    assert "Nothing to clean." in again.stdout


def test_cleanworkdir_refuses_active_jobs_and_other_folders(run_cli, profile, tmp_path):
    from veglia import orm

    done = run_shell(run_cli, "true")
    running = orm.CalcJobNode(process_type="core.shell")
    running.process_state = "waiting"
    running.store()
    message = one_line_error(run_cli("calcjob", "cleanworkdir", str(done.pk), str(running.pk)), 1)
    assert f"Calc job {running.pk} (waiting) has not ended" in message
    assert "Nothing was removed" in message and Path(done.remote_workdir).exists()

    elsewhere = tmp_path / "precious"
    elsewhere.mkdir()
    odd = orm.CalcJobNode(process_type="core.shell")
    odd.process_state = "finished"
    odd.store()
    odd.set_attributes({"remote_workdir": str(elsewhere), "computer": "localhost"})
    message = one_line_error(run_cli("calcjob", "cleanworkdir", "-f", str(odd.pk)), 1)
    assert "not a folder veglia made for it; refusing to remove it" in message
    assert elsewhere.exists()

    data = orm.Int(1).store()
    message = one_line_error(run_cli("calcjob", "cleanworkdir", str(data.pk)), 4)
    assert "not a calc job" in message
