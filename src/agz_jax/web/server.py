"""A web board: play the model in a browser, on this machine, without internet.

    python -m agz_jax.web [--model default] [--port 8000] [--sims 200]
    make play

Serves one static page (``static/``: HTML, CSS and JavaScript, nothing from a
CDN) and a small JSON API on 127.0.0.1 (``--host`` changes that, with a
warning). The server keeps no game state: every request carries the whole
game as a list of actions (``row * size + col``), which the server replays and
validates before it answers.

API (JSON in, JSON out; errors are ``400 {"error": "..."}`` naming the problem):

* ``GET /api/info`` -> model name, board size, rule, simulation limits.
* ``POST /api/move`` ``{"moves": [...], "sims": n, "rule": "freestyle"}`` -> the
  position's status and, unless the game is over, the engine's move for the
  side to move with its win probability and move probabilities (heat map).
* ``POST /api/psq`` ``{"moves": [...], "times": [...], "black": "...",
  "white": "..."}`` -> the game as a Piskvork ``.psq`` file (download).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
MAX_BODY = 64 * 1024
NAME_CHARS = 40


class BadRequest(Exception):
    """A request that cannot be served; the message goes back to the page."""


def _field(body: dict, key: str, kind, default=None, required: bool = False):
    if key not in body:
        if required:
            raise BadRequest(f"missing field {key!r}")
        return default
    value = body[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise BadRequest(f"{key!r} must be an integer, got {json.dumps(value)[:40]}")
    if kind is not int and not isinstance(value, kind):
        raise BadRequest(f"{key!r} must be a {kind.__name__}, got {json.dumps(value)[:40]}")
    return value


def _int_list(body: dict, key: str, limit: int, required: bool) -> list[int] | None:
    values = _field(body, key, list, required=required)
    if values is None:
        return None
    if len(values) > limit:
        raise BadRequest(f"{key!r} has {len(values)} entries, at most {limit}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int):
            raise BadRequest(f"{key}[{i}] must be an integer, got {json.dumps(v)[:40]}")
    return values


class Game:
    """The engine behind the page, shared by the request threads (one search at a time)."""

    def __init__(self, engine, *, default_sims: int, max_seconds: float):
        from agz_jax import engine as engine_mod
        from agz_jax import records

        self.engine = engine
        self.default_sims = min(default_sims, engine.max_simulations)
        self.max_seconds = max_seconds
        self.size = engine.size
        self.num_actions = engine.num_actions
        self._lock = threading.Lock()
        self._steps = {}
        self._engine_mod = engine_mod
        self._records = records

    def info(self) -> dict:
        model = self.engine.model
        return {"model": model.name, "size": self.size, "rule": model.rules.rule,
                "rules": ["freestyle", "standard"], "default_sims": self.default_sims,
                "max_sims": self.engine.max_simulations}

    def _replay(self, body: dict):
        moves = _int_list(body, "moves", self.num_actions, required=True)
        rule = _field(body, "rule", str, default=self.engine.model.rules.rule)
        if rule not in ("freestyle", "standard"):
            raise BadRequest(f"'rule' must be 'freestyle' or 'standard', got {rule[:40]!r}")
        record = self._records.Record(self.size, moves, [0] * len(moves))
        for i, a in enumerate(moves):
            if not 0 <= a < self.num_actions:
                raise BadRequest(f"moves[{i}] = {a} is off the {self.size}x{self.size} board "
                                 f"(0..{self.num_actions - 1})")
        try:
            state = self._records.to_states(record, rule)
        except self._records.RecordError as e:
            raise BadRequest(str(e).removeprefix("record: ")) from e
        return moves, self.engine.rules(rule), state

    def _status(self, rules, state) -> dict:
        winner = int(state.winner)
        line = []
        if winner >= 0:
            line = self._engine_mod.winning_line(rules, state.board, int(state.last_action))
        return {"done": bool(state.done), "winner": winner, "line": line,
                "to_play": int(state.to_play)}

    def move(self, body: dict) -> dict:
        for key in body:
            if key not in ("moves", "sims", "rule"):
                raise BadRequest(f"unknown field {key[:40]!r}")
        sims = _field(body, "sims", int, default=self.default_sims)
        if not 1 <= sims <= self.engine.max_simulations:
            raise BadRequest(f"'sims' must be in 1..{self.engine.max_simulations}, got {sims}")
        moves, rules, state = self._replay(body)
        reply = {"moves": moves, "engine_move": None, "analysis": None}
        if not bool(state.done):
            with self._lock:
                analysis = self.engine.analyse(
                    rules, state, simulations=sims,
                    deadline=time.perf_counter() + self.max_seconds)
            if rules not in self._steps:
                import jax

                self._steps[rules] = jax.jit(rules.step)
            state = self._steps[rules](state, analysis.action)
            reply["moves"] = moves + [analysis.action]
            reply["engine_move"] = analysis.action
            reply["analysis"] = {
                "value": round(analysis.value, 4), "win_prob": round(analysis.win_prob, 4),
                "policy": [round(float(p), 4) for p in analysis.policy],
                "prior": [round(float(p), 4) for p in analysis.prior],
                "simulations": analysis.simulations, "reason": analysis.reason,
                "elapsed_ms": round(analysis.elapsed * 1000.0, 1)}
        reply.update(self._status(rules, state))
        return reply

    def psq(self, body: dict) -> str:
        for key in body:
            if key not in ("moves", "times", "rule", "black", "white"):
                raise BadRequest(f"unknown field {key[:40]!r}")
        moves, _, _ = self._replay(body)
        times = _int_list(body, "times", self.num_actions, required=False)
        if times is not None and (len(times) != len(moves) or any(t < 0 for t in times)):
            raise BadRequest(f"'times' must hold {len(moves)} non-negative integers (ms)")
        trailer = []
        for colour in ("black", "white"):
            name = _field(body, colour, str, default="")
            if len(name) > NAME_CHARS or not all(c.isalnum() or c in " ._-:()" for c in name):
                raise BadRequest(f"{colour!r}: at most {NAME_CHARS} letters, digits, spaces "
                                 "or ._-:()")
            if name:
                trailer.append(f"{colour}: {name}")
        fd, path = tempfile.mkstemp(suffix=".psq")
        os.close(fd)
        try:
            self._records.write_psq(path, moves, self.size, times_ms=times, trailer=trailer)
            return Path(path).read_text(encoding="utf-8")
        finally:
            os.unlink(path)


class Handler(BaseHTTPRequestHandler):
    server_version = "agz_jax-web"
    game: Game  # set on the subclass made by make_server

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, content_type: str, extra: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; object-src 'none'")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj):
        self._send(status, json.dumps(obj).encode(), "application/json")

    def do_GET(self):  # noqa: N802 (http.server's naming)
        path = self.path.split("?", 1)[0]
        if path == "/api/info":
            return self._json(200, self.server.game.info())
        if path in ("/", "/index.html"):
            path = "/static/index.html"
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            # Only the files that ship in static/, by exact name: no traversal.
            files = {p.name: p for p in STATIC.iterdir() if p.is_file()}
            if name in files and files[name].suffix in CONTENT_TYPES:
                return self._send(200, files[name].read_bytes(),
                                  CONTENT_TYPES[files[name].suffix])
        return self._json(404, {"error": f"no such page: {path[:80]}"})

    def do_HEAD(self):  # noqa: N802
        return self.do_GET()

    def do_POST(self):  # noqa: N802
        path = self.path.split("?", 1)[0]
        try:
            body = self._read_json()
            if path == "/api/move":
                return self._json(200, self.server.game.move(body))
            if path == "/api/psq":
                text = self.server.game.psq(body)
                return self._send(200, text.encode(), "application/octet-stream", {
                    "Content-Disposition": 'attachment; filename="agz_jax-game.psq"'})
            return self._json(404, {"error": f"no such endpoint: {path[:80]}"})
        except BadRequest as e:
            return self._json(400, {"error": str(e)})
        except Exception as e:  # the page gets a reason, the server keeps serving
            return self._json(500, {"error": f"internal error: {type(e).__name__}: {e}"})

    def _read_json(self) -> dict:
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise BadRequest("Content-Type must be application/json")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise BadRequest("a Content-Length header is required")
        if int(length) > MAX_BODY:
            raise BadRequest(f"request body too large ({length} bytes; at most {MAX_BODY})")
        raw = self.rfile.read(int(length))
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadRequest(f"the body is not valid JSON: {e}") from e
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, game: Game, verbose: bool = False):
        self.game = game
        self.verbose = verbose
        super().__init__(address, Handler)


def make_server(engine, host: str = "127.0.0.1", port: int = 8000, *, default_sims: int = 200,
                max_seconds: float = 30.0, verbose: bool = False) -> Server:
    """An HTTP server (not yet serving) for ``engine``; ``port=0`` picks a free port."""
    return Server((host, port), Game(engine, default_sims=default_sims, max_seconds=max_seconds),
                  verbose)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agz_jax.web",
                                     description="Play the model in a browser.")
    parser.add_argument("--model", default="default",
                        help="model name (models/<name>), model directory or run directory")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default localhost)")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--sims", type=int, default=200, help="default simulations per move")
    parser.add_argument("--max-sims", type=int, default=1600,
                        help="the most simulations the page may ask for")
    parser.add_argument("--max-seconds", type=float, default=30.0,
                        help="a move's search stops after this long whatever --sims says")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    if args.sims < 1 or args.max_sims < 1 or args.max_seconds <= 0:
        parser.error("--sims, --max-sims and --max-seconds must be positive")
    if not _is_loopback(args.host):
        print(f"warning: serving on {args.host}, not only on this machine; the board has no "
              "authentication", file=sys.stderr)

    from agz_jax import cache, engine, models

    cache.enable_compilation_cache()
    try:
        model = models.load(args.model)
    except models.ModelError as e:
        print(f"error: {e}\n(a trained run works too: `make selfplay`, then "
              "`make play MODEL=runs/cpu` or --model runs/cpu)", file=sys.stderr)
        return 2
    eng = engine.Engine(model, max_simulations=args.max_sims)
    print(f"compiling the search for {model.name} ({eng.size}x{eng.size})...", file=sys.stderr,
          flush=True)
    eng.warmup()
    try:
        server = make_server(eng, args.host, args.port, default_sims=args.sims,
                             max_seconds=args.max_seconds, verbose=args.verbose)
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"agz_jax web board: http://{shown}:{port}/  (model {model.name}, "
          f"{eng.size}x{eng.size}; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
