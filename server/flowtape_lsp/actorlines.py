"""Where an actor is created in its file's text as the editor holds it now. A run recorded the
line in the file as it was saved then; since, the file may have been saved again, and the editor
may hold unsaved lines added or removed above the actor. Diagnostics, hovers and inlay hints go
to the line found here."""

from __future__ import annotations

import bisect
import difflib
import os
import re
from pathlib import Path
from urllib.parse import unquote

from flowtape.tape import ActorInfo
from pygls.workspace import Workspace

from .workspace import read_named, split_lines, uri_to_path

_CACHED = 64  # files whose text (and its moves since saved) is kept


class FileText:
    """A file's lines as the editor holds them (else as saved), and where each line of the text
    as saved went in them."""

    def __init__(self, lines: list[str], saved: list[str] | None, version: int | None = None) -> None:
        self.lines = lines
        self.version = version  # the editor's version of the text (None: the file as saved)
        self.found: dict[tuple[str, int, str], int | None] = {}  # creation_line's answers for this text
        self._moves = None
        if saved is not None and saved != lines:
            self._moves = difflib.SequenceMatcher(None, saved, lines, autojunk=False).get_opcodes()
            self._starts = [m[1] for m in self._moves]

    def moved(self, line0: int) -> tuple[int, bool]:
        """Where line `line0` of the saved text is now, and whether it is there unchanged."""
        if self._moves is None:
            return line0, True
        at = bisect.bisect_right(self._starts, line0) - 1
        if at < 0:
            return line0, False
        tag, i1, i2, j1, _ = self._moves[at]
        if tag == "equal" and line0 < i2:
            return j1 + line0 - i1, True
        return j1, False  # the line was edited or deleted: look around where it was


_texts: dict[str, tuple[object, FileText]] = {}


def current_text(workspace: Workspace, uri: str) -> FileText:
    """The file's text as the editor holds it (unsaved edits included), else as saved."""
    path = uri_to_path(uri)
    try:
        st = os.stat(path) if path is not None else None
        stamp: object = (st.st_mtime_ns, st.st_size) if st is not None else None
    except (OSError, ValueError):
        stamp = None
    doc = workspace.text_documents.get(unquote(uri))
    key = (stamp, doc.version if doc is not None else None, id(doc))
    cached = _texts.get(uri)
    if cached is not None and cached[0] == key:
        return cached[1]
    saved = _read(path) if stamp is not None else None
    text = FileText(split_lines(doc.source), saved, doc.version) if doc is not None else FileText(saved or [], None)
    if len(_texts) >= _CACHED:
        _texts.clear()
    _texts[uri] = (key, text)
    return text


def _read(path: Path | None) -> list[str] | None:
    text = read_named(path) if path is not None else None
    return split_lines(text) if text is not None else None


def creation_line(text: FileText, actor: ActorInfo) -> int | None:
    """The line (0-based) of `text` that creates `actor`: its recorded line, moved along with the
    editor's unsaved edits, while that line still creates it (assigns its name, or names its
    class: `return Square()` in a factory); else the nearest line that assigns its name, one
    that names its class too first (the file was edited since the run). None when no line
    creates it any more."""
    key = (actor.path, actor.line, actor.cls)
    if key not in text.found:
        text.found[key] = _creation_line(text, actor)
    return text.found[key]


def _creation_line(text: FileText, actor: ActorInfo) -> int | None:
    lines = text.lines
    at, _ = text.moved(actor.line - 1)  # (a line edited or deleted since: where it was)
    name = actor.path.rsplit("/", 1)[-1]
    names = {name, re.sub(r"_[0-9]+$", "", name)}  # `drafts_0` is an item of `drafts = [...]`, `w_1` of a for loop's `w`
    alternatives = "|".join(re.escape(n) for n in sorted(names))
    assigns = re.compile(rf"\s*(?:{alternatives})\s*(?::[^=]*)?=(?!=)|\s*(?:async\s+)?with\s.*\bas\s+(?:{alternatives})\b")
    cls = {"if": "if_"}.get(actor.cls, actor.cls)
    names_class = re.compile(rf"\b{re.escape(cls)}\s*\(") if cls else None  # a call of it, not `class Square:`
    if 0 <= at < len(lines) and (assigns.match(lines[at]) or (names_class is not None and names_class.search(lines[at]))):
        return at
    nearest: int | None = None
    for distance in range(1, len(lines) + 1):
        for line0 in (at - distance, at + distance):
            if 0 <= line0 < len(lines) and assigns.match(lines[line0]):
                if names_class is None or names_class.search(lines[line0]):
                    return line0
                nearest = line0 if nearest is None else nearest
    return nearest  # None: no line creates it now (its line was deleted), and no hint stands for it
