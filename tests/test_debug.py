"""`flowtape debug RUN --step N`: everything before the firing replays, then the firing runs live
under debugpy. Driven as an editor would: a DAP client sets a breakpoint in the action, attaches,
is told `stopped` there with the recorded input in the frame's variables, continues, and the run
ends on a new tape."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import EXAMPLES, line_of
from dap import DapClient

pytest.importorskip("debugpy")


def _flowtape(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flowtape", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def _start_debug(tmp_path, *args: str) -> tuple[subprocess.Popen, int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "flowtape", "debug", *args, "--port", "0"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:
        said.append(line)
        found = re.search(r"debugger listening on 127\.0\.0\.1:(\d+)", line)
        if found:
            return proc, int(found[1]), "".join(said)
    proc.wait(timeout=30)
    raise AssertionError("no port said: " + "".join(said))


def _attach(port: int, breakpoints: dict[str, list[int]]) -> DapClient:
    client = DapClient("127.0.0.1", port)
    client.request("initialize", clientID="test", adapterID="flowtape", linesStartAt1=True, columnsStartAt1=True,
                   pathFormat="path")
    attached = client.send("attach", justMyCode=True)
    client.event("initialized")
    for path, lines in breakpoints.items():
        body = client.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": n} for n in lines])
        assert all(b["verified"] for b in body["breakpoints"]), body
    client.request("configurationDone")
    assert client.response(attached)["success"]
    return client


def _locals(client: DapClient, thread: int) -> dict[str, str]:
    frames = client.request("stackTrace", threadId=thread)["stackFrames"]
    scopes = client.request("scopes", frameId=frames[0]["id"])["scopes"]
    local = next(s for s in scopes if s["name"].lower().startswith("locals"))
    return {v["name"]: v["value"] for v in client.request("variables", variablesReference=local["variablesReference"])["variables"]}


def test_a_breakpoint_in_an_action_stops_at_its_recorded_inputs(tmp_path, write_flow):
    flow = write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class Numbers:
            upto: int
            _next: int = 1

            class Ports:
                Out = Port[int](direction="out")

            def action(self):
                if self._next > self.upto:
                    return None
                self._next += 1
                return self._next - 1

        @task
        class Scale:
            factor: int = 10

            class Ports:
                In = Port[int](direction="in")
                Out = Port[int](direction="out")

            def action(self, x):
                self.factor += 1
                return x * self.factor  # BREAK

        @workflow
        def main():
            numbers = Numbers(upto=3)
            scale = Scale()
            connect(numbers.Out, scale.In)
            connect(scale.Out, "Out")
    ''')
    done = _flowtape("run", str(flow), "--run-id", "rec", "--max-workers", "1", "--json", cwd=tmp_path)
    assert json.loads(done.stdout)["outputs"] == {"Out": [11, 24, 39]}
    steps = json.loads(_flowtape("show", "rec", "--json", cwd=tmp_path).stdout)["steps"]
    step = next(s["step"] for s in steps if (s["actor"], s["fireCount"]) == ("scale", 2))
    proc, port, _ = _start_debug(tmp_path, "rec", "--step", str(step), "--then", "live", "--run-id", "dbg")
    try:
        client = _attach(port, {str(flow): [line_of(flow, "BREAK")]})
        stopped = client.event("stopped")["body"]
        assert stopped["reason"] == "breakpoint"
        seen = _locals(client, stopped["threadId"])
        assert seen["x"] == "2"  # scale's second firing took numbers' 2, as recorded
        # and the actor's state as its first firing left it (factor 11, made 12 by this firing's first line)
        frames = client.request("stackTrace", threadId=stopped["threadId"])["stackFrames"]
        assert frames[0]["line"] == line_of(flow, "BREAK") and frames[0]["source"]["path"] == str(flow)
        self_ref = next(s for s in client.request("scopes", frameId=frames[0]["id"])["scopes"] if s["name"].lower().startswith("locals"))
        fields = client.request("variables", variablesReference=self_ref["variablesReference"])["variables"]
        scale_self = next(v for v in fields if v["name"] == "self")
        attrs = {v["name"]: v["value"] for v in client.request("variables", variablesReference=scale_self["variablesReference"])["variables"]}
        assert attrs["factor"] == "12"
        client.request("setBreakpoints", source={"path": str(flow)}, breakpoints=[])  # then let it run
        client.request("continue", threadId=stopped["threadId"])
        client.event("terminated")  # the run ended: the debuggee says so, as to an editor
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Out: [11, 24, 39]" in out and "succeeded" in err and "took other inputs" not in err
    assert _flowtape("verify", "dbg", cwd=tmp_path).returncode == 0
    summary = json.loads((tmp_path / ".flowtape" / "runs" / "dbg" / "run.json").read_text())
    assert summary["resumedFrom"] == "rec" and summary["resumedAtStep"] == step - 1


def test_debug_then_stop_ends_the_run_after_the_firing(tmp_path):
    chain = str(EXAMPLES / "chain.py")
    _flowtape("run", chain, "--run-id", "rec", "--max-workers", "1", cwd=tmp_path)
    proc, port, said = _start_debug(tmp_path, "rec", "--step", "5", "--run-id", "dbg")
    try:
        client = _attach(port, {})
        out, err = proc.communicate(timeout=120)
        client.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "debugging double's firing 2 (step 5 of run rec): steps 1 to 4 replay from the tape" in said
    assert "then the run stops" in said and "stopped · 5 steps" in err


def test_debug_refuses_what_is_no_firing(tmp_path):
    chain = str(EXAMPLES / "chain.py")
    _flowtape("run", chain, "--run-id", "rec", "--max-workers", "1", cwd=tmp_path)
    for args, said in ((["--step", "99"], "has steps 1 to 15, not 99"), (["--step", "3", "--actor", "ghost"], "no actor 'ghost'"),
                       (["--step", "1", "--actor", "add_one"], "add_one has not fired by step 1")):
        done = _flowtape("debug", "rec", *args, cwd=tmp_path)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    done = _flowtape("debug", "nope", "--step", "1", cwd=tmp_path)
    assert done.returncode == 2 and "nope" in done.stderr


def test_a_forks_first_live_firing_is_debugged_with_the_edited_input(tmp_path):
    chain = EXAMPLES / "chain.py"
    _flowtape("run", str(chain), "--run-id", "rec", "--max-workers", "1", cwd=tmp_path)
    done = _flowtape("run", str(chain), "--resume-from", "rec", "--at-step", "4", "--set", "double.In[0]=10", "--run-id", "fork",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(i for i, text in enumerate(chain.read_text().splitlines(), start=1) if "return 2 * x" in text)
    proc, port, said = _start_debug(tmp_path, "fork", "--step", "5", "--run-id", "dbg")  # double's 2nd firing, right after the edit
    try:
        client = _attach(port, {str(chain): [line]})
        stopped = client.event("stopped")["body"]
        assert _locals(client, stopped["threadId"])["x"] == "10"
        client.request("setBreakpoints", source={"path": str(chain)}, breakpoints=[])
        client.request("continue", threadId=stopped["threadId"])
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    # the fork's edits come after its step: the debug run forks its source again, with the same edit
    summary = json.loads((tmp_path / ".flowtape" / "runs" / "dbg" / "run.json").read_text())
    assert (summary["resumedFrom"], summary["resumedAtStep"], summary["edits"]) == ("rec", 4, 1)


def test_a_firing_inside_a_loop_body_is_debugged_with_the_loop_between_two_items(tmp_path):
    """Step 4 of review.py leaves its loop between two items: the resume before the firing puts the
    loop back there, and the body's triage fires live on the third draft, as recorded."""
    review = EXAMPLES / "review.py"
    _flowtape("run", str(review), "--run-id", "rec", "--max-workers", "1", cwd=tmp_path)
    line = next(i for i, text in enumerate(review.read_text().splitlines(), start=1) if text.strip() == "return draft")
    proc, port, said = _start_debug(tmp_path, "rec", "--step", "5", "--actor", "triage", "--then", "live", "--run-id", "dbg")
    try:
        client = _attach(port, {str(review): [line]})
        stopped = client.event("stopped")["body"]
        seen = _locals(client, stopped["threadId"])
        assert seen["draft"] == "'Resume at any step replays the recorded firings.'" and seen["verdict"] == "'approve'"
        client.request("setBreakpoints", source={"path": str(review)}, breakpoints=[])
        client.request("continue", threadId=stopped["threadId"])
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "debugging triage's firing 3 (step 5 of run rec): steps 1 to 4 replay from the tape" in said
    assert "took other inputs" not in err and "4 drafts reviewed: 2 approved, 2 revised" in out
