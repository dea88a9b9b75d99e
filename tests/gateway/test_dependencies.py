"""What issue 26 untangled in the providers, beyond the import graph (tests/test_architecture.py):
one base class reads every upstream stream, and Usage is imported from its home."""

import ast
from pathlib import Path

from gateway.providers.anthropic.adapter import AnthropicChatStream, AnthropicMessageStream
from gateway.providers.google.adapter import GeminiChatStream
from gateway.providers.openai.adapter import OpenAIChatStream, OpenAITextStream
from gateway.providers.openai.responses import OpenAIResponseStream
from gateway.providers.stream import UpstreamEventStream

GATEWAY = Path(__file__).resolve().parent.parent.parent / "gateway"


def test_upstream_streams_read_their_events_through_one_base_class():
    """The SSE error mapping (a timeout, a broken connection, an error event, the key scrubbed) is
    written once, in gateway/providers/stream.py; every provider stream reads through it."""
    for stream in (AnthropicChatStream, AnthropicMessageStream, GeminiChatStream, OpenAIChatStream,
                   OpenAITextStream, OpenAIResponseStream):
        assert issubclass(stream, UpstreamEventStream)
    readers = [path.name for path in sorted((GATEWAY / "providers").glob("*.py")) if "sse.events(" in path.read_text()]
    assert readers == ["stream.py"]


def test_usage_is_imported_from_its_home_in_the_providers():
    """What an upstream reports is the providers' (gateway.providers.usage); billing prices it."""
    through_billing = sorted(
        str(path.relative_to(GATEWAY.parent)) for path in GATEWAY.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gateway.billing")
        and any(alias.name == "Usage" for alias in node.names))
    assert through_billing == []
