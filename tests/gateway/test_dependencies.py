"""The dependencies issue 26 untangled between providers, routing and billing, checked on the source.

Every import a module writes counts, wherever it is written: at the top, inside a function or
under `TYPE_CHECKING`. Each assertion fails if the import it names comes back.
"""

import ast
from pathlib import Path

import pytest

from gateway.providers.anthropic import AnthropicChatStream, AnthropicMessageStream
from gateway.providers.google import GeminiChatStream
from gateway.providers.openai import OpenAIChatStream, OpenAITextStream
from gateway.providers.openai_responses import OpenAIResponseStream
from gateway.providers.stream import UpstreamEventStream

GATEWAY = Path(__file__).resolve().parent.parent.parent / "gateway"


def imported(path: Path) -> set[str]:
    """Every module `path` names in an import, anywhere in it."""
    return imported_in(path.read_text(), ".".join(path.relative_to(GATEWAY.parent).with_suffix("").parts[:-1]))


def imported_in(source: str, package: str) -> set[str]:
    """Every module `source` (a module of `package`) names in an import; `from a import b` counts as
    a and a.b."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parts = package.split(".")
                base = ".".join([*parts[:len(parts) - node.level + 1], *([base] if base else [])])
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return names


def offending(package: str, forbidden: tuple[str, ...]) -> dict[str, set[str]]:
    """The modules of `package` (a folder of gateway/) that import one of `forbidden` or below it."""
    found = {}
    for path in sorted((GATEWAY / package).rglob("*.py")):
        bad = {name for name in imported(path) if any(name == f or name.startswith(f + ".") for f in forbidden)}
        if bad:
            found[str(path.relative_to(GATEWAY.parent))] = bad
    return found


@pytest.mark.parametrize("package,forbidden", [
    ("providers", ("gateway.billing",)),  # what an upstream reports (Usage) is the providers' own
    ("routing", ("gateway.billing",)),  # billing's part in an attempt reaches failover as Services.attempt_billing
    ("billing", ("gateway.ops.metrics", "gateway.accounts.limits")),  # after-commit work is the app's observers
])
def test_a_package_imports_nothing_of_another_it_should_not_know(package, forbidden):
    assert offending(package, forbidden) == {}


def test_the_checker_sees_every_kind_of_import():
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gateway.billing import charging\n"
              "def f():\n    import gateway.ops.metrics\n    from ..billing.pricing import Cost\n")
    assert imported_in(source, "gateway.routing") >= {"gateway.billing.charging", "gateway.ops.metrics",
                                                      "gateway.billing.pricing"}


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
