"""Billing: what a request costs and how it is charged (spec 7). Nothing is imported here.

- `pricing`: a provider's checked usage (gateway.providers.usage.Usage) times catalogue prices in
  USD and INR (Cost), and the cost fields of answers.
- `charging`: the charged rule (Outcome.charged), the credit checks before a paid request
  (own_key_or_credit, require_credit), and recording a request's charge in the ledger (record,
  bill, failed); once it is durable, the `observers` the app registered are told, in order.
- `ceilings`: a request's worst case, read from the request as sent to the provider that
  answers, each media part at the most its provider bills for it (`media`, by the rules in
  `media_rates`, from the sizes `media_sizes` reads off the part's bytes); `reservations`:
  holding it before the upstream call (reserve, then settle).
- `escrow`: slices of credit each process holds ahead, requests admitted against them in memory;
  `leases`: this process's holds kept alive, lapsed ones ended; `releases`: the holds of requests
  that ended without their record released, and records whose commit is in doubt appended
  again, in the background.
- `attempts`: billing's part in each attempt of a routed request (the contract is routing's:
  gateway.routing.attempts).
"""
