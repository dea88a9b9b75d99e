"""Anthropic's Messages API (/v1/messages) and its token counting.

- `request`: the Messages request as the gateway reads it (MessagesRequest).
- `service`: a message: sent natively or translated into chat, its worst case, the call, the bill.
- `wire`: Messages <-> OpenAI chat: bodies, answers, and chat chunks as Messages events
  (MessagesEventEncoder).
- `streams`: Messages' billed stream (MessagesRelay).
- `count_tokens`: POST /v1/messages/count_tokens.
- `routes`: the handlers of both routes and their endpoints.
"""
