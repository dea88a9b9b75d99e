"""An OpenAI batch's lines: its input file read and checked, and each line's result record.

An input line is ``{"custom_id", "method": "POST", "url", "body"}``. The file is checked whole
before any line is answered; each problem becomes an entry ``{"code", "message", "param", "line"}``
(lines counted from 1) of the batch's `errors.data`, and the batch fails. OpenAI's codes:

    empty_file           the file has no line
    too_many_tasks       more than MAX_LINES lines
    invalid_json_line    a line that is not JSON
    invalid_request      a line that is not the object above
    url_mismatch         a line whose `url` is not the batch's endpoint
    duplicate_custom_id  a `custom_id` an earlier line has
    model_mismatch       a `body.model` other than the first line's (OpenAI runs one model a batch)

Only the first MAX_ERRORS problems are reported. Blank lines are skipped (still counted).

Each line is answered by its endpoint's own logic, in-process (`ANSWERS`: the routes' `json_answer`,
directives included, timing left out), and written as OpenAI writes it:
``{"id": "batch_req_...", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}``
(to the output file below status 400, else to the error file). A line a cancel left unanswered
goes to the error file as ``{"id", "custom_id", "response": null, "error": {"code": "batch_cancelled",
"message"}}``.
"""

import uuid
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, Literal

import msgspec

from simulator import openai_chat, openai_completions, openai_embeddings, openai_responses
from simulator.openai_wire import JsonAnswer
from simulator.settings import Settings

MAX_LINES = 50_000
MAX_ERRORS = 100
ANSWERS: MappingProxyType[str, Callable[[Settings, Any], JsonAnswer]] = MappingProxyType({
    "/v1/chat/completions": openai_chat.json_answer,
    "/v1/embeddings": openai_embeddings.json_answer,
    "/v1/responses": openai_responses.json_answer,
    "/v1/completions": openai_completions.json_answer,
})
DUPLICATE = ("The custom_id for this request is a duplicate of another request. The custom_id parameter must be"
             " unique for each request in a batch.")
CANCELLED = {"code": "batch_cancelled", "message": "The batch was cancelled before this request was executed."}


class InputLine(msgspec.Struct, frozen=True):
    custom_id: str
    method: Literal["POST"]
    url: str
    body: dict[str, Any]


_DECODER = msgspec.json.Decoder(InputLine)


class Checker:
    """The lines of one input file, checked one by one; the problems found on the way."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.lines: list[InputLine] = []  # the fit ones
        self.errors: list[dict[str, Any]] = []
        self.count = 0  # every line, fit or not
        self._seen: set[str] = set()
        self._model: Any = None

    def check(self, number: int, raw: bytes) -> None:
        self.count += 1
        try:
            line = _DECODER.decode(raw)
        except msgspec.ValidationError as exc:
            self.problem("invalid_request", f"This line is not a valid batch request: {exc}", None, number)
            return
        except msgspec.DecodeError:
            self.problem("invalid_json_line", "This line is not parseable as valid JSON.", None, number)
            return
        mismatch = self._mismatch(line)
        if mismatch is not None:
            self.problem(*mismatch, number)
            return
        self._seen.add(line.custom_id)
        self.lines.append(line)

    def _mismatch(self, line: InputLine) -> tuple[str, str, str] | None:
        """(code, message, param) of what makes `line` unfit for this batch, or None."""
        if line.url != self.endpoint:
            message = f"The provided URL '{line.url}' does not match the batch endpoint '{self.endpoint}'."
            return "url_mismatch", message, "url"
        if line.custom_id in self._seen:
            return "duplicate_custom_id", DUPLICATE, "custom_id"
        model = line.body.get("model")
        if self._model is None:
            self._model = model
        elif model != self._model:
            message = f"The provided model '{model}' does not match the batch's model '{self._model}'."
            return "model_mismatch", message, "body.model"
        return None

    def problem(self, code: str, message: str, param: str | None, line: int | None) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"code": code, "message": message, "param": param, "line": line})


def read_lines(data: bytes, endpoint: str) -> Checker:
    """The lines of input file `data` for `endpoint` checked: its `errors` empty when fit to run."""
    checker = Checker(endpoint)
    for number, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            checker.check(number, raw)
    if not checker.lines and not checker.errors:
        checker.problem("empty_file", "The batch input file is empty.", None, None)
    if len(checker.lines) > MAX_LINES:
        checker.problem("too_many_tasks", f"The batch input file has {len(checker.lines)} requests; a batch"
                        f" may have at most {MAX_LINES}.", None, None)
    return checker


def answered(line: InputLine, status: int, body: dict[str, Any]) -> dict[str, Any]:
    """The result record of a line answered with `status` and `body`."""
    response = {"status_code": status, "request_id": uuid.uuid4().hex, "body": body}
    return {"id": _record_id(), "custom_id": line.custom_id, "response": response, "error": None}


def cancelled(line: InputLine) -> dict[str, Any]:
    """The result record of a line the batch's cancel left unanswered."""
    return {"id": _record_id(), "custom_id": line.custom_id, "response": None, "error": CANCELLED}


def _record_id() -> str:
    return f"batch_req_{uuid.uuid4().hex}"
