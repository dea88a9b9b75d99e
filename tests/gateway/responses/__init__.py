"""The Responses API and its translations."""
