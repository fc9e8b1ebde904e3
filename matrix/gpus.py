"""Which GPU an xdist worker sees: on a machine with several, each worker is pinned to one
(round robin over ``--matrix-gpus`` or ``CUDA_VISIBLE_DEVICES``) before anything imports torch.
"""

from __future__ import annotations

import os


def gpu_for_worker(worker_id: str | None, gpus: str | None) -> str | None:
    """The GPU an xdist worker (``gw3``) should see, or None to leave the environment alone."""
    if not worker_id or not worker_id.startswith("gw") or not gpus:
        return None
    ids = [g.strip() for g in gpus.split(",") if g.strip()]
    if len(ids) < 2:
        return None
    return ids[int(worker_id[2:]) % len(ids)]


def pin_worker_gpu(gpus: str | None) -> None:
    """In an xdist worker, sets ``CUDA_VISIBLE_DEVICES`` to the worker's one GPU of ``gpus``
    (default: the ``CUDA_VISIBLE_DEVICES`` it was given)."""
    listed = gpus or os.environ.get("CUDA_VISIBLE_DEVICES")
    pinned = gpu_for_worker(os.environ.get("PYTEST_XDIST_WORKER"), listed)
    if pinned is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = pinned
