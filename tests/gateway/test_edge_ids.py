"""Properties of the one parser of numeric ids (gateway.edge.parsing.log_position, over is_whole): it
takes exactly `log_` and ASCII digits naming a position below 2^63, whatever else int() or
str.isdigit would take (Unicode digits, superscripts, underscores, signs, spaces, huge numbers)."""

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.edge.parsing import LOG_ID_PATTERN, LOG_ID_PREFIX, MAX_WHOLE, is_whole, log_position
from gateway.edge.errors import ApiError

POSITIONS = st.integers(0, MAX_WHOLE)
BEYOND = st.integers(MAX_WHOLE + 1, 2**200)
# Characters int() or str.isdigit takes that are not ASCII digits: other scripts' digits (Nd),
# superscripts and the like (No), and the sign, underscore and blanks int() forgives.
LOOKALIKES = st.one_of(st.characters(categories=["Nd", "No"]).filter(lambda c: not "0" <= c <= "9"),
                       st.sampled_from(["_", "+", "-", " ", "\t", "\n", ".", "e"]))


def refused(text: str) -> bool:
    with pytest.raises(ApiError) as caught:
        log_position(text, "id")
    return caught.value.status == 400


@given(POSITIONS)
@example(0)
@example(MAX_WHOLE)
def test_every_position_in_range_reads_back(position):
    log_id = f"{LOG_ID_PREFIX}{position}"
    assert log_position(log_id, "id") == position and re.fullmatch(LOG_ID_PATTERN, log_id)


@given(BEYOND)
@example(MAX_WHOLE + 1)
@example(99999999999999999999)
def test_a_position_beyond_63_bits_is_a_400(position):
    assert refused(f"{LOG_ID_PREFIX}{position}")


@given(st.text(st.sampled_from("0123456789"), max_size=25), LOOKALIKES, st.text(st.sampled_from("0123456789"),
                                                                               max_size=25))
@example("", "\u00b2", "")
@example("1", "\u0661", "2")
def test_a_lookalike_anywhere_among_the_digits_is_a_400(before, lookalike, after):
    assert refused(f"{LOG_ID_PREFIX}{before}{lookalike}{after}")


@given(st.text())
def test_any_text_is_a_position_none_or_a_400_never_another_error(text):
    if not text.startswith(LOG_ID_PREFIX):
        assert log_position(text, "id") is None
    elif re.fullmatch("[0-9]{1,19}", digits := text.removeprefix(LOG_ID_PREFIX)) and int(digits) <= MAX_WHOLE:
        assert log_position(text, "id") == int(digits)
    else:
        assert refused(text)


@given(st.text(max_size=30), st.integers(-(2**70), 2**70))
def test_is_whole_agrees_with_ascii_digits_in_bounds(text, number):
    for candidate in (text, str(number)):
        # at most 19 digits, so int() never reads thousands (leading zeros beyond that are refused)
        ascii_digits = re.fullmatch("[0-9]{1,19}", candidate) is not None
        assert is_whole(candidate, 0, MAX_WHOLE) == (ascii_digits and int(candidate) <= MAX_WHOLE)
