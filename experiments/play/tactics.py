"""How often a player carried out the tactic the mentor sees, in saved games.

    python -m experiments.play.arena --a mcts:default:400 --b mentor:3 --games 20 --out games/
    python -m experiments.play.tactics games/                      # player A of that match
    python -m experiments.play.tactics games/ --player mentor:3 --json

For every move of the player (after ``--skip`` opening plies, which the arena
plays at random), the mentor's tactic tiers (``agz_jax.game.mentor.urgent_moves``)
name the most urgent tactic on the board: complete a five, block a four, make
an open four, make a double four or four-three, stop an open three. A move
*misses* it when it is not one of the points that carry it out. (Stopping an
open three is the mentor's rule, not a law: a counter-attack with fours can
be as good; the other tiers are forced or winning.) It also counts the moves
after which the opponent's most urgent tactic is to make a double four or a
four-three: the player left it a winning threat (a move that made five ended
the game and left nothing). And the moves after which the opponent has no
urgent tactic but a *double three* to make (a point that makes two open
threes on different lines): a threat that wins unless the player can answer
with fours, so not always a mistake, but the common way to lose slowly.

The player is named by the ``black:``/``white:`` lines that
``python -m experiments.play.arena --out`` writes after the moves; by default the
black player of the first game, which is the arena's player A.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def players(path: Path) -> dict[str, str]:
    """{'black': name, 'white': name} from a ``.psq`` trailer (missing: {})."""
    out = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        for colour in ("black", "white"):
            if line.startswith(f"{colour}: "):
                out[colour] = line[len(colour) + 2:].strip()
    return out


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.play.tactics", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("games", type=Path, help="a directory of .psq games (arena --out)")
    p.add_argument("--player", default=None,
                   help="the player's name as in the games' trailers (default: the black "
                        "player of the first game)")
    p.add_argument("--skip", type=int, default=2,
                   help="opening plies not counted (default 2, the arena's default)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p.parse_args(argv)


class TacticsError(ValueError):
    pass


def count(directory: Path, player: str | None, skip: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from agz_jax.game import mentor, records
    from agz_jax.game.gomoku import Rules, stone

    files = sorted(directory.glob("*.psq"))
    if not files:
        raise TacticsError(f"{directory}: no .psq games there")
    if skip < 0:
        raise TacticsError(f"--skip must be >= 0, got {skip}")
    if player is None:
        player = players(files[0]).get("black")
        if player is None:
            raise TacticsError(f"{files[0]}: no 'black:' line names the player; pass --player")
    boards, to_play, moves, game_of = [], [], [], []
    finals, last_moves, opponent_last = [], [], []  # per game
    games = as_black = 0
    size = None
    for path in files:
        names = players(path)
        colours = [c for c, name in enumerate((names.get("black"), names.get("white")))
                   if name == player]
        if not colours:
            continue
        record = records.read_psq(path)
        if size is None:
            size = record.size
        elif record.size != size:
            raise TacticsError(f"{path}: a {record.size}x{record.size} board among "
                               f"{size}x{size} games")
        games += 1
        as_black += colours[0] == 0
        board = np.zeros(record.size * record.size, np.int8)
        for ply, action in enumerate(record.moves):
            colour = ply % 2
            if ply >= skip and colour in colours:
                boards.append(board.copy())
                to_play.append(colour)
                moves.append(action)
                game_of.append(games - 1)
            board[action] = 1 if colour == 0 else -1
        finals.append(board)
        last_moves.append(record.moves[-1] if record.moves else 0)
        opponent_last.append(bool(record.moves) and (len(record.moves) - 1) % 2 not in colours)
    if not games:
        raise TacticsError(f"{directory}: no game names {player!r} as black or white")
    rules = Rules(size)
    urgent = jax.jit(jax.vmap(lambda b, c: mentor.urgent_moves(rules, b, c)))
    is_win = jax.jit(jax.vmap(rules.is_win))

    def double_three(board, colour):
        cls, _ = mentor.classes(rules, board, stone(colour))
        return jnp.any((board == 0) & (jnp.sum(cls == 3, axis=-1) >= 2))

    doubles = jax.jit(jax.vmap(double_three))
    tiers, hits, replies, wins, threes = [], [], [], [], []
    for i in range(0, len(boards), 512):
        b = np.stack(boards[i:i + 512])
        colour = np.asarray(to_play[i:i + 512], np.int32)
        played = np.asarray(moves[i:i + 512])
        tier, allowed = jax.device_get(urgent(b, colour))
        tiers.append(tier)
        hits.append(allowed[np.arange(len(b)), played])
        after = b.copy()
        after[np.arange(len(b)), played] = np.where(colour == 0, 1, -1)
        replies.append(jax.device_get(urgent(after, 1 - colour))[0])
        threes.append(jax.device_get(doubles(after, 1 - colour)))
        wins.append(jax.device_get(is_win(after, played.astype(np.int32))))
    tier = np.concatenate(tiers) if tiers else np.zeros(0, int)
    hit = np.concatenate(hits) if hits else np.zeros(0, bool)
    reply = np.concatenate(replies) if replies else np.zeros(0, int)
    won = np.concatenate(wins) if wins else np.zeros(0, bool)
    three = np.concatenate(threes) if threes else np.zeros(0, bool)
    rows = {name: {"seen": int((tier == t).sum()), "missed": int(((tier == t) & ~hit).sum())}
            for t, name in sorted(mentor.TIER_NAMES.items(), reverse=True)}
    # The opponent's most urgent tactic right after the move: a double four or
    # four-three to make (the move neither made a four nor stopped one), unless
    # the move made five and the game is over.
    left = (reply == 2) & ~won
    left_in = sorted(set(np.asarray(game_of, int)[left].tolist()))
    # Nothing more urgent for the opponent, but a double three to make.
    left3 = (reply == 0) & three & ~won
    left3_in = sorted(set(np.asarray(game_of, int)[left3].tolist()))
    # A game is lost when its last move, the opponent's, made five.
    made_five = jax.device_get(is_win(np.stack(finals), np.asarray(last_moves, np.int32)))
    lost = np.asarray(opponent_last) & made_five
    answering = {name: int((left & (tier == t)).sum())
                 for t, name in [*sorted(mentor.TIER_NAMES.items(), reverse=True), (0, "none")]}
    return {"player": player, "games": games, "as_black": as_black, "moves": len(moves),
            "skip": skip, "tactics": rows, "lost": int(lost.sum()),
            "left_four_three": {"moves": int(left.sum()), "games": len(left_in),
                                "lost_games": int(lost[left_in].sum()),
                                "when_the_tactic_was": answering},
            "left_double_three": {"moves": int(left3.sum()), "games": len(left3_in),
                                  "lost_games": int(lost[left3_in].sum())}}


def text(report: dict) -> str:
    lines = [f"{report['player']}: {report['moves']} moves in {report['games']} games "
             f"({report['as_black']} as black), the first {report['skip']} plies skipped",
             f"  {'the mentor sees':36}{'seen':>6}{'missed':>8}"]
    for name, r in report["tactics"].items():
        lines.append(f"  {name:36}{r['seen']:>6}{r['missed']:>8}")
    left = report["left_four_three"]
    lines.append(f"  moves after which the opponent could make a double four or four-three: "
                 f"{left['moves']} (in {left['games']} games, {left['lost_games']} of them "
                 f"lost; {report['lost']} games lost in all)")
    lines.append("    when the mentor's tactic before the move was: " + ", ".join(
        f"{name} {n}" for name, n in left["when_the_tactic_was"].items() if n))
    three = report["left_double_three"]
    lines.append(f"  moves after which the opponent had nothing urgent but a double three "
                 f"to make: {three['moves']} (in {three['games']} games, "
                 f"{three['lost_games']} of them lost)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    from agz_jax.game.records import RecordError

    try:
        report = count(args.games, args.player, args.skip)
    except (TacticsError, RecordError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, sort_keys=True) if args.json else text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
