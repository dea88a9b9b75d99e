"""Embeddings (/v1/embeddings).

- `service`: validate, call the provider once, bill the prompt tokens.
- `routes`: the handler of POST /v1/embeddings and its endpoint.
"""
