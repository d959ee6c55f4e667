"""The `anthropic` transport: Anthropic's Messages API through the official `anthropic` SDK. The
answer is asked for as the input of a tool the model must use (its structured output), whose
schema is the answer's; a server that refuses tools gets the question as text."""

from __future__ import annotations

from typing import Any

from ..usage import ModelCall
from .config import MESSAGES_MAX_TOKENS, Settings
from .transport import Reply, Request, failure, unreadable

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
            "model": self.settings.model, "max_tokens": self.settings.max_tokens or MESSAGES_MAX_TOKENS,
            "system": [{"type": "text", "text": text} for text in request.system if text],
            "messages": request.messages,
        }
        tool = {"name": ANSWER_TOOL, "description": "Give the task's outputs.", "input_schema": request.schema}
        try:
            if self.structured:
                try:
                    response = self.client.messages.create(**args, tools=[tool],
                                                           tool_choice={"type": "tool", "name": ANSWER_TOOL})
                except self.sdk.BadRequestError:
                    response = self.client.messages.create(**args)
                    self.structured = False  # a server without tools: the answer's text is parsed
            else:
                response = self.client.messages.create(**args)
        except self.sdk.AnthropicError as exc:
            raise failure(exc, self.sdk, self.settings) from None
        except ValueError as exc:  # a body the SDK could not decode (it says JSON, it is not)
            raise unreadable(None, "Messages API reply", self.settings, f"a body that is no JSON ({exc})") from None
        try:
            text = "".join(block.text for block in response.content if block.type == "text")
            data = next((block.input for block in response.content if block.type == "tool_use"), None)
            usage = response.usage
            call = ModelCall(response.model or self.settings.model, usage.input_tokens or 0, usage.output_tokens or 0)
        except (AttributeError, TypeError):
            raise unreadable(response, "Messages API reply", self.settings) from None
        note = {"max_tokens": f"the answer was cut off at max_tokens={args['max_tokens']}",
                "refusal": "the model refused to answer (stop_reason 'refusal')"}.get(getattr(response, "stop_reason", ""), "")
        return Reply(text, data if isinstance(data, dict) else None, call, note)

    def close(self) -> None:
        self.client.close()
