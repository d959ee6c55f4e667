"""Agents that call a model over real HTTP, in-process: a local server (tests/model_server.py)
speaks the OpenAI chat-completions and the Anthropic Messages wire formats; the official SDKs make
real requests to it. Nothing here patches an SDK. (test_agents_cli.py: the same in child processes.)"""

from __future__ import annotations

import json

import msgspec
import pytest
from agent_flows import (
    ENV_VARS,
    GEN_CHAT,
    KEY,
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
    # a local Ollama takes any key: none is needed; wfpy's AGENT_API_KEY comes before a provider's own
    server.requests.clear()
    assert _run(_flow(write_flow, "http", "ollama/llama3"), runs_dir).status == "succeeded"
    assert {(r.body["model"], r.headers["authorization"]) for r in server.requests} == {("llama3", "Bearer ollama")}
    server.requests.clear()
    monkeypatch.setenv("AGENT_API_KEY", "sk-agent-key")
    assert _run(_flow(write_flow, "http", "openrouter/x"), runs_dir).status == "succeeded"
    assert {r.headers["authorization"] for r in server.requests} == {"Bearer sk-agent-key"}


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
    from flowtape import checkpoints
    from flowtape.tape import Checkpoint

    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 2)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
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


@pytest.mark.parametrize("transport", [None, "", " HTTP "])
def test_no_transport_is_http_as_in_wfpy(transport, server, write_flow, runs_dir, monkeypatch):
    _use(monkeypatch, server)
    result = _run(_flow(write_flow, transport), runs_dir)
    assert result.status == "succeeded", result.error
    assert len(server.requests) == 3
