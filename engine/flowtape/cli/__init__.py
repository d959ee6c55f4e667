"""The `flowtape` command: run, runs, show, verify, diff, debug, golden, graph, lsp. Each
subcommand is in the module for what it does (run, browse, checks, editors); here, what every
error comes to: one line on stderr and an exit code."""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from ..errors import ErrorReport, FlowError, FlowtapeError, ResumeRefused, TraceCorruption, UsageError
from .arguments import Parser
from .parser import build_parser
from .terminal import EXIT_FAILED, EXIT_OK, EXIT_USAGE, say_json, tell


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    Parser.json_asked = bool(words) and words[0] in ("run", "runs", "show", "diff") and "--json" in words
    args = build_parser().parse_args(argv)
    verbose = bool(getattr(args, "verbose", False))
    try:
        code = int(args.fn(args))
    except TraceCorruption as exc:  # (a tape of a format this Flowtape does not read is no corrupt one)
        from ..verify import RUN_JSON

        said = {"a known format version": "cannot read this tape: ", RUN_JSON: ""}.get(exc.rule, "corrupt tape: ")
        code = _error(args, f"{said}{exc}", EXIT_FAILED)
    except UsageError as exc:
        code = _error(args, exc.cli or str(exc), EXIT_USAGE, exc)
    except (FlowError, ResumeRefused) as exc:
        code = _error(args, str(exc), EXIT_USAGE, exc)
    except FlowtapeError as exc:
        code = _error(args, str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        code = _error(args, "interrupted", 130)
    except BrokenPipeError:  # `flowtape show RUN | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # a runs directory or tape it may not read, a full disk...
        where = f" {exc.filename}:" if exc.filename else ""
        code = _error(args, f"cannot go on:{where} {exc.strerror or exc}", EXIT_FAILED)
    except RecursionError:
        code = _error(args, "a value is nested too deeply to read (a tape written elsewhere, or edited?)", EXIT_FAILED)
    except Exception as exc:  # noqa: BLE001 - a bug of ours still gets one line unless --verbose
        if verbose:
            traceback.print_exc()
        code = _error(args, f"internal error: {type(exc).__name__}: {exc}", EXIT_FAILED)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def _error(args: argparse.Namespace, message: str, code: int, exc: BaseException | None = None) -> int:
    """One line on stderr (what a tape or run.json said in it escaped); with `run --json`, the one
    JSON object on stdout says it too."""
    tell(f"flowtape: {message}")
    if getattr(args, "json", False):
        say_json(ErrorReport.of(message, exc))
    return code


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
