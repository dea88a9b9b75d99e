"""What seals endpoints' signing secrets at rest: `[secrets] master_key` when it is set (every
replica of a PostgreSQL ledger needs the same one); otherwise, for a SQLite ledger file, a key
the gateway makes once and keeps in a file of its own beside the database (mode 600), so the
embedded default delivers webhooks with nothing configured and the database alone opens nothing.
"""

import base64
import contextlib
import os
import secrets
from pathlib import Path

from gateway.accounts.sealing import Sealer
from gateway.config import Config

KEY_SUFFIX = "-webhook-secrets.key"


def sealer_for(config: Config) -> Sealer | None:
    """The sealer, or None when there is no master key and the ledger is not a SQLite file."""
    if config.secrets.master_key:
        return Sealer(config.secrets.master_key)
    url = config.ledger.url
    if not url.startswith("sqlite:///") or url.removeprefix("sqlite:///") in ("", ":memory:"):
        return None
    return Sealer(_kept_key(Path(url.removeprefix("sqlite:///") + KEY_SUFFIX)))


def _kept_key(path: Path) -> str:
    """The key in `path`, made there first if there is none. Written whole to a file of its own,
    then linked into place, which fails if another process got there first: its key wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        draft = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(base64.b64encode(secrets.token_bytes(32)).decode() + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
        draft.unlink()
    key = path.read_text().strip()
    if not key:
        raise OSError(f"{path} holds no key; remove it to have a new one made (existing webhooks' secrets are lost)")
    return key
