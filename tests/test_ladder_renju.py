"""The ladder under renju, end to end with a tiny random net on 9x9 (the rule's
reading is size-generic; the renju15 opening set alone is 15x15): the ledger
records the rule, no black stone of any game was on a point forbidden when it
was played, the table is written, and every mix of rules is refused in one line.

The ledger keeps each match's score, not its moves, so the games are taken from
``players.play``'s results as the ladder plays them."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from test_ladder import one_line_error
from tiny_models import random_model

from agz_jax.game import renju
from agz_jax.play import players
from agz_jax.studies import ledger as ladder_ledger
from experiments.play import ladder as ladder_cli

SIZE = 9


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("AGZ_JAX_NO_CACHE", "1")


@pytest.fixture(scope="module")
def renju_model(tmp_path_factory):
    return random_model(tmp_path_factory.mktemp("renju_ladder") / "m", SIZE, rule="renju")


def black_fouls(moves: np.ndarray, length: int) -> tuple[list, int]:
    """Replay one game from the empty board: the black moves on a point
    ``renju.foul_code`` forbids when played, and the number of black turns at
    which some empty point was forbidden (so that the check is not vacuous)."""
    board = np.zeros(SIZE * SIZE, np.int8)
    fouls, tested = [], 0
    forbidden = jax.jit(renju.forbidden)
    for ply in range(length):
        p = int(moves[ply])
        assert 0 <= p < SIZE * SIZE and board[p] == 0, (ply, p)
        if ply % 2 == 0:
            if any(renju.foul_code(board, int(q))
                   for q in np.flatnonzero(np.asarray(forbidden(board)))):
                tested += 1
            code = renju.foul_code(board, p)
            if code:
                fouls.append((ply, divmod(p, SIZE), renju.FOULS[code]))
        board[p] = 1 if ply % 2 == 0 else -1
    assert (moves[length:] == -1).all()
    return fouls, tested


@pytest.mark.long
def test_a_renju_ladder_end_to_end(tmp_path, renju_model, capsys, monkeypatch):
    """A renju net (mcts, 2 simulations) against random and mentor:0, 4 games
    each: two ledger lines on 9x9 renju, no foul in any game, the table and
    plot; a rerun plays nothing."""
    played = []
    real_play = players.play

    def recording(rules, *args, **kwargs):
        result, wall = real_play(rules, *args, **kwargs)
        played.append((rules, result))
        return result, wall

    monkeypatch.setattr(players, "play", recording)
    # A match's seed hashes the players' names: a relative path keeps the games
    # the same on every run (the temporary directory's name changes).
    monkeypatch.chdir(renju_model.parent)
    path = tmp_path / "games.jsonl"
    candidate = f"mcts:./{renju_model.name}:2"
    argv = ["--no-default-pool", "--pool", "random", "--pool", "mentor:0",
            "--candidate", candidate, "--games", "4", "--ledger", str(path)]
    assert ladder_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert f"2 matches to play on {SIZE}x{SIZE} renju" in out and "2 matches played" in out

    lines = ladder_ledger.read_ledger(path)
    assert [(x["a"], x["b"]) for x in lines] == [(candidate, "random"), (candidate, "mentor:0")]
    for x in lines:
        assert (x["rule"], x["size"], x["games"], x["sims"]) == ("renju", SIZE, 4, [2, None])
    assert len(played) == 2
    tested = 0
    for rules, result in played:
        assert (rules.size, rules.rule) == (SIZE, "renju")
        moves, length = np.asarray(result.moves), np.asarray(result.length)
        for g in range(moves.shape[1]):
            fouls, n = black_fouls(moves[:, g], int(length[g]))
            assert not fouls, f"game {g}: black played forbidden points {fouls}"
            tested += n
    assert tested > 0, "no game ever had a forbidden point: the check read nothing"

    table = (tmp_path / "ladder.md").read_text()
    assert f"`{candidate}`" in table and "`mentor:0`" in table and "anchored at `random`" in table
    assert (tmp_path / "ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    monkeypatch.setattr(players, "play", lambda *a, **k: pytest.fail("played again"))
    assert ladder_cli.main(argv) == 0
    assert "0 matches played" in capsys.readouterr().out
    assert len(ladder_ledger.read_ledger(path)) == 2


def test_mixing_rules_is_refused_in_one_line(tmp_path, renju_model, capsys):
    """A renju player against a freestyle ledger, a freestyle pool member or
    --rule freestyle, and players without a net under --rule freestyle against
    a renju ledger: each refused before anything is played."""
    freestyle_model = random_model(tmp_path / "free", SIZE, seed=1)
    path = tmp_path / "games.jsonl"
    candidate = ["--candidate", f"mcts:{renju_model}:2", "--games", "2", "--ledger", str(path)]
    line = {"a": "mentor:0", "b": "random", "wins": 2, "draws": 0, "losses": 0, "games": 2,
            "seed": 3, "size": SIZE}
    path.write_text(json.dumps({**line, "rule": "freestyle"}) + "\n")
    one_line_error(capsys, ["--no-default-pool", "--pool", "random", *candidate],
                   f"is {SIZE}x{SIZE} freestyle, not {SIZE}x{SIZE} renju")
    path.unlink()
    one_line_error(capsys, ["--no-default-pool", "--pool", f"policy:{freestyle_model}",
                            *candidate], "rules differ")
    one_line_error(capsys, ["--no-default-pool", "--pool", "random", "--rule", "freestyle",
                            *candidate], "--rule freestyle differs from the rule of")
    path.write_text(json.dumps({**line, "rule": "renju"}) + "\n")
    one_line_error(capsys, ["--no-default-pool", "--pool", "random", "--candidate", "mentor:1",
                            "--size", str(SIZE), "--rule", "freestyle", "--games", "2",
                            "--ledger", str(path)],
                   f"is {SIZE}x{SIZE} renju, not {SIZE}x{SIZE} freestyle")
    assert len(ladder_ledger.read_ledger(path)) == 1
    # The renju openings are 15x15: on 9x9 they are refused, naming the flag.
    path.unlink()
    one_line_error(capsys, ["--no-default-pool", "--pool", "random", *candidate,
                            "--openings", "renju15", "--opening-plies", "0"],
                   "--openings: ")
    assert not path.exists()
