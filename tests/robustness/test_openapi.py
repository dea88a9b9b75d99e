"""GET /openapi.json: an OpenAPI 3.1 document of every route, generated from the handlers' types."""

import msgspec
import pytest

from gateway.edge.errors import ApiError, ErrorBody
from gateway.routes import OPERATIONS


async def test_the_document_is_public_and_describes_every_route(gateway):
    response = await gateway.client.get("/openapi.json")
    assert response.status == 200 and response.content_type == "application/json"
    doc = await response.json()
    assert doc["openapi"] == "3.1.0"
    routes = {(method.upper(), path) for path, item in doc["paths"].items() for method in item}
    served = {(r.method, r.resource.get_info().get("formatter") or r.resource.get_info()["path"])
              for r in gateway.server.app.router.routes() if r.method != "HEAD"}
    assert routes == served == set(OPERATIONS)


async def test_bodies_and_errors_come_from_the_msgspec_types(gateway):
    doc = await (await gateway.client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    chat = doc["paths"]["/v1/chat/completions"]["post"]
    assert chat["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatRequest"}
    assert schemas["ChatRequest"]["required"] == ["model", "messages"]
    assert "gpt-4o-mini" in schemas["ChatRequest"]["properties"]["model"]["enum"]
    assert "text-embedding-3-small" in schemas["EmbeddingRequest"]["properties"]["model"]["enum"]
    assert set(schemas["ErrorDetail"]["required"]) == {"message", "type", "code", "param"}
    assert chat["responses"]["4XX"] == {"$ref": "#/components/responses/Error"}


def test_the_error_body_is_the_documented_schema():
    body = ApiError(404, "gone", type="not_found", extra={"provider": "openai"}).body()
    documented = msgspec.convert(body, ErrorBody)  # the body has every field the schema names
    assert msgspec.structs.asdict(documented.error) == {"message": "gone", "type": "not_found",
                                                        "code": "not_found", "param": None}
    assert body["error"]["provider"] == "openai"


async def test_query_parameters_come_from_the_parsers_constants(gateway):
    doc = await (await gateway.client.get("/openapi.json")).json()
    logs = {p["name"]: p["schema"] for p in doc["paths"]["/v1/logs"]["get"]["parameters"]}
    assert logs["limit"] == {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}
    assert logs["status"] == {"type": "integer", "minimum": 100, "maximum": 599}
    assert logs["before"]["pattern"] == "^log_[0-9]{1,19}$"
    detail = doc["paths"]["/v1/logs/{log_id}"]["get"]["parameters"]
    assert detail == [{"name": "log_id", "in": "path", "schema": {"type": "string"}, "required": True}]


@pytest.mark.parametrize("path, method, security", [
    ("/v1/models", "get", []), ("/openapi.json", "get", []), ("/v1/logs", "get", [{"bearer": []}]),
    ("/v1/messages", "post", [{"bearer": []}, {"x-api-key": []}])])
async def test_security_says_which_routes_need_a_key(gateway, path, method, security):
    doc = await (await gateway.client.get("/openapi.json")).json()
    assert doc["paths"][path][method]["security"] == security
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "an organization's API key"}


async def test_the_document_is_a_valid_openapi_3_1_document(gateway):
    import schemathesis

    doc = await (await gateway.client.get("/openapi.json")).json()
    schema = schemathesis.openapi.from_dict(doc)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(OPERATIONS)
