"""The `openai` transport: OpenAI's chat-completions API through the official `openai` SDK, to
any server that speaks it (OpenAI, vLLM, Ollama, LM Studio, OpenRouter, …)."""

from __future__ import annotations

from typing import Any

from ..usage import ModelCall
from .config import Settings
from .transport import Reply, Request, failure, unreadable


class OpenAIChat:
    def __init__(self, settings: Settings) -> None:
        import openai  # (an extra: `flowtape[openai]`; config.resolve said so if it is missing)

        self.settings = settings
        self.sdk = openai
        self.client: Any = openai.OpenAI(api_key=settings.key, base_url=settings.base_url, timeout=settings.timeout,
                                    max_retries=settings.retries)
        self.structured = True  # until the endpoint refuses a JSON Schema response format

    def complete(self, request: Request) -> Reply:
        messages: list[Any] = [{"role": "system", "content": text} for text in request.system if text]
        messages += request.messages
        fmt = {"type": "json_schema", "json_schema": {"name": "outputs", "schema": request.schema, "strict": False}}
        args: dict[str, Any] = {"model": self.settings.model, "messages": messages}
        if self.settings.max_tokens is not None:
            args["max_tokens"] = self.settings.max_tokens
        try:
            if self.structured:
                try:
                    response = self.client.chat.completions.create(**args, response_format=fmt)
                except (self.sdk.BadRequestError, self.sdk.UnprocessableEntityError):
                    response = self.client.chat.completions.create(**args)
                    self.structured = False  # a server without structured outputs: the answer's text is parsed
            else:
                response = self.client.chat.completions.create(**args)
        except self.sdk.OpenAIError as exc:
            raise failure(exc, self.sdk, self.settings) from None
        except ValueError as exc:  # a body the SDK could not decode (it says JSON, it is not)
            raise unreadable(None, "chat completion", self.settings, f"a body that is no JSON ({exc})") from None
        try:
            if not response.choices:
                raise unreadable(response, "chat completion", self.settings, "it has no choices")
            choice = response.choices[0]
            text = choice.message.content or ""
            usage = response.usage
            call = ModelCall(response.model or self.settings.model,
                             usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
            note = _note(choice.finish_reason, getattr(choice.message, "refusal", None))
        except (AttributeError, IndexError, TypeError):
            raise unreadable(response, "chat completion", self.settings) from None
        return Reply(text, None, call, note)

    def close(self) -> None:
        self.client.close()


def _note(finish_reason: str | None, refusal: str | None) -> str:
    """What the API said about an answer that may be unusable."""
    if refusal:
        return f"the model refused: {refusal}"
    if finish_reason == "length":
        return "the answer was cut off at the token limit (finish_reason 'length')"
    if finish_reason == "content_filter":
        return "the server's content filter withheld the answer (finish_reason 'content_filter')"
    return ""
