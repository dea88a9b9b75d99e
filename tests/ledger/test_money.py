"""Exact money: parsing text, rounding to nano-units half-even, and back without loss."""

from decimal import Decimal

import pytest

from ledger.money import InvalidAmount, from_nano, parse_amount, to_nano


@pytest.mark.parametrize("text, amount", [
    ("12.50", Decimal("12.50")),
    ("  7 ", Decimal(7)),
    ("-0.000000001", Decimal("-0.000000001")),
    ("0.1", Decimal("0.1")),
    (5, Decimal(5)),
    (Decimal("2.25"), Decimal("2.25")),
])
def test_parse_amount_accepts_decimal_text_exactly(text, amount):
    parsed = parse_amount(text)
    assert parsed == amount
    assert str(parsed) == str(amount)


@pytest.mark.parametrize("text", [
    "", " ", "abc", "1.2.3", "1,5", "1,000", "0x10", "1.5f", "1e", "--1", "1 000", "$5", "5 INR",
    "NaN", "nan", "-NaN", "sNaN", "Infinity", "-Infinity", "inf", "+inf",
])
def test_parse_amount_rejects_text_that_is_not_a_finite_decimal(text):
    with pytest.raises(InvalidAmount):
        parse_amount(text)


def test_invalid_amount_is_a_value_error():
    with pytest.raises(ValueError, match="not a finite amount: 'NaN'"):
        parse_amount("NaN")


@pytest.mark.parametrize("amount, nano", [
    ("0.0000000005", 0),    # half to the even neighbour, 0
    ("0.0000000015", 2),    # half to the even neighbour, 2
    ("0.0000000025", 2),
    ("0.0000000035", 4),
    ("-0.0000000015", -2),
    ("-0.0000000025", -2),
    ("0.00000000050001", 1),  # above half goes up
    ("0.00000000249999", 2),  # below half goes down
    ("1.5", 1_500_000_000),
    ("0", 0),
])
def test_to_nano_rounds_half_to_even(amount, nano):
    assert to_nano(Decimal(amount)) == nano


def test_to_nano_does_not_accumulate_bias_over_halves():
    halves = [Decimal(f"0.{n:09d}5") for n in range(10)]  # 0.0000000005, 0.0000000015, ...
    assert sum(to_nano(h) for h in halves) == sum(range(10)) + 5  # half of them round up
    assert to_nano(sum(halves)) == sum(to_nano(h) for h in halves)


@pytest.mark.parametrize("text", [
    "0", "1", "10", "100", "0.000000001", "-0.000000001", "123.456789012", "85.50", "0.1",
    "999999999.999999999", "-42.000000007", "1000000",
])
def test_from_nano_inverts_to_nano_for_up_to_nine_decimals(text):
    amount = Decimal(text)
    assert from_nano(to_nano(amount)) == amount


def test_from_nano_gives_the_exact_amount():
    assert from_nano(1) == Decimal("0.000000001")
    assert from_nano(1_500_000_000) == Decimal("1.5")
    assert from_nano(-7) == Decimal("-0.000000007")
    assert from_nano(0) == 0


def test_from_nano_has_no_trailing_zeros():
    assert from_nano(1_500_000_000).as_tuple() == Decimal("1.5").as_tuple()
    assert from_nano(0).as_tuple() == Decimal(0).as_tuple()


def test_large_amounts_are_exact():
    amount = parse_amount(str(10**15))
    assert to_nano(amount) == 10**24
    assert from_nano(10**24) == Decimal(10**15)
    precise = parse_amount("1000000000000000.123456789")
    assert to_nano(precise) == 1_000_000_000_000_000_123_456_789
    assert from_nano(to_nano(precise)) == precise


def test_largest_exact_amount_has_28_significant_digits():
    amount = Decimal("9999999999999999999.999999999")  # 19 + 9 digits: the decimal context's precision
    assert to_nano(amount) == 9_999_999_999_999_999_999_999_999_999
    assert from_nano(to_nano(amount)) == amount
