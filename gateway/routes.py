"""Every endpoint the gateway serves, one tuple: each API family's, declared beside its handlers
(its `routes.py`). The only module that knows every family; gateway.app registers the tuple
through a route table (gateway.edge.routes)."""

from types import MappingProxyType

from gateway.audio import routes as audio
from gateway.batches import file_routes, routes as batches
from gateway.chat import routes as chat
from gateway.dashboard import routes as dashboard
from gateway.edge.routes import Endpoint
from gateway.embeddings import routes as embeddings
from gateway.ledger_api import routes as ledger_api
from gateway.messages import routes as messages
from gateway.models import routes as models
from gateway.music import routes as music
from gateway.ops import routes as ops
from gateway.realtime import routes as realtime
from gateway.responses import routes as responses
from gateway.webhooks import routes as webhooks

ENDPOINTS: tuple[Endpoint, ...] = (
    *ops.ENDPOINTS, *models.ENDPOINTS, *chat.ENDPOINTS, *messages.ENDPOINTS, *embeddings.ENDPOINTS,
    *audio.ENDPOINTS, *realtime.ENDPOINTS, *responses.ENDPOINTS, *music.ENDPOINTS, *dashboard.ENDPOINTS,
    *ledger_api.ENDPOINTS, *webhooks.ENDPOINTS, *file_routes.ENDPOINTS, *batches.ENDPOINTS)
# (METHOD, path as OpenAPI writes it) to its endpoint: what the tests sweep
OPERATIONS = MappingProxyType({(endpoint.method, endpoint.template): endpoint for endpoint in ENDPOINTS})
