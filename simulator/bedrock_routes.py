"""AWS Bedrock Runtime: Converse, ConverseStream (binary event stream) and InvokeModel, SigV4 or a bearer API key.

Paths as AWS has them, the model id percent-encoded by clients (``us.anthropic.claude-...-v1%3A0``,
or an ARN whose ``/`` arrives as ``%2F``). The id is matched by a regex that allows ``/`` so an
ARN still routes once decoded, the operation by the path's suffix:

    POST /model/{modelId}/converse         `simulator.bedrock_converse` (JSON)
    POST /model/{modelId}/converse-stream  `simulator.bedrock_converse` (event stream)
    POST /model/{modelId}/invoke           `simulator.bedrock_invoke` (embeddings)

Each is `simulator.bedrock_access.guarded`: recorded, then refused without a bearer key or a
valid SigV4 signature. ``GET /_sim/bedrock/requests`` lists how each request authenticated.
"""

from aiohttp import web

from simulator import aws_container
from simulator.bedrock_access import add_access, guarded
from simulator.bedrock_converse import converse_handler
from simulator.bedrock_invoke import invoke

MODEL = "/model/{model_id:.*}"


def add_routes(app: web.Application) -> None:
    """Register Bedrock Runtime's routes and the auth log on `app`."""
    add_access(app)
    aws_container.add_routes(app)  # the credential chain's container source, for signing clients
    app.router.add_post(MODEL + "/converse", guarded("Converse", converse_handler(stream=False)))
    app.router.add_post(MODEL + "/converse-stream", guarded("ConverseStream", converse_handler(stream=True)))
    app.router.add_post(MODEL + "/invoke", guarded("InvokeModel", invoke))
