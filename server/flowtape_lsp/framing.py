"""LSP's base protocol, read robustly: `Content-Length` framing that one bad frame cannot break.

pygls reads a header and then exactly that many bytes: a `Content-Length` that is not a number,
missing or a few bytes off leaves it reading headers in the middle of bodies (answering nothing,
ever again), and `Content-Length: 1000000000000` makes it allocate that much. Here the stream is
framed before pygls sees it, and pygls is handed only well-formed frames:

- a header block that is not `Name: value` lines with one numeric Content-Length (any case, as
  HTTP's) is refused, said with a parse error, and reading resumes at the next `Content-Length`;
- a length over MAX_MESSAGE is refused as it is read, before anything is allocated for it;
- a body is gathered as its bytes arrive (never allocated ahead of them), and one in which the
  next frame's header turns up is cut there (a length too long for its message: a valid JSON
  body can never hold a `Content-Length: N` line, whose newline would be raw) and reading goes on
  with that frame. A length too short leaves a body that is not JSON (answered -32700 as any)
  and bytes before the next header (refused as above)."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Awaitable, Callable

MAX_MESSAGE = 256 << 20  # bytes a message may have
MAX_HEADERS = 8 << 10  # bytes a header block may have
_ANCHOR = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)  # where a frame may start
_NEXT_FRAME = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a header name (RFC 9110)
_OVERLAP = 64  # bytes searched again when a body grows (a header cut between two reads)


class Framer:
    """Bytes in (`feed`), message bodies out (`bodies`); every bad frame is told to `on_bad`."""

    def __init__(self, on_bad: Callable[[str], None]) -> None:
        self.on_bad = on_bad
        self.bodies: deque[bytes] = deque()
        self._buf = bytearray()
        self._need: int | None = None  # the length of the body being read
        self._scanned = 0  # how much of that body was searched for a next frame's header
        self._skipping = False  # after a refused frame: nothing counts until the next Content-Length

    def feed(self, data: bytes) -> None:
        self._buf += data
        while self._step():
            pass

    def _step(self) -> bool:
        """Take one frame (or one refusal) off the buffer; False when it needs more bytes."""
        buf = self._buf
        if self._need is not None:
            return self._body(self._need)
        if self._skipping:
            found = _ANCHOR.search(buf)
            if found is None:
                del buf[: max(len(buf) - _OVERLAP, 0)]
                return False
            del buf[: found.start()]
            self._skipping = False
        lead = len(buf) - len(buf.lstrip())  # (line breaks between frames)
        if lead:
            del buf[:lead]
        if not buf:
            return False
        end = buf.find(b"\r\n\r\n")
        if end < 0 or end > MAX_HEADERS:
            if end < 0 and len(buf) <= MAX_HEADERS:
                return False
            self._refuse(f"no end of the headers in the first {MAX_HEADERS:,} bytes")
            return True
        length, problem = _length(bytes(buf[:end]))
        if problem is not None:
            self._refuse(problem)
            return True
        del buf[: end + 4]
        self._need, self._scanned = length, 0
        return True

    def _body(self, need: int) -> bool:
        buf = self._buf
        start = max(self._scanned - _OVERLAP, 0)
        found = _NEXT_FRAME.search(buf, start, min(len(buf), need + _OVERLAP))
        if found is not None and found.start() < need:
            self.on_bad(f"a message of Content-Length {need:,} holds the header of the next one after "
                        f"{found.start():,} bytes: its length was wrong; read on from that header")
            del buf[: found.start()]
            self._need = None
            return True
        self._scanned = min(len(buf), need)
        if len(buf) < need or (len(buf) < need + _OVERLAP and _header_begun(buf, need)):
            return False
        self.bodies.append(bytes(buf[:need]))
        del buf[:need]
        self._need = None
        return True

    def _refuse(self, problem: str) -> None:
        """Refuse the frame at the start of the buffer and skip to the next Content-Length."""
        self.on_bad(f"a bad frame, skipped: {problem}")
        found = _ANCHOR.search(self._buf, 1)
        if found is None:
            del self._buf[: max(len(self._buf) - _OVERLAP, 1)]
            self._skipping = True
        else:
            del self._buf[: found.start()]


_BEGUN = re.compile(rb"content-length[ \t]*:[ \t]*\d*[ \t]*\r?", re.IGNORECASE)


def _header_begun(buf: bytearray, need: int) -> bool:
    """Whether the body's last bytes and what follows, to the end of what was read, may be the
    start of the next frame's Content-Length line, not all of it read yet (a length too long)."""
    low = bytes(buf[max(need - 40, 0) :]).lower()
    for i in range(len(low) - (len(buf) - need)):
        tail = low[i:]
        if b"content-length".startswith(tail) or _BEGUN.fullmatch(tail):
            return True
    return False


def _length(block: bytes) -> tuple[int, str | None]:
    """The Content-Length of a header block, or why the block is no frame's."""
    length: int | None = None
    for line in block.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name.strip(b" \t")):
            return 0, f"{_shown(line)} is no header line"
        if name.strip(b" \t").lower() != b"content-length":
            continue  # Content-Type, say
        value = value.strip(b" \t")
        if not value.isdigit():
            return 0, f"Content-Length {_shown(value)} is not a number of bytes"
        length = int(value)  # (digits only: the number is no bigger than the header is long)
    if length is None:
        return 0, "no Content-Length header"
    if length == 0:
        return 0, "Content-Length 0: an empty message"
    if length > MAX_MESSAGE:
        return 0, f"Content-Length {length:,} is over the {MAX_MESSAGE:,} bytes a message may have"
    return length, None


def _shown(data: bytes) -> str:
    return repr(data[:60].decode("latin-1")) + ("…" if len(data) > 60 else "")


class FramedReader:
    """What pygls's message loop reads (`readline`, `readexactly`), serving only good frames,
    from chunks of raw bytes (`read_chunk`: b"" at the end of the input)."""

    def __init__(self, read_chunk: Callable[[], Awaitable[bytes]], on_bad: Callable[[str], None]) -> None:
        self._read_chunk = read_chunk
        self._framer = Framer(on_bad)
        self._lines: deque[bytes] = deque()
        self._body = b""

    @property
    def on_bad(self) -> Callable[[str], None]:
        return self._framer.on_bad

    @on_bad.setter
    def on_bad(self, value: Callable[[str], None]) -> None:
        self._framer.on_bad = value

    async def _fill(self) -> bool:
        """Read until a body is framed; False at the end of the input."""
        while not self._framer.bodies:
            chunk = await self._read_chunk()
            if not chunk:
                return False
            self._framer.feed(chunk)
        return True

    async def peek_body(self) -> bytes | None:
        """The next message's body, left to be read; None at the end of the input."""
        return self._framer.bodies[0] if await self._fill() else None

    async def readline(self) -> bytes:
        if not self._lines:
            if not await self._fill():
                return b""
            self._body = self._framer.bodies.popleft()
            self._lines.extend((b"Content-Length: %d\r\n" % len(self._body), b"\r\n"))
        return self._lines.popleft()

    async def readexactly(self, n: int) -> bytes:
        body, self._body = self._body, b""
        return body
