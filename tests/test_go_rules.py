"""The Go rules (``agz_jax.go.rules``) against the plain-Python referee
(tests/go_reference.py) on random games and random boards, plus known-answer
positions: captures, suicide, simple ko, positional superko, passes, the move
cap, area scoring with komi. One compile per (size, superko)."""

from __future__ import annotations

import functools

import go_reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agz_jax.go import rules as R
from agz_jax.go.rules import BLACK, WHITE, Rules, from_text, point


@functools.cache
def fns(rules: Rules):
    """jitted (step, look) of one game; ``look`` gives the legal mask, liberties,
    score, winner and areas. One compile per ``Rules`` for the whole module."""
    def look(s):
        return (rules.legal_mask(s), rules.liberties(s), rules.score(s), rules.winner(s),
                rules.areas(s))
    return jax.jit(rules.step), jax.jit(look)


def own_eyes(board: np.ndarray, size: int, me: int) -> np.ndarray:
    """bool[A]: empty points all of whose neighbours are ``me``'s stones."""
    nbr = R.neighbour_table(size)
    padded = np.append(board, me)
    return (board == 0) & np.all(padded[nbr] == me, axis=1)


def play_random_games(rules: Rules, games: int, plies: int, seed: int):
    """Play ``games`` random games in JAX and in the reference side by side,
    comparing every ply; return the number of positions compared.

    Moves: mostly uniform over the legal points that do not fill one's own eye
    (so the games run long and capture a lot), sometimes a pass, sometimes any
    action at all (often illegal: the ``illegal`` flag must follow the
    reference's refusal, and nothing else may change).
    """
    rng = np.random.default_rng(seed)
    step, look = fns(rules)
    a = rules.num_points
    compared = 0
    for _ in range(games):
        state = rules.init()
        game = ref.Game(rules.size, rules.komi, rules.superko, rules.max_moves)
        refused = False
        for _ in range(plies):
            mask, libs, score, winner, _ = (np.asarray(x) for x in look(state))
            board = np.asarray(state.board)
            assert board.tolist() == game.board
            assert int(state.to_play) == (BLACK if game.to_play == 1 else WHITE)
            assert bool(state.done) == game.done
            assert int(state.num_moves) == game.num_moves
            assert bool(state.illegal) == refused
            assert mask.tolist() == (game.legal() if not game.done else [False] * (a + 1))
            assert libs.tolist() == game.liberties()
            assert score == game.score()
            assert winner == (BLACK if score > 0 else WHITE if score < 0 else -1)
            compared += 1
            u = rng.random()
            choices = np.flatnonzero(mask[:a] & ~own_eyes(board, rules.size, game.to_play))
            if u < 0.05:
                action = int(rng.integers(-1, a + 2))
            elif u < 0.07 or not len(choices):
                action = a
            else:
                action = int(rng.choice(choices))
            if not game.done and not game.play(action):
                refused = True
            state = step(state, jnp.int32(action))
    return compared


FIVE = Rules(size=5, komi=5.5)
FIVE_SIMPLE = Rules(size=5, komi=0, superko=False, max_moves=40)  # ties; the cap is hit
NINE = Rules(size=9, komi=7.5)
NINETEEN = Rules(size=19)


@pytest.mark.parametrize("rules,games,plies", [
    (FIVE, 10, 70), (FIVE_SIMPLE, 10, 50), (NINE, 4, 130),
    pytest.param(NINETEEN, 1, 80, marks=pytest.mark.long)],
    ids=["5-superko", "5-simple-ko", "9", "19"])
def test_random_games_match_the_reference(rules, games, plies):
    assert play_random_games(rules, games, plies, seed=rules.size) == games * plies


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cells=st.lists(st.sampled_from([0, 0, 1, -1]), min_size=25, max_size=25),
       to_play=st.sampled_from([BLACK, WHITE]))
def test_set_up_boards_match_the_reference(cells, to_play):
    """Any position (chains without liberties removed first): chains labelled
    from scratch, liberties, legal moves and the score agree."""
    size = 5
    for p in range(size * size):  # remove the dead groups a random fill makes
        if cells[p] and not ref.group(cells, size, p)[1]:
            for s in ref.group(cells, size, p)[0]:
                cells[s] = 0
    diagram = "\n".join("".join(".XO"[v] for v in cells[r * 5:r * 5 + 5]) for r in range(5))
    state = R.from_text(FIVE, diagram, to_play)
    game = ref.Game(size, FIVE.komi, board=cells, to_play=1 if to_play == BLACK else -1)
    mask, libs, score, _, _ = (np.asarray(x) for x in fns(FIVE)[1](state))
    assert mask.tolist() == game.legal()
    assert libs.tolist() == game.liberties()
    assert score == game.score()
    chain = np.asarray(state.chain)
    for p in range(size * size):  # one id per group, and it is one of its points
        if cells[p]:
            stones = ref.group(cells, size, p)[0]
            assert {int(chain[s]) for s in stones} == {min(stones)}


def play(rules, moves, state=None):
    """Play GTP vertices with the jitted step."""
    step, _ = fns(rules)
    state = rules.init() if state is None else state
    for m in moves:
        state = step(state, jnp.int32(point(rules.size, m)))
    return state


def look(rules, state):
    """(mask, liberties [H, W], score, winner, areas) as numpy."""
    mask, libs, score, winner, areas = (np.asarray(x) for x in fns(rules)[1](state))
    return mask, libs.reshape(rules.size, rules.size), float(score), int(winner), areas


def legal(rules, state, vertex):
    return bool(look(rules, state)[0][point(rules.size, vertex)])


def rows(rules, state):
    return R.to_text(rules, state).splitlines()


def test_capture_removes_the_chain_and_frees_its_points():
    s = from_text(NINE, """
        . . . . . . . . .
        . . X X . . . . .
        . X O O X . . . .
        . . X O X . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .""", to_play=BLACK)
    libs = look(NINE, s)[1]
    assert libs[2, 2] == libs[2, 3] == libs[3, 3] == 1  # the white chain's last: D5
    assert libs[2, 1] == 3 and libs[1, 2] == 4
    s = play(NINE, ["D5"], s)
    assert rows(NINE, s)[2:5] == [". X . . X . . . .", ". . X . X . . . .", ". . . X . . . . ."]
    assert int(s.ko) == -1 and (np.asarray(s.chain)[[20, 21, 30]] == -1).all()
    assert (np.asarray(s.played_at)[[20, 21, 30]] == -1).all()
    assert look(NINE, s)[1][2, 1] == 4  # B7 has its liberty on C7 back


KO = """
. X O . . . . . .
X O . O . . . . .
. X O . . . . . .
. . . . . . . . .
. . . . . . . . .
. . . . . . . . .
. . . . . . . . .
. . . . . . . . .
. . . . . . . . .
"""


def test_simple_ko():
    s = play(NINE, ["C8"], from_text(NINE, KO, to_play=BLACK))  # takes the stone on B8
    assert rows(NINE, s)[1] == "X . X O . . . . ."
    assert int(s.ko) == point(9, "B8") and not bool(s.illegal)
    assert not legal(NINE, s, "B8")  # white may not retake at once
    assert bool(play(NINE, ["B8"], s).illegal)
    s = play(NINE, ["J1", "J2"], s)  # a ko threat and its answer
    assert int(s.ko) == -1 and legal(NINE, s, "B8")
    s = play(NINE, ["B8"], s)
    assert rows(NINE, s)[1] == "X O . O . . . . ." and int(s.ko) == point(9, "C8")
    s = play(NINE, ["pass"], s)  # a pass lifts the ko: white may fill it...
    assert int(s.ko) == -1 and legal(NINE, s, "C8")


DOUBLE_KO = """
. X O . .
X O . O .
. X O . .
X . X O .
. X O . .
"""
"""Two kos: white holds the upper one (its stone on B4 can be taken at C4), black
the lower one (its stone on C2 can be taken at B2)."""


@pytest.mark.parametrize("rules", [FIVE, FIVE_SIMPLE], ids=["superko", "simple-ko"])
def test_positional_superko_forbids_what_simple_ko_allows(rules):
    """Black takes one ko, white the other, black passes, white retakes the first:
    black retaking the second recreates the start. It is not an immediate
    recapture, so simple ko allows it; positional superko does not."""
    moves = ["C4", "B2", "pass", "B4"]
    start = from_text(rules, DOUBLE_KO, to_play=BLACK)
    s = play(rules, moves, start)
    assert not bool(s.illegal) and int(s.ko) == point(5, "C4")
    assert legal(rules, s, "C2") is not rules.superko
    after = play(rules, ["C2"], s)
    assert bool(after.illegal) is rules.superko
    if not rules.superko:
        assert np.array_equal(after.board, start.board)
    game = ref.Game(5, superko=rules.superko, board=start.board.tolist())
    for m in moves:
        assert game.play(point(5, m))
    assert game.legal()[point(5, "C2")] is not rules.superko


def test_suicide_is_illegal_but_a_capturing_move_is_not():
    s = from_text(NINE, """
        . X . . . . . . .
        X . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . O O
        . . . . . . O X O
        . . . . . . O X X
        . . . . . . O X .""", to_play=WHITE)
    assert not legal(NINE, s, "A9")  # a one-stone suicide
    assert legal(NINE, s, "J1")  # no liberty of its own, but it takes the black four
    s = play(NINE, ["J1"], s)
    assert rows(NINE, s)[6:] == [". . . . . . O . O", ". . . . . . O . .", ". . . . . . O . O"]
    assert int(s.ko) == -1  # four stones taken: no ko


def test_multi_stone_suicide_is_illegal():
    s = from_text(NINE, """
        . X O . . . . . .
        X X O . . . . . .
        O O O . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .""", to_play=BLACK)
    assert not legal(NINE, s, "A9")  # would leave black's three without a liberty
    assert bool(play(NINE, ["A9"], s).illegal)
    assert legal(NINE, s._replace(to_play=jnp.int32(WHITE)), "A9")  # captures them


def test_two_passes_end_the_game_and_a_move_between_resets_them():
    s = play(NINE, ["E5", "pass", "D4", "pass"])
    assert not bool(s.done) and int(s.passes) == 1
    s = play(NINE, ["pass"], s)
    assert bool(s.done) and int(s.num_moves) == 5 and int(s.last_action) == 81
    assert not look(NINE, s)[0].any()
    frozen = play(NINE, ["A1", "pass"], s)  # a finished game does not change
    assert all(bool(jnp.array_equal(a, b)) for a, b in zip(frozen, s, strict=True))


def test_the_move_cap_ends_the_game():
    s = play(FIVE_SIMPLE, ["A1", "B1"] * 2 + ["pass"] * 0)
    assert bool(s.illegal)  # A1 twice: occupied
    s = FIVE_SIMPLE.init()._replace(num_moves=jnp.int32(FIVE_SIMPLE.max_moves - 1))
    s = play(FIVE_SIMPLE, ["C3"], s)
    assert bool(s.done) and not bool(s.illegal)


def test_area_score_with_komi_and_winner():
    s = from_text(NINE, """
        . . . X O . . . .
        . . . X O . . . .
        . . . X O . . . .
        . . . X O . . . .
        X X X X O . . . .
        O O O O O . . . .
        . . . . . . . . .
        . . . . . . O . .
        . . . . . . . . X""")
    # black: 9 stones and the 12 points of the upper left; white: 11 stones (the
    # big region touches J1 too: nobody's)
    _, _, score, winner, areas = look(NINE, s)
    assert areas.tolist() == [21, 11] and score == 21 - 11 - 7.5 and winner == BLACK
    reward = jax.jit(NINE.reward)
    assert float(reward(s, BLACK)) == 0.0  # not over yet
    over = s._replace(done=jnp.bool_(True))
    assert float(reward(over, BLACK)) == 1.0 and float(reward(over, WHITE)) == -1.0


def test_played_at_and_vertices():
    s = play(NINE, ["E5", "pass", "A9"])
    pa = np.asarray(s.played_at)
    assert pa[point(9, "E5")] == 0 and pa[point(9, "A9")] == 2 and (pa >= 0).sum() == 2
    assert int(s.rank) == -1
    assert R.vertex(9, point(9, "J1")) == "J1" and point(9, "A9") == 0 and point(9, "pass") == 81
    assert point(19, "T1") == 360 and R.vertex(19, 361) == "pass"
    for bad in ("I5", "Z1", "A10", "A0", ""):
        with pytest.raises(ValueError, match="vertex"):
            point(9, bad)


@pytest.mark.parametrize("kwargs,field", [
    (dict(size=1), "rules.size"), (dict(size=20), "rules.size"), (dict(size=9.0), "rules.size"),
    (dict(komi=7.3), "rules.komi"), (dict(komi=float("nan")), "rules.komi"),
    (dict(superko=1), "rules.superko"), (dict(max_moves=0), "rules.max_moves")])
def test_rules_validation_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Rules(**kwargs)


def test_from_text_rejects_bad_diagrams():
    with pytest.raises(ValueError, match="9x9"):
        from_text(NINE, "X O .")


def test_sorted_history_search():
    """``insert`` keeps ``seen`` sorted; ``lower_bound`` finds the first row not
    less than each key, ties on the first word included."""
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 4, (40, 2)).astype(np.uint32)
    probes = rng.integers(0, 5, (30, 2)).astype(np.uint32)

    @jax.jit
    def run(keys, probes):
        table = jnp.full((41, 2), R.EMPTY_SLOT, jnp.uint32)
        table = jax.lax.fori_loop(0, 40, lambda i, t: R.insert(t, keys[i]), table)
        return table, R.lower_bound(table, probes)

    table, at = (np.asarray(x) for x in run(keys, probes))
    assert [tuple(r) for r in table[:40]] == sorted(tuple(k) for k in keys)
    for p, i in zip(probes, at, strict=True):
        assert i == sum(tuple(r) < tuple(p) for r in table)
