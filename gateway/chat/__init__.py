"""Chat completions (OpenAI's /v1/chat/completions) and legacy text completions."""
