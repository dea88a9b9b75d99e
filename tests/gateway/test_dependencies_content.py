"""The dependencies issue 26 untangled around stored content and streams, checked on the source.

Every import a module writes counts, wherever it is written: at the top, inside a function or
under `TYPE_CHECKING` (a loop a type checker follows is one a reader follows too).
"""

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GATEWAY = ROOT / "gateway"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def graph() -> dict[str, frozenset[str]]:
    """Each gateway module and the gateway modules it imports."""
    paths = {module_name(path): path for path in GATEWAY.rglob("*.py")}
    return {name: frozenset(imports(name, path, paths)) for name, path in paths.items()}


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules `path` imports, anywhere in it (`from a import b` is a.b when b is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            target = imported_from(name, path, node)
            found |= {f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target
                      for alias in node.names}
    return (found & known.keys()) - {name}


def imported_from(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def reaches(start: str, goal: str) -> bool:
    """Whether importing `start` imports `goal`, directly or through others."""
    seen, todo = {start}, [start]
    while todo:
        for imported in graph()[todo.pop()]:
            if imported == goal:
                return True
            if imported not in seen:
                seen.add(imported)
                todo.append(imported)
    return False


def in_loop(first: str, second: str) -> bool:
    return reaches(first, second) and reaches(second, first)


def test_the_graph_sees_the_modules_in_question():
    modules = graph()
    assert {"gateway.content", "gateway.chat.service", "gateway.chat.completions", "gateway.chat.streams",
            "gateway.responses.service", "gateway.responses.streams", "gateway.dashboard.request_log"} <= set(modules)
    assert "gateway.chat.service" in modules["gateway.chat.completions"]  # edges are found


def test_the_responses_api_imports_nothing_of_the_dashboard():
    leaks = {(name, imported) for name, imported_names in graph().items() if name.startswith("gateway.responses")
             for imported in imported_names if imported.startswith("gateway.dashboard")}
    assert not leaks


def test_stored_content_is_written_and_read_through_one_module():
    modules = graph()
    assert {"gateway.streaming", "gateway.dashboard.request_log", "gateway.responses.store"} <= {
        name for name, imported in modules.items() if "gateway.content" in imported}
    assert "gateway.kept_text" not in modules


def test_chat_and_completions_import_each_other_in_no_loop():
    assert not in_loop("gateway.chat.service", "gateway.chat.completions")
    assert not reaches("gateway.chat.service", "gateway.chat.completions")
    assert not reaches("gateway.chat.streams", "gateway.chat.service")


def test_the_responses_service_and_its_streams_import_each_other_in_no_loop():
    assert not in_loop("gateway.responses.service", "gateway.responses.streams")
    assert not reaches("gateway.responses.streams", "gateway.responses.service")
    assert not reaches("gateway.responses.prepared", "gateway.responses.service")


def test_no_module_of_chat_or_responses_is_on_an_import_loop():
    families = ("gateway.chat", "gateway.responses")
    looped = sorted(name for name in graph() if name.startswith(families) and
                    any(reaches(imported, name) for imported in graph()[name]))
    assert not looped
