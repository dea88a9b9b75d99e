"""Our packages' import graph, read from the source: every import a module writes counts, wherever
it is written (at the top, inside a function, under `TYPE_CHECKING`: a loop a type checker follows
is one a reader follows). The architecture tests read it; run as a module it prints the measures
the architecture notes quote:

    python -m tests.import_graph
"""

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "ledger", "storage", "sweeper", "simulator")


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


def reaches(start: str, goal: str) -> bool:
    """Whether importing `start` imports `goal`, directly or through others."""
    seen, todo = {start}, [start]
    while todo:
        for name in graph()[todo.pop()]:
            if name == goal:
                return True
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return False


def importers(target: str) -> set[str]:
    """The modules that import `target` directly."""
    return {name for name, targets in graph().items() if target in targets}


def imports_of(prefix: str, forbidden: tuple[str, ...]) -> list[str]:
    """`module -> target` for each import by a module under `prefix` (but not itself under one of
    `forbidden`) of a module under one of `forbidden`."""
    def under(name: str, roots: tuple[str, ...]) -> bool:
        return any(name == root or name.startswith(root + ".") for root in roots)

    return sorted(f"{name} -> {target}" for name, targets in graph().items()
                  if under(name, (prefix,)) and not under(name, forbidden)
                  for target in targets if under(target, forbidden))


def top_level_modules() -> list[str]:
    """The modules directly in gateway/ (not its packages, not __init__ or __main__)."""
    return sorted(path.stem for path in (ROOT / "gateway").glob("*.py") if not path.stem.startswith("__"))


if __name__ == "__main__":
    edges = graph()
    print(f"modules: {len(edges)}; directly in gateway/: {len(top_level_modules())}")
    loops = cycles(edges)
    print(f"import loops: {len(loops)}")
    for loop in loops:
        print("  loop:", " <-> ".join(loop))
    if not loops:
        chain = longest_chain(edges)
        print(f"longest import chain: {len(chain)} modules: " + " -> ".join(chain))
