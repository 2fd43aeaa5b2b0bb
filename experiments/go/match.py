"""Matches of the raw move-prediction net (``gtp-agz``) against GnuGo 3.8 or Pachi.

    python -m experiments.go.match --model runs/go-mp-cpu/depth-12 --opponent gnugo \\
        --level 10 --size 9 --games 100 --out runs/go-match-gnugo10
    python -m experiments.go.match --model DIR --opponent pachi --playouts 10000 \\
        --size 9 --games 50 --out runs/go-match-pachi

Our engine runs as its own process (``python -m agz_jax.go.gtp_engine``: the
GTP engine a GTP manager would start) and the two engines are driven over GTP.
It plays the raw net, as the paper's matches did (``--no-ladder-guard``);
``--ladder-guard`` gives it ``gtp-agz``'s guard against running working ladders.
Colours alternate (the net is black in the even games). Game ``i`` is played
with the opponent's random seed ``--seed + i`` (GnuGo's ``set_random_seed``;
Pachi is started again for each game with ``-s``), so the games differ; identical games are
counted (the paper excluded duplicates) and the score is also given without
them. Every game is scored under Chinese rules by a separate GnuGo referee
(``final_score``: GnuGo judges dead stones), as Maddison et al. had theirs; a
game reaching ``--max-moves`` plies is scored as it stands. An engine that
dies, or answers ``genmove`` with an error, loses that game by forfeit ("B+F" /
"W+F"); the game's row says why (``failure``), the totals count the forfeits
(``totals_without_forfeits`` leaves those games out), and the engine is
started afresh for the next game.

``OUT/match.json`` holds the opponent's settings (argv, name, version, level or
playouts, seeds), ours (the model and its net), every game's result and the
totals (wins, losses, draws, score and its standard error sqrt(s(1-s)/n), 95%
Wilson interval); ``OUT/games/`` the SGF records. Started again with the same
arguments it continues.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from agz_jax.base.cache import enable_compilation_cache
from agz_jax.go import gtp, play, sgf
from agz_jax.go import net as net_lib
from agz_jax.go.rules import BLACK, WHITE
from agz_jax.match import arena

PAPER = {"gnugo": "12-layer net 97.2 ± 0.9% (3-layer, 16 filters: 3.4 ± 1.1%) vs GnuGo 3.8 "
                  "level 10, 19x19",
         "pachi": "12-layer net 47.4 ± 3.7% vs Pachi 10.99 at 10,000 rollouts, 19x19"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.go.match",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a model directory of experiments.go.movepred")
    p.add_argument("--opponent", choices=play.ENGINES, default="gnugo")
    p.add_argument("--size", type=int, default=9, choices=(9, 13, 19))
    play.add_flags(p, level=10, playouts=10_000, komi=7.5)
    p.add_argument("--threads", type=int, default=1, help="Pachi's threads")
    p.add_argument("--in-process", action="store_true",
                   help="run our engine in this process (gtp_engine.LocalClient), not as a "
                        "GTP subprocess")
    p.add_argument("--no-pass-when-ahead", action="store_true",
                   help="our engine passes only when no other point is left")
    p.add_argument("--ladder-guard", action="store_true",
                   help="our engine keeps a net without the ladder plane out of working "
                        "ladders (gtp-agz's default); without it, the raw net plays")
    args = p.parse_args(argv)
    play.check_flags(p, args)
    if not Path(args.model).is_dir():
        p.error(f"--model {args.model} is not a model directory (the --out of "
                "experiments.go.movepred, holding net.json)")
    if args.opponent == "pachi":
        try:
            args.engine_path = play.find_pachi(args.engine_path)
        except FileNotFoundError as e:
            p.error(str(e))
    if gtp.find_gnugo() is None:
        p.error("gnugo (the referee) is not installed: apt-get install gnugo "
                "(or `make gnugo` as root)")
    return args


def totals(games: list[dict]) -> dict:
    """Wins, losses, draws and the score (draws count a half) of the net."""
    n = len(games)
    wins = sum(g["net_won"] == 1 for g in games)
    draws = sum(g["net_won"] == 0.5 for g in games)
    score = (wins + draws / 2) / n if n else 0.0
    low, high = arena.wilson(score, n) if n else (0.0, 1.0)
    return {"games": n, "wins": wins, "losses": n - wins - draws, "draws": draws,
            "score": score, "se": math.sqrt(score * (1 - score) / n) if n else 0.0,
            "wilson95": [low, high],
            "forfeits": sum("failure" in g for g in games),
            "net_black": {"games": sum(g["net"] == "B" for g in games),
                          "wins": sum(g["net_won"] == 1 and g["net"] == "B" for g in games)},
            "mean_moves": sum(g["moves"] for g in games) / n if n else 0.0}


def opponent_for_game(args, game: int, current: play.Opponent | None) -> play.Opponent:
    """The opponent of game ``game``, seeded with ``args.seed + game``. GnuGo
    keeps one process and is reseeded by ``set_random_seed`` (``play.new_game``);
    Pachi has no such command, so it is started again for every game with ``-s
    seed``: game i is then the same game however the match was interrupted and
    resumed (one process seeded once replayed its first games after a resume)."""
    if current is not None and args.opponent == "gnugo":
        return current
    if current is not None:
        current.close()
    seed = args.seed if args.opponent == "gnugo" else args.seed + game
    return play.opponent(args.opponent, args.size, args.komi, level=args.level,
                         playouts=args.playouts, seed=seed, path=args.engine_path,
                         threads=args.threads)


def engine_argv(args) -> list[str]:
    """The command line of our GTP engine playing ``args.model``."""
    argv = [sys.executable, "-m", "agz_jax.go.gtp_engine", "--model", str(args.model)]
    argv += [] if args.ladder_guard else ["--no-ladder-guard"]
    return argv + ["--no-pass-when-ahead"] if args.no_pass_when_ahead else argv


def start_ours(args):
    """Our GTP engine for ``args.model``: a process, or in this one."""
    if args.in_process:
        from agz_jax.go.gtp_engine import LocalClient, load_engine
        return LocalClient(load_engine(str(args.model),
                                       pass_when_ahead=not args.no_pass_when_ahead,
                                       ladder_guard=args.ladder_guard))
    return gtp.GtpEngine(engine_argv(args))


def main(argv=None) -> int:
    args = parse_args(argv)
    return play.resumable(lambda: run(args),
                          f"the finished games are kept in {args.out} (match.json, games/)")


def run(args) -> int:
    out = args.out
    try:
        config, _, model_meta = net_lib.load(args.model)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if config.size != args.size:
        print(f"error: {args.model} is a {config.size}x{config.size} net, --size is "
              f"{args.size}", file=sys.stderr)
        return 2
    settings = {k: getattr(args, k) for k in ("model", "opponent", "size", "komi", "seed",
                                              "max_moves")}
    settings.update({"level": args.level} if args.opponent == "gnugo"
                    else {"playouts": args.playouts, "threads": args.threads})
    settings["pass_when_ahead"] = not args.no_pass_when_ahead
    if args.ladder_guard:  # (a key only when on: matches from before the guard resume)
        settings["ladder_guard"] = True
    path = out / "match.json"
    try:
        state = play.resume(path, settings, {"games": []}, "a match")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    (out / "games").mkdir(parents=True, exist_ok=True)
    ours_argv = engine_argv(args)
    if args.in_process:
        ours_argv = ["in-process", *ours_argv[1:]]
    ours = start_ours(args)
    opp = None
    referee = play.opponent("gnugo", args.size, args.komi, level=10)
    try:
        start = len(state["games"])
        opp = opponent_for_game(args, start, None)
        state["opponent"] = {**opp.settings, "seed": f"{args.seed} + game"}
        state["referee"] = referee.settings
        state["ours"] = {"argv": ours_argv, "name": ours.send("name"),
                         "version": ours.send("version"), "net": config.to_dict(),
                         "model": model_meta}
        state["paper"] = PAPER[args.opponent]
        t0 = time.perf_counter()
        for i in range(start, args.games):
            net_colour = BLACK if i % 2 == 0 else WHITE
            seed = args.seed + i
            opp = opponent_for_game(args, i, opp)
            play.new_game(ours, args.size, args.komi)
            play.new_game(opp.engine, args.size, args.komi,
                          seed if args.opponent == "gnugo" else None)
            names = {net_colour: f"agz_jax {args.model}",
                     1 - net_colour: f"{opp.settings['name']} {opp.settings['version']}"}
            players = {net_colour: ours, 1 - net_colour: opp.engine}
            t1 = time.perf_counter()
            failure = None
            try:
                record = play.play_game(players, args.size, args.komi, args.max_moves,
                                        names=names)
            except play.EngineFailed as e:
                # the failed engine loses the game; it is started afresh for the next
                record, failure = e.record, f"{names[e.colour]} failed: {e.reason}"
                print(f"game {i}: {failure}; recorded as its loss", file=sys.stderr, flush=True)
                if players[e.colour] is ours:
                    ours.close()
                    ours = start_ours(args)
                else:
                    opp.close()
                    opp = None
            if not record.result:
                text, _ = play.referee_score(referee.engine, record)
                record = dataclasses.replace(record, result=text)
            winner = record.winner()
            net_won = 0.5 if winner == -1 else float(winner == net_colour)
            sgf.write(record, out / "games" / f"game-{i:04d}.sgf")
            state["games"].append({
                "game": i, "net": "BW"[net_colour], "seed": seed, "result": record.result,
                "net_won": net_won, "moves": len(record.moves),
                "seconds": round(time.perf_counter() - t1, 1),
                **({"failure": failure} if failure else {}),
                "key": " ".join(str(a) for _, a in record.moves)})
            keys = [g["key"] for g in state["games"]]
            unique = [g for j, g in enumerate(state["games"]) if g["key"] not in keys[:j]]
            state["totals"] = totals(state["games"])
            state["totals_without_duplicates"] = totals(unique)
            state["totals_without_forfeits"] = totals(
                [g for g in state["games"] if "failure" not in g])
            path.write_text(json.dumps(state, indent=2))
            t = state["totals"]
            print(f"game {i}: net {'BW'[net_colour]}, {record.result} in {len(record.moves)} "
                  f"moves; net {t['wins']}-{t['losses']}-{t['draws']} "
                  f"({100 * t['score']:.1f} ± {100 * t['se']:.1f}%); "
                  f"{(time.perf_counter() - t0) / (i + 1 - start):.0f} s/game", flush=True)
    except (gtp.GtpError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        for e in (ours, opp, referee):
            if e is not None:
                e.close()
    t = state.get("totals") or totals(state["games"])
    print(f"net vs {args.opponent}: {t['wins']} wins, {t['losses']} losses, {t['draws']} draws "
          f"in {t['games']} games: {100 * t['score']:.1f} ± {100 * t['se']:.1f}%", flush=True)
    if t.get("forfeits"):
        f = state["totals_without_forfeits"]
        print(f"  {t['forfeits']} of them forfeited by a failed engine; without them: "
              f"{f['wins']}-{f['losses']}-{f['draws']} in {f['games']} games, "
              f"{100 * f['score']:.1f}%", flush=True)
    return 0


if __name__ == "__main__":
    enable_compilation_cache()
    sys.exit(main())
