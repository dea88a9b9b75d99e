"""The OpenAI Responses API: POST /v1/responses and GET /v1/responses/{id}.

- `request`: the Responses request as the gateway reads it (ResponsesRequest).
- `service`: a response: its conversation, each provider's body (native or chat), the call, the bill.
- `prepared`: one request made ready for one provider (Prepared), which a stream reads.
- `streams`: the Responses billed streams (ResponsesRelay: translated from chat, or native).
- `translate`: Responses <-> chat, whole; `translate_stream`: chat chunks as Responses events
  (ResponsesEventEncoder).
- `store`: stored responses, read back from the organization's content (gateway.content).
- `routes`: the handlers of both routes and their endpoints.
"""
