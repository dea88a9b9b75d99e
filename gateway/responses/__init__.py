"""The OpenAI Responses API: POST /v1/responses and GET /v1/responses/{id}."""
