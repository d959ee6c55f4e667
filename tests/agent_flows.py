"""What the agent tests share: the local model server as a fixture, the environment cleared of
every variable that configures a model, and the flows they run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flowtape.loader import load_flow
from flowtape.runner import execute
from flowtape.tape import End, Firing, read_tape
from model_server import ModelServer

KEY = "sk-flowtape-test-SECRET-5f3a9c"
ENV_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "WF_AGENT_PROVIDER",
            "WF_AGENT_TOKEN", "WF_AGENT_ENDPOINT", "WF_AGENT_MODEL", "AGENT_API_KEY", "OPENROUTER_API_KEY")

THREE_AGENTS = '''
from flowtape import Port, agent, connect, workflow

T = {transport!r}
M = {model!r}


@agent(prompt="Draft a reply to the ticket.", transport=T, model=M{extra})
class Draft:
    tone: str

    class Ports:
        ticket = Port[str](direction="in")
        draft = Port[str](direction="out")


@agent(prompt="Score the draft from 0 to 10.", transport=T, model=M{extra})
class Score:
    class Ports:
        draft = Port[str](direction="in")
        score = Port[int](direction="out")


@agent(prompt="Say whether to send it.", transport=T, model=M{extra})
class Decide:
    class Ports:
        score = Port[int](direction="in")
        verdict = Port[str](direction="out")


@workflow
def main():
    draft = Draft(tone="kind")
    score = Score()
    decide = Decide()
    connect("ticket", draft.ticket)
    connect(draft.draft, score.draft)
    connect(score.score, decide.score)
    connect(decide.verdict, "verdict")
'''


_written = iter(range(1 << 30))


def _flow(write_flow, transport: str = "openai", model: str = "gpt-test", extra: str = "", source: str = THREE_AGENTS):
    """A flow file of its own (the loader keeps a module per file): the three agents by default."""
    text = source.replace("{transport!r}", repr(transport)).replace("{model!r}", repr(model)).replace("{extra}", extra)
    return write_flow(text, f"flow_{next(_written)}.py")


def _use(monkeypatch, server: ModelServer, provider: str = "openai") -> None:
    if provider == "openai":
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def _run(path: Path, runs_dir: Path, **kw):
    return execute(load_flow(str(path), None), kw.pop("inputs", {"ticket": "my order is late"}), runs_dir=runs_dir, **kw)


def _firings(run_dir: Path) -> list[Firing]:
    return [line.record for line in read_tape(run_dir / "tape.jsonl").lines if isinstance(line.record, Firing)]


def _end(run_dir: Path) -> End:
    end = read_tape(run_dir / "tape.jsonl").lines[-1].record
    assert isinstance(end, End)
    return end

MULTI_TURN = '''
from flowtape import File, Port, agent, connect, workflow


@agent(prompt="Write the note.", transport="openai", model="gpt-test")
class Writer:
    class Ports:
        topic = Port[str](direction="in")
        note = Port[File(ext=".md")](direction="out")


@workflow
def main():
    writer = Writer()
    connect("topic", writer.topic)
    connect(writer.note, "note")
'''

GEN_CHAT = '''
from flowtape import Port, agent, connect, task, workflow


@task
class Questions:
    class Ports:
        Out = Port[str](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 2:
            return None
        self.i += 1
        return f"q{self.i}"


@agent(prompt="Answer.", transport="openai", model="gpt-test")
class Chat:
    class Ports:
        question = Port[str](direction="in")
        answer = Port[str](direction="out")


@workflow
def main():
    questions = Questions()
    chat = Chat()
    connect(questions.Out, chat.question)
    connect(chat.answer, "answer")
'''

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


def _cli_env(server: ModelServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    return {**env, "OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": KEY}


def _flowtape(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowtape", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)
