"""Chat completions (OpenAI's /v1/chat/completions) and legacy text completions.

- `request`: the chat request as the gateway reads it (ChatRequest), typed field by field.
- `service`: a chat completion: which providers can take it, its worst case, the call, the bill.
- `streams`: chat's billed stream (ChatRelay), which text completions' stream extends.
- `completions`: POST /v1/completions (CompletionRequest), whole or streamed (CompletionRelay).
- `routes`: the handlers of both routes and their endpoints.
"""
