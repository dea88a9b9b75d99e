"""Deterministic token counting and text generation, so tests can predict every byte.

The rules (other test suites rely on them, change them only together):

* Prompt tokens: for each message, count the whitespace-separated words
  (``str.split()``) of each of its text pieces (a string content, or each
  ``text`` part of a list content), add 4 per message, and sum over messages.
  Directive markers such as ``[sim:tokens=3]`` are ordinary words here.
* Completion tokens: a completion of N tokens consists of tokens 0..N-1 where
  token i is ``WORDS[i % len(WORDS)] + " "`` (one word and a single trailing
  space). The completion text is the concatenation of all N tokens, so it
  always ends with a space when N > 0 and is "" when N == 0.
"""

from collections.abc import Iterable, Iterator, Sequence

WORDS: tuple[str, ...] = (
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog",
    "while", "seven", "small", "birds", "sing", "in", "green", "trees",
    "near", "old", "river",
)  # fmt: skip

PER_MESSAGE_OVERHEAD = 4

# Tokens are precomputed once: generation is on the hot path of benchmarks.
_TOKENS: tuple[str, ...] = tuple(word + " " for word in WORDS)


def count_prompt_tokens(messages: Iterable[Sequence[str]]) -> int:
    """Prompt tokens of messages given as their text pieces (see module docstring)."""
    return sum(
        PER_MESSAGE_OVERHEAD + sum(len(text.split()) for text in pieces) for pieces in messages
    )


def token(index: int) -> str:
    """The completion token at 0-based position `index`."""
    return _TOKENS[index % len(_TOKENS)]


def iter_tokens(count: int) -> Iterator[str]:
    """The first `count` completion tokens, in order."""
    return (token(index) for index in range(count))


def completion_text(count: int) -> str:
    """The full completion text of `count` tokens."""
    return "".join(iter_tokens(count))


def iter_chunks(count: int, size: int | None) -> Iterator[str]:
    """The first `count` streamed deltas: the tokens, or with `size` (``[sim:chunk_bytes=N]``,
    for a huge stream made fast) each token repeated and cut to `size` characters."""
    if size is None:
        return iter_tokens(count)
    padded = tuple((text * (size // len(text) + 1))[:size] for text in _TOKENS)
    return (padded[index % len(padded)] for index in range(count))
