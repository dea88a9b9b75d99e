"""Widely used client libraries, in their default configuration (only the base URL and key set),
against the gateway. Each runs in its own process, as a user's program would: the Python clients
from their own virtualenv (`.venv-clients`, so their pins never move the gateway's), the Node ones
from `tests/clients/node`. Every call answers, each request is charged once, and `gateway ledger
verify` passes afterwards. Both are installed by `make clients` (run by `make test`)."""

import json
from pathlib import Path

import pytest

from tests.gateway.gateway_helpers import run_cli_async, write_config
from tests.support import IN_CI, clean_env, request_events, run_process

HERE = Path(__file__).parent
PYTHON_BIN = HERE.parents[1] / ".venv-clients" / "bin"
NODE_MODULES = HERE / "node" / "node_modules"
CLIENT_TIMEOUT_S = 180


def need(path: Path, what: str) -> None:
    if not path.exists():
        message = f"{what} is not installed ({path} is missing): run `make clients`"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


async def run_client(gateway, org: dict, *command: str, **env: str) -> dict:
    """Run one client program against the gateway; the JSON object it prints last."""
    environment = clean_env(GATEWAY_URL=gateway.url, GATEWAY_KEY=org["api_key"], **env)
    done = await run_process(*command, timeout=CLIENT_TIMEOUT_S, env=environment, cwd=HERE)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


async def python_client(gateway, org: dict, script: str, **env: str) -> dict:
    need(PYTHON_BIN / "python", "the Python client libraries")
    return await run_client(gateway, org, str(PYTHON_BIN / "python"), str(HERE / "python" / script), **env)


async def node_client(gateway, org: dict, script: str) -> dict:
    need(NODE_MODULES, "the Node client libraries")
    return await run_client(gateway, org, "node", str(HERE / "node" / script))


async def charged_routes(gateway, config, tmp_path) -> list[str]:
    """The route of every request recorded, after checking each was answered and charged once,
    and that the ledger verifies."""
    events = await request_events(gateway)
    assert all(e.status == 200 and e.charged_inr_nano > 0 for e in events), events
    cfg = str(write_config(tmp_path, f'[ledger]\nurl = "{config.ledger.url}"\n'))
    verified = await run_cli_async("ledger", "verify", "--config", cfg)
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"], verified.stdout + verified.stderr
    return sorted(e.route for e in events)


def words(text: object) -> bool:
    return isinstance(text, str) and len(text.split()) >= 3


async def test_openai_agents_sdk_runs_a_tool_turn_through_the_responses_api(gateway, org, config, tmp_path):
    out = await python_client(gateway, org, "openai_agents_check.py")
    assert "tool_call_item" in out["items"] and "tool_call_output_item" in out["items"] and words(out["output"])
    assert await charged_routes(gateway, config, tmp_path) == ["/v1/responses"] * 2


async def test_pydantic_ai_with_its_responses_and_chat_models(gateway, org, config, tmp_path):
    out = await python_client(gateway, org, "pydantic_ai_check.py")
    assert words(out["responses"]) and words(out["chat"])
    assert await charged_routes(gateway, config, tmp_path) == ["/v1/chat/completions", "/v1/responses"]


async def test_langchain_openai_and_anthropic_whole_and_streamed(gateway, org, config, tmp_path):
    out = await python_client(gateway, org, "langchain_check.py")
    assert all(words(out[name]) for name in ("openai", "openai_stream", "anthropic", "anthropic_stream"))
    assert await charged_routes(gateway, config, tmp_path) == ["/v1/chat/completions"] * 2 + ["/v1/messages"] * 2


async def test_litellm_as_a_client_library(gateway, org, config, tmp_path):
    # litellm fetches its price list from the internet at import unless told to use its own copy.
    out = await python_client(gateway, org, "litellm_check.py", LITELLM_LOCAL_MODEL_COST_MAP="True")
    assert words(out["openai"]) and words(out["stream"]) and words(out["anthropic"]) and out["embedding_dims"] > 0
    assert await charged_routes(gateway, config, tmp_path) == [
        "/v1/chat/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/messages"]


async def test_llama_index_openai_llm(gateway, org, config, tmp_path):
    out = await python_client(gateway, org, "llama_index_check.py")
    assert all(words(out[name]) for name in ("complete", "chat", "stream"))
    assert await charged_routes(gateway, config, tmp_path) == ["/v1/chat/completions"] * 3


async def test_the_llm_cli_with_an_openai_compatible_model(gateway, org, config, tmp_path):
    need(PYTHON_BIN / "llm", "the llm CLI")
    home = tmp_path / "llm"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: gateway-mini\n  model_name: gpt-4o-mini\n  api_base: {gateway.url}/v1\n  api_key_name: gateway\n")
    (home / "keys.json").write_text(json.dumps({"gateway": org["api_key"]}))
    done = await run_process(str(PYTHON_BIN / "llm"), "-m", "gateway-mini", "hello", "--no-log",
                             timeout=CLIENT_TIMEOUT_S, env=clean_env(LLM_USER_PATH=str(home)))
    assert done.returncode == 0, done.stderr
    assert words(done.stdout)
    assert await charged_routes(gateway, config, tmp_path) == ["/v1/chat/completions"]


async def test_openai_for_node(gateway, org, config, tmp_path):
    out = await node_client(gateway, org, "openai_check.mjs")
    assert all(words(out[name]) for name in ("chat", "chat_stream", "responses", "responses_stream"))
    assert out["embedding_dims"] > 0 and out["models"] > 5 and out["model"] == "gpt-4o-mini"
    assert await charged_routes(gateway, config, tmp_path) == [
        "/v1/chat/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/responses", "/v1/responses"]


async def test_vercel_ai_sdk_with_its_default_openai_provider(gateway, org, config, tmp_path):
    out = await node_client(gateway, org, "ai_sdk_check.mjs")
    assert all(words(out[name]) for name in ("responses", "responses_claude", "chat", "stream"))
    assert out["embedding_dims"] > 0
    assert await charged_routes(gateway, config, tmp_path) == [
        "/v1/chat/completions", "/v1/embeddings", "/v1/responses", "/v1/responses", "/v1/responses"]
