"""verify(): a tape that cannot support its own story is refused, naming the line and the rule.

Each tampering is tried twice: as a plain edit (the hash chain catches it at the first line that
no longer follows), and re-sealed, i.e. with the hash chain recomputed by a forger who knows the
format: then the rebuild's own rules must catch it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest
from flowtape.chain import COVERED_LINES, reseal
from flowtape.cli import main as cli_main
from flowtape.digests import digest
from flowtape.errors import TraceCorruption
from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape.streamed import verify_streamed
from flowtape.tape import (
    FORMAT_VERSION,
    Diverged,
    Firing,
    SimpleFiring,
    Step,
    StepFiller,
    decode_line,
    decode_record,
    encode_record,
    read_tape,
)
from flowtape.verify import verify
from msgspec import Raw

FLOWS = Path(__file__).parent / "flows"


@pytest.fixture
def run(tmp_path):
    m = load_module(FLOWS / "chain.py")
    m.BROKEN, m.SKEW = False, 0
    result = execute(m.main, max_workers=1, runs_dir=tmp_path, run_id="good")
    return result.run_dir / "tape.jsonl"


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def find(lines: list[bytes], *needles: bytes) -> int:
    """The 0-based index of the first line holding every needle."""
    return next(i for i, line in enumerate(lines) if all(n in line for n in needles))


def firing(lines: list[bytes], seq: int) -> int:
    """The 0-based index of the line of firing `seq` (written without its seq when it is one past
    the last step's number: read as a reader would)."""
    filler = StepFiller()
    for i, raw in enumerate(lines):
        for record in decode_line(raw):
            filler.see(record)
            if isinstance(record, Firing) and record.seq == seq:
                return i
    raise LookupError(seq)


def simple(raw: bytes) -> SimpleFiring:
    """A simple firing's line, to edit and write back with `encode_record`."""
    return msgspec.json.decode(raw, type=SimpleFiring)


def next_hashed(lines: list[bytes], i: int) -> int:
    """The 1-based number of the first hashed line from index `i` on: where the chain finds a
    change to line `i`, as the lines between carry no hash of their own."""
    return next(j for j in range(i, len(lines)) if b',"h":"' in lines[j]) + 1


def names_line(exc: TraceCorruption, number: int) -> bool:
    """Whether a hash-chain error names the lines its hash covers, `number` among them."""
    found = re.search(r"lines (\d+)-(\d+) edited", str(exc))
    return (int(found[1]) <= number <= int(found[2])) if found else (number == exc.line and "this line" in str(exc))


def corrupt(path: Path) -> TraceCorruption:
    with pytest.raises(TraceCorruption) as info:
        verify(path, warn=False)
    with pytest.raises(TraceCorruption) as streamed:  # the same verdict when the tape is read as a stream
        verify_streamed(path.parent)
    assert (streamed.value.line, streamed.value.rule) == (info.value.line, info.value.rule), (streamed.value, info.value)
    return info.value


def test_a_good_tape_verifies(run):
    assert verify_streamed(run.parent) == verify(run)[1].step
    tape, rebuild = verify(run)
    assert rebuild.ended is not None and rebuild.ended.status == "succeeded"
    assert rebuild.seq == 20 and rebuild.step == 20
    assert rebuild.outputs_raw() == b'{"Out":[5,12,21,32,45]}'
    assert rebuild.states["total"] and bytes(rebuild.states["total"]) == b'{"total":45}'
    assert reseal(lines_of(run)) == lines_of(run)  # the helper below reproduces the writer's chain


def test_verify_tells_how_far_it_has_got_and_a_terminal_shows_it(run, monkeypatch):
    import io

    import flowtape.verify
    from flowtape.progress import Checking

    monkeypatch.setattr(flowtape.verify, "PROGRESS_EVERY", 8)
    calls: list[tuple[int, int]] = []
    verify(run, progress=lambda done, total: calls.append((done, total)))
    records = len(read_tape(run).lines) - 1  # a simple firing's line holds two records: its firing and its step
    assert calls == [(done, records) for done in range(0, records, 8)]
    shown = Checking(io.StringIO(), every=0)
    shown.start -= 1  # shown once the check has taken half a second
    shown(512, 2048)
    shown.close()
    assert shown.stream.getvalue() == "\r\x1b[K  checking the tape: 25% (512 of 2,048 records)\r\x1b[K"


def test_a_forged_firing_is_detected(run):
    lines = lines_of(run)
    at = find(lines, b'"a":"add"', b'"n":2')
    forged = lines[at].replace(b'"n":2', b'"n":3')
    written = lines[:at] + [forged] + lines[at:]
    write(run, written)
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (next_hashed(written, at), "hash chain")
    assert f"line {exc.line}" in str(exc) and names_line(exc, at + 1)

    # re-sealed: a firing of `total` that takes a token nobody ever put
    end = len(lines) - 1
    fake = encode_record(Firing(seq=21, actor="total", fireCount=6, consumed=[(3, 1, "0123456789abcdef")]))
    write(run, reseal(lines[:end] + [fake] + lines[end:]))
    exc = corrupt(run)
    assert exc.line == end + 1
    assert exc.rule == "nothing is taken that was never put"
    assert "total" in str(exc) and "add.Out->total.In" in str(exc)

    # re-sealed: a replay that stopped, in a run that is no resume
    fake = encode_record(Diverged(actor="total", fireCount=1, reason="inputs-differ", step=3))
    write(run, reseal(lines[:end] + [fake] + lines[end:]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (end + 1, "divergences only in resumed runs")

    # re-sealed: a firing of an actor the flow does not have
    fake = encode_record(Firing(seq=21, actor="ghost", fireCount=1))
    write(run, reseal(lines[:end] + [fake] + lines[end:]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (end + 1, "firings name actors of the header")

    # re-sealed: a firing that skips a fire count
    fake = encode_record(Firing(seq=21, actor="source", fireCount=7))
    write(run, reseal(lines[:end] + [fake] + lines[end:]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (end + 1, "fireCount is one more than the actor's previous")


def test_a_forged_extra_output_is_detected(run):
    lines = lines_of(run)
    end = len(lines) - 1
    # re-sealed: an extra firing of the source, which changes nothing but the counts
    fake = encode_record(Firing(seq=21, actor="source", fireCount=6, produced=[(1, [Raw(b"6")])], state=Raw(b'{"i":6}')))
    write(run, reseal(lines[:end] + [fake] + lines[end:]))
    exc = corrupt(run)
    assert exc.line == end + 2
    assert exc.rule == "the end agrees with the rebuilt run"


def test_reordered_records_are_detected(run):
    lines = lines_of(run)
    a = firing(lines, 2)
    b = a + 1  # the line of seq 3 (and step 3)
    swapped = lines[:a] + [lines[b], lines[a]] + lines[b + 1 :]
    write(run, swapped)
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (next_hashed(swapped, a), "hash chain")  # covered by the next hashed line
    assert names_line(exc, a + 1) and names_line(exc, a + 2)

    write(run, reseal(swapped))
    exc = corrupt(run)
    # a simple firing's line says its step, and so its seq: step 3 cannot come second
    assert (exc.line, exc.rule) == (a + 1, "seq increases by one")

    # renumbered to fit where it now stands, firing 3 takes from a queue nothing has put into yet
    moved = simple(lines[b])
    moved.step = 2
    write(run, reseal(lines[:a] + [encode_record(moved)] + lines[b + 1 :]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (a + 1, "nothing is taken that was never put")
    # with its seq written out, as a firing after a composite's nested ones has it
    moved.seq = 3
    write(run, reseal(lines[:a] + [encode_record(moved)] + lines[b + 1 :]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (a + 1, "seq increases by one")


def test_a_re_appended_old_record_is_detected(run):
    lines = lines_of(run)
    old = lines[firing(lines, 1)]
    write(run, lines + [old])
    exc = corrupt(run)
    # a firing line without a hash of its own is covered by none after the end: the rebuild finds it
    assert (exc.line, exc.rule) == (len(lines) + 1, "the end record is last")
    hashed = lines[find(lines, b'"t":"F"', b',"h":"')]
    write(run, lines + [hashed])
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(lines) + 1, "hash chain")

    write(run, reseal(lines + [old]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(lines) + 1, "the end record is last")

    # without an end record (a killed run): its line says step 1, so seq 1, and the sequence runs backwards
    body = lines[:-1]
    write(run, reseal(body + [old]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(body) + 1, "seq increases by one")
    assert "seq 1 follows seq 20" in str(exc)
    # renumbered as the next step, its fire count runs backwards
    again = simple(old)
    again.step = 21
    write(run, reseal(body + [encode_record(again)]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(body) + 1, "fireCount is one more than the actor's previous")
    # with its seq written out, the sequence runs backwards
    again.seq = 1
    write(run, reseal(body + [encode_record(again)]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(body) + 1, "seq increases by one")
    assert "seq 1 follows seq 20" in str(exc)


def test_an_edited_token_is_detected(run):
    lines = lines_of(run)
    at = find(lines, b'"a":"double"', b'"n":2')
    assert b'"p":[[2,[4]]]' in lines[at]
    edited = list(lines)
    edited[at] = lines[at].replace(b'"p":[[2,[4]]]', b'"p":[[2,[40]]]')
    write(run, edited)
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (next_hashed(edited, at), "hash chain") and names_line(exc, at + 1)

    # re-sealed: the consumer's recorded digest no longer matches what the queue held
    write(run, reseal(edited))
    exc = corrupt(run)
    consumer = find(lines, b'"a":"add"', b'"n":2')
    assert exc.line == consumer + 1
    assert exc.rule == "consumed digests match the tokens produced into the queue, in FIFO order"
    assert "double.Out->add.In" in str(exc)


@pytest.mark.parametrize("mark", [b'"=5"', b'"=4x"', b'"={}"', b'"=[4]"', b'"="'])
def test_a_token_named_by_itself_is_held_to_the_queue(run, mark):
    """Format 8 names a small int taken by itself (`"=4"`) instead of its digest: edited into another
    token, or into no token at all, it is refused as a token the queue never held."""
    lines = lines_of(run)
    consumer = find(lines, b'"a":"add"', b'"n":2')
    assert b'"c":[[2,1,"=4"]]' in lines[consumer]  # (double put 4 into double.Out->add.In)
    edited = list(lines)
    edited[consumer] = lines[consumer].replace(b'"=4"', mark)
    write(run, reseal(edited))
    exc = corrupt(run)
    assert exc.line == consumer + 1
    assert exc.rule == "consumed digests match the tokens produced into the queue, in FIFO order"
    assert "double.Out->add.In" in str(exc)


def test_a_token_named_by_itself_reads_as_its_digest(run):
    """What a record says it took is a digest, however its line names the token (`"=4"` or a
    digest): the same story as a tape that named every token by its digest."""
    def took() -> list[object]:
        return [f.consumed for f in read_tape(run).firings() if f.actor == "add" and f.fireCount == 2]

    assert took() == [[(2, 1, digest([b"4"]))]]
    lines = lines_of(run)
    consumer = find(lines, b'"a":"add"', b'"n":2')
    by_digest = list(lines)
    by_digest[consumer] = lines[consumer].replace(b'"=4"', b'"%s"' % digest([b"4"]).encode())
    write(run, reseal(by_digest))
    verify(run, warn=False)
    assert took() == [[(2, 1, digest([b"4"]))]]


def test_an_edited_output_is_detected(run):
    lines = lines_of(run)
    edited = list(lines)
    edited[-1] = lines[-1].replace(b'"outputs":{"Out":[5,12,21,32,45]}', b'"outputs":{"Out":[5,12,21,32,46]}')
    assert edited[-1] != lines[-1]
    write(run, reseal(edited))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(lines), "the end agrees with the rebuilt run")


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        (b'"status":"succeeded"', b'"status":"done"', "a known end status"),
        (b'"status":"succeeded"', b'"status":"failed"', "a run fails exactly when it has an error"),
        (b'"status":"succeeded"', b'"status":"stopped","error":{"message":"boom"}', "a run fails exactly when it has an error"),
        (b'"status":"succeeded"', b'"status":"succeeded","leftovers":[["x.Out->y.In",2]]', "the end agrees with the rebuilt run"),
    ],
)
def test_an_edited_end_status_is_detected(run, old, new, rule):
    lines = lines_of(run)
    edited = lines[:-1] + [lines[-1].replace(old, new)]
    assert edited[-1] != lines[-1]
    write(run, reseal(edited))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(lines), rule)


def test_a_dropped_line_is_detected(run):
    lines = lines_of(run)
    at = firing(lines, 5)
    dropped = lines[:at] + lines[at + 1 :]
    write(run, dropped)
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (next_hashed(dropped, at), "hash chain")  # found at the next hashed line

    write(run, reseal(dropped))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (at + 1, "seq increases by one")  # the next line says step 6: seq 6 after seq 4

    # the next one renumbered into the hole takes a token that its dropped producer never put
    moved = simple(lines[at + 1])
    moved.step = 5
    write(run, reseal(lines[:at] + [encode_record(moved)] + lines[at + 2 :]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (at + 1, "nothing is taken that was never put")


def test_a_header_must_come_first(run):
    lines = lines_of(run)
    write(run, lines[1:])
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (1, "header first")

    write(run, reseal(lines[:3] + [lines[0]] + lines[3:]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (4, "one header, first")


def test_an_unreadable_line_is_corruption_but_a_torn_last_line_is_not(run, capsys):
    lines = lines_of(run)
    write(run, lines[:4] + [b'{"t":"f","seq":'] + lines[4:])
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (5, "well-formed records")

    # two records spliced onto one line
    write(run, lines[:3] + [lines[3] + b"," + lines[4]] + lines[5:])
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (4, "well-formed records")

    # a file cut in the middle of its last line: the writer died mid-write
    data = b"".join(line + b"\n" for line in lines)
    cut = len(data) - len(lines[-1]) // 2
    run.write_bytes(data[:cut])
    tape, rebuild = verify(run)
    assert tape.torn and tape.lines[-1].number == len(lines) - 1
    assert rebuild.ended is None and rebuild.seq == 20
    assert "torn last line" in capsys.readouterr().err


def test_the_cli_verify(run, capsys, tmp_path):
    assert cli_main(["verify", str(run.parent)]) == 0
    assert "ok:" in capsys.readouterr().out
    assert cli_main(["verify", "good", "--runs-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    lines = lines_of(run)
    dropped = lines[:3] + lines[4:]  # a firing dropped: found at the next hashed line
    write(run, dropped)
    assert cli_main(["verify", str(run.parent)]) == 1
    err = capsys.readouterr().err
    assert f"line {next_hashed(dropped, 3)}: hash chain" in err and "lines 2-" in err


def test_a_tape_of_another_format_version_is_refused(run, capsys):
    path = run
    lines = lines_of(path)
    lines[0] = lines[0].replace(b'"version":%d,' % FORMAT_VERSION, b'"version":1,', 1)
    write(path, reseal(lines))
    error = corrupt(path)
    assert error.line == 1 and error.rule == "a known format version"
    assert "version 1" in str(error) and "reads versions 2, 3, 4, 5, 6, 7 and 8" in str(error)
    assert cli_main(["verify", str(path.parent)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("flowtape: cannot read this tape: line 1:") and "corrupt" not in err


def test_a_checkpoint_that_differs_from_the_rebuilt_run_is_detected(tmp_path, monkeypatch):
    from flowtape import checkpoints

    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 4)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    m = load_module(FLOWS / "chain.py")
    m.BROKEN, m.SKEW = False, 0
    path = execute(m.main, max_workers=1, runs_dir=tmp_path, run_id="cp").run_dir / "tape.jsonl"
    verify(path)
    lines = lines_of(path)
    at = find(lines, b'"t":"checkpoint","step":8,')
    assert b'["total",{"total":' in lines[at]
    lines[at] = lines[at].replace(b'["total",{"total":', b'["total",{"total":1', 1)
    write(path, reseal(lines))
    error = corrupt(path)
    assert error.line == at + 1 and error.rule == "checkpoints agree with the rebuilt run"
    assert "actor states" in str(error)


def test_on_disk_steps_and_most_firings_have_no_hash_and_a_simple_firing_is_its_step_too(tmp_path):
    m = load_module(FLOWS / "branches.py")
    result = execute(m.looped, max_workers=1, runs_dir=tmp_path)
    lines = lines_of(result.run_dir / "tape.jsonl")
    kinds = (b'{"t":"s",', b'{"t":"f",', b'{"t":"F",')
    steps = [line for line in lines if line.startswith(kinds[0])]  # composite steps: loop items, several firings each
    firings = [line for line in lines if line.startswith(kinds[1:])]
    simple = [line for line in lines if line.startswith(kinds[2])]  # `done`: a firing and its step, one line
    others = [line for line in lines if not line.startswith(kinds)]
    assert steps and all(b'"h":' not in line for line in steps)
    assert all(line.endswith(b'"}') and b',"h":"' in line for line in others)
    hashed = [i for i, line in enumerate(lines) if b',"h":"' in line]
    assert any(b',"h":"' in line for line in firings) and any(b',"h":"' not in line for line in firings)
    assert max(b - a for a, b in zip(hashed, hashed[1:], strict=False)) == COVERED_LINES + 1  # a hash every 16 lines at most
    assert simple and all(b'"journalSeq"' not in line and b'"fireCount"' not in line and b'"s":' in line for line in simple)
    assert b'"s":5,"seq":17,' in simple[0]  # its seq is not its step's number: the loop's firings came before
    assert all(b'"journalSeq"' in line and b'"fireCount"' in line for line in steps)
    tape, _ = verify(result.run_dir / "tape.jsonl")
    done = [line.record for line in tape.lines if isinstance(line.record, Firing | Step) and line.record.actor == "done"]
    assert [type(r) for r in done] == [Firing, Step] and done[1].journalSeq == done[0].seq == 17
    # an edited step is caught at the next hashed line
    at = lines.index(steps[0])
    edited = list(lines)
    edited[at] = lines[at][:-1] + b',"kind":"loop"}'
    write(result.run_dir / "tape.jsonl", edited)
    exc = corrupt(result.run_dir / "tape.jsonl")
    assert (exc.line, exc.rule) == (next_hashed(edited, at), "hash chain") and names_line(exc, at + 1)


def test_on_disk_a_firing_leaves_out_its_seq_when_it_is_one_past_the_last_step(tmp_path):
    m = load_module(FLOWS / "branches.py")
    path = execute(m.looped, max_workers=1, runs_dir=tmp_path).run_dir / "tape.jsonl"
    lines = lines_of(path)
    verify(path)
    last_step = 0
    seqs = []
    filler = StepFiller()
    for raw in lines:
        for record in decode_line(raw):
            filler.see(record)
            if isinstance(record, Step):
                last_step = record.step
            elif isinstance(record, Firing):
                assert (b'"seq":' not in raw) == (record.seq == last_step + 1), raw
                seqs.append(record.seq)
    assert seqs == list(range(1, len(seqs) + 1))
    assert any(b'"seq":' in raw for raw in lines) and any(raw.startswith(b'{"t":"f","actor":') for raw in lines)


def test_a_simple_firing_must_fit_its_format_version_and_its_queues(run):
    lines = lines_of(run)
    at = find(lines, b'"a":"add"', b'"n":2')
    record = simple(lines[at])
    record.sizes = [*record.sizes, 0]  # a size for a queue the firing did not touch
    write(run, reseal(lines[:at] + [encode_record(record)] + lines[at + 1 :]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (at + 1, "well-formed records") and "3 queue size(s) for the 2 queue(s)" in str(exc)
    older = [lines[0].replace(b'"version":%d,' % FORMAT_VERSION, b'"version":5,', 1), *lines[1:]]  # format 5 wrote a firing and its step apart
    write(run, reseal(older))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (2, "records of the tape's format version") and "version 5 tape" in str(exc)
    # format 7 named every token taken by its digest: a token named by itself is no line it wrote
    older = [lines[0].replace(b'"version":%d,' % FORMAT_VERSION, b'"version":7,', 1), *lines[1:]]
    consumer = find(lines, b'"c":[[', b'"=')
    write(run, reseal(older))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (consumer + 1, "records of the tape's format version") and "version 7 tape" in str(exc)


TAPES = Path(__file__).parent / "tapes"


@pytest.mark.parametrize("version", [2, 3, 4, 5])
def test_an_older_version_tape_still_verifies_reads_and_resumes(tmp_path, version):
    """Version 2 hashed every line and wrote every step's journalSeq; version 3 hashed every firing;
    version 4 wrote every changed state whole."""
    import shutil

    name = f"v{version}-looped"
    run_dir = tmp_path / "runs" / name
    shutil.copytree(TAPES / name, run_dir)
    tape, rebuild = verify(run_dir / "tape.jsonl")
    assert tape.header.version == version and rebuild.ended is not None and rebuild.ended.status == "succeeded"
    assert [(s.step, s.actor, s.journalSeq) for s in tape.steps()] == [
        (1, "lp", 5), (2, "lp", 10), (3, "lp", 15), (4, "lp", 16), (5, "done", 17)
    ]
    m = load_module(FLOWS / "branches.py")
    m.CALLS.clear()
    resumed = execute(m.looped, max_workers=1, runs_dir=tmp_path / "runs", resume_from=name, at_step=3)
    assert resumed.status == "succeeded"
    assert resumed.outputs == {"Squares": [4, 9, 16], "Verdicts": ["ok"] * 3, "Done": [1]}
    copied, _ = verify(resumed.run_dir / "tape.jsonl")  # a tape of today's version that goes on from the older prefix
    assert copied.header.version == FORMAT_VERSION and copied.header.resumedAtStep == 3
    assert [s.replayed for s in copied.steps()] == [True, True, True, False, False]


@pytest.mark.parametrize(("damage", "line", "words"), [
    (lambda data: data.replace(b"\n", b"\r\n"), 1, "CR LF"),
    (lambda data: b"\xef\xbb\xbf" + data, 1, "byte order mark"),
    (lambda data: data + b"\n", None, "an empty line"),
])
def test_the_usual_accidents_to_a_tape_are_named(run, damage, line, words):
    count = len(lines_of(run))
    run.write_bytes(damage(run.read_bytes()))
    exc = corrupt(run)
    assert exc.rule == "well-formed records" and words in str(exc)
    assert exc.line == (line or count + 1)


def test_a_step_must_match_the_rebuilt_run(run):
    """Lines of a killed run after its last hashed line are covered by no hash: the rebuild's
    own rules must catch an edit there (and in a re-sealed tape)."""
    lines = lines_of(run)[:-1]  # the end record gone, as if killed
    last = len(lines) - 1
    assert lines[last].startswith(b'{"t":"F",') and b',"h":"' not in lines[last]
    record = json.loads(lines[last])
    record["q"] = [size + 1 for size in record["q"]]
    write(run, lines[:last] + [json.dumps(record, separators=(",", ":")).encode()])
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (last + 1, "step queue sizes match the rebuilt run")
    # a composite's step names its firing: one stepped long ago is refused
    firing_, _ = simple(lines[last]).split()  # the last firing, written apart from a step that names another
    step = Step(step=20, actor="source", fireCount=1, journalSeq=20, queues=[(1, 0)])
    write(run, reseal(lines[:last] + [encode_record(firing_), encode_record(step)]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (last + 2, "steps name completed firings")


def test_a_finished_run_cut_short_and_bytes_after_the_end_are_refused(run, capsys):
    lines = lines_of(run)
    write(run, lines[:-2])  # run.json says the run succeeded: its end (and more) was cut off
    assert cli_main(["verify", str(run.parent)]) == 1
    err = capsys.readouterr().err
    assert "run.json says the run succeeded after 20 steps (the tape holds 19): it was cut short" in err
    # stepping through it or resuming it would tell another run than the one that ended: refused too
    assert cli_main(["show", str(run.parent), "--step", "5"]) == 1
    assert "it was cut short" in capsys.readouterr().err
    assert cli_main(["show", str(run.parent)]) == 1
    assert "it was cut short" in capsys.readouterr().err
    resumed = ["run", str(FLOWS / "chain.py"), "--runs-dir", str(run.parent.parent), "--resume-from", "good"]
    assert cli_main([*resumed, "--at-step", "5"]) == 2
    assert "cannot resume from" in (err := capsys.readouterr().err) and "it was cut short" in err
    assert [p.name for p in run.parent.parent.iterdir()] == ["good"]  # no run was started
    run.write_bytes(b"\n".join(lines))  # only the end record's newline lost: the whole run, no warning
    assert cli_main(["verify", str(run.parent)]) == 0 and "torn" not in capsys.readouterr().err
    assert cli_main(["show", str(run.parent), "--step", "20"]) == 0
    # zero bytes after the end: the rest of the window of a writer killed before it cut the file
    # (tapefile.py), no part of the tape; anything else there is no torn write, and is refused
    run.write_bytes(b"".join(line + b"\n" for line in lines) + b"\x00" * 64)
    assert cli_main(["verify", str(run.parent)]) == 0 and "torn" not in capsys.readouterr().err
    run.write_bytes(b"".join(line + b"\n" for line in lines) + b"\x00" * 64 + b"x")
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (len(lines) + 1, "the end record is last")


def test_a_header_must_hold_together(run):
    """The graph fingerprint is that of the header's actors and queues; its inputs are an object."""
    lines = lines_of(run)
    header = json.loads(lines[0])
    header["queues"] = list(reversed(header["queues"]))  # re-sealed, so only the rule can catch it
    header.pop("h")
    write(run, reseal([json.dumps(header, separators=(",", ":")).encode(), *lines[1:]]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (1, "a well-formed header") and "graph fingerprint" in str(exc)
    header = json.loads(lines[0])
    header["inputs"] = [1]
    header.pop("h")
    write(run, reseal([json.dumps(header, separators=(",", ":")).encode(), *lines[1:]]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (1, "a well-formed header") and "inputs" in str(exc)
    for field, value, said in [
        ("maxWorkers", -4, "maxWorkers -4"), ("maxWorkers", 10**6, "maxWorkers 1000000"),
        ("resumedFrom", "other", "resumedFrom 'other' at step None"), ("resumedAtStep", -1, "at step -1"),
        ("runId", "../../etc", "no run id"),
    ]:
        header = json.loads(lines[0])
        header[field] = value
        header.pop("h")
        write(run, reseal([json.dumps(header, separators=(",", ":")).encode(), *lines[1:]]))
        exc = corrupt(run)
        assert (exc.line, exc.rule) == (1, "a well-formed header") and said in str(exc), (field, str(exc))


def tape_of_header(lines: list[bytes]):  # type: ignore[no-untyped-def]
    return decode_record(lines[0])


def _marked(lines: list[bytes]) -> list[bytes]:
    from flowtape.chain import mark_line

    return [mark_line(line) for line in lines]


def test_replayed_marks_are_held_by_what_the_tape_says_it_resumed(run, tmp_path):
    """The `replayed` mark is outside the hash chain (a resume copies a recorded prefix and marks
    it): verify holds it to the header instead, so it can be neither added nor taken away."""
    lines = lines_of(run)
    # a run that resumed nothing replays nothing
    write(run, lines[:1] + _marked(lines[1:3]) + lines[3:])
    exc = corrupt(run)
    assert exc.rule == "only a resumed run replays" and exc.line == 2
    # a step marked replayed whose firing ran live (written apart, as a reader may still meet them)
    firing_, step_ = simple(lines[1]).split()
    write(run, reseal(lines[:1] + [encode_record(firing_)] + _marked([encode_record(step_)]) + lines[2:]))
    assert corrupt(run).rule == "a step is replayed exactly when its firings are"

    write(run, lines)
    m = load_module(FLOWS / "chain.py")
    m.BROKEN, m.SKEW = False, 0
    resumed = execute(m.main, max_workers=1, runs_dir=tmp_path, resume_from=run.parent, at_step=6)
    tape = resumed.run_dir / "tape.jsonl"
    verify(tape)
    good = lines_of(tape)
    at = find(good, b'"t":"F"', b'"replayed":true', b'"s":6,')
    # one mark taken away: a simple firing (and its step) of the copied prefix that says it ran live
    write(tape, good[:at] + [good[at].replace(b'"replayed":true,', b"")] + good[at + 1 :])
    exc = corrupt(tape)
    assert (exc.line, exc.rule) == (at + 1, "a copied prefix is exactly the replayed steps")
    # every mark taken away from a resume that copied its source's first 6 steps: it ran them all live?
    assert tape_of_header(good).chainFrom
    write(tape, [line.replace(b'"replayed":true,', b"") for line in good])
    exc = corrupt(tape)
    assert (exc.line, exc.rule) == (find(good, b'"t":"F"') + 1, "a copied prefix is exactly the replayed steps")
    # one step too many marked
    after = find(good, b'"t":"F"', b'"s":7,')
    write(tape, good[: after - 1] + _marked(good[after - 1 : after + 1]) + good[after + 1 :])
    assert corrupt(tape).rule == "only a resumed run replays"


def test_verify_says_which_lines_of_a_killed_run_no_hash_vouches_for(run, capsys):
    lines = lines_of(run)
    assert cli_main(["verify", str(run.parent)]) == 0 and "no hash vouches" not in capsys.readouterr().err
    killed = lines[:-1]  # no end record: its last firings and steps follow the last hashed line
    last_hashed = max(i for i, line in enumerate(killed) if b',"h":"' in line)
    write(run, killed)
    summary = json.loads((run.parent / "run.json").read_text())
    (run.parent / "run.json").write_text(json.dumps({**summary, "status": "running", "pid": None}))
    assert cli_main(["verify", str(run.parent)]) == 0
    err = capsys.readouterr().err
    assert f"note: lines {last_hashed + 2}-{len(killed)}, written after the tape's last hashed record" in err


@pytest.mark.parametrize("side", ["consumed", "produced"])
def test_a_firing_that_moves_tokens_along_another_actors_edge_is_refused(run, side):
    """The queues stay whole and the chain is recomputed: only the graph says that `add` never
    takes from `double`'s input, nor `double` puts into `add`'s output."""
    lines = lines_of(run)
    header = decode_record(lines[0])
    queue = {qid: i for i, qid in enumerate(header.queues)}
    at = find(lines, b'"a":"add"' if side == "consumed" else b'"a":"double"', b'"n":1')
    record = simple(lines[at])
    if side == "consumed":
        (_, count, d), = record.consumed
        record.consumed = [(queue["source.Out->double.In"], count, d)]
    else:
        (_, tokens), = record.produced
        record.produced = [(queue["add.Out->total.In"], tokens)]
    write(run, reseal(lines[:at] + [encode_record(record)] + lines[at + 1:]))
    exc = corrupt(run)
    assert exc.line == at + 1 and exc.rule == "a firing takes from its actor's inputs and puts into its outputs"
    assert ("add takes from source.Out->double.In" if side == "consumed" else "double puts into add.Out->total.In") in str(exc)


def test_header_inputs_must_name_input_ports_of_the_graph(run):
    lines = lines_of(run)
    header = json.loads(lines[0])
    header["inputs"] = {"Nope": 1}
    write(run, reseal([json.dumps(header, separators=(",", ":")).encode(), *lines[1:]]))
    exc = corrupt(run)
    assert (exc.line, exc.rule) == (1, "a well-formed header")
    assert "'Nope', which the graph has no input port for (its input ports: none)" in str(exc)


def test_an_input_wired_to_nothing_is_not_recorded(tmp_path):
    flow = tmp_path / "unwired.py"
    flow.write_text(
        "from flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass Inc:\n    class Ports:\n        In = Port[int](direction=\"in\")\n"
        "        Out = Port[int](direction=\"out\")\n\n    def action(self, x):\n        return x + 1\n\n\n"
        "@workflow(inputs={\"A\": int, \"B\": int}, outputs={\"Out\": int})\ndef main():\n"
        "    inc = Inc()\n    connect(\"A\", inc.In)\n    connect(inc.Out, \"Out\")\n"
    )
    result = execute(load_module(flow).main, {"A": 1, "B": 2}, runs_dir=tmp_path / "runs")
    tape, _ = verify(result.run_dir / "tape.jsonl")
    assert json.loads(bytes(tape.header.inputs)) == {"A": 1}


def test_a_resume_refuses_a_record_after_the_end_as_verify_does(run, tmp_path):
    from flowtape.errors import ResumeRefused

    lines = lines_of(run)
    old = lines[firing(lines, 1)]
    write(run, reseal(lines + [old]))
    said = corrupt(run)
    m = load_module(FLOWS / "chain.py")
    with pytest.raises(ResumeRefused) as info:
        execute(m.main, max_workers=1, runs_dir=tmp_path / "again", resume_from=run.parent, at_step=1)
    assert f"line {said.line}: {said.rule}:" in str(info.value), str(info.value)
    assert "cut short" not in str(info.value)
