"""Typed keys for what the application and each request carry."""

from aiohttp import web

from gateway.facts import RequestFacts
from gateway.metrics import Metrics
from gateway.services import Caller, Services

SERVICES = web.AppKey("services", Services)
METRICS = web.AppKey("metrics", Metrics)
REQUEST_ID = web.RequestKey("request_id", str)
CALLER = web.RequestKey("caller", Caller)
# What the request turned out to be (model, provider, cost, ...): its log line and metrics read it.
FACTS = web.RequestKey("facts", RequestFacts)
