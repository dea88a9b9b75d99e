"""Every gateway module imports on its own, in a fresh interpreter.

An import cycle shows only when the import starts at the wrong module: the test process has
long imported the whole gateway, so each module is imported by a new interpreter of its own.
"""

import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gateway

ROOT = Path(gateway.__file__).resolve().parent.parent  # the checkout the test process imported


def raise_error(name: str) -> None:
    raise ImportError(f"{name} cannot be imported to list its modules")


def gateway_modules() -> list[str]:
    """The gateway package and every module under it, but `__main__` ones (running them is
    what importing them does)."""
    found = pkgutil.walk_packages(gateway.__path__, "gateway.", onerror=raise_error)
    return ["gateway", *(m.name for m in found if m.name.rpartition(".")[2] != "__main__")]


def import_failure(module: str) -> str | None:
    """What importing `module` alone printed when it failed, None when it imported."""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    return None if done.returncode == 0 else f"{module}:\n{done.stderr.strip()[-2000:]}"


def test_modules_are_found():
    modules = gateway_modules()
    assert {"gateway.audio.upload", "gateway.providers.openai.adapter", "gateway.dashboard"} <= set(modules)
    assert not any(name.endswith("__main__") for name in modules)


def test_every_module_imports_in_a_fresh_interpreter():
    with ThreadPoolExecutor(max_workers=4) as pool:  # some 80 interpreter starts: a few at a time
        failures = [failure for failure in pool.map(import_failure, gateway_modules()) if failure]
    assert not failures, "\n\n".join(failures)
