"""Typed keys for what the application and each request carry."""

from aiohttp import web

from gateway.metrics import Metrics
from gateway.services import Caller, Services

SERVICES = web.AppKey("services", Services)
METRICS = web.AppKey("metrics", Metrics)
REQUEST_ID = web.RequestKey("request_id", str)
CALLER = web.RequestKey("caller", Caller)
LOG_FIELDS = web.RequestKey("log_fields", dict)
