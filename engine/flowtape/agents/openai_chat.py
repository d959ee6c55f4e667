"""The `openai` transport: OpenAI's chat-completions API through the official `openai` SDK, to
any server that speaks it (OpenAI, vLLM, Ollama, LM Studio, OpenRouter, …)."""

from __future__ import annotations

from typing import Any

from ..usage import ModelCall
from .config import Settings
from .transport import ModelCallFailed, Reply, Request, failure


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
        try:
            try:
                if self.structured:
                    response = self.client.chat.completions.create(model=self.settings.model, messages=messages,
                                                                   response_format=fmt)
                else:
                    response = self.client.chat.completions.create(model=self.settings.model, messages=messages)
            except (self.sdk.BadRequestError, self.sdk.UnprocessableEntityError):
                if not self.structured:
                    raise
                self.structured = False  # a server without structured outputs: the answer's text is parsed
                response = self.client.chat.completions.create(model=self.settings.model, messages=messages)
        except self.sdk.OpenAIError as exc:
            raise failure(exc, self.sdk, self.settings) from None
        try:
            text = response.choices[0].message.content or ""
            usage = response.usage
            call = ModelCall(response.model or self.settings.model,
                             usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
        except (AttributeError, IndexError, TypeError):
            raise ModelCallFailed(f"{self.settings.endpoint} answered something that is no chat completion") from None
        return Reply(text, None, call)

    def close(self) -> None:
        self.client.close()
