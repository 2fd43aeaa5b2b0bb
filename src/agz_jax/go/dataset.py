"""A move-prediction data set from SGF records: (feature planes, move) pairs on disk.

``build(records, out)`` reads every record (``go.sgf``), replays it with
``go.rules`` and computes the Table 1 planes (``go.features``) of every
position once, in jitted batches, writing them in shards of ``games_per_shard``
games:

  out/build.json          what is being built (the records, the feature settings)
  out/shard-NNNNN.npz     planes (bits packed along the channels), moves, ...
  out/dataset.json        written last: counts, channel names, skipped games

Bad input:
  * a malformed record (``sgf.SgfError``: the message names the file and the
    property) stops the build before anything is written, unless
    ``skip_malformed`` (then it is reported and counted like a rules violation);
  * a record whose moves break the rules (``sgf.RulesViolation``) is reported
    and skipped, and counted in ``dataset.json``;
  * ``load`` refuses a directory without ``dataset.json`` (an unfinished build):
    a partial data set is never read as a whole one. Running ``build`` again on
    the same records continues an unfinished build shard by shard.

Identical games (an engine playing itself repeats some) are kept once, and the
others counted as duplicates: a split by game must not see one game on both sides.

Only moves on the board are examples (the net of Maddison et al. has one
softmax over the points): the passes are counted, not stored.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from agz_jax.go import sgf
from agz_jax.go.features import RANKS, batched, channel, channel_names, num_channels
from agz_jax.go.rules import Rules

VERSION = 1
BATCH = 128  # positions per jitted feature call (the last one padded): one compilation


class DatasetError(ValueError):
    """A data set that cannot be built or loaded (the message says which file)."""


class Data(NamedTuple):
    """N positions (host numpy).

    planes uint8[N, H, W, C] (0/1; ``channels`` names them), action int32[N] (the
    point played, < H*W), to_play int8[N] (0 black, 1 white), game int32[N]
    (the record's index in ``sources``), ply int16[N] (0-based move number),
    sources: the record files, in game-index order.
    """

    planes: np.ndarray
    action: np.ndarray
    to_play: np.ndarray
    game: np.ndarray
    ply: np.ndarray
    sources: list
    meta: dict

    def select(self, mask) -> Data:
        return Data(self.planes[mask], self.action[mask], self.to_play[mask], self.game[mask],
                    self.ply[mask], self.sources, self.meta)

    @property
    def size(self) -> int:
        return self.planes.shape[1]

    @property
    def legal(self) -> np.ndarray:
        """bool[N, H*W]: the legality plane (``features`` channel "legal")."""
        c = channel("legal", self.meta["ranks"])
        return self.planes[..., c].reshape(len(self.action), -1).astype(bool)


def planes_of(rules: Rules, states, ranks: int, batch: int = BATCH) -> np.ndarray:
    """uint8[N, H, W, C]: the planes of N stacked states, in batches of ``batch``
    (the last one padded: one compilation)."""
    n = int(states.board.shape[0])
    fn = batched(rules, ranks)
    out = []
    for start in range(0, n, batch):
        idx = np.minimum(np.arange(start, start + batch), n - 1)
        part = jax.tree.map(lambda x, idx=idx: x[idx], states)
        out.append(np.asarray(fn(part), np.uint8)[: min(batch, n - start)])
    return np.concatenate(out) if out else np.zeros((0, rules.size, rules.size,
                                                     num_channels(ranks)), np.uint8)


def _digest(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p.name).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def record_paths(source: str | Path) -> list[Path]:
    """The ``*.sgf`` files of a directory (sorted by name), or one file."""
    source = Path(source)
    if source.is_file():
        return [source]
    paths = sorted(source.glob("*.sgf"))
    if not paths:
        raise DatasetError(f"{source}: no .sgf files")
    return paths


def build(records: str | Path | Sequence[Path], out: str | Path, ranks: int = 0,
          games_per_shard: int = 64, skip_malformed: bool = False,
          say: Callable[[str], None] = print, batch: int = BATCH) -> dict:
    """Build (or continue building) the data set of ``records`` (a directory of
    ``.sgf`` files, or a list of paths) in ``out``; returns ``dataset.json``'s
    content. ``ranks``: 0 (a constant plane: records without ranks) or 9 (the
    paper's dan planes from ``BR``/``WR``). ``batch``: positions per jitted
    feature call (a compilation per value)."""
    if ranks not in (0, RANKS):
        raise DatasetError(f"ranks must be 0 or {RANKS}, got {ranks!r}")
    if games_per_shard < 1:
        raise DatasetError(f"games_per_shard must be positive, got {games_per_shard!r}")
    paths = record_paths(records) if isinstance(records, (str, Path)) else \
        [Path(p) for p in records]
    out = Path(out)
    # 1. every record parsed before anything is written
    parsed, skipped = [], []
    for p in paths:
        try:
            parsed.append(sgf.read(p))
        except sgf.SgfError as e:
            if not skip_malformed:
                raise
            say(f"skipped (malformed): {e}")
            skipped.append({"source": str(p), "error": str(e), "kind": "malformed"})
    # identical games (an engine playing itself repeats games) would sit on both
    # sides of a split by game: only the first of each is kept
    seen, unique = set(), []
    for r in parsed:
        key = (r.size, r.black_setup, r.white_setup, r.moves)
        if key in seen:
            skipped.append({"source": r.source, "error": "a duplicate of an earlier game",
                            "kind": "duplicate"})
        else:
            seen.add(key)
            unique.append(r)
    if len(unique) < len(parsed):
        say(f"{len(parsed) - len(unique)} duplicate games skipped")
    parsed = unique
    if not parsed:
        raise DatasetError(f"{out}: none of the {len(paths)} records could be read")
    size = parsed[0].size
    for r in parsed:
        if r.size != size:
            raise sgf.SgfError(f"{r.source}: SZ: a {r.size}x{r.size} board, the first "
                               f"record ({parsed[0].source}) is {size}x{size}")
    spec = {"version": VERSION, "size": size, "ranks": ranks,
            "games_per_shard": games_per_shard, "records": len(paths),
            "digest": _digest(paths), "skip_malformed": skip_malformed}
    out.mkdir(parents=True, exist_ok=True)
    if (out / "build.json").exists():
        old = json.loads((out / "build.json").read_text())
        if old != spec:
            key = next(k for k in spec if old.get(k) != spec[k])
            raise DatasetError(f"{out} holds a data set of other records or settings "
                               f"({key}: {old.get(key)!r}, now {spec[key]!r}); "
                               "choose another output directory")
    else:
        (out / "build.json").write_text(json.dumps(spec, indent=2))
        (out / "dataset.json").unlink(missing_ok=True)
    rules = sgf.replay_rules(size)
    t0 = time.perf_counter()
    shards = range(0, len(parsed), games_per_shard)
    for k, first in enumerate(shards):
        path = out / f"shard-{k:05d}.npz"
        if path.exists():
            continue
        arrays, report = _shard(rules, parsed, first, games_per_shard, ranks, say, batch)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, **arrays, report=json.dumps(report))
        tmp.replace(path)
        say(f"shard {k + 1}/{len(shards)}: {len(arrays['action'])} positions "
            f"({time.perf_counter() - t0:.0f} s)")
    meta = {**spec, "channels": channel_names(ranks), "shards": len(shards),
            "sources": [r.source for r in parsed], "skipped": skipped,
            "positions": 0, "passes": 0, "games": 0, "violations": 0}
    for k in range(len(shards)):
        with np.load(out / f"shard-{k:05d}.npz") as f:
            report = json.loads(str(f["report"]))
            meta["positions"] += int(len(f["action"]))
        meta["passes"] += report["passes"]
        meta["games"] += report["games"]
        meta["violations"] += len(report["violations"])
        meta["skipped"] += report["violations"]
    tmp = out / "dataset.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    tmp.replace(out / "dataset.json")
    meta["duplicates"] = sum(s["kind"] == "duplicate" for s in skipped)
    meta["malformed"] = sum(s["kind"] == "malformed" for s in skipped)
    say(f"{out}: {meta['positions']} positions from {meta['games']} games; skipped: "
        f"{meta['violations']} games that broke the rules, {meta['malformed']} malformed, "
        f"{meta['duplicates']} duplicates")
    return meta


def _shard(rules: Rules, parsed: list, first: int, count: int, ranks: int, say, batch: int):
    """Planes and labels of games ``first .. first + count - 1``."""
    states, action, to_play, game, ply = [], [], [], [], []
    report = {"games": 0, "passes": 0, "violations": []}
    for g in range(first, min(first + count, len(parsed))):
        record = parsed[g]
        try:
            _, before = sgf.states(record, rules)
        except sgf.RulesViolation as e:
            say(f"skipped (rules): {e}")
            report["violations"].append({"source": record.source, "error": str(e),
                                         "kind": "rules"})
            continue
        report["games"] += 1
        moves = np.asarray(record.moves, np.int32).reshape(-1, 2)
        on_board = moves[:, 1] < rules.num_points
        report["passes"] += int((~on_board).sum())
        if not on_board.any():
            continue
        keep = np.flatnonzero(on_board)
        states.append(jax.tree.map(lambda x, keep=keep: np.asarray(x)[keep], before))
        action.append(moves[keep, 1])
        to_play.append(moves[keep, 0])
        game.append(np.full(len(keep), g))
        ply.append(keep)
    if not states:
        arrays = {"planes": np.zeros((0, rules.size, rules.size, 1), np.uint8),
                  "action": np.zeros(0, np.int32)}
    else:
        stacked = jax.tree.map(lambda *xs: np.concatenate(xs), *states)
        planes = planes_of(rules, stacked, ranks, batch)
        arrays = {"planes": np.packbits(planes, axis=-1), "action": np.concatenate(action)}
    n = len(arrays["action"])
    arrays.update(to_play=np.concatenate(to_play).astype(np.int8) if n else np.zeros(0, np.int8),
                  game=np.concatenate(game).astype(np.int32) if n else np.zeros(0, np.int32),
                  ply=np.concatenate(ply).astype(np.int16) if n else np.zeros(0, np.int16))
    return arrays, report


def load(out: str | Path) -> Data:
    """The data set built in ``out`` (DatasetError if it is missing or unfinished)."""
    out = Path(out)
    if not (out / "dataset.json").exists():
        what = "an unfinished build (run it again to finish)" if (out / "build.json").exists() \
            else "no data set"
        raise DatasetError(f"{out}: {what}: dataset.json is missing")
    meta = json.loads((out / "dataset.json").read_text())
    if meta.get("version") != VERSION:
        raise DatasetError(f"{out}: data set version {meta.get('version')!r}, this code "
                           f"reads {VERSION}")
    c = len(meta["channels"])
    parts = {k: [] for k in ("planes", "action", "to_play", "game", "ply")}
    for k in range(meta["shards"]):
        path = out / f"shard-{k:05d}.npz"
        try:
            with np.load(path) as f:
                if len(f["action"]):
                    parts["planes"].append(np.unpackbits(f["planes"], axis=-1, count=c))
                    for name in ("action", "to_play", "game", "ply"):
                        parts[name].append(f[name])
        except (OSError, KeyError, ValueError) as e:
            raise DatasetError(f"{path}: cannot be read ({e})") from None
    if not parts["action"]:
        raise DatasetError(f"{out}: the data set holds no positions")
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    if len(arrays["action"]) != meta["positions"]:
        raise DatasetError(f"{out}: {len(arrays['action'])} positions in the shards, "
                           f"dataset.json says {meta['positions']}")
    return Data(arrays["planes"], arrays["action"].astype(np.int32), arrays["to_play"],
                arrays["game"], arrays["ply"], meta["sources"], meta)
