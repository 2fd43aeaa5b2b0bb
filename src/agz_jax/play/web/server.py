"""A web analysis board: play or analyse with the model in a browser, on this
machine, without internet.

    python -m agz_jax.play.web [--model default] [--port 8000] [--sims 200]
    make play

Serves one static page (``static/``: HTML, CSS and JavaScript, nothing from a
CDN) and a small JSON API on 127.0.0.1 (``--host`` changes that, with a
warning). The server keeps no game state: every request carries the whole
game as a list of actions (``row * size + col``), which the server replays and
validates before it answers. This module is the HTTP layer; the API's
answers are ``agz_jax.play.web.api``'s.

The search is PUCT with c_puct 1.5 (``engine.PLAY_C_PUCT``; ``--algorithm
gumbel`` for the model's Gumbel search): PUCT has no schedule, so an analysis can go on growing
its tree for as long as its position stands, up to ``--max-sims`` (default
``engine.PLAY_CAPACITY``, 16384 simulations).

API (JSON in, JSON out; every malformed request gets ``400 {"error": "..."}``
naming the problem):

* ``GET /api/info`` -> model name, board size, rule, simulation limits.
* ``POST /api/move`` ``{"moves": [...], "sims": n, "rule": "freestyle"}`` -> the
  position's status and, unless the game is over, the engine's move for the
  side to move with the analysis behind it.
* ``POST /api/analyse`` (same body) -> the position's status and, unless the
  game is over, the engine's analysis of the position to play, without playing:
  value and win probability for the side to move, per-point visits, visit
  distribution (heat map), prior and backed-up value ``q``, and the top
  ``candidates`` (most visits first). With ``"keep": true`` the analysis
  deepens: the engine goes on growing its tree of the position (if it still
  holds it; else a fresh one) for a step of ``step_ms`` (``/api/info``) and
  answers with the tree so far (``total`` visits, ``carried`` of them from
  the requests before), up to ``sims`` in all (default: the tree's capacity,
  ``max_sims``). The page repeats it, the candidate table growing, until the
  tree is full or the position changes.
* ``POST /api/status`` ``{"moves": [...], "rule": ...}`` -> the position's status
  (over or not, winner, winning line, side to move), no search.
* ``POST /api/load`` ``{"psq": "<text of a .psq file>", "rule": ...}`` -> the
  record's moves and times, replayed and validated, and the final status.
* ``POST /api/psq`` ``{"moves": [...], "times": [...], "black": "...",
  "white": "..."}`` -> the game as a Piskvork ``.psq`` file (download).

Hardening: requests must name this machine in ``Host`` (localhost, 127.0.0.1,
[::1], the ``--host`` address and any ``--allow-host``; DNS rebinding gets
400), bodies are bounded in size, nesting depth and integer length, sockets
time out (``--timeout``), at most ``--max-connections`` are served at once
(more get 503), and clients that hang up are not logged unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agz_jax.play import flags
from agz_jax.play.web.api import DEEPEN_SECONDS, BadRequest, Game, parse_json

STATIC = Path(__file__).resolve().parent / "static"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
MAX_BODY = 64 * 1024
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_CONTENT_LENGTH = re.compile(r"[0-9]{1,12}")  # ASCII digits only (str.isdigit takes '²')
_PORT = re.compile(r"[0-9]{1,5}")


# -- HTTP ----------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    server_version = "agz_jax-web"
    server: Server

    @property
    def timeout(self) -> float:  # read by StreamRequestHandler.setup: the socket's timeout
        return self.server.request_timeout

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        if self.server.verbose:
            super().log_message(format, *args)

    def handle_one_request(self):
        self._unread = False  # a POST body not read before answering (see finish)
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError) as e:  # the client hung up or stalled
            self.close_connection = True
            self.log_message("connection dropped: %s", e)

    def finish(self):
        super().finish()
        if getattr(self, "_unread", False):
            # Lingering close: read what the client still sends, so that closing a
            # socket with unread data (a RST) does not destroy the error reply.
            try:
                self.connection.shutdown(socket.SHUT_WR)
                self.connection.settimeout(min(1.0, self.timeout))
                left = 1 << 20
                while left > 0:
                    chunk = self.connection.recv(min(left, 65536))
                    if not chunk:
                        break
                    left -= len(chunk)
            except OSError:
                pass

    def _send(self, status: int, body: bytes, content_type: str, extra: dict | None = None):
        # http.server answers what it takes for HTTP/0.9 (an unparsable request
        # line, too) with a bare body; every answer here has a status line.
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
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
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(body)

    def _json(self, status: int, obj, extra: dict | None = None):
        self._send(status, json.dumps(obj).encode(), "application/json", extra)

    def send_error(self, code, message=None, explain=None):
        """http.server's own refusals (bad request line, too many headers,
        unknown method, ...) as JSON with the reason, like the API's."""
        self.close_connection = True
        short = self.responses.get(code, ("error",))[0]
        text = message or short
        self._json(code, {"error": text}, {"Connection": "close"})

    def _check_host(self) -> None:
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1:
            raise BadRequest("exactly one Host header is required")
        host = hosts[0].strip().lower()
        name, port = host, ""
        if host.startswith("["):
            name, bracket, port = host.partition("]")
            name += bracket
            port = port.removeprefix(":") if port.startswith(":") else ("?" if port else "")
        elif ":" in host:
            name, _, port = host.partition(":")
        if (port and not _PORT.fullmatch(port)) or name not in self.server.allowed_hosts:
            shown = ", ".join(sorted(self.server.allowed_hosts))
            raise BadRequest(f"Host {hosts[0][:60]!r} is not allowed: this server answers to "
                             f"{shown} (start it with --allow-host NAME for another name)")

    def _answer(self, route) -> None:
        """Runs ``route`` (-> status, body, content type, headers); turns a
        ``BadRequest`` into its status with the message, and anything else into 500."""
        try:
            self._check_host()
            reply = route()
        except BadRequest as e:
            self.close_connection = True
            return self._json(e.status, {"error": str(e)}, {"Connection": "close"})
        except (ConnectionError, TimeoutError):
            raise
        except Exception as e:  # the page gets a reason, the server keeps serving
            self.server.report(f"internal error on {self.command} {self.path[:80]}: "
                               f"{type(e).__name__}: {e}")
            return self._json(500, {"error": f"internal error: {type(e).__name__}: {e}"})
        self._send(*reply)

    def _get(self):
        path = self.path.split("?", 1)[0]
        if path == "/api/info":
            return 200, json.dumps(self.server.game.info()).encode(), "application/json"
        if path in ("/", "/index.html"):
            path = "/static/index.html"
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            # Only the files that ship in static/, by exact name: no traversal.
            files = {p.name: p for p in STATIC.iterdir() if p.is_file()}
            if name in files and files[name].suffix in CONTENT_TYPES:
                return 200, files[name].read_bytes(), CONTENT_TYPES[files[name].suffix]
        raise BadRequest(f"no such page: {path[:80]}", 404)

    def _post(self):
        path = self.path.split("?", 1)[0]
        routes = {"/api/move": self.server.game.move, "/api/analyse": self.server.game.analyse,
                  "/api/load": self.server.game.load, "/api/status": self.server.game.status}
        if path not in routes and path != "/api/psq":
            raise BadRequest(f"no such endpoint: {path[:80]}", 404)
        body = self._read_json()
        if path == "/api/psq":
            return (200, self.server.game.psq(body).encode(), "application/octet-stream",
                    {"Content-Disposition": 'attachment; filename="agz_jax-game.psq"'})
        return 200, json.dumps(routes[path](body)).encode(), "application/json"

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._answer(self._get)

    def do_HEAD(self):  # noqa: N802
        self._answer(self._get)

    def do_POST(self):  # noqa: N802
        self._unread = True
        self._answer(self._post)

    def _read_json(self) -> dict:
        if self.headers.get("Transfer-Encoding") is not None:
            raise BadRequest("Transfer-Encoding is not supported: send a Content-Length")
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise BadRequest("Content-Type must be application/json")
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) != 1:
            raise BadRequest("exactly one Content-Length header is required")
        if not _CONTENT_LENGTH.fullmatch(lengths[0].strip()):
            raise BadRequest(f"Content-Length must be a number of bytes in ASCII digits, "
                             f"got {lengths[0][:20]!r}")
        length = int(lengths[0])
        if length > MAX_BODY:
            raise BadRequest(f"request body too large ({length} bytes; at most {MAX_BODY})")
        self._unread = False
        try:
            raw = self.rfile.read(length)
        except TimeoutError as e:
            raise BadRequest(f"the body did not arrive within {self.timeout:g} s "
                             f"(Content-Length: {length})", 408) from e
        if len(raw) < length:
            raise BadRequest(f"the body ended after {len(raw)} of {length} bytes")
        return parse_json(raw)


class Server(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once (more get 503)."""

    daemon_threads = True

    def __init__(self, address, game: Game, *, verbose: bool = False, timeout: float = 10.0,
                 max_connections: int = 32, allowed_hosts=()):
        self.game = game
        self.verbose = verbose
        self.request_timeout = timeout
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)
        self.allowed_hosts = set(LOOPBACK_NAMES)
        for host in [address[0], *allowed_hosts]:
            host = host.strip().lower()
            if host and host not in ("0.0.0.0", "::"):
                self.allowed_hosts.add(f"[{host}]" if ":" in host else host)

    def report(self, line: str) -> None:
        print(f"agz_jax web: {line}", file=sys.stderr, flush=True)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request) -> None:
        body = json.dumps({"error": f"too many connections (at most {self.max_connections}); "
                                   "try again"}).encode()
        head = (f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n")
        try:
            request.settimeout(1.0)
            request.sendall(head.encode() + body)
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):  # the client went away
            if self.verbose:
                self.report(f"{client_address[0]}: connection dropped: {error}")
            return
        self.report(f"error serving {client_address[0]}: {type(error).__name__}: {error}")


def make_server(engine, host: str = "127.0.0.1", port: int = 8000, *, default_sims: int = 200,
                max_seconds: float = 30.0, deepen_seconds: float = DEEPEN_SECONDS,
                verbose: bool = False, timeout: float = 10.0, max_connections: int = 32,
                allowed_hosts=()) -> Server:
    """An HTTP server (not yet serving) for ``engine``; ``port=0`` picks a free port."""
    return Server((host, port), Game(engine, default_sims=default_sims, max_seconds=max_seconds,
                                     step_seconds=deepen_seconds),
                  verbose=verbose, timeout=timeout, max_connections=max_connections,
                  allowed_hosts=allowed_hosts)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agz_jax.play.web",
                                     description="Play or analyse with the model in a browser.")
    parser.add_argument("--model", default="default",
                        help="model name (models/<name>), model directory or run directory")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1); requests may name it in "
                             "their Host header, besides localhost, 127.0.0.1 and [::1]")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="another name the page may be reached by (the Host header); "
                             "repeatable")
    parser.add_argument("--sims", type=int, default=None,
                        help="default simulations per move (default: the model's own "
                             "search.num_simulations)")
    parser.add_argument("--max-sims", type=int, default=None,
                        help="the tree's capacity: the most simulations a move or an analysis "
                             f"may have (default: {flags.PLAY_CAPACITY}, or --sims if larger)")
    parser.add_argument("--algorithm", choices=("puct", "gumbel"), default=None,
                        help="search algorithm (default: puct)")
    parser.add_argument("--c-puct", type=float, default=None,
                        help="PUCT's exploration constant (default: 1.5, "
                             "engine.PLAY_C_PUCT, chosen by measurement)")
    parser.add_argument("--reuse", action=argparse.BooleanOptionalAction, default=None,
                        help="keep the subtree under the moves played for the next search "
                             "(PUCT only; default: the model's own search.reuse)")
    parser.add_argument("--leaves", type=int, default=0,
                        help="PUCT: leaves a step, evaluated in one batched net call with "
                             "virtual loss; 0 (default): one at a time")
    flags.add_threads_flag(parser)
    parser.add_argument("--max-seconds", type=float, default=30.0,
                        help="a move's search stops after this long whatever --sims says")
    parser.add_argument("--deepen-seconds", type=float, default=DEEPEN_SECONDS,
                        help="how long each step of the board's deepening analysis searches "
                             f"before the page shows its tree (default {DEEPEN_SECONDS})")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds a connection may stall while sending or receiving")
    parser.add_argument("--max-connections", type=int, default=32,
                        help="connections served at once; more are answered 503")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    for flag, value in (("--sims", args.sims), ("--max-sims", args.max_sims),
                        ("--max-seconds", args.max_seconds),
                        ("--deepen-seconds", args.deepen_seconds)):
        if value is not None and not value > 0:
            parser.error(f"{flag} must be positive, got {value}")
    if args.sims is not None and args.max_sims is not None and args.sims > args.max_sims:
        parser.error(f"--sims {args.sims} is more than --max-sims {args.max_sims}, which caps "
                     "every search: lower --sims or raise --max-sims")
    if args.leaves < 0:
        parser.error(f"--leaves must be 0 or more, got {args.leaves}")
    flags.check_search_flags(parser, args)
    if not args.timeout > 0 or args.max_connections < 1:
        parser.error("--timeout and --max-connections must be positive")
    for name in args.allow_host:
        if not name or any(c in name for c in " /\\@#?") or not name.isascii():
            parser.error(f"--allow-host wants a host name or address, got {name!r}")
    if not _is_loopback(args.host):
        print(f"warning: serving on {args.host}, not only on this machine; the board has no "
              "authentication", file=sys.stderr)
    if args.host in ("0.0.0.0", "::") and not args.allow_host:
        print("note: the page answers only requests whose Host header names this machine's "
              "loopback; add --allow-host NAME for each name or address clients use",
              file=sys.stderr)

    from agz_jax.base import cache
    from agz_jax.nets import models
    from agz_jax.play import engine

    cache.enable_compilation_cache()
    try:
        model = models.load(args.model)
    except models.ModelError as e:
        print(f"error: {e}\n(a trained run works too: `make selfplay`, then "
              "`make play MODEL=runs/cpu` or --model runs/cpu)", file=sys.stderr)
        return 2
    sims = model.config.search.num_simulations if args.sims is None else args.sims
    try:
        eng = engine.Engine(model, max_simulations=(max(engine.PLAY_CAPACITY, sims)
                                                    if args.max_sims is None else args.max_sims),
                            algorithm=args.algorithm or "puct", reuse=args.reuse,
                            leaves=args.leaves,
                            c_puct=None if args.algorithm == "gumbel" else (
                                engine.PLAY_C_PUCT if args.c_puct is None else args.c_puct),
                            threads=(args.threads if args.threads is not None else
                                     engine.default_threads(args.algorithm or "puct")))
    except ValueError as e:  # a ConfigError too (--reuse or --leaves with gumbel)
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.sims = sims
    # Bind (and listen) before compiling, so that a busy port or a bad host fails at once;
    # connections that arrive while the search compiles wait in the listen backlog.
    try:
        server = make_server(eng, args.host, args.port, default_sims=args.sims,
                             max_seconds=args.max_seconds,
                             deepen_seconds=args.deepen_seconds, verbose=args.verbose,
                             timeout=args.timeout, max_connections=args.max_connections,
                             allowed_hosts=args.allow_host)
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    try:
        print(f"compiling the search for {model.name} ({eng.size}x{eng.size})...",
              file=sys.stderr, flush=True)
        eng.warmup()
        host, port = server.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        print(f"agz_jax web board: http://{shown}:{port}/  (model {model.name}, "
              f"{eng.size}x{eng.size}, {eng.describe()}; Ctrl-C stops)", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
