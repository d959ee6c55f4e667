"""A review by a model: each draft goes to a reviewer agent, which answers with a verdict and a
note; a report sums them up. It calls any OpenAI-compatible server (OpenAI, vLLM, Ollama,
LM Studio, OpenRouter, …) when OPENAI_BASE_URL or OPENAI_API_KEY is set, and answers offline
with the mock transport when neither is (so this runs anywhere as it is).

    flowtape run examples/agents.py                        # offline: the mock answers
    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=ollama MODEL=llama3.2 \\
        flowtape run examples/agents.py                    # a local Ollama, say
    flowtape run examples/agents.py --resume-from <run-id> # replays every answer: no request, no key

The tape keeps every answer, with the tokens each call took (`flowtape show <run-id> --step 2`).
"""

import os

from flowtape import Port, action, agent, connect, loop, task, workflow

DRAFTS = [
    "Flowtape records every firing on a tape.",
    "tapes r cool",
]

LIVE = bool(os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


def mock_verdict(inputs):
    draft = inputs["draft"]
    return "approve" if draft[:1].isupper() and draft.endswith(".") else "revise"


@agent(
    prompt="You review one sentence of documentation. Give the verdict 'approve' or 'revise', and a short note.",
    transport="openai" if LIVE else "mock",
    model=os.environ.get("MODEL", "gpt-4o-mini"),
    mock_outputs={"verdict": mock_verdict, "note": lambda inputs: f"{len(inputs['draft'].split())} words"},
)
class Reviewer:
    class Ports:
        draft = Port[str](direction="in")
        verdict = Port[str](direction="out")
        note = Port[str](direction="out")


@task
class Tally:
    """Counts the verdicts as they come, and says the sum once the loop is done."""

    approved: int = 0
    revised: int = 0

    class Ports:
        verdict = Port[str](direction="in")
        done = Port[object](direction="in")
        summary = Port[str](direction="out")

    @action(consumes={"verdict": 1}, produces={})
    def add(self, verdict):
        if verdict.strip().lower() == "approve":
            self.approved += 1
        else:
            self.revised += 1

    @action(consumes={"done": 1}, produces={"summary": 1})
    def finish(self, _done):
        return f"{self.approved + self.revised} drafts reviewed: {self.approved} approved, {self.revised} to revise"


@workflow
def main():
    drafts = loop(DRAFTS)
    with drafts:
        reviewer = Reviewer()
    tally = Tally()
    connect(drafts.item, reviewer.draft)
    connect(reviewer.verdict, tally.verdict)
    connect(drafts.out, tally.done)
    connect(reviewer.note, "notes")
    connect(tally.summary, "summary")
