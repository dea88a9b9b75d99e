"""The model catalogue: records (`records`), their prices as stated (`pricing`) and as charged
(`prices`), the file's loader (`loading`), the index a request resolves through (`index`), the
price versions over time (`versions`), the catalogue in force now in every process (`live`),
putting a file in force (`publishing`), and the maintained price list it is priced from
(`source`: genai-prices; `comparison` and `commands`: `gateway catalogue add|check`)."""

from gateway.catalogue.index import SHIPPED_PATH, Catalogue, Resolved, UnknownModel, listed, read
from gateway.catalogue.prices import Prices
from gateway.catalogue.pricing import CatalogueError, Pricing, ProviderPricing, Timestamp
from gateway.catalogue.records import MAX_DIMENSIONS, Architecture, Kind, ModelRecord, ProviderEntry, TopProvider

__all__ = ["MAX_DIMENSIONS", "SHIPPED_PATH", "Architecture", "Catalogue", "CatalogueError", "Kind",
           "ModelRecord", "Prices", "Pricing", "ProviderEntry", "ProviderPricing", "Resolved", "Timestamp",
           "TopProvider", "UnknownModel", "listed", "read"]
