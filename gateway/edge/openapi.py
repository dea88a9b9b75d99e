"""The OpenAPI 3.1 document of every route (GET /openapi.json), built once as the app starts.

It reads the route table (gateway.edge.routes): request bodies are the msgspec types the
endpoints decode, as JSON Schema from `msgspec.json.schema_components`; query parameters come
from the constants their parsers read; `model` fields list the catalogue's models of the route's
kind; who needs a key and which error body answers follow from the endpoint's `public` and
`dialect`. A route the router holds that the table does not declare fails start-up.
"""

from types import MappingProxyType

import msgspec
from aiohttp import web

from gateway import __version__
from gateway.catalogue import Catalogue, Kind
from gateway.edge.errors import AnthropicErrorBody, Dialect, ErrorBody
from gateway.edge.routes import Endpoint, Param, RouteTable
from gateway.jsonio import encode
from gateway.edge.state import DOCUMENT, ROUTES, SERVICES

REF = "#/components/schemas/{name}"
JSON = "application/json"
ANY_OBJECT = MappingProxyType({"type": "object"})
Security = tuple[dict[str, list[str]], ...]  # OpenAPI security requirements: any one suffices
PUBLIC: Security = ()
KEY: Security = ({"bearer": []},)
ANTHROPIC_KEY: Security = ({"bearer": []}, {"x-api-key": []})


async def build(app: web.Application) -> None:
    """on_startup, once the catalogue is loaded: the document, encoded once for every request."""
    app[DOCUMENT] = encode(document(app.router, app[ROUTES], app[SERVICES].catalogue))


def document(router: web.UrlDispatcher, table: RouteTable, catalogue: Catalogue) -> dict:
    """The document for every route `router` serves (HEAD aside: it mirrors GET)."""
    paths: dict[str, dict] = {}
    for endpoint in _endpoints(router, table):
        paths.setdefault(endpoint.template, {})[endpoint.method.lower()] = _operation(endpoint, catalogue)
    return {"openapi": "3.1.0",
            "info": {"title": "Model gateway", "version": __version__},
            "paths": paths, "security": list(KEY),
            "components": {"schemas": _schemas(table, catalogue),
                           "responses": {"Error": _error_response(), "AnthropicError": _anthropic_error_response()},
                           "securitySchemes": dict(SECURITY_SCHEMES)}}


def _endpoints(router: web.UrlDispatcher, table: RouteTable) -> list[Endpoint]:
    """The endpoint of every route `router` holds, in its order; LookupError for one undeclared."""
    found = []
    for route in router.routes():
        if (endpoint := table.endpoint_of(route)) is None:
            raise LookupError(f"route {route.method} {route.resource and route.resource.canonical} is not"
                              " declared in the route table (gateway.routes)")
        found += [endpoint] if route.method != "HEAD" else []
    return found


SECURITY_SCHEMES = MappingProxyType({
    "bearer": {"type": "http", "scheme": "bearer", "description": "an organization's API key"},
    "x-api-key": {"type": "apiKey", "in": "header", "name": "x-api-key",
                  "description": "the same key, as the Anthropic client sends it (POST /v1/messages)"},
})


def _schemas(table: RouteTable, catalogue: Catalogue) -> dict:
    bodies = [e.body.schema for e in table.endpoints if e.body is not None]
    _, schemas = msgspec.json.schema_components([ErrorBody, AnthropicErrorBody, *bodies], ref_template=REF)
    for endpoint in table.endpoints:
        if endpoint.body is not None and endpoint.model_kind is not None:
            schemas[endpoint.body.schema.__name__]["properties"]["model"]["enum"] = catalogue.names(
                endpoint.model_kind)
    return schemas


def _security(endpoint: Endpoint) -> Security:
    """Who may call it: anyone, a key, or a key sent either way (Anthropic's SDK sends x-api-key)."""
    if endpoint.public:
        return PUBLIC
    return ANTHROPIC_KEY if endpoint.dialect is Dialect.ANTHROPIC else KEY


def _operation(endpoint: Endpoint, catalogue: Catalogue) -> dict:
    spec = {"summary": endpoint.summary, "security": list(_security(endpoint)), "responses": _responses(endpoint),
            "parameters": [*_path_params(endpoint.template), *(p.spec() for p in (*endpoint.query, *endpoint.headers))]}
    if endpoint.body is not None:
        schema = {"$ref": REF.format(name=endpoint.body.schema.__name__)}
        spec["requestBody"] = {"required": True, "content": {JSON: {"schema": schema}}}
    if endpoint.form is not None:
        form = _form(endpoint.form, endpoint.model_kind, catalogue)
        spec["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": form}}}
    for param in spec["parameters"]:
        if param["name"] == "model" and endpoint.model_kind is not None:
            param["schema"] = {"enum": catalogue.names(endpoint.model_kind)}
    return spec


def _form(form: dict, model_kind: Kind | None, catalogue: Catalogue) -> dict:
    """A multipart body's schema, its `model` listing the catalogue's models of `model_kind`."""
    properties = dict(form["properties"])
    if model_kind is not None:
        properties["model"] = {"enum": catalogue.names(model_kind)}
    return {**form, "properties": properties}


def _path_params(path: str) -> list[dict]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]
    return [Param(name, where="path", required=True).spec() for name in names]


def _responses(endpoint: Endpoint) -> dict:
    answers = {status: {"description": "success", **({"content": {kind: {"schema": _success_schema(kind)}
                                                                   for kind in kinds}} if kinds else {})}
               for status, kinds in (endpoint.answers or {"200": (JSON,)}).items()}
    error = {"$ref": "#/components/responses/" + ("AnthropicError" if endpoint.dialect is Dialect.ANTHROPIC
                                                  else "Error")}
    return {**answers, "4XX": error, "5XX": error}


def _success_schema(content_type: str) -> dict:
    return dict(ANY_OBJECT) if content_type == JSON else {"type": "string"}


def _error_response() -> dict:
    return {"description": "the error body of every route but Anthropic's Messages routes",
            "content": {JSON: {"schema": {"$ref": REF.format(name="ErrorBody")}}}}


def _anthropic_error_response() -> dict:
    return {"description": "the error body of Anthropic's Messages routes (/v1/messages and under it)",
            "content": {JSON: {"schema": {"$ref": REF.format(name="AnthropicErrorBody")}}}}
