"""`gateway catalogue add PROVIDER MODEL` and `gateway catalogue check`: a catalogue file priced
from genai-prices (gateway.catalogue.source), and checked against it.

`add` writes a provider entry (a whole record when the file has no such model) from the source;
`check` lists every price that differs from the source's and exits 1 when one does. The
catalogue's own numbers are what the gateway charges: `check` only reports. genai-prices (pydantic
and its price table) is imported by these two commands alone, so no other command starts slower.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from gateway.catalogue import comparison
from gateway.catalogue.index import SHIPPED_PATH, Catalogue
from gateway.catalogue.pricing import Pricing, ProviderPricing, in_force
from gateway.config import Config
from gateway.jsonio import lines

INDENT = 2  # as the shipped file is written


class CommandError(ValueError):
    """The command cannot run as asked; the message says why (the CLI prints it, exit 1)."""


def add_parser(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser("catalogue", parents=[common], help="price a catalogue file from genai-prices")
    actions = parser.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", parents=[common], help="write a provider's entry for a model, from the source")
    add.add_argument("provider", help="openai, anthropic, google, groq, openrouter, bedrock, vertex or azure")
    add.add_argument("model", help="the model's name at that provider (its upstream id)")
    add.add_argument("--file", metavar="FILE", help="the catalogue file (default: the configured [catalogue] path)")
    add.add_argument("--id", dest="model_id", metavar="ID", help="the record to add to, or the new record's id")
    add.add_argument("--context-length", type=int, metavar="N", help="for a new record the source has none for")
    check = actions.add_parser("check", parents=[common], help="list every price that differs from the source")
    check.add_argument("--file", metavar="FILE", help="default: the configured [catalogue] path, else the shipped one")


def run(args: argparse.Namespace, config: Config) -> int:
    """Run `gateway catalogue ACTION`; the exit status."""
    from gateway.catalogue import source  # here, not at the top: see the module's docstring

    try:
        return add(args, config) if args.action == "add" else check(args, config)
    except source.SourceError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"{exc.filename}: {exc.strerror}") from None


# -- the file ----------------------------------------------------------------------------------

def target(args: argparse.Namespace, config: Config, shipped: bool) -> Path:
    """--file, else the configured catalogue, else (`shipped`) the shipped one."""
    if args.file or config.catalogue.path:
        return Path(args.file or config.catalogue.path)
    if shipped:
        return SHIPPED_PATH
    raise CommandError("no catalogue file is configured ([catalogue] path): give --file FILE")


def read(path: Path, missing_ok: bool = False) -> dict:
    """A catalogue file as JSON (a new one, empty, when `missing_ok`)."""
    if missing_ok and not path.exists():
        return {"data": []}
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise CommandError(f"{path}: not a catalogue file (no \"data\" list)")
    return data


def write(path: Path, data: dict) -> None:
    """Validate, then replace `path` at once (a temporary file renamed over it), or leave it be."""
    content = (json.dumps(data, indent=INDENT, ensure_ascii=False) + "\n").encode()
    Catalogue.parse(content, str(path))  # the file must load: CatalogueError otherwise
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        if path.exists():
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# -- add ---------------------------------------------------------------------------------------

def add(args: argparse.Namespace, config: Config) -> int:
    from gateway.catalogue import source  # see the module's docstring

    path = target(args, config, shipped=False)
    data = read(path, missing_ok=True)
    names = args.model_id or (args.model, source.default_id(args.model))
    found = holder(data["data"], args.provider, args.model, names)
    entry = source.entry(args.provider, args.model)
    if found is None:
        found = source.record(args.provider, args.model, args.model_id, args.context_length)
        data["data"].append(found)
        action = "created"
    else:
        action = put(found, entry)
    write(path, data)
    sys.stdout.buffer.write(lines({
        "ok": True, "action": action, "file": str(path), "model": found["id"], "provider": args.provider,
        "modelName": args.model, "pricing": entry["pricing"], "context_length": found["context_length"],
        "source": f"genai-prices {source.version()}",
        "price_changes": [day.isoformat() for day in source.changes(args.provider, args.model)]}))
    return 0


def holder(records: list[dict], provider: str, model: str, names: str | tuple[str, ...]) -> dict | None:
    """The record the entry belongs in: the one `--id` names (`names` a str), else one with this
    provider's entry for `model`, else the first named one of `names`; None: a new record."""
    def named(name: str) -> dict | None:
        return next((r for r in records if r["id"] == name or name in r.get("aliases", ())), None)

    if isinstance(names, str):
        return named(names)
    serving = next((r for r in records for e in r["providers"]
                    if (e["providerId"], e["modelName"]) == (provider, model)), None)
    return serving or next((found for name in names if (found := named(name)) is not None), None)


def put(record: dict, entry: dict) -> str:
    """Add `entry` to the record's providers, or reprice the entry it already has for the same
    provider and model name (its capabilities, which the source does not know, stay). Dated
    prices are refused: replacing them would rewrite what was charged when."""
    for existing in record["providers"]:
        if (existing["providerId"], existing["modelName"]) == (entry["providerId"], entry["modelName"]):
            if {"effective_from", "price_history"} & set(existing["pricing"]):
                raise CommandError(f"model {record['id']!r}: the {entry['providerId']} entry for"
                                   f" {entry['modelName']!r} has dated prices; change them by hand")
            existing["pricing"] = entry["pricing"]
            return "replaced"
    record["providers"].append(entry)
    return "added"


# -- check -------------------------------------------------------------------------------------

def check(args: argparse.Namespace, config: Config) -> int:
    from gateway.catalogue import source  # see the module's docstring

    path = target(args, config, shipped=True)
    Catalogue.load(path)  # a file that does not load is an error, not a list of differences
    counts = {"entries": 0, "differences": 0, "not_in_source": 0}
    for record, entry, pricing in entries(read(path)):
        counts["entries"] += 1
        where = {"model": record["id"], "provider": entry["providerId"], "modelName": entry["modelName"]}
        try:
            theirs = source.stated(entry["providerId"], entry["modelName"])
        except source.SourceError as exc:
            counts["not_in_source"] += 1
            sys.stdout.buffer.write(lines({**where, "status": "not in source", "detail": str(exc)}))
            continue
        for difference in comparison.differences(*pricing, theirs):
            counts["differences"] += 1
            sys.stdout.buffer.write(lines({**where, "status": "differs", **difference.body()}))
    sys.stdout.buffer.write(lines({"ok": not counts["differences"], **counts, "file": str(path),
                                   "source": f"genai-prices {source.version()}"}))
    return 1 if counts["differences"] else 0


def entries(data: dict) -> Iterator[tuple[dict, dict, tuple[dict, dict]]]:
    """(record, provider entry, (entry's pricing, record's pricing) in force now) of every entry."""
    now = datetime.now(UTC)
    for record in data["data"]:
        own = _now(msgspec.convert(record["pricing"], Pricing), now)
        for entry in record["providers"]:
            yield record, entry, (_now(msgspec.convert(entry["pricing"], ProviderPricing), now), own)


def _now(pricing: Pricing | ProviderPricing, now: datetime) -> dict:
    """The prices in force now as a file states them (Catalogue.load has checked there are some)."""
    return msgspec.to_builtins(in_force(pricing, now) or pricing)
