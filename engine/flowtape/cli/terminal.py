"""How the `flowtape` command writes: its exit codes, text with what a tape says escaped, one line
of JSON, and how far the check of a long tape has got."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import msgspec

from ..progress import Checking

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# what a tape or run.json says is printed with its control characters shown, not obeyed: a tape
# from elsewhere must not retitle the terminal, rewrite the lines above, or reorder what a line
# shows with bidirectional overrides (the "Trojan Source" trick)
_CONTROLS = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (*range(9), *range(11, 32), 127, *range(0x80, 0xA0), 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A))
}


def say(text: str) -> None:
    print(text.translate(_CONTROLS))


def tell(text: str) -> None:
    """A message on stderr, escaped as say escapes output: tape text in it is shown, not obeyed."""
    print(text.translate(_CONTROLS), file=sys.stderr)


def say_json(value: object) -> None:
    """One line of JSON (run.json holds its outputs indented: made one line too)."""
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(value), indent=0).decode() + "\n")


@contextlib.contextmanager
def checking_progress() -> Iterator[Checking | None]:
    """How far the check of a long tape has got, on a terminal (a million steps take seconds)."""
    if not sys.stderr.isatty():
        yield None
        return
    shown = Checking()
    try:
        yield shown
    finally:
        shown.close()
