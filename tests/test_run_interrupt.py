"""Ctrl-C during a foreground run (`veglia shell`, `engine.run`): the process is killed as
`veglia process kill` kills it, its scheduler job cancelled, and the command exits 130. It
used to print "Nothing done." (exit 1) and leave the process waiting with no worker, and its
job running."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from veglia.orm.loading import load_node
from veglia.orm.process_nodes import CalcJobNode
from veglia.orm.queries import node_pks
from veglia_fixtures.profiles import VEGLIA, job_group_left


def test_ctrl_c_kills_the_foreground_job_cancels_it_and_exits_130(profile, veglia_home, tmp_path):
    started = tmp_path / "started"
    shell = subprocess.Popen(
        [VEGLIA, "shell", f"touch {started}; sleep 120; echo done"],
        env={**os.environ, "VEGLIA_HOME": str(veglia_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As a terminal's Ctrl-C reaches it: pytest's runner may ignore SIGINT in children.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert shell.poll() is None, shell.communicate()
        assert time.monotonic() < deadline, "the job did not start in 60 s"
        time.sleep(0.1)
    shell.send_signal(signal.SIGINT)
    _, stderr = shell.communicate(timeout=60)

    assert shell.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "Error: Interrupted.", stderr
    assert "Traceback" not in stderr and "Nothing done" not in stderr
    (node,) = [n for n in map(load_node, node_pks()) if isinstance(n, CalcJobNode)]
    assert node.process_state == "killed"
    assert "interrupted (Ctrl-C)" in (node.exit_message or "")
    assert any("cancelled job" in log.message for log in node.logs), node.logs
    assert job_group_left(str(node.job_id)) == [], "the killed job still runs"
