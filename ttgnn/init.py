"""Initialisers of TT cores.

* :func:`gaussian_`: TT-Rec's sampled Gaussian (`Yin et al., 2021 <https://arxiv.org/abs/2101.11714>`_):
  iid Gaussian cores whose std is calibrated so that the materialised table has a chosen std.
* :func:`orthogonal_`: TT-GNN's orthogonal init (`Yin et al., KDD 2022
  <https://arxiv.org/abs/2206.10581>`_): cores built so that the (padded) table ``W`` has
  orthonormal columns, ``W^T W = gain^2 I``.
* :func:`tt_svd`: TT-SVD (`Oseledets, 2011 <https://doi.org/10.1137/090752286>`_) of an existing
  dense table.

Core layout: ``(n_k, r_{k-1}, m_k, r_k)``, see :mod:`ttgnn.shapes`.
"""
from __future__ import annotations

import logging
import math
import numbers
from typing import Optional, Sequence

import numpy as np
import torch

from .shapes import TTShape

__all__ = ["gaussian_", "orthogonal_", "tt_svd", "gaussian_core_std"]

log = logging.getLogger(__name__)


def check_scale(name: str, value) -> float:
    """``value`` as a float; raise unless it is a finite real number > 0 (a std or gain; an
    infinite one would fill the cores with inf and every lookup with NaN).

    Python and NumPy numbers and one-element tensors (``table.std()``) are taken.

    Raises:
        TypeError: ``value`` is not a real number (a str, a bool, a complex, a larger tensor).
        ValueError: it is not finite, or not above 0.
    """
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not (value.is_complex() or value.dtype == torch.bool):
        value = value.item()
    elif isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range
        number = math.inf
    if not math.isfinite(number) or not number > 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def check_representable(value: float, entry_scales: Sequence[float], dtype: torch.dtype) -> None:
    """Raise ``ValueError`` when core or table entries of the typical sizes ``entry_scales`` (set by
    the scale ``value``) would overflow or fall below ``dtype``'s normal numbers (an inf table, or one
    of subnormals that lose their precision and flush to zero in products)."""
    info = torch.finfo(dtype)
    for scale in entry_scales:
        if not info.tiny <= scale <= info.max / 100:  # entries reach several times their scale: a margin
            raise ValueError(f"a table scale of {value:g} cannot be held in {dtype}: it makes entries of about "
                             f"{scale:.3g}, where {dtype}'s normal numbers span {info.tiny:.3g} to {info.max:.3g} "
                             f"(and entries reach several times their scale: at most {info.max / 100:.3g} is taken); "
                             "choose a scale (init_scale, std or gain) nearer 1, or a wider dtype")


def _sample_device(generator: Optional[torch.Generator]) -> torch.device:
    """Where random numbers are drawn: the generator's device (CPU without one).

    Drawing on the generator's device and copying to the cores' device lets a CPU generator
    initialise CUDA cores, with the same values as on the CPU for the same seed.
    """
    return generator.device if generator is not None else torch.device("cpu")


def check_generator(generator) -> None:
    """``TypeError`` unless ``generator`` is ``None`` or a :class:`torch.Generator` (a seed given in its
    place failed deep in the sampling with ``'int' object has no attribute 'device'``)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}; for a seed, "
                        "pass torch.Generator().manual_seed(seed)")


def gaussian_core_std(ranks: Sequence[int], std: float) -> float:
    """Std of iid core entries that gives table entries of std ``std``.

    An entry of ``W`` is a sum over ``r_1 * ... * r_{K-1}`` rank paths of a product of ``K``
    independent core entries, so ``Var(W_ij) = sigma^(2K) * prod(r_k)``.
    """
    num_cores = len(ranks) - 1
    square = std * std
    if 0.0 < square < math.inf:  # the closed form, to the last bit as seeded runs have drawn it
        return (square / math.prod(ranks)) ** (1.0 / (2 * num_cores))
    # in logarithms where std**2 over- or underflows a float (scales beyond about 1e+-154)
    log_prod = sum(math.log(r) for r in ranks)
    return math.exp((2.0 * math.log(std) - log_prod) / (2 * num_cores))


@torch.no_grad()
def gaussian_(
    cores: Sequence[torch.Tensor], std: float = 1.0, generator: Optional[torch.Generator] = None
) -> None:
    """Fill ``cores`` in place with iid ``N(0, sigma^2)`` so that table entries have std ``std``.

    Args:
        cores (sequence of Tensor): TT cores ``(n_k, r_{k-1}, m_k, r_k)``.
        std (float, optional): target std of the materialised table. (default: ``1.0``, the
            std of :class:`torch.nn.Embedding`'s default init)
        generator (torch.Generator, optional): random source, on any device (the values are
            drawn there and copied to the cores).

    Raises:
        TypeError: ``generator`` is not a :class:`torch.Generator`; ``std`` is not a number.
        ValueError: ``std`` is not a finite number > 0, or the cores do not chain.
    """
    std = check_scale("std", std)
    check_generator(generator)
    _check_cores(cores, "gaussian_")
    ranks = [c.shape[1] for c in cores] + [cores[-1].shape[3]]
    sigma = gaussian_core_std(ranks, std)
    check_representable(std, (std, sigma), cores[0].dtype)
    for core in cores:
        if generator is None or generator.device == core.device:
            core.normal_(0.0, sigma, generator=generator)
        else:
            sample = torch.empty(core.shape, dtype=core.dtype, device=generator.device)
            core.copy_(sample.normal_(0.0, sigma, generator=generator))


def _check_cores(cores, op: str) -> None:
    """``TypeError`` / ``ValueError`` unless ``cores`` is a sequence of TT cores that chain (as a lookup
    takes them: :func:`ttgnn.ops.check_lookup_inputs`): an empty list or one tensor failed with an
    ``IndexError``, and cores whose ranks do not chain were filled without a word."""
    from .ops import check_lookup_inputs  # local: ops is the lower layer

    if isinstance(cores, torch.Tensor) or not all(isinstance(core, torch.Tensor) for core in cores):
        raise TypeError(f"{op}: cores must be a sequence of tensors (TTNodeEmbedding.cores), got "
                        f"{type(cores).__name__}")
    if len(cores) == 0:
        raise ValueError(f"{op}: cores is empty: a TT has at least one core")
    try:
        check_lookup_inputs(list(cores), torch.empty(0, dtype=torch.long, device=cores[0].device), op)
    except RuntimeError as err:
        raise ValueError(str(err)) from None


def _random_orthonormal(rows: int, cols: int, generator, dtype, device) -> torch.Tensor:
    """A ``rows x cols`` matrix with orthonormal columns (Haar-distributed)."""
    gauss = torch.randn(rows, cols, generator=generator, dtype=torch.float64,
                        device=_sample_device(generator))
    q, r = torch.linalg.qr(gauss)
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    return q.to(dtype=dtype, device=device)


@torch.no_grad()
def orthogonal_(
    cores: Sequence[torch.Tensor], gain: float = 1.0, generator: Optional[torch.Generator] = None
) -> list[int]:
    """Fill ``cores`` so that the padded table has orthonormal columns: ``W^T W = gain^2 I``.

    Each core, unfolded as a ``(r_{k-1} n_k) x (m_k r_k)`` matrix, gets orthonormal columns, which
    makes every partial product, and so ``W``, column-orthonormal. Where a rank is larger than
    that unfolding allows (``r_k > r_{k-1} n_k / m_k``), the core uses an *effective* rank: the
    excess output channels of core ``k`` start at zero and the matching input channels of core
    ``k+1`` start random, so ``W`` is exactly orthonormal and no parameter is stuck: the zero
    channels get gradient from the first step, the random input channels they meet (zero
    gradient while those are zero) from the second. The orthonormality holds for the padded table of ``n_1 * ... * n_K`` rows: with
    padding, the first ``N`` rows alone are only approximately orthonormal.

    Args:
        cores (sequence of Tensor): TT cores ``(n_k, r_{k-1}, m_k, r_k)``.
        gain (float, optional): scale of the table. (default: ``1.0``)
        generator (torch.Generator, optional): random source.

    Returns:
        The effective ranks ``[1, r'_1, ..., r'_{K-1}, 1]``.

    Raises:
        ValueError: when ``gain`` is not a finite number > 0, or when no column-orthonormal table of
            this shape exists in this construction (a core's ``r'_{k-1} n_k < m_k``; in particular
            whenever ``prod(n) < D``).
        TypeError: ``generator`` is not a :class:`torch.Generator`.
    """
    gain = check_scale("gain", gain)
    check_generator(generator)
    _check_cores(cores, "orthogonal_")
    # The table's entries are about gain / sqrt(rows); the last core's, at most gain / sqrt(n_K).
    check_representable(gain, (gain / math.sqrt(math.prod(c.shape[0] for c in cores)),
                                       gain / math.sqrt(cores[-1].shape[0])), cores[0].dtype)
    effective = [1]
    num_cores = len(cores)
    for k, core in enumerate(cores):
        n, r_in, m, r_out = core.shape
        rows = effective[k] * n
        eff_out = 1 if k == num_cores - 1 else min(r_out, rows // m)
        if eff_out < 1 or rows < m * eff_out:
            raise ValueError(
                f"orthogonal init impossible for core {k} of shape {tuple(core.shape)}: its "
                f"unfolding has {rows} rows but needs at least {m * max(eff_out, 1)} "
                f"(m_k * r_k); use init='gaussian' or a row shape with larger leading factors"
            )
        effective.append(eff_out)
        q = _random_orthonormal(rows, m * eff_out, generator, core.dtype, core.device)
        block = q.reshape(effective[k], n, m, eff_out).permute(1, 0, 2, 3)
        core.zero_()
        core[:, : effective[k], :, :eff_out] = block
        if effective[k] < r_in:
            # Input channels that the previous core leaves at zero: random, so gradients flow.
            extra = torch.randn(n, r_in - effective[k], m, r_out, generator=generator,
                                dtype=torch.float64, device=_sample_device(generator))
            core[:, effective[k] :, :, :] = (extra / math.sqrt(rows)).to(core.dtype)
    if gain != 1.0:
        cores[-1].mul_(gain)
    if effective != [c.shape[1] for c in cores] + [1]:
        log.info("orthogonal init: effective ranks %s (requested %s)", effective, [c.shape[1] for c in cores] + [1])
    return effective


@torch.no_grad()
def tt_svd(weight: torch.Tensor, shape: TTShape) -> tuple[list[torch.Tensor], float]:
    """TT-SVD of a dense ``N x D`` table into cores of ``shape`` (ranks as upper bounds).

    The table is zero-padded to ``prod(row_shape)`` rows, reshaped to ``(n_1, m_1, ..., n_K, m_K)``
    and split by successive truncated SVDs (in float64). Exact when the ranks are full (the caps of
    :func:`ttgnn.shapes.normalize_ranks`); otherwise quasi-optimal, with an error that shrinks as
    the ranks grow.

    Args:
        weight (Tensor): ``(N, D)`` with ``N == shape.num_rows`` and ``D == shape.dim``.
        shape (TTShape): the target shape.

    Returns:
        ``(cores, relative_error)`` where the cores have ``weight``'s dtype and device and
        ``relative_error = ||W - W_tt||_F / ||W||_F`` over the ``N`` real rows.
    """
    if weight.dim() != 2 or tuple(weight.shape) != (shape.num_rows, shape.dim):
        raise ValueError(f"weight must have shape ({shape.num_rows}, {shape.dim}), got {tuple(weight.shape)}")
    if not weight.is_floating_point():
        raise TypeError(f"weight must be a floating-point tensor, got {weight.dtype}")
    if weight.device.type == "meta":
        raise ValueError("weight is on the meta device (a shape, no values): TT-SVD needs the table's values")
    finite = torch.isfinite(weight)
    if not bool(finite.all()):
        raise ValueError(f"weight has {int((~finite).sum())} non-finite value(s) (NaN or inf); TT-SVD needs a "
                         "finite table")
    k = shape.num_cores
    dense = torch.zeros(shape.num_rows_padded, shape.dim, dtype=torch.float64, device=weight.device)
    dense[: shape.num_rows] = weight.detach().to(torch.float64)
    tensor = dense.reshape(*shape.row_shape, *shape.col_shape)
    interleave = [axis for pair in zip(range(k), range(k, 2 * k)) for axis in pair]
    rest = tensor.permute(*interleave).contiguous()
    cores = []
    r_prev = 1
    for i, (n, m) in enumerate(zip(shape.row_shape, shape.col_shape)):
        unfold = rest.reshape(r_prev * n * m, -1)
        if i == k - 1:
            core = unfold.reshape(r_prev, n, m, 1)
        else:
            u, s, vh = torch.linalg.svd(unfold, full_matrices=False)
            r = min(shape.ranks[i + 1], s.shape[0])
            core = u[:, :r].reshape(r_prev, n, m, r)
            rest = s[:r, None] * vh[:r]
            if r < shape.ranks[i + 1]:  # the table's true rank is lower: pad with zeros
                pad = shape.ranks[i + 1] - r
                core = torch.cat([core, core.new_zeros(r_prev, n, m, pad)], dim=3)
                rest = torch.cat([rest, rest.new_zeros(pad, rest.shape[1])], dim=0)
                r = shape.ranks[i + 1]
            r_prev = r
        cores.append(core.permute(1, 0, 2, 3).contiguous())
    from .ops import tt_lookup_reference  # local: ops is the lower layer, init only uses it here

    approx = tt_lookup_reference(cores, torch.arange(shape.num_rows, device=weight.device))
    norm = torch.linalg.norm(dense[: shape.num_rows])
    error = torch.linalg.norm(approx - dense[: shape.num_rows]) / norm if norm > 0 else torch.tensor(0.0)
    return _in_dtype(cores, weight.dtype), float(error)


def _in_dtype(cores: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    """The float64 cores of :func:`tt_svd` in ``dtype``. TT-SVD leaves the table's whole norm in the last
    core (the others are orthonormal), which can pass a narrow dtype's range although every table entry
    fits (float16: a table of entries near 5,000 gave an inf core): there the cores are rebalanced first,
    each scaled to the geometric mean of their norms (the product, so the table, unchanged)."""
    limit = torch.finfo(dtype).max / 100  # entries of products reach several times a core's: a margin
    if max(float(c.abs().max()) for c in cores) > limit:
        norms = [float(torch.linalg.norm(c)) for c in cores]
        if all(n > 0 for n in norms):
            mean = math.exp(sum(math.log(n) for n in norms) / len(norms))
            cores = [c * (mean / n) for c, n in zip(cores, norms)]
        largest = max(float(c.abs().max()) for c in cores)
        if largest > limit:
            raise ValueError(f"the TT cores of this table cannot be held in {dtype}: their entries reach "
                             f"{largest:.3g} even with the norm spread over the cores (at most {limit:.3g} is taken); "
                             "compress the table in float32, or scale it down first")
    return [c.to(dtype) for c in cores]
