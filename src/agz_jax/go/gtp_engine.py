"""``gtp-agz``: the raw move-prediction net as a Go engine speaking GTP 2.

    gtp-agz                                          # the shipped nets, models/go19 and go9
    gtp-agz --model runs/go-mp-cpu/depth-12          # then GTP on stdin/stdout
    python -m agz_jax.go.gtp_engine --model DIR

Without ``--model`` it plays the net shipped in ``models/go19`` (found as
``agz_jax.nets.models`` finds the gomoku models: ``$AGZ_JAX_MODELS`` or the
repository's ``models/``; see its MODEL_CARD.md), and after ``boardsize 9``
the one in ``models/go9``; ``--model NAME`` picks another model of that
folder, ``--model DIR`` any model directory (which plays its own size only).

As Maddison et al. (Section 5.2) let their net play: ``genmove`` plays the
legal point of highest probability in the softmax of the colour to move, with
no search. Two rules of ours around it, as the paper's net has no pass output:
it never fills a one-point eye of its own (a point whose neighbours are all its
stones), and it passes when no other point is left, or when the opponent has
just passed and it is ahead by the area count with every stone alive (with the
komi; ``--no-pass-when-ahead`` turns that off). A third for a net trained with
the ladder plane zero, which cannot see ladders: it does not extend a chain in
atari into a ladder that works (``go.ladder.doomed_extensions``: the chain
would be caught at the end of a longer string), unless no other point is left
(``--no-ladder-guard`` turns that off, as the matches of the raw net do).

Commands: protocol_version, name, version, known_command, list_commands,
boardsize (the net's size, or a shipped net's), clear_board, komi, play, genmove, undo,
final_score (area score, every stone alive), showboard, quit. The rules are
Chinese: suicide illegal, positional superko. A net trained with the ladder
plane zero (``go.train19``'s default ``--ladder none``: ``"ladder": "none"`` in
its ``net.json``, or in the ``settings.json`` beside it) gets that plane zero
here too. ``play`` refuses an illegal move
(``? illegal move``); a move out of turn is played (GTP allows it). Every
malformed command gets a ``?`` error and the engine goes on.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.go import ladder
from agz_jax.go import net as net_lib
from agz_jax.go.features import RANKS, batched, channel, channel_names
from agz_jax.go.gtp import GtpError
from agz_jax.go.referee import own_eyes
from agz_jax.go.rules import BLACK, WHITE, Rules, State, point, to_text, vertex
from agz_jax.go.sgf import replay, replay_rules

VERSION = "0.1.0"
COMMANDS = ("protocol_version", "name", "version", "known_command", "list_commands",
            "boardsize", "clear_board", "komi", "play", "genmove", "undo", "final_score",
            "showboard", "quit")
COLOURS = {"b": BLACK, "black": BLACK, "w": WHITE, "white": WHITE}
DEFAULT_MODEL = "go19"
# The shipped net for each board size: without --model, ``boardsize N`` switches to it.
SHIPPED_BY_SIZE = {19: "go19", 9: "go9"}


class GtpFailure(Exception):
    """A command that fails: its message follows GTP's ``?``."""


def engine_rules(size: int) -> Rules:
    """The records' rules (``sgf.replay_rules``: Chinese, positional superko):
    the engine's games are replayed by the data set's compiled scan and its
    feature planes are the data set's (``features.batched``). Komi is kept apart
    (GTP allows any komi). Past the rules' cap of ``4 * size**2`` plies the engine
    starts a new history from the board as it stands (positional superko then
    forgets the older boards, and ``undo`` cannot go back past it)."""
    return replay_rules(size)


@functools.cache
def _policy_fn(rules: Rules, config: net_lib.NetConfig, guard: bool = False):
    net = net_lib.GoNet(config)

    @jax.jit
    def choose(params, planes, legal, board, chain, to_play, ko):
        """(int32[] the best legal point that is not an own eye, or -1 when none;
        float32[A] logits) of one position's planes float32[H, W, C]. With
        ``guard``, not an extension into a ladder that works either
        (``ladder.doomed_extensions``), unless every other point is out."""
        logits = net.logits(params, planes[None], to_play[None])[0]
        me = jnp.where(to_play == BLACK, 1, -1)
        ok = legal & ~own_eyes(rules, board, me)
        if guard:
            spared = ok & ~ladder.doomed_extensions(rules.size, board, chain, me, ko)
            ok = jnp.where(jnp.any(spared), spared, ok)
        best = jnp.argmax(jnp.where(ok, logits, -jnp.inf))
        return jnp.where(jnp.any(ok), best, -1).astype(jnp.int32), logits

    return choose


class Engine:
    """The GTP state machine: ``handle(line)`` -> the response text (None for a
    line with nothing to do). ``choose(state) -> action`` picks the moves
    (default: the net's); tests may give their own."""

    def __init__(self, config: net_lib.NetConfig | None = None, params=None, ranks: int = 0,
                 name: str = "agz_jax", pass_when_ahead: bool = True,
                 choose: Callable[[State], int] | None = None, ladder_plane: bool = True,
                 ladder_guard: bool = True,
                 net_for_size: Callable[[int], tuple | None] | None = None):
        if choose is None and (config is None or params is None):
            raise ValueError("an Engine needs a net (config and params) or a choose function")
        self.config, self.params, self.ranks = config, params, ranks
        self.ladder_plane = ladder_plane  # False: the net was trained with it zero
        self.ladder_guard = ladder_guard  # for such a net: no extension into a working ladder
        # size -> (config, params, ranks, ladder_plane) of another net, or None: lets
        # ``boardsize`` switch nets (gtp-agz without --model: the shipped net of each size)
        self.net_for_size = net_for_size
        self.name = name
        self.pass_when_ahead = pass_when_ahead
        self._choose = choose
        self.size = config.size if config is not None else 9
        self.komi = 7.5
        self.done = False
        self._reset()

    # ------------------------------------------------------------------ state

    def _reset(self):
        self.rules = engine_rules(self.size)
        self.board0 = np.zeros(self.rules.num_points, np.int8)
        self.moves: list[tuple[int, int]] = []
        self._replayed = None  # replayed when first needed

    @property
    def _game(self):
        if self._replayed is None:
            self._replayed = replay(self.rules, self.board0, self.moves)
        return self._replayed

    @property
    def state(self) -> State:
        """The position after the moves played (``done`` after two passes)."""
        return self._game.final

    def _open(self, colour: int) -> State:
        """The position ready for ``colour`` to move: GTP knows no end of game
        (play goes on after two passes), and any colour may move."""
        state = self.state
        if bool(state.done):
            state = state._replace(done=jnp.bool_(False), passes=jnp.int32(0))
        return state._replace(to_play=jnp.int32(colour))

    def _play(self, colour: int, action: int) -> None:
        """The game is the board it started from and the moves since, replayed in
        one compiled scan (``sgf.replay``, shared with the data set builder);
        past the rules' move cap the current board becomes the starting one."""
        if len(self.moves) >= self.rules.max_moves:
            self.board0, self.moves = np.asarray(self.state.board), []
        game = replay(self.rules, self.board0, [*self.moves, (colour, action)])
        why = int(game.why[len(self.moves)])
        if why:
            raise GtpFailure("illegal move")
        self.moves.append((colour, action))
        self._replayed = game

    def undo(self) -> None:
        if not self.moves:
            raise GtpFailure("cannot undo")
        self.moves.pop()
        self._replayed = None

    def area_score(self) -> float:
        """Black's area minus white's minus komi, every stone alive."""
        areas = np.asarray(self._game.areas)
        return float(areas[0] - areas[1]) - self.komi

    def genmove(self, colour: int) -> int:
        """The move the engine plays for ``colour`` (not played yet)."""
        state = self._open(colour)
        opponent_passed = int(state.last_action) == self.rules.pass_action
        if self.pass_when_ahead and opponent_passed:
            score = self.area_score()
            if (score > 0) if colour == BLACK else (score < 0):
                return self.rules.pass_action
        if self._choose is not None:
            action = int(self._choose(state))
        else:
            one = jax.tree.map(lambda x: x[None], state._replace(rank=jnp.int32(-1)))
            planes = batched(self.rules, self.ranks)(one)[0]
            if not self.ladder_plane:
                planes = planes.at[..., channel("ladder", self.ranks)].set(0.0)
            legal = planes[..., channel_names(self.ranks).index("legal")].reshape(-1) > 0
            guard = self.ladder_guard and not self.ladder_plane
            action = int(_policy_fn(self.rules, self.config, guard)(
                self.params, planes, legal, state.board, state.chain, state.to_play,
                state.ko)[0])
        return self.rules.pass_action if action < 0 else action

    # --------------------------------------------------------------- protocol

    def handle(self, line: str) -> str | None:
        """The response to one line of GTP (with its trailing empty line)."""
        line = "".join(ch for ch in line if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))
        line = line.replace("\t", " ").split("#", 1)[0].strip()
        if not line:
            return None
        words = line.split()
        ident = ""
        if words[0].isascii() and words[0].isdigit():
            ident = words.pop(0)
            if not words:
                return f"?{ident} missing command\n\n"
        command, args = words[0], words[1:]
        try:
            text = self._run(command, args)
        except GtpFailure as e:
            return f"?{ident} {e}\n\n"
        return f"={ident} {text}\n\n" if text else f"={ident}\n\n"

    def _run(self, command: str, args: list[str]) -> str:
        if command not in COMMANDS:
            raise GtpFailure("unknown command")
        return getattr(self, "cmd_" + command)(args)

    @staticmethod
    def _arity(args: list[str], n: int) -> None:
        if len(args) != n:
            raise GtpFailure("syntax error")

    def cmd_protocol_version(self, args):
        self._arity(args, 0)
        return "2"

    def cmd_name(self, args):
        self._arity(args, 0)
        return self.name

    def cmd_version(self, args):
        self._arity(args, 0)
        if self.config is None:
            return VERSION
        c = self.config
        return f"{VERSION} (net: {c.layers} layers, {c.filters} filters, {c.size}x{c.size})"

    def cmd_known_command(self, args):
        self._arity(args, 1)
        return "true" if args[0] in COMMANDS else "false"

    def cmd_list_commands(self, args):
        self._arity(args, 0)
        return "\n".join(COMMANDS)

    def cmd_boardsize(self, args):
        self._arity(args, 1)
        if not (args[0].isascii() and args[0].isdigit()):
            raise GtpFailure("syntax error")
        size = int(args[0])
        wanted = self.config.size if self.config is not None else None
        if wanted is not None and size != wanted and self.net_for_size is not None:
            other = self.net_for_size(size)
            if other is not None:
                self.config, self.params, self.ranks, self.ladder_plane = other
                wanted = size
        if wanted is not None and size != wanted:
            # GTP's answer is fixed; the person behind the controller reads stderr
            none_shipped = "" if self.net_for_size is None else f", no {size}x{size} net is shipped"
            print(f"gtp-agz: boardsize {size} refused: this net plays {wanted}x{wanted} only"
                  f"{none_shipped} (a {size}x{size} net: --model DIR)", file=sys.stderr, flush=True)
            raise GtpFailure("unacceptable size")
        if not 2 <= size <= 19:
            raise GtpFailure("unacceptable size")
        self.size = size
        self._reset()
        return ""

    def cmd_clear_board(self, args):
        self._arity(args, 0)
        self._reset()
        return ""

    def cmd_komi(self, args):
        self._arity(args, 1)
        try:
            komi = float(args[0])
        except ValueError:
            raise GtpFailure("syntax error") from None
        if not math.isfinite(komi) or abs(komi) > 1000:
            raise GtpFailure("syntax error")
        self.komi = komi
        return ""

    def _colour(self, text: str) -> int:
        colour = COLOURS.get(text.lower())
        if colour is None:
            raise GtpFailure("syntax error")
        return colour

    def cmd_play(self, args):
        self._arity(args, 2)
        colour = self._colour(args[0])
        try:
            action = point(self.size, args[1])
        except ValueError:
            raise GtpFailure("syntax error") from None
        self._play(colour, action)
        return ""

    def cmd_genmove(self, args):
        self._arity(args, 1)
        colour = self._colour(args[0])
        action = self.genmove(colour)
        self._play(colour, action)
        return vertex(self.size, action)

    def cmd_undo(self, args):
        self._arity(args, 0)
        self.undo()
        return ""

    def cmd_final_score(self, args):
        self._arity(args, 0)
        score = self.area_score()
        if score == 0:
            return "0"
        return f"{'B' if score > 0 else 'W'}+{abs(score):g}"

    def cmd_showboard(self, args):
        self._arity(args, 0)
        letters = "ABCDEFGHJKLMNOPQRST"[: self.size]
        rows = to_text(self.rules, self.state).splitlines()
        body = [f"{self.size - i:2d} {r}" for i, r in enumerate(rows)]
        to_move = "black" if int(self.state.to_play) == BLACK else "white"
        return "\n" + "\n".join(["   " + " ".join(letters), *body,
                                 f"{to_move} to move, move {int(self.state.num_moves)}"])

    def cmd_quit(self, args):
        self.done = True
        return ""


class LocalClient:
    """An in-process ``Engine`` with the interface of a GTP client
    (``go.gtp.GtpEngine``: ``send`` returns the answer, raises ``GtpError`` on
    ``?``), so that ``go.play`` can drive it like an engine process."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def send(self, command: str) -> str:
        response = self.engine.handle(command)
        if response is None:
            raise GtpError(f"{command!r}: not a command")
        text = response.strip("\n")
        if text.startswith("?"):
            raise GtpError(f"{command!r}: {text[1:].strip()}")
        return text[1:].strip()

    def alive(self) -> bool:
        return True

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def default_model() -> Path:
    """The model ``gtp-agz`` plays without ``--model``: ``models/go19`` where
    ``agz_jax.nets.models`` looks for models (``$AGZ_JAX_MODELS`` or the repository's)."""
    from agz_jax.nets.models import models_dir

    return models_dir() / DEFAULT_MODEL


def resolve_model(model: str | Path | None) -> Path:
    """The model directory of ``--model``: None -> ``default_model()``; a bare
    name of a model in the models folder (``go19``) -> that model; else a path."""
    if model is None:
        path = default_model()
        if not (path / "net.json").exists():
            raise FileNotFoundError(f"no default model: {path} is missing or holds no "
                                    "net.json; pass --model DIR")
        return path
    text = str(model)
    if "/" not in text and os.sep not in text:
        named = default_model().parent / text
        if (named / "net.json").exists():
            return named
    return Path(text)


def ladder_plane_read(path: Path, meta: dict) -> bool:
    """Whether the net at ``path`` was trained with the ladder plane read (True)
    or zero (False): ``meta["ladder"]`` of its net.json, else ``train.ladder`` of
    a ``settings.json`` beside it (``experiments.go.train19``'s run folder), else
    read (``go.movepred``'s data sets hold it)."""
    mode = meta.get("ladder")
    if mode is None and (path / "settings.json").exists():
        try:
            mode = json.loads((path / "settings.json").read_text()).get("train", {}).get("ladder")
        except (ValueError, AttributeError):
            mode = None
    return mode != "none"


def load_net(path: Path) -> tuple[net_lib.NetConfig, dict, int, bool]:
    """(config, params, rank planes, ladder plane read) of the net at ``path``."""
    config, params, meta = net_lib.load(path)
    ranks = RANKS if config.channels == len(channel_names(RANKS)) else 0
    if config.channels != len(channel_names(ranks)):
        raise ValueError(f"{path}: a net of {config.channels} input planes; the features "
                         f"have {len(channel_names(0))} or {len(channel_names(RANKS))}")
    return config, params, ranks, ladder_plane_read(path, meta)


@functools.cache
def shipped_net(size: int) -> tuple | None:
    """``load_net`` of the shipped net for ``size`` (``SHIPPED_BY_SIZE``), or None
    when there is none (or it is missing); read once a process, so a controller
    that goes back and forth between sizes does not reload the nets."""
    name = SHIPPED_BY_SIZE.get(size)
    if name is None:
        return None
    path = default_model().parent / name
    if not (path / "net.json").exists():
        return None
    net = load_net(path)
    return net if net[0].size == size else None


def load_engine(model: str | Path | None = None, **kw) -> Engine:
    """The engine of ``--model``; without one, the shipped 19x19 net, which
    ``boardsize`` swaps for the shipped net of another size where there is one."""
    path = resolve_model(model)
    config, params, ranks, ladder_plane = load_net(path)
    kw.setdefault("ladder_plane", ladder_plane)
    if model is None:
        kw.setdefault("net_for_size", shipped_net)
    return Engine(config, params, ranks, **kw)


def serve(engine: Engine, stdin=None, stdout=None) -> None:
    """Answer GTP commands from ``stdin`` until ``quit`` or the end of input."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    for line in stdin:
        try:
            response = engine.handle(line)
        except Exception as e:  # noqa: BLE001  (an engine fault must not end the session)
            response = f"? internal error: {type(e).__name__}: {e}\n\n"
        if response is not None:
            stdout.write(response)
            stdout.flush()
        if engine.done:
            break


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gtp-agz", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None,
                   help=f"a model directory (an experiments.go.train19 run folder, or "
                        f"experiments.go.movepred's depth-D) or the name of one in models/ "
                        f"(default: {DEFAULT_MODEL}, the shipped 19x19 net, and after "
                        f"'boardsize 9' the shipped 9x9 net, go9)")
    p.add_argument("--name", default="agz_jax")
    p.add_argument("--no-pass-when-ahead", action="store_true",
                   help="pass only when no other point is left")
    p.add_argument("--no-ladder-guard", action="store_true",
                   help="let a net trained without the ladder plane extend a chain into a "
                        "ladder that works (the raw net, as in the paper's matches)")
    args = p.parse_args(argv)
    try:
        engine = load_engine(args.model, name=args.name,
                             pass_when_ahead=not args.no_pass_when_ahead,
                             ladder_guard=not args.no_ladder_guard)
    except (OSError, ValueError) as e:
        print(f"gtp-agz: {e}", file=sys.stderr)
        return 2
    from agz_jax.base.cache import enable_compilation_cache
    enable_compilation_cache()
    serve(engine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
