"""Supervised-learning utilities: held-out splits by game and move-prediction metrics.

Shared by the curriculum's imitation stage (paper IV.C: learn the mentor's
moves) and supervised move prediction (Maddison et al. 2015, whose metric is
the top-n accuracy on held-out *games*: positions of one game are strongly
correlated, so a split by position would leak).

Ranks and ties. The rank of the target move is the number of moves the net
scores above it, plus the number it scores equally that have a smaller action
index: the order of a stable sort by descending logit, so ties are broken
toward the lower action index, deterministically. The target is in the top n
iff its rank < n. With a legal mask, illegal moves are dropped from the
ranking (their logits count as -inf) and an illegal target is never correct.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.nets.networks import Networks


def split_by_game(game_id, held_out_fraction: float, key: jax.Array):
    """Split positions into training and held-out sets with whole games on one side.

    Args:
      game_id: int[M], the game each position comes from (any integer ids).
      held_out_fraction: in (0, 1); the fraction of *games* held out, rounded,
        and at least one game on each side when there are 2 or more games (a
        single game goes to training).
      key: the split is a function of the key and the set of ids.
    Returns:
      (train_mask, held_out_mask): numpy bool[M], disjoint, covering every position.
    """
    if not (isinstance(held_out_fraction, (int, float)) and 0 < held_out_fraction < 1):
        raise ValueError(f"held_out_fraction must be in (0, 1), got {held_out_fraction!r}")
    ids = np.asarray(game_id)
    if ids.ndim != 1:
        raise ValueError(f"game_id must be one-dimensional [M], got shape {ids.shape}")
    games, which = np.unique(ids, return_inverse=True)
    n = len(games)
    held = 0
    if n >= 2:
        held = min(max(round(held_out_fraction * n), 1), n - 1)
    # a numpy generator seeded from the key: jax.random.permutation would compile per n
    seed = np.asarray(jax.random.bits(key, (2,), jnp.uint32)).tolist()
    chosen = np.random.default_rng(seed).permutation(n)[:held]
    held_games = np.zeros(n, bool)
    held_games[chosen] = True
    held_out = held_games[which]
    return ~held_out, held_out


def target_rank(logits: jax.Array, target: jax.Array, legal: jax.Array | None = None):
    """int32[B]: the target's rank among the moves (0 = the net's first choice).

    logits float[B, A], target int[B], legal bool[B, A] or None. Ties go to the
    lower action index; an illegal target gets rank A (never in a top n).
    """
    logits = jnp.asarray(logits, jnp.float32)
    target = jnp.asarray(target, jnp.int32)
    num_actions = logits.shape[-1]
    if legal is not None:
        logits = jnp.where(legal, logits, -jnp.inf)
    mine = jnp.take_along_axis(logits, target[:, None], axis=-1)
    index = jnp.arange(num_actions)[None, :]
    before = (logits > mine) | ((logits == mine) & (index < target[:, None]))
    rank = jnp.sum(before, axis=-1).astype(jnp.int32)
    if legal is not None:
        ok = jnp.take_along_axis(legal, target[:, None], axis=-1)[:, 0]
        rank = jnp.where(ok, rank, num_actions)
    return rank


def topn_accuracy(logits: jax.Array, target: jax.Array, ns=(1, 5, 10),
                  legal: jax.Array | None = None) -> dict:
    """{"top1": float32[], "top5": ..., ...}: the fraction of positions whose
    target is among the net's n best moves (ranks and ties: module docstring)."""
    rank = target_rank(logits, target, legal)
    return {f"top{n}": jnp.mean(rank < n) for n in ns}


def topn_curve(logits: jax.Array, target: jax.Array, max_n: int = 10,
               legal: jax.Array | None = None) -> jax.Array:
    """float32[max_n]: entry n-1 is the top-n accuracy, n = 1..max_n."""
    rank = target_rank(logits, target, legal)
    return jnp.mean(rank[:, None] < jnp.arange(1, max_n + 1)[None, :], axis=0)


@functools.partial(jax.jit, static_argnames=("nets", "ns"))
def _chunk_sums(nets: Networks, variables, obs, to_play, target, z, legal, mask, ns):
    """Sums over one fixed-size chunk (padding rows have mask False)."""
    logits, value = nets.evaluate(variables, obs.astype(jnp.float32), to_play)
    rank = target_rank(logits, target, legal)
    log_p = jax.nn.log_softmax(logits)
    ce = -jnp.take_along_axis(log_p, target[:, None], axis=-1)[:, 0]
    w = mask.astype(jnp.float32)
    sums = {f"top{n}": jnp.sum(w * (rank < n)) for n in ns}
    sums["policy_ce"] = jnp.sum(w * ce)
    sums["value_mse"] = jnp.sum(w * jnp.square(z - value))
    return sums, rank


def evaluate(nets: Networks, variables, obs, to_play, target_action, z, legal=None,
             batch_size: int = 1024, ns=(1, 5, 10), return_ranks: bool = False) -> dict:
    """Move-prediction metrics of ``nets`` over a (held-out) set of positions.

    Each position is evaluated by the net of its colour to move
    (``nets.evaluate``, running BatchNorm statistics), in jitted chunks of
    ``batch_size`` (the last one, or a smaller set, padded: one compilation
    serves every set size).

    Args:
      obs: [M, H, W, C] observations (int8 or float; host or device).
      to_play: int[M] colour to move.
      target_action: int[M] the move played (the label).
      z: float[M] the value target.
      legal: bool[M, A] or None: None takes the empty points of the first two
        planes (own and opponent stones) as the legal moves.
      return_ranks: also return "rank": numpy int32[M], the target's rank
        (top-n correct iff rank < n; see ``per_move_number_accuracy``).
    Returns:
      {"top1", "top5", "top10" (per ``ns``): accuracy, "policy_ce": mean
      -log p(target) (softmax over all actions, as in the training loss),
      "value_mse": mean (z - v)^2, "count": M} as Python floats (count an int).
    """
    obs = np.asarray(obs)
    m = obs.shape[0]
    if m == 0:
        raise ValueError("evaluate needs at least one position")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    to_play = np.asarray(to_play, np.int32)
    target_action = np.asarray(target_action, np.int32)
    z = np.asarray(z, np.float32)
    if legal is None:
        legal = (obs[..., 0] == 0) & (obs[..., 1] == 0)
    legal = np.asarray(legal, bool).reshape(m, -1)
    ns = tuple(ns)
    batch = batch_size  # every chunk this size (padded): one compilation for any m
    totals, ranks = None, []
    for start in range(0, m, batch):
        stop = min(start + batch, m)
        pad = batch - (stop - start)

        def part(x, pad=pad, start=start, stop=stop):
            x = x[start:stop]
            return np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)]) if pad else x

        mask = np.arange(batch) < stop - start
        sums, rank = _chunk_sums(nets, variables, part(obs), part(to_play), part(target_action),
                                 part(z), part(legal), mask, ns)
        sums = jax.device_get(sums)
        totals = sums if totals is None else {k: totals[k] + sums[k] for k in totals}
        if return_ranks:
            ranks.append(np.asarray(rank)[: stop - start])
    out = {k: float(v) / m for k, v in totals.items()}
    out["count"] = m
    if return_ranks:
        out["rank"] = np.concatenate(ranks)
    return out


def per_move_number_accuracy(correct, move_number, bins) -> dict:
    """Accuracy per range of move numbers (Maddison et al. report it per stage of the game).

    Args:
      correct: bool[M], e.g. ``rank < 1`` from ``evaluate(..., return_ranks=True)``.
      move_number: int[M], stones on the board (or plies played) at each position.
      bins: increasing bin edges ``[e0, e1, ..., ek]`` (bin i is ``e_i <= move <
        e_{i+1}``; moves outside [e0, ek) are not counted), or an int width w
        (edges 0, w, 2w, ... covering the largest move number).
    Returns:
      {"edges": int[k+1], "accuracy": float64[k] (nan for an empty bin),
      "count": int[k]}.
    """
    correct = np.asarray(correct, bool).reshape(-1)
    move = np.asarray(move_number).reshape(-1)
    if correct.shape != move.shape:
        raise ValueError(f"correct {correct.shape} and move_number {move.shape} differ in shape")
    if isinstance(bins, (int, np.integer)):
        if bins < 1:
            raise ValueError(f"a bin width must be >= 1, got {bins!r}")
        top = int(move.max()) + 1 if move.size else 1
        edges = np.arange(0, top + bins, bins)
        edges = edges[: np.searchsorted(edges, top) + 1]
    else:
        edges = np.asarray(bins)
        if edges.ndim != 1 or len(edges) < 2 or np.any(np.diff(edges) <= 0):
            raise ValueError(f"bins must be increasing edges (2 or more), got {bins!r}")
    which = np.searchsorted(edges, move, side="right") - 1
    inside = (which >= 0) & (which < len(edges) - 1)
    count = np.bincount(which[inside], minlength=len(edges) - 1)
    hits = np.bincount(which[inside], weights=correct[inside], minlength=len(edges) - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(count > 0, hits / np.maximum(count, 1), np.nan)
    return {"edges": edges, "accuracy": accuracy, "count": count}
