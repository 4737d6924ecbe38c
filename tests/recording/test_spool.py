"""The spool: whole lines in order across segments, torn lines skipped, private files."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.recording import codec as records
from gateway.recording import ownership
from gateway.recording.erase import Eraser
from gateway.recording.progress import Progress
from gateway.recording.spool import (
    Position,
    SpoolReader,
    SpoolWriter,
    read_checkpoint,
    segments,
    write_checkpoint,
)
from tests.factories import build_step, refusal


def test_lines_come_back_in_order_across_segments(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path, "w0", segment_bytes=64)
    lines = [f"record {i:04d} {'x' * 20}\n".encode() for i in range(40)]
    for line in lines:
        writer.append(line)
    assert len(segments(tmp_path, "w0")) > 5
    with closing(SpoolReader(tmp_path, "w0", Position(1, 0))) as reader:
        got = [line for line, _ in reader.read(7)] + [line for line, _ in reader.read(1000)]
        assert got == [line.rstrip(b"\n") for line in lines]
        assert reader.read(10) == []  # nothing new yet: a later append is read later
        writer.append(b"late\n")
        assert [line for line, _ in reader.read(10)] == [b"late"]


def test_a_line_torn_by_a_crash_is_skipped_and_the_next_run_goes_on(tmp_path: Path) -> None:
    crashed = SpoolWriter(tmp_path, "w0")
    crashed.append(b"whole\n")
    os.write(crashed._fd, b"torn, no newl")  # the crash cut this write short
    restarted = SpoolWriter(tmp_path, "w0")  # a new run never appends to an old segment
    restarted.append(b"next run\n")
    with closing(SpoolReader(tmp_path, "w0", Position(1, 0))) as reader:
        assert [line for line, _ in reader.read(10)] == [b"whole", b"next run"]


def test_files_are_private_and_hold_no_key(tmp_path: Path) -> None:
    os.umask(0o022)
    writer = SpoolWriter(tmp_path / "spool", "w0")
    writer.append(records.encode(build_step()))
    (path,) = (tmp_path / "spool").glob("*.spool")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "spool").stat().st_mode) == 0o700


def test_checkpoint_resumes_and_releases_stored_segments(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path, "w0", segment_bytes=10)
    for i in range(5):
        writer.append(f"line {i}\n".encode())
    with closing(SpoolReader(tmp_path, "w0", Position(1, 0))) as reader:
        (*_, (_, third)) = reader.read(3)
        write_checkpoint(tmp_path, "w0", third)
        reader.release_before(third)
    assert segments(tmp_path, "w0")[0] == third.seq
    start = read_checkpoint(tmp_path, "w0") or Position(1, 0)
    with closing(SpoolReader(tmp_path, "w0", start)) as resumed:
        assert [line for line, _ in resumed.read(10)] == [b"line 3", b"line 4"]


def test_records_round_trip() -> None:
    step = build_step(error={"message": "m", "type": None, "code": None})
    assert records.decode(records.encode(step)) == step
    forked = refusal(fork=("tr_original", 2))  # a fork API request refused
    assert records.decode(records.encode(forked)) == forked


def test_two_gateways_on_one_spool_root_each_own_a_directory(tmp_path: Path) -> None:
    with ownership.own(tmp_path) as first, ownership.own(tmp_path) as second:
        assert first != second and first.parent == second.parent == tmp_path


def test_an_unwritable_spool_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match="spool_dir"), ownership.own(blocker / "spool"):
        pass


_PUBLISHER = """
import sys, time
from pathlib import Path
from gateway.recording.progress import Progress
progress = Progress(Path(sys.argv[1]), create=False)
value, deadline = 0, time.monotonic() + 1.0
while time.monotonic() < deadline:
    value += 255  # a carry across a byte boundary almost every time
    progress.publish({"committed": value, "batches": value})
"""


def test_progress_is_read_whole_while_another_process_writes_it(tmp_path: Path) -> None:
    progress = Progress(tmp_path / "w0.progress", create=True)
    publisher = subprocess.Popen([sys.executable, "-c", _PUBLISHER, str(tmp_path / "w0.progress")])
    last, reads = 0, 0
    try:
        while publisher.poll() is None:
            committed = progress.get("committed")
            published = progress.snapshot()
            assert published["committed"] == published["batches"]  # from one publication
            assert last <= committed <= published["committed"]  # never torn, never back
            last = published["committed"]
            reads += 1
    finally:
        publisher.wait(10)
    assert publisher.returncode == 0 and reads > 100 and last > 0


def test_stored_lines_are_erased_and_the_rest_still_reads(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path, "w0")
    for i in range(3):
        writer.append(f"secret-{i} text\n".encode())
    (path,) = tmp_path.glob("*.spool")
    with closing(SpoolReader(tmp_path, "w0", Position(1, 0))) as reader:
        (_, (_, second)) = reader.read(2)
        reader.release_before(second)  # the first two are stored
        assert b"secret-0" not in path.read_bytes() and b"secret-1" not in path.read_bytes()
        assert path.stat().st_size == writer.position.offset  # offsets are kept
        writer.append(b"secret-3 text\n")
        assert [line for line, _ in reader.read(10)] == [b"secret-2 text", b"secret-3 text"]
    # A reader that starts before the erased part (another gateway's look-up) skips it.
    with closing(SpoolReader(tmp_path, "w0", Position(1, 0))) as again:
        assert [line for line, _ in again.read(10)] == [b"secret-2 text", b"secret-3 text"]


@pytest.mark.parametrize("punch", [True, False], ids=["hole", "zeros"])
def test_erasing_keeps_the_size_and_what_follows(tmp_path: Path, punch: bool) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"a" * 10_000 + b"kept")
    eraser = Eraser(punch=punch)
    eraser.erase_before(path, 5_000)
    eraser.erase_before(path, 10_000)
    eraser.close()
    assert path.read_bytes() == bytes(10_000) + b"kept"
