"""Shapes of a tensor-train (TT) embedding table, and the index <-> TT-digit convention.

A TT table with ``K`` cores stores an ``N x D`` matrix ``W``. The row count is covered by a
*row shape* ``(n_1, ..., n_K)`` with ``n_1 * ... * n_K >= N`` (rows past ``N`` are padding and
are never looked up), the embedding dimension is split exactly by a *column shape*
``(m_1, ..., m_K)`` with ``m_1 * ... * m_K == D``, and the *ranks* are ``(1, r_1, ..., r_{K-1}, 1)``.

Core ``k`` (``k = 1..K``, stored as ``cores[k-1]``) is a tensor of shape ``(n_k, r_{k-1}, m_k, r_k)``.
(0-based code, such as the kernels in ``kernels/``, writes the same core ``cores[k]`` as
``(n_k, r_k, m_k, r_{k+1})``.)

**Digit convention** (used everywhere in ttgnn: the reference op, the C++/CUDA kernels and the
partitioner). A row index ``i`` is written in mixed radix with the *first* core's digit most
significant::

    i = ((t_1 * n_2 + t_2) * n_3 + t_3) * ... * n_K + t_K,      0 <= t_k < n_k

and digit ``t_k`` selects slice ``cores[k-1][t_k]``. Columns use the same convention with the
column shape: ``j = (c_1 * m_2 + c_2) * ... + c_K``. Then::

    W[i, j] = G_1[t_1, 0, c_1, :] @ G_2[t_2, :, c_2, :] @ ... @ G_K[t_K, :, c_K, 0]

So rows that share their leading digits share the leading core slices; the hierarchical METIS
reordering in :mod:`ttgnn.partition` puts graph neighbours on such rows.
"""
from __future__ import annotations

import math
import numbers
import operator
from dataclasses import dataclass
from typing import Sequence, Union

import torch

__all__ = [
    "MIN_CORES",
    "MAX_CORES",
    "TTShape",
    "factor_rows",
    "auto_num_cores",
    "cores_of_shape",
    "shape_for_budget",
    "factor_dim",
    "normalize_ranks",
    "index_to_digits",
    "digits_to_index",
]

MIN_CORES = 2
#: At most this many cores: ``kMaxCores`` of the compiled kernels (``kernels/tt_lookup_math.h``).
MAX_CORES = 8
#: Row indices are int64 and the kernels count columns in int32: the most rows and columns a table has.
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
#: :func:`auto_num_cores` adds cores until every row factor is at most this.
AUTO_MAX_ROW_FACTOR = 256


def _int_or_none(value) -> int | None:
    """``value`` as a Python int, or ``None`` when it is not an integer: ints, NumPy integers and
    integer tensors of one element are taken (as ``nn.Embedding`` takes them, e.g.
    ``labels.max() + 1``); bools, floats and the rest are not. Callers word the error."""
    if isinstance(value, bool) or type(value).__name__ == "bool_" or (
            isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _as_int(name: str, value) -> int:
    """``value`` as a Python int (:func:`_int_or_none`), else ``TypeError`` naming ``name``."""
    as_int = _int_or_none(value)
    if as_int is None:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return as_int


def check_num_cores(num_cores: int) -> int:
    """``num_cores`` as an int, else ``ValueError`` unless it lies in [:data:`MIN_CORES`, :data:`MAX_CORES`]."""
    num_cores = _as_int("num_cores", num_cores)
    if not MIN_CORES <= num_cores <= MAX_CORES:
        raise ValueError(f"num_cores must be in [{MIN_CORES}, {MAX_CORES}], got {num_cores}")
    return num_cores


def cores_of_shape(name: str, factors: list[int], num_cores) -> int:
    """The core count of a given row or column shape (one factor per core), checked against
    ``num_cores`` when that is given too: ``ValueError`` when they disagree or the count is not in
    [:data:`MIN_CORES`, :data:`MAX_CORES`]."""
    count = len(factors)
    if num_cores is not None and _as_int("num_cores", num_cores) != count:
        raise ValueError(f"num_cores={num_cores} but {name} {factors} has {count} factor(s), one per core; "
                         f"give num_cores or a shape, or make them agree")
    if not MIN_CORES <= count <= MAX_CORES:
        raise ValueError(f"{name} {factors} has {count} factor(s), one per core; a TT table has "
                         f"{MIN_CORES} to {MAX_CORES} cores")
    return count


def _check_positive_int(name: str, value: int) -> int:
    value = _as_int(name, value)
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def factor_rows(num_rows: int, num_cores: int) -> list[int]:
    """The smallest balanced row shape whose product covers ``num_rows``.

    Factors differ by at most one and are in ascending order, e.g.
    ``factor_rows(169_343, 3) == [55, 55, 56]`` (product 169,400: 57 padding rows) and
    ``factor_rows(10**9, 3) == [1000, 1000, 1000]``. Works for any ``num_rows >= 1``, primes
    included.

    Args:
        num_rows (int): number of embedding rows ``N``.
        num_cores (int): number of TT cores ``K`` (2 to 8).
    """
    num_rows = _check_positive_int("num_rows", num_rows)
    num_cores = check_num_cores(num_cores)
    base = max(1, int(round(num_rows ** (1.0 / num_cores))))
    while base**num_cores < num_rows:
        base += 1
    while base > 1 and (base - 1) ** num_cores >= num_rows:
        base -= 1
    # Candidates: a factors of `base` and K-a factors of `base-1`; pick the smallest cover.
    best = [base] * num_cores
    for n_big in range(num_cores + 1):
        shape = [base - 1] * (num_cores - n_big) + [base] * n_big
        if min(shape) >= 1 and math.prod(shape) >= num_rows and math.prod(shape) < math.prod(best):
            best = shape
    return best


def auto_num_cores(num_rows: int) -> int:
    """The number of cores for ``num_rows`` rows when none is given: the smallest ``K`` from 3 to
    :data:`MAX_CORES` whose balanced row factors (:func:`factor_rows`) are all at most
    :data:`AUTO_MAX_ROW_FACTOR` (256), else :data:`MAX_CORES`.

    Three cores up to about 1.7 x 10^7 rows (ogbn-arxiv: ``[55, 55, 56]``; ogbn-products:
    ``[135, 135, 135]``), four up to about 4.3 x 10^9 (ogbn-papers100M: ``[102, 103, 103, 103]``;
    10^9 rows at rank 16: 1.5 MiB instead of 4.6 MiB with three), five up to about 1.1 x 10^12.
    Large row factors make the first and last cores, which grow with ``n_k``, dominate the
    parameter count. More cores at a fixed budget allow a larger rank (ogbn-arxiv at 1,000x: rank 8
    in three cores, 15 in five, 19 in six; :func:`shape_for_budget`); on ogbn-arxiv five cores
    lifted both models without label input, six did not, and with label input (the command line's
    defaults) five did not lift GAT, so the automatic count stays three there (docs/results.md).
    """
    num_rows = _check_positive_int("num_rows", num_rows)
    for num_cores in range(3, MAX_CORES):
        if max(factor_rows(num_rows, num_cores)) <= AUTO_MAX_ROW_FACTOR:
            return num_cores
    return MAX_CORES


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


def factor_dim(dim: int, num_cores: int) -> list[int]:
    """A balanced column shape whose product is exactly ``dim``, in descending order.

    Prime factors are dealt, largest first, to the currently smallest factor, e.g.
    ``factor_dim(128, 3) == [8, 4, 4]`` and ``factor_dim(100, 3) == [5, 5, 4]``. A prime ``dim``
    gives ``[dim, 1, ..., 1]``.

    Args:
        dim (int): embedding dimension ``D``, at most ``2**31 - 1``.
        num_cores (int): number of TT cores ``K`` (2 to 8).
    """
    dim = _check_positive_int("dim", dim)
    if dim > INT32_MAX:  # trial division of a large prime took minutes
        raise ValueError(f"dim must be at most {INT32_MAX:,} (the lookup kernels count columns in int32), "
                         f"got {dim:,}")
    num_cores = check_num_cores(num_cores)
    shape = [1] * num_cores
    for p in sorted(_prime_factors(dim), reverse=True):
        shape[shape.index(min(shape))] *= p
    return sorted(shape, reverse=True)


def normalize_ranks(
    ranks: Union[int, Sequence[int]], row_shape: Sequence[int], col_shape: Sequence[int]
) -> list[int]:
    """Full rank list ``[1, r_1, ..., r_{K-1}, 1]`` from an int or a list.

    ``ranks`` may be one int (every inner rank), ``K-1`` inner ranks, or ``K+1`` ranks whose ends
    are 1. Each inner rank is capped at ``min(prod_{i<=k} n_i m_i, prod_{i>k} n_i m_i)``, the
    largest rank a TT of this shape can use (a larger one adds parameters, not expressiveness).

    Raises:
        TypeError: ``ranks`` or a shape holds a non-int.
        ValueError: a rank or a factor below 1, the wrong number of ranks, or shapes of different
            lengths (one factor of each per core).
    """
    row_shape = _as_int_list("row_shape", row_shape)
    col_shape = _as_int_list("col_shape", col_shape)
    if len(row_shape) != len(col_shape):
        raise ValueError(f"row_shape {row_shape} and col_shape {col_shape} have {len(row_shape)} and "
                         f"{len(col_shape)} factors; both need one factor per core")
    num_cores = len(row_shape)
    if isinstance(ranks, str) or not isinstance(ranks, Sequence):
        rank = _int_or_none(ranks)
        if rank is None:
            raise TypeError(f"ranks must be an int or a sequence of ints, got {type(ranks).__name__}")
        inner = [rank] * (num_cores - 1)
    else:
        ranks = list(ranks)
        if len(ranks) == num_cores + 1:
            if ranks[0] != 1 or ranks[-1] != 1:
                raise ValueError(f"with {num_cores + 1} ranks the first and last must be 1, got {ranks}")
            inner = ranks[1:-1]
        elif len(ranks) == num_cores - 1:
            inner = ranks
        else:
            raise ValueError(
                f"ranks must have {num_cores - 1} inner values (or {num_cores + 1} with ends of 1) "
                f"for {num_cores} cores, got {len(ranks)}: {ranks}"
            )
    inner = [_check_positive_int("each rank", r) for r in inner]
    sizes = [n * m for n, m in zip(row_shape, col_shape)]
    capped = []
    for k, r in enumerate(inner, start=1):
        left, right = math.prod(sizes[:k]), math.prod(sizes[k:])
        capped.append(min(r, left, right))
    return [1, *capped, 1]


@dataclass(frozen=True)
class TTShape:
    """The complete shape of a TT table: rows, columns, ranks. No tensors are allocated.

    Use :meth:`TTShape.build` to factor automatically.

    Attributes:
        num_rows (int): ``N``, the rows users index (``<= prod(row_shape)``).
        row_shape (tuple[int, ...]): ``(n_1, ..., n_K)``.
        col_shape (tuple[int, ...]): ``(m_1, ..., m_K)``, product ``D``.
        ranks (tuple[int, ...]): ``(1, r_1, ..., r_{K-1}, 1)``.
    """

    num_rows: int
    row_shape: tuple[int, ...]
    col_shape: tuple[int, ...]
    ranks: tuple[int, ...]

    @classmethod
    def build(
        cls,
        num_rows: int,
        dim: int,
        ranks: Union[int, Sequence[int]] = 16,
        num_cores: int | None = None,
        row_shape: Sequence[int] | None = None,
        col_shape: Sequence[int] | None = None,
    ) -> "TTShape":
        """Factor ``num_rows x dim`` into a TT shape, validating any explicit shapes.

        ``num_cores`` is picked by :func:`auto_num_cores` when ``None``; a given shape has one factor per
        core, so with a shape ``num_cores`` may be left out and, when given, must agree with it.

        Raises:
            ValueError: a size below 1; more than ``2**63 - 1`` rows (also after padding to the row
                shape's product) or ``2**31 - 1`` columns; shapes that do not cover the table;
                ``num_cores`` that disagrees with a given shape's length.
        """
        num_rows = _check_positive_int("num_embeddings", num_rows)
        dim = _check_positive_int("embedding_dim", dim)
        if num_rows > INT64_MAX:
            raise ValueError(f"num_embeddings must be at most {INT64_MAX:,} (row indices are int64), got {num_rows:,}")
        if dim > INT32_MAX:
            raise ValueError(f"embedding_dim must be at most {INT32_MAX:,} (the lookup kernels count columns "
                             f"in int32), got {dim:,}")
        if row_shape is not None or col_shape is not None:
            # a given shape has one factor per core: its length is the core count
            name, factors = (("row_shape", row_shape) if row_shape is not None else ("col_shape", col_shape))
            factors = _as_int_list(name, factors)
            if row_shape is not None:
                row_shape = factors
            num_cores_given = cores_of_shape(name, factors, num_cores)
        else:
            num_cores_given = check_num_cores(auto_num_cores(num_rows) if num_cores is None else num_cores)
        if row_shape is None:
            row_shape = factor_rows(num_rows, num_cores_given)
        elif math.prod(row_shape) < num_rows:
            raise ValueError(
                f"row_shape {row_shape} covers {math.prod(row_shape)} rows, fewer than "
                f"num_embeddings={num_rows}; its product must be >= num_embeddings"
            )
        if col_shape is None:
            col_shape = factor_dim(dim, num_cores_given)
        else:
            col_shape = _as_int_list("col_shape", col_shape)
            if len(col_shape) != num_cores_given:
                raise ValueError(
                    f"col_shape {col_shape} has {len(col_shape)} factors but row_shape "
                    f"{row_shape} has {num_cores_given}; both need one factor per core"
                )
            if math.prod(col_shape) != dim:
                raise ValueError(
                    f"col_shape {col_shape} multiplies to {math.prod(col_shape)}, "
                    f"but embedding_dim is {dim}; the product must equal embedding_dim"
                )
        if math.prod(row_shape) > INT64_MAX:
            raise ValueError(
                f"row_shape {row_shape} covers {math.prod(row_shape):,} rows, more than int64 row indices "
                f"reach ({INT64_MAX:,}); give a row_shape whose product lies between num_embeddings and that"
            )
        full_ranks = normalize_ranks(ranks, row_shape, col_shape)
        return cls(num_rows, tuple(row_shape), tuple(col_shape), tuple(full_ranks))

    @property
    def num_cores(self) -> int:
        return len(self.row_shape)

    @property
    def dim(self) -> int:
        return math.prod(self.col_shape)

    @property
    def num_rows_padded(self) -> int:
        return math.prod(self.row_shape)

    @property
    def core_shapes(self) -> list[tuple[int, int, int, int]]:
        """Shape ``(n_k, r_{k-1}, m_k, r_k)`` of every core."""
        return [
            (n, self.ranks[k], m, self.ranks[k + 1])
            for k, (n, m) in enumerate(zip(self.row_shape, self.col_shape))
        ]

    @property
    def num_parameters(self) -> int:
        return sum(math.prod(s) for s in self.core_shapes)

    @property
    def compression_ratio(self) -> float:
        """Parameters of the dense ``N x D`` table divided by the TT parameters."""
        return self.num_rows * self.dim / self.num_parameters

    @property
    def compresses(self) -> bool:
        """Whether the cores hold fewer values than the dense ``N x D`` table (compression above 1x)."""
        return self.num_parameters < self.num_rows * self.dim


def _as_int_list(name: str, values: Sequence[int]) -> list[int]:
    try:
        values = [v for v in values]
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints, got {type(values).__name__}") from None
    ints = [_int_or_none(v) for v in values]
    if None in ints:
        raise TypeError(f"{name} must contain ints, got {values}")
    values = ints
    if any(v < 1 for v in values):
        raise ValueError(f"{name} factors must be >= 1, got {values}")
    return values


def _index_tensor(values, what: str) -> torch.Tensor:
    """``values`` as int64, else ``TypeError`` unless it is a tensor of an integer dtype that int64 holds
    (a float would be truncated; uint64 has values int64 has not)."""
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"{what} must be a tensor, got {type(values).__name__}")
    if values.dtype == torch.bool or values.is_floating_point() or values.is_complex():
        raise TypeError(f"{what} must hold integers, got dtype {values.dtype}")
    if values.dtype == torch.uint64:
        raise TypeError(f"{what} must fit int64: uint64 is not supported; convert with .long()")
    return values.long()


def _digit_row_shape(row_shape: Sequence[int]) -> list[int]:
    """``row_shape`` as a list of ints >= 1 whose product int64 holds (``TypeError`` / ``ValueError``)."""
    row_shape = _as_int_list("row_shape", row_shape)
    if math.prod(row_shape) > INT64_MAX:
        raise ValueError(f"row_shape {row_shape} covers {math.prod(row_shape):,} rows, more than int64 row "
                         f"indices reach ({INT64_MAX:,})")
    return row_shape


def _index_to_digits(index: torch.Tensor, row_shape: Sequence[int]) -> torch.Tensor:
    """:func:`index_to_digits` without its checks, for callers that have validated ``index``."""
    index = index.long()
    digits = []
    for n in reversed(row_shape):
        digits.append(index % n)
        index = index // n
    return torch.stack(digits[::-1], dim=-1)


def index_to_digits(index: torch.Tensor, row_shape: Sequence[int]) -> torch.Tensor:
    """TT digits of row indices (first digit most significant; see the module docstring).

    Args:
        index (LongTensor): row indices in ``[0, prod(row_shape))``, any shape ``(*)``, any
            integer dtype.
        row_shape (sequence of int): ``(n_1, ..., n_K)``.

    Returns:
        LongTensor of shape ``(*, K)``.

    Raises:
        TypeError: ``index`` is not a tensor of integers (or is uint64); ``row_shape`` holds a non-int.
        ValueError: an index outside ``[0, prod(row_shape))`` (it would wrap onto another row); a
            factor below 1, or a product past int64.
    """
    index = _index_tensor(index, "index")
    row_shape = _digit_row_shape(row_shape)
    total = math.prod(row_shape)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= total):
        bad = index[(index < 0) | (index >= total)].reshape(-1)[0]
        raise ValueError(f"index {int(bad)} is outside [0, {total}), the rows of row_shape {list(row_shape)}")
    return _index_to_digits(index, row_shape)


def digits_to_index(digits: torch.Tensor, row_shape: Sequence[int]) -> torch.Tensor:
    """Inverse of :func:`index_to_digits`: ``(*, K)`` digits to ``(*)`` row indices.

    Raises:
        TypeError: ``digits`` is not a tensor of integers (or is uint64); ``row_shape`` holds a non-int.
        ValueError: its last dimension is not ``K``, a digit ``t_k`` is outside ``[0, n_k)``, or
            ``row_shape`` has a factor below 1 or a product past int64.
    """
    digits = _index_tensor(digits, "digits")
    row_shape = _digit_row_shape(row_shape)
    if digits.dim() == 0 or digits.shape[-1] != len(row_shape):
        columns = digits.shape[-1] if digits.dim() else "no"
        raise ValueError(f"digits have {columns} columns, row_shape has {len(row_shape)} factors")
    index = torch.zeros(digits.shape[:-1], dtype=torch.long, device=digits.device)
    for k, n in enumerate(row_shape):
        digit = digits[..., k]
        if digit.numel() and (int(digit.min()) < 0 or int(digit.max()) >= n):
            bad = digit[(digit < 0) | (digit >= n)].reshape(-1)[0]
            raise ValueError(f"digit {int(bad)} in column {k} is outside [0, {n}), row_shape {list(row_shape)}")
        index = index * n + digit
    return index


def shape_for_budget(
    num_rows: int,
    dim: int,
    *,
    max_params: int | None = None,
    compression: float | None = None,
    num_cores: int | None = None,
    row_shape: Sequence[int] | None = None,
    col_shape: Sequence[int] | None = None,
) -> TTShape:
    """The TT shape with the largest rank whose parameter count fits a budget.

    Give exactly one budget: ``max_params`` (at most this many core parameters) or
    ``compression`` (at least this ratio of ``num_rows * dim`` to the parameter count). Shapes are
    factored as in :meth:`TTShape.build`; the rank is the same on every inner bond, and ranks past
    the shape's cap (where the parameter count stops growing) are not considered.

    Raises:
        ValueError: no budget or both, a non-positive budget, or one that even rank 1 exceeds.
        TypeError: ``compression`` is not a number.
    """
    if (max_params is None) == (compression is None):
        raise ValueError("give exactly one of max_params and compression")
    if compression is not None:
        if isinstance(compression, bool) or not isinstance(compression, numbers.Real):
            raise TypeError(f"compression must be a number, got {type(compression).__name__} {compression!r}")
        if not (compression > 0 and math.isfinite(compression)):
            raise ValueError(f"compression must be a finite number > 0, got {compression}")
    else:
        budget = _int_or_none(max_params)
        if budget is None or budget < 1:
            raise ValueError(f"max_params must be an integer >= 1, got {max_params!r}")
        max_params = budget

    def build(rank: int) -> TTShape:
        return TTShape.build(num_rows, dim, rank, num_cores, row_shape, col_shape)

    smallest = build(1)  # checks num_rows and dim first: a NumPy int32 count times dim overflowed
    num_rows, dim = smallest.num_rows, smallest.dim
    if compression is not None:
        budget = num_rows * dim / compression
    if smallest.num_parameters > budget:
        what = f"a {num_rows:,} x {dim} TT table at rank 1 has {smallest.num_parameters:,} parameters"
        if max_params is not None:
            raise ValueError(f"{what}, more than the budget of {max_params:,} "
                             f"parameter{'' if max_params == 1 else 's'}")
        allowed = f"{budget:,.1f}" if budget >= 1 else f"{budget:.2g}"
        raise ValueError(f"{what} ({smallest.compression_ratio:,.1f}x), more than the {allowed} that "
                         f"{_ratio(compression)}x compression allows")
    # The parameter count never falls as the rank grows (each bond is min(rank, its cap)): double
    # the rank past the budget, then bisect (one rank at a time took minutes at 10^12 rows).
    best, low, high = smallest, 1, 2
    while True:
        shape = build(high)
        if shape.num_parameters > budget:
            break
        best, low = shape, high
        if max(shape.ranks) < high:  # every bond is at its cap: more rank adds nothing
            return best
        high *= 2
    while high - low > 1:
        middle = (low + high) // 2
        shape = build(middle)
        if shape.num_parameters <= budget:
            best, low = shape, middle
        else:
            high = middle
    return best


def _ratio(value: float) -> str:
    """A compression ratio as a person writes it: ``1,000``, ``1,117.8``, ``0.5``, ``1e+20``."""
    return f"{value:,.0f}" if float(value).is_integer() and value < 1e15 else f"{value:,.6g}"
