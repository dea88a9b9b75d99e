"""Music generation and its idempotency keys."""
