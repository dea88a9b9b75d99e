"""Streamed answers for `POST /v1/responses` on models served through chat completions: OpenAI
chat chunks in, Responses stream events out, as they arrive.

Each output item (the assistant's text, each tool call) is opened with its `added` events and
closed with its `done` events when the next one opens or the stream ends; the last event
carries the whole response, built as `translate.response_resource` builds the unstreamed one.
Events are plain dicts numbered by `sequence_number` from 0. No I/O here.

Each item keeps at most `content.KEPT_TEXT_CHARS` of its text for its `done` events and the
closing response (so a stream of any length relays in bounded memory); the deltas carry it all.
"""

from dataclasses import dataclass, field

from gateway.providers.usage import Usage
from gateway.accounts.keys import new_id
from gateway.content import KeptText
from gateway.responses.translate import (INCOMPLETE_REASONS, function_call_item, message_item, output_text_part,
                                         response_resource)


@dataclass
class OutputItem:
    """One output item as streamed so far: a message's text or a function call's arguments."""

    output_index: int
    item_id: str
    call: dict | None = None  # the chat tool call (id, function name) a function_call item is for
    kept: KeptText = field(default_factory=KeptText)
    status: str = "in_progress"

    @property
    def text(self) -> str:
        return self.kept.text()

    def body(self) -> dict:
        if self.call is None:
            return message_item(self.item_id, None if self.status == "in_progress" else self.text, self.status)
        call = {"id": self.call.get("id"), "function": {**self.call["function"], "arguments": self.text}}
        return function_call_item(self.item_id, call, self.status)

    def place(self) -> dict:
        """Where this item's events point."""
        return {"item_id": self.item_id, "output_index": self.output_index}


class ResponsesEventEncoder:
    """Chat completion chunks -> Responses stream events, for one response."""

    def __init__(self, *, response_id: str, model: str, created_at: int, request: dict) -> None:
        self.response_id, self.model, self.created_at = response_id, model, created_at
        self.request, self.sequence_number = request, 0
        self.items: list[OutputItem] = []  # in output order; only the last may be open
        self.calls: dict[int, OutputItem] = {}  # chat tool call index -> its function_call item
        self.finish_reason: str | None = None

    @property
    def output_text(self) -> str:
        """The message text kept so far (each item's up to the cap)."""
        return "".join(item.text for item in self.items if item.call is None)

    @property
    def truncated(self) -> bool:
        """Whether an item's text was cut to the cap."""
        return any(item.kept.truncated for item in self.items)

    def opening(self) -> list[dict]:
        shell = self._response(None)
        return [self._event("response.created", response=shell), self._event("response.in_progress", response=shell)]

    def feed(self, chunk: dict) -> list[dict]:
        events = []
        for choice in (chunk.get("choices") or ())[:1]:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                events += self._call(call)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return events

    def closing(self, usage: Usage, finish_reason: str | None) -> list[dict]:
        """The last item closed, then the whole response with its usage."""
        finish_reason = finish_reason or self.finish_reason
        events = self._close("incomplete" if finish_reason in INCOMPLETE_REASONS else "completed")
        response = self._response(usage, finish_reason)
        name = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return [*events, self._event(name, response=response)]

    def _text(self, text: str) -> list[dict]:
        item = self._open_item()
        events = [] if item is not None and item.call is None else self._open(None)
        item = self.items[-1]
        item.kept.add(text)
        return [*events, self._event("response.output_text.delta", **item.place(), content_index=0, delta=text,
                                     logprobs=[])]

    def _call(self, call: dict) -> list[dict]:
        """A tool call's delta: its first opens a function_call item (with its id and name)."""
        function, position = call.get("function") or {}, call.get("index", 0)
        events = []
        if position not in self.calls:
            events = self._open({"id": call.get("id") or new_id("call"),
                                 "function": {"name": function.get("name") or ""}})
            self.calls[position] = self.items[-1]
        if function.get("arguments"):
            item = self.calls[position]
            item.kept.add(function["arguments"])
            events.append(self._event("response.function_call_arguments.delta", **item.place(),
                                      delta=function["arguments"]))
        return events

    def _open_item(self) -> OutputItem | None:
        return self.items[-1] if self.items and self.items[-1].status == "in_progress" else None

    def _open(self, call: dict | None) -> list[dict]:
        """A new output item (a message, or a function call for `call`), the open one closed first."""
        events = self._close("completed")
        item = OutputItem(len(self.items), new_id("msg" if call is None else "fc"), call)
        self.items.append(item)
        events.append(self._event("response.output_item.added", output_index=item.output_index, item=item.body()))
        if call is None:
            events.append(self._event("response.content_part.added", **item.place(), content_index=0,
                                      part=output_text_part("")))
        return events

    def _close(self, status: str) -> list[dict]:
        item = self._open_item()
        if item is None:
            return []
        item.status = status
        if item.call is None:
            part = output_text_part(item.text)
            events = [self._event("response.output_text.done", **item.place(), content_index=0, text=item.text,
                                  logprobs=[]),
                      self._event("response.content_part.done", **item.place(), content_index=0, part=part)]
        else:
            events = [self._event("response.function_call_arguments.done", **item.place(), arguments=item.text)]
        return [*events, self._event("response.output_item.done", output_index=item.output_index, item=item.body())]

    def _response(self, usage: Usage | None, finish_reason: str | None = None) -> dict:
        return response_resource(self.request, response_id=self.response_id, model=self.model,
                                 created_at=self.created_at, output=[item.body() for item in self.items],
                                 usage=usage, finish_reason=finish_reason)

    def _event(self, kind: str, **fields: object) -> dict:
        self.sequence_number += 1
        return {"type": kind, "sequence_number": self.sequence_number - 1, **fields}
