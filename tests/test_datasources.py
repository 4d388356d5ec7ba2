"""Data sources (veglia.datasources): core.folder and core.fofn on a folder of this machine
through core.local and over the real sshd, core.group on SQLite and PostgreSQL, and a
third-party source installed by pip."""

from __future__ import annotations

import hashlib
import importlib
import json
import posixpath
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from veglia import DataSourceFactory
from veglia.datasources import DataSource, Listing
from veglia.exceptions import DataSourceError
from veglia.plugins.transports.local import LocalTransport
from veglia_fixtures.profiles import make_profile

EXAMPLE = Path(__file__).parent / "plugin_packages" / "veglia-example-datasource"
#: An mtime this many seconds old counts as settled for every test source (settled = 60).
OLD = 600


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Place:
    """A fresh folder on a computer, written through its transport (so over SSH the files
    are the remote user's), and the payloads of the python3 commands the sources ran."""

    def __init__(self, transport, folder: str) -> None:
        self.transport, self.folder = transport, folder
        self.asked: list[dict] = []
        real = transport.exec_command

        def recording(command: str, **kwargs):
            if command.startswith("python3 -c") and kwargs.get("stdin"):
                self.asked.append(json.loads(kwargs["stdin"]))
            return real(command, **kwargs)

        transport.exec_command = recording

    def path(self, relative: str) -> str:
        return posixpath.join(self.folder, relative)

    def write(self, relative: str, content: bytes, age: float = OLD) -> str:
        path = self.path(relative)
        self.transport.makedirs(posixpath.dirname(path))
        self.transport.write_bytes(path, content)
        self.age(relative, age)
        return path

    def age(self, relative: str, age: float) -> None:
        """Set the file's mtime ``age`` seconds back (by the computer's clock)."""
        stamp = f"{time.time() - age:.6f}"
        code, _, err = self.transport.exec_command(
            f"touch -m -d @{stamp} {self.path(relative)}", timeout=30
        )
        assert code == 0, err

    def ops(self) -> list[str]:
        """The operations asked since the last call."""
        ops, self.asked = [payload["op"] for payload in self.asked], []
        return ops


@pytest.fixture(params=["core.local", "core.ssh"])
def place(request, tmp_path):
    if request.param == "core.local":
        with LocalTransport() as local:
            yield Place(local, str(tmp_path / "data"))
        return
    ssh = request.getfixturevalue("ssh_transport")
    home = request.getfixturevalue("services_env")["SSH_USER_HOME"]
    folder = posixpath.join(home, f"veglia-test-{uuid.uuid4().hex[:8]}")
    yield Place(ssh, folder)
    ssh.rmtree(folder)


def folder_source(place: Place, **settings) -> DataSource:
    return DataSourceFactory("core.folder")({"path": place.folder, **settings})


# -- core.folder ------------------------------------------------------------------------------
def test_new_files_appear_as_elements(place):
    place.write("a.txt", b"alpha")
    place.write("sub/b.txt", b"beta")
    place.write("notes.md", b"not data")
    source = folder_source(place, glob="**/*.txt")
    listing = source.elements(place.transport)
    assert listing.identities == ["a.txt", "sub/b.txt"]
    assert listing["a.txt"].files == (place.path("a.txt"),)
    assert listing["a.txt"].checksum == sha256(b"alpha")  # what sha256sum prints
    assert listing["sub/b.txt"].checksum == sha256(b"beta")
    assert listing.problems == listing.waiting == ()

    place.write("c.txt", b"gamma")
    again = source.elements(place.transport, known=listing.known)
    assert again.identities == ["a.txt", "c.txt", "sub/b.txt"]
    assert again.hashed == (place.path("c.txt"),)


def test_a_file_younger_than_settled_is_not_taken(place):
    place.write("old.txt", b"done")
    place.write("young.txt", b"still being written", age=5)
    source = folder_source(place, settled=60)
    listing = source.elements(place.transport)
    assert listing.identities == ["old.txt"]
    assert listing.waiting == ("young.txt",)
    assert place.path("young.txt") not in listing.hashed  # not read while written

    place.age("young.txt", 61)
    assert source.elements(place.transport, listing.known).identities == ["old.txt", "young.txt"]
    assert folder_source(place, settled=0).elements(place.transport).waiting == ()


def test_touching_keeps_the_checksum_and_new_content_changes_it(place):
    place.write("a.txt", b"alpha")
    source = folder_source(place)
    first = source.elements(place.transport)

    place.age("a.txt", OLD / 2)  # touched: mtime changes, content does not
    touched = source.elements(place.transport, known=first.known)
    assert touched.hashed == (place.path("a.txt"),)  # read again, since its mtime moved
    assert touched["a.txt"].checksum == first["a.txt"].checksum

    place.write("a.txt", b"alpha, corrected")
    changed = source.elements(place.transport, known=touched.known)
    assert changed["a.txt"].checksum == sha256(b"alpha, corrected") != first["a.txt"].checksum


def test_known_spares_reading_the_files_again(place):
    for number in range(20):
        place.write(f"f{number:02}.txt", str(number).encode())
    source = folder_source(place)
    first = source.elements(place.transport)
    assert place.ops() == ["list", "hash"]  # one command lists, one hashes all 20
    assert len(first.hashed) == 20

    second = source.elements(place.transport, known=first.known)
    assert place.ops() == ["list"]  # nothing changed: nothing hashed, no hash command
    assert second.hashed == ()
    assert second.elements == first.elements
    # As a caller keeps it between polls: JSON.
    third = source.elements(place.transport, known=json.loads(json.dumps(second.known)))
    assert place.ops() == ["list"] and third.elements == first.elements

    place.write("f07.txt", b"seven")
    fourth = source.elements(place.transport, known=third.known)
    assert place.ops() == ["list", "hash"]
    assert [payload_path for payload_path in fourth.hashed] == [place.path("f07.txt")]


def test_group_by_pairs_files_into_one_element(place):
    for sample in ("s1", "s2"):
        for read in ("R1", "R2"):
            place.write(f"{sample}_{read}.fastq.gz", f"{sample} {read}".encode())
    place.write("s3_R1.fastq.gz", b"s3 R1")
    place.write("s3_R2.fastq.gz", b"s3 R2 still coming", age=1)
    place.write("README.fastq.gz", b"not a sample")
    source = folder_source(
        place, glob="*.fastq.gz", group_by=r"(?P<name>.+)_(?P<read>R[12])\.fastq\.gz"
    )
    listing = source.elements(place.transport)
    assert listing.identities == ["s1", "s2"]
    s1 = listing["s1"]
    assert s1.files == (place.path("s1_R1.fastq.gz"), place.path("s1_R2.fastq.gz"))
    digests = [sha256(b"s1 R1"), sha256(b"s1 R2")]
    assert s1.checksum == sha256("".join(f"{d}\n" for d in digests).encode())
    assert s1.metadata == {"name": "s1"}  # `read` differs between the pair's files
    assert listing.waiting == ("s3",)  # one of its files is young: the pair waits
    assert listing.problems == ("README.fastq.gz: group_by does not match its path; left out",)

    place.age("s3_R2.fastq.gz", OLD)
    again = source.elements(place.transport, known=listing.known)
    assert again.identities == ["s1", "s2", "s3"]
    # Not read while its pair was incomplete: both files are read now, the others not.
    assert again.hashed == (place.path("s3_R1.fastq.gz"), place.path("s3_R2.fastq.gz"))

    place.write("s1_R2.fastq.gz", b"s1 R2, sent again", age=1)  # a pair already taken
    rewriting = source.elements(place.transport, known=again.known)
    assert rewriting.identities == ["s2", "s3"] and rewriting.waiting == ("s1",)
    place.age("s1_R2.fastq.gz", OLD)
    rewritten = source.elements(place.transport, known=rewriting.known)
    assert rewritten.hashed == (place.path("s1_R2.fastq.gz"),)  # s1_R1 kept its sha256
    assert rewritten["s1"].checksum != s1.checksum


def test_a_missing_folder_says_what_to_do(place):
    source = folder_source(place)
    with pytest.raises(DataSourceError, match=r"core\.folder: no folder .* create it, or set path"):
        source.elements(place.transport)


def test_a_listing_past_its_timeout_says_so_in_one_short_line(place, monkeypatch):
    from veglia.exceptions import TransportTimeoutError
    from veglia.plugins.datasources import remote

    place.write("a.txt", b"alpha")
    monkeypatch.setattr(remote, "BASE_TIMEOUT", 0.0)
    with pytest.raises(TransportTimeoutError) as raised:
        folder_source(place).elements(place.transport)
    # The transport quotes the command's first line, a comment naming the program.
    assert str(raised.value) == (
        "`python3 -c '# veglia: list, stat, read or hash files for a data source...` on "
        f"{place.transport.hostname} ran past its timeout of 0.0 s."
    )


# -- core.fofn --------------------------------------------------------------------------------
def test_fofn_lists_its_files_and_says_which_are_missing(place):
    place.write("reads/a.fq", b"A")
    absolute = place.write("elsewhere/b.fq", b"B")
    place.write(
        "inputs/list.fofn",
        f"# the first run\n../reads/a.fq\n\n{absolute}\n../reads/gone.fq\n".encode(),
    )
    source = DataSourceFactory("core.fofn")({"path": place.path("inputs/list.fofn")})
    listing = source.elements(place.transport)
    assert listing.identities == ["../reads/a.fq", absolute]  # as the fofn writes them
    assert listing["../reads/a.fq"].files == (place.path("reads/a.fq"),)
    assert listing["../reads/a.fq"].checksum == sha256(b"A")
    assert listing.problems == (
        f"../reads/gone.fq: {place.path('reads/gone.fq')} is missing; left out",
    )
    assert place.ops() == ["read", "stat", "hash"]
    again = source.elements(place.transport, known=listing.known)
    assert place.ops() == ["read", "stat"] and again.elements == listing.elements


def test_fofn_csv_groups_rows_and_keeps_columns_as_metadata(place):
    for name in ("s1_R1", "s1_R2", "s2_R1"):
        place.write(f"fastq/{name}.fq", name.encode())
    place.write(
        "samples.csv",
        b"sample,file,read,study\n"
        b"s1,fastq/s1_R1.fq,R1,ERP001\n"
        b"s1,fastq/s1_R2.fq,R2,ERP001\n"
        b"s2,fastq/s2_R1.fq,R1,ERP002\n"
        b"s2,fastq/s2_R2.fq,R2,ERP002\n",
    )
    source = DataSourceFactory("core.fofn")(
        {
            "path": place.path("samples.csv"),
            "format": "csv",
            "path_column": "file",
            "group_column": "sample",
        }
    )
    listing = source.elements(place.transport)
    assert listing.identities == ["s1"]
    assert listing["s1"].files == (place.path("fastq/s1_R1.fq"), place.path("fastq/s1_R2.fq"))
    assert listing["s1"].metadata == {"sample": "s1", "study": "ERP001"}
    assert listing.problems == (f"s2: {place.path('fastq/s2_R2.fq')} is missing; left out",)

    place.write("fastq/s2_R2.fq", b"s2_R2")
    assert source.elements(place.transport, listing.known).identities == ["s1", "s2"]

    ungrouped = DataSourceFactory("core.fofn")(
        {"path": place.path("samples.csv"), "format": "csv", "path_column": "file"}
    ).elements(place.transport)
    assert ungrouped["fastq/s2_R1.fq"].metadata == {"sample": "s2", "read": "R1", "study": "ERP002"}


def test_fofn_csv_without_its_path_column_says_which_columns_there_are(place):
    place.write("samples.tsv", b"sample\tfastq\ns1\ta.fq\n")
    source = DataSourceFactory("core.fofn")({"path": place.path("samples.tsv"), "format": "tsv"})
    with pytest.raises(
        DataSourceError, match=r"has no column 'path' \(its header: sample, fastq\); set path_col"
    ):
        source.elements(place.transport)


# -- core.group -------------------------------------------------------------------------------
@pytest.fixture
def db_profile(veglia_home, storage_url):
    """The `test` profile on SQLite, then on a fresh PostgreSQL database."""
    from veglia.engine.runner import set_runner

    yield make_profile(**{"storage.url": storage_url})
    set_runner(None)


def test_group_source_lists_the_nodes_of_a_group(db_profile):
    from veglia import orm
    from veglia.engine.calcjob.caching import node_hash

    group = orm.Group("raw-reads").store()
    reads = orm.SinglefileData(b"ACGT", "s1.fq", label="s1").store()
    number = orm.Int(7).store()
    group.add_nodes([reads, number])
    source = DataSourceFactory("core.group")({"group": "raw-reads"})
    listing = source.elements(None)  # needs no computer
    assert sorted(listing.identities) == sorted([reads.uuid, number.uuid])
    assert listing[reads.uuid].files == (reads.uuid,)
    assert listing[reads.uuid].checksum == node_hash(reads)
    assert listing[reads.uuid].metadata == {
        "pk": str(reads.pk),
        "type": "data.singlefile",
        "label": "s1",
    }
    assert listing[number.uuid].checksum == node_hash(number)
    same_content = orm.SinglefileData(b"ACGT", "s1.fq", label="s1").store()
    other_content = orm.SinglefileData(b"TTTT", "s1.fq", label="s1").store()
    group.add_nodes([same_content, other_content])
    listing = source.elements(None)
    assert len(listing.elements) == 4
    assert listing[same_content.uuid].checksum == listing[reads.uuid].checksum
    assert listing[other_content.uuid].checksum != listing[reads.uuid].checksum

    with pytest.raises(
        DataSourceError, match=r"core\.group: No group 'nope' .* Create one with `veglia group"
    ):
        DataSourceFactory("core.group")({"group": "nope"}).elements(None)


# -- settings ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        ("core.folder", {}, r"setting 'path' is missing \(the folder on the computer"),
        ("core.folder", {"path": "data"}, r"path = 'data' will not do: give an absolute path"),
        ("core.folder", {"path": "/d", "glob": "../*"}, r"give a pattern relative to the folder"),
        ("core.folder", {"path": "/d", "settled": "soon"}, r"settled = 'soon' will not do: give a"),
        ("core.folder", {"path": "/d", "settled": -1}, r"give a number of seconds, 0 or more"),
        ("core.folder", {"path": "/d", "group_by": "(x"}, r"group_by = '\(x' .* no regular exp"),
        ("core.folder", {"path": "/d", "group_by": ".+"}, r"needs a group \(\?P<name>...\)"),
        ("core.folder", {"path": "/d", "pattern": "*"}, r"unknown setting 'pattern'; the settin"),
        ("core.fofn", {"path": "/f", "format": "xls"}, r"format = 'xls' .* give one of lines, csv"),
        ("core.fofn", {"path": "/f", "path_column": "p"}, r"path_column needs format = 'csv' or"),
        ("core.group", {"group": ""}, r"give the label of a group, as `veglia group list`"),
    ],
)
def test_bad_settings_say_what_to_fix(name, settings, message):
    with pytest.raises(DataSourceError, match=message) as raised:
        DataSourceFactory(name)(settings)
    assert str(raised.value).startswith(f"Data source {name}: ")
    assert "\n" not in str(raised.value)


def test_a_file_source_needs_a_transport():
    with pytest.raises(DataSourceError, match=r"needs a transport open on its computer"):
        DataSourceFactory("core.folder")({"path": "/data"}).elements(None)


def test_settings_are_kept_as_plain_data_with_their_defaults():
    source = DataSourceFactory("core.folder")({"path": "~/runs", "settled": "30"})
    assert source.settings == {"path": "~/runs", "glob": "*", "group_by": None, "settled": 30.0}
    assert json.loads(json.dumps(source.settings)) == source.settings


# -- a third-party source ---------------------------------------------------------------------
def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        check=True,
        timeout=300,
    )


@pytest.fixture
def example_datasource(tmp_path):
    """tests/plugin_packages/veglia-example-datasource, installed with pip, removed after."""
    from veglia.entry_points import clear_cache

    source = tmp_path / EXAMPLE.name
    shutil.copytree(EXAMPLE, source)
    _pip("install", "--no-deps", str(source))
    importlib.invalidate_caches()
    clear_cache()
    yield
    _pip("uninstall", "-y", "veglia-example-datasource")
    importlib.invalidate_caches()
    clear_cache()


def test_a_source_registered_by_entry_point_is_found(example_datasource, run_cli):
    words = DataSourceFactory("example.words")
    listing = words({"words": ["beta", "alpha"]}).elements(None)
    assert isinstance(listing, Listing)
    assert listing.identities == ["alpha", "beta"]
    assert listing["alpha"].checksum == sha256(b"alpha")
    with pytest.raises(DataSourceError, match=r"example\.words: words = 'alpha' will not do"):
        words({"words": "alpha"})
    shown = run_cli("plugin", "list", "datasources", "--raw").stdout
    assert "datasources\texample.words\t" in shown
    assert "veglia-example-datasource 0.1.0" in shown
    settings = run_cli("plugin", "show", "datasources", "example.words").stdout
    assert "words    required  the words, e.g. words = ['alpha', 'beta']" in settings
