"""Property-based fuzzing of every route of GET /openapi.json (schemathesis over hypothesis),
against a real gateway on a real socket with the simulator upstream and an org with credit.

Whatever a client sends, the gateway answers below 500, and every error is the one documented
JSON body. Positive cases (bodies that fit the schema) reach the provider translations and the
simulator; negative ones (wrong types, out-of-range numbers, missing fields) must be refused at
the edge. The default run is small; `make fuzz` (FUZZ_EXAMPLES=...) soaks longer.
"""

import asyncio
import os

import pytest
import requests
from hypothesis import HealthCheck, Phase, given, settings

from gateway.routes import OPERATIONS
from tests.support import auth

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
TRACE = os.environ.get("FUZZ_TRACE", "")
TIMEOUT_S = 15


def check_answer(case, response) -> None:
    """No 5xx; every 4xx is JSON with error.message and error.type."""
    where = f"{case.method} {case.formatted_path} -> {response.status_code}: {response.content[:300]!r}"
    if TRACE:  # a soak's record of what was sent and answered, to see what the cases reached
        with open(TRACE, "a") as trace:
            trace.write(f"{case.method} {case.path} {response.status_code} {response.content[:160]!r}\n")
    assert response.status_code < 500, where
    if response.status_code >= 400:
        assert response.headers.get("content-type", [""])[0].startswith("application/json"), where
        error = response.json()["error"]
        assert isinstance(error["message"], str) and isinstance(error["type"], str), where


def fuzz(operation, mode, base_url: str, key: str) -> None:
    """Send EXAMPLES cases of `operation` in `mode` (blocking: run it in a thread)."""
    session = requests.Session()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def one(case) -> None:
        check_answer(case, case.call(base_url=base_url, session=session, headers=auth(key),
                                     timeout=TIMEOUT_S, allow_redirects=False))

    try:
        one()
    finally:
        session.close()


@pytest.fixture
async def fuzz_target(gateway):
    org = await gateway.new_org("100000")
    doc = await (await gateway.client.get("/openapi.json")).json()
    return gateway, org, doc


def takes_input(method: str, path: str) -> bool:
    """Whether a route has anything a negative case could get wrong."""
    op = OPERATIONS[method, path]
    return bool(op.body or op.form or op.query or op.headers)


CASES = [(method, path, mode) for method, path in sorted(OPERATIONS)
         for mode in ("positive", "negative") if mode == "positive" or takes_input(method, path)]


@pytest.mark.parametrize("method, path, mode", CASES)
async def test_no_route_answers_5xx_or_an_undocumented_error(fuzz_target, method, path, mode):
    import schemathesis
    from schemathesis.generation import GenerationMode

    gateway, org, doc = fuzz_target
    schema = schemathesis.openapi.from_dict(doc)
    operation = schema[path][method]
    await asyncio.to_thread(fuzz, operation, GenerationMode(mode), gateway.url, org["api_key"])
