"""The shape of the code, checked: the import graph of our packages and the maps kept in docstrings.

Every import a module writes counts, wherever it is written: at the top, inside a function, or
under `TYPE_CHECKING` (a loop a type checker follows is a loop a reader follows). Run as a script
it prints the measurements the architecture notes quote:

    python tests/test_architecture.py
"""

import ast
import functools
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "ledger", "storage", "sweeper", "simulator")
TOP_LEVEL_LIMIT = 15  # modules directly in gateway/, beside its subpackages (issue 26)
# Who may import whom, by top-level package: imports point one way.
ALLOWED = {
    "gateway": {"gateway", "ledger", "storage"},
    "sweeper": {"sweeper", "ledger", "storage"},
    "ledger": {"ledger"},
    "storage": {"storage"},
    "simulator": {"simulator"},
}
API_FAMILIES = ("chat", "messages", "audio", "realtime", "models", "embeddings", "responses", "music",
                "dashboard")


def module_files() -> dict[str, Path]:
    """Every module of our packages by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ours that `name` imports, anywhere in its file."""
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (path.name == "__init__.py")]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names)
    return {target for target in targets if target in known and target != name}


@functools.cache
def graph() -> dict[str, frozenset[str]]:
    files = module_files()
    return {name: frozenset(imported(name, path, set(files))) for name, path in files.items()}


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = stack[stack.index(node):]
                    del stack[stack.index(node):]
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return found


def longest_chain(edges: dict[str, frozenset[str]]) -> list[str]:
    """The longest chain of imports (the graph has no loops, so each module's is well defined)."""
    @functools.cache
    def chain(name: str) -> tuple[str, ...]:
        return (name, *max((chain(child) for child in edges[name]), key=len, default=()))

    return list(max((chain(name) for name in sorted(edges)), key=len))


def top_level_modules() -> list[str]:
    return sorted(path.stem for path in (ROOT / "gateway").glob("*.py") if not path.stem.startswith("__"))


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


def test_the_http_edge_imports_no_api_family():
    families = tuple(f"gateway.{family}" for family in API_FAMILIES)
    wrong = sorted(f"{name} -> {target}" for name, targets in graph().items() if name.startswith("gateway.edge")
                   for target in targets if target.startswith(families))
    assert wrong == []


def test_ledger_domain_and_contract_know_no_backend():
    """The backends adapt the contract to a database; the domain and the contract name none."""
    wrong = sorted(f"{name} -> {target}" for name, targets in graph().items()
                   if name.startswith("ledger") and not name.startswith("ledger.backends")
                   for target in targets if target.startswith("ledger.backends"))
    assert wrong == []


def test_the_gateway_map_names_every_module_and_package_and_nothing_else():
    package = ROOT / "gateway"
    assert named_in_docstring(package) == {*top_level_modules(), *subpackages(package)}


def test_each_gateway_subpackage_names_its_modules():
    for name in subpackages(ROOT / "gateway"):
        package = ROOT / "gateway" / name
        modules = {path.stem for path in package.glob("*.py") if not path.stem.startswith("__")}
        assert named_in_docstring(package) == modules | set(subpackages(package)), name


def test_the_measures_see_a_loop_and_a_chain(tmp_path):
    """The checker itself: a loop is found, and so is an import under TYPE_CHECKING or in a function."""
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert cycles(edges) == [["a", "b", "c"]]
    assert longest_chain({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}) == ["a", "b", "c"]
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from gateway import config
        def f():
            from gateway.edge import state
        """))
    assert imported("gateway.probe", probe, {"gateway.config", "gateway.edge.state"}) == {
        "gateway.config", "gateway.edge.state"}


if __name__ == "__main__":
    edges = graph()
    print(f"modules: {len(edges)}; directly in gateway/: {len(top_level_modules())}")
    print(f"import loops: {len(cycles(edges))}")
    for loop in cycles(edges):
        print("  loop:", " <-> ".join(loop))
    if not cycles(edges):
        chain = longest_chain(edges)
        print(f"longest import chain: {len(chain)} modules: " + " -> ".join(chain))
    sys.exit(0)
