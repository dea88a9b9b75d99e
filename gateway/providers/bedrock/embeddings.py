"""Embeddings on Bedrock through InvokeModel, in each model family's own body: Amazon Titan Text
Embeddings (one text a call: the inputs go as calls of their own, one after another) and Cohere
Embed (many texts a call, its tokens reported only in the `X-Amzn-Bedrock-Input-Token-Count`
header). Vectors come back as floats; the gateway makes base64 itself when asked.
"""

from collections.abc import Awaitable, Callable

from gateway.edge.errors import UpstreamError, bad_request
from gateway.providers.base import EmbeddingReply
from gateway.providers.usage import token_count

PROVIDER = "bedrock"
TOKEN_HEADER = "X-Amzn-Bedrock-Input-Token-Count"
COHERE_TEXTS = 96  # Cohere Embed's limit on the texts of one call

# An InvokeModel call: (model, body) -> (answer, the answer's headers).
Invoke = Callable[[str, dict], Awaitable[tuple[dict, dict[str, str]]]]


def texts_of(items: list) -> list[str]:
    """The inputs as texts: Bedrock's models take no token arrays (400 naming `input`)."""
    if not all(isinstance(item, str) for item in items):
        raise bad_request("input must be text for Bedrock models: they take no token arrays", "input")
    return items


def family(model: str) -> str:
    """`titan` or `cohere` for the embedding models served; 400 for any other model id."""
    if "amazon.titan-embed-text" in model:
        return "titan"
    if "cohere.embed" in model:
        return "cohere"
    raise bad_request(f"model {model!r} is not an embedding model Bedrock serves through this gateway"
                      " (Titan Text Embeddings, Cohere Embed)", "model")


def titan_body(text: str, dimensions: object) -> dict:
    body: dict = {"inputText": text, "normalize": True}
    if dimensions is not None:
        body["dimensions"] = dimensions
    return body


def titan_vector(answer: dict) -> tuple[list[float], int]:
    vector = answer.get("embedding")
    if not isinstance(vector, list) or not _is_vector(vector):
        raise UpstreamError(502, "bedrock sent a Titan answer without an embedding")
    return vector, token_count(PROVIDER, answer, "inputTextTokenCount")


def cohere_body(texts: list[str], input_type: object) -> dict:
    return {"texts": texts, "input_type": input_type if isinstance(input_type, str) else "search_document"}


def cohere_vectors(answer: dict, headers: dict[str, str], expected: int) -> tuple[list[list[float]], int]:
    vectors = answer.get("embeddings")
    if isinstance(vectors, dict):  # asked for by type: {"float": [...]}
        vectors = vectors.get("float")
    if not isinstance(vectors, list) or len(vectors) != expected or not all(_is_vector(v) for v in vectors):
        raise UpstreamError(502, f"bedrock sent a Cohere answer without {expected} embeddings")
    return vectors, _header_tokens(headers)


def _header_tokens(headers: dict[str, str]) -> int:
    text = headers.get(TOKEN_HEADER, "")
    if not (text.isascii() and text.isdigit()):
        raise UpstreamError(502, f"bedrock sent no valid {TOKEN_HEADER} header")
    return token_count(PROVIDER, {"tokens": int(text)}, "tokens")


def _is_vector(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value)


async def embed(invoke: Invoke, model: str, body: dict, items: list) -> EmbeddingReply:
    """Every input of an OpenAI embeddings `body` embedded by `model`, in input order."""
    texts = texts_of(items)
    if family(model) == "cohere":
        vectors: list[list[float]] = []
        tokens = 0
        for start in range(0, len(texts), COHERE_TEXTS):
            part = texts[start:start + COHERE_TEXTS]
            answer, headers = await invoke(model, cohere_body(part, body.get("input_type")))
            found, used = cohere_vectors(answer, headers, len(part))
            vectors, tokens = vectors + found, tokens + used
        return EmbeddingReply(vectors, tokens)
    answers = [titan_vector((await invoke(model, titan_body(text, body.get("dimensions"))))[0]) for text in texts]
    return EmbeddingReply([vector for vector, _ in answers], sum(tokens for _, tokens in answers))
