"""What model calls cost: each live call's usage on its firing's record, a run's totals in
`run.json`, its end record and the language server's messages, and what a resume saved.

Every struct here is defined once and shared by the tape, run.json and the language server."""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec


class ModelCall(msgspec.Struct, omit_defaults=True):
    """One live request to a model (a repair is a call of its own), on its firing's record."""

    model: str
    inputTokens: int = 0
    outputTokens: int = 0
    ms: int = 0  # latency: from the request to the answer, the SDK's retries included


class Spent(msgspec.Struct, omit_defaults=True):
    """The calls to one model that a tape's firings record up to a point (replayed ones included):
    what a resume from there saves. Checkpoints carry them, as they carry states."""

    model: str
    calls: int = 0
    inputTokens: int = 0
    outputTokens: int = 0


class Spending:
    """Calls added up per model."""

    def __init__(self, spent: list[Spent] | None = None) -> None:
        self.by_model: dict[str, Spent] = {}
        self.merge(spent or [])

    def add(self, calls: list[ModelCall]) -> None:
        for call in calls:
            into = self.by_model.setdefault(call.model, Spent(call.model))
            into.calls += 1
            into.inputTokens += call.inputTokens
            into.outputTokens += call.outputTokens

    def merge(self, spent: list[Spent]) -> None:
        for part in spent:
            into = self.by_model.setdefault(part.model, Spent(part.model))
            into.calls += part.calls
            into.inputTokens += part.inputTokens
            into.outputTokens += part.outputTokens

    def listed(self) -> list[Spent]:
        return [Spent(s.model, s.calls, s.inputTokens, s.outputTokens) for s in self.by_model.values()]

    def total(self) -> Spent:
        whole = Spent("")
        for part in self.by_model.values():
            whole.calls += part.calls
            whole.inputTokens += part.inputTokens
            whole.outputTokens += part.outputTokens
        return whole

    def cost(self, prices: dict[str, Price]) -> float | None:
        """What the calls cost, or None when a model they used has no price (a cost that leaves a
        model out would read as the whole)."""
        total = 0.0
        for model, spent in self.by_model.items():
            price = prices.get(model)
            if price is None:
                return None
            total += (spent.inputTokens * price.input + spent.outputTokens * price.output) / 1e6
        return round(total, 6)


class Usage(msgspec.Struct, omit_defaults=True):
    """A run's model calls: those it made (`calls`, tokens) and those its resume replayed instead
    (`replayedCalls`, with the tokens they had cost: `saved*`). `cost` and `savedCost` (in the
    price table's currency) only with a price table (see `Prices`)."""

    calls: int  # (no defaults: all six are always written)
    inputTokens: int
    outputTokens: int
    replayedCalls: int
    savedInputTokens: int
    savedOutputTokens: int
    cost: float | None = None
    savedCost: float | None = None

    def said(self) -> list[str]:
        """How the CLI says it: what was called, then (last) what a resume saved."""
        lines = []
        if self.calls:
            money = f" ({self.cost:,.4f})" if self.cost is not None else ""
            times = "once" if self.calls == 1 else f"{self.calls:,} times"
            lines.append(f"called models {times}: {self.inputTokens:,} input and {self.outputTokens:,} output tokens{money}")
        if self.replayedCalls:
            money = f" ({self.savedCost:,.4f})" if self.savedCost is not None else ""
            calls = "1 model call" if self.replayedCalls == 1 else f"{self.replayedCalls:,} model calls"
            lines.append(f"replayed {calls}, saved "
                         f"{self.savedInputTokens + self.savedOutputTokens:,} tokens{money}")
        return lines


class Price(msgspec.Struct, forbid_unknown_fields=True):
    """What a model costs per million tokens, in and out."""

    input: float = 0.0
    output: float = 0.0


PRICES_FILE = "pyproject.toml"  # its [tool.flowtape.prices] table: {"model": {input = …, output = …}}


class Tally:
    """A run's usage as it goes: the calls it makes and those its replayed firings had made."""

    def __init__(self) -> None:
        self.live = Spending()
        self.replayed = Spending()

    def add(self, calls: list[ModelCall], replayed: bool) -> None:
        (self.replayed if replayed else self.live).add(calls)

    def on_tape(self) -> list[Spent]:
        """Every call the tape records so far, replayed ones included (for a checkpoint)."""
        both = Spending(self.live.listed())
        both.merge(self.replayed.listed())
        return both.listed()

    def usage(self, prices: dict[str, Price] | None = None) -> Usage | None:
        """The run's usage (None when it neither called nor replayed a model)."""
        live, saved = self.live.total(), self.replayed.total()
        if not live.calls and not saved.calls:
            return None
        usage = Usage(live.calls, live.inputTokens, live.outputTokens, saved.calls, saved.inputTokens, saved.outputTokens)
        if prices:
            usage.cost = self.live.cost(prices) if live.calls else None
            usage.savedCost = self.replayed.cost(prices) if saved.calls else None
        return usage


class PriceTableError(ValueError):
    """The price table in pyproject.toml is not one."""


def find_prices(start: Path) -> dict[str, Price] | None:
    """The price table of the project holding `start` (the nearest pyproject.toml above it with a
    [tool.flowtape.prices] table), or None."""
    for folder in [start, *start.parents]:
        path = folder / PRICES_FILE
        if not path.is_file():
            continue
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("flowtape", {}).get("prices")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
        if table is None:
            return None
        try:
            return msgspec.convert(table, dict[str, Price])
        except msgspec.ValidationError as exc:
            raise PriceTableError(f"{path}: [tool.flowtape.prices] is not a table of models with input and output "
                                  f"prices per million tokens: {exc}") from None
    return None
