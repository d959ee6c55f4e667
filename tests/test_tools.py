"""External tools (`@tool` actors): real processes, their output files, their failures."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from flowtape.loader import load_flow
from flowtape.runner import execute

NESTED_NAMES = '''
from flowtape import Port, connect, tool, workflow


@tool(cmd="sh", args=["-c", "printf %s \\"$0\\" > \\"$1\\"", "{in.In}", "{out.Out}"])
class Echo:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")


@workflow(inputs={"In": str}, outputs={"Out": str})
def a():
    t = Echo()
    connect("In", t.In)
    connect(t.Out, "Out")


@workflow(inputs={"X": str, "Y": str})
def main():
    a__t = Echo()  # the name a tool inside `a` would have had, with '/' spelled '__'
    inner = a()
    connect("X", a__t.In)
    connect("Y", inner.In)
    connect(a__t.Out, "Top")
    connect(inner.Out, "Nested")
'''


def test_tools_of_look_alike_paths_write_files_of_their_own(write_flow, tmp_path):
    result = execute(load_flow(write_flow(NESTED_NAMES)), {"X": "from-top", "Y": "from-nested"}, max_workers=1, runs_dir=tmp_path)
    assert result.status == "succeeded", result.error
    top, nested = result.outputs["Top"][0], result.outputs["Nested"][0]
    assert top != nested
    assert open(top).read() == "from-top" and open(nested).read() == "from-nested"


def _one_tool(cmd: str, args: list[str], **options: object) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in options.items())
    return f'''
from flowtape import Port, connect, tool, workflow


@tool(cmd={cmd!r}, args={args!r}{extra})
class T:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")


@workflow(inputs={{"In": str}})
def main():
    t = T()
    connect("In", t.In)
    connect(t.Out, "Out")
'''


@pytest.mark.parametrize(("cmd", "args", "options", "says"), [
    ("true", [], {}, "exited 0 but wrote no Out"),
    ("python3", ["-c", "import sys; sys.stderr.write('e' * 100000); sys.exit(3)"], {}, "exited with code 3: …eee"),
])
def test_a_tool_that_fails_says_how_briefly(write_flow, tmp_path, cmd, args, options, says):
    result = execute(load_flow(write_flow(_one_tool(cmd, args, **options))), {"In": "x"}, runs_dir=tmp_path)
    assert result.status == "failed" and result.error is not None
    assert says in result.error.message and len(result.error.message) < 3000


def test_with_shell_the_command_is_shell_syntax_and_values_stay_values(write_flow, tmp_path):
    flow = _one_tool("printf %s {in.In} | tr a-z A-Z > {out.Out}", [], shell=True, timeout=0)
    result = execute(load_flow(write_flow(flow)), {"In": "hi; rm -rf nothing"}, runs_dir=tmp_path)
    assert result.status == "succeeded", result.error
    assert open(result.outputs["Out"][0]).read() == "HI; RM -RF NOTHING"  # one value, piped; timeout 0: none


@pytest.mark.parametrize("shown", [False, True])
def test_a_tool_is_done_when_it_exits_not_when_what_it_left_behind_closes_its_output(write_flow, tmp_path, shown):
    """A tool that leaves a process in the background holding its stdout: the firing ends with
    the tool (whose process group, that process included, is killed then), within its timeout."""
    pids = tmp_path / "bg.pid"
    flow = _one_tool("sh", ["-c", f"(sleep 300) & echo $! > {pids}; echo ok > {{out.Out}}"], timeout=20, inherit_stdio=shown)
    result = execute(load_flow(write_flow(flow)), {"In": "x"}, runs_dir=tmp_path)
    assert result.status == "succeeded", result.error
    left = int(pids.read_text())
    deadline = time.monotonic() + 10
    while _alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(left)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_killed_flowtape_takes_its_tools_and_what_they_started_with_it(write_flow, tmp_path):
    """SIGKILL gives Flowtape no chance to stop its tools: the reaper sees it die and kills them."""
    pids = tmp_path / "pids"
    flow = write_flow(_one_tool("sleep 300 & echo $$ $! > {in.In}; wait", [], shell=True))
    proc = subprocess.Popen([sys.executable, "-m", "flowtape", "run", str(flow), "--input", f"In={pids}"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (pids.exists() and pids.read_text().endswith("\n")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        tool, grandchild = map(int, pids.read_text().split())
        assert _alive(tool) and _alive(grandchild)
        proc.kill()
        proc.wait()
        while (_alive(tool) or _alive(grandchild)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(tool) and not _alive(grandchild)
    finally:
        proc.kill()
        proc.wait()
