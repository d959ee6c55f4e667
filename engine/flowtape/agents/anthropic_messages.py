"""The `anthropic` transport: Anthropic's Messages API through the official `anthropic` SDK. The
answer is asked for as the input of a tool the model must use (its structured output), whose
schema is the answer's; a server that refuses tools gets the question as text."""

from __future__ import annotations

from typing import Any

from ..usage import ModelCall
from .config import Settings
from .transport import ModelCallFailed, Reply, Request, failure

ANSWER_TOOL = "give_outputs"


class AnthropicMessages:
    def __init__(self, settings: Settings) -> None:
        import anthropic  # (an extra: `flowtape[anthropic]`; config.resolve said so if it is missing)

        self.settings = settings
        self.sdk = anthropic
        self.client: Any = anthropic.Anthropic(api_key=settings.key, base_url=settings.base_url, timeout=settings.timeout,
                                          max_retries=settings.retries)
        self.structured = True  # until the endpoint refuses the answer tool

    def complete(self, request: Request) -> Reply:
        args: dict[str, Any] = {
            "model": self.settings.model, "max_tokens": self.settings.max_tokens,
            "system": [{"type": "text", "text": text} for text in request.system if text],
            "messages": request.messages,
        }
        tool = {"name": ANSWER_TOOL, "description": "Give the task's outputs.", "input_schema": request.schema}
        try:
            try:
                if self.structured:
                    response = self.client.messages.create(**args, tools=[tool],
                                                           tool_choice={"type": "tool", "name": ANSWER_TOOL})
                else:
                    response = self.client.messages.create(**args)
            except self.sdk.BadRequestError:
                if not self.structured:
                    raise
                self.structured = False
                response = self.client.messages.create(**args)
        except self.sdk.AnthropicError as exc:
            raise failure(exc, self.sdk, self.settings) from None
        try:
            text = "".join(block.text for block in response.content if block.type == "text")
            data = next((block.input for block in response.content if block.type == "tool_use"), None)
            usage = response.usage
            call = ModelCall(response.model or self.settings.model, usage.input_tokens or 0, usage.output_tokens or 0)
        except (AttributeError, TypeError):
            raise ModelCallFailed(f"{self.settings.endpoint} answered something that is no Messages API reply") from None
        return Reply(text, data if isinstance(data, dict) else None, call)

    def close(self) -> None:
        self.client.close()
