"""The media bounds read a client's body before the route's own validation does: whatever JSON
arrives, finding and bounding its parts never raises (the route answers 400, never 500)."""

from hypothesis import given, settings, strategies as st

from gateway.billing import media

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40)
KEYS = st.sampled_from(["type", "image_url", "url", "detail", "input_audio", "data", "format", "file",
                        "file_data", "source", "media_type", "content", "messages", "input"]) | st.text(max_size=8)
TYPES = st.sampled_from(["image_url", "input_audio", "file", "input_image", "input_file", "image", "document",
                         "tool_result", "text", "base64"])
DATA_URLS = st.builds(lambda mime, body: f"data:{mime};base64,{body}",
                      st.sampled_from(["image/png", "image/jpeg", "audio/wav", "application/pdf", "text/plain"]),
                      st.text(alphabet="AQIDBA=/+iVBORw0KGgo", max_size=60))
JSON = st.recursive(SCALARS | TYPES | DATA_URLS,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
                    max_leaves=30)


PARTS = st.dictionaries(KEYS, JSON, max_size=4).flatmap(
    lambda extra: st.builds(lambda kind, fields: {**extra, **fields, "type": kind}, TYPES | JSON,
                            st.dictionaries(st.sampled_from(["image_url", "input_audio", "file", "file_data",
                                                             "source", "detail", "content"]), JSON, max_size=3)))
BODIES = st.builds(lambda key, messages: {key: messages}, st.sampled_from(["messages", "input"]),
                   st.lists(st.builds(lambda parts: {"content": parts}, st.lists(PARTS, max_size=3)), max_size=3))


@settings(max_examples=400, deadline=None)
@given(payload=BODIES | JSON, protocol=st.sampled_from(["openai", "anthropic", "google", None, "other"]),
       model=st.sampled_from(["gpt-4o-mini", "gpt-4o", "claude-sonnet-4-5", "gemini-2.5-flash", "unknown"]))
def test_any_json_is_read_without_raising(payload, protocol, model):
    for part in media.parts(payload):
        most = media.bound(protocol, model, part)
        assert most is None or most >= 0
