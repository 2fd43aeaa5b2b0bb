"""experiments.studies.reuse (engine against engine) and experiments.play.brain_timing, on fakes:
the game loop, the colours, the bookkeeping and the reports, without compiling."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from agz_jax.game.gomoku import Rules
from experiments.play import brain_timing
from experiments.studies import reuse

SIZE = 9


class LineEngine:
    """Plays the first empty point of its row (black row 0, white row 1...), so a
    game is decided in a known number of moves; reports fixed carried counts."""

    def __init__(self, row: int, carried: int):
        self.row, self.carried, self.forgotten = row, carried, 0

    def forget(self):
        self.forgotten += 1

    def analyse(self, rules, state, *, simulations, deadline):
        board = np.asarray(state.board).reshape(SIZE, SIZE)
        row = self.row if int(state.to_play) == 0 else self.row + 1
        col = int(np.flatnonzero(board[row] == 0)[0])
        return SimpleNamespace(action=row * SIZE + col, carried=self.carried,
                               simulations=simulations - self.carried)


def test_play_game_alternates_and_counts():
    rules = Rules(SIZE)
    black, white = LineEngine(0, 3), LineEngine(3, 0)
    stats = []
    # Black fills row 0 from column 0, white row 4: black's fifth stone wins.
    winner = reuse.play_game((black, white), rules, [], sims=8, ms=None, stats=stats)
    assert winner == 0 and len(stats) == 9
    assert black.forgotten == white.forgotten == 1
    assert [s["carried"] for s in stats] == [3, 0] * 4 + [3]
    assert all(s["new"] == 8 - s["carried"] for s in stats)
    # From an opening (3 stones: white to move first), white's row 4 wins first.
    opening = [8 * SIZE + 8, 7 * SIZE + 8, 6 * SIZE + 8]
    stats = []
    assert reuse.play_game((black, white), rules, opening, sims=8, ms=None,
                           stats=stats) == 1
    assert stats[0]["side"] == id(white)


def test_report_tables(tmp_path):
    row = {"model": "m", "games": 200, "sims": 32, "ms": None, "max_sims": 32, "seed": 1,
           "reuse_score": 0.5, "low": 0.43, "high": 0.57, "wins": 99, "draws": 2, "losses": 99,
           "reuse": {"carried_per_move": 10.9, "new_sims_per_move": 20.1, "ms_per_move": 99},
           "no_reuse": {"carried_per_move": 0.0, "new_sims_per_move": 31.0, "ms_per_move": 131},
           "jax_backend": "cpu"}
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(json.dumps(row) + "\n" + json.dumps({**row, "sims": None, "ms": 150.0,
                                                            "max_sims": 1024}) + "\n")
    text = reuse.report(ledger, tmp_path / "r.md")
    assert "| 32 visits | m | 200 | 0.500 (0.43–0.57) | 99-2-99 | 10.9 | 20.1, 31.0 |" in text
    assert "| 150 ms (≤1024) |" in text


class FakeBrain:
    """Answers BEGIN/TURN with the next free point of row 0 after a fixed delay;
    once row 0 has five, the next TURN is an ERROR (the game is over)."""

    def __init__(self):
        self.sent, self.queue, self.col = [], [], 0

    def send(self, line):
        self.sent.append(line)
        word = line.split(" ")[0]
        if word == "RESTART":
            self.queue.append("OK")
            self.col = 0
        elif word in ("BEGIN", "TURN"):
            if self.col >= 5:
                self.queue.append("ERROR the game is over")
            else:
                self.queue.append(f"{self.col},0")
                self.col += 1

    def reply(self):
        return self.queue.pop(0)


def test_timing_games_restart_until_enough_moves():
    brain = FakeBrain()
    times = brain_timing.play(brain, SIZE, 7, ["INFO timeout_turn 100"], 5000.0,
                              np.random.default_rng(0))
    assert len(times) == 7 and all(t >= 0 for t in times)
    assert brain.sent.count("RESTART") == 2 and brain.sent.count("INFO timeout_turn 100") == 2
    lefts = [int(s.split()[2]) for s in brain.sent if s.startswith("INFO time_left")]
    # Each game counts the match clock down from timeout_match again.
    assert lefts[0] == 5000 and lefts.count(5000) == 2 and len(lefts) == 8
    first = lefts[:lefts.index(5000, 1)]
    assert first == sorted(first, reverse=True)


@pytest.mark.parametrize("bad", [[], ["--games", "3", "--sims", "4"], ["--sims", "0"],
                                 ["--sims", "4", "--ms", "10"]])
def test_reuse_cli_refuses_bad_arguments(bad, capsys):
    with pytest.raises(SystemExit) as e:
        reuse.main(bad)
    assert e.value.code == 2 and "error:" in capsys.readouterr().err
