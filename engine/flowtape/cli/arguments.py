"""Reading the `flowtape` command line: the parser (a mistake in it is one line, or a JSON object
with --json), whole-number options, NAME=VALUE and JSON inputs, the runs directory."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ErrorReport, UsageError
from ..ports import is_resource
from ..rundir import DEFAULT_RUNS_DIR, resolve_run, summary_from_tape
from .terminal import EXIT_USAGE, say_json


class Parser(argparse.ArgumentParser):
    json_asked = False  # `--json` on the command line (run, runs, show): a mistake in it is a JSON object too

    def error(self, message: str) -> Any:  # one line and exit 2, like every other usage error
        if Parser.json_asked:
            say_json(ErrorReport.of(message))
        self.exit(EXIT_USAGE, f"flowtape: {message}\n")


def parse_input(text: str, types: dict[str, Any] | None = None) -> tuple[str, Any]:
    """NAME=VALUE: VALUE as JSON, else as text; always as text for an input declared `str`, and
    as an absolute path for one declared `File` or `Resource` (tools run in the flow's folder)."""
    if "=" not in text:
        raise UsageError(f"--input takes NAME=VALUE, not {text!r}")
    name, raw = text.split("=", 1)
    declared = types.get(name) if types is not None else None
    if declared is str:
        return name, raw
    if is_resource(declared) and raw:
        return name, os.path.abspath(os.path.expanduser(raw))
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw


def inputs_json(source: str | None) -> dict[str, Any]:
    """--inputs-json FILE: the inputs as one JSON object (how the language server passes them:
    no size limit of a command line, and a value is never taken for an option)."""
    if source is None:
        return {}
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        inputs = json.loads(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--inputs-json {source}: {exc}") from None
    if not isinstance(inputs, dict):
        raise UsageError(f"--inputs-json {source}: a JSON object of input ports is expected, not {type(inputs).__name__}")
    return inputs


def recorded_workflow(args: argparse.Namespace) -> str | None:
    """The workflow the run to resume ran, as its tape's header says; None when it cannot be told
    (the resume itself then says why it cannot go on)."""
    try:
        summary = summary_from_tape(resolve_run(args.resume_from, runs_dir_of(args)))
    except UsageError:
        return None
    return summary.workflow if summary is not None else None


def runs_dir_of(args: argparse.Namespace) -> Path:
    return Path(args.runs_dir) if getattr(args, "runs_dir", None) else DEFAULT_RUNS_DIR


_WHOLE = re.compile(r"-?[0-9]+")  # what `int()` takes beyond it (`1_0`, ` 3`, other scripts' digits) is a typo


def count(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number (from `low` to `high`); argparse names the option in its error."""

    def parse(text: str) -> int:
        if not _WHOLE.fullmatch(text) or len(text) > 30:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number" if len(text) <= 30 else "too many digits")
        value = int(text)
        if low is None:
            return value
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {value}")
        return value

    return parse
