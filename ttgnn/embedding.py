"""TTNodeEmbedding: a drop-in, tensor-train compressed replacement for :class:`torch.nn.Embedding`."""
from __future__ import annotations

import logging
from typing import Optional, Sequence, Union

import torch
from torch import nn

from . import init as tt_init
from ._ext import log_backends
from .ops import check_in_range, kernel_applies, lookup_checked_rows, tt_dense_table
from .shapes import TTShape

__all__ = ["TTNodeEmbedding"]

log = logging.getLogger(__name__)

_INITS = ("gaussian", "ortho")


class TTNodeEmbedding(nn.Module):
    r"""An ``N x D`` embedding table stored as a tensor train of ``K`` small cores.

    Row ``i`` of the table is the product of one slice of every core (see :mod:`ttgnn.shapes` for
    the digit convention), so a lookup computes only the rows it is asked for and the full table
    is never allocated: a 10^9 x 128 table at rank 16 (four cores) has about 380,000 parameters.

    Args:
        num_embeddings (int): number of rows ``N`` (any positive int; the row shape's product may
            exceed it, and the extra rows are padding that is never looked up).
        embedding_dim (int): ``D``.
        ranks (int or sequence of int, optional): TT ranks, one int for all or the ``K-1`` inner
            ranks; capped at the largest useful rank. (default: ``16``)
        num_cores (int, optional): ``K``, 2 to 8; when a shape is given too, it must have ``K``
            factors. (default: the given shape's length, else from ``N``,
            :func:`ttgnn.shapes.auto_num_cores`: 3 up to about 1.7 x 10^7 rows, then 4)
        row_shape (sequence of int, optional): ``(n_1, ..., n_K)``, product ``>= N``.
            (default: the smallest balanced cover, :func:`ttgnn.shapes.factor_rows`)
        col_shape (sequence of int, optional): ``(m_1, ..., m_K)``, product ``== D``.
            (default: balanced, :func:`ttgnn.shapes.factor_dim`)
        init (str, optional): ``"gaussian"`` (TT-Rec: table entries ``~ std init_scale``) or
            ``"ortho"`` (TT-GNN: ``W^T W = init_scale^2 I`` on the padded table).
            (default: ``"gaussian"``)
        init_scale (float, optional): the table's scale for ``init``, a finite number > 0.
            (default: ``1.0``)
        node_order (LongTensor, optional): ``(N,)`` map from index (node id) to TT row, e.g.
            :attr:`ttgnn.partition.NodeOrder.perm`; must be injective into
            ``[0, prod(row_shape))``. Stored as the buffer ``node_order``. (default: identity)
        generator (torch.Generator, optional): random source for the init.
        dtype (torch.dtype, optional): parameter dtype, a floating-point one.
            (default: ``torch.get_default_dtype()``)
        device (torch.device, optional): parameter device.

    Shapes:
        - **input:** integer tensor of any shape ``(*)`` with values in ``[0, N)``.
        - **output:** ``(*, D)``.

    Example::

        >>> emb = TTNodeEmbedding(169_343, 128, ranks=16)
        >>> emb.row_shape, emb.col_shape, emb.num_parameters
        ((55, 55, 56), (8, 4, 4), 66944)
        >>> emb(torch.tensor([[0, 5], [7, 169_342]])).shape
        torch.Size([2, 2, 128])
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        ranks: Union[int, Sequence[int]] = 16,
        num_cores: Optional[int] = None,
        row_shape: Optional[Sequence[int]] = None,
        col_shape: Optional[Sequence[int]] = None,
        init: str = "gaussian",
        init_scale: float = 1.0,
        node_order: Optional[torch.Tensor] = None,
        generator: Optional[torch.Generator] = None,
        dtype: Optional[torch.dtype] = None,
        device: Optional[Union[torch.device, str]] = None,
    ) -> None:
        super().__init__()
        log_backends()  # once per process: which implementation the lookups get (a refused run never gets here)
        #: Without a compiled kernel, lookups of at least this fraction of ``N`` rows contract the
        #: whole table (:func:`ttgnn.ops.tt_dense_table`) and gather, instead of gathering each row's slices.
        self.dense_fraction = 0.25
        if init not in _INITS:
            raise ValueError(f"init must be one of {_INITS}, got {init!r}")
        init_scale = tt_init.check_scale("init_scale", init_scale)
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype must be a torch.dtype such as torch.float32, got {dtype!r}")
        tt_init.check_generator(generator)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point dtype (the cores are trained), got {dtype}")
        self.shape = TTShape.build(num_embeddings, embedding_dim, ranks, num_cores, row_shape, col_shape)
        if not self.shape.compresses:
            log.warning("this TT table has %s parameters, no fewer than the dense %s x %s table it stands for "
                        "(compression %.2fx): lower ranks compress it", f"{self.shape.num_parameters:,}",
                        f"{self.shape.num_rows:,}", f"{self.shape.dim:,}", self.shape.compression_ratio)
        factory = {"dtype": dtype, "device": device}
        self.cores = nn.ParameterList(
            nn.Parameter(torch.empty(s, **factory)) for s in self.shape.core_shapes
        )
        self.init = init
        self.init_scale = init_scale
        self.register_buffer("node_order", None)
        if node_order is not None:
            self.set_node_order(node_order)
        self.reset_parameters(generator)

    # ------------------------------------------------------------------ properties
    @property
    def num_embeddings(self) -> int:
        return self.shape.num_rows

    @property
    def embedding_dim(self) -> int:
        return self.shape.dim

    @property
    def row_shape(self) -> tuple[int, ...]:
        return self.shape.row_shape

    @property
    def col_shape(self) -> tuple[int, ...]:
        return self.shape.col_shape

    @property
    def ranks(self) -> tuple[int, ...]:
        return self.shape.ranks

    @property
    def num_parameters(self) -> int:
        """Number of scalars in the cores (the node order buffer is not counted)."""
        return self.shape.num_parameters

    @property
    def compression_ratio(self) -> float:
        """``N * D`` divided by :attr:`num_parameters`."""
        return self.shape.compression_ratio

    # ------------------------------------------------------------------ init
    def reset_parameters(self, generator: Optional[torch.Generator] = None) -> None:
        """Re-initialise the cores with :attr:`init` and :attr:`init_scale`.

        Raises:
            TypeError: ``generator`` is not a :class:`torch.Generator`.
        """
        tt_init.check_generator(generator)
        cores = list(self.cores)
        if hasattr(self, "svd_relative_error"):  # the cores no longer come from from_pretrained's table
            del self.svd_relative_error
        if self.init == "gaussian":
            tt_init.gaussian_(cores, std=self.init_scale, generator=generator)
        else:
            tt_init.orthogonal_(cores, gain=self.init_scale, generator=generator)

    def set_node_order(self, node_order: Optional[torch.Tensor]) -> None:
        """Set the map from node id to TT row (``None`` for the identity); validates it.

        Refused on a module whose cores are on the ``meta`` device: a meta tensor holds no values,
        so the order would be lost (and ``to_empty`` would fill it with garbage). Set it after
        ``to_empty(device=...)``.
        """
        if node_order is not None and self.cores[0].device.type == "meta":
            raise ValueError("a node order cannot be kept on the meta device (it holds no values): build the "
                             "module without one, then call set_node_order after to_empty(device=...)")
        self.node_order = None if node_order is None else self._checked_order(node_order).to(self.cores[0].device)

    def _checked_order(self, node_order) -> torch.Tensor:
        """``node_order`` as int64 after checking dtype, shape, range and injectivity (errors name the problem)."""
        try:
            node_order = torch.as_tensor(node_order)
        except (TypeError, ValueError, RuntimeError):  # a string, ragged lists, ...: torch's words say little
            raise TypeError(f"node_order must be an integer tensor (or array) of shape ({self.num_embeddings},), "
                            f"got {type(node_order).__name__}") from None
        if node_order.dtype in (torch.bool,) or node_order.is_floating_point() or node_order.is_complex():
            raise TypeError(f"node_order must be an integer tensor, got {node_order.dtype}")
        if tuple(node_order.shape) != (self.num_embeddings,):
            raise ValueError(
                f"node_order must have shape ({self.num_embeddings},), got {tuple(node_order.shape)}"
            )
        if node_order.device.type == "meta":
            raise ValueError("node_order is on the meta device (a shape, no values): give the order's values")
        node_order = node_order.long()
        lo, hi = int(node_order.min()), int(node_order.max())
        if lo < 0 or hi >= self.shape.num_rows_padded:
            raise ValueError(
                f"node_order values must lie in [0, {self.shape.num_rows_padded}), got range [{lo}, {hi}]"
            )
        if torch.unique(node_order).numel() != node_order.numel():
            raise ValueError("node_order must be injective: two nodes map to the same TT row")
        return node_order

    @classmethod
    def from_pretrained(
        cls,
        weight: torch.Tensor,
        ranks: Union[int, Sequence[int]] = 16,
        *,
        num_cores: Optional[int] = None,
        row_shape: Optional[Sequence[int]] = None,
        col_shape: Optional[Sequence[int]] = None,
        node_order: Optional[torch.Tensor] = None,
        freeze: bool = True,
    ) -> "TTNodeEmbedding":
        """Compress an existing ``(N, D)`` table by TT-SVD.

        Exact (up to float rounding) when the ranks are full; the relative Frobenius error over
        the ``N`` rows is logged and kept in :attr:`svd_relative_error`. Like
        :meth:`torch.nn.Embedding.from_pretrained`, the cores are frozen unless ``freeze=False``.

        Args:
            weight (Tensor): ``(N, D)`` floating-point table.
            ranks, num_cores, row_shape, col_shape, node_order: as in the constructor.
            freeze (bool, optional): set ``requires_grad=False`` on the cores. (default: ``True``)
        """
        if not isinstance(weight, torch.Tensor):
            raise TypeError(f"weight must be a torch.Tensor (torch.as_tensor makes one of an array), "
                            f"got {type(weight).__name__}")
        if weight.dim() != 2:
            raise ValueError(f"weight must be a 2-D tensor, got {weight.shape}")
        if not weight.is_floating_point():
            raise TypeError(f"weight must be a floating-point tensor (the cores take its dtype), got {weight.dtype}")
        if weight.device.type == "meta":
            raise ValueError("weight is on the meta device (a shape, no values): TT-SVD needs the table's values")
        weight = weight.detach()  # a trained table: its autograd graph is not followed into the SVD
        num_rows, dim = weight.shape
        with torch.random.fork_rng(devices=[]):  # the constructor's random cores are replaced: draws no one's
            module = cls(
                num_rows, dim, ranks=ranks, num_cores=num_cores, row_shape=row_shape, col_shape=col_shape,
                node_order=node_order, dtype=weight.dtype, device=weight.device,
            )
        table = weight
        shape = module.shape
        if module.node_order is not None:
            # Lay the table out in TT-row order (padding rows zero), then decompose all of it.
            table = weight.new_zeros(shape.num_rows_padded, dim)
            table[module.node_order] = weight
            shape = TTShape(shape.num_rows_padded, shape.row_shape, shape.col_shape, shape.ranks)
        cores, _ = tt_init.tt_svd(table, shape)
        with torch.no_grad():
            for param, core in zip(module.cores, cores):
                param.copy_(core)
                param.requires_grad_(not freeze)
        error = torch.linalg.norm(module.full_weight().detach().double() - weight.double())
        norm = torch.linalg.norm(weight.double())
        module.svd_relative_error = float(error / norm) if norm > 0 else 0.0
        log.info("TT-SVD of a %dx%d table at ranks %s: relative error %.3e",
                 num_rows, dim, list(shape.ranks), module.svd_relative_error)
        return module

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        # N is not in the cores' shapes (tables of 950 and 1,000 rows can share a row shape): saved so
        # that loading into a table of another N fails, as nn.Embedding's weight shape makes it fail.
        destination[prefix + "num_embeddings"] = torch.tensor(self.num_embeddings, dtype=torch.long)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # A state dict saved before the row count was recorded (2026-12-07) loads as before.
        rows_key = prefix + "num_embeddings"
        saved_rows = state_dict.get(rows_key)
        problem = None
        if saved_rows is not None and not (torch.is_tensor(saved_rows) and saved_rows.dim() == 0
                                           and not saved_rows.is_floating_point()):
            shape = tuple(saved_rows.shape) if torch.is_tensor(saved_rows) else type(saved_rows).__name__
            problem = f"expected the table's row count, an integer scalar tensor, got {shape}"
        elif saved_rows is not None and saved_rows.device.type != "meta" and int(saved_rows) != self.num_embeddings:
            problem = (f"the checkpoint's table has {int(saved_rows):,} rows, this TTNodeEmbedding "
                       f"{self.num_embeddings:,} (its cores' shapes can match: tables of other row counts share "
                       "row shapes)")
        if problem is not None:
            # raised here, not added to error_msgs: torch would still load the cores (a child module)
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\tsize mismatch for "
                               f"{rows_key}: {problem}")
        # A saved node order is checked like the constructor's, whether or not this module has one,
        # and loads into a module built without one.
        key = prefix + "node_order"
        if state_dict.get(key) is not None:
            order = self._checked_order(state_dict[key])
            if self.node_order is None:
                if self.cores[0].device.type == "meta" and not local_metadata.get("assign_to_params_buffers"):
                    # copied into a meta buffer it would be lost, and to_empty() leaves garbage rows there
                    raise ValueError("a node order cannot be loaded into a TTNodeEmbedding on the meta device (it "
                                     "holds no values): load with load_state_dict(..., assign=True), or move the "
                                     "module to a real device (to_empty) before loading")
                self.node_order = order.to(self.cores[0].device)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        if rows_key in unexpected_keys:  # not a parameter or buffer: read above
            unexpected_keys.remove(rows_key)
        if hasattr(self, "svd_relative_error"):  # the cores are the state dict's now, not from_pretrained's table
            del self.svd_relative_error

    # ------------------------------------------------------------------ lookup
    def _rows_of(self, indices: torch.Tensor) -> torch.Tensor:
        """Validate ``indices`` and map them to flat TT rows, ``(numel,)`` int64."""
        if not isinstance(indices, torch.Tensor):
            raise TypeError(f"indices must be a torch.Tensor, got {type(indices).__name__}")
        if indices.dtype == torch.bool or indices.is_floating_point() or indices.is_complex():
            raise TypeError(f"indices must be an integer tensor (of any integer dtype), got {indices.dtype}")
        if indices.dtype == torch.uint64:  # values from 2**63 up have no int64 to become
            raise TypeError("indices must fit int64: uint64 is not supported; convert with .long()")
        flat = indices.reshape(-1)
        if flat.device.type == "meta" and self.cores[0].device.type != "meta":
            raise ValueError(f"indices are on the meta device (shapes, no values) but the cores are on "
                             f"{self.cores[0].device}: give real indices, or move the module to 'meta' as well")
        check_in_range(flat, self.num_embeddings, "index", "TTNodeEmbedding")
        flat = flat.to(device=self.cores[0].device, dtype=torch.long)
        if self.node_order is not None:
            flat = self.node_order[flat]
        return flat

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        rows = self._rows_of(indices)
        cores = list(self.cores)
        if rows.numel() >= self.dense_fraction * self.shape.num_rows_padded and not kernel_applies(cores, rows):
            out = tt_dense_table(cores)[rows]  # most rows wanted and no kernel: contract all of them
        else:
            out = lookup_checked_rows(cores, rows)  # _rows_of checked them
        return out.reshape(*indices.shape, self.embedding_dim)

    def all_rows(self) -> torch.Tensor:
        """Every node's row, ``(N, D)`` (row ``v`` is node ``v``'s embedding), differentiable.

        Computed by the compiled kernel when it applies (each distinct prefix once), else by dense
        contraction of the cores (:func:`ttgnn.ops.tt_dense_table`) and a gather by node order.
        """
        nodes = torch.arange(self.num_embeddings, device=self.cores[0].device)
        return self(nodes)

    def __getattr__(self, name: str):
        # Every lookup reaches .cores through here (nn.Module keeps submodules out of __dict__): the
        # common path is one comparison and a direct call, without building a super() object.
        if name != "weight":
            return nn.Module.__getattr__(self, name)
        try:  # a weight registered on the module (a subclass's parameter or buffer) is found
            return nn.Module.__getattr__(self, name)
        except AttributeError:
            pass
        # code written for nn.Embedding reaches for .weight: say why there is none
        raise AttributeError(
            "TTNodeEmbedding has no .weight: the (N, D) table is never stored, only its TT cores "
            "(.cores); full_weight() materialises it (N * D values), forward(indices) computes the rows asked for")

    def full_weight(self) -> torch.Tensor:
        """The materialised ``(N, D)`` table (row ``v`` is node ``v``'s embedding).

        Allocates ``N * D`` values: meant for small tables, tests and export.
        """
        return self.all_rows()

    def _init_repr(self) -> str:
        if hasattr(self, "svd_relative_error"):  # from_pretrained: the cores came from a table
            return f"from_pretrained (TT-SVD, relative error {self.svd_relative_error:.2e})"
        return f"init={self.init!r}"

    def extra_repr(self) -> str:
        order = ", node_order" if self.node_order is not None else ""
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, row_shape={list(self.row_shape)}, "
            f"col_shape={list(self.col_shape)}, ranks={list(self.ranks)}, {self._init_repr()}, "
            f"params={self.num_parameters}, compression={self.compression_ratio:.1f}x{order}"
        )
