"""The RFC 9110 byte-range rules, as pure functions (no I/O)."""

import pytest

from storage.preconditions import if_range_allows, none_match
from storage.ranges import MAX_RANGES, Full, Partial, Unsatisfiable, choose, parse

SIZE = 1000
ETAG = '"5d41402abc4b2a76b9719d911017c592"'


@pytest.mark.parametrize(("header", "expected"), [
    # single ranges
    ("bytes=0-0", Partial(((0, 0),))),
    ("bytes=999-999", Partial(((999, 999),))),
    ("bytes=100-199", Partial(((100, 199),))),
    ("bytes=0-999", Partial(((0, 999),))),
    # open-ended
    ("bytes=0-", Partial(((0, 999),))),
    ("bytes=500-", Partial(((500, 999),))),
    ("bytes=999-", Partial(((999, 999),))),
    # suffix: smaller than, equal to, larger than the size
    ("bytes=-1", Partial(((999, 999),))),
    ("bytes=-100", Partial(((900, 999),))),
    ("bytes=-1000", Partial(((0, 999),))),
    ("bytes=-5000", Partial(((0, 999),))),
    # last-pos beyond the end is clamped to size-1
    ("bytes=900-5000", Partial(((900, 999),))),
    # several ranges, in the order asked; overlaps served as asked
    ("bytes=0-9,20-29", Partial(((0, 9), (20, 29)))),
    ("bytes=0-9, 20-29 ,-10", Partial(((0, 9), (20, 29), (990, 999)))),
    ("bytes=0-99,50-149", Partial(((0, 99), (50, 149)))),
    ("bytes=500-509,0-9", Partial(((500, 509), (0, 9)))),
    # exactly MAX_RANGES ranges are honoured
    ("bytes=0-0,2-2,4-4,6-6,8-8", Partial(((0, 0), (2, 2), (4, 4), (6, 6), (8, 8)))),
    # unit is case-insensitive; empty list elements are ignored (RFC 9110 §5.6.1)
    ("Bytes=0-9", Partial(((0, 9),))),
    ("bytes=0-9,,20-29,", Partial(((0, 9), (20, 29)))),
    # an unsatisfiable range among satisfiable ones is dropped
    ("bytes=0-9,5000-6000", Partial(((0, 9),))),
    ("bytes=-0,0-0", Partial(((0, 0),))),
])
def test_satisfiable_ranges(header, expected):
    assert parse(header, SIZE) == expected


@pytest.mark.parametrize("header", [
    "bytes=abc", "bytes=", "bytes=-", "bytes=5-2", "bytes=0-1,5-2", "items=0-1", "bytes 0-1",
    "bytes=0-1-2", "bytes=+1-2", "bytes=1-+2", "bytes=0x10-20", "bytes=١-٢", "bytes=1.5-2",
    "bytes=--1", "0-1", "", "bytes=,",
])
def test_syntactically_invalid_headers_are_ignored(header):
    assert parse(header, SIZE) == Full()


def test_more_than_max_ranges_is_treated_as_no_range():
    too_many = "bytes=" + ",".join(f"{n * 10}-{n * 10 + 1}" for n in range(MAX_RANGES + 1))
    assert MAX_RANGES == 5
    assert parse(too_many, SIZE) == Full()


@pytest.mark.parametrize(("header", "size"), [
    ("bytes=1000-", 1000),         # first byte just past the end
    ("bytes=1000-2000", 1000),
    ("bytes=5000-5001,1000-", 1000),  # every range starts past the end
    ("bytes=-0", 1000),            # an empty suffix selects nothing
    ("bytes=0-", 0),               # nothing can be selected from an empty object
    ("bytes=0-0", 0),
])
def test_unsatisfiable_sets(header, size):
    assert parse(header, size) == Unsatisfiable()


def test_a_suffix_on_an_empty_object_gets_the_empty_whole():
    # RFC 9110 §14.1.1: the one satisfiable form on zero length, yet no range expresses it.
    assert parse("bytes=-5", 0) == Full()
    assert parse("bytes=-0", 0) == Unsatisfiable()


def test_no_range_header_means_full():
    assert choose(None, None, SIZE, ETAG) == Full()
    assert choose(None, ETAG, SIZE, ETAG) == Full()


@pytest.mark.parametrize(("if_range", "expected"), [
    (None, Partial(((0, 9),))),                        # absent: the range applies
    (ETAG, Partial(((0, 9),))),                        # our strong ETag exactly
    (f"  {ETAG} ", Partial(((0, 9),))),                # surrounding whitespace is not the tag
    ('"some-other-etag"', Full()),                      # changed since: send it all
    (f"W/{ETAG}", Full()),                              # a weak tag never matches
    (ETAG.strip('"'), Full()),                          # unquoted is not the same tag
    ("Wed, 21 Oct 2015 07:28:00 GMT", Full()),          # we validate by ETag, never by date
])
def test_if_range(if_range, expected):
    assert choose("bytes=0-9", if_range, SIZE, ETAG) == expected


def test_if_range_never_matches_a_weak_etag_of_ours():
    assert not if_range_allows('W/"abc"', 'W/"abc"')
    assert if_range_allows(None, 'W/"abc"')


def test_if_range_does_not_rescue_an_invalid_range():
    assert choose("bytes=9-1", ETAG, SIZE, ETAG) == Full()
    assert choose("bytes=5000-", ETAG, SIZE, ETAG) == Unsatisfiable()


@pytest.mark.parametrize(("header", "matches"), [
    (None, False),
    (ETAG, True),
    (f"W/{ETAG}", True),                                # If-None-Match compares weakly
    ('"other", ' + ETAG, True),
    ('"other", "another"', False),
    ("*", True),
    ('"a,b", "c"', False),                              # a comma inside a tag is no separator
])
def test_if_none_match(header, matches):
    assert none_match(header, ETAG) is matches


def test_none_match_finds_a_tag_containing_a_comma():
    assert none_match('"x", "a,b"', '"a,b"')
