"""Refactors leave behaviour unchanged: the same seeds give the same games.

Each case below plays a small, fixed piece of the project (self-play in
lockstep and continuous, PUCT and Gumbel, the arena's players, the engine) and
hashes every move, search target and value it produced, bit for bit. The
hashes were recorded in ``tests/data/unchanged.json`` before the search was
split into modules (issue 25); a change that alters what the code computes
fails here, a change that only moves code does not.

The hashes hold for one machine type and jax build (this project's CI), and
for one XLA:CPU optimisation level: the suite compiles at level 0
(``tests/conftest.py``), whose hashes are kept under ``"xla_O0"``; the
pre-refactor hashes, at XLA's default level, are kept under ``"xla_default"``
and checked with ``AGZ_JAX_TEST_XLA_DEFAULT=1 pytest tests/test_unchanged.py``
(the current code reproduces them). When a change of behaviour is intended,
record the new hashes of both levels and say why in the commit: ``python
tests/test_unchanged.py --write`` and ``AGZ_JAX_TEST_XLA_DEFAULT=1 python
tests/test_unchanged.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from agz_jax import arena, replay, run
from agz_jax.config import Config, GameConfig, NetConfig, SearchConfig, SelfPlayConfig
from agz_jax.gomoku import Rules
from agz_jax.search import Searcher
from agz_jax.selfplay import make_continuous, make_selfplay

GOLDEN = Path(__file__).parent / "data" / "unchanged.json"


def level() -> str:
    """The golden set of this process's XLA optimisation level (tests/conftest.py)."""
    return ("xla_O0" if "--xla_backend_optimization_level=0" in os.environ.get("XLA_FLAGS", "")
            else "xla_default")


SIZE = 7


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in jax.tree.leaves(arrays):
        a = np.asarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()[:16]


def config(algorithm: str, **selfplay) -> Config:
    return Config(
        game=GameConfig(size=SIZE),
        net=NetConfig(filters=8, blocks=1, value_hidden=8, double=True),
        search=SearchConfig(algorithm=algorithm, num_simulations=8, forced_moves=True,
                            answer_threats=True,
                            **({"max_considered_actions": 4} if algorithm == "gumbel" else {})),
        selfplay=SelfPlayConfig(num_games=4, **selfplay),
    )


def setup(cfg: Config):
    rules = Rules(SIZE)
    nets = run.make_networks(cfg)
    return rules, nets, nets.init(jax.random.PRNGKey(0))


def lockstep_puct() -> str:
    cfg = config("puct")
    rules, nets, variables = setup(cfg)
    traj, final, _ = jax.jit(make_selfplay(cfg, rules, nets))(variables, jax.random.PRNGKey(1))
    return digest(traj.action, traj.policy, final.board, final.winner)


def continuous_gumbel() -> str:
    cfg = config("gumbel", continuous=True, steps=30)
    rules, nets, variables = setup(cfg)
    init, play = make_continuous(cfg, rules, nets)
    buffer = replay.init_for(nets, rules, 256)
    key = jax.random.PRNGKey(2)
    slots, buffer, stats, moves = jax.jit(play)(variables, init(key), buffer, key)
    return digest(moves.action, buffer.policy, buffer.z, slots.states.board, stats["games"])


def arena_players() -> str:
    out = []
    for algorithm in ("puct", "gumbel"):
        cfg = config(algorithm)
        rules, nets, variables = setup(cfg)
        a = arena.mcts_player(Searcher.of(cfg, rules, nets), variables, num_simulations=8)
        b = arena.policy_player(rules, nets, variables)
        result = arena.play_match(rules, a, b, jax.random.PRNGKey(3), 4, opening_plies=2)
        out.append(digest(result))
    return ",".join(out)


def engine_analysis() -> str:
    import tempfile

    from tiny_models import random_model

    from agz_jax import engine, models

    with tempfile.TemporaryDirectory(prefix="agz-unchanged-") as tmp:
        model = models.load(random_model(Path(tmp) / "m", 9, seed=3, double=False))
    model = model._replace(config=model.config.replace(
        **{"search.forced_moves": True, "search.answer_threats": True}))
    eng = engine.Engine(model, max_simulations=32, chunk=8)
    rules = eng.rules()
    board = np.zeros(81, np.int8)
    board[[40, 41, 30]] = 1
    board[[49, 31]] = -1
    a = eng.analyse(rules, engine.make_state(rules, board, 1), simulations=24)
    return digest(np.int32(a.action), np.float32(a.value), a.policy, a.q)


CASES = {"lockstep_puct": lockstep_puct, "continuous_gumbel": continuous_gumbel,
         "arena_players": arena_players, "engine_analysis": engine_analysis}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_seeds_same_games(name):
    golden = json.loads(GOLDEN.read_text())[level()]
    assert CASES[name]() == golden[name], (
        f"{name} changed; if intended, run `python tests/test_unchanged.py --write`")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_unchanged.py --write")
    sys.path.insert(0, str(Path(__file__).parent))
    import conftest  # noqa: F401  (the suite's XLA level, unless AGZ_JAX_TEST_XLA_DEFAULT)

    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    golden[level()] = {k: f() for k, f in CASES.items()}
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    print(GOLDEN.read_text())
