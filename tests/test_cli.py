"""The `flowtape` command: run (human and --json), runs, show, show --step, verify, and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import flowtape
import pytest
from conftest import EXAMPLES, GEN_FLOW
from flowtape.cli import main
from flowtape.tape import FORMAT_VERSION

CHAIN = str(EXAMPLES / "chain.py")


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """`cli(*args)` runs `flowtape ARGS --runs-dir RUNS` in-process; returns (code, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    runs = str(tmp_path / "runs")

    def call(*args: str, runs_dir: bool = True) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, "--runs-dir", runs] if runs_dir else list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_run_prints_outputs_on_stdout_and_a_summary_on_stderr(cli):
    code, out, err = cli("run", CHAIN, "--run-id", "r1")
    assert code == 0
    assert out == "Out: [3, 5, 7, 9, 11]\n"
    assert err.startswith("succeeded · 15 steps · 15 firings · tape ") and "r1" in err


def test_run_json(cli):
    code, out, err = cli("run", CHAIN, "--json", "--run-id", "r1")
    assert code == 0
    result = json.loads(out)
    assert result["status"] == "succeeded" and result["outputs"] == {"Out": [3, 5, 7, 9, 11]}
    assert result["runId"] == "r1" and result["steps"] == 15
    assert out.count("\n") == 1


def test_run_with_inputs_and_no_tape(cli, write_flow, tmp_path):
    flow = write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class Greet:
            class Ports:
                Name = Port[str](direction="in")
                Times = Port[int](direction="in")
                Out = Port[str](direction="out")

            def action(self, name, times):
                return f"hello {name}" * times

        @workflow
        def main():
            g = Greet()
            connect("Name", g.Name)
            connect("Times", g.Times)
            connect(g.Out, "Out")
    ''')
    code, out, _ = cli("run", str(flow), "--input", "Name=ada", "--input", "Times=2", "--no-tape")
    assert code == 0 and out == "Out: ['hello adahello ada']\n"
    assert not (tmp_path / "runs").exists()


def test_runs_lists_newest_first(cli):
    code, out, _ = cli("runs")
    assert code == 0 and out.startswith("no runs in ")
    cli("run", CHAIN, "--run-id", "first")
    cli("run", CHAIN, "--run-id", "second")
    code, out, _ = cli("runs")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert lines[0].startswith("second") and lines[1].startswith("first")
    assert "main" in lines[0] and "succeeded" in lines[0] and "15 steps" in lines[0]
    # a run directory copied under another name is listed by that name, which is what `show` takes
    import shutil

    shutil.copytree("runs/first", "runs/kept")
    code, out, _ = cli("runs")
    kept = [line for line in out.splitlines() if line.startswith("kept")]
    assert len(kept) == 1 and kept[0].endswith("(a copy of run first)")
    assert cli("show", "kept")[0] == 0
    # a run whose run.json is unreadable or gone is still listed, as its tape tells it; a folder
    # whose tape is not a file is no run
    Path("runs/kept/run.json").write_text("{bad")
    shutil.copytree("runs/first", "runs/bare")
    Path("runs/bare/run.json").unlink()
    Path("runs/odd/tape.jsonl").mkdir(parents=True)
    code, out, _ = cli("runs")
    listed = {line.split()[0]: line for line in out.splitlines()}
    assert sorted(listed) == ["bare", "first", "kept", "second"]
    assert all("unknown" in listed[name] and "15 steps" in listed[name] for name in ("bare", "kept"))
    # a pid no process can have (run.json edited by hand) is a process that is gone, not a crash
    for pid in (2**32, 0, -1):
        summary = json.loads(Path("runs/second/run.json").read_text())
        Path("runs/second/run.json").write_text(json.dumps({**summary, "status": "running", "pid": pid}))
        code, out, err = cli("runs")
        assert code == 0 and err == "" and "second" in out
        assert cli("run", CHAIN, "--resume-from", "second", "--at-step", "3", "--run-id", f"from-{pid}")[0] == 0


def test_show_lists_the_steps_and_the_end(cli):
    cli("run", CHAIN, "--run-id", "r1")
    code, out, _ = cli("show", "r1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("run r1 · workflow main · ") and lines[0].endswith("chain.py")
    steps = [line for line in lines if " · fire " in line]
    assert len(steps) == 15
    assert steps[0].split() == ["1", "·", "numbers", "·", "fire", "1", "·", "seq", "1"]
    assert sorted(line.split()[2] for line in steps) == ["add_one"] * 5 + ["double"] * 5 + ["numbers"] * 5
    assert lines[-1] == "succeeded · outputs {'Out': [3, 5, 7, 9, 11]}"


def test_show_accepts_a_run_directory(cli, tmp_path):
    cli("run", CHAIN, "--run-id", "r1")
    code, out, _ = cli("show", str(tmp_path / "runs" / "r1"), runs_dir=False)
    assert code == 0 and out.startswith("run r1 ")


def test_show_a_step(cli):
    cli("run", CHAIN, "--run-id", "r1", "--max-workers", "1")  # one worker: a deterministic order
    # rounds: numbers emits 1 (step 1), then double takes it (step 2), then add_one (step 3), ...
    code, out, _ = cli("show", "r1", "--step", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("step 2: double (task) fire 1")
    text = "\n".join(lines)
    assert "numbers.Out->double.In: 1" in text  # took the first number
    assert "double.Out->add_one.In: 2" in text  # put its double
    assert "numbers: fired 1 · {'_next': 2}" in text  # state after the step: numbers has emitted only 1
    assert "double: fired 1 · no state kept" in text and "add_one: fired 0 · no state kept" in text


def test_verify(cli):
    cli("run", CHAIN, "--run-id", "r1")
    code, out, _ = cli("verify", "r1")
    assert code == 0
    assert out.startswith("ok: ") and "15 firings · 15 steps · succeeded" in out


def test_verify_refuses_a_tampered_tape(cli, tmp_path):
    cli("run", CHAIN, "--run-id", "r1")
    tape = tmp_path / "runs" / "r1" / "tape.jsonl"
    lines = tape.read_text(encoding="utf-8").splitlines(keepends=True)
    index = [i for i, line in enumerate(lines) if line.startswith('{"t":"F",')][1]  # the second firing
    lines[index] = lines[index].replace('{"t":"F",', '{"t":"F","seq":7,')
    tape.write_text("".join(lines), encoding="utf-8")
    code, out, err = cli("verify", "r1")
    assert code == 1 and out == ""
    assert err.startswith("flowtape: corrupt tape: line ") and err.count("\n") == 1


FAILS_AT_3 = """
    from flowtape import Port, action, connect, guard, task, workflow

    @task
    class Count:
        n: int = 0
        class Ports:
            Out = Port[int](direction="out")
        @action(consumes={})
        @guard(lambda self: self.n < 5)
        def emit(self):
            self.n += 1
            if self.n == 3:
                raise ValueError("three")
            return self.n

    @workflow
    def main():
        c = Count()
        connect(c.Out, "Out")
"""


def test_verify_holds_run_json_to_the_tape(cli, write_flow, tmp_path):
    cli("run", CHAIN, "--run-id", "ok")
    cli("run", str(write_flow(FAILS_AT_3)), "--run-id", "failed")
    cli("run", CHAIN, "--max-workers", "1", "--max-steps", "4", "--run-id", "stopped")
    cli("run", CHAIN, "--resume-from", "stopped", "--at-step", "2", "--run-id", "resumed")
    for run, status in [("ok", "succeeded"), ("failed", "failed"), ("stopped", "stopped"), ("resumed", "succeeded")]:
        code, out, err = cli("verify", run)
        assert code == 0 and out.endswith(f" · {status}\n"), err
    summary = tmp_path / "runs" / "failed" / "run.json"  # edited to hide the failure
    data = json.loads(summary.read_text(encoding="utf-8"))
    data.update(status="succeeded", outputs={"Out": [1]})
    summary.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = cli("verify", "failed")
    assert code == 1 and out == ""
    assert err == ("flowtape: run.json disagrees with the tape, which holds together: status 'succeeded' (the tape: "
                   "'failed'); other outputs than the tape's end record (run.json was edited, or copied from another run)\n")
    summary.write_text((tmp_path / "runs" / "ok" / "run.json").read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = cli("verify", "failed")
    assert code == 1 and "together: id 'ok' (the tape: 'failed'); status 'succeeded'" in err


@pytest.mark.parametrize("command", [["show", "nope"], ["show", "nope", "--step", "1"], ["verify", "nope"]])
def test_an_unknown_run_id_is_a_usage_error(cli, command):
    code, out, err = cli(*command)
    assert code == 2 and out == ""
    assert err.startswith("flowtape: no run 'nope'") and err.count("\n") == 1


@pytest.mark.parametrize("step", ["0", "16", "-1"])
def test_a_step_out_of_range_is_a_clear_error(cli, step):
    cli("run", CHAIN, "--run-id", "r1")
    code, out, err = cli("show", "r1", "--step", step)
    assert code == 2 and out == ""
    assert err == f"flowtape: step {step} is out of range: run r1 has steps 1 to 15\n"


def test_the_installed_command(tmp_path):
    """The console script itself, as a child process, exits 0 and 2 as documented."""
    exe = Path(sys.executable).with_name("flowtape")
    ok = subprocess.run([str(exe), "run", CHAIN, "--runs-dir", "runs"], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout == "Out: [3, 5, 7, 9, 11]\n"
    listed = subprocess.run([str(exe), "runs", "--runs-dir", "runs"], cwd=tmp_path, capture_output=True, text=True)
    assert listed.returncode == 0 and "succeeded" in listed.stdout
    bad = subprocess.run([str(exe), "show", "nope", "--runs-dir", "runs"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("flowtape: no run 'nope'")
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout == f"flowtape {flowtape.__version__} (tape format {FORMAT_VERSION})\n"


TYPED_INPUT = '''
    from flowtape import Port, connect, task, workflow

    @task
    class Inc:
        class Ports:
            In = Port[int](direction="in")
            Out = Port[int](direction="out")

        def action(self, x):
            return x + 1

    @workflow(inputs={"In": int}, outputs={"Out": int})
    def main():
        a = Inc()
        connect("In", a.In)
        connect(a.Out, "Out")
'''


def test_an_input_of_the_wrong_type_is_refused_before_anything_runs(cli, write_flow, tmp_path):
    flow = write_flow(TYPED_INPUT)
    code, out, err = cli("run", str(flow), "--input", "In=abc")
    assert code == 2 and out == ""
    assert err == "flowtape: input 'In' of workflow main expects int, not str 'abc'\n"
    code, out, err = cli("run", str(flow), "--input", "In=true")
    assert code == 2 and err == "flowtape: input 'In' of workflow main expects int, not bool True\n"
    assert not (tmp_path / "runs").exists()


def test_the_items_of_a_typed_container_input_are_checked_too():
    from flowtape.fits import fits as _fits

    assert _fits([1, 2], list[int]) and not _fits(["a"], list[int]) and not _fits([True], list[int])
    assert _fits({"a": 1.5, "b": 2}, dict[str, float]) and not _fits({"a": "x"}, dict[str, float])
    assert _fits(None, int | None) and _fits(3, int | None) and not _fits(True, int | None)
    assert _fits((1, "a"), tuple[int, str]) and _fits((1, 2, 3), tuple[int, ...]) and not _fits((1, "x"), tuple[int, ...])
    assert not _fits((1,), tuple[int, str]) and _fits([[1], [2, 3]], list[list[int]]) and not _fits([[1], ["x"]], list[list[int]])


def test_a_json_list_given_for_a_declared_tuple_or_set_is_one(cli, write_flow):
    flow = write_flow(TYPED_INPUT.replace('inputs={"In": int}, outputs={"Out": int}', 'inputs={"In": int, "T": tuple[int, str], "S": set[int]}')
                      .replace('connect(a.Out, "Out")', 'connect(a.Out, "Out")\n        connect("T", "TOut")\n        connect("S", "SOut")'))
    code, out, err = cli("run", str(flow), "--input", "In=1", "--input", 'T=[1, "a"]', "--input", "S=[3, 3, 4]")
    assert code == 0 and "TOut: [(1, 'a')]" in out and "SOut: [{3, 4}]" in out, (out, err)
    code, out, err = cli("run", str(flow), "--input", "In=1", "--input", "T=[1, 2]")
    assert code == 2 and "expects tuple[int, str], not tuple (1, 2)" in err


def test_a_declared_input_left_out_is_pointed_out(cli, write_flow):
    flow = write_flow(TYPED_INPUT)
    code, out, err = cli("run", str(flow))
    assert code == 0 and out == "Out: []\n"
    assert "workflow input 'In' gets no value (--input In=VALUE)" in err
    code, out, err = cli("run", str(flow), "--input", "In=41")
    assert code == 0 and out == "Out: [42]\n" and "gets no value" not in err
    code, out, err = cli("run", str(flow), "--at-step", "3")  # a usage error is said alone
    assert code == 2 and err == "flowtape: --at-step needs --resume-from\n"


def test_an_input_wired_to_nothing_is_warned_of(cli, write_flow):
    """A parameter of the workflow function is no input: `def main(n=3)` builds with 3."""
    flow = write_flow(GEN_FLOW.format(body='''
@workflow(inputs={"N": int})
def main(N=3):
    g = Gen(n=N)
    connect(g.Out, "Out")
'''))
    code, out, err = cli("run", str(flow), "--input", "N=60", "--json")
    assert code == 0 and json.loads(out)["outputs"] == {"Out": [1, 2, 3]}
    assert json.loads(out)["warnings"] == ["input 'N' was given, but nothing in workflow main is wired to it: its value was not used"]


def test_a_runs_dir_that_cannot_be_created_is_a_clear_error(cli, tmp_path):
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the runs directory should go")
    code, out, err = cli("run", CHAIN, "--runs-dir", str(blocker), runs_dir=False)
    assert code == 2 and out == ""
    assert err.startswith(f"flowtape: cannot create the run directory {blocker}/") and err.count("\n") == 1


def test_show_a_step_of_a_trusted_tape_starts_from_a_checkpoint_and_says_the_same(cli, monkeypatch):
    from flowtape import checkpoints, trust

    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 4)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    cli("run", CHAIN, "--run-id", "r1", "--max-workers", "1")
    fast = [cli("show", "r1", "--step", str(n)) for n in range(1, 16)]
    monkeypatch.setattr(trust, "file_sealed", lambda path, seal: False)  # as a tape from elsewhere
    verified = [cli("show", "r1", "--step", str(n)) for n in range(1, 16)]
    assert fast == verified and all(code == 0 for code, _, _ in fast)


def test_show_a_step_of_a_changed_tape_verifies_it_and_refuses_it(cli, tmp_path):
    from flowtape.chain import reseal

    cli("run", CHAIN, "--run-id", "r1", "--max-workers", "1")
    tape = tmp_path / "runs" / "r1" / "tape.jsonl"
    lines = tape.read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if b'"a":"double"' in line and b'"p"' in line)
    lines[at] = lines[at].replace(b'"p":[[2,[2]]]', b'"p":[[2,[4]]]')
    tape.write_bytes(b"".join(line + b"\n" for line in reseal(lines)))
    code, out, err = cli("show", "r1", "--step", "12")
    assert code == 1 and out == "" and "consumed digests match" in err


def test_what_a_tape_says_is_shown_not_obeyed_by_the_terminal(cli, tmp_path):
    """A run.json or tape from elsewhere may hold escape sequences: they are printed visibly."""
    cli("run", CHAIN, "--run-id", "r1")
    summary_path = tmp_path / "runs" / "r1" / "run.json"
    summary = json.loads(summary_path.read_text())
    summary["workflow"] = "main\x1b]0;owned\x07\rFAKE"
    summary_path.write_text(json.dumps(summary))
    code, out, _ = cli("runs")
    assert code == 0 and "\x1b" not in out and "\r" not in out
    assert "main\\x1b]0;owned\\x07\\x0dFAKE" in out
    # a line break would print a run that is not there, a bidi override would reorder what is shown
    summary["workflow"] = "main\nfake  main  succeeded  9 steps"
    summary["startedAt"] = "\u202e2026"
    summary_path.write_text(json.dumps(summary))
    code, out, _ = cli("runs")
    assert code == 0 and out.count("\n") == 1 and "\u202e" not in out
    assert "main\\nfake" in out and "\\u202e2026" in out

    # the same in the error messages built from what they say
    lines = (tmp_path / "runs" / "r1" / "tape.jsonl").read_bytes().splitlines()
    (tmp_path / "runs" / "r1" / "tape.jsonl").write_bytes(b"".join(line + b"\n" for line in lines[:-1]))
    summary["status"] = "succeeded\x1b[2J\x1b]0;owned\x07"
    summary_path.write_text(json.dumps(summary))
    code, _, err = cli("verify", "r1")
    assert code == 1 and "cut short" in err
    assert "\x1b" not in err and "\x07" not in err and "succeeded\\x1b[2J" in err


def test_an_input_declared_str_takes_the_text_as_it_is(cli, tmp_path):
    flow = tmp_path / "words.py"
    flow.write_text(
        "from flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass Echo:\n    class Ports:\n        In = Port[str](direction='in')\n"
        "        Out = Port[str](direction='out')\n\n    def action(self, s):\n        return s + '!'\n\n\n"
        "@workflow(inputs={'Word': str})\ndef main():\n    e = Echo()\n    connect('Word', e.In)\n    connect(e.Out, 'Out')\n"
    )
    code, out, err = cli("run", str(flow), "--input", "Word=42", "--json")
    assert code == 0, err
    assert json.loads(out)["outputs"] == {"Out": ["42!"]}


def test_max_steps_stops_a_flow_that_never_ends(cli, tmp_path):
    flow = tmp_path / "forever.py"
    flow.write_text(
        "from flowtape import Port, action, connect, task, workflow\n\n\n"
        "@task\nclass Ticks:\n    n: int = 0\n\n    class Ports:\n        Out = Port[int](direction='out')\n\n"
        "    @action(consumes={})\n    def tick(self):\n        self.n += 1\n        return self.n\n\n\n"
        "@workflow\ndef main():\n    t = Ticks()\n    connect(t.Out, 'Out')\n"
    )
    code, _, err = cli("run", str(flow), "--max-workers", "1", "--max-steps", "50", "--run-id", "f")
    assert code == 1 and "stopped · 50 steps" in err and "stopped at --max-steps 50: go on with --resume-from f" in err
    assert cli("verify", "f")[0] == 0
    code, _, err = cli("run", str(flow), "--max-workers", "1", "--max-steps", "80", "--resume-from", "f")
    assert code == 1 and "stopped · 80 steps" in err


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--max-workers", "0", "argument --max-workers: must be from 1 to 256, not 0"),
    ("--max-workers", "1000000000", "argument --max-workers: must be from 1 to 256, not 1000000000"),
    ("--max-steps", "0", "argument --max-steps: must be at least 1, not 0"),
    ("--max-steps", "x", "argument --max-steps: 'x' is not a whole number"),
    ("--at-step", "1_0", "argument --at-step: '1_0' is not a whole number"),  # int() would take these
    ("--at-step", "\u0663", "argument --at-step: '\u0663' is not a whole number"),
    ("--at-step", " 3", "argument --at-step: ' 3' is not a whole number"),
])
def test_a_bad_count_is_refused_by_its_option_name_and_leaves_nothing(tmp_path, monkeypatch, capsys, option, value, says):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:  # argparse's own exit
        main(["run", CHAIN, option, value])
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == "" and err == f"flowtape: {says}\n"
    assert not (tmp_path / ".flowtape").exists()
    with pytest.raises(SystemExit):  # and with --json, the one JSON object says it too
        main(["run", CHAIN, option, value, "--json"])
    out, err = capsys.readouterr()
    assert json.loads(out) == {"status": "error", "error": says}


def test_input_mistakes_are_said_before_anything_runs(cli, write_flow, tmp_path):
    flow = write_flow(TYPED_INPUT)
    code, out, err = cli("run", str(flow), "--input", "In=1", "--input", "In=2")
    assert code == 2 and err == "flowtape: --input In is given 2 times: give each input once\n"
    assert not (tmp_path / "runs").exists()


def test_a_usage_error_under_json_is_one_json_object_too(cli, write_flow):
    flow = write_flow(TYPED_INPUT)
    code, out, err = cli("run", str(flow), "--input", "Nope=1", "--json")
    assert code == 2 and json.loads(out) == {"status": "error", "error": err.splitlines()[-1].removeprefix("flowtape: ")}
    assert "Nope" in err
    broken = write_flow("from flowtape import task\n\nx = (\n", name="broken.py")  # the flow at fault: where
    code, out, err = cli("run", str(broken), "--json")
    assert code == 2 and json.loads(out) == {"status": "error", "error": f"{broken}:3: syntax error: '(' was never closed", "file": str(broken), "line": 3}


def test_a_run_id_must_start_with_a_letter_or_digit(cli):
    code, out, err = cli("run", CHAIN, "--run-id=-x")
    assert code == 2 and "bad run id '-x': start with a letter or digit" in err


def test_the_last_workflow_runs_without_main_and_says_so(cli, write_flow):
    flow = write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class One:
            class Ports:
                Out = Port[int](direction="out")
            n: int = 0

            def action(self):
                if self.n:
                    return None
                self.n = 1
                return 1

        @workflow
        def first():
            connect(One().Out, "Out")

        @workflow
        def second():
            connect(One().Out, "Out")
    ''')
    code, out, err = cli("run", str(flow))
    assert code == 0 and out == "Out: [1]\n"
    assert "note: running workflow 'second', the last in the file (no 'main'); --workflow picks another: first" in err
    code, out, err = cli("run", str(flow), "--workflow", "first")
    assert code == 0 and "note:" not in err


def test_a_resume_fires_with_the_recorded_pool_and_max_steps_must_leave_something_to_run(cli):
    from flowtape.tape import read_tape

    assert cli("run", CHAIN, "--run-id", "one", "--max-workers", "1")[0] == 0
    assert cli("run", CHAIN, "--run-id", "again", "--resume-from", "one", "--at-step", "4")[0] == 0
    assert read_tape(Path("runs/again/tape.jsonl")).header.maxWorkers == 1
    assert cli("run", CHAIN, "--run-id", "wide", "--resume-from", "one", "--at-step", "4", "--max-workers", "3")[0] == 0
    assert read_tape(Path("runs/wide/tape.jsonl")).header.maxWorkers == 3
    code, _, err = cli("run", CHAIN, "--resume-from", "one", "--at-step", "10", "--max-steps", "10")
    assert code == 2 and "--max-steps 10 is not above the step resumed at (10): nothing would run" in err


def test_a_flow_that_exits_as_it_is_imported_or_is_no_py_file_is_said(cli, tmp_path):
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    code, _, err = cli("run", str(tmp_path / "exits.py"))
    assert code == 2 and err.endswith("exits.py:2: importing the flow raised SystemExit: 3\n")
    (tmp_path / "flowtxt").write_text("x = 1\n")
    code, _, err = cli("run", str(tmp_path / "flowtxt"))
    assert code == 2 and "a flow file's name ends in .py" in err


def test_show_prints_tagged_outputs_as_values(cli, tmp_path):
    (tmp_path / "tup.py").write_text(
        "from flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass T:\n    class Ports:\n        Out = Port[tuple](direction='out')\n\n    i: int = 0\n\n"
        "    def action(self):\n        if self.i:\n            return None\n        self.i = 1\n        return (1, {2, 3})\n\n\n"
        "@workflow\ndef main():\n    t = T()\n    connect(t.Out, 'Out')\n"
    )
    cli("run", str(tmp_path / "tup.py"), "--run-id", "t1")
    code, out, _ = cli("show", "t1")
    assert code == 0 and out.splitlines()[-1] == "succeeded · outputs {'Out': [(1, {2, 3})]}"


def test_a_step_of_a_run_without_steps_says_so(cli, tmp_path):
    (tmp_path / "idle.py").write_text(
        "from flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass Idle:\n    class Ports:\n        Out = Port[int](direction='out')\n\n"
        "    def action(self):\n        return None\n\n\n"
        "@workflow\ndef main():\n    i = Idle()\n    connect(i.Out, 'Out')\n"
    )
    cli("run", str(tmp_path / "idle.py"), "--run-id", "idle")
    code, _, err = cli("show", "idle", "--step", "1")
    assert code == 2 and err == "flowtape: step 1 is out of range: run idle has no steps\n"


def test_runs_and_show_print_one_json_object_with_values_whole(cli):
    growing = str(Path(__file__).parent / "flows" / "growing.py")
    assert cli("run", growing, "--max-workers", "1", "--run-id", "g1")[0] == 0
    code, out, _ = cli("runs", "--json")
    assert code == 0 and out.count("\n") == 1
    (listed,) = json.loads(out)
    assert Path(listed["dir"]).name == "g1"
    assert {k: listed["summary"][k] for k in ("id", "status", "steps")} == {"id": "g1", "status": "succeeded", "steps": 600}
    code, out, _ = cli("show", "g1", "--step", "400", "--json")  # numbers' and collect's 200th firings
    detail = json.loads(out)
    assert (detail["step"], detail["actor"], detail["fireCount"]) == (400, "collect", 200)
    assert detail["taken"] == [{"queue": "numbers.Out->collect.In", "tokens": [200]}]
    states = {a["actor"]: (a["fireCount"], a["state"]) for a in detail["states"]}
    assert states["collect"] == (200, {"seen": list(range(1, 201)), "count": 200})  # whole, not a preview
    code, out, _ = cli("show", "g1", "--json")
    run = json.loads(out)
    assert [s["step"] for s in run["steps"]] == list(range(1, 601)) and run["end"]["status"] == "succeeded"
    code, out, _ = cli("show", "g1", "--step", "601", "--json")
    assert code == 2 and json.loads(out) == {"status": "error", "error": "step 601 is out of range: run g1 has steps 1 to 600"}


def test_show_records_prints_every_record_whole_and_named_in_full(cli, tmp_path):
    growing = Path(__file__).parent / "flows" / "growing.py"
    assert cli("run", str(growing), "--max-workers", "1", "--run-id", "g1")[0] == 0
    assert b'"stateEdit"' in (tmp_path / "runs" / "g1" / "tape.jsonl").read_bytes()
    code, out, _ = cli("show", "g1", "--records")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["t"] for r in records[:3]] == ["header", "firing", "step"] and records[-1]["t"] == "end"
    firings = [r for r in records if r["t"] == "firing"]
    steps = [r for r in records if r["t"] == "step"]
    assert [f["seq"] for f in firings] == list(range(1, 601)) and [s["step"] for s in steps] == list(range(1, 601))
    collected = [f for f in firings if f["actor"] == "collect"]
    # collect's state grows past where the tape writes it as an edit: here every state is whole
    assert [f["state"] for f in collected] == [{"seen": list(range(1, k + 1)), "count": k} for k in range(1, 301)]
    assert collected[199]["consumed"][0]["queue"] == "numbers.Out->collect.In" and collected[199]["consumed"][0]["count"] == 1
    last = steps[-1]
    assert (last["actor"], last["kind"], last["fireCount"], last["journalSeq"]) == ("collect", "task", 300, 600)
    assert last["file"] == str(growing.resolve()) and last["line"] > 0
    assert {q["queue"] for q in last["queues"]} == {"numbers.Out->collect.In", "$.Count"}
    final = records[-1]["final"]  # the end's picture of the run names its queues too
    assert final["lastTaken"] == [{"queue": "numbers.Out->collect.In", "tokens": [300]}]
    assert ["collect", 300] in final["fireCounts"] and "h" not in records[-1]


def test_show_records_of_a_nested_workflow_and_its_errors(cli, tmp_path):
    assert cli("run", str(EXAMPLES / "nested.py"), "--run-id", "n1")[0] == 0
    records = [json.loads(line) for line in cli("show", "n1", "--records")[1].splitlines()]
    inner = [r for r in records if r["t"] == "firing" and r["within"] is not None]
    assert inner and all("/" in r["actor"] for r in inner)
    assert any(r["t"] == "step" and r["kind"] == "workflow" for r in records)
    code, out, err = cli("show", "n1", "--records", "--step", "2")
    assert code == 2 and out == "" and "leave out --step and --json" in err
    tape = tmp_path / "runs" / "n1" / "tape.jsonl"
    tape.write_bytes(tape.read_bytes().replace(b'"fireCount":1', b'"fireCount":7', 1))
    code, out, err = cli("show", "n1", "--records")
    assert code == 1 and out == "" and "corrupt tape" in err


def test_an_input_declared_file_is_given_as_an_absolute_path(cli, tmp_path, write_flow):
    """Tools run in the flow's folder: a relative path typed where flowtape runs would miss there."""
    (tmp_path / "sub").mkdir()
    path = write_flow('''
        from flowtape import File, Port, connect, tool, workflow

        @tool(cmd="cp", args=["{in.Src}", "{out.Dst}"])
        class Copy:
            class Ports:
                Src = Port[File](direction="in")
                Dst = Port[File](direction="out")

        @workflow(inputs={"Src": File})
        def main():
            c = Copy()
            connect("Src", c.Src)
            connect(c.Dst, "Out")
    ''', name="sub/copy.py")
    (tmp_path / "data.txt").write_text("hello")
    code, out, err = cli("run", str(path), "--input", "Src=data.txt", "--json")
    assert code == 0, err
    copied = json.loads(out)["outputs"]["Out"][0]
    assert Path(copied).read_text() == "hello"


def test_a_resume_of_an_edited_graph_is_refused_and_of_another_file_names_the_recorded_one(write_flow, tmp_path):
    def flowtape(*args: str) -> tuple[int, str]:  # a process each: the edited file is imported afresh
        done = subprocess.run([sys.executable, "-m", "flowtape", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        return done.returncode, done.stderr

    flow = write_flow(FAILS_AT_3)
    flowtape("run", str(flow), "--run-id", "r1")
    flow.write_text(flow.read_text(encoding="utf-8").replace("c = Count()", "d = Count()").replace("c.Out", "d.Out"))
    code, err = flowtape("run", str(flow), "--resume-from", "r1")
    assert code == 2 and err == "flowtape: cannot resume: the flow's graph changed since run r1: actor 'c' was renamed 'd'\n", err
    code, err = flowtape("run", CHAIN, "--resume-from", "r1")
    assert code == 2 and err.startswith(f"flowtape: cannot resume: the flow's graph changed since run r1, which ran {flow}: ")


def test_a_folder_here_named_like_a_run_id_is_not_taken_for_that_run_silently(cli):
    import shutil

    cli("run", CHAIN, "--run-id", "r1")
    cli("run", CHAIN, "--run-id", "r2")
    shutil.copytree("runs/r2", "r1")  # ./r1 holds another run than runs/r1
    code, out, err = cli("show", "r1")
    assert code == 2 and out == ""
    assert "'r1' is both a run directory here and a run id in" in err and "say ./r1" in err
    assert cli("show", "./r1")[1].startswith("run r2 ")
    assert cli("show", "runs/r1")[1].startswith("run r1 ")
    assert cli("show", "r2")[0] == 0  # only a run id: as before


def test_a_resume_runs_the_workflow_the_run_ran(cli, write_flow):
    flow = write_flow(FAILS_AT_3 + '''
    @workflow
    def other():
        c = Count()
        connect(c.Out, "Out")
''')
    assert cli("run", str(flow), "--workflow", "other", "--run-id", "o")[0] == 1  # fails at 3, as main would
    code, _, err = cli("run", str(flow), "--resume-from", "o", "--at-step", "2", "--run-id", "o2")
    assert code == 1 and "replay stopped" not in err and "three" in err
    assert json.loads(Path("runs/o2/run.json").read_text())["workflow"] == "other"
    code, _, err = cli("run", str(flow), "--workflow", "main", "--resume-from", "o")
    assert code == 2 and "run o ran workflow 'other', not 'main'" in err
