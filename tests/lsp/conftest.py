"""Fixtures for the language-server tests: the REAL server process (`python -m flowtape lsp`),
a tmp workspace holding small flow files, and a collector of every notification it sends."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from flowtape_lsp.rpc import raw_converter
from lsprotocol import types as lsp
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

CUSTOM = ("flowtape/runStarted", "flowtape/steps", "flowtape/runFinished")

FLOW_COUNT = '''\
import os
import time

from flowtape import Port, connect, task, workflow


@task
class Count:
    class Ports:
        Out = Port[int](direction="out")

    n: int
    delay: float
    exit_at: int
    i: int = 0

    def action(self):
        if self.i >= self.n:
            return None
        if self.delay:
            time.sleep(self.delay)
        self.i += 1
        if self.i == self.exit_at:
            os._exit(3)
        return self.i


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    total: int = 0

    def action(self, x):
        self.total += x
        return x * 2


@workflow
def main():
    count = Count(n=N, delay=DELAY, exit_at=EXIT_AT)
    double = Double()
    connect(count.Out, double.In)
    connect(double.Out, "Result")
'''

FLOW_DIVERGE = '''\
import json
import pathlib

from flowtape import Port, connect, loop, task, workflow

DATA = pathlib.Path(__file__).with_name("data.json")


def items():
    yield from json.loads(DATA.read_text())


@task
class Square:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x * x


@workflow
def main():
    lp = loop(items())
    with lp:
        sq = Square()
        connect(lp.item, sq.In)
    connect(sq.Out, "Squares")
'''

FLOW_FAIL = '''\
from flowtape import Port, connect, task, workflow


@task
class Source:
    class Ports:
        Out = Port[int](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 3:
            return None
        self.i += 1
        return self.i


@task
class Picky:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        if x == 2:
            raise ValueError("two is not allowed")
        return x


@workflow
def main():
    src = Source()
    picky = Picky()
    connect(src.Out, picky.In)
    connect(picky.Out, "Result")
'''

FLOW_MISWIRED = '''\
from flowtape import Port, connect, task, workflow


@task
class A:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        return str(x)


@workflow
def main():
    a = A()
    b = A()
    connect(a.Out, b.In)
'''

FLOW_NESTED = '''\
from flowtape import Port, connect, task, workflow


@task
class Gen:
    class Ports:
        Out = Port[int](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 3:
            return None
        self.i += 1
        return self.i


@task
class Inc:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    seen: int = 0

    def action(self, x):
        self.seen += 1
        return x + 1


@workflow(inputs={"In": int}, outputs={"Out": int})
def inner():
    leaf = Inc()
    connect("In", leaf.In)
    connect(leaf.Out, "Out")


@workflow(inputs={"In": int}, outputs={"Out": int})
def outer():
    mid = inner()
    connect("In", mid.In)
    connect(mid.Out, "Out")


@workflow
def main():
    gen = Gen()
    wrap = outer()
    after = Inc()
    connect(gen.Out, wrap.In)
    connect(wrap.Out, after.In)
    connect(after.Out, "Result")
'''




def count_flow(n: int = 5, delay: float = 0.0, exit_at: int = 0) -> str:
    return FLOW_COUNT.replace("=N,", f"={n},").replace("=DELAY,", f"={delay},").replace("=EXIT_AT)", f"={exit_at})")


def uri_of(path: Path) -> str:
    return from_fs_path(str(path.resolve())) or ""


class Collector:
    """Every custom notification and diagnostic the server sends, kept in order, awaitable."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []
        self.changed = asyncio.Event()

    def add(self, method: str, params: Any) -> None:
        self.items.append((method, params))
        self.changed.set()

    def of(self, method: str, run_id: str | None = None) -> list[Any]:
        return [p for m, p in self.items if m == method and (run_id is None or _run_id(p) == run_id)]

    async def wait_for(self, method: str, pred: Callable[[Any], bool] = lambda p: True, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for m, p in self.items[seen:]:
                if m == method and pred(p):
                    return p
            seen = len(self.items)
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {method} matching within {timeout}s; got {self.items[-5:]}")
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                pass

    async def finished(self, run_id: str, timeout: float = 20.0) -> Any:
        return await self.wait_for("flowtape/runFinished", lambda p: p["runId"] == run_id, timeout)

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        return [s for p in self.of("flowtape/steps", run_id) for s in p["steps"]]


def _run_id(params: Any) -> str | None:
    return params.get("runId") if isinstance(params, dict) else None


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=raw_converter)
    collector = Collector()
    client.collector = collector  # type: ignore[attr-defined]
    features = dict(DEFAULT_CLIENT_FEATURES)
    default_publish = features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def publish(client: LanguageClient, params: lsp.PublishDiagnosticsParams) -> None:
        default_publish(client, params)
        collector.add(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, params)

    features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    default_progress = features[lsp.PROGRESS]

    def progress(client: LanguageClient, params: lsp.ProgressParams) -> None:
        default_progress(client, params)
        collector.add(lsp.PROGRESS, params)

    features[lsp.PROGRESS] = progress
    register_lsp_features(client, features)
    client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)(lambda params: collector.add(lsp.WORKSPACE_CODE_LENS_REFRESH, params))
    client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)(lambda params: collector.add(lsp.WORKSPACE_INLAY_HINT_REFRESH, params))
    for method in CUSTOM:
        client.feature(method)(lambda params, method=method: collector.add(method, params))
    return client


CONFIG = ClientServerConfig(server_command=[sys.executable, "-m", "flowtape", "lsp"], client_factory=make_client)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# What the VS Code extension says it implements (editor-client/src/extension.ts): its runs view, and
# asking for the step of a "⟲ Resume at step…" lens. A client saying nothing is a plain client.
VSCODE_OPTIONS = {"clientCommands": ["flowtape.view.refresh"], "asksForStep": True, "stepHints": True}


async def start_session(client: LanguageClient, workspace: Path, preset: str, options: Any = None) -> None:
    await client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities(preset),
        root_uri=uri_of(workspace),
        workspace_folders=[lsp.WorkspaceFolder(uri=uri_of(workspace), name="ws")],
        initialization_options=options,
    ))


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient, workspace: Path):  # type: ignore[no-untyped-def]
    await start_session(lsp_client, workspace, "visual-studio-code", VSCODE_OPTIONS)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=CONFIG)
async def nvim_client(lsp_client: LanguageClient, workspace: Path):  # type: ignore[no-untyped-def]
    await start_session(lsp_client, workspace, "neovim")
    yield
    await lsp_client.shutdown_session()


def collector(client: LanguageClient) -> Collector:
    return client.collector  # type: ignore[attr-defined,no-any-return]


async def command(client: LanguageClient, name: str, params: Any) -> Any:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=name, arguments=[params]))


async def request(client: LanguageClient, method: str, params: Any) -> Any:
    return await client.protocol.send_request_async(method, params)


def write_flow(workspace: Path, name: str, text: str) -> Path:
    path = workspace / name
    path.write_text(text)
    return path
