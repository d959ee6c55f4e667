"""Crash safety: a run killed at any moment leaves a tape that verifies and can be resumed;
SIGTERM stops a run cleanly with an end record."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import check_replayed_in_place
from flowtape.cli import main as cli_main
from flowtape.errors import TraceCorruption
from flowtape.loader import load_module
from flowtape.rundir import RunSummary, now_iso, read_summary, write_summary
from flowtape.runner import execute
from flowtape.seek import find_steps
from flowtape.tape import End, Firing, Step, read_tape
from flowtape.tapefile import read_lines, settled
from flowtape.verify import verify
from flowtape.writer import TapeWriter
from flowtape_lsp.tapeindex import TapeIndex

FLOWS = Path(__file__).parent / "flows"
CHAIN_N = 250  # 4 actors: 1,000 firings, 1,000 steps


def spawn(flow: str, runs_dir: Path, run_id: str, env: dict[str, str] | None = None, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "flowtape", "run", str(FLOWS / flow), "--runs-dir", str(runs_dir), "--run-id", run_id, *extra],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for_steps(tape: Path, count: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = tape.read_bytes()
            if data.count(b'\n{"t":"s",') + data.count(b'\n{"t":"F",') >= count:  # a step's line, or a simple firing's
                return
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    raise AssertionError(f"{tape} never reached {count} steps")


def test_a_killed_process_leaves_exactly_its_completed_firings(tmp_path):
    proc = spawn("crash.py", tmp_path, "crash")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    run_dir = tmp_path / "crash"
    tape, rebuild = verify(run_dir / "tape.jsonl")  # no end record: fine
    kinds = [type(r) for r in tape.records()]
    assert kinds[1:] == [Firing, Step, Firing, Step]
    firings, steps = tape.firings(), tape.steps()
    assert [(f.seq, f.actor, f.fireCount) for f in firings] == [(1, "worker", 1), (2, "worker", 2)]
    assert [(s.step, s.actor, s.fireCount, s.journalSeq) for s in steps] == [(1, "worker", 1, 1), (2, "worker", 2, 2)]
    assert tape.end is None and rebuild.ended is None
    assert rebuild.outputs_raw() == b'{"Out":[10,20]}'
    # the writer was killed with its window mapped (tapefile.py): the rest of it is zero bytes,
    # which every reader takes for the tape's end: verify above, the language server's index here
    data = (run_dir / "tape.jsonl").read_bytes()
    assert data.endswith(b"\0") and data.rstrip(b"\0").endswith(b"\n")
    index = TapeIndex(run_dir)
    index.ingest_all()
    assert index.corrupt is None and index.steps == 2 and index.end is None
    # run.json still says running: nobody was left to rewrite it
    assert read_summary(run_dir).status == "running"
    # `flowtape runs` tells a dead process from a running one, and counts the steps on its tape
    listed = subprocess.run([sys.executable, "-m", "flowtape", "runs", "--runs-dir", str(tmp_path)],
                            capture_output=True, text=True, check=True).stdout.split()
    assert listed[:5] == ["crash", "main", "killed", "2", "steps"]


@pytest.fixture
def chain(monkeypatch):
    monkeypatch.setenv("FT_N", str(CHAIN_N))
    m = load_module(FLOWS / "chain.py")
    m.CALLS.clear()
    m.BROKEN, m.SKEW, m.SLEEP = False, 0, 0.0
    return m


def test_sigkill_at_random_moments_every_tape_verifies_and_resumes(chain, tmp_path, capsys):
    clean = execute(chain.main, max_workers=1, runs_dir=tmp_path / "clean")
    assert clean.status == "succeeded" and clean.firings == 4 * CHAIN_N
    runs = tmp_path / "killed"
    rng = random.Random(20261129)
    delays = [rng.uniform(0.0, 1.0) for _ in range(24)]

    def kill_one(index: int) -> tuple[str, int]:
        run_id = f"k{index}"
        # odd runs with one worker, even ones with the default pool; each lasts about 1.2 s
        workers, nap = (["--max-workers", "1"], "0.001") if index % 2 else ([], "0.004")
        proc = spawn("chain.py", runs, run_id, {"FT_N": str(CHAIN_N), "FT_SLEEP": nap}, *workers)
        try:
            wait_for_steps(runs / run_id / "tape.jsonl", 1)
            time.sleep(delays[index])
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return run_id, proc.returncode

    with ThreadPoolExecutor(4) as pool:
        killed = list(pool.map(kill_one, range(len(delays))))

    cut_short = 0
    for index, (run_id, code) in enumerate(killed):
        run_dir = runs / run_id
        tape, rebuild = verify(run_dir / "tape.jsonl")
        if code == -signal.SIGKILL and tape.end is None:
            cut_short += 1
        else:  # it finished before the kill landed
            assert tape.end is not None and tape.end.status == "succeeded"
        steps = tape.steps()
        assert [s.step for s in steps] == list(range(1, len(steps) + 1))
        resumed = execute(chain.main, max_workers=1 + 2 * (index % 2), runs_dir=runs, resume_from=run_dir)
        assert resumed.status == "succeeded", resumed.error
        assert resumed.outputs == clean.outputs, run_id
        assert resumed.replay_stopped == []
        # every firing the killed run finished and stepped is replayed, not run again
        replayed = sum(1 for f in read_tape(resumed.run_dir / "tape.jsonl").firings() if f.replayed)
        assert replayed == len(steps)
        verify(resumed.run_dir / "tape.jsonl")
    assert cut_short >= 18, f"only {cut_short} of {len(killed)} runs were killed mid-run"
    capsys.readouterr()


def test_a_torn_last_line_is_tolerated_with_a_warning(chain, tmp_path, capsys):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    path = result.run_dir / "tape.jsonl"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    # cut the run as if the writer died in the middle of writing its 30th record
    cut = b"".join(lines[:29]) + lines[29][: len(lines[29]) // 2]
    path.write_bytes(cut)
    summary = read_summary(result.run_dir)  # as a killed run left it: still running, by no process
    assert summary is not None
    summary.status, summary.pid, summary.tape = "running", None, None
    write_summary(result.run_dir, summary)
    capsys.readouterr()
    tape, rebuild = verify(path)
    assert tape.torn and tape.lines[-1].number == 29  # (a simple firing's line holds its step too)
    assert "torn last line" in capsys.readouterr().err
    resumed = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=result.run_dir)
    assert resumed.outputs == result.outputs


@pytest.mark.parametrize("cut", ["whole", "torn", "read mid-store"])
def test_a_zero_tail_reads_as_the_tape_cut_where_it_starts(chain, tmp_path, capsys, cut):
    """What a writer killed mid-window leaves (tapefile.py): the lines it wrote, maybe one cut short
    (a part of it not stored yet, its newline stored or not: a line is one copy, in no set order),
    then zero bytes. It reads, verifies, is followed by the language server, sealed by it and
    resumed as the tape cut there."""
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    path = result.run_dir / "tape.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    body = lines[29][:-1]
    # (a store cut short: a hole, no newline; or the newline stored, not yet all before it)
    tail = {"whole": b"", "torn": body[:20] + b"\0" * 10 + body[30:], "read mid-store": b"\0" * 10 + body[10:] + b"\n"}[cut]
    path.write_bytes(b"".join(lines[:29]) + tail + b"\0" * 5000)
    summary = read_summary(result.run_dir)  # as a killed run left it: still running, by no process
    assert summary is not None
    summary.status, summary.pid, summary.tape = "running", None, None
    write_summary(result.run_dir, summary)
    capsys.readouterr()
    tape, rebuild = verify(path)
    assert tape.torn == (cut != "whole") and tape.lines[-1].number == 29 and tape.end is None
    assert ("torn last line" in capsys.readouterr().err) == (cut != "whole")
    assert cli_main(["verify", str(result.run_dir)]) == 0
    assert cli_main(["show", str(result.run_dir), "--step", "28"]) == 0  # (line 1 is the header)
    capsys.readouterr()
    assert [s.step for s in find_steps(path, tape.header, 20, 50) or []] == list(range(20, 29))  # (a cold page of steps)
    index = TapeIndex(result.run_dir)
    index.ingest_all()
    assert index.corrupt is None and index.steps == 28 and index.read_through()
    resumed = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=result.run_dir)
    assert resumed.outputs == result.outputs
    assert sum(1 for f in read_tape(resumed.run_dir / "tape.jsonl").firings() if f.replayed) == 28
    # the language server seals such a tape (a flow it started died): the zero tail goes with the torn line
    assert index.seal_end("failed", "the flow's process died")
    assert not path.read_bytes().endswith(b"\0")
    sealed, _ = verify(path)
    assert sealed.end is not None and sealed.end.status == "failed" and sealed.lines[-2].number == 29


def test_a_line_read_while_it_was_stored_is_read_again(chain, tmp_path):
    """A read(2) of a growing tape copies it forward while the writer stores, and may stall at
    any page: it can see a line's front before the line was stored and the lines after it once
    they were (tapefile.py). What it saw is read again where the tape holds the line whole."""
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    path = result.run_dir / "tape.jsonl"
    whole = path.read_bytes()
    start = sum(map(len, whole.splitlines(keepends=True)[:12]))
    for hole in (slice(start, start + 30), slice(start + 5, start + 9)):
        seen = bytearray(whole)
        seen[hole] = bytes(hole.stop - hole.start)
        with open(path, "rb") as fh:
            assert settled(bytes(seen), fh.fileno(), 0) == whole
            assert settled(bytes(seen[start - 7 :]), fh.fileno(), start - 7) == whole[start - 7 :]  # read from an offset
            fh.seek(start - 7)
            assert b"".join(line + b"\n" for line, _ in read_lines(fh)) == whole[start - 7 :]


def test_a_zero_byte_inside_a_tape_is_corruption_not_a_torn_line(chain, tmp_path, capsys):
    """A line that still holds zeros when read again, with whole lines after it, was not being
    stored: every reader refuses the tape there, none cuts it short."""
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    path = result.run_dir / "tape.jsonl"
    data = bytearray(path.read_bytes())
    start = sum(map(len, bytes(data).splitlines(keepends=True)[:12]))
    data[start + 3 : start + 9] = bytes(6)
    path.write_bytes(bytes(data))
    with pytest.raises(TraceCorruption, match="line 13"):
        read_tape(path)
    assert cli_main(["verify", str(result.run_dir)]) != 0
    assert "line 13" in capsys.readouterr().err
    index = TapeIndex(result.run_dir)
    index.ingest_all()
    assert index.corrupt is not None and index.steps == 11


def test_reads_racing_the_writer_see_every_line_whole(tmp_path):
    """Read after read at the end of a tape its writer is storing into, each into a fresh buffer
    (whose page faults stall the copy): what `settled` makes of a read holds no zero byte before
    the line being stored, and the lines read add up to the tape."""
    proc = spawn("chain.py", tmp_path, "live", {"FT_N": "40000"}, "--max-workers", "1")
    try:
        tape = tmp_path / "live" / "tape.jsonl"
        wait_for_steps(tape, 1)
        lines: list[bytes] = []
        offset = 0
        with open(tape, "rb") as fh:
            while True:
                ended = proc.poll() is not None
                data = os.pread(fh.fileno(), 1 << 20, offset)
                read = settled(data, fh.fileno(), offset)
                whole = read[: read.rfind(b"\n") + 1].split(b"\n")[:-1]
                if whole and b"\0" in whole[-1] and not read[read.rfind(b"\n") + 1 :].strip(b"\0"):
                    whole.pop()  # the line being stored: read again next time
                assert not any(b"\0" in line for line in whole), offset
                lines += whole
                offset += sum(len(line) + 1 for line in whole)
                if ended and len(data) < 1 << 20 and not whole:
                    break
        assert proc.returncode == 0
    finally:
        proc.kill()
    assert b"\n".join(lines) + b"\n" == tape.read_bytes()


@pytest.mark.parametrize("workers", [1, 4])
def test_a_tape_followed_as_it_is_written_reads_whole(tmp_path, workers):
    """The language server's index reads a tape while its writer stores into it, a read racing
    the stores now and then: it reads every line, and takes none for corruption."""
    proc = spawn("chain.py", tmp_path, "live", {"FT_N": "20000"}, "--max-workers", str(workers))
    try:
        tape = tmp_path / "live" / "tape.jsonl"
        wait_for_steps(tape, 1)
        index = TapeIndex(tmp_path / "live")
        reads = 0
        while index.end is None and index.corrupt is None:
            exited = proc.poll() is not None
            before = index.offset
            index.ingest(1 << 16)  # (small reads, many of them near the writer)
            reads += 1
            if exited and index.offset == before:
                break  # (the writer is gone and all it wrote is read: no hang if it died without an end)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
    assert index.corrupt is None and index.end is not None and index.steps == index.end.steps == 80_000, reads


def test_sigterm_stops_a_run_with_an_end_record(chain, tmp_path):
    proc = spawn("chain.py", tmp_path, "term", {"FT_N": str(CHAIN_N), "FT_SLEEP": "0.004"})
    try:
        wait_for_steps(tmp_path / "term" / "tape.jsonl", 20)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err.decode()
    assert b"stopped" in err
    run_dir = tmp_path / "term"
    tape, rebuild = verify(run_dir / "tape.jsonl")
    end = tape.end
    assert isinstance(end, End) and end.status == "stopped"
    assert 20 <= end.steps < 4 * CHAIN_N
    assert read_summary(run_dir).status == "stopped"
    clean = execute(chain.main, max_workers=1, runs_dir=tmp_path / "clean")
    resumed = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=run_dir)
    assert resumed.outputs == clean.outputs
    assert sum(1 for f in read_tape(resumed.run_dir / "tape.jsonl").firings() if f.replayed) == end.steps


@pytest.mark.parametrize("flow_name", ["looped", "nested_top", "diverge", "gated"])
@pytest.mark.parametrize("workers", [1, 4])
def test_every_prefix_of_a_tape_verifies_and_resumes(flow_name, workers, tmp_path, capsys):
    """A tape is append-only, so each of its prefixes is what a kill at that moment leaves."""
    m = load_module(FLOWS / "branches.py")
    m.LEFT_SKEW, m.VERDICT = 0, "ok"
    flow = getattr(m, flow_name)
    clean = execute(flow, max_workers=workers, runs_dir=tmp_path, run_id="clean")
    lines = (clean.run_dir / "tape.jsonl").read_bytes().splitlines(keepends=True)
    for count in range(1, len(lines)):
        run_dir = tmp_path / f"cut{count}"
        run_dir.mkdir()
        (run_dir / "tape.jsonl").write_bytes(b"".join(lines[:count]))
        tape, _ = verify(run_dir / "tape.jsonl")
        resumed = execute(flow, max_workers=workers, runs_dir=tmp_path, run_id=f"resumed{count}", resume_from=run_dir)
        assert resumed.status == "succeeded", (count, resumed.error)
        assert resumed.outputs == clean.outputs, count
        assert resumed.replay_stopped == [] or flow_name == "diverge", count
        # every firing the cut tape holds is replayed, a composite's cut in its middle too
        # (`moody` never is: its state holds a lock)
        check_replayed_in_place(tape, read_tape(resumed.run_dir / "tape.jsonl"), live=("moody",))
        verify(resumed.run_dir / "tape.jsonl")


def test_a_run_json_the_disk_cannot_hold_leaves_the_last_one_and_no_half_file(tmp_path, monkeypatch):
    summary = RunSummary("r", "main", "flow.py", "running", now_iso())
    write_summary(tmp_path, summary)
    real = Path.write_bytes

    def disk_full(self: Path, data: bytes) -> int:
        real(self, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", disk_full)
    summary.status = "succeeded"
    with pytest.raises(OSError):
        write_summary(tmp_path, summary)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    kept = read_summary(tmp_path)
    assert kept is not None and kept.status == "running"


def test_a_late_line_beside_the_close_is_written_nowhere(tmp_path):
    """A run that ends without the engine's lock (a firing stuck in its action keeps it) closes
    the tape while a late firing may still write its line: that line finds the mapping closed, and
    the file refuses a new window, so nothing lands in the tape after its end, nor in another file
    that has the tape's descriptor number by then."""
    path = tmp_path / "tape.jsonl"
    writer = TapeWriter(path)
    writer.simple(b'{"t":"F","s":1,"a":"a","n":1,"q":[],"at":0,"d":0}', 1, 0)
    writer.close()
    written = path.read_bytes()
    other = os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT, 0o644)  # (the number the tape's descriptor had, as like as not)
    try:
        writer.closed = False  # the late call got past its check just before the close
        with pytest.raises(ValueError, match="closed"):
            writer.simple(b'{"t":"F","s":2,"a":"a","n":2,"q":[],"at":0,"d":0}', 2, 0)
        assert os.fstat(other).st_size == 0
    finally:
        os.close(other)
    assert path.read_bytes() == written
