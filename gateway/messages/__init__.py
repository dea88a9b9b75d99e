"""Anthropic's Messages API (/v1/messages) and its token counting."""
