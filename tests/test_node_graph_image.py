"""`veglia node graph -o x.png / x.svg` draws the provenance with Graphviz's dot; `.dot` or no
-o keeps the dot text; without dot the error says what to do."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import pytest

from veglia_fixtures.services import service_missing


def ok(result):
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def graph(profile):
    """A finished calc job with an input and an output, made by hand."""
    from veglia import orm

    number = orm.Int(7).store()
    job = orm.CalcJobNode(process_type="core.arithmetic.add", label="drawn")
    job.process_state = "finished"
    job.store([(number, "input", "x")])
    job.set_exit(0, None)
    total = orm.Int(8).store([(job, "create", "sum")])
    return number, job, total


@pytest.fixture
def dot():
    if shutil.which("dot") is None:
        service_missing("Graphviz's dot is not installed")


def test_png_and_svg_are_drawn(run_cli, graph, dot, tmp_path):
    number, job, total = graph
    png = tmp_path / "graph.png"
    result = ok(run_cli("node", "graph", str(job.pk), "-o", str(png)))
    assert result.stdout.strip() == f"✔ Wrote {png}."
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and png.stat().st_size > 1000

    svg = tmp_path / "graph.SVG"
    ok(run_cli("node", "graph", str(job.pk), "--output", str(svg)))
    root = ET.fromstring(svg.read_bytes())
    assert root.tag.endswith("svg")
    texts = " ".join(element.text or "" for element in root.iter() if element.tag.endswith("text"))
    assert f"core.arithmetic.add ({job.pk})" in texts and "drawn" in texts
    assert f"Int ({number.pk})" in texts and f"Int ({total.pk})" in texts
    assert "sum" in texts and "create" in texts

    pdf = tmp_path / "graph.pdf"
    ok(run_cli("node", "graph", str(job.pk), "-o", str(pdf)))
    assert pdf.read_bytes().startswith(b"%PDF")


def test_dot_text_stays_as_it_was(run_cli, graph, tmp_path):
    _, job, _ = graph
    printed = ok(run_cli("node", "graph", str(job.pk))).stdout
    assert printed.startswith(f"digraph provenance_{job.pk} {{")
    target = tmp_path / "graph.dot"
    written = ok(run_cli("node", "graph", str(job.pk), "-o", str(target)))
    assert target.read_text() == printed
    assert f"render it with `dot -Tpdf {target} -o graph.pdf`" in written.stdout
    other = tmp_path / "graph.txt"  # any other name gets the text, as before
    ok(run_cli("node", "graph", str(job.pk), "-o", str(other)))
    assert other.read_text() == printed


def test_without_dot_the_error_says_what_to_do(run_cli, graph, tmp_path):
    _, job, _ = graph
    empty = tmp_path / "no-programs"
    empty.mkdir()
    target = tmp_path / "graph.png"
    result = run_cli("node", "graph", str(job.pk), "-o", str(target), env={"PATH": str(empty)})
    assert result.exit_code == 3, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1
    assert message.startswith("Error: Graphviz's `dot` is not installed here")
    assert "apt-get install graphviz" in message and f"-o {tmp_path / 'graph.dot'}" in message
    assert not target.exists()
