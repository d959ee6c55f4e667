"""The names an agent's configuration takes: transports (wfpy's included), providers, and what each
needs. Tables, one entry a line, so that a transport added later is one line here."""

from __future__ import annotations

# `@agent(transport=...)`, lower-cased: what answers. `http` picks the provider as wfpy does.
TRANSPORTS: dict[str, str] = {
    "http": "http",
    "openai-http": "http",
    "openai": "openai",
    "anthropic": "anthropic",
    "mock": "mock",
    "offline": "mock",
}

# wfpy's transports that run an agent CLI or an ACP server: Flowtape does not run those
CLI_TRANSPORTS = frozenset({
    "acp", "opencode", "opencode-acp", "opencode-cli", "claude", "claude-code", "claude-cli", "codex", "codex-cli",
})

# An HTTP provider (wfpy's names): the SDK that speaks its API
PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "openrouter": "openai",
    "ollama": "openai",
    "github": "openai",
    "anthropic": "anthropic",
}

# Where a provider answers when nothing else says (the SDKs know their own services')
BASE_URLS: dict[str, str] = {
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://localhost:11434/v1",
    "github": "https://models.github.ai/inference",
}

# The environment variables holding a provider's key, first found first (wfpy's)
KEY_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "github": ("GITHUB_MODELS_TOKEN", "GITHUB_TOKEN", "COPILOT_API_KEY"),
}
KEYLESS = frozenset({"ollama"})  # a local server that takes any key

# The SDKs' own variable for where they answer
BASE_URL_VARS: dict[str, str] = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}

# An SDK: the module it is imported as, and the extra that installs it
EXTRAS: dict[str, str] = {"openai": "openai", "anthropic": "anthropic"}


def transport_name(transport: str) -> str:
    """What answers an agent with this `transport=`; ValueError naming those there are."""
    name = transport.strip().lower()
    if name in TRANSPORTS:
        return TRANSPORTS[name]
    if name in CLI_TRANSPORTS:
        raise ValueError(f"transport {transport!r} runs an agent CLI, which Flowtape does not; use "
                         "transport='http', 'openai' or 'anthropic' (a model over HTTP), 'mock', or a callable")
    known = ", ".join(repr(t) for t in TRANSPORTS)
    raise ValueError(f"unknown transport {transport!r}: use one of {known}, or a callable transport(prompt, inputs, history)")
