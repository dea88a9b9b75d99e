"""The scale benchmark, run as a test."""
