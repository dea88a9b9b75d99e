"""The `gateway-sweeper` command (also `python -m sweeper`)."""

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from ledger.signing import SigningKeyError
from storage.errors import StorageError
from sweeper import log_setup, runner
from sweeper.settings import SettingsError, load


def instant(text: str) -> datetime:
    """An ISO 8601 instant; one without a zone is taken as UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gateway-sweeper", description="Delete hosted media past the retention period"
        " (and logged text past [retention] text_days).")
    parser.add_argument("--config", metavar="FILE", help="the gateway's TOML config file")
    parser.add_argument("--once", action="store_true", help="one pass, then exit (1 if a delete failed)")
    parser.add_argument("--as-of", type=instant, metavar="ISO8601",
                        help="sweep as if the clock read this instant (UTC unless a zone is given)")
    parser.add_argument("--dry-run", action="store_true", help="report what would be deleted; change nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log_setup.configure()
    try:
        settings = load(args.config)
        if args.once:
            return asyncio.run(runner.sweep_once(settings, args.as_of or datetime.now(UTC), args.dry_run))
        return asyncio.run(runner.sweep_forever(settings, args.as_of, args.dry_run))
    except SettingsError as exc:
        print(f"gateway-sweeper: error: {exc}", file=sys.stderr)
        return 2
    except SigningKeyError as exc:
        print(f"gateway-sweeper: error: ledger.signing_key: {exc}", file=sys.stderr)
        return 2
    except StorageError as exc:
        print(f"gateway-sweeper: error: object storage: {exc}", file=sys.stderr)
        return 1
