"""Paths and uris: the workspace's flow files, and where an actor is created in them."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from urllib.parse import quote

from flowtape.guarded import read_text
from flowtape.tape import ActorInfo, Header
from pygls.uris import from_fs_path, to_fs_path

from . import protocol as P

# Files are named to the client as it names them, so that diagnostics and steps land on the
# documents it has open: a file it opened or ran by its very uri (a symlinked folder, its own
# percent-encoding); else, under the workspace, through the root it gave (macOS's /tmp is
# /private/tmp); else by the file's real path.
_client_root: tuple[Path, Path] | None = None  # the workspace root resolved, and as the client names it
_client_uris: dict[str, str] = {}  # a file's real path: the uri the client named it by last
# What the server reads of the files a tape names (guarded.py): those inside the workspace, or
# inside the folder of a flow file a run names (its actors' modules sit beside it).
_root: Path = Path.cwd().resolve()
_flow_folders: set[str] = set()


def use_client_root(given: Path, resolved: Path) -> None:
    global _client_root, _root
    _client_root = (resolved, given) if given != resolved else None
    _root = resolved
    path_to_uri.cache_clear()


def reading_roots() -> list[Path | str]:
    return [_root, *_flow_folders]


def flow_folder_of(header: Header) -> None:
    """Let the server read the files beside the flow file a run's tape names (for their lines)."""
    if header.flowFile and "\0" not in header.flowFile and len(_flow_folders) < 256:
        _flow_folders.add(os.path.dirname(os.path.abspath(header.flowFile)))


def read_named(path: Path | str) -> str | None:
    """The text of a file a tape or the client names, read as guarded.py reads it (a regular file,
    inside the workspace or a run's flow folder, of a bounded size); None when it is not available."""
    try:
        return read_text(path, roots=reading_roots())
    except (OSError, ValueError):
        return None


def named_by_client(uri: str) -> Path | None:
    """The file a uri from the client names (see uri_to_path), remembered under that uri."""
    path = uri_to_path(uri)
    if path is not None and _client_uris.get(str(path)) != uri:
        if len(_client_uris) > 4096:
            _client_uris.clear()
        _client_uris[str(path)] = uri
        path_to_uri.cache_clear()
    return path


@functools.lru_cache(maxsize=1024)
def path_to_uri(path: str) -> str:
    # Called for every streamed step: resolving the path each time was most of the server's work.
    try:
        resolved = Path(path).resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a loop of symlinks: a name, not a file
        return "file://" + quote(path)
    named = _client_uris.get(str(resolved))
    if named is not None:
        return named
    return from_fs_path(client_path(resolved)) or ""


def client_path(resolved: Path) -> str:
    """A real path under the workspace as the client names it (through the root it gave)."""
    if _client_root is not None and resolved.is_relative_to(_client_root[0]):
        return str(_client_root[1] / resolved.relative_to(_client_root[0]))
    return str(resolved)


def fs_path(uri: str) -> str | None:
    """The path a `file:` uri spells, as spelled (symlinks kept); None for another scheme or a
    name no file can have."""
    if not uri.startswith("file:"):
        return None
    if uri.startswith("file://localhost/"):  # the same file as file:///, spelled out (RFC 8089)
        uri = "file:///" + uri[len("file://localhost/") :]
    try:
        fs = to_fs_path(uri)
    except (OSError, ValueError):
        return None
    return fs if fs and "\0" not in fs else None


def uri_to_path(uri: str) -> Path | None:
    """The file a `file:` uri names, resolved; None for another scheme or a name no file can have."""
    fs = fs_path(uri)
    try:
        return Path(fs).resolve() if fs is not None else None
    except (OSError, ValueError):  # a name too long, or otherwise impossible
        return None


def flow_path(uri: str, root: Path) -> Path:
    """The flow file a uri names, refusing anything outside the workspace or not a file."""
    path = uri_to_path(uri)
    if path is None:
        raise P.invalid(f"uri {uri[:200]!r} does not name a file on this machine (a file: uri is expected)")
    if not path.is_relative_to(root):
        raise P.invalid(f"uri {uri!r} is outside the workspace {root}")
    try:
        found = path.is_file()
    except OSError as exc:  # a name too long, say
        raise P.invalid(f"cannot read {str(path)[:200]}: {exc.strerror}") from None
    if not found:
        raise P.invalid(f"no such file: {path}")
    named_by_client(uri)
    return path


def same_file(a: str, b: str) -> bool:
    return a == b or uri_to_path(a) == uri_to_path(b)


def file_key(uri: str) -> str:
    """What to key a flow's state by: its file, however the uri spells it (`%66`, `localhost`)."""
    path = uri_to_path(uri)
    return str(path) if path is not None else uri


class Locator:
    """Maps actors to the LSP range of the line that creates them (line lengths read once per file)."""

    def __init__(self) -> None:
        self._lengths: dict[str, tuple[tuple[int, int], list[int]]] = {}  # by file: (mtime, size) when read, lengths
        self._actors: dict[int, tuple[Header, dict[str, ActorInfo], dict[str, tuple[str, P.Range]]]] = {}

    def line_length(self, file: str, line0: int) -> int:
        # Read again when the file changed on disk, saved by the editor or not (a checkout, a
        # script): asked once per actor of a run's header, so a stat costs nothing here.
        try:
            st = os.stat(file)
            stamp = (st.st_mtime_ns, st.st_size)
        except (OSError, ValueError):  # gone, or a name with a NUL byte
            stamp = (0, -1)
        known = self._lengths.get(file)
        if known is None or known[0] != stamp:
            text = read_named(file)
            lengths = [len(ln.encode("utf-16-le")) // 2 for ln in split_lines(text)] if text is not None else []
            if len(self._lengths) > 256:
                self._lengths.clear()
            known = self._lengths[file] = (stamp, lengths)
        lengths = known[1]
        return lengths[line0] if 0 <= line0 < len(lengths) else 0

    def prepare(self, header: Header) -> None:
        """Read the lines of the files a run's actors are created in (off the event loop: call it
        in a thread), so that placing its steps reads no file."""
        flow_folder_of(header)
        for file in {a.file for a in header.actors if a.file and not a.file.startswith("<")} | {header.flowFile}:
            self.line_length(file, 0)

    def actor_range(self, header: Header, path: str) -> tuple[str, P.Range]:
        cached = self._actors.get(id(header))
        if cached is None or cached[0] is not header:
            if len(self._actors) > 64:
                self._actors.clear()
            cached = self._actors[id(header)] = (header, {a.path: a for a in header.actors}, {})
        known = cached[2].get(path)
        if known is not None:
            return known
        actor = cached[1].get(path)
        if actor is None or not actor.file or actor.file.startswith("<"):
            file = header.flowFile
            line0 = 0
        else:
            file = actor.file
            line0 = max(actor.line - 1, 0)
        found = cached[2][path] = (path_to_uri(file), line_range(line0, self.line_length(file, line0)))
        return found


def line_range(line0: int, length: int = 0) -> P.Range:
    return P.Range(start=P.Position(line=line0, character=0), end=P.Position(line=line0, character=length))


_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """A text's lines as Python and LSP count them: only \\n, \\r\\n and \\r end a line
    (`str.splitlines` also ends one at a form feed, \\x1c to \\x1e, \\x85, U+2028, U+2029)."""
    lines = _BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def find_actor(header: Header, path: str) -> ActorInfo | None:
    for actor in header.actors:
        if actor.path == path:
            return actor
    return None
