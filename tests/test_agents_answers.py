"""What a model is asked and how its answer is read, over real HTTP (tests/model_server.py): the
JSON Schema from the port types and the text fallback, answers read as wfpy reads them, repairs
with the error said to the model, answers cut off or refused, and File inputs and outputs.
(test_agents_http.py: transports, configuration, the network, resumes and usage.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_flows import (
    FILE_IN,
    MULTI_TURN,
    TWO_DRAFTS,
    TWO_PORTS,
    _end,
    _firings,
    _flow,
    _run,
    _use,
)
from flowtape.loader import load_flow
from flowtape.rundir import read_summary
from flowtape.runner import execute
from model_server import Event

pytestmark = pytest.mark.usefixtures("clean_env")


def test_structured_output_asks_with_a_json_schema_from_the_port_types(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    _run(_flow(write_flow), runs_dir)
    schema = server.requests[1].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["outputs"]["properties"] == {"score": {"type": "integer"}}
    assert schema["properties"]["outputs"]["required"] == ["score"]


def test_anthropic_answers_through_its_forced_answer_tool(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server, "anthropic")
    _run(_flow(write_flow, "anthropic", "claude-test"), runs_dir)
    body = server.requests[1].body
    assert body["tool_choice"] == {"type": "tool", "name": body["tools"][0]["name"]}
    assert body["tools"][0]["input_schema"]["properties"]["outputs"]["properties"]["score"] == {"type": "integer"}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("text", [
    '```json\n{"outputs": {"score": 7}}\n```',
    'Here is my answer: {"outputs": {"score": 7}} Hope it helps.',
])
def test_a_server_without_structured_outputs_gets_its_text_parsed(text, provider, server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server, provider)
    def model(seen):
        prompt = seen.system()[0]
        return text if prompt.startswith("Score") else {"outputs": {"draft" if prompt.startswith("Draft") else "verdict": "ok"}}

    server.model = model
    asked = "response_format" if provider == "openai" else "tools"
    server.then(Event(None, 400, f"{asked} is not supported"))
    result = _run(_flow(write_flow, provider, "m"), runs_dir)
    assert result.status == "succeeded", result.error
    assert asked in server.requests[0].body and all(asked not in r.body for r in server.requests[1:])
    assert server.requests[-1].payload()["inputs"]["score"] == 7


def test_one_file_port_takes_a_plain_text_answer_as_its_content(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.then(Event("# Notes\n\nplain markdown, no JSON"))
    result = execute(load_flow(str(_flow(write_flow, source=MULTI_TURN)), None), {"topic": "tapes"}, runs_dir=runs_dir)
    assert result.status == "succeeded", result.error
    assert Path(result.outputs["note"][0]).read_text() == "# Notes\n\nplain markdown, no JSON"


def test_a_bad_answer_is_repaired_with_the_error_said_to_the_model(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.then(Event({"outputs": {"draft": "ok"}}), Event({"outputs": {"score": "high"}}))
    result = _run(_flow(write_flow), runs_dir)
    assert result.status == "succeeded", result.error
    repair = server.requests[2].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"outputs": {"score": "high"}}'}
    assert "'score' expects int" in repair[-1]["content"]
    firings = _firings(result.run_dir)
    assert [len(f.calls) for f in firings] == [1, 2, 1]  # a repair is a call of its own
    assert read_summary(result.run_dir).usage.calls == 4


def test_an_answer_still_bad_after_the_repairs_fails_the_firing_atomically(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.model = lambda seen: "I would rather not answer in JSON."
    result = _run(_flow(write_flow, extra=", repair=1"), runs_dir)
    assert result.status == "failed"
    message = result.error.message
    assert message.startswith("draft failed on firing 1") and "after 1 repair(s)" in message and "no JSON object" in message
    assert len(server.requests) == 2
    assert _firings(result.run_dir) == []  # the firing did not happen: its token is back in its queue
    assert ("$.ticket->draft.ticket", 1) in _end(result.run_dir).leftovers
    assert read_summary(result.run_dir).usage.calls == 2  # what the failed firing cost is still told


@pytest.mark.parametrize(("answer", "got"), [
    ({"outputs": {"verdict": "ok", "score": 7}}, ("ok", 7)),
    ({"verdict": "ok", "score": 7}, ("ok", 7)),  # no "outputs" wrapper: the ports at the top, as wfpy reads them
    ({"outputs": {"verdict": "ok"}, "score": 7}, ("ok", 7)),  # a port put beside "outputs"
    ({"verdict": "ok"}, "it gives no value for output port 'score'"),
    ({"answer": "ok"}, 'the JSON object has no "outputs" object, nor a key naming an output port (its keys: \'answer\')'),
])
def test_an_answer_is_read_as_wfpy_reads_it(answer, got, server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.model = lambda seen: json.dumps(answer)  # (as text: parsed, not a structured output)
    result = execute(load_flow(str(_flow(write_flow, source=TWO_PORTS)), None), {"draft": "d"}, runs_dir=runs_dir)
    if isinstance(got, tuple):
        assert result.status == "succeeded", result.error
        assert (result.outputs["verdict"], result.outputs["score"]) == ([got[0]], [got[1]])
    else:
        assert result.status == "failed" and got in result.error.message, result.error.message


def test_a_fork_editing_one_port_keeps_the_rest_of_the_models_answer(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.model = lambda seen: 'Sure:\n```json\n{"outputs": {"verdict": "ok", "score": 7}}\n```'  # (text, fenced)
    flow = _flow(write_flow, source=TWO_DRAFTS)
    first = execute(load_flow(str(flow), None), {}, runs_dir=runs_dir, max_workers=1)
    assert first.status == "succeeded", first.error
    steps = first.steps
    forked = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=first.run_id, at_step=steps - 1,
                     edits={"review.answer.score": 9})
    assert forked.status == "succeeded", forked.error
    assert forked.outputs == {"verdict": ["ok", "ok"], "score": [7, 9]}  # the recorded verdict kept, the score edited


@pytest.mark.parametrize("answer", [{"score": 7}, {"value": 7}, {"outputs": 7}])
def test_a_single_port_takes_its_value_however_the_model_wraps_it(answer, server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.then(Event({"outputs": {"draft": "ok"}}), Event(json.dumps(answer)))
    result = _run(_flow(write_flow, extra=", repair=0"), runs_dir)
    assert result.status == "succeeded", result.error
    assert server.requests[2].payload()["inputs"] == {"score": 7}


@pytest.mark.parametrize(("answer", "said"), [
    ({"outputs": {"score": [1]}}, "output port 'score' expects int, but the answer gives '[1]'"),
    ({"outputs": {"note": 1}}, "it gives no value for output port 'score'"),
    ({"a": 1, "b": 2}, 'output port \'score\' expects int, but the answer gives \'{"a": 1, "b": 2}\''),
    ("[7]", "it is no JSON object ('[7]')"),
    ("", "it is no JSON object (the answer was empty)"),
])
def test_an_answer_of_the_wrong_shape_names_the_port_and_what_was_wrong(answer, said, server, write_flow, runs_dir,
                                                                        monkeypatch):
    _use(monkeypatch, server)
    server.then(Event({"outputs": {"draft": "ok"}}), Event(answer))
    result = _run(_flow(write_flow, extra=", repair=0"), runs_dir)
    assert result.status == "failed"
    assert "score failed on firing 1" in result.error.message and "(repair=0)" in result.error.message
    assert said in result.error.message, result.error.message


@pytest.mark.parametrize(("provider", "event", "said"), [
    ("openai", Event('{"outputs": {"draft": "a long', finish="length"),
     "the answer was cut off at the token limit (finish_reason 'length')"),
    ("anthropic", Event('{"outputs": {"draft": "a long', finish="max_tokens"), "the answer was cut off at max_tokens=64"),
    ("openai", Event(refusal="I can't help with that."), "(the answer was empty); the model refused: I can't help with that."),
])
def test_an_answer_cut_off_or_refused_says_so_to_the_model_and_in_the_error(provider, event, said, server, write_flow,
                                                                            runs_dir, monkeypatch):
    _use(monkeypatch, server, provider)
    server.then(event, event)
    result = _run(_flow(write_flow, provider, "m", extra=", repair=1, max_tokens=64"), runs_dir)
    assert result.status == "failed"
    assert said in result.error.message
    assert server.requests[0].body["max_tokens"] == 64
    repair = server.requests[1].body["messages"][-1]["content"]
    assert repair.startswith("Your answer could not be used") and said in repair


def test_a_file_output_is_written_into_the_runs_work_folder(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.then(Event({"outputs": {"note": "# first"}}), Event({"outputs": {"note": "# second"}}))
    flow = load_flow(str(_flow(write_flow, source=MULTI_TURN)), None)
    result = execute(flow, {"topic": "tapes"}, runs_dir=runs_dir)
    assert result.status == "succeeded", result.error
    path = Path(result.outputs["note"][0])
    assert path.parent == result.run_dir / "work" and path.suffix == ".md" and path.read_text() == "# first"
    schema = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["outputs"]["properties"]["note"]["type"] == "string"


def test_a_file_input_is_given_to_the_model_with_its_text(server, write_flow, runs_dir, monkeypatch, tmp_path):
    from flowtape.agents.prompts import FILE_INPUT_CHARS

    _use(monkeypatch, server)
    flow = load_flow(str(_flow(write_flow, source=FILE_IN)), None)
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nTapes keep every answer.\n")
    assert execute(flow, {"doc": str(doc)}, runs_dir=runs_dir).status == "succeeded"
    sent = server.requests[0].payload()
    assert sent["inputs"] == {} and sent["fileInputs"]["doc"] == {
        "path": str(doc), "content": "# Notes\n\nTapes keep every answer.\n", "sizeBytes": doc.stat().st_size,
        "truncated": False}
    doc.write_text("x" * (FILE_INPUT_CHARS + 10))  # (as wfpy bounds it)
    assert execute(flow, {"doc": str(doc)}, runs_dir=runs_dir).status == "succeeded"
    big = server.requests[1].payload()["fileInputs"]["doc"]
    assert len(big["content"]) == FILE_INPUT_CHARS and big["truncated"] is True


FOLDER_IN = FILE_IN.replace("from flowtape import File,", "from flowtape import File, Resource,").replace(
    "Port[File]", "Port[Resource]")


def test_a_folder_input_is_described_to_the_model_with_its_listing(server, write_flow, runs_dir, monkeypatch,
                                                                    tmp_path):
    from flowtape.agents.prompts import LISTING_ENTRIES

    _use(monkeypatch, server)
    flow = load_flow(str(_flow(write_flow, source=FOLDER_IN)), None)
    folder = tmp_path / "docs"
    (folder / "guide").mkdir(parents=True)
    (folder / "README.md").write_text("# Docs\n")
    (folder / "guide" / "start.md").write_text("Start here.\n")
    assert execute(flow, {"doc": str(folder)}, runs_dir=runs_dir).status == "succeeded"
    sent = server.requests[0].payload()
    assert sent["inputs"] == {"doc": str(folder)} and "fileInputs" not in sent
    assert sent["resourceInputs"]["doc"] == {
        "path": str(folder), "kind": "folder", "exists": True, "isDir": True, "isFile": False,
        "listing": ["README.md", "guide/", "guide/start.md"]}
    for i in range(LISTING_ENTRIES + 5):
        (folder / f"n{i:03}.txt").write_text("")
    assert execute(flow, {"doc": str(folder)}, runs_dir=runs_dir).status == "succeeded"
    listing = server.requests[1].payload()["resourceInputs"]["doc"]["listing"]
    assert len(listing) == LISTING_ENTRIES + 1 and listing[-1] == f"... (truncated at {LISTING_ENTRIES} entries)"
    assert execute(flow, {"doc": "https://example.com/spec"}, runs_dir=runs_dir).status == "succeeded"
    assert server.requests[2].payload()["resourceInputs"]["doc"] == {
        "path": "https://example.com/spec", "kind": "http", "exists": False, "isDir": False, "isFile": False}
