"""The simulator upstream, on its own."""
