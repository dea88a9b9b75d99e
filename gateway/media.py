"""What the embedding, speech and transcription services share: the model of a kind, the
adapter that serves it, how their requests are recorded, and the cost fields they report."""

from gateway.billing import FREE, Cost, Usage
from gateway.catalogue import Kind, Resolved, UnknownModel
from gateway.charges import Outcome, record
from gateway.errors import ApiError, UpstreamError, bad_request
from gateway.jsonio import number
from gateway.providers.base import MediaProvider
from gateway.services import Caller, Services
from ledger.money import from_nano


def resolve(services: Services, model: str, kind: Kind) -> Resolved:
    """The catalogue entry of a model of `kind`; 400 naming `model` for anything else."""
    try:
        resolved = services.catalogue.resolve(model)
    except UnknownModel:
        raise bad_request(f"unknown model {model!r}; GET /v1/models lists the models", "model") from None
    if resolved.kind != kind:
        raise bad_request(f"model {model!r} is a {resolved.kind} model, not a {kind} model", "model")
    provider = services.providers.get(resolved.provider_id)
    if provider is None or kind not in provider.capabilities:
        raise ApiError(501, f"provider {resolved.provider_id!r} of model {model!r} cannot serve {kind}"
                            " requests in this gateway yet", type="not_implemented")
    return resolved


def provider_of(services: Services, model: Resolved) -> MediaProvider:
    return services.providers[model.provider_id]  # resolve() checked it serves the model's kind


def outcome(route: str, model: Resolved, status: int, usage: Usage = Usage(), cost: Cost = FREE, *,
            byok: bool = False, stream: bool = False, error: str = "") -> Outcome:
    """Delivered requests are charged, unless the org paid the provider with its own key."""
    return Outcome(route=route, model=model.model_id, provider=model.provider_id, status=status,
                   stream=stream, usage=usage, cost=cost, charged=status in (200, 499) and not byok,
                   error=error)


async def failed(services: Services, caller: Caller, route: str, model: Resolved, requested: str,
                 exc: UpstreamError, *, stream: bool = False) -> ApiError:
    """Record an upstream failure (not charged); the gateway error to answer with."""
    await record(services, caller, outcome(route, model, exc.client_status(), stream=stream, error=exc.message))
    return exc.to_api_error(model.provider_id, requested)


async def refused(services: Services, caller: Caller, route: str, model: Resolved, error: ApiError) -> ApiError:
    """Record a request the client's own input broke off after the upstream call began."""
    await record(services, caller, outcome(route, model, error.status, error=error.message))
    return error


def cost_fields(cost: Cost) -> dict:
    """`cost` (USD, spec 2.4) with the INR charged and the rate used, as chat reports them."""
    return {"cost": number(from_nano(cost.usd_total_nano)), "cost_inr": number(from_nano(cost.inr_nano)),
            "usd_to_inr": number(cost.rate)}
