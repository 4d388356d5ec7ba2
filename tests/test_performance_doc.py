"""docs/performance.md speaks to users: per bench, its command, its machine and one table.

Each ``## `` section of the page is one bench and holds a ```bash block that runs something
under ``bench/``, exactly one line starting ``Machine: `` (CPU model, cores, memory, date)
and exactly one table. The page is not a history of development: it names no issues,
development machines, earlier runs or commits.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
MACHINE = "Machine: "
#: A table's header separator: ``| --- | --- |`` (alignment colons allowed).
SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
#: Development history that does not belong on the page.
HISTORY = (
    "issue #",
    "development machine",
    "earlier machine",
    "the day before",
    "before the change",
    "commit ",
)


def sections() -> dict[str, list[str]]:
    """The page's ``## `` sections: heading, then the lines up to the next one."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in PAGE.read_text().splitlines():
        if line.startswith("## "):
            current = found.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return found


def bash_blocks(lines: list[str]) -> list[str]:
    """The sources of the ```bash blocks among the lines."""
    blocks: list[str] = []
    body: list[str] | None = None
    language = ""
    for line in lines:
        fence = FENCE.match(line.strip())
        if body is None and fence:
            body, language = [], fence[1]
        elif body is not None and line.strip() == "```":
            if language == "bash":
                blocks.append("\n".join(body))
            body = None
        elif body is not None:
            body.append(line)
    return blocks


SECTIONS = sections()


def test_the_page_has_sections() -> None:
    assert len(SECTIONS) >= 10, sorted(SECTIONS)


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_a_section_runs_a_bench(heading: str) -> None:
    blocks = bash_blocks(SECTIONS[heading])
    assert any(re.search(r"(^|\s)bench/\S+", block) for block in blocks), (
        f"## {heading}: no ```bash block running something under bench/"
    )


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_a_section_names_one_machine(heading: str) -> None:
    machines = [line for line in SECTIONS[heading] if line.startswith(MACHINE)]
    assert len(machines) == 1, f"## {heading}: {len(machines)} lines start with {MACHINE!r}"
    # CPUs, memory (or that it was not recorded) and a date
    line = machines[0]
    assert re.search(r"\d+ CPUs \([^)]+\)", line), line
    assert "GiB" in line or "memory not recorded" in line, line
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", line), line


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_a_section_has_one_table(heading: str) -> None:
    tables = [line for line in SECTIONS[heading] if SEPARATOR.match(line.strip())]
    assert len(tables) == 1, f"## {heading}: {len(tables)} tables"


@pytest.mark.parametrize("words", HISTORY)
def test_the_page_holds_no_history(words: str) -> None:
    text = " ".join(PAGE.read_text().split()).lower()  # words wrapped over lines too
    where = [match.start() for match in re.finditer(re.escape(words), text)]
    assert not where, [text[max(0, at - 60) : at + 60] for at in where]
