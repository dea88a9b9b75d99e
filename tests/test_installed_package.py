"""The package as users install it (`pip install .`, what deploy/Dockerfile does): the wheel is built
from the files the Dockerfile copies, installed into a fresh virtualenv outside the checkout, every
module imports from the installed copy, and `gateway demo` serves from there.

The fresh virtualenv gets the dependencies without the network: a `deps.pth` appends this venv's
site-packages to its sys.path. The `.pth` files inside that directory are not processed (only those
of a site directory are), so the checkout's editable install stays inactive and the installed copy
is the only `gateway` the fresh interpreter can find.
"""

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import aiohttp
import pytest

from tests.support import auth, chat_body, clean_env
from tests.gateway.gateway_helpers import GatewayProcess, children_of, cmdline, is_running

CHECKOUT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "ledger", "storage", "sweeper", "simulator")
SHIPPED = (*PACKAGES, "pyproject.toml", "README.md")  # what deploy/Dockerfile copies before `pip install .`
BUILD_TIMEOUT_S = 300

BANNER_URL = re.compile(r"Model gateway demo is running at (http://\S+)")
BANNER_KEY = re.compile(r"demo API key:\s+(gwk_[A-Za-z0-9_-]{43,})")

# Run by the fresh interpreter: import every module of the installed packages (but `__main__`
# ones: importing them runs them) and print where each was found.
WALK = """
import importlib, json, pkgutil, sys

def refuse(name):
    raise ImportError(f"{name} cannot be imported to list its modules")

names = []
for top in sys.argv[1:]:
    found = pkgutil.walk_packages(importlib.import_module(top).__path__, top + ".", onerror=refuse)
    names += [top, *(m.name for m in found if not m.name.endswith(".__main__"))]
for name in names:
    importlib.import_module(name)
print(json.dumps({name: sys.modules[name].__file__ for name in names}))
"""


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"{args}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    return done.stdout


def outside_env() -> dict[str, str]:
    """The environment a user's shell would have: no PYTHONPATH, no provider keys, no GATEWAY_*."""
    env = clean_env()
    env.pop("PYTHONPATH", None)
    return env


def copy_sources(into: Path) -> Path:
    """The Dockerfile's build context, so the build neither sees nor leaves anything in the checkout."""
    into.mkdir()
    for name in SHIPPED:
        source = CHECKOUT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / name)
    return into


def build_wheel(source: Path, into: Path) -> Path:
    # setuptools builds wheels on its own from 70.1, before that with the `wheel` package; without
    # either, pip builds in isolation with what [build-system] asks for (as `make install` does).
    offline = any(importlib.util.find_spec(name) for name in ("setuptools.command.bdist_wheel", "wheel"))
    isolation = ["--no-build-isolation"] if offline else []
    into.mkdir()
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", into, source, cwd=into)
    (wheel,) = into.glob("model_gateway-*.whl")
    return wheel


def fresh_venv(path: Path, wheel: Path) -> Path:
    """A virtualenv with the wheel installed and this venv's site-packages appended for the dependencies."""
    run(sys.executable, "-m", "venv", "--without-pip", path, cwd=path.parent)
    python = path / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel,
        cwd=path.parent, env=outside_env())
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                    cwd=path.parent, env=outside_env()).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return site


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The fresh virtualenv's site-packages, the wheel installed in it."""
    work = tmp_path_factory.mktemp("installed")
    assert CHECKOUT not in work.resolve().parents
    wheel = build_wheel(copy_sources(work / "src"), work / "dist")
    return fresh_venv(work / "venv", wheel)


def checkout_modules() -> set[str]:
    """Every module of the checkout's packages, named as imported, but `__main__` ones."""
    names = set()
    for package in PACKAGES:
        for path in (CHECKOUT / package).rglob("*.py"):
            parts = path.relative_to(CHECKOUT).with_suffix("").parts
            if parts[-1] != "__main__":
                names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_imports_from_the_installed_copy(installed, tmp_path):
    python = installed.parents[2] / "bin" / "python"
    found = json.loads(run(python, "-c", WALK, *PACKAGES, cwd=tmp_path, env=outside_env()))
    assert set(found) == checkout_modules()
    elsewhere = {name: file for name, file in found.items() if installed not in Path(file).parents}
    assert not elsewhere, f"imported from outside the installed copy: {elsewhere}"
    assert (installed / "gateway" / "catalogue" / "catalogue.json").is_file()
    assert (installed / "gateway" / "dashboard" / "static" / "index.html").is_file()


async def test_the_installed_demo_serves_chat_and_responses(installed, tmp_path):
    gateway_bin = installed.parents[2] / "bin" / "gateway"
    proc = await asyncio.create_subprocess_exec(
        gateway_bin, "demo", "--port", "0", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, env=outside_env(), cwd=tmp_path, start_new_session=True)
    demo = GatewayProcess(proc)
    simulators: list[int] = []
    try:
        banner = await demo.wait_for_output(
            lambda stdout, _stderr: stdout if "Press Ctrl+C to stop." in stdout else None)
        simulators = [pid for pid in children_of(proc.pid) if "simulator" in cmdline(pid)]
        assert simulators and str(installed.parents[2]) in cmdline(simulators[0])
        await serve_one_of_each(BANNER_URL.search(banner).group(1), BANNER_KEY.search(banner).group(1))
        assert await demo.stop(signal.SIGINT) == 0
    finally:
        await demo.close()
        for pid in simulators:  # never leave the demo's simulator behind
            if is_running(pid) and "simulator" in cmdline(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


async def serve_one_of_each(url: str, key: str) -> None:
    responses_body = {"model": "gpt-4o-mini", "input": "Hello"}
    async with aiohttp.ClientSession(headers=auth(key)) as session:
        async with session.post(f"{url}/v1/chat/completions", json=chat_body("Hello")) as chat:
            assert chat.status == 200, await chat.text()
            assert (await chat.json())["choices"][0]["message"]["content"]
        async with session.post(f"{url}/v1/responses", json=responses_body) as responses:
            assert responses.status == 200, await responses.text()
            assert (await responses.json())["object"] == "response"
        async with session.get(f"{url}/dashboard") as dashboard:  # the static files shipped too
            assert dashboard.status == 200
