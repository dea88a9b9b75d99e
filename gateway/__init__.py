"""The HTTP gateway."""

__version__ = "0.1.0"
