"""The shape of the code, checked on the source (tests.import_graph): no import loops, imports that
point one way, the layers issue 26 untangled kept apart, and the maps kept in docstrings true.
Each assertion fails if the import it names comes back. `python -m tests.import_graph` prints the
measures (modules, loops, the longest import chain)."""

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.import_graph import ROOT, cycles, graph, imported, importers, imports_of, longest_chain, reaches
from tests.import_graph import top_level_modules

TOP_LEVEL_LIMIT = 15  # modules directly in gateway/, beside its subpackages
# Who may import whom, by top-level package: imports point one way.
ALLOWED = {
    "gateway": {"gateway", "ledger", "storage"},
    "sweeper": {"sweeper", "ledger", "storage"},
    "ledger": {"ledger"},
    "storage": {"storage"},
    "simulator": {"simulator"},
}
API_FAMILIES = tuple(f"gateway.{family}" for family in (
    "chat", "messages", "audio", "realtime", "models", "embeddings", "responses", "music", "dashboard"))


def subpackages(package: Path) -> list[str]:
    return sorted(child.name for child in package.iterdir() if (child / "__init__.py").is_file())


def named_in_docstring(package: Path) -> set[str]:
    """The names a package's docstring lists, as `name` or `name/` in backquotes."""
    text = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return {match.rstrip("/") for match in re.findall(r"`([a-z_0-9]+/?)`", text)}


def test_gateway_keeps_at_most_fifteen_top_level_modules():
    assert len(top_level_modules()) <= TOP_LEVEL_LIMIT, top_level_modules()


def test_no_import_loops_anywhere():
    assert cycles(graph()) == []


def test_imports_point_one_way():
    wrong = sorted(f"{name} -> {target}" for name, targets in graph().items() for target in targets
                   if target.split(".")[0] not in ALLOWED[name.split(".")[0]])
    assert wrong == []


@pytest.mark.parametrize("package,forbidden", [
    # the edge is below every API family; the one list of them is gateway.routes
    ("gateway.edge", (*API_FAMILIES, "gateway.routes", "gateway.ops.routes")),
    ("gateway.providers", ("gateway.billing",)),  # what an upstream reports (Usage) is the providers' own
    ("gateway.routing", ("gateway.billing",)),  # an attempt's hold reaches failover as Services.attempt_billing
    ("gateway.billing", ("gateway.ops.metrics", "gateway.accounts.limits")),  # after a commit: the app's observers
    ("gateway.responses", ("gateway.dashboard",)),  # stored text is read through gateway.content
    ("ledger", ("ledger.backends",)),  # the domain and the contract name no database (backends may)
])
def test_a_layer_imports_nothing_of_one_it_should_not_know(package, forbidden):
    assert imports_of(package, forbidden) == []


def test_stored_content_is_written_and_read_through_one_module():
    assert {"gateway.streaming", "gateway.dashboard.request_log", "gateway.responses.store"} <= importers(
        "gateway.content")


def test_the_loops_issue_26_found_stay_gone():
    assert not reaches("gateway.chat.service", "gateway.chat.completions")
    assert not reaches("gateway.chat.streams", "gateway.chat.service")
    assert not reaches("gateway.responses.streams", "gateway.responses.service")
    assert not reaches("gateway.edge.state", "gateway.realtime.session")
    assert not reaches("gateway.edge.middleware", "gateway.audio.upload")


def test_the_gateway_map_names_every_module_and_package_and_nothing_else():
    package = ROOT / "gateway"
    assert named_in_docstring(package) == {*top_level_modules(), *subpackages(package)}


def test_each_gateway_subpackage_names_its_modules():
    for name in subpackages(ROOT / "gateway"):
        package = ROOT / "gateway" / name
        modules = {path.stem for path in package.glob("*.py") if not path.stem.startswith("__")}
        assert named_in_docstring(package) == modules | set(subpackages(package)), name


def test_the_measures_see_a_loop_a_chain_and_every_kind_of_import(tmp_path):
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert cycles(edges) == [["a", "b", "c"]]
    assert longest_chain({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}) == ["a", "b", "c"]
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from gateway import config
        def f():
            import gateway.ops.metrics
            from ..billing import pricing
        """))
    known = {"gateway.config", "gateway.ops.metrics", "gateway.billing.pricing"}
    assert imported("gateway.routing.probe", probe, known) == known


def test_the_offline_verifier_needs_no_database_nor_the_gateway():
    # `python -m ledger.export_check` runs where only the package is installed (issue 28).
    probe = ("import sys, ledger.export_check; print(sorted({m.split('.')[0] for m in sys.modules}"
             " & {'aiosqlite', 'asyncpg', 'sqlite3', 'gateway', 'aiohttp', 'redis', 'storage'}))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert found.returncode == 0 and found.stdout.strip() == "[]", found.stdout + found.stderr


PROVIDERS = ROOT / "gateway" / "providers"
PROVIDER_CONTRACT = {"base", "capabilities", "http", "shapes", "stream", "tokens", "usage"}


def test_each_protocol_is_one_provider_folder_listed_once():
    """A folder per protocol the configuration accepts (Bifrost's layout), each with its adapter
    and its own map, listed in PROTOCOLS; beside them only the contract they share."""
    import typing

    from gateway.config import Protocol
    from gateway.providers import PROTOCOLS
    folders = set(subpackages(PROVIDERS))
    assert set(typing.get_args(Protocol)) == set(PROTOCOLS) == folders
    for name in folders:
        modules = {path.stem for path in (PROVIDERS / name).glob("*.py") if not path.stem.startswith("__")}
        assert "adapter" in modules and named_in_docstring(PROVIDERS / name) == modules, name
        assert PROTOCOLS[name].__module__ == f"gateway.providers.{name}"
    assert {path.stem for path in PROVIDERS.glob("*.py") if path.stem != "__init__"} == PROVIDER_CONTRACT


def test_the_shared_contract_knows_no_provider():
    folders = tuple(f"gateway.providers.{name}" for name in subpackages(PROVIDERS))
    for module in PROVIDER_CONTRACT:
        assert imports_of(f"gateway.providers.{module}", folders) == [], module
