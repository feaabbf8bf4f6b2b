import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ttgnn.shapes import (
    TTShape,
    digits_to_index,
    factor_dim,
    factor_rows,
    index_to_digits,
    normalize_ranks,
)


def test_factor_rows_known_shapes():
    assert factor_rows(169_343, 3) == [55, 55, 56]  # a prime: padded to 169,400
    assert factor_rows(10**9, 3) == [1000, 1000, 1000]
    assert factor_rows(111_059_956, 3) == [481, 481, 481]  # 480*481*481 < N
    assert factor_rows(1, 3) == [1, 1, 1]
    assert factor_rows(2, 2) == [1, 2]


@given(st.integers(1, 10**12), st.integers(2, 5))
@settings(max_examples=300, deadline=None)
def test_factor_rows_is_smallest_balanced_cover(num_rows, num_cores):
    shape = factor_rows(num_rows, num_cores)
    assert len(shape) == num_cores
    assert math.prod(shape) >= num_rows
    assert max(shape) - min(shape) <= 1
    assert shape == sorted(shape)
    # No balanced shape with a smaller product covers num_rows.
    smaller = [s - 1 for s in shape]
    for i in range(num_cores):
        candidate = shape[:i] + smaller[i:]
        if candidate != shape and min(candidate) >= 1:
            assert math.prod(candidate) < num_rows


@pytest.mark.parametrize(
    "dim, num_cores, expected",
    [(128, 3, [8, 4, 4]), (64, 3, [4, 4, 4]), (100, 3, [5, 5, 4]), (7, 3, [7, 1, 1]), (128, 2, [16, 8]),
     (256, 4, [4, 4, 4, 4])],
)
def test_factor_dim(dim, num_cores, expected):
    assert factor_dim(dim, num_cores) == expected


@given(st.integers(1, 4096), st.integers(2, 5))
def test_factor_dim_product_is_exact(dim, num_cores):
    shape = factor_dim(dim, num_cores)
    assert math.prod(shape) == dim and len(shape) == num_cores


def test_normalize_ranks_forms_and_caps():
    assert normalize_ranks(16, [55, 55, 56], [8, 4, 4]) == [1, 16, 16, 1]
    assert normalize_ranks([4, 8], [55, 55, 56], [8, 4, 4]) == [1, 4, 8, 1]
    assert normalize_ranks([1, 4, 8, 1], [55, 55, 56], [8, 4, 4]) == [1, 4, 8, 1]
    # Caps: first rank <= n1*m1 = 6, last rank <= n3*m3 = 10.
    assert normalize_ranks(1000, [3, 5, 5], [2, 2, 2]) == [1, 6, 10, 1]
    with pytest.raises(ValueError, match="inner values"):
        normalize_ranks([4, 4, 4], [55, 55, 56], [8, 4, 4])
    with pytest.raises(ValueError, match="first and last must be 1"):
        normalize_ranks([2, 4, 8, 1], [55, 55, 56], [8, 4, 4])
    with pytest.raises(ValueError, match=">= 1"):
        normalize_ranks(0, [55, 55, 56], [8, 4, 4])
    with pytest.raises(TypeError):
        normalize_ranks(2.5, [55, 55, 56], [8, 4, 4])


def test_ttshape_arxiv_counts_match_published_ratios():
    # TT-GNN (KDD'22) reports 1,117x at rank 8 and 22.9x at rank 64 for ogbn-arxiv x 128.
    assert TTShape.build(169_343, 128, 8).num_parameters == 19_392
    assert round(TTShape.build(169_343, 128, 8).compression_ratio) == 1118
    assert TTShape.build(169_343, 128, 16).num_parameters == 66_944
    assert TTShape.build(169_343, 128, 64).compression_ratio == pytest.approx(22.97, abs=0.01)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(row_shape=[10, 10]), ValueError, "covers 100 rows, fewer than num_embeddings=1000"),
        (dict(col_shape=[4, 4, 4]), ValueError, "multiplies to 64, but embedding_dim is 128"),
        (dict(row_shape=[10, 10, 10], col_shape=[16, 8]), ValueError, "one factor per core"),
        (dict(row_shape=[10, 0, 10]), ValueError, "factors must be >= 1"),
        (dict(row_shape=[10, 10.0, 10]), TypeError, "must contain ints"),
        (dict(num_cores=1), ValueError, r"num_cores must be in \[2, 8\]"),
        (dict(num_cores=9), ValueError, r"num_cores must be in \[2, 8\]"),
        (dict(row_shape=[2] * 10), ValueError,
         r"^row_shape \[2, 2, 2, 2, 2, 2, 2, 2, 2, 2\] has 10 factor\(s\), one per core; a TT table has 2 to 8 cores$"),
        (dict(row_shape=[1000]), ValueError, r"^row_shape \[1000\] has 1 factor\(s\), one per core; a TT table has 2 "),
        (dict(col_shape=[128]), ValueError, r"^col_shape \[128\] has 1 factor\(s\), one per core; a TT table has 2 "),
        # a core count that contradicts a given shape is refused, not overridden by the shape
        (dict(num_cores=3, row_shape=[40, 25]), ValueError,
         r"^num_cores=3 but row_shape \[40, 25\] has 2 factor\(s\), one per core; give num_cores or a shape"),
        (dict(num_cores=2, col_shape=[8, 4, 4]), ValueError, r"^num_cores=2 but col_shape \[8, 4, 4\] has 3 factor"),
        (dict(num_cores=0, row_shape=[10, 10, 10]), ValueError, r"^num_cores=0 but row_shape \[10, 10, 10\] has 3"),
        (dict(num_cores=3.0, row_shape=[10, 10, 10]), TypeError, "num_cores must be an int, got float"),
    ],
)
def test_ttshape_rejects_bad_shapes(kwargs, error, message):
    with pytest.raises(error, match=message):
        TTShape.build(1000, 128, 8, **kwargs)


@pytest.mark.parametrize("kwargs", [dict(row_shape=[10, 10, 10]), dict(col_shape=[8, 4, 4]),
                                    dict(row_shape=[10, 10, 10], col_shape=[8, 4, 4])])
def test_ttshape_takes_a_core_count_that_agrees_with_the_shape(kwargs):
    with_count = TTShape.build(1000, 128, 8, num_cores=np.int64(3), **kwargs)
    assert with_count == TTShape.build(1000, 128, 8, **kwargs)
    assert (with_count.row_shape, with_count.col_shape) == ((10, 10, 10), (8, 4, 4))


@pytest.mark.parametrize("num_rows, dim", [(0, 8), (8, 0), (-3, 8)])
def test_ttshape_rejects_non_positive_sizes(num_rows, dim):
    with pytest.raises(ValueError, match=">= 1"):
        TTShape.build(num_rows, dim, 4)


@given(st.lists(st.integers(1, 40), min_size=2, max_size=5), st.data())
def test_digits_roundtrip_and_order(row_shape, data):
    total = math.prod(row_shape)
    index = torch.tensor(data.draw(st.lists(st.integers(0, total - 1), min_size=1, max_size=50)))
    digits = index_to_digits(index, row_shape)
    assert digits.shape == (index.numel(), len(row_shape))
    for k, n in enumerate(row_shape):
        assert bool(((digits[:, k] >= 0) & (digits[:, k] < n)).all())
    assert torch.equal(digits_to_index(digits, row_shape), index)


def test_digit_convention_first_digit_most_significant():
    digits = index_to_digits(torch.tensor([0, 1, 5, 6, 29]), [5, 2, 3])
    assert digits.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 0, 0], [4, 1, 2]]


def test_shape_for_budget_picks_the_largest_rank_that_fits():
    from ttgnn.shapes import TTShape, shape_for_budget

    # arxiv at >= 1,000x: rank 8 has 19,392 parameters (1,117.8x); rank 9 has 24,264 (893x)
    shape = shape_for_budget(169_343, 128, compression=1000)
    assert shape.ranks == (1, 8, 8, 1) and shape.compression_ratio >= 1000
    assert TTShape.build(169_343, 128, 9).compression_ratio < 1000
    by_params = shape_for_budget(169_343, 128, max_params=19_392)
    assert by_params == shape
    assert shape_for_budget(169_343, 128, max_params=19_391).ranks == (1, 7, 7, 1)
    # a tiny table: the rank stops at the shape's cap, never past the budget
    small = shape_for_budget(27, 8, max_params=10**6, row_shape=[3, 3, 3], col_shape=[2, 2, 2])
    assert small.ranks == (1, 6, 6, 1)
    assert small.num_parameters <= 10**6


def _largest_rank_one_at_a_time(rows, dim, budget, num_cores):
    from ttgnn.shapes import TTShape

    best, rank = None, 1
    while True:
        shape = TTShape.build(rows, dim, rank, num_cores)
        if shape.num_parameters > budget:
            return best
        best = shape
        if max(shape.ranks) < rank:
            return best
        rank += 1


@pytest.mark.parametrize("rows,dim,num_cores", [(169_343, 128, 3), (1000, 16, 4), (30, 7, 2), (2, 1, 2)])
def test_shape_for_budget_is_the_search_one_rank_at_a_time(rows, dim, num_cores):
    from ttgnn.shapes import shape_for_budget

    for budget in [rows * dim // 3000 + 3, rows * dim // 100 + 5, rows * dim // 7 + 1, rows * dim, 10**9]:
        expected = _largest_rank_one_at_a_time(rows, dim, budget, num_cores)
        if expected is None:
            with pytest.raises(ValueError, match="at rank 1 has"):
                shape_for_budget(rows, dim, max_params=budget, num_cores=num_cores)
        else:
            assert shape_for_budget(rows, dim, max_params=budget, num_cores=num_cores) == expected


def test_shape_for_budget_builds_few_shapes_for_a_huge_budget(monkeypatch):
    # One rank at a time: `ttgnn info --rows 1e12 --max-params 1e30` took 35 s (rank 1,008,016),
    # --rows 1e18 --max-params 1e20 about 40 hours
    from ttgnn import shapes

    built = []
    build = shapes.TTShape.build
    monkeypatch.setattr(shapes.TTShape, "build", lambda *args: built.append(args) or build(*args))
    shape = shapes.shape_for_budget(10**18, 128, max_params=10**20)
    assert shape.num_parameters <= 10**20 and len(built) < 80
    assert build(10**18, 128, max(shape.ranks) + 1).num_parameters > 10**20


def test_shape_for_budget_more_cores_allow_a_larger_rank():
    from ttgnn.shapes import shape_for_budget

    # arxiv at >= 1,000x: rank 8 in three cores, 15 in five, 19 in six (the last bond capped at 16)
    ranks = {k: shape_for_budget(169_343, 128, compression=1000, num_cores=k).ranks for k in (3, 5, 6)}
    assert ranks == {3: (1, 8, 8, 1), 5: (1, 15, 15, 15, 15, 1), 6: (1, 19, 19, 19, 19, 16, 1)}
    six = shape_for_budget(169_343, 128, compression=1000, num_cores=6)
    assert six.row_shape == (7, 7, 7, 8, 8, 8) and six.compression_ratio >= 1000


@pytest.mark.parametrize("num_rows, cores", [(1, 3), (169_343, 3), (256**3, 3), (256**3 + 1, 4), (256**4, 4),
                                             (256**4 + 1, 5), (256**5, 5), (256**5 + 1, 6), (2**62, 8)])
def test_auto_num_cores_smallest_with_row_factors_at_most_256(num_rows, cores):
    from ttgnn.shapes import auto_num_cores, factor_rows

    assert auto_num_cores(num_rows) == cores
    assert max(factor_rows(num_rows, cores)) <= 256
    if cores > 3:
        assert max(factor_rows(num_rows, cores - 1)) > 256


@pytest.mark.parametrize("kwargs,message", [
    (dict(), "^give exactly one of max_params and compression$"),
    (dict(max_params=100, compression=10.0), "^give exactly one of max_params and compression$"),
    (dict(compression=0.0), "compression must be a finite number > 0, got 0.0"),
    (dict(compression=float("inf")), "compression must be a finite number > 0, got inf"),
    (dict(compression=float("nan")), "compression must be a finite number > 0, got nan"),
    (dict(max_params=0), "max_params must be an integer >= 1"),
    (dict(max_params=10), "at rank 1 has"),
])
def test_shape_for_budget_errors(kwargs, message):
    from ttgnn.shapes import shape_for_budget

    with pytest.raises(ValueError, match=message):
        shape_for_budget(169_343, 128, **kwargs)


@pytest.mark.parametrize("compression", ["10", True, [10]])
def test_shape_for_budget_names_a_compression_that_is_no_number(compression):
    # "10" met a raw "'>' not supported between str and int".
    from ttgnn.shapes import shape_for_budget

    with pytest.raises(TypeError, match="^compression must be a number, got "):
        shape_for_budget(169_343, 128, compression=compression)


def test_digits_of_an_index_batch_of_any_shape():
    # (*) indices -> (*, K) digits and back, for a 3-D batch (the lookup takes any index shape)
    # (no dimension of the batch has K entries, so only the last one can be taken for the digits)
    index = torch.arange(40).reshape(2, 5, 4)
    digits = index_to_digits(index, [2, 4, 5])
    assert digits.shape == (2, 5, 4, 3)
    assert digits[1, 4, 3].tolist() == [1, 3, 4]  # 39 = 1*20 + 3*5 + 4
    back = digits_to_index(digits, [2, 4, 5])
    assert back.dtype == torch.long and torch.equal(back, index)
    with pytest.raises(ValueError, match=r"^digits have 3 columns, row_shape has 2 factors$"):
        digits_to_index(digits, [8, 5])


@pytest.mark.parametrize("index, error, message", [
    ([-1], ValueError, r"^index -1 is outside \[0, 30\), the rows of row_shape \[5, 2, 3\]$"),  # was row 29
    ([0, 30], ValueError, r"^index 30 is outside \[0, 30\)"),  # was row 0
    ([2.7], TypeError, r"^index must hold integers, got dtype torch.float32$"),  # was row 2
    ([True], TypeError, r"^index must hold integers, got dtype torch.bool$"),
])
def test_index_to_digits_refuses_what_would_become_another_row(index, error, message):
    with pytest.raises(error, match=message):
        index_to_digits(torch.tensor(index), [5, 2, 3])
    assert index_to_digits(torch.tensor([29], dtype=torch.int16), [5, 2, 3]).tolist() == [[4, 1, 2]]
    with pytest.raises(TypeError, match=r"^index must be a tensor, got list$"):
        index_to_digits([1], [5, 2, 3])


@pytest.mark.parametrize("digits, error, message", [
    ([[0, 2, 0]], ValueError, r"^digit 2 in column 1 is outside \[0, 2\), row_shape \[5, 2, 3\]$"),  # was 6
    ([[0, 0, -1]], ValueError, r"^digit -1 in column 2 is outside \[0, 3\)"),  # was -1
    ([[0.0, 1.0, 2.5]], TypeError, r"^digits must hold integers, got dtype torch.float32$"),
])
def test_digits_to_index_refuses_digits_outside_their_factor(digits, error, message):
    with pytest.raises(error, match=message):
        digits_to_index(torch.tensor(digits), [5, 2, 3])
    with pytest.raises(ValueError, match=r"^digits have no columns, row_shape has 3 factors$"):
        digits_to_index(torch.tensor(4), [5, 2, 3])


def test_shape_for_budget_uses_the_given_shapes_and_rank_one_when_only_it_fits():
    from ttgnn.shapes import TTShape, shape_for_budget

    # shapes unlike the automatic ones ([6, 6, 6] and [4, 2, 2]) are kept
    shape = shape_for_budget(200, 16, compression=2.0, row_shape=[5, 5, 8], col_shape=[2, 2, 4])
    assert shape.row_shape == (5, 5, 8) and shape.col_shape == (2, 2, 4)
    # a budget that rank 1 fits and rank 2 does not
    one, two = TTShape.build(169_343, 128, 1), TTShape.build(169_343, 128, 2)
    assert shape_for_budget(169_343, 128, max_params=two.num_parameters - 1) == one
    # a compression below 1 is a budget larger than the dense table: the rank stops at its cap
    assert shape_for_budget(27, 8, compression=0.5, row_shape=[3, 3, 3], col_shape=[2, 2, 2]).ranks == (1, 6, 6, 1)


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_params=1), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters, more than the budget of 1 parameter$"),
    (dict(max_params=883), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters, more than the budget of 883 "
                           r"parameters$"),
    # the parameters a compression allows: 169,343 * 128 / 10**6 = 21.68
    (dict(compression=10**6), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters \(24,520.3x\), more than the "
                              r"21.7 that 1,000,000x compression allows$"),
    (dict(compression=30_000.5), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters \(24,520.3x\), more than "
                                 r"the 722.5 that 30,000.5x compression allows$"),
    (dict(compression=1e20), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters \(24,520.3x\), more than the "
                             r"2.2e-13 that 1e\+20x compression allows$"),
    (dict(compression=1e15), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters \(24,520.3x\), more than the "
                             r"2.2e-08 that 1e\+15x compression allows$"),
    # a budget of exactly one parameter (the table's 21,675,904 values), and just under
    (dict(compression=21_675_904), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters \(24,520.3x\), more than "
                                   r"the 1.0 that 21,675,904x compression allows$"),
    (dict(compression=21_675_904.5), r"^a 169,343 x 128 TT table at rank 1 has 884 parameters \(24,520.3x\), more "
                                     r"than the 1 that 2.16759e\+07x compression allows$"),
    (dict(max_params=2.5), r"^max_params must be an integer >= 1, got 2.5$"),
])
def test_shape_for_budget_messages_name_the_budget(kwargs, message):
    from ttgnn.shapes import shape_for_budget

    with pytest.raises(ValueError, match=message):
        shape_for_budget(169_343, 128, **kwargs)


def test_ttshape_default_rank_is_16_and_rank_messages_count_the_cores():
    assert TTShape.build(169_343, 128).ranks == (1, 16, 16, 1)
    with pytest.raises(ValueError, match=r"^ranks must have 2 inner values \(or 4 with ends of 1\) for 3 cores"):
        normalize_ranks([4, 4, 4], [55, 55, 56], [8, 4, 4])
    with pytest.raises(ValueError, match=r"^with 4 ranks the first and last must be 1, got \[2, 4, 8, 1\]$"):
        normalize_ranks([2, 4, 8, 1], [55, 55, 56], [8, 4, 4])
    with pytest.raises(TypeError, match=r"^ranks must be an int or a sequence of ints, got float$"):
        normalize_ranks(2.5, [55, 55, 56], [8, 4, 4])
    with pytest.raises(ValueError, match=r"^each rank must be >= 1, got 0$"):
        normalize_ranks([4, 0], [55, 55, 56], [8, 4, 4])


@pytest.mark.parametrize("call, message", [
    (lambda: factor_rows(0, 3), r"^num_rows must be >= 1, got 0$"),
    (lambda: factor_rows(10, 3.0), r"^num_cores must be an int, got float$"),
    (lambda: factor_dim(-2, 3), r"^dim must be >= 1, got -2$"),
    (lambda: TTShape.build(100, 8, 4, row_shape=[5, "5", 4]), r"^row_shape must contain ints, got \[5, '5', 4\]$"),
    (lambda: TTShape.build(100, 8, 4, col_shape=7), r"^col_shape must be a sequence of ints, got int$"),
])
def test_shape_helpers_name_the_argument(call, message):
    from ttgnn.shapes import auto_num_cores

    with pytest.raises((TypeError, ValueError), match=message):
        call()
    with pytest.raises(ValueError, match=r"^num_rows must be >= 1, got 0$"):
        auto_num_cores(0)


def test_ttshape_refuses_tables_past_int64_rows_and_int32_columns():
    # Row indices are int64 and the kernels count columns in int32: a larger table is refused when
    # it is built, not by the first lookup.
    big = 2**63 - 1
    with pytest.raises(ValueError, match=r"^num_embeddings must be at most 9,223,372,036,854,775,807 "
                                         r"\(row indices are int64\), got 9,223,372,036,854,775,808$"):
        TTShape.build(big + 1, 8)
    # The automatic shape of 2**63 - 1 rows pads past int64; a given shape whose product fits is kept.
    with pytest.raises(ValueError, match=r"^row_shape \[234, 235, .*\] covers 9,261,703,920,964,218,750 rows, "
                                         r"more than int64 row indices reach"):
        TTShape.build(big, 8, ranks=2)
    exact = [7, 7, 73, 127, 337, 92737, 649657]  # 2**63 - 1 = 7^2 * 73 * 127 * 337 * 92737 * 649657
    assert math.prod(exact) == big
    assert TTShape.build(big, 7, ranks=1, row_shape=exact, col_shape=[7, 1, 1, 1, 1, 1, 1]).num_rows_padded == big
    with pytest.raises(ValueError, match=r"covers 9,223,372,036,854,775,808 rows, more than int64"):
        TTShape.build(2**62, 8, ranks=1, row_shape=[512] * 7, col_shape=[8] + [1] * 6)
    with pytest.raises(ValueError, match=r"^embedding_dim must be at most 2,147,483,647 .*, got 2,147,483,648$"):
        TTShape.build(10, 2**31, ranks=1)
    assert TTShape.build(10, 2**31 - 1, ranks=1).dim == 2**31 - 1  # the largest allowed


def test_ttshape_names_a_bad_col_shape_given_with_a_row_shape():
    with pytest.raises(ValueError, match=r"^col_shape factors must be >= 1, got \[2, 0\]$"):
        TTShape.build(100, 8, row_shape=[10, 10], col_shape=[2, 0])
    with pytest.raises(TypeError, match=r"^col_shape must contain ints"):
        TTShape.build(100, 8, row_shape=[10, 10], col_shape=[2, 4.0])


def test_shape_for_budget_counts_a_numpy_row_count_without_overflow():
    # np.int32(50_000_000) * 128 overflowed int32: rank 55 (3,106x) instead of the largest at 1,000x, and
    # np.int32(2e9) a refusal quoting a negative budget
    import numpy as np

    from ttgnn.shapes import shape_for_budget

    for rows in (50_000_000, 2_000_000_000):
        assert shape_for_budget(np.int32(rows), 128, compression=1000) == shape_for_budget(rows, 128, compression=1000)
    with pytest.raises(TypeError, match=r"^num_embeddings must be an int, got NoneType$"):
        shape_for_budget(None, 128, compression=10)


def test_digit_helpers_take_every_integer_dtype_int64_holds_and_check_the_row_shape():
    assert index_to_digits(torch.tensor([9], dtype=torch.uint32), [2, 5]).tolist() == [[1, 4]]  # min_all failed
    assert index_to_digits(torch.tensor([9], dtype=torch.uint16), [2, 5]).tolist() == [[1, 4]]
    with pytest.raises(TypeError, match=r"^index must fit int64: uint64 is not supported"):
        index_to_digits(torch.tensor([9], dtype=torch.uint64), [2, 5])
    with pytest.raises(ValueError, match=r"^row_shape factors must be >= 1, got \[-2, -5\]$"):  # gave [[-1, -2]]
        index_to_digits(torch.tensor([3]), [-2, -5])
    with pytest.raises(TypeError, match=r"^row_shape must contain ints"):  # gave float digits
        index_to_digits(torch.tensor([3]), [2.0, 5.0])
    with pytest.raises(ValueError, match=r"covers 1,208,925,819,614,629,174,706,176 rows, more than int64"):
        digits_to_index(torch.tensor([[2**40 - 1, 2**40 - 1]]), [2**40, 2**40])  # gave tensor([-1])


def test_normalize_ranks_refuses_shapes_of_different_lengths():
    from ttgnn.shapes import normalize_ranks

    with pytest.raises(ValueError, match=r"^row_shape \[4, 5, 5\] and col_shape \[4, 4\] have 3 and 2 factors"):
        normalize_ranks(5, [4, 5, 5], [4, 4])  # gave [1, 5, 1, 1]: four ranks for three cores
    with pytest.raises(ValueError, match=r"^row_shape factors must be >= 1, got \[4, 0, 5\]$"):
        normalize_ranks(5, [4, 0, 5], [2, 2, 2])  # gave [1, 0, 0, 1]
    assert normalize_ranks(5, [4, 5, 5], [4, 4, 8]) == [1, 5, 5, 1]


def test_factor_dim_refuses_a_dim_past_int32_at_once():
    from ttgnn.shapes import factor_dim

    with pytest.raises(ValueError, match=r"^dim must be at most 2,147,483,647"):
        factor_dim(2**61 - 1, 2)  # a prime: trial division ran for minutes
    assert factor_dim(2**31 - 1, 2) == [2**31 - 1, 1]
