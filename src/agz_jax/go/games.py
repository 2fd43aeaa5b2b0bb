"""Go games stored compactly: move sequences, not feature planes.

A store is a directory written by ``go.tygem.import_games``:

  out/import.json            what is being imported (sources, seed, split fractions)
  out/shard-<unit>.npz       the games of one input unit (a zip, a batch of SGF files),
                             with that unit's drop counts: its done-marker
  out/games.json             written last: counts by split and by reason dropped

A shard holds G games as one int16 array of actions (``row * 19 + col``, row 0
at the top as in ``go.rules``; the pass is 361), black's move first and the
colours alternating, cut by int64 offsets: game ``g`` is
``moves[offsets[g]:offsets[g + 1]]``. That is 2 bytes a move (about 420 bytes
a game before compression) where the feature planes of ``go.dataset`` take
hundreds of bytes a *position*; planes are made from the moves when needed.

Splits are by game and fixed by a seed: a game's split is a function of its
moves and the seed alone (``split_of``), not of the order of import, so the
same game lands on the same side in every import with that seed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

VERSION = 1
SIZE = 19
PASS = SIZE * SIZE
SPLITS = ("train", "valid", "test")
SUMMARY = "games.json"
SPEC = "import.json"

# per-game columns of a shard beside moves/offsets (name -> dtype)
COLUMNS = {"winner": np.int8, "split": np.int8, "key": np.uint64, "komi": np.float32,
           "black_rank": np.int8, "white_rank": np.int8, "game_id": str, "date": str,
           "result": str}


class GamesError(ValueError):
    """A store that cannot be written or read (the message names the file)."""


class Games(NamedTuple):
    """G games, host numpy.

    moves int16[M] (actions, pass = 361), offsets int64[G + 1], winner int8[G]
    (0 black, 1 white, -1 a draw), split int8[G] (index in ``SPLITS``), key
    uint64[G] (``game_key`` of the moves), komi float32[G], black_rank and
    white_rank int8[G] (dan rank 0..8 as ``sgf.Record.rank``, -1 unknown),
    game_id, date, result: str[G] (the source's id, "" when none; the result as
    written, e.g. "B+Resign", "W+3.5").
    """

    moves: np.ndarray
    offsets: np.ndarray
    winner: np.ndarray
    split: np.ndarray
    key: np.ndarray
    komi: np.ndarray
    black_rank: np.ndarray
    white_rank: np.ndarray
    game_id: np.ndarray
    date: np.ndarray
    result: np.ndarray

    def __len__(self) -> int:
        return len(self.winner)

    def game(self, g: int) -> np.ndarray:
        """int16[T]: the actions of game ``g``."""
        return self.moves[self.offsets[g]:self.offsets[g + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def record(self, g: int):
        """Game ``g`` as a ``go.sgf.Record`` (for ``sgf.states``, ``sgf.write``)."""
        from agz_jax.go import sgf  # imports jax: only when asked

        moves = tuple((i % 2, int(a)) for i, a in enumerate(self.game(g)))
        ranks = [f"{r + 1}d" if r >= 0 else "" for r in (self.black_rank[g],
                                                          self.white_rank[g])]
        return sgf.Record(size=SIZE, komi=float(self.komi[g]), moves=moves,
                          result=str(self.result[g]), black_rank=ranks[0],
                          white_rank=ranks[1], source=str(self.game_id[g]))


def game_key(moves: bytes) -> int:
    """A 64-bit hash of a game's moves (int16 little-endian bytes): duplicates
    share it."""
    return int.from_bytes(hashlib.blake2b(moves, digest_size=8).digest(), "little")


def split_of(moves: bytes, seed: int, fractions: Sequence[float]) -> int:
    """The split (index in ``SPLITS``) of a game: a hash of ``seed`` and its moves
    read as a number u in [0, 1): valid when u < fractions[1], test when u <
    fractions[1] + fractions[2], else train (``fractions`` = train, valid, test)."""
    digest = hashlib.blake2b(moves, digest_size=8, key=str(int(seed)).encode()).digest()
    u = int.from_bytes(digest, "little") / 2.0**64
    if u < fractions[1]:
        return 1
    if u < fractions[1] + fractions[2]:
        return 2
    return 0


class ShardWriter:
    """Games of one unit gathered in memory, then ``save``d as one shard."""

    def __init__(self):
        self.moves: list[bytes] = []
        self.columns: dict[str, list] = {k: [] for k in COLUMNS}

    def __len__(self) -> int:
        return len(self.moves)

    def add(self, moves: bytes, **columns) -> None:
        """One game: ``moves`` int16 little-endian bytes; every ``COLUMNS`` value."""
        self.moves.append(moves)
        for k in COLUMNS:
            self.columns[k].append(columns[k])

    def arrays(self) -> dict[str, np.ndarray]:
        lengths = np.array([len(m) // 2 for m in self.moves], np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        moves = np.frombuffer(b"".join(self.moves), "<i2").astype(np.int16)
        out = {"moves": moves, "offsets": offsets}
        for k, dtype in COLUMNS.items():
            out[k] = np.array(self.columns[k], dtype=dtype if dtype is not str else "U")
            if dtype is str and not len(out[k]):
                out[k] = np.zeros(0, "U1")
        return out

    def save(self, path: Path, report: dict) -> None:
        """Write the shard atomically (a temporary file renamed): its existence
        marks the unit done."""
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, **self.arrays(), report=json.dumps(report))
        tmp.replace(path)


def shard_report(path: Path) -> dict:
    """The drop counts and timing saved with a shard."""
    try:
        with np.load(path) as f:
            return json.loads(str(f["report"]))
    except (OSError, KeyError, ValueError) as e:
        raise GamesError(f"{path}: cannot be read ({e})") from None


def shard_keys(path: Path) -> np.ndarray:
    """uint64[G]: the keys of a shard's games (to find duplicates on resuming)."""
    try:
        with np.load(path) as f:
            return f["key"]
    except (OSError, KeyError, ValueError) as e:
        raise GamesError(f"{path}: cannot be read ({e})") from None


def summary(path: str | Path) -> dict:
    """``games.json`` of a finished store (GamesError if missing or unfinished)."""
    path = Path(path)
    if not (path / SUMMARY).exists():
        what = "an unfinished import (run it again to finish)" if (path / SPEC).exists() \
            else "no games store"
        raise GamesError(f"{path}: {what}: {SUMMARY} is missing")
    meta = json.loads((path / SUMMARY).read_text())
    if meta.get("version") != VERSION:
        raise GamesError(f"{path}: store version {meta.get('version')!r}, this code reads "
                         f"{VERSION}")
    return meta


def subset(src: str | Path, dst: str | Path, train_fraction: float) -> dict:
    """A smaller store ``dst`` of the finished store ``src``, to carry where
    the whole one does not fit (a GPU window takes 64 MiB): every shard keeps
    all its valid and test games and the first ``ceil(train_fraction * n)`` of
    its ``n`` training games, in order. So the held-out splits, and a held-out
    sample drawn from them with a seed, are those of ``src``; the training
    games are a fixed share of every shard (every month of the source).
    Returns ``dst``'s ``games.json``: ``src``'s, with the splits' counts of
    ``dst`` and ``subset`` ({"of": src's ``inputs``, "train_fraction"})."""
    if not 0 < train_fraction <= 1:
        raise GamesError(f"train_fraction must be in (0, 1], got {train_fraction!r}")
    src, dst = Path(src), Path(dst)
    meta = summary(src)
    if dst.exists() and any(dst.iterdir()):
        raise GamesError(f"{dst} is not empty: give a new folder")
    dst.mkdir(parents=True, exist_ok=True)
    splits = {s: {"games": 0, "moves": 0} for s in SPLITS}
    for name in meta["shards"]:
        with np.load(src / name) as f:
            arrays = {k: f[k] for k in f.files}
        split, off = arrays["split"], arrays["offsets"]
        train = np.flatnonzero(split == 0)
        keep = split != 0
        keep[train[:math.ceil(train_fraction * len(train))]] = True
        lengths = np.diff(off)[keep]
        out = {k: arrays[k][keep] for k in COLUMNS}
        out["moves"] = arrays["moves"][np.repeat(keep, np.diff(off))]
        out["offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        tmp = dst / (name + ".tmp.npz")
        np.savez_compressed(tmp, **out, report=arrays["report"])
        tmp.replace(dst / name)
        for k, s in enumerate(SPLITS):
            splits[s]["games"] += int((out["split"] == k).sum())
            splits[s]["moves"] += int(lengths[out["split"] == k].sum())
    if (src / SPEC).exists():
        (dst / SPEC).write_bytes((src / SPEC).read_bytes())
    meta = {**meta, "splits": splits,
            "subset": {"of": meta.get("inputs"), "train_fraction": train_fraction}}
    (dst / SUMMARY).write_text(json.dumps(meta, indent=2))
    return meta


def load_games(path: str | Path, split: str | None = None) -> Games:
    """The games of a finished store (``split``: "train", "valid", "test", or None
    for all), shard by shard in import order."""
    if split is not None and split not in SPLITS:
        raise GamesError(f"split must be one of {', '.join(SPLITS)} or None, got {split!r}")
    path = Path(path)
    meta = summary(path)
    want = None if split is None else SPLITS.index(split)
    moves, lengths = [], []
    cols: dict[str, list] = {k: [] for k in COLUMNS}
    for name in meta["shards"]:
        shard = path / name
        try:
            with np.load(shard) as f:
                arrays = {k: f[k] for k in ("moves", "offsets", *COLUMNS)}
        except (OSError, KeyError, ValueError) as e:
            raise GamesError(f"{shard}: cannot be read ({e})") from None
        keep = np.ones(len(arrays["winner"]), bool) if want is None else arrays["split"] == want
        if not keep.any():
            continue
        off = arrays["offsets"]
        starts, ends = off[:-1][keep], off[1:][keep]
        lengths.append(ends - starts)
        # the kept games' moves: a mask over moves from the games' ranges
        per_move = np.repeat(keep, np.diff(off))
        moves.append(arrays["moves"][per_move])
        for k in COLUMNS:
            cols[k].append(arrays[k][keep])
    if not lengths:
        return Games(np.zeros(0, np.int16), np.zeros(1, np.int64),
                     *(np.zeros(0, d if d is not str else "U1") for d in COLUMNS.values()))
    offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.int64)
    return Games(np.concatenate(moves).astype(np.int16), offsets,
                 *(np.concatenate(cols[k]) for k in COLUMNS))
