"""Supervised move prediction from game records (Maddison et al., ICLR 2015).

A net learns to predict the moves of recorded games (and their results, with
the value head), and is judged the way Maddison et al. judge theirs: top-n
accuracy on held-out *games* (Section 5, Fig. 1), accuracy by move number, and
the playing strength of the network alone (argmax of the policy, no search)
against a fixed opponent (Section 5.1/5.2's "% wins").

Data (``agz_jax.studies.movepred_data``): whole games as move lists (mentor games or
``.psq`` records), replayed into training positions with the config's input
features; ``load_or_make_games`` makes them once and caches them. The report's
tables and plots are ``agz_jax.studies.movepred_report``'s.

Training (``train``): the training games' positions go into a replay buffer
(one ring per net with Double Networks, so each net learns its colour's
moves) and are sampled uniformly with a random dihedral symmetry per example
per step (``replay.sample``), through the jitted SGD steps the curriculum
uses too (``agz_jax.training.train.sgd``): the policy target is one-hot on the move played.
Whole games are held out (``supervised.split_by_game``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base.checks import (
    TEXT,
    ConfigError,
    Section,
    integer,
    is_int,
    number,
    require,
    setting,
)
from agz_jax.config.schema import Config
from agz_jax.game.gomoku import Rules
from agz_jax.game.mentor import MAX_LEVEL, Mentor
from agz_jax.match import arena
from agz_jax.nets.networks import Networks, make_networks
from agz_jax.studies.movepred_data import (
    Games,
    Positions,
    load_games,
    mentor_games,
    positions,
    psq_games,
    save_games,
)
from agz_jax.training import replay, supervised
from agz_jax.training.replay import Examples
from agz_jax.training.train import fresh_train_state, sgd

TOP_N = 10  # the accuracy curve's n = 1..TOP_N (Maddison et al., Fig. 1)


def parse_opponent(text: str, name: str = "movepred.opponent") -> tuple[str, int | None]:
    """``"random"`` -> ("random", None); ``"mentor:L"`` -> ("mentor", L)."""
    kind, sep, rest = str(text).partition(":")
    if kind == "random" and not sep:
        return "random", None
    if kind == "mentor" and rest.isdigit() and 0 <= int(rest) <= MAX_LEVEL:
        return "mentor", int(rest)
    raise ConfigError(f"{name} must be 'random' or 'mentor:LEVEL' with LEVEL in "
                      f"0..{MAX_LEVEL}, got {text!r}")


@dataclass(frozen=True)
class MovePredConfig(Section):
    """Data, training budget and evaluation of one supervised move-prediction run
    (the net, its features, the optimiser and the seed are the ``Config``'s)."""

    section = "movepred"
    records: str = setting("", TEXT)
    """A directory of ``.psq`` records to learn from; empty: mentor games."""
    levels: tuple[int, ...] = (1,)
    """Mentor levels playing the games (each level plays itself, equally often); a
    move's rank label is its level's index in this list (0 = the weakest)."""
    num_games: int = 512
    """Mentor games in all (a multiple of 2 x the number of levels)."""
    opening_plies: int = setting(2, integer(0))
    """Random central moves opening every mentor game and arena game (not learnt)."""
    data_seed: int = setting(0, integer(0))
    """The mentor games are a function of this seed (the same for every grid point)."""
    held_out: float = setting(0.1, number(0, 1, lo_open=True, hi_open=True))
    """Fraction of the games held out (whole games)."""
    steps: int = setting(1000, integer(1))
    """SGD steps of ``train.batch_size`` positions per net."""
    log_every: int = setting(0, integer(0))
    """Held-out metrics every this many steps (0: at the end only)."""
    arena_games: int = setting(100, integer(0, even=True, note="0: no match"))
    """Games of the raw net against ``opponent`` (even; 0: no match)."""
    opponent: str = "random"
    """'random' or 'mentor:LEVEL'."""
    move_bin: int = setting(10, integer(1))
    """Width (in plies) of the bins of the accuracy by move number."""

    def __post_init__(self):
        levels = self.levels
        if isinstance(levels, str):  # "0,2"
            try:
                levels = tuple(int(x) for x in levels.split(",") if x.strip())
            except ValueError:
                levels = self.levels
        if is_int(levels):
            levels = (levels,)
        require(isinstance(levels, (list, tuple)) and len(levels) >= 1
                and all(is_int(v) and 0 <= v <= MAX_LEVEL for v in levels)
                and list(levels) == sorted(set(levels)), "movepred.levels",
                f"must be increasing, distinct mentor levels in 0..{MAX_LEVEL}", self.levels)
        object.__setattr__(self, "levels", tuple(levels))
        super().__post_init__()

    def cross_check(self):
        per = 2 * len(self.levels)
        require(is_int(self.num_games) and self.num_games >= per
                and self.num_games % per == 0, "movepred.num_games",
                f"must be a positive multiple of {per} (2 x {len(self.levels)} levels)",
                self.num_games)
        parse_opponent(self.opponent)

    @property
    def data_fields(self) -> tuple[str, ...]:
        """The fields that decide the games (shared by every point of a grid)."""
        return ("records", "levels", "num_games", "opening_plies", "data_seed")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def replace(self, **changes) -> MovePredConfig:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown config field 'movepred.{sorted(unknown)[0]}'")
        return dataclasses.replace(self, **changes)


def check(config: Config, mp: MovePredConfig) -> None:
    """What a run needs of the pair (ConfigError naming the field, before compiling)."""
    ranks = config.features.ranks
    if not mp.records:
        require(config.game.rule == "freestyle", "game.rule",
                "must be freestyle for mentor games (the mentor knows freestyle only)",
                config.game.rule)
        require(ranks in (0, len(mp.levels)), "features.ranks",
                f"must be 0 or the number of movepred.levels ({len(mp.levels)}): a move's "
                "rank is its mentor level's index", ranks)
    else:
        require(ranks == 0, "features.ranks", "must be 0 with movepred.records (records "
                "carry no rank labels)", ranks)
    if mp.arena_games:
        if parse_opponent(mp.opponent)[0] == "mentor":
            require(config.game.rule == "freestyle", "game.rule",
                    "must be freestyle against the mentor", config.game.rule)
    require(mp.opening_plies <= config.game.size ** 2 // 2, "movepred.opening_plies",
            "must leave room on the board", mp.opening_plies)


def load_or_make_games(config: Config, mp: MovePredConfig, cache: Path | None = None,
                       say: Callable[[str], None] = print) -> Games:
    """The games of ``mp`` (mentor games or records), cached as ``cache/games.npz``
    with ``cache/games.json`` naming what made them; a cache made by other data
    fields is an error (ConfigError), not silently reused."""
    spec = {"size": config.game.size, "rule": config.game.rule,
            **{k: getattr(mp, k) for k in mp.data_fields}}
    spec["levels"] = list(spec["levels"])
    if cache is not None and (cache / "games.json").exists():
        saved = json.loads((cache / "games.json").read_text())
        if saved != spec:
            field = next(k for k in spec if saved.get(k) != spec[k])
            raise ConfigError(f"{cache} holds games made with another {field} "
                              f"({saved.get(field)!r}, now {spec[field]!r}); choose another --out")
        say(f"games: cached in {cache}")
        return load_games(cache / "games.npz")
    rules = Rules(config.game.size, config.game.rule)
    t0 = time.perf_counter()
    if mp.records:
        games = psq_games(Path(mp.records), config.game.rule, config.game.size)
    else:
        games = mentor_games(rules, mp.levels, mp.num_games, mp.opening_plies,
                             jax.random.PRNGKey(mp.data_seed))
    wall = time.perf_counter() - t0
    say(f"games: {games.count} in {wall:.0f} s, mean length {np.mean(games.length):.1f}, "
        f"black/white/draw {np.mean(games.winner == 0):.2f}/{np.mean(games.winner == 1):.2f}/"
        f"{np.mean(games.winner < 0):.2f}")
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        save_games(cache / "games.npz", games)
        (cache / "games.json").write_text(json.dumps(spec, indent=2))
    return games


# ---------------------------------------------------------------------------- training


def _networks(config: Config) -> Networks:
    """The nets of ``config``: its ``net`` section on its board, with its ``features``."""
    return make_networks(config.net, board_size=config.game.size, features=config.features)


def init_variables(config: Config, seed: int | None = None):
    """Fresh variables of the config's nets from ``seed`` (default ``config.seed``).

    The key is an ``rbg`` key: on XLA:CPU the init of the default threefry key
    takes ~15 s to compile, an rbg key's ~4 s (numbers differ, determinism not).
    """
    nets = _networks(config)
    return jax.device_get(nets.init(jax.random.key(config.seed if seed is None else seed,
                                                   impl="rbg")))


_add = jax.jit(replay.add)


def training_buffer(config: Config, data: Positions) -> replay.Buffer:
    """A replay buffer holding exactly ``data`` (each ring sized to its colour's
    positions when the nets are split by colour)."""
    nets = _networks(config)
    rules = Rules(config.game.size, config.game.rule)
    rings = nets.num_rings
    counts = np.bincount(data.to_play, minlength=2) if rings == 2 else [len(data.action)]
    buffer = replay.init_for(nets, rules, max(int(max(counts)), 1))
    examples = Examples(obs=jnp.asarray(data.obs),
                        policy=jax.nn.one_hot(data.action, rules.num_actions, dtype=jnp.float32),
                        z=jnp.asarray(data.z), to_play=jnp.asarray(data.to_play),
                        valid=jnp.ones(len(data.action), bool))
    return _add(buffer, examples)


def evaluate(config: Config, variables, data: Positions, move_bin: int = 10,
             batch_size: int = 1024) -> dict:
    """Held-out metrics: top-1..top-10 accuracy ("topn": list), policy CE, value MSE,
    and top-1 accuracy by move number ("by_move": edges, accuracy, count)."""
    nets = _networks(config)
    out = supervised.evaluate(nets, variables, data.obs, data.to_play, data.action, data.z,
                              legal=data.legal, batch_size=batch_size,
                              ns=tuple(range(1, TOP_N + 1)), return_ranks=True)
    rank = out.pop("rank")
    by_move = supervised.per_move_number_accuracy(rank < 1, data.ply, move_bin)
    return {"top1": out["top1"], "top5": out["top5"], "top10": out["top10"],
            "topn": [out[f"top{n}"] for n in range(1, TOP_N + 1)],
            "policy_ce": out["policy_ce"], "value_mse": out["value_mse"],
            "positions": out["count"], "games": int(len(np.unique(data.game))),
            "by_move": {k: np.asarray(v).tolist() for k, v in by_move.items()}}


def accuracy_by_rank(config: Config, variables, data: Positions,
                     batch_size: int = 1024) -> list[list[float]]:
    """Does the net use its rank planes? ``out[true][asked]``: the top-1 accuracy on
    the positions whose move has rank label ``true``, with the rank planes (the
    last ``features.ranks`` planes) set to ``asked``. A net that learnt the
    players' styles apart predicts each rank's moves best when asked at that rank."""
    k = config.features.ranks
    if not k:
        raise ValueError("accuracy_by_rank needs features.ranks > 0")
    nets = _networks(config)
    out = []
    for true in range(k):
        part = data.select(data.rank == true)
        row = []
        for asked in range(k):
            obs = part.obs.copy()
            obs[..., obs.shape[-1] - k:] = np.eye(k, dtype=obs.dtype)[asked]
            row.append(supervised.evaluate(nets, variables, obs, part.to_play, part.action,
                                           part.z, legal=part.legal, batch_size=batch_size,
                                           ns=(1,))["top1"] if len(part.action) else None)
        out.append(row)
    return out


def train(config: Config, mp: MovePredConfig, data: Positions, train_mask, key: jax.Array,
          variables=None, log: Callable[[dict], None] | None = None):
    """Train on ``data[train_mask]`` for ``mp.steps`` steps; the held-out rest is
    evaluated every ``mp.log_every`` steps and at the end.

    Returns (TrainState, history: the logged records, the last one final).
    """
    train_mask = np.asarray(train_mask, bool)
    buffer = training_buffer(config, data.select(train_mask))
    held = data.select(~train_mask)
    if variables is None:
        variables = init_variables(config)
    state = fresh_train_state(config.train, variables)
    chunk = mp.log_every or mp.steps
    history = []
    done = 0
    t0 = time.perf_counter()
    while True:
        n = min(chunk, mp.steps - done)
        state, m = sgd(_networks(config), config.train, state, buffer,
                       jax.random.fold_in(key, done), n)
        done += n
        record = {"step": done, "train_s": time.perf_counter() - t0,
                  **{f"train/{k}": v for k, v in m.items()}}
        if len(held.action):
            metrics = evaluate(config, state.variables, held, mp.move_bin)
            record.update({f"heldout/{k}": v for k, v in metrics.items()
                           if k in ("top1", "top5", "top10", "policy_ce", "value_mse")})
        history.append(record)
        if log:
            log(record)
        if done >= mp.steps:
            return state, history


# ---------------------------------------------------------------------------- strength


@functools.cache
def _raw_match(config: Config, opponent: str, num_games: int, opening_plies: int):
    rules, nets = Rules(config.game.size, config.game.rule), _networks(config)
    kind, level = parse_opponent(opponent)
    opp = arena.random_player(rules) if kind == "random" else Mentor(rules, level).act

    @jax.jit
    def match(variables, key, rank):
        raw = arena.policy_player(rules, nets, variables, rank=rank)
        return arena.play_match(rules, raw, opp, key, num_games, opening_plies)

    return match


def strength(config: Config, mp: MovePredConfig, variables, key: jax.Array,
             rank: int = 0) -> dict:
    """The raw net (argmax of its policy over legal moves, no search; asked to
    play at ``rank``) against ``mp.opponent`` over ``mp.arena_games`` games:
    the score, its standard error sqrt(s (1 - s) / n) and 95% Wilson interval."""
    match = _raw_match(config, mp.opponent, mp.arena_games, mp.opening_plies)
    s = arena.score(match(variables, key, jnp.int32(rank)))
    se = math.sqrt(s.score * (1 - s.score) / s.games)
    return {"score": s.score, "se": se, "low": s.low, "high": s.high, "games": s.games,
            "wins": s.wins, "draws": s.draws, "losses": s.losses, "rank": rank}


def num_params(config: Config, variables) -> int:
    """Trainable parameters of all the nets together."""
    return sum(int(np.size(x)) for x in jax.tree.leaves(variables["params"]))


def run_setting(config: Config, mp: MovePredConfig, games: Games, out: Path | None = None,
                say: Callable[[str], None] = print, variables=None) -> dict:
    """Train and judge one setting on ``games``; returns (and writes in ``out``:
    ``record.json``, ``metrics.jsonl``, and the nets as a model directory) its
    record: held-out metrics, strength (at every rank with rank conditioning),
    parameter count and wall times."""
    from agz_jax.nets import models

    check(config, mp)
    t0 = time.perf_counter()
    data = positions(config, games)
    train_mask, _ = supervised.split_by_game(data.game, mp.held_out,
                                             jax.random.PRNGKey(mp.data_seed))
    t_data = time.perf_counter() - t0

    def log(record):
        if out is not None:
            with (out / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(record, sort_keys=True) + "\n")
        say(f"  step {record['step']}: loss {record['train/loss']:.3f}"
            + (f", held-out top1 {record['heldout/top1']:.3f}" if "heldout/top1" in record
               else ""))

    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").write_text("")
    key = jax.random.PRNGKey(config.seed)
    state, history = train(config, mp, data, train_mask, jax.random.fold_in(key, 1),
                           variables, log)
    variables = jax.device_get(state.variables)
    t_train = time.perf_counter() - t0 - t_data
    held = evaluate(config, variables, data.select(~train_mask), mp.move_bin)
    record = {"config": config.to_dict(), "movepred": mp.to_dict(), "params": num_params(
        config, variables), "nets": _networks(config).num_nets,
        "train_positions": int(train_mask.sum()),
        "train_games": int(len(np.unique(data.game[train_mask]))),
        "heldout": held, "final_train": history[-1], "strength": [],
        "time": {"positions_s": t_data, "train_s": t_train}}
    if config.features.ranks:
        record["heldout"]["top1_by_rank"] = accuracy_by_rank(
            config, variables, data.select(~train_mask))
    if mp.arena_games:
        t1 = time.perf_counter()
        ranks = range(config.features.ranks) if config.features.ranks else [0]
        for r in ranks:
            record["strength"].append(strength(config, mp, variables,
                                               jax.random.fold_in(key, 2), r))
        record["time"]["arena_s"] = time.perf_counter() - t1
    record["time"]["total_s"] = time.perf_counter() - t0
    if out is not None:
        models.save(out, config, variables)
        (out / "record.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    return record

