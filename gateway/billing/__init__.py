"""Billing: what a request costs and how it is charged (spec 7). Nothing is imported here.

- `pricing`: a provider's checked usage (gateway.providers.usage.Usage) times catalogue prices in
  USD and INR (Cost), and the cost fields of answers.
- `charging`: the charged rule (Outcome.charged), the credit checks before a paid request
  (own_key_or_credit, require_credit), and recording a request's charge in the ledger (record, bill, failed).

Every paid request holds its worst case first: gateway.billing.reservations (ceilings: what it holds);
a routed request's attempts reach it through `attempts` (the contract: gateway.routing.attempts).
"""
