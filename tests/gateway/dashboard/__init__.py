"""The dashboard's API."""
