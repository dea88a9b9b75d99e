"""The dashboard in a real browser (Chromium)."""
