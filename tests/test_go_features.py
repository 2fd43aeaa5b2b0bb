"""The Table 1 feature planes (``agz_jax.go.features``) on hand-made 9x9 and
19x19 positions, against the plain-Python referee on random positions, and
their equivariance under the board's symmetries. Every 9x9 call goes through
one jitted ``vmap`` over 8 positions (one compile per size for the module)."""

from __future__ import annotations

import functools

import go_reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny_models import heavy_jit

from agz_jax.go import features as F
from agz_jax.go import rules as R
from agz_jax.go.rules import BLACK, WHITE, Rules, from_text, point

NINE = Rules(size=9)
NINETEEN = Rules(size=19)
BATCH = {9: 8, 19: 2}


@functools.cache
def planes_fn(rules: Rules):
    return heavy_jit(jax.vmap(functools.partial(F.features, rules)))  # ladders: deep loops


def planes(rules: Rules, *states) -> np.ndarray:
    """float32[len(states), H, W, C], through the module's one compiled batch."""
    batch = BATCH[rules.size]
    padded = list(states) + [states[0]] * (batch - len(states))
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *padded)
    return np.asarray(planes_fn(rules)(stacked))[:len(states)]


def plane(x: np.ndarray, name: str) -> np.ndarray:
    """int [H, W] of one named channel."""
    return x[..., F.channel(name)].astype(int)


def marked(x: np.ndarray, name: str, size: int = 9) -> set[str]:
    """The GTP vertices where a channel is on."""
    from agz_jax.go.rules import vertex
    return {vertex(size, int(p)) for p in np.flatnonzero(plane(x, name))}


def test_channel_layout():
    names = F.channel_names()
    assert len(names) == F.num_channels() == 36
    assert names[:3] == ["stone:black", "stone:white", "stone:empty"]
    assert F.channel("liberties:>=4") == 6 and F.channel("liberties_after:>=6") == 12
    assert F.channel("legal") == 13 and F.channel("turns_since:>=5") == 18
    assert F.channel("capture_size:0") == 19 and F.channel("ladder") == 26
    assert names[27:] == [f"rank:{r}d" for r in range(1, 10)]
    assert F.channel_names(0)[-1] == "constant" and F.num_channels(0) == 28


POSITION = """
. X O . . . . . .
X O . O . . . . .
. X O . . . . . .
. . . . . . . . .
. . X X X . . O .
. . X O O X . . .
. . . X . . . . .
. . . . . . . . .
O . . . . . . . X
"""
"""Black to move: a ko to take at C8, the white pair D4 E4 in atari (E3 takes
two), lone stones in two corners."""


def test_planes_match_the_referee_on_a_hand_made_position():
    """Every stone, liberty, legality, liberties-after and capture-size entry of a
    hand-made position, against the plain-Python referee's own counts."""
    s = from_text(NINE, POSITION, to_play=BLACK)
    x = planes(NINE, s)[0]
    game = ref.Game(9, board=np.asarray(s.board).tolist())
    check_against_reference(x, game)


def check_against_reference(x: np.ndarray, game: ref.Game):
    size = game.size
    board = np.array(game.board).reshape(size, size)
    assert (plane(x, "stone:black") == (board == 1)).all()
    assert (plane(x, "stone:white") == (board == -1)).all()
    assert (plane(x, "stone:empty") == (board == 0)).all()
    libs = np.array(game.liberties()).reshape(size, size)
    for k, name in enumerate(("1", "2", "3", ">=4"), start=1):
        want = (libs >= 4) if k == 4 else (libs == k)
        assert (plane(x, f"liberties:{name}") == (want & (board != 0))).all(), name
    legal = np.array(game.legal()[:-1]).reshape(size, size)
    assert (plane(x, "legal") == legal).all()
    after = np.zeros((size, size), int)
    captured = np.zeros((size, size), int)
    for p in np.flatnonzero(legal):
        new, n = ref.try_move(game.board, size, int(p), game.to_play)
        after.flat[p] = len(ref.group(new, size, int(p))[1])
        captured.flat[p] = n
    for k in range(1, 7):
        want = (after >= 6) if k == 6 else (after == k)
        name = ">=6" if k == 6 else str(k)
        assert (plane(x, f"liberties_after:{name}") == (want & legal)).all(), name
    for k in range(7):
        want = (captured >= 6) if k == 6 else (captured == k)
        name = ">=6" if k == 6 else str(k)
        assert (plane(x, f"capture_size:{name}") == (want & legal)).all(), name


def test_liberties_after_capture_size_and_legality_known_answers():
    s = from_text(NINE, """
        . X . . . . . . .
        X . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . O O
        . . . . . . O X O
        . . . . . . O X X
        X . . . . . O X .""", to_play=WHITE)
    x = planes(NINE, s)[0]
    assert marked(x, "capture_size:4") == {"J1"}  # takes the black four
    assert plane(x, "capture_size:0").sum() == plane(x, "legal").sum() - 1
    assert "A9" not in marked(x, "legal")  # suicide: black's stones have 2 liberties
    assert {"J1", "B1", "A2"} <= marked(x, "liberties_after:2")  # J1: H1, J2 freed
    assert {"A5", "J5"} <= marked(x, "liberties_after:3")  # an edge
    assert {"E5", "H5"} <= marked(x, "liberties_after:4")  # H5 joins G4's chain of three
    assert marked(x, "liberties_after:>=6") == {"G4"}  # joins both white chains: 7
    assert plane(x, "liberties:1").sum() == 4 and plane(x, "liberties:>=4").sum() == 3
    black = planes(NINE, s._replace(to_play=jnp.int32(BLACK)))[0]
    assert "J1" not in marked(black, "legal")  # black's own four would have none
    assert marked(black, "capture_size:1") == set()


def test_liberties_after_six_or_more_and_capture_size_six_or_more():
    s = from_text(NINE, """
        . . . . . . . . .
        . X X X X X X . .
        . X O O O O O X .
        . X O O . X X . .
        . . X X X . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .""", to_play=BLACK)
    x = planes(NINE, s)[0]
    # E6 takes the white seven and joins three black chains
    assert marked(x, "capture_size:>=6") == {"E6"}
    assert "E6" in marked(x, "liberties_after:>=6")


def test_turns_since():
    moves = ["E5", "D5", "pass", "C5", "F5", "pass", "G5", "E4"]
    start = from_text(NINE, "\n".join([". " * 9] * 8 + [". " * 8 + "X"]))
    s = NINE.play([point(9, m) for m in moves], start)
    x = planes(NINE, s)[0]
    assert marked(x, "turns_since:1") == {"E4"}  # the last move
    assert marked(x, "turns_since:2") == {"G5"}
    assert marked(x, "turns_since:3") == set()  # a pass
    assert marked(x, "turns_since:4") == {"F5"}
    assert marked(x, "turns_since:>=5") == {"C5", "D5", "E5", "J1"}  # J1: set up, age unknown


def test_turns_since_forgets_captured_stones():
    s = NINE.play([point(9, m) for m in ["A2", "A1", "B1", "pass", "A1"]])
    x = planes(NINE, s)[0]  # B1 took white A1 (ply 1); black A1 is ply 4
    assert marked(x, "turns_since:1") == {"A1"} and marked(x, "turns_since:3") == {"B1"}
    assert marked(x, "turns_since:>=5") == {"A2"}
    stones = plane(x, "stone:black") + plane(x, "stone:white")
    ages = sum(plane(x, n) for n in F.channel_names() if n.startswith("turns_since"))
    assert (ages == stones).all()


def test_ranks_one_hot_or_zero():
    s = NINE.init()._replace(rank=jnp.int32(3))
    x, unknown = planes(NINE, s, NINE.init())
    assert (x[..., F.channel("rank:4d")] == 1).all()
    assert x[..., 27:].sum() == 81
    assert unknown[..., 27:].sum() == 0  # rank -1: no plane
    constant = F.rank_planes(0, jnp.int32(5), 4)
    assert constant.shape == (4, 1) and bool(constant.all())
    assert np.asarray(F.rank_planes(3, jnp.int32(2), 2)).tolist() == [[False, False, True]] * 2


def test_planes_are_equivariant_under_the_eight_symmetries():
    """A mid-game position (random legal moves, played from a board set up so the
    stones' ages are known) seen through each of the 8 dihedral maps: every plane
    of the mapped position is the mapped plane."""
    rng = np.random.default_rng(3)
    s = NINE.init()
    for _ in range(50):
        legal = np.flatnonzero(plane(planes(NINE, s)[0], "legal"))
        s = NINE.play([int(rng.choice(legal))], s)
    boards = np.asarray(s.board).reshape(9, 9)
    maps = [lambda b, k=k: np.rot90(b, k) for k in range(4)]
    maps += [lambda b, k=k: np.rot90(b, k).swapaxes(0, 1) for k in range(4)]
    states = [s._replace(board=jnp.asarray(m(boards).reshape(-1)),
                         played_at=jnp.asarray(m(np.asarray(s.played_at).reshape(9, 9))
                                               .reshape(-1))) for m in maps]
    states = [R.setup(NINE, st.board, st.to_play)._replace(
        played_at=st.played_at, num_moves=s.num_moves) for st in states]
    xs = planes(NINE, *states)
    for m, x in zip(maps, xs, strict=True):
        assert np.array_equal(x, m(xs[0])), "a plane is not equivariant"
    assert plane(xs[0], "turns_since:1").sum() == 1


def test_random_positions_match_the_referee():
    rng = np.random.default_rng(7)
    s = NINE.init()
    game = ref.Game(9)
    checked = 0
    for ply in range(90):
        x = planes(NINE, s)[0]
        if ply % 10 == 9:
            check_against_reference(x, game)
            checked += 1
        legal = np.flatnonzero(plane(x, "legal"))
        eyes = [p for p in legal if all(game.board[n] == game.to_play
                                        for n in ref.neighbours(9, int(p)))]
        choices = [int(p) for p in legal if p not in eyes] or [81]
        move = choices[rng.integers(len(choices))]
        assert game.play(move)
        s = NINE.play([move], s)
    assert checked == 9


@pytest.mark.parametrize("rules", [NINETEEN], ids=["19x19"])
def test_nineteen_by_nineteen(rules):
    """The planes on 19x19: a corner fight against the referee, the ages, and a
    long ladder (see test_go_ladder for the ladder itself)."""
    s = rules.play([point(19, v) for v in
                    ("D4", "D5", "E4", "E5", "F4", "F5", "C5", "C4", "B4", "C3", "B3", "D3")])
    x = planes(rules, s)[0]
    game = ref.Game(19)
    for v in ("D4", "D5", "E4", "E5", "F4", "F5", "C5", "C4", "B4", "C3", "B3", "D3"):
        assert game.play(point(19, v))
    check_against_reference(x, game)
    assert marked(x, "turns_since:1", 19) == {"D3"} and marked(x, "turns_since:2", 19) == {"B3"}
    assert x.shape == (19, 19, 36)
