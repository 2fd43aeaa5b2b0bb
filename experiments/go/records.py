"""Go game records for move prediction: an engine playing itself, saved as SGF.

    python -m experiments.go.records --engine gnugo --size 9 --games 2000 --out runs/go-records
    python -m experiments.go.records --engine pachi --size 9 --games 100 --playouts 1000 \\
        --out runs/go-records-pachi

GnuGo 3.8 (``--level``, Chinese rules, positional superko) plays both colours
in one process; game ``i`` is played with random seed ``--seed + i``
(GTP ``set_random_seed``: GnuGo breaks ties between equal moves at random, so
the games differ, though GnuGo at level 1 repeats many of its games: 537 of
2,000 were distinct in our first run). ``--opening K`` sets up K random stones
first (black and white in turn, at least two lines from the edge; the record
has them as ``AB``/``AW`` set-up stones, so no one learns them as moves) for
more varied games. Pachi plays both colours with ``--playouts`` per move and
seed ``--seed + i`` (a new process per game). The result is GnuGo's
``final_score`` under Chinese rules (the playing GnuGo's own, or a referee
GnuGo for Pachi's games); a resignation is "B+R"/"W+R".

Each game is written as ``OUT/game-NNNNN.sgf`` (atomically) the moment it ends,
so an interrupted run continues where it stopped when started again with the
same arguments (``OUT/records.json`` holds them; other arguments are refused).
Every record is replayed with ``go.rules`` before it is written: a game the
engine played against our rules is reported and not saved (counted in
``records.json``). Make the data set with ``python -m experiments.go.dataset``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from agz_jax.go import gtp, play, sgf


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.go.records",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=play.ENGINES, default="gnugo")
    p.add_argument("--size", type=int, default=9)
    play.add_flags(p, level=1, playouts=1000, komi=7.0)
    p.add_argument("--handicap", type=int, default=0, help="fixed handicap stones (0, 2..9)")
    p.add_argument("--opening", type=int, default=0,
                   help="random stones set up before the engine plays, black and white in "
                        "turn (an even number; 0: none): more varied games")
    args = p.parse_args(argv)
    play.check_flags(p, args)
    if args.handicap == 1 or not 0 <= args.handicap <= 9:
        p.error(f"--handicap must be 0 or 2..9, got {args.handicap}")
    if args.opening < 0 or args.opening % 2 or (args.opening and args.handicap):
        p.error(f"--opening must be an even number >= 0, and 0 with --handicap, got "
                f"{args.opening}")
    try:
        play.random_opening(args.size, args.opening, np.random.default_rng(0))
    except ValueError as e:
        p.error(f"--opening: {e} of a {args.size}x{args.size} board: pass a smaller --opening")
    if args.engine == "pachi":
        try:
            args.engine_path = play.find_pachi(args.engine_path)
        except FileNotFoundError as e:
            p.error(str(e))
    elif args.engine_path is None and gtp.find_gnugo() is None:
        p.error("gnugo is not installed: apt-get install gnugo (or `make gnugo` as root), "
                "or pass --engine-path")
    return args


def settings_of(args) -> dict:
    keep = ["engine", "size", "komi", "handicap", "seed", "max_moves"]
    if args.opening:
        keep.append("opening")
    keep.append("level" if args.engine == "gnugo" else "playouts")
    return {k: getattr(args, k) for k in keep}


def main(argv=None) -> int:
    args = parse_args(argv)
    return play.resumable(lambda: run(args),
                          f"the records written so far are kept in {args.out}")


def run(args) -> int:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "records.json"
    settings = settings_of(args)
    try:
        meta = play.resume(meta_path, settings, {"written": 0, "violations": [], "engine": None},
                           "records")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rules = sgf.replay_rules(args.size)
    name_of = (f"GNU Go level {args.level}" if args.engine == "gnugo"
               else f"Pachi {args.playouts} playouts")
    referee = None
    engine = None
    t0 = time.perf_counter()
    todo = [i for i in range(args.games) if not (out / f"game-{i:05d}.sgf").exists()
            and i not in {v["game"] for v in meta["violations"]}]
    print(f"{args.games - len(todo)} of {args.games} games already in {out}", flush=True)
    try:
        for n, i in enumerate(todo):
            seed = args.seed + i
            if args.engine == "gnugo":
                if engine is None:
                    engine = play.opponent("gnugo", args.size, args.komi, args.level, seed=seed,
                                           path=args.engine_path)
                play.new_game(engine.engine, args.size, args.komi, seed)
            else:
                if engine is not None:
                    engine.close()
                engine = play.opponent("pachi", args.size, args.komi, playouts=args.playouts,
                                       seed=seed, path=args.engine_path)
                play.new_game(engine.engine, args.size, args.komi)
            meta["engine"] = {k: v for k, v in engine.settings.items() if k != "seed"}
            opening = play.random_opening(args.size, args.opening,
                                          np.random.default_rng([args.seed, i]))
            record = play.play_game({0: engine.engine, 1: engine.engine}, args.size, args.komi,
                                    args.max_moves, args.handicap,
                                    names={0: name_of, 1: name_of}, opening=opening)
            if not record.result:
                if args.engine == "gnugo":
                    record = _with_result(record, engine.engine.send("final_score"))
                else:
                    if referee is None:
                        referee = play.opponent("gnugo", args.size, args.komi).engine
                    record = _with_result(record, play.referee_score(referee, record)[0])
            try:
                sgf.check_rules(record, rules)
            except sgf.RulesViolation as e:
                print(f"game {i}: not saved: {e}", flush=True)
                meta["violations"].append({"game": i, "error": str(e)})
            else:
                sgf.write(record, out / f"game-{i:05d}.sgf")
                meta["written"] = _written(out, args.games)
            meta_path.write_text(json.dumps(meta, indent=2))
            if n % 10 == 0 or n == len(todo) - 1:
                rate = (time.perf_counter() - t0) / (n + 1)
                print(f"game {i}: {len(record.moves)} moves, {record.result}; "
                      f"{rate:.1f} s/game", flush=True)
    finally:
        for e in (engine, referee):
            if e is not None:
                e.close()
    meta["written"] = _written(out, args.games)
    meta_path.write_text(json.dumps(meta, indent=2))
    print(f"{meta['written']} records in {out}; {len(meta['violations'])} games broke the "
          "rules and were not saved", flush=True)
    return 0


def _written(out, games: int) -> int:
    """This run's records in ``out`` (``game-NNNNN.sgf`` for game 0..games-1;
    other SGF files there are not counted)."""
    return sum((out / f"game-{i:05d}.sgf").exists() for i in range(games))


def _with_result(record: sgf.Record, text: str) -> sgf.Record:
    text = text.strip()
    return dataclasses.replace(record, result="0" if text in ("0", "Draw") else text)


if __name__ == "__main__":
    sys.exit(main())
