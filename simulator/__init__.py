"""Upstream provider simulator for tests, benchmarks and the demo. Never imported by product code."""
