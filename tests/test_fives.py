"""experiments.studies.fives: its positions against the plain-Python referee, its
scoring by hand, and that it reads the net's own policy (not the search's
move rules)."""

import copy
import json

import jax
import numpy as np
import pytest
import reference
from tiny_models import random_model

from agz_jax.nets import models
from experiments.studies import fives


@pytest.mark.parametrize("size", [7, 9, 15])
def test_positions_are_what_they_claim(size):
    cases = fives.positions(size, per_case=6, seed=size)
    assert len(cases) == 24
    for p in cases:
        game = reference.play_all(size, "freestyle", p.moves)
        assert not game.done and game.to_play == p.to_play
        assert game.last_action == p.moves[-1]
        mover = reference.stone_of(p.to_play)
        attacker = mover if p.task == "complete" else -mover
        empty = [a for a in range(size * size) if game.board[a // size][a % size] == 0]
        for a in empty:  # the attacker wins at the answer and nowhere else
            board = copy.deepcopy(game.board)
            board[a // size][a % size] = attacker
            assert (attacker in reference.winning_stones(board, "freestyle")) == (a == p.answer)
            board[a // size][a % size] = -attacker  # the defender wins nowhere
            assert -attacker not in reference.winning_stones(board, "freestyle")
        if p.task == "block":  # the last move was one of the attacker's four
            assert game.board[p.moves[-1] // size][p.moves[-1] % size] == attacker
        else:
            assert game.board[p.moves[-1] // size][p.moves[-1] % size] == -attacker


def test_positions_are_fixed_by_the_seed():
    assert fives.positions(9, 5, seed=1) == fives.positions(9, 5, seed=1)
    assert fives.positions(9, 5, seed=1) != fives.positions(9, 5, seed=2)
    with pytest.raises(fives.FivesError, match="at least 7x7"):
        fives.positions(6, 1, seed=0)


def test_score_by_hand():
    logits = np.array([[3.0, 1.0, 2.0, 9.0],   # answer 0: best among the legal (3 is not)
                       [0.0, 0.0, 5.0, 1.0],   # answer 1: rank 2
                       [1.0, 1.0, 1.0, 1.0]])  # answer 3: ties count as not below: rank 0
    legal = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]], bool)
    got = fives.score(logits, legal, np.array([0, 1, 3]))
    p0 = np.exp(3) / (np.exp(3) + np.exp(1) + np.exp(2))
    p1 = 1 / (2 + np.exp(5) + np.exp(1))
    assert got["positions"] == 3
    assert got["top1"] == pytest.approx(2 / 3)
    assert got["median_rank"] == 0.0
    assert got["p"] == pytest.approx((p0 + p1 + 0.25) / 3)


def test_opening_by_hand():
    size = 5  # centre (2, 2); its 3x3 holds points 6-8, 11-13, 16-18
    logits = np.zeros(25)
    logits[3] = np.log(5.0)  # x=3, y=0: 5 times any other point
    logits[0] = 9.0  # the most probable, but illegal
    legal = np.ones(25, bool)
    legal[0] = False
    got = fives.opening_of(logits, legal, size)
    total = 23 + 5.0
    assert (got["x"], got["y"]) == (3, 0)
    assert got["p"] == pytest.approx(5 / total)
    assert got["vs_uniform"] == pytest.approx(5 / total * 24)
    assert got["from_centre"] == 2.0
    assert got["centre_3x3"] == pytest.approx(9 / total)
    assert got["centre_rank"] == 1  # only x=3, y=0 is more probable (the rest tie)
    logits[12] = np.log(7.0)
    assert fives.opening_of(logits, legal, size)["centre_rank"] == 0
    logits[12] = 0.0
    assert "value_centre" not in got
    after = np.linspace(-0.5, 0.5, 25)
    got = fives.opening_of(logits, legal, size, after=after)
    assert got["value_centre"] == pytest.approx(after[12]) == pytest.approx(0.0)
    assert got["value_choice"] == pytest.approx(after[3])
    # Rising with the point's number: the 12 legal points after the centre rank
    # above it, and the last point is the value's first choice.
    assert got["value_centre_rank"] == 12
    assert (got["value_best_x"], got["value_best_y"]) == (4, 4)
    assert got["value_best"] == pytest.approx(0.5)
    after[24] = 9.0  # on an illegal point it neither ranks nor is chosen
    legal[24] = False
    got = fives.opening_of(logits, legal, size, after=after)
    assert got["value_centre_rank"] == 11 and (got["value_best_x"], got["value_best_y"]) == (3, 4)


@pytest.mark.long
def test_the_net_alone_not_the_search_rules(tmp_path, capsys):
    # A random net whose config turns on every forced-move rule: with the rules'
    # restriction the answer would be the only move (top-1 1.0); the net alone
    # is near uniform over ~60 moves.
    path = random_model(tmp_path / "m", size=9, seed=4)
    cfg = json.loads((path / "config.json").read_text())
    cfg["search"].update(forced_moves=True, answer_threats=True, answer_four_threes=True)
    (path / "config.json").write_text(json.dumps(cfg))
    result = fives.measure(models.load(str(path)), per_case=40, seed=0)
    assert set(result["tasks"]) == {"complete/black", "complete/white", "block/black",
                                    "block/white"}
    for row in result["tasks"].values():
        assert row["positions"] == 40
        assert row["top1"] < 0.3 and row["p"] < 0.1 and row["median_rank"] > 5
    assert fives.main([str(path), "--positions", "3", "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["tasks"]["block/white"]["positions"] == 3
    # The opening is the net's own first choice on the empty board.
    model = models.load(str(path))
    rules = model.rules
    empty = jax.tree.map(lambda x: x[None], rules.init())
    logits, _ = model.nets.evaluate(model.variables, model.nets.observe(rules, empty),
                                    empty.to_play)
    best = int(np.argmax(np.asarray(logits[0])))
    assert (line["opening"]["x"], line["opening"]["y"]) == (best % 9, best // 9)
    # Black's value after its first move at the centre is the negated value of
    # that position, which white is to move in.
    centre = jax.tree.map(lambda x: x[None], rules.from_moves([4 * 9 + 4]))
    _, value = model.nets.evaluate(model.variables, model.nets.observe(rules, centre),
                                   centre.to_play)
    assert int(centre.to_play[0]) == 1
    assert line["opening"]["value_centre"] == pytest.approx(-float(value[0]), abs=1e-5)
    assert fives.main([str(path), "--positions", "2"]) == 0
    text = capsys.readouterr().out
    assert "empty board: opens x=" in text and "at the centre" in text


def test_bad_input_is_one_line(tmp_path, capsys):
    assert fives.main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: model") and err.count("\n") == 1
    assert fives.main(["x", "--positions", "0"]) == 2
    assert "--positions must be >= 1" in capsys.readouterr().err
