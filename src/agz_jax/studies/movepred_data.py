"""Move prediction's data (``agz_jax.studies.movepred``): whole games as move lists, and
the training positions they replay into.

``Games`` holds whole games as move lists (host numpy, small enough to cache on
disk), from ``mentor_games`` (the rule-based mentor playing itself, at one
level or at several; a game's moves carry its level's index as their *rank*
label), ``match_games`` (any arena match) or ``psq_games`` (a directory of
``.psq`` records: Gomocup games, ``experiments.play.arena --out``,
``experiments.selfplay --save-games``).

``positions(config, games)`` replays them into training positions with the
config's input features (``agz_jax.nets.features``, so one cached set of games
serves every feature set of a grid) and the game's rank on the state, z the
decayed result for the side to move (``decay.gamma``, as self-play labels its
games): ``imitation.games_to_examples``, the curriculum's own replay.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base.checks import ConfigError
from agz_jax.config.schema import Config
from agz_jax.curriculum import imitation
from agz_jax.game import records
from agz_jax.game.gomoku import Rules
from agz_jax.match import arena


class Games(NamedTuple):
    """G games on one ``size`` x ``size`` board (host numpy, T = size * size).

    moves int32[G, T]: actions in order, -1 after the game's end.
    winner int32[G]: the winning colour, -1 for a draw (or an unfinished record).
    length int32[G]: plies played.
    rank int32[G]: the rank label of the game's moves (both players').
    first: the first ply learnt from in every game (random openings are not).
    """

    size: int
    moves: np.ndarray
    winner: np.ndarray
    length: np.ndarray
    rank: np.ndarray
    first: int

    @property
    def count(self) -> int:
        return len(self.length)


def save_games(path: Path, games: Games) -> None:
    np.savez_compressed(path, **games._asdict())


def load_games(path: Path) -> Games:
    with np.load(path) as f:
        return Games(int(f["size"]), f["moves"], f["winner"], f["length"], f["rank"],
                     int(f["first"]))


def mentor_games(rules: Rules, levels, num_games: int, opening_plies: int,
                 key: jax.Array) -> Games:
    """``num_games`` mentor games, ``num_games / len(levels)`` at each level (the
    mentor playing itself, ``imitation.play_mentor_games``); a game's rank label
    is its level's index in ``levels`` (0 = the first)."""
    levels = tuple(levels)
    per_level = num_games // len(levels)
    if per_level * len(levels) != num_games or per_level % 2:
        raise ValueError(f"num_games {num_games} is not 2 x a multiple of {len(levels)} levels")
    return concatenate([
        match_games(rules.size, _mentor_match(rules, level, per_level, opening_plies)(
            jax.random.fold_in(key, i)), i, opening_plies)
        for i, level in enumerate(levels)])


@functools.cache
def _mentor_match(rules: Rules, level: int, num_games: int, plies: int):
    # only the match is returned: XLA drops the positions play_mentor_games makes
    return jax.jit(lambda key: imitation.play_mentor_games(rules, level, key, num_games,
                                                           plies, 1.0).result)


def match_games(size: int, result: arena.MatchResult, rank: int = 0, first: int = 0) -> Games:
    """The games of an ``arena.play_match`` result, labelled ``rank``, learnt from
    ply ``first`` on."""
    result = jax.device_get(result)
    count = len(result.length)
    return Games(size, np.asarray(result.moves).T.astype(np.int32),
                 np.asarray(result.winner, np.int32), np.asarray(result.length, np.int32),
                 np.full(count, rank, np.int32), int(first))


def concatenate(parts: list[Games]) -> Games:
    """One Games of several (on one board, learnt from the same ply)."""
    if len({(p.size, p.first) for p in parts}) != 1:
        raise ValueError("games on different boards or learnt from different plies")
    return Games(parts[0].size, *(np.concatenate([getattr(p, k) for p in parts])
                                  for k in ("moves", "winner", "length", "rank")),
                 parts[0].first)


def read_records(directory: Path, size: int | None = None) -> list[tuple[Path, records.Record]]:
    """Every ``*.psq`` file of ``directory`` (sorted by name), read but not
    replayed (nothing compiles), all on a ``size`` board (None: the first
    record's). RecordError on a missing directory, none, a malformed record or
    a board of another size."""
    directory = Path(directory)
    if not directory.is_dir():
        why = "not a directory" if directory.exists() else "no such directory"
        raise records.RecordError(f"{directory}: no .psq files ({why})")
    paths = sorted(directory.glob("*.psq"))
    if not paths:
        raise records.RecordError(f"{directory}: no .psq files")
    others = "the others are" if size is None else "the config's game.size is"
    read = []
    for path in paths:
        record = records.read_psq(path)
        if size is None:
            size = record.size
        if record.size != size:
            raise records.RecordError(f"{path}: a {record.size}x{record.size} board, "
                                      f"{others} {size}x{size}")
        read.append((path, record))
    return read


def psq_games(directory: Path, rule: str = "freestyle", size: int | None = None) -> Games:
    """Every ``*.psq`` file of ``directory`` (``read_records``), replayed and
    checked (``records.to_states``); the winner is the replay's, a record that
    stops before the end counts as a draw. RecordError on a malformed record or
    a board of another size."""
    read = read_records(directory, size)
    size = read[0][1].size
    games = []
    for path, record in read:
        try:
            final = records.to_states(record, rule)
        except records.RecordError as e:
            raise records.RecordError(f"{path}: {e}") from e
        games.append((record.moves, int(final.winner)))
    t = size * size
    moves = np.full((len(games), t), -1, np.int32)
    for i, (m, _) in enumerate(games):
        moves[i, :len(m)] = m
    length = np.asarray([len(m) for m, _ in games], np.int32)
    return Games(size, moves, np.asarray([w for _, w in games], np.int32), length,
                 np.zeros(len(games), np.int32), 0)


class Positions(NamedTuple):
    """M positions (host numpy) of some games, the move played at each.

    obs int8[M, H, W, C] (the config's features), action int32[M] (the label),
    z float32[M] (decayed result for the side to move), to_play int32[M],
    game int32[M] (index in the Games), ply int32[M] (0-based move number),
    rank int32[M] (the rank label of the move).
    """

    obs: np.ndarray
    action: np.ndarray
    z: np.ndarray
    to_play: np.ndarray
    game: np.ndarray
    ply: np.ndarray
    rank: np.ndarray

    def select(self, mask) -> Positions:
        return Positions(*(x[mask] for x in self))

    @property
    def legal(self) -> np.ndarray:
        """bool[M, A]: the empty points (features' planes 0 and 1 are the stones)."""
        return ((self.obs[..., 0] == 0) & (self.obs[..., 1] == 0)).reshape(len(self.obs), -1)


_CHUNK = 128  # games replayed per call (the last chunk padded): one compilation per config


@functools.cache
def _replay_fn(config: Config):
    rules = Rules(config.game.size, config.game.rule)

    @jax.jit
    def replay_chunk(moves, winner, length, rank, first):
        """moves [T, G], winner/length/rank [G] -> (Examples, actions) [T * G]."""
        result = arena.MatchResult(winner, jnp.zeros_like(length, bool), length, moves)
        g = imitation.games_to_examples(rules, result, first, config.decay.gamma,
                                        config.features, rank)
        return g.examples._replace(policy=None), g.action

    return replay_chunk


def positions(config: Config, games: Games) -> Positions:
    """Every learnt position of ``games`` (plies ``first <= t < length``), observed
    with ``config``'s features and each game's rank (``imitation.games_to_examples``)."""
    if games.size != config.game.size:
        raise ConfigError(f"game.size is {config.game.size}, the games are on "
                          f"{games.size}x{games.size}")
    replay_chunk = _replay_fn(config)
    parts = []
    for start in range(0, games.count, _CHUNK):
        idx = np.arange(start, start + _CHUNK)
        real = idx < games.count
        idx = np.minimum(idx, games.count - 1)
        length = np.where(real, games.length[idx], 0)  # padding games: no valid ply
        ex, action = jax.device_get(replay_chunk(
            games.moves[idx].T, games.winner[idx], length, games.rank[idx],
            np.int32(games.first)))
        valid = ex.valid
        game = np.tile(idx, games.size ** 2)  # flattened ply-major, as the examples
        ply = np.repeat(np.arange(games.size ** 2), _CHUNK)
        parts.append(Positions(ex.obs[valid], action[valid].astype(np.int32), ex.z[valid],
                               ex.to_play[valid].astype(np.int32), game[valid].astype(np.int32),
                               ply[valid].astype(np.int32), games.rank[game[valid]]))
    return Positions(*(np.concatenate(xs) for xs in zip(*parts, strict=True)))
