"""One Responses request made ready for one provider (Prepared): what the service builds for
each provider it tries and what a stream of it (gateway.responses.streams) reads."""

import time

from gateway.providers.base import ChatCall, ChatReply
from gateway.providers.capabilities import ChatProvider, ResponsesProvider
from gateway.resolution import Served
from gateway.responses import translate
from gateway.responses.request import ResponsesRequest


class Prepared:
    """One request made ready for one provider: its model and adapters, its conversation as
    input items, the call to make, and the id and time its answer carries."""

    def __init__(self, served: Served[ChatProvider], native: ResponsesProvider | None, items: list[dict],
                 call: ChatCall, body: dict, request: ResponsesRequest, response_id: str) -> None:
        self.served, self.native, self.items, self.call = served, native, items, call
        self.body, self.request, self.response_id, self.created_at = body, request, response_id, int(time.time())

    def answer(self, reply: ChatReply) -> dict:
        """The provider's answer as the client's `response` object (cost added after billing)."""
        if self.native is not None:
            return named(reply.body, self)
        return translate.response_object(reply.body, reply.usage, response_id=self.response_id,
                                         model=self.request.model, created_at=self.created_at, request=self.body)


def named(response: dict, ready: Prepared) -> dict:
    """A provider's response object under the gateway's id and the model the client named."""
    return {**response, "id": ready.response_id, "model": ready.request.model}
