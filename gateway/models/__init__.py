"""The catalogue as GET /v1/models and /v1/models/{id} answer it.

- `listing`: the list and one model, in the shape the caller's SDK reads.
- `routes`: the handlers of both routes and their endpoints (public).
"""
