import pytest
from hypothesis import given, strategies as st

from agent.cpuset import MAX_ID, CPUSet, CPUSetError


@pytest.mark.parametrize(
    "text,ids",
    [
        ("", []),
        ("\n", []),
        ("0", [0]),
        ("0-3", [0, 1, 2, 3]),
        ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
        ("8,0-1", [0, 1, 8]),
        ("2-2", [2]),
        ("1,1,1", [1]),
    ],
)
def test_parse_valid(text, ids):
    assert list(CPUSet.parse(text)) == ids


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("3-1", "reversed"),
        ("a", "bad element"),
        ("-1", "bad element"),
        ("0,,1", "bad element"),
        ("0-", "bad element"),
        ("1 - 2", "bad element"),
        ("0-4294967295", "exceeds the limit"),
        ("0x1", "bad element"),
        (",", "bad element"),
    ],
)
def test_parse_rejects_with_clear_message(text, fragment):
    with pytest.raises(CPUSetError, match=fragment):
        CPUSet.parse(text)


def test_format_is_canonical():
    assert str(CPUSet([0, 1, 2, 3, 8, 10, 11])) == "0-3,8,10-11"
    assert str(CPUSet([5, 6])) == "5-6"
    assert str(CPUSet()) == ""


def test_masks_round_trip_and_match_kernel_layout():
    assert CPUSet.from_mask("00000000,0000ff0f") == CPUSet.parse("0-3,8-15")
    assert CPUSet.from_mask("1,00000000") == CPUSet([32])
    assert CPUSet.parse("0-3,8-15").to_mask() == "0000ff0f"
    assert CPUSet([32]).to_mask() == "00000001,00000000"
    with pytest.raises(CPUSetError):
        CPUSet.from_mask("zz")


def test_set_algebra_and_order():
    a, b = CPUSet.parse("0-5"), CPUSet.parse("4-9")
    assert a | b == CPUSet.parse("0-9")
    assert a & b == CPUSet.parse("4-5")
    assert a - b == CPUSet.parse("0-3")
    assert a ^ b == CPUSet.parse("0-3,6-9")
    assert CPUSet.parse("1-2") <= a and not (b <= a)
    assert list(CPUSet([9, 3, 7])) == [3, 7, 9]
    assert CPUSet.parse("2-4").take(2) == CPUSet([2, 3])
    assert hash(CPUSet([1, 2])) == hash(CPUSet.parse("1-2"))
    assert 3 in a and 9 not in a


def test_constructor_rejects_bad_ids():
    with pytest.raises(CPUSetError):
        CPUSet([-1])
    with pytest.raises(CPUSetError):
        CPUSet([MAX_ID + 1])
    with pytest.raises(CPUSetError):
        CPUSet(["1"])  # type: ignore[list-item]


ids = st.frozensets(st.integers(min_value=0, max_value=2048), max_size=200)


@given(ids)
def test_list_format_round_trip(s):
    cs = CPUSet(s)
    assert CPUSet.parse(str(cs)) == cs
    assert str(CPUSet.parse(str(cs))) == str(cs)


@given(ids)
def test_mask_round_trip(s):
    cs = CPUSet(s)
    assert CPUSet.from_mask(cs.to_mask()) == cs
    assert CPUSet.from_int(cs.to_int()) == cs


@given(ids, ids)
def test_algebra_matches_python_sets(a, b):
    assert set(CPUSet(a) | CPUSet(b)) == a | b
    assert set(CPUSet(a) & CPUSet(b)) == a & b
    assert set(CPUSet(a) - CPUSet(b)) == a - b


@given(ids, st.integers(min_value=0, max_value=4))
def test_mask_with_leading_zero_words_and_newline_as_sysfs_writes_it(s, pad_words):
    padded = ",".join(["00000000"] * pad_words + [CPUSet(s).to_mask()]) + "\n"
    assert CPUSet.from_mask(padded) == CPUSet(s)


@pytest.mark.parametrize("bad", ["xyz", "ff,,ff", "123456789", "ff,"])
def test_bad_masks_raise(bad):
    with pytest.raises(CPUSetError):
        CPUSet.from_mask(bad)
