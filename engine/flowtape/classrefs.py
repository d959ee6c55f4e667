"""How a class is named on the tape and found again, and which classes are the flow's own: a value
of a class is saved only when its class can be found by name and is one the flow defined (or a
plain holder of the standard library), so that reading a tape never rebuilds an object that could
do what the tape, not the user, chose. `NotEncodable` says what cannot be saved, and where."""

from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig
import threading
from pathlib import Path
from types import BuiltinFunctionType

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: classes made by `class` statements (and some C types)
_NO_INSTANTIATE = 1 << 7  # Py_TPFLAGS_DISALLOW_INSTANTIATION
_NICE_NAMES: dict[type, str] = {type(threading.Lock()): "Lock"}


class NotEncodable(Exception):
    """A value (or something inside it) cannot be put on the tape; ``path`` says where."""

    def __init__(self, what: str, path: str = "") -> None:
        super().__init__(f"{path}: {what}" if path else what)
        self.what, self.path = what, path

    def with_prefix(self, prefix: str) -> NotEncodable:
        # Paths are built while unwinding, so the happy path never pays for string formatting.
        return NotEncodable(self.what, prefix + self.path)


def _cannot(t: type, why: str = "") -> NotEncodable:
    return NotEncodable(f"a {_NICE_NAMES.get(t, t.__name__)} cannot be saved{why}")


# The flow file's own module is named in refs as FLOW, not by the name its loader gave it
# (`flowtape_flow_<hash of its path>` for `flowtape run`, `flow` when imported, `__main__` as a
# script): a tape, a resume and a golden then name its classes the same way wherever the checkout
# is and whichever way the flow was run.
FLOW = "__flow__"
_LEGACY_FLOW = "flowtape_flow_"  # tapes written before FLOW: the loader's name, bound to the path
_flow_module: str | None = None


def use_flow_module(name: str | None) -> None:
    """The module of the flow being run (`workflow.fn.__module__`), whose classes are FLOW's."""
    global _flow_module
    if name != _flow_module:
        _flow_module = name
        _REFS.clear()


checking = threading.local()  # `on` while `check` rebuilds a value: classes beyond builtins are not looked up


def lookup(ref: object) -> type | None:
    """Resolve "module:Qualname" through sys.modules only, never importing anything."""
    if not isinstance(ref, str):
        return None
    mod_name, _, qual = ref.partition(":")
    if mod_name != "builtins" and getattr(checking, "on", False):
        return None  # (whether a module is imported must not change what a check says)
    if _flow_module is not None and (mod_name == FLOW or (mod_name.startswith(_LEGACY_FLOW) and mod_name not in sys.modules)):
        mod_name = _flow_module
    obj: object = sys.modules.get(mod_name)
    if obj is None or not qual:
        return None
    for part in qual.split("."):
        try:  # vars() rather than getattr: a module-level __getattr__ could import or run code
            obj = vars(obj).get(part)
        except TypeError:
            return None
    return obj if isinstance(obj, type) else None


_REFS: dict[type, str] = {}
_PLANS: dict[type, tuple[str, tuple[str, ...] | None, tuple[str, ...]]] = {}


# A plain attribute holder of the standard library, as safe to rebuild as a class of the flow's.
_PLAIN_STDLIB = frozenset({"argparse:Namespace"})
_NOT_OWN_DIRS = tuple({os.path.realpath(p) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")
                       if (p := sysconfig.get_paths().get(key))})
_OWN: dict[type, bool] = {}


def is_own(t: type) -> bool:
    """Whether `t` is the flow's own class: defined in a file that is neither the standard
    library's nor an installed package's (or one of a few plain attribute holders)."""
    own = _OWN.get(t)
    if own is None:
        file = getattr(sys.modules.get(t.__module__), "__file__", None)
        if f"{t.__module__}:{t.__qualname__}" in _PLAIN_STDLIB:
            own = True
        elif not isinstance(file, str):  # builtins, frozen or C modules
            own = False
        else:
            path = os.path.realpath(file)
            parts = Path(path).parts
            own = not ("site-packages" in parts or "dist-packages" in parts or path.startswith(_NOT_OWN_DIRS))
        _OWN[t] = own
    return own


def not_own(ref: str) -> str:
    return f"class {ref} is not the flow's own (a tape rebuilds objects only of classes defined in the flow's files)"


def ref_of(t: type) -> str:
    ref = _REFS.get(t)
    if ref is None:
        qual = t.__qualname__
        if "<locals>" in qual:
            raise _cannot(t, " (its class is defined inside a function)")
        ref = f"{FLOW if t.__module__ == _flow_module else t.__module__}:{qual}"
        # Fail now rather than write a tape whose values would all decode as Opaque later.
        if lookup(ref) is None:
            raise _cannot(t, f" (class {ref} cannot be found by name)")
        _REFS[t] = ref
    return ref


def plan_of(t: type) -> tuple[str, tuple[str, ...] | None, tuple[str, ...]]:
    """Per-class (ref, dataclass fields, slots), after checking object.__new__ can rebuild it."""
    plan = _PLANS.get(t)
    if plan is not None:
        return plan
    slots: list[str] = []
    for c in t.__mro__[:-1]:
        # State kept in C fields (locks, files, sockets, generators...) is invisible to us and
        # could not be restored, so only pure-Python class chains are accepted.
        flags = c.__flags__
        if (not flags & _HEAPTYPE or flags & _NO_INSTANTIATE
                or isinstance(vars(c).get("__new__"), BuiltinFunctionType)):
            raise _cannot(t)
        names = vars(c).get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{c.__name__.lstrip('_')}{name}"  # private slots are name-mangled
            if name not in ("__dict__", "__weakref__"):
                slots.append(name)
    if not is_own(t):
        raise _cannot(t, f": {not_own(ref_of(t))}")
    fields = tuple(f.name for f in dataclasses.fields(t)) if dataclasses.is_dataclass(t) else None
    plan = _PLANS[t] = (ref_of(t), fields, tuple(slots))
    return plan


