"""A mock-agent review (what `make demo` runs). A loop hands each draft to a reviewer agent,
which answers offline from `mock_outputs` (transport="mock": no model, no network). A triage
task routes by the verdict with guards; drafts that need work get revised; a report sums up
once the loop is done.

    flowtape run examples/review.py
    flowtape runs                       # the run you just made, newest first
    flowtape show <run-id> --step 3     # queues, state and the agent's chat at step 3
"""

from flowtape import Port, action, agent, connect, guard, loop, task, workflow

DRAFTS = [
    "Flowtape records every firing on a tape.",
    "this paragraph rambles on without a point and also has no capital letter at the start",
    "Resume at any step replays the recorded firings.",
    "tapes r cool",
]


def verdict(inputs):
    """The mock reviewer's rule: a draft passes when it starts with a capital and ends with a period."""
    draft = inputs["Draft"]
    return "approve" if draft[:1].isupper() and draft.endswith(".") else "revise"


def note(inputs):
    draft = inputs["Draft"]
    problems = [p for p, bad in [("capital letter", not draft[:1].isupper()), ("final period", not draft.endswith("."))] if bad]
    return "looks good" if not problems else "missing " + " and ".join(problems)


@agent(
    prompt="You review one paragraph of documentation. Answer approve or revise, with a short note.",
    transport="mock",
    mock_outputs={"Verdict": verdict, "Note": note},
)
class Reviewer:
    class Ports:
        Draft = Port[str](direction="in")
        Verdict = Port[str](direction="out")
        Note = Port[str](direction="out")


@task
class Triage:
    """Joins a draft with its verdict; guards pick the route."""

    class Ports:
        Draft = Port[str](direction="in")
        Verdict = Port[str](direction="in")
        Approved = Port[str](direction="out")
        NeedsWork = Port[str](direction="out")

    @action(produces={"Approved": 1})
    @guard(lambda self, draft, verdict: verdict == "approve")
    def approve(self, draft, verdict):
        return draft

    @action(produces={"NeedsWork": 1})
    def send_back(self, draft, verdict):
        return draft


@task
class Revise:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")

    def action(self, draft):
        text = draft.strip().rstrip(".")
        return text[:1].upper() + text[1:] + "."


@task
class Report:
    """Collects approved and revised drafts; the loop's `out` token releases the report."""

    approved: list = []
    revised: list = []

    class Ports:
        Approved = Port[str](direction="in")
        Revised = Port[str](direction="in")
        Done = Port[object](direction="in")
        Published = Port[list](direction="out")
        Summary = Port[str](direction="out")

    @action(consumes={"Approved": 1}, produces={})
    def keep(self, draft):
        self.approved.append(draft)

    @action(consumes={"Revised": 1}, produces={})
    def keep_revised(self, draft):
        self.revised.append(draft)

    @action(consumes={"Done": 1}, produces={"Published": 1, "Summary": 1})
    def finish(self, _done):
        total = len(self.approved) + len(self.revised)
        summary = f"{total} drafts reviewed: {len(self.approved)} approved, {len(self.revised)} revised"
        return {"Published": self.approved + self.revised, "Summary": summary}


@workflow
def main():
    drafts = loop(DRAFTS)
    with drafts:
        reviewer = Reviewer()
        triage = Triage()
        revise = Revise()
    report = Report()
    connect(drafts.item, reviewer.Draft)
    connect(drafts.item, triage.Draft)
    connect(reviewer.Verdict, triage.Verdict)
    connect(triage.Approved, report.Approved)
    connect(triage.NeedsWork, revise.In)
    connect(revise.Out, report.Revised)
    connect(drafts.out, report.Done)
    connect(report.Summary, "Summary")
    connect(report.Published, "Published")
    connect(reviewer.Note, "Notes")
