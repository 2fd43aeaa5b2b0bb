"""experiments.selfplay --save-games: self-play games written as .psq records."""

import dataclasses
from collections.abc import Callable

import numpy as np

from agz_jax.game import records
from agz_jax.training import driver as job
from agz_jax.training.selfplay import Trajectory


@dataclasses.dataclass(frozen=True)
class FakeComponents:
    selfplay: Callable
    other: int = 7


def test_recorded_selfplay_games_are_saved_as_psq(tmp_path):
    size = 5
    # Time-major moves [T, B] of three games; -1 once a game is over.
    moves = np.full((size * size, 3), -1, np.int32)
    moves[:9, 0] = [0, 5, 1, 6, 2, 7, 3, 8, 4]  # black's five on the top row
    moves[:3, 1] = [12, 13, 14]
    moves[:1, 2] = [24]
    traj = Trajectory(obs=None, policy=None, action=moves, to_play=None, valid=None)
    calls = []

    def play(best, key):
        calls.append((best, key))
        return traj, "final", {"moves": 13}

    games: dict = {}
    comps = job.record_selfplay(FakeComponents(play), games)
    assert comps.other == 7 and comps.selfplay("best", "key") == (traj, "final", {"moves": 13})
    assert calls == [("best", "key")] and games["moves"] is moves

    paths = job.save_games(tmp_path / "games", 3, games.pop("moves"), size, count=2)
    assert [p.name for p in paths] == ["it00003_game000.psq", "it00003_game001.psq"]
    first = records.read_psq(paths[0])
    assert first.size == size and first.moves == [0, 5, 1, 6, 2, 7, 3, 8, 4]
    assert int(records.to_states(first).winner) == 0
    assert records.read_psq(paths[1]).moves == [12, 13, 14]
    assert "self-play iteration 3" in paths[0].read_text()
