"""A folder the user opens may hold anything someone else planted: the real server over stdio,
against run directories and tapes that name FIFOs, devices, files outside the workspace and
processes that are not the run's. It must neither hang, grow, nor signal what is not its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from flowtape.chain import reseal
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities

from .conftest import CONFIG, collector, command, count_flow, request, start_session, uri_of, write_flow

INVALID, NOT_FOUND = -32602, -32001


def cli_run(workspace: Path, flow: Path, *extra: str) -> Path:
    """A run made in a terminal in the workspace: its run directory."""
    done = subprocess.run([sys.executable, "-m", "flowtape", "run", str(flow), "--json", *extra], cwd=workspace,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["runId"]
    return workspace / ".flowtape" / "runs" / run_id


def forge(source: Path, run_id: str, header: Callable[[dict[str, Any]], None] | None = None,
          summary: Callable[[dict[str, Any]], None] | None = None, keep_end: bool = True) -> Path:
    """A copy of run `source` as someone else would plant it: the header edited and every hash
    recomputed (so the tape verifies: the chain is not a signature), no seal of this machine."""
    target = source.parent / run_id
    target.mkdir()
    lines = (source / "tape.jsonl").read_bytes().splitlines()
    first = json.loads(lines[0])
    first["runId"] = run_id
    if header is not None:
        header(first)
    lines[0] = json.dumps(first, separators=(",", ":")).encode()
    if not keep_end:
        lines = lines[:-1]
    (target / "tape.jsonl").write_bytes(b"".join(line + b"\n" for line in reseal(lines)))
    data = json.loads((source / "run.json").read_text())
    data.update(id=run_id)
    data.pop("tape", None)
    if summary is not None:
        summary(data)
    (target / "run.json").write_text(json.dumps(data))
    return target


def name_files(path: str) -> Callable[[dict[str, Any]], None]:
    def edit(header: dict[str, Any]) -> None:
        header["flowFile"] = path
        for actor in header["actors"]:
            actor["file"] = path
    return edit


async def _error(call: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await call
    return info.value


async def test_files_a_tape_names_are_read_guarded(client: LanguageClient, workspace: Path) -> None:
    """A FIFO, /proc/self/fd/0 and /dev/zero named as the flow and actor files: every request on
    those runs is answered (the steps placed on line 1, with no length), and so is every other."""
    flow = write_flow(workspace, "count.py", count_flow(3))
    real = cli_run(workspace, flow)
    fifo = workspace / "pipe.py"
    os.mkfifo(fifo)
    named = {"fifo": str(fifo), "stdin": "/proc/self/fd/0", "zero": "/dev/zero", "dir": str(workspace)}
    for name, path in named.items():
        forge(real, f"planted-{name}", header=name_files(path))
    for name in named:
        page = await request(client, "flowtape/getSteps", {"runId": f"planted-{name}", "from": 1, "limit": 50})
        assert [s["step"] for s in page["steps"]] == [1, 2, 3, 4, 5, 6]
        assert {s["range"]["end"]["character"] for s in page["steps"]} == {0}
        detail = await request(client, "flowtape/stepDetail", {"runId": f"planted-{name}", "step": 2})
        assert detail["step"] == 2
    runs = await request(client, "flowtape/runs", {})
    assert {f"planted-{name}" for name in named} <= {r["runId"] for r in runs["runs"]}
    page = await request(client, "flowtape/getSteps", {"runId": real.name, "from": 1, "limit": 50})
    assert page["steps"][0]["range"]["end"]["character"] > 0  # the real run's lines are read


def test_a_fifo_or_device_as_run_json_hangs_nothing(tmp_path: Path) -> None:
    """`flowtape runs` and `flowtape verify` on a run directory whose run.json is a FIFO, or a
    symlink to /dev/zero: answered in time, the run listed from its tape."""
    flow = write_flow(tmp_path, "count.py", count_flow(3))
    real = cli_run(tmp_path, flow)
    fifo_run = forge(real, "fifo-json")
    (fifo_run / "run.json").unlink()
    os.mkfifo(fifo_run / "run.json")
    zero_run = forge(real, "zero-json")
    (zero_run / "run.json").unlink()
    (zero_run / "run.json").symlink_to("/dev/zero")
    listed = subprocess.run([sys.executable, "-m", "flowtape", "runs"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "fifo-json" in listed.stdout and "zero-json" in listed.stdout
    for run in (fifo_run, zero_run):
        checked = subprocess.run([sys.executable, "-m", "flowtape", "verify", str(run)], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stderr


@pytest.fixture
def sleeper(workspace: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Planted before the server starts: run.json files that say `running` with the pid of a
    live, unrelated `sleep` (one with no stamp, one with a stamp that is not that process's)."""
    flow = write_flow(workspace, "count.py", count_flow(3))
    real = cli_run(workspace, flow)
    proc = subprocess.Popen(["sleep", "60"])

    def running(data: dict[str, Any]) -> None:
        data.update(status="running", pid=proc.pid, finishedAt=None)

    def stamped(data: dict[str, Any]) -> None:
        running(data)
        data["process"] = {"pid": proc.pid, "started": 1, "cmdline": "0" * 32}

    forge(real, "planted-bare", summary=running, keep_end=False)
    forge(real, "planted-stamp", summary=stamped, keep_end=False)
    yield proc
    proc.kill()
    proc.wait()


@pytest_lsp.fixture(config=CONFIG)
async def planted_client(lsp_client: LanguageClient, workspace: Path, sleeper: subprocess.Popen[bytes]):  # type: ignore[no-untyped-def]
    await start_session(lsp_client, workspace, "visual-studio-code")
    yield
    await lsp_client.shutdown_session()


async def test_a_run_json_naming_another_process_gets_it_never_signalled(
    planted_client: LanguageClient, workspace: Path, sleeper: subprocess.Popen[bytes],
) -> None:
    """A stop signals nothing that is not provably the run's: the
    run is reported gone, `failed`, and the process lives on."""
    for run_id in ("planted-bare", "planted-stamp"):
        answer = await command(planted_client, "flowtape.stop", {"runId": run_id})
        assert sleeper.poll() is None, "the server signalled a process that is not the run's"
        assert answer == {"runId": run_id, "stopped": False, "status": "failed"}
    runs = {r["runId"]: r for r in (await request(planted_client, "flowtape/runs", {}))["runs"]}
    assert runs["planted-bare"]["status"] == runs["planted-stamp"]["status"] == "failed"
    listed = subprocess.run([sys.executable, "-m", "flowtape", "runs"], cwd=workspace, capture_output=True,
                            text=True, timeout=60)
    assert "planted-bare" in listed.stdout and sleeper.poll() is None


async def test_a_terminal_run_is_still_stopped(client: LanguageClient, workspace: Path) -> None:
    """The run's own process (its recorded stamp holds) is still stopped from the editor."""
    flow = write_flow(workspace, "slow.py", count_flow(10_000, delay=0.02))
    proc = subprocess.Popen([sys.executable, "-m", "flowtape", "run", str(flow)], cwd=workspace,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = await collector(client).wait_for("flowtape/runStarted", timeout=30)
        answer = await command(client, "flowtape.stop", {"runId": started["runId"]})
        assert answer == {"runId": started["runId"], "stopped": True, "status": "stopped"}
        assert proc.wait(10) is not None
    finally:
        if proc.poll() is None:
            proc.kill()


async def test_rerun_by_a_file_outside_the_workspace_is_refused_unread(client: LanguageClient, workspace: Path, tmp_path: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(3))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await collector(client).finished(run["runId"])
    outside = tmp_path / "elsewhere.py"
    outside.write_text(count_flow(3))
    link = workspace / "link.py"
    link.symlink_to(outside)
    for uri in (uri_of(outside), "file://" + str(link)):
        error = await _error(command(client, "flowtape.rerunActor", {"runId": run["runId"], "uri": uri, "line": 3}))
        assert error.code == INVALID
        assert "outside the workspace" in error.message


async def test_a_nul_byte_in_a_file_a_tape_names_is_a_clear_error(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(3))
    real = cli_run(workspace, flow)
    nul = str(workspace / "co\x00unt.py")
    forge(real, "planted-nul", header=name_files(nul), summary=lambda data: data.update(flowFile=nul))
    page = await request(client, "flowtape/getSteps", {"runId": "planted-nul", "from": 1, "limit": 50})
    assert len(page["steps"]) == 6
    detail = await request(client, "flowtape/stepDetail", {"runId": "planted-nul", "step": 6})
    assert detail["step"] == 6
    error = await _error(command(client, "flowtape.rerunActor", {"runId": "planted-nul", "uri": uri_of(flow), "line": 40}))
    assert error.code == NOT_FOUND and "Traceback" not in error.message
    error = await _error(command(client, "flowtape.resumeAtStep", {"runId": "planted-nul", "step": 1}))
    assert error.code == INVALID and "Traceback" not in error.message, error.message


EVIL = '''\
import pathlib

pathlib.Path(__file__).with_name("{marker}").write_text("imported")  # flowtape


def main():
    return None
'''


async def test_a_tape_naming_another_file_as_its_flow_runs_nothing(client: LanguageClient, workspace: Path) -> None:
    """The flow a resume runs is the one the run ran: a tape that names another workspace file
    as its flow is refused before that file is run (it would have written its marker)."""
    flow = write_flow(workspace, "count.py", count_flow(3))
    real = cli_run(workspace, flow)
    evil = write_flow(workspace, "tool.py", EVIL.format(marker="ran.txt"))

    def as_evil(header: dict[str, Any]) -> None:
        header["flowFile"] = str(evil)

    forge(real, "planted-flow", header=as_evil, summary=lambda data: data.update(flowFile=str(evil)))
    for name, params in (("flowtape.resumeAtStep", {"runId": "planted-flow", "step": 2}),
                         ("flowtape.rerunActor", {"runId": "planted-flow", "actor": "double"})):
        error = await _error(command(client, name, params))
        assert error.code == INVALID
        assert "is not the flow run planted-flow ran" in error.message and "none of the run's actors" in error.message
    assert not (workspace / "ran.txt").exists()
    # the run's own flow, edited since (a line added above the actors), is still the flow it ran
    flow.write_text("# a comment\n" + flow.read_text())
    again = await command(client, "flowtape.resumeAtStep", {"runId": real.name, "step": 2})
    assert (await collector(client).finished(again["runId"]))["status"] == "succeeded"


async def test_the_checker_imports_only_files_inside_the_workspace(client: LanguageClient, workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    far = outside / "far.py"
    far.write_text(EVIL.format(marker="far-ran.txt"))
    link = workspace / "link.py"
    link.symlink_to(outside / "linked.py")
    (outside / "linked.py").write_text(EVIL.format(marker="link-ran.txt"))
    near = write_flow(workspace, "near.py", EVIL.format(marker="near-ran.txt"))
    for path in (far, link, near):  # (opened as the editor names them: the link by its own name)
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(
            uri="file://" + str(path), language_id="python", version=1, text=path.read_text())))
    deadline = time.monotonic() + 30
    while not (workspace / "near-ran.txt").exists():  # the file inside is checked (imported) ...
        assert time.monotonic() < deadline, "the file inside the workspace was never checked"
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    assert not (outside / "far-ran.txt").exists()  # ... the ones outside never are
    assert not (outside / "link-ran.txt").exists()


@pytest_lsp.fixture(config=CONFIG)
async def untrusted(lsp_client: LanguageClient, workspace: Path):  # type: ignore[no-untyped-def]
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("neovim"), root_uri=uri_of(workspace), initialization_options={"trust": "none"},
    ))
    yield
    await lsp_client.shutdown_session()


async def test_an_untrusted_folder_runs_and_imports_nothing(untrusted: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "flow.py", EVIL.format(marker="ran.txt").replace("def main", "@workflow\ndef main")
                      .replace("import pathlib", "import pathlib\nfrom flowtape import workflow"))
    marked = "import pathlib\npathlib.Path(__file__).with_name('count-ran.txt').write_text('imported')\n"
    real = cli_run(workspace, write_flow(workspace, "count.py", marked + count_flow(3)))
    (workspace / "count-ran.txt").unlink()  # (the terminal's run imported it)
    untrusted.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(
        uri=uri_of(flow), language_id="python", version=1, text=flow.read_text())))
    for name, params in (("flowtape.run", {"uri": uri_of(flow)}), ("flowtape.resumeAtStep", {"runId": real.name}),
                         ("flowtape.rerunActor", {"runId": real.name, "actor": "double"})):
        error = await _error(command(untrusted, name, params))
        assert error.code == -32004 and "not trusted" in error.message
    lenses = await untrusted.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri_of(flow))))
    assert [lens.command.title for lens in lenses] == ["🔒 Run: this folder is not trusted, so Flowtape runs nothing"]
    page = await request(untrusted, "flowtape/getSteps", {"runId": real.name, "from": 1, "limit": 10})
    assert len(page["steps"]) == 6  # its tapes are still read
    # what a fork may edit is what the tape holds: the defaults of an actor not fired yet would need the flow imported
    found = await request(untrusted, "flowtape/editables", {"runId": real.name, "step": 1})
    wheres = [e["where"] for e in found["editables"]]
    assert "count.i" in wheres and "double.total" not in wheres
    await asyncio.sleep(2.0)
    assert not (workspace / "ran.txt").exists() and not (workspace / "count-ran.txt").exists()


SPAWNER = '''\
import os
import pathlib
import subprocess
import time

from flowtape import Port, connect, task, workflow

PIDS = pathlib.Path(__file__).with_name("pids.txt")


@task
class Spawn:
    class Ports:
        Out = Port[int](direction="out")

    done: bool = False

    def action(self):
        if self.done:
            return None
        self.done = True
        grouped = subprocess.Popen(["sleep", "300"])
        alone = subprocess.Popen(["sleep", "300"], start_new_session=True)
        PIDS.write_text(f"{grouped.pid} {alone.pid}")
        if HOW == "exit":
            os._exit(3)
        time.sleep(300)
        return 1


@workflow
def main():
    spawn = Spawn()
    connect(spawn.Out, "Out")
'''


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("how", ["exit", "sigkill"])
async def test_what_a_flow_started_goes_when_it_dies_by_itself(client: LanguageClient, workspace: Path, how: str) -> None:
    """A flow the server started that calls os._exit, or is SIGKILLed from outside, takes with it
    the processes it started, in its process group and in a session of their own."""
    flow = write_flow(workspace, "spawn.py", SPAWNER.replace("HOW ==", f"{how!r} =="))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    deadline = time.monotonic() + 30
    while not (workspace / "pids.txt").exists() or len((workspace / "pids.txt").read_text().split()) < 2:
        assert time.monotonic() < deadline, "the flow never started its processes"
        await asyncio.sleep(0.05)
    pids = [int(p) for p in (workspace / "pids.txt").read_text().split()]
    try:
        if how == "sigkill":
            summary = json.loads((Path(run["runDir"]) / "run.json").read_text())
            os.kill(summary["pid"], signal.SIGKILL)
        done = await collector(client).finished(run["runId"], timeout=30)
        assert done["status"] == "failed"
        deadline = time.monotonic() + 10
        while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert [pid for pid in pids if not _gone(pid)] == []
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


BIG = '''\
from flowtape import Port, connect, task, workflow


@task
class Blob:
    class Ports:
        Out = Port[str](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 40:
            return None
        self.i += 1
        return str(self.i) * 300_000


@workflow
def main():
    blob = Blob()
    connect(blob.Out, "Out")
'''


async def test_a_big_tape_from_elsewhere_is_answered_at_once_and_checked_meanwhile(client: LanguageClient, workspace: Path) -> None:
    """A tape over the size checked first (8 MB) and not sealed here: its first page is answered
    while it is verified in the background; found edited, it is said, and refused from then on."""
    real = cli_run(workspace, write_flow(workspace, "big.py", BIG))
    assert (real / "tape.jsonl").stat().st_size > 8 << 20
    target = forge(real, "planted-big")
    lines = (target / "tape.jsonl").read_bytes().splitlines()
    at = max(i for i, line in enumerate(lines) if line.startswith((b'{"t":"f"', b'{"t":"F"')))  # (format 6 too)
    lines[at] = lines[at].replace(b'"40404040', b'"04040404', 1)
    (target / "tape.jsonl").write_bytes(b"".join(line + b"\n" for line in reseal(lines)))
    await collector(client).finished("planted-big", timeout=60)  # (found in the runs directory, and read)
    page = await request(client, "flowtape/getSteps", {"runId": "planted-big", "from": 1, "limit": 5})
    assert [s["step"] for s in page["steps"]] == [1, 2, 3, 4, 5]
    deadline = time.monotonic() + 60
    while not any("planted-big" in m.message for m in client.messages):
        assert time.monotonic() < deadline, "the background check never said the tape is damaged"
        await asyncio.sleep(0.1)
    error = await _error(request(client, "flowtape/getSteps", {"runId": "planted-big", "from": 1, "limit": 5}))
    assert error.code == -32003 and "planted-big's tape is damaged" in error.message
