"""The HTTP edge: what every request passes through before and after its route's service
function. It imports no API family: the families' routes.py import it.

- `routes`: the route table (Endpoint, RouteTable): every endpoint's facts, declared once.
- `middleware`: request id, the canonical log line, authentication, JSON errors, cost headers.
- `intake`: 402 before the body on paid routes; the request's share of the body budget.
- `bodies`: a JSON body read within its route's limit and decoded; JSON answers.
- `body_budget`: the request-body bytes one process holds at once.
- `parsing`: numbers in query strings and paths, headers, the URL's checks.
- `errors`: the error bodies (OpenAI's and Anthropic's dialects), ApiError, UpstreamError.
- `route_index`: the 404 that names the nearest served route.
- `openapi`: GET /openapi.json, built from the route table.
- `state`: the typed keys of the app and of each request.
- `sse`: server-sent events, parsed and framed.
- `connections`: header, body and keep-alive timeouts on every connection.
- `upstream_headers`: a provider's header values, parsed and rendered anew.
"""
