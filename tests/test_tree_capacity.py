"""``experiments.play.tree_capacity``: the engine as pbrain-agz builds it, at
two capacities on the same positions of one game, on a fake clock that moves
by a fixed cost a simulation (``SimClock``, so a move's budget is a known
number of simulations whatever the machine's speed). A tree too small for the budget fills
and stops; a larger one searches more in the same time."""

import pytest
from test_brain_time import SimClock, charging
from tiny_models import random_model

from agz_jax.nets import models
from experiments.play import tree_capacity

SIZE = 9
OPENING = [40, 41, 31]  # three stones near the centre of the 9x9 board


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return random_model(tmp_path_factory.mktemp("cap") / "m", SIZE, seed=3, double=False)


@pytest.fixture(scope="module")
def model(model_dir):
    return models.load(model_dir)


def test_a_small_tree_fills_and_a_large_one_searches_more(model):
    with charging(SimClock(cost=0.0005)) as clock:  # 200 ms less the reserve: ~300 a move
        out = tree_capacity.measure(model, capacities=[16, 1024], moves=2, turn_ms=200,
                                    opening=OPENING, game_sims=8,
                                    brain_flags=["--threads", "1"], clock=clock)
    small, large = out["capacities"]
    assert out["game"][:3] == OPENING and len(out["game"]) == 3 + 4
    assert (small["capacity"], large["capacity"]) == (16, 1024)
    assert small["moves"] == large["moves"] == 2
    assert small["full_moves"] == 2  # 16 simulations fill the tree long before the budget
    assert large["full_moves"] == 0
    assert large["new_simulations"][0] > small["new_simulations"][0] > 0
    for row in out["moves"][16]:
        assert row["simulations"] + row["carried"] == 16 and row["overrun_ms"] < 0
    for row in out["moves"][1024]:
        assert 0 <= row["carried"] and row["simulations"] + row["carried"] < 1024
    assert "| 16 |" in tree_capacity.table(out)


@pytest.mark.long
def test_each_capacity_runs_in_a_process_of_its_own(model, model_dir):
    """As ``main`` runs it: the worker's rows come back through its JSON."""
    out = tree_capacity.measure(model, capacities=[16], moves=1, turn_ms=100, opening=OPENING,
                                game_sims=8, brain_flags=["--threads", "1"],
                                processes=str(model_dir))
    (row,) = out["moves"][16]
    assert out["processes"] and row["ply"] == 3 and row["threads"] == 1
    assert row["simulations"] + row["carried"] <= 16 and row["round"] == 0


@pytest.mark.parametrize("argv, words", [
    (["--capacities", "8192,x"], "comma-separated integers"),
    (["--capacities", "0"], "positive integers"),
    (["--moves", "0"], "--moves must be a positive integer"),
    (["--turn-ms", "-1"], "--turn-ms must be positive"),
])
def test_bad_flags_are_one_line_errors(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        tree_capacity.main(argv)
    assert e.value.code == 2
    assert words in capsys.readouterr().err.strip().splitlines()[-1]


def test_flags_pbrain_agz_does_not_have_are_refused(capsys):
    with pytest.raises(SystemExit):
        tree_capacity.main(["--model", "default", "--brain-flags=--no-such-flag"])
    assert "--no-such-flag are not pbrain-agz's flags" in capsys.readouterr().err
