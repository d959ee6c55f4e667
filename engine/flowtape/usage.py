"""What model calls cost: each live call's usage on its firing's record, a run's totals in
`run.json`, its end record and the language server's messages, and what a resume saved.

Every struct here is defined once and shared by the tape, run.json and the language server."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path

import msgspec


class ModelCall(msgspec.Struct, omit_defaults=True):
    """One live request to a model (a repair is a call of its own), on its firing's record."""

    model: str
    inputTokens: int = 0
    outputTokens: int = 0
    ms: int = 0  # latency: from the request to the answer, the SDK's retries included


class Spent(msgspec.Struct, omit_defaults=True):
    """The calls a tape's firings record up to a point (replayed ones included): what a resume
    from there saves. Checkpoints carry it, as they carry states."""

    calls: int = 0
    inputTokens: int = 0
    outputTokens: int = 0

    def add(self, calls: list[ModelCall]) -> None:
        self.calls += len(calls)
        self.inputTokens += sum(c.inputTokens for c in calls)
        self.outputTokens += sum(c.outputTokens for c in calls)


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
            lines.append(f"called models {self.calls} time(s): {self.inputTokens:,} input and "
                         f"{self.outputTokens:,} output tokens{money}")
        if self.replayedCalls:
            money = f" ({self.savedCost:,.4f})" if self.savedCost is not None else ""
            lines.append(f"replayed {self.replayedCalls:,} model calls, saved "
                         f"{self.savedInputTokens + self.savedOutputTokens:,} tokens{money}")
        return lines


class Price(msgspec.Struct, forbid_unknown_fields=True):
    """What a model costs per million tokens, in and out."""

    input: float = 0.0
    output: float = 0.0


PRICES_FILE = "pyproject.toml"  # its [tool.flowtape.prices] table: {"model": {input = …, output = …}}


class Tally:
    """A run's usage as it goes: the calls it makes and those its replayed firings had made,
    kept per model so that a price table can put a cost on them."""

    def __init__(self) -> None:
        self.live: dict[str, Spent] = {}
        self.replayed: dict[str, Spent] = {}
        self.replayed_unpriced = Spent()  # a snapshot's: its calls' models are not told apart

    def add(self, calls: list[ModelCall], replayed: bool) -> None:
        into = self.replayed if replayed else self.live
        for call in calls:
            into.setdefault(call.model, Spent()).add([call])

    def add_saved(self, spent: Spent) -> None:
        self.replayed_unpriced.calls += spent.calls
        self.replayed_unpriced.inputTokens += spent.inputTokens
        self.replayed_unpriced.outputTokens += spent.outputTokens

    def spent(self) -> Spent:
        """Every call the tape records so far, replayed ones included (for a checkpoint)."""
        total = Spent(self.replayed_unpriced.calls, self.replayed_unpriced.inputTokens, self.replayed_unpriced.outputTokens)
        for part in (*self.live.values(), *self.replayed.values()):
            total.calls += part.calls
            total.inputTokens += part.inputTokens
            total.outputTokens += part.outputTokens
        return total

    def usage(self, prices: dict[str, Price] | None = None) -> Usage | None:
        """The run's usage (None when it neither called nor replayed a model)."""
        live = _sum(self.live.values())
        saved = _sum([*self.replayed.values(), self.replayed_unpriced])
        if not live.calls and not saved.calls:
            return None
        usage = Usage(live.calls, live.inputTokens, live.outputTokens, saved.calls, saved.inputTokens, saved.outputTokens)
        if prices:
            usage.cost = _cost(self.live, prices)
            if not self.replayed_unpriced.calls:
                usage.savedCost = _cost(self.replayed, prices)
        return usage


def _sum(parts: Iterable[Spent]) -> Spent:
    total = Spent()
    for part in parts:
        total.calls += part.calls
        total.inputTokens += part.inputTokens
        total.outputTokens += part.outputTokens
    return total


def _cost(by_model: dict[str, Spent], prices: dict[str, Price]) -> float | None:
    """The calls' cost, or None when a model they used has no price (a cost that leaves a model
    out would read as the whole)."""
    total = 0.0
    for model, spent in by_model.items():
        price = prices.get(model)
        if price is None:
            return None
        total += (spent.inputTokens * price.input + spent.outputTokens * price.output) / 1e6
    return round(total, 6)


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
