"""Weight averaging: an exponential moving average of a model's weights over epochs.

``ttgnn train --weight-average H`` keeps, next to the weights being trained, their average over
about the last ``H`` epochs, and evaluates, selects and saves that average instead. After update
``t`` (1-based) the average is

    avg_t = d_t * avg_{t-1} + (1 - d_t) * w_t,   d_t = min(1 - 1/H, 1 - 1/t),

so over the first ``H`` updates it is the plain mean of the weights so far, and after that an
exponential moving average with decay ``1 - 1/H``. Floating-point entries of the state dict
(parameters and buffers such as batch-norm statistics) are averaged; the others (integer buffers,
node orders) are copied. Adam's state is untouched: training goes on from the trained weights.

A TT table is averaged core by core, so the averaged table is not the average of the tables (a
product of means is not a mean of products); near the end of training, where the cores move
little from epoch to epoch, the two are close.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn

from .config import check_int

__all__ = ["WeightAverage"]


class WeightAverage:
    """The running average of ``model``'s state dict, updated once per :meth:`update`.

    Args:
        model (nn.Module): the model whose weights are averaged; its current state is the start.
        horizon (int): ``H >= 1``, the number of recent updates the average spans (``1``: the
            average is the latest weights).

    Example::

        average = WeightAverage(model, horizon=10)
        for epoch in range(epochs):
            train_one_epoch(model)
            average.update(model)
            with average.swapped_into(model):
                evaluate(model)
    """

    def __init__(self, model: nn.Module, horizon: int) -> None:
        check_int("horizon", horizon, 1)
        self.horizon = horizon
        self.updates = 0
        self.state = {key: value.detach().clone() for key, value in model.state_dict().items()}

    def decay(self) -> float:
        """``d_t`` of the next update."""
        return min(1.0 - 1.0 / self.horizon, 1.0 - 1.0 / (self.updates + 1))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Fold ``model``'s current weights into the average."""
        decay = self.decay()
        for key, value in self._matching_state(model).items():
            avg = self.state[key]
            if avg.is_floating_point():
                avg.mul_(decay).add_(value.detach().to(avg.device), alpha=1.0 - decay)
            else:
                avg.copy_(value)
        self.updates += 1

    @contextlib.contextmanager
    def swapped_into(self, model: nn.Module) -> Iterator[nn.Module]:
        """Within the block ``model`` holds the averaged weights; its own are put back after (also
        on an error). The two are exchanged in place, one tensor at a time, so the swap needs
        memory for the largest single tensor, not for a copy of the model."""
        self._exchange(model)
        try:
            yield model
        finally:
            self._exchange(model)

    @torch.no_grad()
    def _exchange(self, model: nn.Module) -> None:
        seen = set()  # a tensor shared by two entries is exchanged once
        for key, value in self._matching_state(model).items():
            if value.data_ptr() in seen:
                continue
            seen.add(value.data_ptr())
            avg = self.state[key]
            held = value.clone()
            value.copy_(avg)
            avg.copy_(held)

    def _matching_state(self, model: nn.Module) -> dict:
        """``model.state_dict()``, checked to have the average's entries, of the average's shapes (a
        smaller one was broadcast into the average, and the swap back then failed half done)."""
        current = model.state_dict()
        if current.keys() != self.state.keys():
            raise ValueError("the model's state dict has other entries than the average's: "
                             f"{sorted(set(current) ^ set(self.state))}")
        shapes = {key: (tuple(current[key].shape), tuple(value.shape)) for key, value in self.state.items()
                  if current[key].shape != value.shape}
        if shapes:
            key, (got, kept) = next(iter(shapes.items()))
            raise ValueError(f"the model's {key!r} has shape {got}, the average's {kept}"
                             + (f" ({len(shapes)} entries differ)" if len(shapes) > 1 else ""))
        return current

    def state_dict(self) -> dict:
        """What a checkpoint keeps: ``{"horizon", "updates", "state"}`` (tensors on the CPU)."""
        return {"horizon": self.horizon, "updates": self.updates,
                "state": {key: value.detach().cpu().clone() for key, value in self.state.items()}}

    def load_state_dict(self, saved: dict) -> None:
        """Restore from :meth:`state_dict` (tensors go to where the average's are).

        Raises:
            ValueError: the saved average has another horizon or other entries.
        """
        if int(saved["horizon"]) != self.horizon:
            raise ValueError(f"the saved weight average spans {saved['horizon']} epochs, this run {self.horizon}")
        # An entry that is not averaged (not floating point: a TT table's row count, saved since
        # 2026-12-07) may be absent from an older checkpoint; it keeps the model's value.
        missing = {key for key, value in self.state.items() if key not in saved["state"] and value.is_floating_point()}
        differ = missing | (set(saved["state"]) - set(self.state))
        if differ:
            raise ValueError(f"the saved weight average has other entries than the model: {sorted(differ)}")
        for key, value in saved["state"].items():
            self.state[key].copy_(value)
        self.updates = int(saved["updates"])
