"""Embeddings (/v1/embeddings)."""
