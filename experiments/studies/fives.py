"""What a net's raw policy knows of the game's last tactic: completing a five,
and blocking the opponent's; and where it opens on the empty board.

    python -m experiments.studies.fives models/curriculum models/campaign
    python -m experiments.studies.fives --json \\
        experiments/studies/ablation_state/runs/single/seed_0/snapshots/it48

The positions: one side (the *attacker*) has four stones in a row, closed at
one end by a stone of the other side (the *defender*) and open at the other,
at the one point that makes five; each side has a few more stones scattered
at random. Two tasks, each with either colour to move:

- **complete**: the attacker to move. The five point wins at once.
- **block**: the defender to move. Every other move loses at once.

Every position is drawn from ``--seed`` and checked before use: the
attacker's only five point is the answer, the defender has none, and the
stone counts fit the colour to move. The last move is a defender's stone in
``complete`` and the attacker stone that made the four in ``block``, as in a
game. The same seed gives the same positions for every net of a board size.

For each net, task and colour to move: how often the answer is the policy's
first choice among the legal moves, the mean probability the policy gives it,
and its median rank (0: first). The policy is the net's own, with no search
and none of the search's hand-written move rules (``search.forced_moves`` and
the rest restrict the moves a search looks at, not the net), so this measures
what the net has learned by itself.

The opening: the policy's first choice on the empty board (x is the column, y
the row, from 0 at the top left, as the Gomocup protocol and the web board
count), its probability as a multiple of uniform, its distance from the centre
(in king moves), the probability the policy puts on the centre's 3x3, and the
centre's rank in the policy (1: its first choice; a Gumbel search at play time,
with no root noise, considers only the ``search.max_considered_actions``
moves ranked first). And the value net's own verdict on the first moves:
black's value after each possible first move (the negated value of the
position with white to move), after the centre and after the policy's own
choice, the centre's rank among all first moves by that value, and the
value's own first choice. A policy that avoids the centre while the value
after it is as high as after its choice has learned no reason to. (The value
after a move far from the centre says little: no training position looks
like that; the corners' often rank first.)

Cheap and exact where matches are slow and
noisy: the ablation's snapshots and the campaign's nets are compared on it in
docs/ablation.md and docs/campaign.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import NamedTuple

import numpy as np

DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))
TASKS = ("complete", "block")
EXTRA_ATTACKER = 2  # scattered attacker stones besides the four


class FivesError(ValueError):
    pass


class Position(NamedTuple):
    moves: list[int]  # from the empty board, black first
    answer: int  # the five point
    task: str
    to_play: int  # 0 black, 1 white


def _extra_defender(task: str, to_play: int) -> int:
    """Scattered defender stones that make the counts fit: black to move after
    equal counts, white after black's one more. The attacker has 4 + 2 stones,
    the defender 1 (the closing stone) + this."""
    attacker_moves = task == "complete"
    attacker_black = (to_play == 0) == attacker_moves
    black_to_move = to_play == 0
    a = 4 + EXTRA_ATTACKER
    # stones of the colour to move == stones of the other (black) or one fewer (white)
    if black_to_move:
        d = a  # equal counts
    else:  # white to move: black has one more
        d = a + 1 if not attacker_black else a - 1
    return d - 1


def positions(size: int, per_case: int, seed: int) -> list[Position]:
    """``per_case`` positions for each task and colour to move (see the module)."""
    if size < 7:
        raise FivesError(f"the board must be at least 7x7, got {size}")
    import jax

    from agz_jax.game.gomoku import Rules

    five_points = jax.jit(Rules(size).five_points)  # the rules' own reading, once compiled
    rng = np.random.default_rng(seed)
    out = []
    for task in TASKS:
        for to_play in (0, 1):
            made = 0
            while made < per_case:
                p = _draw(rng, size, task, to_play, five_points)
                if p is not None:
                    out.append(p)
                    made += 1
    return out


def _draw(rng, size: int, task: str, to_play: int, five_points) -> Position | None:
    """One position, or None if the draw does not fit (off the board, or
    another five point for either side); ``five_points``: ``Rules.five_points``."""
    dr, dc = DIRECTIONS[rng.integers(len(DIRECTIONS))]
    if rng.integers(2):
        dr, dc = -dr, -dc
    r0, c0 = int(rng.integers(size)), int(rng.integers(size))
    line = [(r0 + k * dr, c0 + k * dc) for k in range(6)]
    if not all(0 <= r < size and 0 <= c < size for r, c in line):
        return None
    closing, four, answer = line[0], line[1:5], line[5]
    point = lambda rc: rc[0] * size + rc[1]
    taken = {point(closing), point(answer), *map(point, four)}
    free = [p for p in range(size * size) if p not in taken]
    extra = rng.choice(free, EXTRA_ATTACKER + _extra_defender(task, to_play), replace=False)
    attacker = [point(x) for x in four] + [int(x) for x in extra[:EXTRA_ATTACKER]]
    defender = [point(closing)] + [int(x) for x in extra[EXTRA_ATTACKER:]]
    attacker_colour = to_play if task == "complete" else 1 - to_play
    board = np.zeros(size * size, np.int8)
    a_stone = 1 if attacker_colour == 0 else -1
    board[attacker], board[defender] = a_stone, -a_stone
    attacker_fives = np.flatnonzero(np.asarray(five_points(board, np.int8(a_stone))))
    if attacker_fives.tolist() != [point(answer)] or np.any(five_points(board, np.int8(-a_stone))):
        return None
    # The last move: in `block`, the attacker stone that made the four; in
    # `complete`, a scattered defender stone.
    if task == "block":
        last = point(four[int(rng.integers(4))])
        attacker = [p for p in attacker if p != last] + [last]
    else:
        last = defender[-1]
    black, white = (attacker, defender) if attacker_colour == 0 else (defender, attacker)
    moves = []
    for i in range(len(black) + len(white)):
        moves.append((black if i % 2 == 0 else white)[i // 2])
    assert moves[-1] == last  # the counts (``_extra_defender``) put the right colour last
    return Position(moves, point(answer), task, to_play)


def score(logits: np.ndarray, legal: np.ndarray, answer: np.ndarray) -> dict:
    """Top-1 rate, mean probability and median rank (0: first) of ``answer``
    int[P] under the policies ``logits`` float[P, A] restricted to ``legal``
    bool[P, A]."""
    masked = np.where(legal, logits.astype(np.float64), -np.inf)
    masked = masked - masked.max(axis=1, keepdims=True)
    prob = np.exp(masked)
    prob /= prob.sum(axis=1, keepdims=True)
    rows = np.arange(len(answer))
    p = prob[rows, answer]
    rank = (prob > p[:, None]).sum(axis=1)
    return {"positions": int(len(answer)), "top1": float(np.mean(rank == 0)),
            "p": float(np.mean(p)), "median_rank": float(np.median(rank))}


def opening_of(logits: np.ndarray, legal: np.ndarray, size: int,
               after: np.ndarray | None = None) -> dict:
    """The first move of the policy ``logits`` float[A] over the ``legal`` bool[A]
    moves of an empty ``size`` x ``size`` board (see the module); with
    ``after`` float[A], black's value after each first move, also the values
    after the centre and after the policy's choice."""
    masked = np.where(legal, logits.astype(np.float64), -np.inf)
    prob = np.exp(masked - masked.max())
    prob /= prob.sum()
    best = int(np.argmax(prob))
    y, x = divmod(best, size)
    rows, cols = np.divmod(np.arange(size * size), size)
    centre = (size - 1) / 2
    near = (np.abs(rows - centre) <= 1) & (np.abs(cols - centre) <= 1)
    mid = (size // 2) * size + size // 2  # the centre point (odd sizes; else next to it)
    out = {"x": x, "y": y, "p": float(prob[best]),
           "vs_uniform": float(prob[best] * legal.sum()),
           "from_centre": float(max(abs(x - centre), abs(y - centre))),
           "centre_3x3": float(prob[near].sum()),
           "centre_rank": int(np.sum(prob > prob[mid]))}
    if after is not None:
        value_best = int(np.argmax(np.where(legal, after, -np.inf)))
        vy, vx = divmod(value_best, size)
        out.update(value_centre=float(after[mid]), value_choice=float(after[best]),
                   value_centre_rank=int(np.sum(legal & (after > after[mid]))),
                   value_best_x=vx, value_best_y=vy, value_best=float(after[value_best]))
    return out


def measure(model, cases: list[Position] | None = None, per_case: int = 100,
            seed: int = 0) -> dict:
    """The table of one net: ``model`` as ``agz_jax.nets.models.load`` returns it."""
    import jax

    rules, nets = model.rules, model.nets
    cases = cases if cases is not None else positions(rules.size, per_case, seed)
    # The positions, the empty board (the opening), then every first move: one
    # batch, one evaluation.
    area = rules.size * rules.size
    firsts = [rules.from_moves([a]) for a in range(area)]
    states = [rules.from_moves(p.moves) for p in cases] + [rules.init()] + firsts
    states = jax.tree.map(lambda *x: np.stack(x), *states)
    n = len(cases)
    if not np.array_equal(np.asarray(states.to_play[:n]), [p.to_play for p in cases]):
        raise FivesError("a position's colour to move is not the one drawn")  # a bug, not input

    @jax.jit
    def policy(variables, states):
        logits, value = nets.evaluate(variables, nets.observe(rules, states), states.to_play)
        return logits, value, jax.vmap(rules.legal_mask)(states)

    logits, value, legal = jax.device_get(policy(model.variables, states))
    # value is the side to move's: after black's first move, white's; black's is its negation.
    opening = opening_of(logits[n], legal[n], rules.size, after=-value[n + 1:])
    logits, legal = logits[:n], legal[:n]
    answer = np.array([p.answer for p in cases])
    table = {}
    for task in TASKS:
        for to_play, colour in enumerate(("black", "white")):
            pick = np.array([p.task == task and p.to_play == to_play for p in cases])
            table[f"{task}/{colour}"] = score(logits[pick], legal[pick], answer[pick])
    return {"net": model.name, "size": rules.size, "seed": seed, "step": model.step,
            "tasks": table, "opening": opening}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.fives", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("nets", nargs="+", help="model names, model directories or run directories")
    p.add_argument("--positions", type=int, default=100,
                   help="positions per task and colour to move (default 100)")
    p.add_argument("--seed", type=int, default=0, help="draws the positions (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object per net")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    from agz_jax.nets import models

    if args.positions < 1:
        print(f"error: --positions must be >= 1, got {args.positions}", file=sys.stderr)
        return 2
    cache: dict[int, list[Position]] = {}
    for name in args.nets:
        try:
            model = models.load(name)
            size = model.rules.size
            if size not in cache:
                cache[size] = positions(size, args.positions, args.seed)
            result = measure(model, cache[size], seed=args.seed)
        except (models.ModelError, FivesError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(result))
            continue
        print(f"{name} ({result['size']}x{result['size']}, seed {args.seed}"
              + (f", iteration {result['step']}" if result["step"] is not None else "") + ")")
        print(f"  {'task / to move':18} {'top-1':>6} {'p':>6} {'median rank':>12}")
        for key, row in result["tasks"].items():
            print(f"  {key:18} {row['top1']:6.2f} {row['p']:6.3f} {row['median_rank']:12.1f}")
        o = result["opening"]
        print(f"  empty board: opens x={o['x']} y={o['y']} (p {o['p']:.3f}, "
              f"{o['vs_uniform']:.1f}x uniform), {o['from_centre']:g} from the centre; "
              f"the centre's 3x3 holds {o['centre_3x3']:.2f}; the centre ranks "
              f"{o['centre_rank'] + 1}")
        print(f"  black's value after the first move: {o['value_centre']:+.3f} at the centre, "
              f"{o['value_choice']:+.3f} at the policy's choice; the value ranks the centre "
              f"{o['value_centre_rank'] + 1} and puts x={o['value_best_x']} "
              f"y={o['value_best_y']} first ({o['value_best']:+.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
