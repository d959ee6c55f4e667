"""Trusting a tape this machine wrote, so that resuming from it need not re-verify it.

Verifying a tape means reading and rebuilding all of it, which for a large run costs about as
much as the run. But a tape that is, byte for byte, the one Flowtape wrote here needs no second
look: when a run ends, its tape's digest, keyed with a secret that never leaves this machine
(`~/.cache/flowtape/tape-key`; HMAC-SHA256), goes into `run.json`. A resume that finds
the same bytes under the same digest skips re-verification; anything else (an edited, copied,
cut or foreign tape, a run that crashed before its end) is verified in full. `flowtape verify`
always verifies in full."""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import stat
import sys
from pathlib import Path

import msgspec

from .guarded import open_regular

_KEY_BYTES = 32
SEAL_CHUNK = 1 << 20  # a tape's file is read for its seal this much at a time
MAC_CHUNK = 1 << 30  # hmac takes at most 2 GiB a call: a tape may be bigger
_key: bytes | None = None
_key_read = False


class TapeSeal(msgspec.Struct):
    """The tape as its writer left it: its size and its keyed digest."""

    bytes: int
    mac: str
    mtime: int = 0  # the file's modification time (ns) when sealed: 0 in seals from before it was kept


def _key_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flowtape" / "tape-key"


def key() -> bytes | None:
    """This machine's key, made on first use; None where it cannot be kept (nothing is trusted)."""
    global _key, _key_read
    if not _key_read:
        _key_read = True
        try:
            _key = _load_or_make(_key_path())
        except (OSError, RuntimeError):  # no home, a read-only disk, ...: every tape is verified
            _key = None
    return _key


def _load_or_make(path: Path) -> bytes | None:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # written whole under another name, then linked into place: two processes making it at
        # once end up sharing one key, and nobody ever reads half of one
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, os.urandom(_KEY_BYTES))
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return _read_key(path)


def _read_key(path: Path) -> bytes | None:
    """The key at `path` if it is this user's own secret: a regular file (not a symlink), owned by
    the user, that only the user may read or write (mode 0600). Anything else is refused, said once
    on stderr, and no tape is trusted: a key someone else could read or swap would let a tape they
    wrote pass as one this machine sealed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return _refuse(path, "it is a symbolic link")
    try:
        st = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(st.st_mode):
            problem = "it is not a regular file"
        elif hasattr(os, "getuid") and st.st_uid != os.getuid():
            problem = f"it is owned by user {st.st_uid}, not by you"
        elif stat.S_IMODE(st.st_mode) != 0o600:
            problem = f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0600"
        data = os.read(fd, _KEY_BYTES + 1) if problem is None else b""
    finally:
        os.close(fd)
    if problem is None and len(data) != _KEY_BYTES:
        problem = f"it holds {len(data)} bytes, not {_KEY_BYTES}"
    return _refuse(path, problem) if problem is not None else data


def _refuse(path: Path, problem: str) -> bytes | None:
    print(f"flowtape: warning: the trust key {path} is not used: {problem} (every tape is verified in full; "
          f"delete it to have a new one made)", file=sys.stderr)
    return None


def seal_file(path: Path, written: int) -> TapeSeal | None:
    """The seal of a tape its writer has just closed, having written `written` bytes to it; None
    when there is no key or the file is not all its writer's (anything else appended to it)."""
    seal = _file_seal(path)
    return seal if seal is not None and seal.bytes == written else None


def file_sealed(path: Path, seal: TapeSeal | None) -> bool:
    """Whether the tape at `path` is exactly the one its writer sealed with `seal` (read in chunks:
    a tape may be larger than one would hold in memory)."""
    found = _file_seal(path) if seal is not None else None
    return found is not None and found.bytes == seal.bytes and hmac.compare_digest(found.mac, seal.mac)  # type: ignore[union-attr]


def _file_seal(path: Path) -> TapeSeal | None:
    k = key()
    if k is None:
        return None
    mac = hmac.new(k, digestmod=hashlib.sha256)
    size = 0
    # one buffer, read into again and again: a new buffer for every read is new memory, whose pages
    # the kernel hands over one fault at a time (3,000 faults for a 12 MB tape: half the seal's time)
    buffer = bytearray(SEAL_CHUNK)
    view = memoryview(buffer)
    try:
        with open_regular(path) as fh:
            while got := fh.readinto(buffer):
                mac.update(view[:got])
                size += got
            mtime = os.fstat(fh.fileno()).st_mtime_ns
    except OSError:
        return None
    return TapeSeal(size, mac.hexdigest(), mtime)


def looks_sealed(path: Path, seal: TapeSeal | None) -> bool:
    """Whether the tape has the size and modification time it had when sealed: most likely the
    sealed tape, told by one stat. Only a hint (a copy keeps both, an edit may restore them):
    whoever acts on it must still check the tape (file_sealed, or a full verify)."""
    if seal is None or not seal.mtime:
        return False
    try:
        stat = os.stat(path)
    except OSError:
        return False
    return stat.st_size == seal.bytes and stat.st_mtime_ns == seal.mtime


def seals(data: bytes, seal: TapeSeal | None) -> bool:
    """Whether `data` is exactly the tape its writer sealed with `seal`."""
    if seal is None or len(data) != seal.bytes:
        return False
    k = key()
    if k is None:
        return False
    mac = hmac.new(k, digestmod=hashlib.sha256)
    view = memoryview(data)
    for start in range(0, len(data), MAC_CHUNK):
        mac.update(view[start : start + MAC_CHUNK])
    return hmac.compare_digest(mac.hexdigest(), seal.mac)
