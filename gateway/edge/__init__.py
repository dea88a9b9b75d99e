"""The HTTP edge: what every request passes through before and after its route's service
function (the route table every endpoint is declared in, the middleware, body intake and limits,
parsing, errors, SSE, connections, the route index, the typed keys a request carries, the OpenAPI
document). It imports no API family: the families' routes.py import it."""
