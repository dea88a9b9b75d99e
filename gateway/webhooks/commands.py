"""`gateway webhooks ...`: an operator manages an org's endpoints as its admin key would through
/v1/webhooks (the same functions, gateway.webhooks.subscriptions), printing the same JSON."""

import argparse
from collections.abc import Awaitable, Callable
from typing import get_args

from gateway.accounts.admin import AdminError
from gateway.config import Config
from gateway.edge.errors import ApiError
from gateway.webhooks import subscriptions
from ledger import queries
from ledger.recorder import Append, Recorded, Recorder

ALERTS = ", ".join(get_args(subscriptions.Alert))


def add_parser(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser("webhooks", parents=[common], help="manage an org's webhook endpoints")
    actions = parser.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", parents=[common], help="a new endpoint; prints its secret, once")
    add.add_argument("org_id")
    add.add_argument("url")
    add.add_argument("--events", required=True, help=f"comma-separated: {ALERTS}")
    add.add_argument("--balance-low-inr", help="balance.low: the balance (INR) below which to alert")
    add.add_argument("--key-budget-percent", help="key.budget: percentages of a key's budget (default 50,80,100)")
    add.add_argument("--key-expiring-hours", type=int, help="key.expiring: how long ahead (default 24)")
    actions.add_parser("list", parents=[common], help="the org's endpoints").add_argument("org_id")
    for name, what in (("show", "an endpoint and its latest deliveries"), ("remove", "remove an endpoint"),
                       ("enable", "deliver to an endpoint again"), ("disable", "stop delivering to an endpoint"),
                       ("test", "queue a webhook.test delivery")):
        action = actions.add_parser(name, parents=[common], help=what)
        action.add_argument("org_id")
        action.add_argument("webhook_id")


def action(args: argparse.Namespace, config: Config) -> Callable[[Recorder], Awaitable[dict]]:
    """What the command does with an open ledger; its errors as AdminError (the CLI prints them)."""
    async def run(recorder: Recorder) -> dict:
        if await queries.org(recorder, args.org_id) is None:
            raise AdminError(f"no organization {args.org_id}")
        manager = _manager(config, recorder, args.org_id)
        try:
            return await _dispatch(manager, args)
        except ApiError as exc:
            raise AdminError(exc.message) from None
    return run


async def _dispatch(m: subscriptions.Manager, args: argparse.Namespace) -> dict:
    match args.action:
        case "add":
            return await subscriptions.create(m, _new(args))
        case "list":
            return await subscriptions.listing(m)
        case "show":
            return await subscriptions.detail(m, args.webhook_id)
        case "remove":
            return await subscriptions.remove(m, args.webhook_id)
        case "enable" | "disable":
            change = subscriptions.WebhookChange(enabled=args.action == "enable")
            return await subscriptions.change(m, args.webhook_id, change)
        case "test":
            return await subscriptions.test(m, args.webhook_id)
    raise AssertionError(args.action)


def _new(args: argparse.Namespace) -> subscriptions.NewWebhook:
    """The command's options as the API's body, checked by the same schema."""
    body: dict = {"url": args.url, "events": [e.strip() for e in args.events.split(",") if e.strip()]}
    if args.balance_low_inr is not None:
        body["balance_low_inr"] = args.balance_low_inr
    if args.key_budget_percent is not None:
        body["key_budget_percent"] = [int(p) for p in args.key_budget_percent.split(",") if p.strip()]
    if args.key_expiring_hours is not None:
        body["key_expiring_hours"] = args.key_expiring_hours
    return subscriptions.parse_new(body)


def _manager(config: Config, recorder: Recorder, org_id: str) -> subscriptions.Manager:
    async def append(unit: Append) -> list[Recorded]:
        (outcome,) = await recorder.append([unit])
        if isinstance(outcome, Exception):
            raise AdminError(f"the ledger refused the change: {outcome}")
        return outcome

    return subscriptions.Manager(subscriptions.Webhooks.configured(config), append, recorder, org_id, admin=True)
