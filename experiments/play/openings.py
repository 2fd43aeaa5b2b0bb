r"""Make a balanced opening set (``agz_jax.game.openings``) by searching candidate openings.

    python -m experiments.play.openings --model curriculum --games 4 --sims 8 \
        --out src/agz_jax/data/balanced15.txt --force

The candidates: black's first stone on the centre point, white's and black's
next stones anywhere in the central ``--box`` x ``--box`` square, one opening
per class under the board's 8 symmetries. Each is kept when black's score in
the model's own self-play games from it (``--judge selfplay``: ``--games``
games each, its search with ``--sims`` simulations and exploration noise) lies
within ``--max-deviation`` of 0.5, the closest first, at most ``--count`` of
them. (``--judge value`` uses the search's value for the side to move instead;
under Winning Value Decay the values of early positions are all near 0, so it
hardly separates the openings.)

    python -m experiments.play.openings --judge outside --outside PATH --nodes 100000 \
        --max-deviation 60 --out src/agz_jax/data/rapfi15.txt

``--judge outside`` asks an outside Piskvork engine instead (``--outside`` or
``AGZ_JAX_OUTSIDE``; Rapfi, see docs/outside.md): its evaluation of each
opening (white to move; the ``Eval`` of its ``MESSAGE`` line, in its own
units) after ``--nodes`` nodes; kept: ``|eval| <= --max-deviation``. With
``--check SET`` it plays the engine against itself at ``--nodes`` from every
opening of the set, one game each (the engine is deterministic), and prints
black's score: a set balanced for that engine scores near 0.5. The file's header records
the command, the model and every kept opening's value, so the set can be made
again and its source is on record. An existing ``--out`` file is refused,
before the search, unless ``--force`` is given (then it is replaced).

    python -m experiments.play.openings --check balanced15 --model default --games 2 --sims 32

``--check SET`` makes nothing: it measures black's score in the judge's
self-play games from every opening of an existing set (a shipped name or a
file), ``--games`` games each, with its 95% interval. With a ``--seed`` other
than the one that made the set, this is a fresh measurement of how balanced the
set is for that judge (a set's own header is biased: it kept the openings
whose scores happened to come out near 0.5). It also prints black's mean
Winning Value Decay label after the openings, with its standard error: the
value the model's value net is trained towards there, which is what decides
its search's choice between two openings (a one-line set such as ``7,7``
measures one first move).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from agz_jax.training import cli


def candidates(size: int, box: int) -> np.ndarray:
    """int32[K, 3]: centre, then two more stones in the central box, one per
    symmetry class (the canonical one: smallest under the 8 maps)."""
    from agz_jax.game import symmetry

    c, h = size // 2, box // 2
    points = [r * size + col for r in range(c - h, c + h + 1) for col in range(c - h, c + h + 1)
              if (r, col) != (c, c)]
    maps = symmetry.permutations(size)
    seen, out = set(), []
    for w in points:
        for b in points:
            if b == w:
                continue
            key = min((int(m[c * size + c]), int(m[w]), int(m[b])) for m in maps)
            if key not in seen:
                seen.add(key)
                out.append([c * size + c, w, b])
    return np.asarray(out, np.int32)


def values(model_name: str, moves: np.ndarray, sims: int, seed: int) -> np.ndarray:
    """float32[K]: the model's search value of each opening for the side to move."""
    import jax

    from agz_jax.game import openings
    from agz_jax.game.gomoku import Rules
    from agz_jax.nets import models
    from agz_jax.search.searcher import Searcher
    from agz_jax.training.run import make_networks

    model = models.load(model_name)
    config = model.config
    rules = Rules(config.game.size, config.game.rule)
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)

    @jax.jit
    def value(variables, index, key):
        states = openings.start_states(rules, moves, index)
        searcher = Searcher.of(rules, nets, search=config.search, decay=config.decay)
        out = searcher.run(variables, key, states, num_simulations=sims)
        return out.search_tree.node_values[:, 0]

    return np.asarray(value(model.variables, np.arange(len(moves)), jax.random.PRNGKey(seed)))


def black_labels(winner, length, k: int, gamma: float) -> np.ndarray:
    """float32[G]: the Winning Value Decay label (``selfplay.decayed_z``, the
    training target) of each game's position after its first ``k`` plies, from
    black's side: +gamma^(T - k - 1) when black wins a game of T plies, minus
    that when white does, 0 for a draw."""
    import jax.numpy as jnp

    from agz_jax.training.selfplay import decayed_z

    winner, length = jnp.asarray(winner, jnp.int32), jnp.asarray(length, jnp.int32)
    to_play = jnp.full((k + 1, len(winner)), k % 2, jnp.int32)  # only row k is read
    z = decayed_z(to_play, winner, length, gamma)[k]
    return np.asarray(z if k % 2 == 0 else -z, np.float32)


def selfplay_scores(model_name: str, moves: np.ndarray, games: int, sims: int, seed: int,
                    chunk: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(score, decayed, decayed_se), float32[K] each: black's score (wins + draws / 2) over
    ``games`` (even) self-play games of the model from each opening, its own
    search config with ``sims`` simulations and exploration noise, moves as in
    its self-play; and black's mean Winning Value Decay label for the position
    the opening leaves (+-gamma^(T - k - 1) for a game of T plies after k
    opening stones, 0 for a draw; ``selfplay.decayed_z``), which is what the
    model's value net learns for that position from such games.

    The games are one match of the model against itself in chunks
    (``arena.play_match_compact``: finished games leave the batch, so a long
    game does not keep the whole batch searching), over an opening "set" that
    holds each candidate ``games / 2`` times: a match plays every entry of its
    set once in each half.
    """
    import jax

    from agz_jax.game.gomoku import Rules
    from agz_jax.match import arena
    from agz_jax.nets import models
    from agz_jax.training.run import make_networks
    from agz_jax.training.selfplay import make_move

    model = models.load(model_name)
    config = model.config.replace(**{"search.num_simulations": sims})
    rules = Rules(config.game.size, config.game.rule)
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    move = make_move(rules, nets, search=config.search, decay=config.decay,
                     selfplay=config.selfplay)

    def players(variables):
        act = lambda key, states: move(variables, states, key)[0]  # noqa: E731
        return act, act

    entries = np.repeat(moves, games // 2, axis=0)
    result = arena.play_match_compact(
        rules, players, model.variables, jax.random.PRNGKey(seed), 2 * len(entries),
        chunk=chunk, openings=entries,
        on_chunk=lambda ply, so_far, done: print(
            f"  ply {ply}: {int(done.sum())}/{len(done)} games over", file=sys.stderr,
            flush=True))
    which = {tuple(m): i for i, m in enumerate(moves.tolist())}
    k = moves.shape[1]
    opening = np.array([which[tuple(int(a) for a in result.moves[:k, g])]
                        for g in range(len(result.winner))])
    winner = np.asarray(result.winner)
    score = np.where(winner == 0, 1.0, np.where(winner == 1, 0.0, 0.5))
    label = black_labels(result.winner, result.length, k, config.decay.gamma)
    groups = [opening == i for i in range(len(moves))]
    assert all(g.sum() == games for g in groups), "every opening gets its games"
    return (np.array([score[g].mean() for g in groups], np.float32),
            np.array([label[g].mean() for g in groups], np.float32),
            np.array([label[g].std(ddof=1) / np.sqrt(games) for g in groups], np.float32))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.play.openings", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="curriculum", help="the judge (a model name or dir)")
    p.add_argument("--judge", choices=("selfplay", "value", "outside"), default="selfplay",
                   help="selfplay: black's score in the model's self-play games from the "
                        "opening; value: the model's search value for the side to move; "
                        "outside: an outside engine's evaluation (--outside, --nodes)")
    p.add_argument("--outside", default=None, metavar="PATH",
                   help="--judge outside: the Piskvork engine (default: $AGZ_JAX_OUTSIDE)")
    p.add_argument("--nodes", type=int, default=100_000,
                   help="--judge outside: INFO max_node for each evaluation or game")
    p.add_argument("--sims", type=int, default=16, help="simulations per move (selfplay) or "
                   "per opening (value)")
    p.add_argument("--games", type=int, default=8, help="selfplay: games per opening")
    p.add_argument("--box", type=int, default=7, help="side of the central square (odd)")
    p.add_argument("--max-deviation", type=float, default=0.2,
                   help="keep openings whose black score is within this of 0.5 (selfplay), "
                        "or whose |value| is at most this (value)")
    p.add_argument("--count", type=int, default=128, help="keep at most this many")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="the set's file to write")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--check", metavar="SET", default=None,
                   help="make nothing: black's score over an existing set (see above)")
    p.add_argument("--renju-canonical", action="store_true",
                   help="write the 26 canonical renju openings (openings.renju_canonical) "
                        "to --out instead: no judge, they are not balanced")
    args = p.parse_args(argv)
    if args.renju_canonical:
        from agz_jax.game import openings as shipped

        if args.out is None:
            print("error: --renju-canonical needs --out FILE", file=sys.stderr)
            return 2
        problem = cli.out_file_problem(args.out, args.force)
        if problem:
            print(f"error: --out {args.out}: {problem}", file=sys.stderr)
            return 2
        args.out.write_text(shipped.format_set(shipped.renju_canonical(), 15, (
            "The 26 canonical renju openings for 15x15 (black, white, black; white to move).\n"
            f"Made by: python -m experiments.play.openings --renju-canonical --out {args.out}\n"
            "The RIF opening rule: black on the centre, white next to it, orthogonally (13\n"
            "direct openings) or diagonally (13 indirect), black's second stone in the central\n"
            "5x5 square, one per class under the reflection that keeps the first two stones.\n"
            "Not balanced: several are known wins for black; matches play each opening with\n"
            "the colours swapped.")))
        print(f"wrote {args.out}: 26 openings")
        return 0
    if (args.out is None) == (args.check is None):
        print("error: give --out FILE to make a set, or --check SET to measure one",
              file=sys.stderr)
        return 2
    if args.box < 3 or args.box % 2 == 0:
        print(f"error: --box must be an odd number >= 3, got {args.box}", file=sys.stderr)
        return 2
    if not args.max_deviation >= 0:
        print(f"error: --max-deviation must be >= 0, got {args.max_deviation}",
              file=sys.stderr)
        return 2
    for name in ("sims", "games", "count"):
        if getattr(args, name) < 1:
            print(f"error: --{name} must be >= 1, got {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.games % 2:
        print(f"error: --games must be even (each opening's games are split into two "
              f"halves), got {args.games}", file=sys.stderr)
        return 2
    if args.out is not None:
        problem = cli.out_file_problem(args.out, args.force)
        if problem:
            print(f"error: --out {args.out}: {problem}", file=sys.stderr)
            return 2

    from agz_jax.nets import models

    if args.judge == "outside":
        return outside_judge(args, argv)
    try:
        config = models.load(args.model).config
    except models.ModelError as e:
        print(f"error: --model: {e}", file=sys.stderr)
        return 2
    size = config.game.size
    if args.check is not None:
        return check(args, size, config.decay.gamma)
    largest = 2 * ((size - 1) // 2) + 1  # the largest centred square on the board
    if args.box > largest:
        print(f"error: --box {args.box} does not fit the {size}x{size} board of {args.model!r};"
              f" give an odd --box from 3 to {largest}", file=sys.stderr)
        return 2
    moves = candidates(size, args.box)
    if args.judge == "selfplay":
        score, _, _ = selfplay_scores(args.model, moves, args.games, args.sims, args.seed)
        deviation = np.abs(score - 0.5)
        measure = (f"black's score in {args.games} self-play games of the model "
                   f"{args.model!r} ({args.sims} simulations per move) from the opening")
    else:
        score = values(args.model, moves, args.sims, args.seed)
        deviation = np.abs(score)
        measure = (f"the search value for white ({args.sims} simulations of the model "
                   f"{args.model!r})")
    keep = kept(deviation, args)
    if not keep:
        return 2
    return write_set(args, argv, size, config.game.rule, moves, keep, measure,
                     f"within {args.max_deviation} of balance, closest first; their mean "
                     f"{score[keep].mean():.3f} (all candidates: {score.mean():.3f})",
                     "Scores", [f"{score[i]:+.3f}" for i in keep])


def kept(deviation: np.ndarray, args: argparse.Namespace) -> list[int]:
    """The openings within ``--max-deviation``, closest first, at most ``--count``;
    none (and a one-line error) when none is."""
    order = np.argsort(deviation, kind="stable")
    keep = [int(i) for i in order if deviation[i] <= args.max_deviation][:args.count]
    if not keep:
        print(f"error: no opening within --max-deviation {args.max_deviation}; the closest "
              f"is {deviation.min():.3g} away", file=sys.stderr)
    return keep


def write_set(args: argparse.Namespace, argv, size: int, rule: str, moves: np.ndarray,
              keep: list[int], judged: str, summary: str, label: str, scores: list[str]) -> int:
    """Write the kept openings to ``--out`` under a header that says how they were made."""
    from agz_jax.game import openings

    command = "python -m experiments.play.openings " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])
    header = (f"Balanced 3-stone openings for {size}x{size} {rule} (black, white, black;\n"
              f"white to move). Made by: {command}\n"
              f"Candidates: black on the centre, two stones in the central {args.box}x{args.box}"
              f" square, one per symmetry class ({len(moves)}).\n"
              f"Judged by {judged}.\n"
              f"Kept: the {len(keep)} {summary}.\n"
              f"{label}, in file order: " + " ".join(scores))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(openings.format_set(moves[keep], size, header))
    print(f"{len(keep)} of {len(moves)} candidate openings kept ({summary}); wrote {args.out}")
    return 0


def _outside(args: argparse.Namespace, size: int):
    """The outside engine's manager (one thread, ``--nodes`` a move), or a one-line
    error (None)."""
    import os

    from agz_jax.play import piskvork

    path = args.outside or os.environ.get("AGZ_JAX_OUTSIDE")
    if not path:
        print("error: --judge outside needs --outside PATH (or AGZ_JAX_OUTSIDE): a Piskvork "
              "engine such as Rapfi (docs/outside.md says how to build it)", file=sys.stderr)
        return None
    try:
        argv = piskvork.command_argv(path)
    except piskvork.EngineMissing as e:
        print(f"error: --outside: {e}", file=sys.stderr)
        return None
    settings = piskvork.Settings(size=size, rule=0, timeout_turn_ms=None, max_node=args.nodes,
                                 thread_num=1, start_timeout_s=60.0)
    return piskvork.Piskvork(argv, "outside", settings, cwd=Path(argv[0]).resolve().parent)


EVAL = r"\bEval (-?\d+)"


def outside_eval(engine, moves) -> float:
    """The engine's evaluation of ``moves`` (3 stones: white to move), for white."""
    import re

    engine.new_game()
    engine.board([int(a) for a in moves], 1)
    found = [re.search(EVAL, note) for note in engine.notes]
    found = [f for f in found if f]
    if not found:
        raise RuntimeError(f"the engine printed no evaluation ({EVAL!r} in a MESSAGE line)")
    return float(found[-1][1])


def outside_judge(args: argparse.Namespace, argv) -> int:
    """``--judge outside``: make a set from, or ``--check`` a set with, the outside engine."""
    from agz_jax.game import openings
    from agz_jax.match import arena
    from agz_jax.play import piskvork, piskvork_games

    size = 15
    if args.nodes < 1:
        print(f"error: --nodes must be >= 1, got {args.nodes}", file=sys.stderr)
        return 2
    engine = _outside(args, size)
    if engine is None:
        return 2
    try:
        if args.check is not None:
            try:
                moves = openings.load(args.check, size)
            except openings.OpeningsError as e:
                print(f"error: --check: {e}", file=sys.stderr)
                return 2
            other = _outside(args, size)
            referee = piskvork_games.Referee(size, "freestyle")
            points = []
            with other:
                for opening in moves:
                    game = piskvork_games.play_game(engine, other,
                                                    [int(a) for a in opening if a >= 0], referee)
                    points.append(1.0 if game.winner == piskvork_games.BLACK else
                                  0.0 if game.winner == piskvork_games.WHITE else 0.5)
            mean = float(np.mean(points))
            low, high = arena.wilson(mean, len(points))
            print(f"{args.check}: black scores {mean:.3f} (95% CI {low:.3f}-{high:.3f}) in "
                  f"{len(points)} games of the outside engine against itself at {args.nodes} "
                  f"nodes a move, one from each opening")
            return 0
        moves = candidates(size, args.box)
        score = np.array([outside_eval(engine, m) for m in moves])
    except piskvork.EngineError as e:
        print(f"error: the outside engine failed: {e}", file=sys.stderr)
        return 2
    finally:
        engine.close()
    deviation = np.abs(score)
    keep = kept(deviation, args)
    if not keep:
        return 2
    return write_set(args, argv, size, "freestyle", moves, keep,
                     f"the outside engine's evaluation for white after {args.nodes} nodes "
                     "(Rapfi: its Eval)",
                     f"with |eval| <= {args.max_deviation:g}, closest first; all candidates' "
                     f"median {np.median(score):+.0f}", "Evals", [f"{score[i]:+.0f}" for i in keep])


def check(args: argparse.Namespace, size: int, gamma: float) -> int:
    """``--check``: black's score over the set ``args.check`` (see the module)."""
    from agz_jax.game import openings
    from agz_jax.match import arena

    try:
        moves = openings.load(args.check, size)
    except openings.OpeningsError as e:
        print(f"error: --check: {e}", file=sys.stderr)
        return 2
    score, decayed, se = selfplay_scores(args.model, moves, args.games, args.sims, args.seed)
    games = len(moves) * args.games
    mean = float(score.mean())
    low, high = arena.wilson(mean, games)
    print(f"{args.check}: black scores {mean:.3f} (95% CI {low:.3f}-{high:.3f}) over {games} "
          f"self-play games of {args.model!r} ({args.sims} simulations per move, seed "
          f"{args.seed}), {args.games} from each of its {len(moves)} openings; per opening "
          f"{score.min():.2f} to {score.max():.2f}")
    print(f"black's mean decayed value label after the openings (gamma {gamma}; what the "
          f"value net learns from these games): {decayed.mean():+.4f} (standard error "
          f"{np.sqrt(np.sum(se ** 2)) / len(moves):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
