"""Agents that call a model over real HTTP, in-process: a local server (tests/model_server.py)
speaks the OpenAI chat-completions and the Anthropic Messages wire formats; the official SDKs make
real requests to it. Nothing here patches an SDK. (test_agents_cli.py: the same in child processes.)"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from agent_flows import (
    ENV_VARS,
    GEN_CHAT,
    KEY,
    MULTI_TURN,
    THREE_AGENTS,
    _end,
    _firings,
    _flow,
    _run,
    _use,
)
from flowtape.errors import FlowError
from flowtape.loader import load_flow
from flowtape.rundir import read_summary
from flowtape.runner import execute
from flowtape.tape import Firing, read_tape
from flowtape.verify import verify_run
from model_server import Event

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_three_agent_flow_calls_the_model_and_the_tape_keeps_every_answer(provider, server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server, provider)
    model = "gpt-test" if provider == "openai" else "claude-test"
    result = _run(_flow(write_flow, provider, model), runs_dir)
    assert result.status == "succeeded", result.error
    assert len(server.requests) == 3
    first = server.requests[0]
    assert first.path == ("/v1/chat/completions" if provider == "openai" else "/v1/messages")
    assert first.body["model"] == model
    # as wfpy shapes it: the prompt (and how to answer) as system text, inputs and parameters as JSON
    assert first.payload() == {"inputs": {"ticket": "my order is late"}, "parameters": {"tone": "kind"}}
    system = first.system()
    assert system[0] == "Draft a reply to the ticket." and '{"outputs"' in system[1]
    if provider == "openai":
        assert first.headers["authorization"] == f"Bearer {KEY}"
    else:
        assert KEY in (first.headers.get("x-api-key"), first.headers.get("authorization", "").removeprefix("Bearer "))
        assert first.body["max_tokens"] == 4096  # (the Messages API needs one)
    assert "max_tokens" not in first.body or provider == "anthropic"  # an OpenAI-compatible server: its own bound
    # each answer went on as the next agent's input; the int port got an int
    score = server.requests[2].payload()["inputs"]["score"]
    assert isinstance(score, int)
    assert result.outputs["verdict"] == [f'verdict of {json.dumps({"score": score})}']
    firings = _firings(result.run_dir)
    assert [len(f.calls) for f in firings] == [1, 1, 1]
    assert all(f.calls[0].model == model and f.calls[0].inputTokens > 0 and f.calls[0].outputTokens > 0 for f in firings)
    chat = msgspec.json.decode(firings[0].chat)
    assert [m["role"] for m in chat] == ["user", "assistant"]
    assert json.loads(chat[1]["content"])["outputs"]["draft"].startswith("draft of")
    usage = read_summary(result.run_dir).usage
    assert usage is not None and usage.calls == 3 and usage.replayedCalls == 0
    assert usage.inputTokens == sum(f.calls[0].inputTokens for f in firings)
    assert _end(result.run_dir).usage == usage


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


TWO_PORTS = '''
from flowtape import Port, agent, connect, workflow


@agent(prompt="Review it.", transport="openai", model="gpt-test", repair=0)
class Review:
    class Ports:
        draft = Port[str](direction="in")
        verdict = Port[str](direction="out")
        score = Port[int](direction="out")


@workflow
def main():
    review = Review()
    connect("draft", review.draft)
    connect(review.verdict, "verdict")
    connect(review.score, "score")
'''


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


TWO_DRAFTS = '''
from flowtape import Port, agent, connect, task, workflow


@task
class Drafts:
    class Ports:
        Out = Port[str](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 2:
            return None
        self.i += 1
        return f"d{self.i}"


@agent(prompt="Review it.", transport="openai", model="gpt-test")
class Review:
    class Ports:
        draft = Port[str](direction="in")
        verdict = Port[str](direction="out")
        score = Port[int](direction="out")


@workflow
def main():
    drafts = Drafts()
    review = Review()
    connect(drafts.Out, review.draft)
    connect(review.verdict, "verdict")
    connect(review.score, "score")
'''


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


def test_429_and_5xx_are_retried_honouring_retry_after(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.then(Event(None, 429, "Rate limit reached", {"retry-after": "0.6"}), Event(None, 503, "overloaded"))
    result = _run(_flow(write_flow), runs_dir)
    assert result.status == "succeeded", result.error
    assert len(server.requests) == 5  # the first call took three tries
    assert server.requests[1].at - server.requests[0].at >= 0.55
    assert server.requests[1].headers.get("x-stainless-retry-count") == "1"
    assert [len(f.calls) for f in _firings(result.run_dir)] == [1, 1, 1]


def test_retries_that_run_out_fail_the_firing_with_the_error_the_api_gave(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server, "anthropic")
    server.then(*[Event(None, 529, "Overloaded")] * 2)
    result = _run(_flow(write_flow, "anthropic", "claude-test", extra=", retries=1"), runs_dir)
    assert result.status == "failed"
    assert f"{server.url} answered HTTP 529 for model claude-test: Overloaded (tried 2 times)" in result.error.message


def test_an_unreachable_endpoint_fails_naming_it_never_the_key(write_flow, runs_dir, monkeypatch):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nobody listens there once it is closed
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    flow = _flow(write_flow, extra=f", base_url='http://127.0.0.1:{port}/v1', retries=0")
    result = _run(flow, runs_dir)
    assert result.status == "failed"
    assert f"cannot reach http://127.0.0.1:{port}/v1" in result.error.message
    assert KEY not in result.error.message and KEY not in (result.error.traceback or "")


def test_a_slow_answer_past_the_timeout_is_asked_again_then_fails_the_firing(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    server.then(Event({"outputs": {"draft": "late"}}, delay=1.5))
    result = _run(_flow(write_flow, extra=", timeout=0.3, retries=1"), runs_dir)
    assert result.status == "succeeded", result.error  # the second try came in time
    assert len(server.requests) == 4 and result.outputs["verdict"]
    server.then(*[Event({"outputs": {"draft": "late"}}, delay=1.5)] * 2)
    result = _run(_flow(write_flow, extra=", timeout=0.3, retries=1"), runs_dir)
    assert result.status == "failed"
    assert f"{server.url}/v1 did not answer within 0.3 s (tried 2 times)" in result.error.message


GARBAGE = {  # what a server, a proxy or a gateway may answer instead of a model's reply, and what the error says
    "an HTML page": (Event(raw=b"<html><body><h1>Bad gateway</h1></body></html>"),
                     "answered something that is no {what}: 'Bad gateway'"),
    "JSON of another shape": (Event(raw=b'{"result": "ok"}', kind="application/json"),
                              {"openai": "no chat completion: it has no choices", "anthropic": 'no Messages API reply: {"result": "ok"}'}),
    "an error with status 200": (Event(raw=b'{"error": {"message": "upstream provider failed", "code": 502}}', kind="application/json"),
                                 "answered something that is no {what}: its error: upstream provider failed"),
    "an empty body": (Event(raw=b"", kind="application/json"), "answered something that is no {what}"),
    "a body cut off halfway": (Event({"outputs": {"draft": "x"}}, cut=True), "broke off before its answer came whole"),
    "an HTML error page": (Event(raw=b"<html><body><center>502 Bad Gateway</center><hr>nginx</body></html>", status=502),
                           "answered HTTP 502 for model m: 502 Bad Gateway nginx"),
}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_a_reply_that_is_no_models_answer_fails_the_firing_clearly(garbage, provider, server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server, provider)
    event, said = GARBAGE[garbage]
    said = said[provider] if isinstance(said, dict) else said
    server.then(event)
    result = _run(_flow(write_flow, provider, "m", extra=", retries=0"), runs_dir)
    assert result.status == "failed"
    message = result.error.message
    what = "chat completion" if provider == "openai" else "Messages API reply"
    assert message.startswith("draft failed on firing 1") and said.replace("{what}", what) in message, message
    assert "Traceback" not in message and "Error:" not in message  # (said, not an exception's repr)
    assert _firings(result.run_dir) == [] and ("$.ticket->draft.ticket", 1) in _end(result.run_dir).leftovers


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


def test_a_missing_key_or_model_is_said_before_anything_runs(server, write_flow, runs_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    with pytest.raises(FlowError, match=r"agent draft has no API key for openai: set OPENAI_API_KEY"):
        _run(_flow(write_flow), runs_dir)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(FlowError, match=r"agent draft names no model: give @agent\(model='...'\) or set WF_AGENT_MODEL"):
        _run(_flow(write_flow, model=""), runs_dir)
    assert server.requests == [] and not runs_dir.exists()


def test_http_picks_the_provider_as_wfpy_does(server, write_flow, runs_dir, monkeypatch):
    # the model's "provider/" prefix, then WF_AGENT_PROVIDER; wfpy's variables for the rest
    monkeypatch.setenv("WF_AGENT_ENDPOINT", server.url + "/v1/messages")  # wfpy's endpoints are whole URLs
    monkeypatch.setenv("WF_AGENT_TOKEN", KEY)
    result = _run(_flow(write_flow, "http", "anthropic/claude-test"), runs_dir)
    assert result.status == "succeeded", result.error
    assert {r.path for r in server.requests} == {"/v1/messages"} and server.requests[0].body["model"] == "claude-test"
    assert KEY in str(server.requests[0].headers)
    server.requests.clear()
    monkeypatch.setenv("WF_AGENT_PROVIDER", "anthropic")
    monkeypatch.setenv("WF_AGENT_MODEL", "claude-from-env")
    assert _run(_flow(write_flow, "http", ""), runs_dir).status == "succeeded"
    assert {r.body["model"] for r in server.requests} == {"claude-from-env"}
    # OpenRouter, with its own key variable: the OpenAI API, the rest of the name being OpenRouter's model
    server.requests.clear()
    for name in ("WF_AGENT_PROVIDER", "WF_AGENT_MODEL", "WF_AGENT_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("WF_AGENT_ENDPOINT", server.url + "/v1/chat/completions")
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    assert _run(_flow(write_flow, "http", "openrouter/meta-llama/llama-3-70b"), runs_dir).status == "succeeded"
    assert {(r.path, r.body["model"], r.headers["authorization"]) for r in server.requests} == {
        ("/v1/chat/completions", "meta-llama/llama-3-70b", f"Bearer {KEY}")}


def test_the_agents_own_arguments_come_before_the_environment(server, write_flow, runs_dir, monkeypatch):
    monkeypatch.setenv("WF_AGENT_ENDPOINT", "http://127.0.0.1:9/v1")  # nobody there
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-this-one")
    monkeypatch.setenv("MY_KEY", KEY)
    flow = _flow(write_flow, "openai-http", "openai/gpt-test", extra=f", endpoint={server.url + '/v1/chat/completions'!r}, api_key_env='MY_KEY'")
    result = _run(flow, runs_dir)
    assert result.status == "succeeded", result.error
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}" and server.requests[0].body["model"] == "gpt-test"


def test_wfpys_config_file_is_read_after_the_environment(server, write_flow, runs_dir, monkeypatch, tmp_path):
    config = tmp_path / "config" / "wf-lang" / "config.json"  # (clean_env points XDG_CONFIG_HOME there)
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"agent": {"provider": "anthropic", "model": "claude-filed"},
                                  "agents": {"anthropic": {"endpoint": server.url + "/v1/messages", "token": KEY}}}))
    assert _run(_flow(write_flow, "http", ""), runs_dir).status == "succeeded"
    assert {(r.path, r.body["model"]) for r in server.requests} == {("/v1/messages", "claude-filed")}
    assert KEY in str(server.requests[0].headers)
    server.requests.clear()
    monkeypatch.setenv("WF_AGENT_MODEL", "claude-from-env")  # the environment comes first
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    assert _run(_flow(write_flow, "http", ""), runs_dir).status == "succeeded"
    assert {r.body["model"] for r in server.requests} == {"claude-from-env"}
    assert "sk-ant-from-env" in str(server.requests[0].headers) and KEY not in str(server.requests[0].headers)
    config.write_text("{not json")  # a broken file is no configuration (as wfpy reads it)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(FlowError, match="agent draft has no API key for openai"):
        _run(_flow(write_flow, "http", "gpt-test"), runs_dir)


def test_a_resume_at_the_last_step_sends_nothing_and_says_what_it_saved(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    flow = _flow(write_flow)
    first = _run(flow, runs_dir)
    spent = read_summary(first.run_dir).usage
    server.requests.clear()
    for name in ENV_VARS:  # no key, no endpoint: nothing may be needed
        monkeypatch.delenv(name, raising=False)
    resumed = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=first.run_id)
    assert resumed.status == "succeeded" and resumed.outputs == first.outputs
    assert server.requests == []
    usage = read_summary(resumed.run_dir).usage
    assert (usage.calls, usage.replayedCalls) == (0, 3)
    assert (usage.savedInputTokens, usage.savedOutputTokens) == (spent.inputTokens, spent.outputTokens)
    assert usage.said()[-1] == f"replayed 3 model calls, saved {spent.inputTokens + spent.outputTokens:,} tokens"
    verify_run(resumed.run_dir)  # (raises on a broken rule)
    assert [len(f.calls) for f in _firings(resumed.run_dir)] == [1, 1, 1]


def test_a_resume_replaying_per_actor_saves_the_calls_before_the_failed_firing(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    flow = _flow(write_flow, extra=", repair=0")
    server.then(Event({"outputs": {"draft": "ok"}}), Event({"outputs": {"score": "high"}}))
    failed = _run(flow, runs_dir, max_workers=2)
    assert failed.status == "failed"
    server.requests.clear()
    resumed = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=failed.run_id)
    assert resumed.status == "succeeded", resumed.error
    assert [r.body["messages"][0]["content"] for r in server.requests] == ["Score the draft from 0 to 10.", "Say whether to send it."]
    usage = read_summary(resumed.run_dir).usage
    assert (usage.calls, usage.replayedCalls) == (2, 1)


def test_a_changed_prompt_makes_that_agent_diverge(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    first = _run(_flow(write_flow), runs_dir)
    flow = _flow(write_flow, source=THREE_AGENTS.replace("Say whether", "Tell me whether"))
    server.requests.clear()
    resumed = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=first.run_id)
    assert resumed.status == "succeeded"
    assert [(d.actor, d.reason) for d in resumed.replay_stopped] == [
        ("decide", "notReplayable: the agent's prompt changed since the recorded run")]
    assert len(server.requests) == 1 and server.requests[0].body["messages"][0]["content"].startswith("Tell me")


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


FILE_IN = '''
from flowtape import File, Port, agent, connect, workflow


@agent(prompt="Summarise the document.", transport="openai", model="gpt-test")
class Reader:
    class Ports:
        doc = Port[File](direction="in")
        summary = Port[str](direction="out")


@workflow
def main():
    reader = Reader()
    connect("doc", reader.doc)
    connect(reader.summary, "summary")
'''


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


def test_multi_turn_sends_the_actors_history_back(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    flow = load_flow(str(_flow(write_flow, source=GEN_CHAT)), None)
    result = execute(flow, {}, runs_dir=runs_dir)
    assert result.status == "succeeded", result.error
    second = server.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "system", "user", "assistant", "user"]
    assert json.loads(second[2]["content"])["inputs"] == {"question": "q1"}
    assert json.loads(second[4]["content"])["inputs"] == {"question": "q2"}
    chats = [msgspec.json.decode(f.chat) for f in _firings(result.run_dir) if f.actor == "chat"]
    assert [len(c) for c in chats] == [2, 2]  # each firing records the messages it added, not the whole history


def test_a_resume_sends_the_replayed_turns_back_as_the_chat_history(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    flow = _flow(write_flow, source=GEN_CHAT.replace('model="gpt-test"', 'model="gpt-test", retries=0'))
    server.then(Event({"outputs": {"answer": "first answer"}}), Event(None, 500, "down"))
    failed = execute(load_flow(str(flow), None), {}, runs_dir=runs_dir)
    assert failed.status == "failed"
    server.requests.clear()
    resumed = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=failed.run_id)
    assert resumed.status == "succeeded", resumed.error
    (asked,) = server.requests  # the first turn replayed: only the second is asked, with the first as history
    turns = [m for m in asked.body["messages"] if m["role"] != "system"]
    assert [m["role"] for m in turns] == ["user", "assistant", "user"]
    assert json.loads(turns[1]["content"]) == {"outputs": {"answer": "first answer"}}
    assert json.loads(turns[2]["content"])["inputs"] == {"question": "q2"}


def test_a_price_table_puts_a_cost_on_the_calls_and_on_what_a_resume_saved(server, write_flow, runs_dir, monkeypatch, tmp_path):
    _use(monkeypatch, server)
    (tmp_path / "pyproject.toml").write_text('[tool.flowtape.prices]\n"gpt-test" = { input = 2.0, output = 8.0 }\n')
    flow = _flow(write_flow)
    result = _run(flow, runs_dir)
    usage = read_summary(result.run_dir).usage
    assert usage.cost == pytest.approx((usage.inputTokens * 2.0 + usage.outputTokens * 8.0) / 1e6)
    resumed = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=result.run_id)
    again = read_summary(resumed.run_dir).usage
    assert again.cost is None and again.savedCost == usage.cost
    assert usage.said()[0].endswith(f"output tokens ({usage.cost:,.4f})")
    (tmp_path / "pyproject.toml").write_text('[tool.flowtape.prices]\n"other-model" = { input = 1.0 }\n')
    assert read_summary(_run(_flow(write_flow), runs_dir).run_dir).usage.cost is None  # no price for gpt-test: no cost


def test_a_resume_that_must_call_a_model_without_a_key_fails_at_that_firing(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    flow = _flow(write_flow, source=GEN_CHAT.replace('model="gpt-test"', 'model="gpt-test", retries=0'))
    server.then(Event({"outputs": {"answer": "one"}}), Event(None, 500, "down"))
    failed = execute(load_flow(str(flow), None), {}, runs_dir=runs_dir)
    assert failed.status == "failed"
    server.requests.clear()
    monkeypatch.delenv("OPENAI_API_KEY")
    resumed = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=failed.run_id)
    assert resumed.status == "failed" and server.requests == []
    assert "chat failed on firing 2" in resumed.error.message and "has no API key for openai" in resumed.error.message
    assert read_summary(resumed.run_dir).usage.replayedCalls == 1  # the first firing's call was replayed


def test_the_history_sent_back_keeps_to_the_context_budget(server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    source = GEN_CHAT.replace("self.i >= 2", "self.i >= 4").replace('model="gpt-test"', 'model="gpt-test", context_budget=3')
    result = execute(load_flow(str(_flow(write_flow, source=source)), None), {}, runs_dir=runs_dir)
    assert result.status == "succeeded", result.error
    roles = [[m["role"] for m in r.body["messages"] if m["role"] != "system"] for r in server.requests]
    assert roles == [["user"], ["user", "assistant", "user"], ["user", "assistant", "user"], ["user", "assistant", "user"]]
    assert [len(msgspec.json.decode(f.chat)) for f in _firings(result.run_dir) if f.actor == "chat"] == [2, 2, 2, 2]


def test_checkpoints_carry_what_a_resume_from_them_saves(server, write_flow, runs_dir, monkeypatch):
    from flowtape import scheduler
    from flowtape.tape import Checkpoint

    monkeypatch.setattr(scheduler, "CHECKPOINT_STEPS", 2)
    monkeypatch.setattr(scheduler, "CHECKPOINT_GROWTH", 0)
    _use(monkeypatch, server)
    flow = _flow(write_flow, source=GEN_CHAT.replace("self.i >= 2", "self.i >= 5"))
    first = execute(load_flow(str(flow), None), {}, runs_dir=runs_dir, max_workers=1)
    records = [line.record for line in read_tape(first.run_dir / "tape.jsonl").lines]
    checkpoints = [r for r in records if isinstance(r, Checkpoint)]
    assert checkpoints and all(c.spent and c.spent[0].model == "gpt-test" for c in checkpoints)
    verify_run(first.run_dir)  # each checkpoint's `spent` agrees with the firings before it
    spent = read_summary(first.run_dir).usage
    server.requests.clear()
    for at in (checkpoints[-1].step, None):  # restored from that checkpoint; from the last one, then its records
        resumed = execute(load_flow(str(flow), None), runs_dir=runs_dir, resume_from=first.run_id, at_step=at)
        usage = read_summary(resumed.run_dir).usage
        assert resumed.status == "succeeded"
        if at is None:
            assert (usage.replayedCalls, usage.savedInputTokens) == (spent.calls, spent.inputTokens)
    assert len(server.requests) == 5 - sum(1 for r in records[: records.index(checkpoints[-1])]
                                           if isinstance(r, Firing) and r.actor == "chat")


@pytest.mark.parametrize(("transport", "said"), [
    ("claude-cli", "transport 'claude-cli' runs an agent CLI, which Flowtape does not"),
    ("smoke-signals", "unknown transport 'smoke-signals': use one of 'http', 'openai-http', 'openai', 'anthropic'"),
])
def test_a_transport_flowtape_does_not_have_is_refused_where_it_is_named(transport, said, write_flow):
    flow = _flow(write_flow, transport)
    with pytest.raises(FlowError, match=said) as caught:
        load_flow(str(flow), None)
    assert caught.value.file == str(flow) and caught.value.line == 7  # the @agent line


def test_wfpys_offline_transport_is_the_mock(write_flow, runs_dir):
    result = _run(_flow(write_flow, "OFFLINE"), runs_dir)
    assert result.status == "succeeded" and result.outputs == {"verdict": ["mock:verdict"]}
