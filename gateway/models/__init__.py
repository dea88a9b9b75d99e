"""The catalogue as GET /v1/models and /v1/models/{id} answer it."""
