"""Where an agent's model answers, and with what key: its own arguments first, then wfpy's
environment variables (WF_AGENT_*), then the SDKs' own (OPENAI_*, ANTHROPIC_*), then wfpy's config
file (~/.config/wf-lang/config.json: its `agents.<provider>` block, then its `agent` block)."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import FlowtapeError
from .names import BASE_URL_VARS, BASE_URLS, EXTRAS, KEY_VARS, KEYLESS, PROVIDERS

if TYPE_CHECKING:
    from ..model import AgentConfig

DEFAULT_TIMEOUT = 120.0  # seconds a request may take (wfpy's timeout_ms default)
MESSAGES_MAX_TOKENS = 4096  # of an answer, where the API needs a bound and the agent gives none (Anthropic's)
SDK_ENDPOINTS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
# what wfpy's endpoints (whole URLs) end with, beyond the base URL an SDK takes
_ENDPOINT_TAILS = {"openai": ("/chat/completions",), "anthropic": ("/v1/messages", "/messages")}


class AgentSetupError(FlowtapeError):
    """An agent cannot call its model: no SDK, no key, no model. Said before it would fire."""


@dataclass(frozen=True)
class Settings:
    """What a live agent calls: resolved once per actor. The key is never shown (repr, messages)."""

    sdk: str  # the SDK that speaks the API: "openai" or "anthropic"
    provider: str
    model: str
    base_url: str | None  # None: the SDK's own service
    timeout: float
    retries: int
    max_tokens: int | None  # None: the server's own bound
    key: str = field(repr=False)

    @property
    def endpoint(self) -> str:
        """Where requests go, as a message names it."""
        return self.base_url or SDK_ENDPOINTS[self.sdk]


def resolve(config: AgentConfig, transport: str, who: str, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of agent `who` (its actor's name) with `transport` ("http", "openai" or
    "anthropic"); AgentSetupError saying what is missing and how to give it."""
    env = os.environ if environ is None else environ
    blocks = wfpy_config(env)
    model = config.model or env.get("WF_AGENT_MODEL", "") or blocks.get("agent", {}).get("model", "")
    provider = _provider(config, transport, model, env, who, blocks.get("agent", {}).get("provider", ""))
    sdk = PROVIDERS[provider]
    filed = {**blocks.get("agent", {}), **blocks.get(provider, {})}  # (a provider's own block first)
    model = model or filed.get("model", "")
    prefix, _, rest = model.partition("/")
    if rest and prefix == provider:  # wfpy's "openai/gpt-4o": the provider, then the model
        model = rest
    if not model:
        raise AgentSetupError(f"agent {who} names no model: give @agent(model='...') or set WF_AGENT_MODEL")
    if not installed(sdk):
        raise AgentSetupError(f"agent {who} calls {provider} through the {sdk} SDK, which is not installed: "
                              f"pip install 'flowtape[{EXTRAS[sdk]}]'")
    base_url = (config.base_url or env.get("WF_AGENT_ENDPOINT") or (env.get(BASE_URL_VARS[sdk]) if provider == sdk else None)
                or filed.get("endpoint"))
    base_url = _base_url(base_url or BASE_URLS.get(provider), sdk)
    return Settings(sdk, provider, model, base_url, config.timeout or DEFAULT_TIMEOUT, max(config.retries, 0),
                    config.max_tokens, _key(config, provider, who, env, filed.get("token", "")))


def wfpy_config(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """wfpy's config file's agent settings: its `agent` block as "agent", each `agents.<provider>`
    block under the provider's name. Nothing for a file that is missing or is no such JSON (as wfpy
    reads it: a file left from another tool does not stop a run)."""
    folder = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    try:
        parsed = json.loads((Path(folder) / "wf-lang" / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(parsed, dict):
        return {}
    named = parsed.get("agents")
    blocks = {"agent": parsed.get("agent"), **{str(name): block for name, block in (
        named.items() if isinstance(named, dict) else ()) if name != "agent"}}
    return {name: {k: str(v) for k, v in block.items() if k in _FILED and v} for name, block in blocks.items()
            if isinstance(block, dict)}


_FILED = ("provider", "token", "endpoint", "model")  # what wfpy's config file's blocks may say


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # (a module set to None in sys.modules: blocked)
        return False


def _provider(config: AgentConfig, transport: str, model: str, env: Mapping[str, str], who: str, filed: str) -> str:
    if transport == "anthropic":
        return "anthropic"
    given = config.provider
    if transport == "http" and not given:
        prefix = model.partition("/")[0] if "/" in model else ""
        given = prefix if prefix in PROVIDERS else env.get("WF_AGENT_PROVIDER", "") or filed
    provider = (given or "openai").strip().lower()
    if provider not in PROVIDERS:
        raise AgentSetupError(f"agent {who} names provider {provider!r}, which Flowtape does not know: use one of "
                              f"{', '.join(map(repr, PROVIDERS))}")
    if transport == "openai" and PROVIDERS[provider] != "openai":
        raise AgentSetupError(f"agent {who} has transport 'openai' but provider {provider!r}: use transport='{provider}'")
    return provider


def _base_url(url: str | None, sdk: str) -> str | None:
    """A base URL as the SDK takes it, from one given whole as wfpy's endpoints are."""
    if not url:
        return None
    url = url.strip().rstrip("/")
    for tail in _ENDPOINT_TAILS[sdk]:
        if url.endswith(tail):
            return url[: -len(tail)]
    return url


def _key(config: AgentConfig, provider: str, who: str, env: Mapping[str, str], filed: str) -> str:
    if config.api_key_env:
        key = env.get(config.api_key_env, "")
        if not key:
            raise AgentSetupError(f"agent {who} reads its API key from ${config.api_key_env} (api_key_env=), which is not set")
        return key
    names = ("WF_AGENT_TOKEN", "AGENT_API_KEY", *KEY_VARS.get(provider, (f"{provider.upper()}_API_KEY",)))
    for name in names:
        if env.get(name):
            return env[name]
    if filed:
        return filed
    if provider in KEYLESS:
        return provider
    own = KEY_VARS.get(provider, (f"{provider.upper()}_API_KEY",))[0]
    raise AgentSetupError(f"agent {who} has no API key for {provider}: set {own} (or WF_AGENT_TOKEN), or name the "
                          "variable that holds it with @agent(api_key_env='...')")
