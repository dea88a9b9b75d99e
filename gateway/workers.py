"""`gateway serve --workers N`: N processes sharing one port through SO_REUSEPORT.

Each worker is a whole gateway with its own pools (ledger, upstream session, S3 client, Redis)
that follows the ledger for what the others write, so any worker can serve any request. The
parent only supervises: it holds the port while the workers bind it, forwards SIGTERM/SIGINT
so each drains its in-flight requests and streams, and exits when they all have (1 if any
worker failed, after stopping the others: a process manager restarts the whole group).
"""

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import tempfile
from collections.abc import Iterable, Iterator
from multiprocessing.process import BaseProcess

import msgspec
import structlog

from gateway.ops import log_setup
from gateway import server
from gateway.config import Config
from gateway.ops.metrics import MULTIPROCESS_DIR
from gateway.accounts.redaction import Redactor

log = structlog.get_logger("gateway.workers")


def run(config: Config, banner: str = "") -> int:
    with _shared_metrics_dir():
        return _run(config, banner)


@contextlib.contextmanager
def _shared_metrics_dir() -> Iterator[None]:
    """One directory for every worker's metrics, so any worker's /metrics sums them all; one
    the operator set is used as it is (and cleaned by them)."""
    if os.environ.get(MULTIPROCESS_DIR):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="gateway-metrics-") as directory:
        os.environ[MULTIPROCESS_DIR] = directory  # inherited by the spawned workers
        try:
            yield
        finally:
            del os.environ[MULTIPROCESS_DIR]


def _run(config: Config, banner: str) -> int:
    holder = _reserve(config.server.host, config.server.port)
    config = _on_port(config, holder.getsockname()[1])  # port 0 becomes one real port for all
    supervisor = Supervisor(config)
    try:
        url = supervisor.start()
    finally:
        holder.close()
    if url:
        log.info("gateway_ready", url=url, workers=config.server.workers)
        if banner:
            print(banner.format(url=url), flush=True)
    return supervisor.wait()


def worker_main(config: Config, ready: multiprocessing.connection.Connection) -> None:
    """One worker process: a whole gateway on the shared port, until told to stop."""
    # Every line says which worker wrote it, and none holds a provider key.
    log_setup.configure(redactor=Redactor.for_providers(config.providers), worker=os.getpid())
    server.use_uvloop()
    asyncio.run(server.serve(config, reuse_port=True, on_ready=ready.send, stop_if_orphaned=True))


class Supervisor:
    """Starts the workers and passes one stop on to each, but only once it serves: before, the
    worker has no handler for the signal yet, and the stop waits for its ready message."""

    def __init__(self, config: Config) -> None:
        spawn = multiprocessing.get_context("spawn")
        pipes = [spawn.Pipe(duplex=False) for _ in range(config.server.workers)]
        self._receivers = {receiver: spawn.Process(target=worker_main, args=(config, sender),
                                                   name=f"gateway-worker-{n}")
                           for n, (receiver, sender) in enumerate(pipes)}
        self._workers = list(self._receivers.values())
        self._serving: list[BaseProcess] = []
        self.stopping = False

    def start(self) -> str | None:
        """The URL once every worker serves; None if one exited first."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._stop)
        signal.signal(signal.SIGHUP, self._reload)
        for worker in self._workers:
            worker.start()
        url, waiting = None, dict(self._receivers)
        while waiting:
            for ready in multiprocessing.connection.wait([*waiting, *(w.sentinel for w in self._workers)]):
                if ready not in waiting:
                    return None  # a worker exited during start-up; wait() reports it
                url = ready.recv()
                self._serving.append(waiting.pop(ready))
                self._stop_if_stopping(self._serving[-1])
        return url

    def _reload(self, _signum: int, _frame: object) -> None:
        """SIGHUP: one worker publishes the catalogue file again; every worker follows the ledger."""
        serving = [w for w in self._serving if w.exitcode is None and w.pid is not None]
        if serving and not self.stopping:
            os.kill(serving[0].pid, signal.SIGHUP)  # type: ignore[arg-type]

    def _stop(self, _signum: int, _frame: object) -> None:
        if self.stopping:
            return  # already draining; a worker in its last steps must not be hit again
        self.stopping = True
        for worker in self._serving:
            self._stop_if_stopping(worker)

    def _stop_if_stopping(self, worker: BaseProcess) -> None:
        if self.stopping and worker.exitcode is None and worker.pid is not None:  # a pid: started
            os.kill(worker.pid, signal.SIGTERM)

    def wait(self) -> int:
        """Wait for the workers; one exiting on its own stops the rest. 1 if any failed."""
        pending = list(self._workers)
        while pending:
            multiprocessing.connection.wait([w.sentinel for w in pending])
            for worker in [w for w in pending if w.exitcode is not None]:
                pending.remove(worker)
                if worker.exitcode != 0 and not self.stopping:
                    log.error("gateway_worker_failed", worker=worker.name, exitcode=worker.exitcode)
                    self._stop(signal.SIGTERM, None)
                    self._stop_unready(pending)
        failed = any(w.exitcode != 0 for w in self._workers)
        log.info("gateway_stopped", workers=len(self._workers), failed=failed)
        return 1 if failed or not self.stopping else 0

    def _stop_unready(self, pending: Iterable[BaseProcess]) -> None:
        for worker in pending:
            if worker not in self._serving and worker.exitcode is None:
                worker.terminate()  # still starting: nothing in flight to drain


def _reserve(host: str, port: int) -> socket.socket:
    """A socket bound to the port (with SO_REUSEPORT) but not listening: it keeps the port ours
    until the workers have bound it, and never receives a connection itself."""
    holder = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind((host, port))
    return holder


def _on_port(config: Config, port: int) -> Config:
    return msgspec.structs.replace(config, server=msgspec.structs.replace(config.server, port=port))
