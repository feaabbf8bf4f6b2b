"""Sampled mini-batches in the form a GNN backend takes, on the device it runs on."""
from __future__ import annotations

import torch

__all__ = ["device_batches"]


def device_batches(loader, gnn, device: torch.device):
    """``(input_nodes, output_nodes, blocks)`` of each batch of a DGL ``loader``, ready for ``gnn`` on ``device``.

    For the ``"torch"`` backend each DGL block becomes index tensors (:class:`~ttgnn.layers.SparseGraph`)
    on the CPU; on a GPU they and the node ids are pinned and copied with ``non_blocking=True``, so
    the copy is queued behind the previous step's kernels and the CPU goes on to sample the next
    batch while the GPU computes. For ``"dgl"`` the blocks are as the loader gives them. Node ids
    are ``int64``.
    """
    from .layers import SparseGraph

    pin = device.type == "cuda"

    def to_device(tensor):
        return (tensor.pin_memory() if pin else tensor).to(device, non_blocking=pin)

    for input_nodes, output_nodes, blocks in loader:
        input_nodes, output_nodes = input_nodes.long(), output_nodes.long()
        if gnn.backend == "torch":
            blocks = [SparseGraph.from_dgl(block) for block in blocks]
            if pin:
                blocks = [block.pin_memory() for block in blocks]
            blocks = [block.to(device, non_blocking=pin) for block in blocks]
            input_nodes, output_nodes = to_device(input_nodes), to_device(output_nodes)
        yield input_nodes, output_nodes, blocks
