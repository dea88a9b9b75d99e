"""Stored responses (`store`, default true), kept in the organization's content store and nowhere
else: a response's id names the request that made it (`resp_` + the request id's suffix), and its
text is that request's retained content, so nothing new is kept and retention applies as it
does to every request.

What is kept is the whole conversation's input items (the earlier turns included, so continuing
it is one read) and the response object. `GET /v1/responses/{id}` answers the response;
`previous_response_id` continues from its items. Another organization's id, or none, is 404;
a response never kept (retention none, store false, a failed request) or whose text retention
has removed is answered with why.
"""

from gateway import content
from gateway.edge.errors import ApiError
from gateway.services import Caller, Services
from ledger import log_queries

ROUTE = "/v1/responses"
RESPONSE_PREFIX, REQUEST_PREFIX = "resp_", "req_"


def response_id(request_id: str) -> str:
    return RESPONSE_PREFIX + request_id.removeprefix(REQUEST_PREFIX)


def kept(items: list[dict], response: dict, stored: bool) -> dict:
    """The content a response keeps: its conversation's input items, the response itself, and
    whether the client asked for it to be stored (its text is kept for the log all the same,
    as the organization's retention says)."""
    return {"request": items, "response": response, "store": stored}


def conversation(stored: dict) -> list[dict]:
    """A stored response's input and output items: the history a continuation starts from."""
    return [*stored["request"], *stored["response"]["output"]]


async def stored(services: Services, caller: Caller, response_id: str, status: int = 404,
                 param: str | None = None) -> dict:
    """The caller's stored response `{"request": items, "response": object, "store": bool}`; ApiError
    `status` naming why it cannot be had (410 instead of a 404 for text retention removed)."""
    def refused(why: str, code: int = status) -> ApiError:
        return ApiError(code, f"response {response_id!r} {why}", type="not_found" if code == 404 else
                        "invalid_request_error", param=param)
    row = None
    if response_id.startswith(RESPONSE_PREFIX):
        row = await log_queries.log_entry(services.recorder, caller.org_id,
                                          request_id=REQUEST_PREFIX + response_id.removeprefix(RESPONSE_PREFIX))
    if row is None or row.route != ROUTE:  # another org's answers as none at all
        raise refused("does not exist in this organization")
    if row.status != 200:
        raise refused(f"failed (status {row.status}); a failed response is not stored")
    text, state = await content.read(services.recorder, row.content_id)
    if state == "removed":
        raise refused("is no longer stored: the organization's retention removed its text",
                      410 if status == 404 else status)  # gone, when it is the thing asked for
    if text is None:
        raise refused("was not stored: the organization's retention is none, so no text is kept")
    if not text.get("store", True):
        raise refused("was not stored: it was created with store=false")
    return text
