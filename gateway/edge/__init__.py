"""The HTTP edge: what every request passes through before and after its route's service
function (the middleware, body intake and limits, parsing, errors, SSE, connections, the route
index, the typed keys a request carries, the OpenAPI document)."""
