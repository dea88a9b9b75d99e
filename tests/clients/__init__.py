"""Real client libraries (Python and Node) against a running gateway."""
