"""Speed of the Go rules under ``vmap``, ours against pgx's, and their agreement.

    python -m experiments.go.bench                       # ours only (pgx is no dependency)
    python -m experiments.go.bench --features --games 256,64   # and the feature planes
    python -m experiments.go.bench --sizes 19 --games 64 --replay   # planes from stored games
    PYTHONPATH=src /path/to/venv-with-pgx/bin/python -m experiments.go.bench --pgx

A batch of ``--games`` games is stepped ``--plies`` times from the empty board in
one jitted ``lax.scan`` (per ply: the legal mask, a uniform random legal point, or
the pass when there is none, and the step), for ``agz_jax.go.rules`` with
positional superko, with simple ko, and with ``--pgx`` pgx's ``go_NxN`` (simple ko
in its legal mask; a superko repetition ends its game instead). Positions/s =
games x plies / seconds, the best of ``--repeats`` runs after a compile run.

With ``--replay`` the planes of examples drawn from stored move sequences
(``go.sampling.sample_batch``: 64 random legal games, replayed on the device,
``--replay-batch`` examples a batch, ``--per-game`` from each replayed game,
each ladder mode of ``--ladders``, and "table": the ladder planes of every
stored position computed once by ``go.sampling.ladder_table``, then looked up),
beside the host path of ``go.dataset``
(``go.sgf.replay`` then ``go.features`` of ``--host-positions`` positions).

With ``--pgx`` the same random actions are replayed in both (ours with simple
ko) and their boards and legal masks compared at every position, as long as
pgx's game is running.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.go import play
from agz_jax.go.rules import Rules


def uniform_point(key, mask):
    """int32[]: a uniform legal point of ``mask`` bool[A + 1], else the pass."""
    points = mask[:-1]
    choice = jax.random.categorical(key, jnp.where(points, 0.0, -jnp.inf))
    return jnp.where(points.any(), choice, points.shape[0]).astype(jnp.int32)


def ours(size: int, superko: bool):
    rules = Rules(size=size, superko=superko)

    def init(key):
        return rules.init()

    def ply(state, key):
        action = uniform_point(key, rules.legal_mask(state))
        return rules.step(state, action), action

    return init, ply, lambda s: (s.board.astype(jnp.int32), rules.legal_mask(s), s.done)


def pgx_go(size: int):
    import pgx  # noqa: PLC0415  (optional: only with --pgx)

    env = pgx.make(f"go_{size}x{size}")

    def ply(state, key):
        action = uniform_point(key, state.legal_action_mask)
        return env.step(state, action), action

    def look(s):
        return jnp.sign(s._x.board), s.legal_action_mask, s.terminated

    return env.init, ply, look


def runner(impl, games: int, plies: int):
    init, ply, _ = impl

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        states = jax.vmap(init)(jax.random.split(k0, games))
        states, actions = jax.lax.scan(lambda s, k: jax.vmap(ply)(s, jax.random.split(k, games)),
                                       states, jax.random.split(k1, plies))
        return states, actions

    return run


def time_it(run, repeats: int) -> tuple[float, float]:
    """(compile + first run seconds, best run seconds)."""
    t = time.perf_counter()
    jax.block_until_ready(run(jax.random.PRNGKey(0)))
    first = time.perf_counter() - t
    best = float("inf")
    for r in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(run(jax.random.PRNGKey(r + 1)))
        best = min(best, time.perf_counter() - t)
    return first, best


def feature_speed(size: int, games: int, plies: int, repeats: int) -> dict:
    """Positions/s of ``go.features`` (all 36 planes, ladders included), vmapped over
    ``games`` positions after ``plies`` random plies."""
    from agz_jax.go.features import features  # noqa: PLC0415

    rules = Rules(size=size)
    states, _ = runner(ours(size, True), games, plies)(jax.random.PRNGKey(3))
    run = jax.jit(jax.vmap(lambda s: features(rules, s)))
    first, best = time_it(lambda key: run(states), repeats)
    return dict(size=size, impl=f"go.features after {plies} plies", games=games,
                compile_s=round(first - best, 1), run_s=round(best, 3),
                positions_per_s=round(games / best))


def replay_speed(size: int, batch: int, per_game: int, ladder: str, moves, offsets,
                 repeats: int, table=None) -> dict:
    """Positions/s of ``go.sampling.sample_batch``: ``batch`` examples drawn from
    the store, ``per_game`` from each replayed game, all planes made on the
    device (ladder plane by ``ladder``: a mode of ``go.planes.LADDER_MODES``, or
    "table": looked up in ``table``, ``go.sampling.ladder_table``'s), symmetries
    applied."""
    from agz_jax.go import replay, sampling  # noqa: PLC0415

    s = replay.store(moves, offsets, size=size)
    if ladder == "table":
        s = s._replace(ladder=jnp.asarray(table))
    fn = sampling.sampler(replay.longest(offsets), size, batch, per_game, 0, True,
                          jnp.float32, "none" if ladder == "table" else ladder)
    first, best = time_it(lambda key: fn(key, s).planes, repeats)
    return dict(size=size, impl=f"go.sampling per_game={per_game} ladder={ladder}", games=batch,
                compile_s=round(first - best, 1), run_s=round(best, 3),
                positions_per_s=round(batch / best))


def table_speed(size: int, moves, offsets) -> tuple[dict, np.ndarray]:
    """(the row, the table): positions/s of ``go.sampling.ladder_table`` (the
    ladder plane before every stored move, 8 games a call, ladder="auto"), one
    timed run after a compile run on the first 8 games."""
    from agz_jax.go import replay, sampling  # noqa: PLC0415

    s = replay.store(moves, offsets, size=size)
    length = replay.longest(offsets)
    head = replay.store(moves[:offsets[8]], offsets[:9], size=size)
    t = time.perf_counter()
    sampling.ladder_table(head, size, length)
    first = time.perf_counter() - t
    t = time.perf_counter()
    table = sampling.ladder_table(s, size, length)
    spent = time.perf_counter() - t
    return dict(size=size, impl="go.sampling.ladder_table", games=len(moves),
                compile_s=round(first - spent * offsets[8] / len(moves), 1),
                run_s=round(spent, 3), positions_per_s=round(len(moves) / spent)), table


def host_speed(size: int, positions: int, moves, offsets, repeats: int) -> dict:
    """Positions/s of the host path of ``go.dataset``: the first game replayed by
    ``go.sgf.replay`` (one jitted scan), then ``go.dataset.planes_of`` (the
    ``go.features`` planes, ladder plane included) of ``positions`` of its
    positions spread evenly over it, one batch; the replay's time counted for
    the share of its positions used (the data set uses them all)."""
    from agz_jax.go import sgf  # noqa: PLC0415
    from agz_jax.go.dataset import planes_of  # noqa: PLC0415

    rules = sgf.replay_rules(size)
    game = [(i % 2, int(m)) for i, m in enumerate(moves[offsets[0]:offsets[1]])]
    on_board = np.flatnonzero(np.asarray([m for _, m in game]) < size * size)
    pick = on_board[np.linspace(0, len(on_board) - 1, positions).astype(int)]

    def run(key):
        t = time.perf_counter()
        before = jax.block_until_ready(sgf.replay(rules, np.zeros(size * size, np.int8),
                                                  game).before)
        spent = (time.perf_counter() - t) * positions / len(on_board)
        t = time.perf_counter()
        planes_of(rules, jax.tree.map(lambda x: np.asarray(x)[pick], before), 0,
                  batch=positions)
        return spent + time.perf_counter() - t

    run(None)
    best = min(run(None) for _ in range(repeats))
    return dict(size=size, impl="host: sgf.replay + go.features", games=positions,
                run_s=round(best, 3), positions_per_s=round(positions / best))


def agreement(size: int, games: int, plies: int) -> dict:
    """Replay pgx's random games in ours (simple ko): positions where the boards
    or the legal masks differ, while pgx's game runs."""
    theirs, mine = pgx_go(size), ours(size, superko=False)

    @jax.jit
    def compare(key):
        k0, k1 = jax.random.split(key)
        a = jax.vmap(theirs[0])(jax.random.split(k0, games))
        b = jax.vmap(mine[0])(jax.random.split(k0, games))

        def step(carry, k):
            a, b = carry
            board_a, mask_a, over = jax.vmap(theirs[2])(a)
            board_b, mask_b, _ = jax.vmap(mine[2])(b)
            a2, action = jax.vmap(theirs[1])(a, jax.random.split(k, games))
            b2 = jax.vmap(lambda s, x: Rules(size=size, superko=False).step(s, x))(b, action)
            live = ~over
            row = (jnp.sum(live), jnp.sum(live & jnp.any(board_a != board_b, -1)),
                   jnp.sum(live & jnp.any(mask_a != mask_b, -1)))
            return (a2, b2), row

        _, rows = jax.lax.scan(step, (a, b), jax.random.split(k1, plies))
        return [jnp.sum(r) for r in rows]

    positions, boards, masks = (int(x) for x in compare(jax.random.PRNGKey(7)))
    return dict(positions=positions, board_disagreements=boards, mask_disagreements=masks)


def replay_rows(size: int, args, say) -> list[dict]:
    """The ``--replay`` rows of one size: 64 random games of ``4 * size * size / 3``
    plies at most (about 480 on 19x19: most end by two passes sooner)."""
    from agz_jax.go.replay import random_store  # noqa: PLC0415

    moves, offsets = random_store(size, 64, 4 * size * size // 3)
    say(f"{size}x{size} store: {len(offsets) - 1} random games, {len(moves)} moves "
        f"(longest {int(np.max(np.diff(offsets)))})")
    rows, table = [], None
    for ladder in args.ladders.split(","):
        if ladder == "table":
            r, table = table_speed(size, moves, offsets)
            rows.append(r)
            say(f"{size}x{size} {r['impl']:36s} {r['games']} positions: "
                f"{r['positions_per_s']:>9,} positions/s (compile {r['compile_s']} s)")
        for k in (int(x) for x in args.per_game.split(",")):
            # a ladder run takes long on a CPU: one timed run
            r = replay_speed(size, args.replay_batch, k, ladder, moves, offsets,
                             args.repeats if ladder in ("none", "table") else 1, table)
            rows.append(r)
            say(f"{size}x{size} {r['impl']:36s} {r['games']} examples: "
                f"{r['positions_per_s']:>9,} positions/s (compile {r['compile_s']} s)")
    if args.host_positions:
        r = host_speed(size, args.host_positions, moves, offsets, 1)
        rows.append(r)
        say(f"{size}x{size} {r['impl']:36s} {r['games']} positions: "
            f"{r['positions_per_s']:>9,} positions/s")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.go.bench",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="9,19")
    p.add_argument("--games", default="1024,256", help="one number, or one per size")
    p.add_argument("--plies", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pgx", action="store_true", help="also pgx (must be importable)")
    p.add_argument("--features", action="store_true",
                   help="also the feature planes' speed (go.features)")
    p.add_argument("--replay", action="store_true",
                   help="also the planes made on the device from stored games (go.sampling), "
                        "beside the host path of go.dataset")
    p.add_argument("--replay-batch", type=int, default=128, help="examples per --replay batch")
    p.add_argument("--per-game", default="1,16", help="--replay: examples per replayed game")
    p.add_argument("--ladders", default="none,auto,table",
                   help="--replay: ladder modes (go.planes.LADDER_MODES: auto, map, pool, "
                        "vmap, none; or table: go.sampling.ladder_table built, then looked up)")
    p.add_argument("--host-positions", type=int, default=32,
                   help="--replay: positions of the host path's row (0: no host row)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        sizes, games = play.sizes_and_games(args.sizes, args.games,
                                            "--sizes 9,19 --games 1024,256")
    except ValueError as e:
        p.error(str(e))
    for name in ("plies", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.replay:
        try:
            per_game = [int(x) for x in args.per_game.split(",")]
        except ValueError:
            p.error(f"--per-game must be comma-separated integers, got {args.per_game!r}")
        if args.replay_batch < 1 or any(k < 1 or args.replay_batch % k for k in per_game):
            p.error(f"--per-game values must divide --replay-batch {args.replay_batch}, "
                    f"got {args.per_game!r}")
        from agz_jax.go.planes import LADDER_MODES  # noqa: PLC0415

        bad = set(args.ladders.split(",")) - set(LADDER_MODES) - {"table"}
        if bad:
            p.error(f"--ladders: unknown mode(s) {sorted(bad)}; choose from "
                    f"{(*LADDER_MODES, 'table')}")
        if args.host_positions < 0:
            p.error(f"--host-positions must be >= 0, got {args.host_positions}")
    if args.pgx and importlib.util.find_spec("pgx") is None:
        p.error("--pgx needs the pgx package: .venv/bin/pip install pgx (or leave --pgx out)")
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout, flush=True)
    rows = []
    for size, n in zip(sizes, games, strict=True):
        impls = [("ours (positional superko)", ours(size, True)),
                 ("ours (simple ko)", ours(size, False))]
        if args.pgx:
            impls.append((f"pgx 2.6.0 (go_{size}x{size})", pgx_go(size)))
        for name, impl in impls:
            first, best = time_it(runner(impl, n, args.plies), args.repeats)
            rows.append(dict(size=size, impl=name, games=n, plies=args.plies,
                             compile_s=round(first - best, 1), run_s=round(best, 3),
                             positions_per_s=round(n * args.plies / best)))
            r = rows[-1]
            say(f"{size}x{size} {name:28s} {n} games x {args.plies} plies: "
                f"{r['positions_per_s']:>9,} positions/s (compile {r['compile_s']} s)")
        if args.features:
            r = feature_speed(size, n, args.plies, args.repeats)
            rows.append(r)
            say(f"{size}x{size} {r['impl']:28s} {n} positions: "
                f"{r['positions_per_s']:>9,} positions/s (compile {r['compile_s']} s)")
        if args.replay:
            rows += replay_rows(size, args, say)
        if args.pgx:
            agree = agreement(size, n, args.plies)
            rows.append(dict(size=size, impl="agreement", **agree))
            say(f"{size}x{size} pgx vs ours (simple ko): {agree}")
    if args.json:
        print(json.dumps(dict(backend=jax.default_backend(), device=str(jax.devices()[0]),
                              rows=rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
