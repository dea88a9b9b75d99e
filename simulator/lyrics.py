"""Deterministic song text (structure and lyrics) of a music answer, derived from its prompt.

The rules (tests predict the text from them). Directive markers are removed from
the prompt first. The text is sections joined by one blank line; a section is its
marker line ``<name>`` followed by its sung lines, if any.

* Instrumental: a prompt containing INSTRUMENTAL gives every section of the model
  as its marker alone, no sung lines.
* Lyrics: a prompt containing LYRICS_HEADING followed by non-blank text sings that
  text (stripped, verbatim) as the one verse: ``<intro>``, ``<verse>`` + lyrics, ``<outro>``.
* Otherwise the prompt's words (lowercased, surrounding punctuation stripped;
  `textgen.WORDS` when there are none) are sung in order, cycling through them:
  each ``<verse>`` takes the next VERSE_LINES lines of LINE_WORDS words, each
  ``<bridge>`` the next one line, every ``<chorus>`` is two lines "oh " + the first
  CHORUS_WORDS words; ``<intro>`` and ``<outro>`` have no sung lines.
"""

import itertools
import string
from collections.abc import Iterator, Sequence

from simulator.directives import strip_markers
from simulator.textgen import WORDS

INSTRUMENTAL = "Instrumental only, no vocals."
LYRICS_HEADING = "Lyrics:"
LINE_WORDS = 4
VERSE_LINES = 2
CHORUS_WORDS = 3


def song_text(prompt: str, sections: Sequence[str]) -> str:
    """The song text for `prompt` laid out in `sections` (names such as "verse")."""
    prompt = strip_markers(prompt)
    if INSTRUMENTAL in prompt:
        return _join(f"<{name}>" for name in sections)
    description, heading, lyrics = prompt.partition(LYRICS_HEADING)
    if heading and lyrics.strip():
        return _join(("<intro>", f"<verse>\n{lyrics.strip()}", "<outro>"))
    return _join(_sung_sections(prompt_words(description), sections))


def prompt_words(prompt: str) -> list[str]:
    """The words a song about `prompt` sings (see the module docstring)."""
    words = (word.strip(string.punctuation).lower() for word in prompt.split())
    return [word for word in words if word] or list(WORDS)


def _sung_sections(words: list[str], sections: Sequence[str]) -> Iterator[str]:
    """Each section's marker and sung lines, the words consumed in order across sections."""
    cursor = itertools.cycle(words)
    chorus = "oh " + " ".join(words[:CHORUS_WORDS])
    for name in sections:
        yield "\n".join((f"<{name}>", *_section_lines(name, cursor, chorus)))


def _section_lines(name: str, cursor: Iterator[str], chorus: str) -> list[str]:
    if name == "verse":
        return [_line(cursor) for _ in range(VERSE_LINES)]
    if name == "bridge":
        return [_line(cursor)]
    if name == "chorus":
        return [chorus, chorus]
    return []


def _line(cursor: Iterator[str]) -> str:
    return " ".join(itertools.islice(cursor, LINE_WORDS))


def _join(sections: Iterator[str] | Sequence[str]) -> str:
    return "\n\n".join(sections)
