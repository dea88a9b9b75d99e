"""Object storage: the store, ranges, serving and settings."""
