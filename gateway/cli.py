"""The `gateway` command: serve, demo, admin, ledger and catalogue commands (DESIGN §7)."""

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from gateway.accounts import admin, key_policy
from gateway import config as config_module, demo, server, workers
from gateway.ops import log_setup
from gateway.catalogue import Catalogue, commands as catalogue_commands, publishing
from gateway.accounts.admin import AdminError
from gateway.app import ledger_recorder
from gateway.config import Config, ConfigError
from gateway.jsonio import lines
from gateway.accounts.redaction import Redactor
from gateway.accounts.sealing import Sealer
from gateway.webhooks import commands as webhook_commands
from ledger import audit, export, export_check, projections, proofs, queries
from ledger.signing import Signer, SigningKeyError
from ledger.recorder import SCHEMA_VERSION, LedgerUnavailable, Recorder, SchemaOutOfDate

Result = TypeVar("Result")


def build_parser() -> argparse.ArgumentParser:
    # --config is accepted before or after a command's own arguments.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="TOML config file")
    parser = argparse.ArgumentParser(prog="gateway", parents=[common], description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("serve", "demo"):
        sub = commands.add_parser(name, parents=[common], help=f"{name} the gateway")
        sub.add_argument("--host")
        sub.add_argument("--port", type=int)
        if name == "serve":
            sub.add_argument("--workers", type=int)
    _admin_parser(commands.add_parser("admin", parents=[common], help="manage orgs, keys, credits"), common)
    ledger = commands.add_parser("ledger", parents=[common], help="verify or rebuild the ledger")
    ledger_commands = ledger.add_subparsers(dest="action", required=True)
    verify = ledger_commands.add_parser("verify", parents=[common], help="check chains and projections")
    scope = verify.add_mutually_exclusive_group()
    scope.add_argument("--full", action="store_true", help="everything, projections too (the default)")
    scope.add_argument("--incremental", action="store_true",
                       help="only the chains of what was appended since the last checkpoint; record a new one")
    verify.add_argument("--checkpoint", action="store_true", help="record a checkpoint when it verifies")
    replay = ledger_commands.add_parser("replay", parents=[common], help="rebuild projections from events")
    replay.add_argument("--projection", action="append", choices=list(projections.TABLES), metavar="NAME",
                        help="rebuild only this projection table (repeatable); the others stay as they are")
    for audit_command in (verify, replay):
        audit_command.add_argument("--jobs", type=int, default=0, metavar="N",
                                   help="processes to split the work over (default: one per core on a large ledger)")
    ledger_commands.add_parser("migrate", parents=[common], help="create or upgrade the ledger schema")
    _export_parsers(ledger_commands, common)
    webhook_commands.add_parser(commands, common)
    catalogue_commands.add_parser(commands, common)
    return parser


def _export_parsers(ledger_commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    export = ledger_commands.add_parser("export", parents=[common], help="an org's events as NDJSON")
    export.add_argument("org_id")
    export.add_argument("--from", dest="since", metavar="ISO", help="events recorded from this time on")
    export.add_argument("--to", dest="until", metavar="ISO", help="events recorded before this time")
    export.add_argument("--out", metavar="FILE", help="write here (default: standard output)")
    fetch = ledger_commands.add_parser(
        "fetch-proofs", parents=[common], help="the proofs of an org's export under every tree head (for check-export)")
    fetch.add_argument("org_id")
    fetch.add_argument("--export", required=True, metavar="FILE", help="the org's export (gateway ledger export)")
    fetch.add_argument("--out", required=True, metavar="FILE", help="where to write the proofs (JSON)")
    export_check.add_arguments(ledger_commands.add_parser(
        "check-export", help="check an export offline (no database, no config)"))
    keygen = ledger_commands.add_parser("keygen", help="write a new Ed25519 key to sign checkpoints with")
    keygen.add_argument("--out", required=True, metavar="FILE", help="the private key (PEM); mode 600")


def _admin_parser(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    add = lambda name: actions.add_parser(name, parents=[common])  # noqa: E731
    org = add("create-org")
    org.add_argument("name")
    org.add_argument("--credits-inr", default="0")
    org.add_argument("--retention", default="retain", choices=admin.RETENTION_MODES)
    key = add("create-key")
    key.add_argument("org_id")
    key.add_argument("--name", default="")
    key.add_argument("--admin", action="store_true", help="may manage the org's keys")
    add("revoke-key").add_argument("key_id")
    credits = add("add-credits")
    credits.add_argument("org_id")
    credits.add_argument("amount_inr")
    retention = add("set-retention")
    retention.add_argument("org_id")
    retention.add_argument("retention", choices=admin.RETENTION_MODES)
    add("balance").add_argument("org_id")
    provider_key = add("set-provider-key")
    provider_key.add_argument("org_id")
    provider_key.add_argument("provider", help="a configured provider's id ([providers.<id>])")
    provider_key.add_argument("key", help="the key, env:NAME to read a variable, or - for standard input")
    limits = add("set-key-limits")
    limits.add_argument("key_id")
    limits.add_argument("--requests-per-minute", type=int, help="0: unlimited")
    limits.add_argument("--tokens-per-minute", type=int, help="0: unlimited")
    limits.add_argument("--budget-inr", help="what the key may be charged per period; empty: no budget")
    limits.add_argument("--budget-period", help="day (UTC), month (calendar, UTC) or total; empty: total")
    limits.add_argument("--models", help="ID,ID,provider/* the key may use; empty: every model")
    limits.add_argument("--expires", help="ISO 8601 time the key stops working; empty: never")
    add("reload-catalogue").description = ("put the configured catalogue file in force in every running"
                                           " gateway ([catalogue] switch_delay_s from now, or at its own dates)")
    removed = add("remove-provider-key")
    removed.add_argument("org_id")
    removed.add_argument("provider", help="a configured provider's id ([providers.<id>])")


def admin_action(args: argparse.Namespace, config: Config) -> Callable[[Recorder], Awaitable[dict]]:
    match args.action:
        case "create-org":
            return lambda r: admin.create_org(r, args.name, args.credits_inr, args.retention)
        case "create-key":
            return lambda r: admin.create_key(r, args.org_id, args.name, args.admin)
        case "revoke-key":
            return lambda r: admin.revoke_key(r, args.key_id)
        case "add-credits":
            return lambda r: admin.add_credits(r, args.org_id, args.amount_inr)
        case "set-retention":
            return lambda r: admin.set_retention(r, args.org_id, args.retention)
        case "balance":
            return lambda r: admin.balance(r, args.org_id)
        case "set-provider-key":
            sealer, key = Sealer(config.secrets.master_key), _secret_argument(args.key)
            return lambda r: admin.set_provider_key(r, sealer, args.org_id, args.provider, key, config.providers)
        case "set-key-limits":
            return _set_key_limits(args, config)
        case "remove-provider-key":
            return lambda r: admin.remove_provider_key(r, args.org_id, args.provider, config.providers)
        case "reload-catalogue":
            return lambda r: _published(publishing.publish_configured(r, config))
    raise AssertionError(args.action)


async def _published(publication: Awaitable[publishing.Published]) -> dict:
    return (await publication).summary()


def _set_key_limits(args: argparse.Namespace, config: Config) -> Callable[[Recorder], Awaitable[dict]]:
    """set-key-limits: the options given change their limit; those left out stay as they are."""
    given = {name: value for name, value in (("budget_inr", args.budget_inr), ("budget_period", args.budget_period),
                                             ("expires", args.expires)) if value is not None}
    if args.models is not None:
        given["models"] = args.models.split(",")
    change = admin.SpendChange(**given) if given else None
    catalogue = Catalogue.load(config.catalogue.path or None)
    return lambda r: admin.set_key_limits(r, args.key_id, args.requests_per_minute, args.tokens_per_minute,
                                          change, key_policy.canonical(catalogue))


def _secret_argument(text: str) -> str:
    """A secret given as itself, as env:NAME (kept out of shell history), or as - (stdin)."""
    if text == "-":
        return sys.stdin.readline().strip()
    if text.startswith("env:"):
        if (value := os.environ.get(text[4:])) is None:
            raise AdminError(f"environment variable {text[4:]} is not set")
        return value
    return text


async def with_recorder(config: Config, action: Callable[[Recorder], Awaitable[Result]]) -> Result:
    """Run `action` on the configured ledger (created on first use), then close it."""
    recorder = ledger_recorder(config.ledger)
    await recorder.open()
    try:
        return await action(recorder)
    finally:
        await recorder.close()


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty() and total:
        width = 30
        filled = width * done // total
        sys.stderr.write(f"\rreplaying [{'#' * filled}{'.' * (width - filled)}] {done}/{total} events")
        sys.stderr.flush()


async def ledger_command(recorder: Recorder, args: argparse.Namespace) -> int:
    if args.action == "migrate":  # the open that `with_recorder` did has migrated the schema
        sys.stdout.buffer.write(lines({"ok": True, "schema_version": SCHEMA_VERSION}))
        return 0
    if args.action == "replay":
        tables = args.projection or tuple(projections.TABLES)
        replayed = await audit.replay(recorder, _progress, workers=args.jobs, tables=tables)
        sys.stderr.write("\n" if sys.stderr.isatty() else "")
        sys.stdout.buffer.write(lines({"replayed_events": replayed, "ok": True}))
        return 0
    if args.action == "export":
        return await _export(recorder, args)
    if args.action == "fetch-proofs":
        return await _fetch_proofs(recorder, args)
    if args.incremental or args.checkpoint:
        return _verified(*await audit.keep_verified(recorder, workers=args.jobs, incremental=args.incremental,
                                                    signer=Signer.configured(args.signing_key),
                                                    origin=args.log_origin))
    checked, problems = await audit.verify(recorder, workers=args.jobs)
    sys.stdout.buffer.write(lines({"ok": not problems, "events_checked": checked, "problems": problems}))
    return 1 if problems else 0


async def _export(recorder: Recorder, args: argparse.Namespace) -> int:
    if await queries.org(recorder, args.org_id) is None:
        raise AdminError(f"no organization {args.org_id!r}")
    window = export.Window(from_us=args.since and export.parse_instant(args.since),
                           to_us=args.until and export.parse_instant(args.until))
    out = open(args.out, "wb") if args.out else sys.stdout.buffer  # noqa: ASYNC230, SIM115 (a command: nothing else runs)
    try:
        async for page in export.lines(recorder, args.org_id, window):
            out.write(page)
    finally:
        out.close() if args.out else out.flush()
    return 0


async def _fetch_proofs(recorder: Recorder, args: argparse.Namespace) -> int:
    """Every tree head's proofs for the org's export: what its offline check needs."""
    with open(args.export, "rb") as file:  # noqa: ASYNC230 (a command: nothing else runs)
        heads = [export_check.read_line(number, raw)[:2] for number, raw in enumerate(file, start=1)]
    events = [(head.position, digest) for head, digest in heads if head.stream_id == args.org_id]
    found = await proofs.for_export(recorder, args.org_id, events)
    with open(args.out, "wb") as out:  # noqa: ASYNC230
        out.write(proofs.encoded(found))
    sys.stdout.buffer.write(lines({"ok": True, "org_id": args.org_id, "tree_heads": len(found.heads),
                                   "inclusion_proofs": len(found.inclusion),
                                   "consistency_proofs": len(found.consistency)}))
    return 0


def _offline(args: argparse.Namespace) -> int:
    """The ledger commands that open no database and read no configuration."""
    if args.action == "check-export":
        return export_check.run(args)
    signer = Signer.written_to(args.out)
    sys.stdout.buffer.write(lines({"ok": True, "key_id": signer.key_id, "public_key_pem": signer.public_pem}))
    return 0


def _verified(verified: audit.Verification, checkpoint: int | None) -> int:
    sys.stdout.buffer.write(lines({"ok": not verified.problems, "events_checked": verified.checked,
                                   "problems": verified.problems, "verified_upto": verified.upto,
                                   "full": verified.full, "checkpoint_position": checkpoint}))
    return 1 if verified.problems else 0


def _configured(args: argparse.Namespace) -> Config:
    config = config_module.load(getattr(args, "config", None))
    overrides = {k: v for k in ("host", "port", "workers") if (v := getattr(args, k, None)) is not None}
    if overrides:
        config = msgspec.structs.replace(config, server=msgspec.structs.replace(config.server, **overrides))
    return config


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "ledger" and args.action in ("check-export", "keygen"):
        try:
            return _offline(args)
        except OSError as exc:
            print(f"gateway: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
            return 1
    try:
        config = _configured(args)
        return _run(args, config)
    except (ConfigError, AdminError, SchemaOutOfDate, LedgerUnavailable, SigningKeyError, ValueError) as exc:
        print(f"gateway: error: {exc}", file=sys.stderr)
        return 1 if not isinstance(exc, ConfigError) else 2


def _run(args: argparse.Namespace, config: Config) -> int:
    log_setup.configure(redactor=Redactor.for_providers(config.providers))  # no provider key in any line
    match args.command:
        case "serve":
            if config.server.workers > 1:
                return workers.run(config)
            server.use_uvloop()
            asyncio.run(server.serve(config))
        case "demo":
            server.use_uvloop()
            asyncio.run(demo.run(config))
        case "admin":
            result = asyncio.run(with_recorder(config, admin_action(args, config)))
            sys.stdout.buffer.write(lines(result))
        case "webhooks":
            result = asyncio.run(with_recorder(config, webhook_commands.action(args, config)))
            sys.stdout.buffer.write(lines(result))
        case "catalogue":
            return catalogue_commands.run(args, config)
        case "ledger":
            args.signing_key, args.log_origin = config.ledger.signing_key, config.ledger.log_origin
            return asyncio.run(with_recorder(config, lambda r: ledger_command(r, args)))
    return 0
