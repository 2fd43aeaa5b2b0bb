"""The web board: ``python -m agz_jax.play.web`` as a subprocess, its JSON API's
validation and hardening (raw sockets), and the analysis board driven by clicks
and keys in headless Debian chromium (playwright with the system browser;
``make test`` installs it). Screenshots go to tests/artifacts/."""

import json
import math
import os
import queue
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from fractions import Fraction
from pathlib import Path

import pytest
from tiny_models import compile_lock, random_model, xla_cache_dir

from agz_jax.game import records
from agz_jax.play.web import api
from agz_jax.play.web import server as web

SIZE = 15
CHROMIUM = os.environ.get("AGZ_JAX_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
TIMEOUT_S = 2          # the test server's --timeout
DEEPEN_S = 2.0         # its --deepen-seconds: a step's sims finish on a loaded machine too
MAX_CONNECTIONS = 12   # its --max-connections
LETTERS = "ABCDEFGHIJKLMNO"


class Served(str):
    """The server's URL, with its port and the file its stderr goes to."""

    port: int
    stderr: Path


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    model = random_model(tmp_path_factory.mktemp("web_model") / "m", SIZE, seed=5)
    cache = xla_cache_dir(tmp_path_factory)  # test_brain's engine has the same shapes
    env = {**os.environ, "AGZ_JAX_CACHE_DIR": str(cache), "JAX_PLATFORMS": "cpu"}
    env.pop("AGZ_JAX_NO_CACHE", None)
    err_path = tmp_path_factory.mktemp("web_log") / "stderr.txt"
    lines: queue.Queue = queue.Queue()
    with compile_lock(cache), open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agz_jax.play.web", "--model", str(model), "--port", "0",
             "--sims", "8", "--max-sims", "4096", "--timeout", str(TIMEOUT_S),
             "--max-connections", str(MAX_CONNECTIONS), "--deepen-seconds", str(DEEPEN_S)],
            stdout=subprocess.PIPE, stderr=err, env=env)
        threading.Thread(target=lambda: [*(lines.put(x.decode()) for x in proc.stdout),
                                         lines.put(None)], daemon=True).start()
        try:
            banner = lines.get(timeout=600)
        except queue.Empty:
            banner = "no URL within 600 s"
    if banner is None or "http://127.0.0.1:" not in banner:
        proc.kill()
        proc.wait(timeout=30)
        raise AssertionError(f"the web server did not start ({banner or 'it exited'}):\n"
                             + err_path.read_text(errors="replace")[-3000:])
    url = Served(banner.split()[3])
    url.port = int(url.rstrip("/").rsplit(":", 1)[1])
    url.stderr = err_path
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def post(url, path, body, content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url.rstrip("/") + path, data=data,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get(url, path):
    try:
        with urllib.request.urlopen(url.rstrip("/") + path, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def at(x, y):
    return y * SIZE + x


def coord(a):
    return f"{LETTERS[a % SIZE]}{SIZE - a // SIZE}"


def pct(p: float) -> str:
    """JavaScript's ``(100 * p).toFixed(0) + "%"``: the nearest integer, ties up."""
    return f"{math.floor(Fraction(100 * p) + Fraction(1, 2))}%"


FIVE = [at(0, 0), at(0, 5), at(1, 0), at(1, 5), at(2, 0), at(2, 5), at(3, 0), at(3, 5), at(4, 0)]


def test_api_validates_requests(server):
    status, body = get(server, "/api/info")
    info = json.loads(body)
    assert status == 200 and info["size"] == SIZE and info["max_sims"] == 4096
    bad = [
        ({"moves": [0, 0]}, "occupied"),
        ({"moves": [225]}, "off the 15x15 board"),
        ({"moves": [1.5]}, "integer"),
        ({"moves": [True]}, "integer"),
        ({"moves": "0,1"}, "must be a list"),
        ({}, "missing field 'moves'"),
        ({"moves": [], "sims": 0}, "1..4096"),
        ({"moves": [], "sims": 10**9}, "1..4096"),
        ({"moves": [], "colour": 1}, "unknown field"),
        ({"moves": [], "rule": "caro"}, "'rule'"),
        ({"moves": [], "rule": "renju"}, "trained on freestyle and does not play renju"),
        ({"moves": [], "rule": "renju"}, "a renju model (--model models/renju)"),
        ({"moves": list(range(226))}, "at most 225"),
        ({"moves": FIVE + [at(9, 9)]}, "follows the end of the game"),
    ]
    for endpoint in ("/api/move", "/api/analyse"):
        for payload, reason in bad:
            status, body = post(server, endpoint, payload)
            assert status == 400 and reason in json.loads(body)["error"], (endpoint, payload, body)
    status, body = post(server, "/api/status", {"moves": [], "sims": 8})
    assert status == 400 and "unknown field 'sims'" in json.loads(body)["error"]
    for raw, kind, reason in [(b"{not json", "application/json", "not valid JSON"),
                              (b"[1, 2]", "application/json", "JSON object"),
                              (b"{}", "text/plain", "Content-Type"),
                              (b" " * (65 * 1024), "application/json", "too large")]:
        status, body = post(server, "/api/move", raw, kind)
        assert status == 400 and reason in json.loads(body)["error"], (raw[:20], body)
    for path in ("/static/../server.py", "/static/server.py", "/static/%2e%2e/server.py",
                 "/etc/passwd", "/api/nothing"):
        assert get(server, path)[0] == 404, path
    status, body = post(server, "/api/psq", {"moves": [0], "black": "<script>"})
    assert status == 400 and "'black'" in json.loads(body)["error"]
    header = "Piskvorky 15x15, 11:11, 0\n"
    for psq, reason in [("hello", "'Piskvorky WxH, X:Y, N' header"),
                        ("Piskvorky 20x20, 11:11, 0\n1,1,0\n", "20x20 board"),
                        (header + "16,1,0\n", "line 2: point x=16, y=1 is outside"),
                        (header + "8,8,0\n8,8,0\n", "line 3: point x=8, y=8 repeats"),
                        (header + "8,8," + "9" * 5000 + "\n", "line 2: a number with 5000"),
                        (header + "".join(f"{x},1,0\n{x},6,0\n" for x in range(1, 7)),
                         "follows the end of the game")]:
        status, body = post(server, "/api/load", {"psq": psq})
        assert status == 400 and reason in json.loads(body)["error"], (psq[:40], body)
    status, body = post(server, "/api/load", {"psq": 5})
    assert status == 400 and "'psq' must be a str" in json.loads(body)["error"]


def test_api_under_renju_marks_and_refuses_black_forbidden_points(server, tmp_path):
    # Black's threes 5,5 6,5 (x, y) and 7,6 7,7 cross at 7,5: a double three.
    black, white = [at(5, 5), at(6, 5), at(7, 6), at(7, 7)], [at(0, 0), at(0, 2), at(0, 4)]
    moves = [m for pair in zip(black, white + [None], strict=True) for m in pair if m is not None]
    status, body = post(server, "/api/status", {"moves": moves[:-1], "rule": "renju"})
    assert status == 200 and json.loads(body)["forbidden"] == {}  # white to move: none
    moves.append(at(0, 6))
    status, body = post(server, "/api/status", {"moves": moves, "rule": "renju"})
    reply = json.loads(body)
    assert status == 200 and reply["forbidden"] == {str(at(7, 5)): "double three"}, reply
    status, body = post(server, "/api/status", {"moves": moves, "rule": "freestyle"})
    assert json.loads(body)["forbidden"] == {}
    status, body = post(server, "/api/status", {"moves": moves + [at(7, 5)], "rule": "renju"})
    error = json.loads(body)["error"]
    assert status == 400 and "black's forbidden point under renju (double three)" in error
    status, body = post(server, "/api/psq", {"moves": moves, "rule": "renju"})
    assert status == 200 and "rule: renju" in body.decode()
    status, loaded = post(server, "/api/load", {"psq": body.decode()})
    assert status == 200 and json.loads(loaded)["rule"] == "renju"


def test_api_analysis_load_and_psq(server, tmp_path):
    status, body = post(server, "/api/move", {"moves": FIVE, "sims": 4})
    reply = json.loads(body)
    assert status == 200 and reply["done"] and reply["winner"] == 0
    assert reply["engine_move"] is None and reply["line"] == [at(x, 0) for x in range(5)]
    # One engine move: legal, with the analysis of the position it moved from.
    status, body = post(server, "/api/move", {"moves": FIVE[:4], "sims": 16})
    reply = json.loads(body)
    assert status == 200 and reply["engine_move"] not in FIVE[:4]
    assert reply["moves"] == FIVE[:4] + [reply["engine_move"]]
    assert reply["analysis"]["best"] == reply["engine_move"]
    assert reply["analysis"]["to_play"] == 0 and reply["to_play"] == 1
    assert sum(reply["analysis"]["policy"]) == pytest.approx(1.0, abs=1e-3)
    assert reply["analysis"]["simulations"] == 16 and not reply["done"]

    # The analysis of the position to play: per-point visits that sum to the
    # simulations, none on a stone; candidates by visits, with the arrays' q and prior.
    moves = FIVE[:3]
    status, body = post(server, "/api/analyse", {"moves": moves, "sims": 40})
    reply = json.loads(body)
    an = reply["analysis"]
    assert status == 200 and reply["moves"] == moves and not reply["done"]
    assert an["to_play"] == 1 == reply["to_play"] and an["simulations"] == 40
    assert sum(an["visits"]) == 40 and all(an["visits"][a] == 0 for a in moves)
    pairs = zip(an["policy"], an["visits"], strict=True)
    assert all(v == pytest.approx(n / 40, abs=1e-4) for v, n in pairs)
    assert all((q is None) == (n == 0) for q, n in zip(an["q"], an["visits"], strict=True))
    cands = an["candidates"]
    assert 1 <= len(cands) <= 10 and cands[0]["move"] == an["best"]
    assert [c["visits"] for c in cands] == sorted((c["visits"] for c in cands), reverse=True)
    assert cands[0]["visits"] == max(an["visits"])
    for c in cands:
        assert c["visits"] == an["visits"][c["move"]] and c["q"] == an["q"][c["move"]]
        assert c["prior"] == an["prior"][c["move"]] and -1 <= c["q"] <= 1
    assert an["win_prob"] == pytest.approx((an["value"] + 1) / 2, abs=1e-3)
    # A five in one: no search, the winning move, value 1.
    status, body = post(server, "/api/analyse", {"moves": FIVE[:8], "sims": 8})
    an = json.loads(body)["analysis"]
    assert an["reason"] == "win" and an["best"] == at(4, 0) and an["value"] == 1.0
    assert an["candidates"] == [{"move": at(4, 0), "visits": 0, "policy": 1.0, "q": 1.0,
                                 "prior": an["prior"][at(4, 0)]}]
    status, body = post(server, "/api/status", {"moves": FIVE, "rule": "standard"})
    assert json.loads(body) == {"moves": FIVE, "done": True, "winner": 0,
                                "line": [at(x, 0) for x in range(5)], "to_play": 1,
                                "forbidden": {}}

    # .psq out and back in.
    status, body = post(server, "/api/psq", {"moves": FIVE, "times": [5] * 9,
                                             "black": "human", "white": "agz_jax"})
    assert status == 200 and b"black: human" in body
    path = tmp_path / "game.psq"
    path.write_bytes(body)
    rec = records.read_psq(path)
    assert rec.size == SIZE and rec.moves == FIVE and rec.times_ms == [5] * 9
    status, body = post(server, "/api/load", {"psq": body.decode()})
    reply = json.loads(body)
    assert status == 200 and reply["moves"] == FIVE and reply["times"] == [5] * 9
    assert reply["done"] and reply["winner"] == 0
    # A line that starts like a move but is not one is refused, naming the line, rather
    # than taken for the trailer with the moves after it silently dropped.
    for bad in ("9,9", "9,9,x", "3,3,1e5"):
        psq = f"Piskvorky {SIZE}x{SIZE}, 11:11, 0\n1,1,0\n{bad}\n2,2,0\n3,3,0\n"
        status, body = post(server, "/api/load", {"psq": psq})
        assert status == 400, (bad, body)
        assert "line 3: " in json.loads(body)["error"] and "looks like a move" in body.decode()


def test_api_analysis_deepens(server):
    """``keep``: each request grows the engine's tree of the position (the last
    analysis's, ``carried``) up to ``sims`` in all (default: the capacity); a
    full tree grows no more; another position starts afresh."""
    status, body = get(server, "/api/info")
    assert json.loads(body)["step_ms"] == round(DEEPEN_S * 1000)
    moves = [at(7, 7), at(8, 8), at(6, 8)]
    first = json.loads(post(server, "/api/analyse", {"moves": moves, "sims": 16})[1])["analysis"]
    assert (first["simulations"], first["carried"], first["total"]) == (16, 0, 16)
    deeper = json.loads(post(server, "/api/analyse", {"moves": moves, "sims": 40,
                                                      "keep": True})[1])["analysis"]
    assert (deeper["carried"], deeper["simulations"], deeper["total"]) == (16, 24, 40)
    assert sum(deeper["visits"]) == 40
    assert all(v >= u for u, v in zip(first["visits"], deeper["visits"], strict=True))
    full = json.loads(post(server, "/api/analyse", {"moves": moves, "sims": 40,
                                                    "keep": True})[1])["analysis"]
    assert (full["carried"], full["simulations"], full["visits"]) == (40, 0, deeper["visits"])
    grown = json.loads(post(server, "/api/analyse", {"moves": moves, "keep": True})[1])
    assert grown["analysis"]["carried"] == 40 and grown["analysis"]["simulations"] > 0
    assert grown["moves"] == moves and not grown["done"]
    other = json.loads(post(server, "/api/analyse", {"moves": moves[:2], "sims": 8,
                                                     "keep": True})[1])["analysis"]
    assert other["carried"] == 0 and other["total"] == 8
    status, body = post(server, "/api/analyse", {"moves": moves, "keep": 1})
    assert status == 400 and "'keep' must be a bool" in json.loads(body)["error"]


# -- hardening ---------------------------------------------------------------------------

def raw_request(port, data: bytes, *, half_close=False, timeout=10.0):
    """Sends ``data`` on a fresh connection; the status and the parsed JSON body
    (None when the server closed without answering)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    if not reply:
        return None, None
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), (json.loads(body) if body else None)


def http(method, path, body=b"", *, host="127.0.0.1", headers=(), length=None):
    lines = [f"{method} {path} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    if body or length is not None:
        lines += ["Content-Type: application/json",
                  f"Content-Length: {len(body) if length is None else length}"]
    lines += list(headers)
    # Header bytes as http.server reads them (ISO-8859-1): '²' is the byte 0xB2.
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def test_hardening(server):
    port = server.port
    deep = b"[" * 30000
    big = b'{"moves": [1' + b"1" * 4999 + b"]}"
    cases = [
        # (request bytes, status, part of the error message)
        (http("POST", "/api/move", b"{}", length="²"), 400, "ASCII digits"),
        (http("POST", "/api/move", b"{}", length="\u00c2\u00b2"), 400, "ASCII digits"),  # UTF-8 ²
        (http("POST", "/api/move", b"{}", length="-2"), 400, "ASCII digits"),
        (http("POST", "/api/move", b"{}", length="0x2"), 400, "ASCII digits"),
        (http("POST", "/api/move", deep), 400, "more than 8 deep"),
        (http("POST", "/api/move", b'{"moves": [[[[[[[[[0]]]]]]]]]}'), 400, "more than 8 deep"),
        (http("POST", "/api/move", b'{"moves": [[0]]}'), 400, "moves[0] must be an integer"),
        (http("POST", "/api/move", big), 400, "5000 digits"),
        (http("POST", "/api/move", b'{"moves": [], "sims": 1e999}'), 400, "'sims' must be an int"),
        (http("POST", "/api/move", b'{"moves": [NaN]}'), 400, "NaN is not a JSON value"),
        (http("POST", "/api/move", b'{"moves": [], "moves": [1]}'), 400, "appears twice"),
        (http("POST", "/api/move", b'{"moves": "\xff"}'), 400, "not UTF-8"),
        (http("POST", "/api/move", b"{}", headers=["Transfer-Encoding: chunked"]), 400,
         "Transfer-Encoding"),
        (http("POST", "/api/move", b"{}", headers=["Content-Length: 2"]), 400,
         "exactly one Content-Length"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "Bad"),  # TLS hello
        (http("DELETE", "/api/move"), 501, "Unsupported method"),
        # The Host header: loopback names only (DNS rebinding), one of them, any port.
        (http("GET", "/api/info", host="evil.example"), 400, "is not allowed"),
        (http("GET", "/api/info", host=f"evil.example:{port}"), 400, "is not allowed"),
        (http("GET", "/api/info", host="localhost.evil.example"), 400, "is not allowed"),
        (http("GET", "/api/info", host="127.0.0.1:x"), 400, "is not allowed"),
        (http("GET", "/api/info", host="[::1"), 400, "is not allowed"),
        (http("GET", "/api/info", host="[::1]x"), 400, "is not allowed"),
        (http("POST", "/api/move", b'{"moves": []}', host="10.0.0.1"), 400, "is not allowed"),
        (http("GET", "/api/info", host=None), 400, "exactly one Host header"),
        (http("GET", "/api/info", headers=["Host: localhost"]), 400, "exactly one Host"),
    ]
    for data, status, reason in cases:
        got, body = raw_request(port, data)
        assert got == status and reason in body["error"], (data[:60], got, body)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}",
                 "[::1]"):
        got, body = raw_request(port, http("GET", "/api/info", host=host))
        assert got == 200 and body["size"] == SIZE, host
    got, body = raw_request(port, http("POST", "/api/move", b'{"moves": [], "sims": 2}'))
    assert got == 200 and body["engine_move"] is not None
    # A body shorter than promised: if the client closes, 400 at once ...
    got, body = raw_request(port, http("POST", "/api/move", b'{"mo', length=40), half_close=True)
    assert got == 400 and "the body ended after 4 of 40 bytes" in body["error"], body

    # ... and if it stalls, 408 after --timeout; a connection that sends nothing
    # is closed after --timeout. Both at once, each on a thread.
    results = {}

    def stall(name, data):
        t0 = time.perf_counter()
        results[name] = (*raw_request(port, data), time.perf_counter() - t0)

    threads = [threading.Thread(target=stall, args=a) for a in [
        ("body", http("POST", "/api/move", b'{"moves": [', length=100)), ("silent", b"")]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    status, body, seconds = results["body"]
    assert status == 408 and f"did not arrive within {TIMEOUT_S} s" in body["error"], body
    assert TIMEOUT_S - 0.5 < seconds < TIMEOUT_S + 5
    status, body, seconds = results["silent"]
    assert status is None and TIMEOUT_S - 0.5 < seconds < TIMEOUT_S + 5

    # At most MAX_CONNECTIONS at once: one more is answered 503 straight away. (An
    # idle connection refused while an earlier one still held its slot is replaced.)
    idle = []
    deadline = time.monotonic() + 10
    try:
        while len(idle) < MAX_CONNECTIONS:
            assert time.monotonic() < deadline, f"only {len(idle)} connections were accepted"
            idle += [socket.create_connection(("127.0.0.1", port), timeout=10)
                     for _ in range(MAX_CONNECTIONS - len(idle))]
            time.sleep(0.2)
            refused, _, _ = select.select(idle, [], [], 0)
            for s in refused:
                s.close()
            idle = [s for s in idle if s not in refused]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as extra:
            reply = extra.recv(4096)
        assert reply.startswith(b"HTTP/1.0 503") and b"too many connections" in reply, reply
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 5
    while (got := raw_request(port, http("GET", "/api/info"))[0]) == 503:
        assert time.monotonic() < deadline, "the slots were not released"
        time.sleep(0.05)
    assert got == 200

    # A client that hangs up before the answer (a reset): nothing in the log.
    for _ in range(2):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(http("POST", "/api/analyse", b'{"moves": [], "sims": 48}'))
        time.sleep(0.05)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    got, _ = raw_request(port, http("POST", "/api/analyse", b'{"moves": [], "sims": 2}'))
    assert got == 200
    time.sleep(0.3)
    log = server.stderr.read_text(errors="replace")
    assert "Traceback" not in log and "Error" not in log, log[-3000:]


class _StubGame:
    def info(self):
        return {"size": SIZE}


def test_host_option_and_json_bounds():
    """``--host`` (and ``--allow-host``) add names to the loopback ones; the JSON
    guards on their own."""
    srv = web.Server(("127.0.0.2", 0), _StubGame(), allowed_hosts=["Board.Example"])
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        port = srv.server_address[1]
        with socket.create_connection(("127.0.0.2", port), timeout=10) as s:
            s.sendall(http("GET", "/api/info", host=f"127.0.0.2:{port}"))
            assert s.recv(4096).startswith(b"HTTP/1.0 200")
        for host, status in [(f"127.0.0.2:{port}", 200), ("board.example", 200),
                             (f"BOARD.example:{port}", 200), ("localhost", 200),
                             ("127.0.0.3", 400), ("example", 400)]:
            with socket.create_connection(("127.0.0.2", port), timeout=10) as s:
                s.sendall(http("GET", "/api/info", host=host))
                assert s.recv(4096).startswith(f"HTTP/1.0 {status}".encode()), host
    finally:
        srv.shutdown()
        srv.server_close()
    assert api.parse_json(b'{"a": [[1, 2]], "b": "[[[[[[[[[[[["}') == {
        "a": [[1, 2]], "b": "[[[[[[[[[[[["}
    assert api.parse_json(b'{"a": ' + b"[" * 7 + b"]" * 7 + b"}")["a"] == [[[[[[[]]]]]]]
    assert api.parse_json(f'{{"n": {10**15 - 1}}}'.encode()) == {"n": 10**15 - 1}
    for raw, reason in [(b'{"a": ' + b"[" * 8 + b"]" * 8 + b"}", "more than 8 deep"),
                        (f'{{"n": {10**15}}}'.encode(), "16 digits"),
                        (b'{"n": -Infinity}', "-Infinity is not"),
                        (b'{"s": "\\"[[[[[[[[[[", "t": [}', "not valid JSON")]:
        with pytest.raises(api.BadRequest, match=reason):
            api.parse_json(raw)


@pytest.mark.parametrize("argv", [["--sims", "0"], ["--max-sims", "0"], ["--sims", "-1"],
                                  ["--max-seconds", "0"], ["--max-seconds", "nan"],
                                  ["--deepen-seconds", "0"], ["--c-puct", "0"]])
def test_zero_or_negative_limits_are_refused(capsys, monkeypatch, argv):
    """0 is no limit the board could use (not "the default"): refused like a
    negative one, before the model is loaded."""
    from agz_jax.nets import models

    monkeypatch.setattr(models, "load", lambda *a: pytest.fail("the model was loaded"))
    with pytest.raises(SystemExit) as e:
        web.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {argv[0]} must be positive, got " in err.splitlines()[-1], err


def test_a_default_above_the_cap_is_refused(capsys, monkeypatch):
    """--sims over --max-sims, both given: refused before the model is loaded,
    rather than the default quietly lowered to the cap."""
    from agz_jax.nets import models

    monkeypatch.setattr(models, "load", lambda *a: pytest.fail("the model was loaded"))
    with pytest.raises(SystemExit) as e:
        web.main(["--sims", "2000", "--max-sims", "500"])
    assert e.value.code == 2
    assert ("error: --sims 2000 is more than --max-sims 500"
            in capsys.readouterr().err.splitlines()[-1])


class _StubEngine:
    size = SIZE
    num_actions = SIZE * SIZE
    max_simulations = 1600

    def __init__(self, model, **kwargs):
        self.model = model

    def warmup(self, rules=None):
        pytest.fail("the search was compiled before the port was bound")

    def describe(self):
        return "stub"


@pytest.mark.parametrize("where", ["busy port", "bad host"])
def test_a_busy_port_or_bad_host_fails_before_compiling(capsys, monkeypatch, where):
    """The socket is bound before the (slow) compilation: a busy port or an
    address that cannot be bound fails at once, in one line."""
    from types import SimpleNamespace

    from agz_jax.base import cache
    from agz_jax.nets import models
    from agz_jax.play import engine

    model = SimpleNamespace(name="stub", config=SimpleNamespace(
        search=SimpleNamespace(num_simulations=8)))
    monkeypatch.setattr(models, "load", lambda *a: model)
    monkeypatch.setattr(engine, "Engine", _StubEngine)
    monkeypatch.setattr(cache, "enable_compilation_cache", lambda *a, **k: None)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        # 192.0.2.1 (TEST-NET-1) is no address of this machine: binding it fails at once.
        host = "127.0.0.1" if where == "busy port" else "192.0.2.1"
        assert web.main(["--host", host, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert "compiling" not in err
    assert err.splitlines()[-1].startswith(f"error: cannot listen on {host}:{port}: "), err


def test_describe_an_analysis():
    """The JSON of an ``engine.Analysis``: visits from the visit distribution, the
    candidates by visits (ties: policy, then prior), no candidate on a stone, NaN q as
    null, and no value where no simulation ran."""
    import numpy as np

    from agz_jax.play.engine import Analysis

    a = SIZE * SIZE
    visits = np.zeros(a)
    visits[[7, 30, 31, 40, 41]] = [5, 3, 3, 1, 0]
    prior = np.full(a, 0.5 / a)
    prior[[30, 31, 99]] = [0.1, 0.2, 0.15]
    q = np.where(visits > 0, np.linspace(-0.5, 0.5, a), np.nan)
    board = np.zeros(a, np.int8)
    board[99] = 1
    an = Analysis(7, 0.25, 0.625, visits / 12, prior, q, visits, 8, 4, 0.01, "search")
    got = api.describe(an, board, 1)
    assert got["visits"] == [int(v) for v in visits] and got["best"] == 7
    assert [c["move"] for c in got["candidates"]] == [7, 31, 30, 40]
    assert got["candidates"][1] == {"move": 31, "visits": 3, "policy": 0.25,
                                    "q": round(q[31], 4), "prior": 0.2}
    assert got["q"][41] is None and got["value"] == 0.25 and got["win_prob"] == 0.625
    assert got["to_play"] == 1 and got["elapsed_ms"] == 10.0
    assert got["simulations"] == 8 and got["carried"] == 4
    # No search (out of time): the prior is the policy, the value is unknown.
    an = Analysis(99, 0.0, 0.5, prior / prior.sum(), prior, np.full(a, np.nan), np.zeros(a), 0,
                  0, 0.0, "prior")
    got = api.describe(an, board, 0)
    assert got["value"] is None and got["win_prob"] is None and sum(got["visits"]) == 0
    assert [c["move"] for c in got["candidates"][:2]] == [31, 30]  # 99 holds a stone
    assert len(got["candidates"]) == 10 and all(c["q"] is None for c in got["candidates"])


# -- the browser ---------------------------------------------------------------------------

def choose(board: dict[int, int], me: int) -> int:
    """The test's player: win if it can, else grow its fullest open window of five."""
    best, best_key = None, None
    for x0 in range(SIZE):
        for y0 in range(SIZE):
            for dx, dy in ((1, 0), (0, 1), (1, 1), (1, -1)):
                cells = [(x0 + k * dx, y0 + k * dy) for k in range(5)]
                if not all(0 <= x < SIZE and 0 <= y < SIZE for x, y in cells):
                    continue
                points = [at(x, y) for x, y in cells]
                if any(board.get(p) == 1 - me for p in points):
                    continue
                own = sum(board.get(p) == me for p in points)
                empty = [p for p in points if p not in board]
                if empty and (best_key is None or own > best_key):
                    best_key, best = own, empty[len(empty) // 2]
    assert best is not None, "no open window left"
    return best


def read_board(page) -> dict[int, int]:
    stones = page.eval_on_selector_all(".cell", """cells => cells.map(c => [
        Number(c.dataset.action),
        c.querySelector('.stone.black') ? 0 : (c.querySelector('.stone.white') ? 1 : -1)])""")
    return {a: c for a, c in stones if c >= 0}


SETTLED = ('#status[data-state="your-move"], #status[data-state="over"], '
           '#status[data-state="ready"]')


def settle(page):
    page.wait_for_selector(SETTLED, timeout=60_000)


def shown_analysis(page) -> dict:
    """What the page shows: the candidate table, the numbered points, the heat map."""
    return page.evaluate("""() => ({
        rows: [...document.querySelectorAll('#candidates tbody tr')].map(r =>
            [...r.children].map(td => td.textContent)),
        ranks: Object.fromEntries([...document.querySelectorAll('.cell[data-rank]')].map(c =>
            [c.dataset.rank, Number(c.dataset.action)])),
        heat: Object.fromEntries([...document.querySelectorAll('.cell[data-p]')].map(c =>
            [c.dataset.action, Number(c.dataset.p)])),
        stones: [...document.querySelectorAll('.cell .stone')].map(s =>
            Number(s.parentElement.dataset.action)),
        black: document.getElementById('blackprob').textContent,
        bar: document.getElementById('winbar').style.width,
        unknown: document.getElementById('bar').classList.contains('unknown'),
    })""")


def check_shown(page, an: dict):
    """The page shows ``an`` (the server's JSON): same candidates with the same visits
    and values, numbered on the board; the heat map is its visit distribution on the
    empty points; the bar is black's chance."""
    shown = shown_analysis(page)
    assert [r[1:4] for r in shown["rows"]] == [
        [coord(c["move"]), str(c["visits"]), pct((c["q"] + 1) / 2)]
        for c in an["candidates"]], (shown["rows"], an["candidates"])
    assert shown["ranks"] == {str(i + 1): c["move"] for i, c in enumerate(an["candidates"][:5])}
    heat = {int(a): p for a, p in shown["heat"].items()}
    assert heat == {a: p for a, p in enumerate(an["policy"]) if p > 0}
    assert not set(heat) & set(shown["stones"]), "heat under a stone"
    black = an["win_prob"] if an["to_play"] == 0 else 1 - an["win_prob"]
    assert not shown["unknown"] and shown["black"] == pct(black)
    assert float(shown["bar"].rstrip("%")) == pytest.approx(100 * black, abs=0.01)


@pytest.fixture(scope="session")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: `make test` installs Debian's chromium "
                    "(apt-get install chromium) when run as root")
    with playwright.sync_playwright() as p:
        # playwright gives every launch a fresh, temporary profile.
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


def api_reply(page, endpoint, action):
    """Runs ``action`` and returns the JSON of the page's request to ``endpoint``."""
    with page.expect_response(lambda r: r.url.endswith(endpoint)) as response:
        action()
    return response.value.json()


def test_analysis_board_in_chromium(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    requests = []
    page.on("request", lambda r: requests.append(r.url))

    # The empty board: coordinates, star points, and the analysis of black's first
    # move, which deepens while the position stands: every reply of the page's
    # requests is kept, to find the one it shows.
    analyses = []
    page.on("response", lambda r: analyses.append(r) if r.url.endswith("/api/analyse") else None)
    reply = api_reply(page, "/api/analyse", lambda: page.goto(server))
    settle(page)
    assert page.locator(".cell").count() == SIZE * SIZE
    assert page.eval_on_selector_all(".coord.row", "e => e.map(x => x.textContent)") == [
        str(n) for n in range(SIZE, 0, -1)]
    assert page.eval_on_selector_all(".coord.col", "e => e.map(x => x.textContent)") == list(
        LETTERS)
    assert sorted(page.eval_on_selector_all(".cell.star", "e => e.map(x => x.dataset.coord)")) == [
        "D12", "D4", "H8", "L12", "L4"]
    assert reply["analysis"]["to_play"] == 0 and reply["analysis"]["simulations"] == 8
    # Keep thinking (on by default): the visits grow past the first analysis's 8,
    # each reply going on with the tree before; t stops it, and the table is the
    # last reply's.
    page.wait_for_function(
        "() => Number(document.getElementById('details').dataset.total) > 8", timeout=60_000)
    page.keyboard.press("t")
    page.wait_for_selector('#details[data-deepening="false"]')
    assert not page.is_checked("#deepen")
    total = int(page.get_attribute("#details", "data-total"))
    replies = []
    for r in analyses:
        try:
            replies.append(r.json()["analysis"])
        except Exception:  # a request the page aborted when t was pressed
            pass
    deepened = [a for a in replies if a["carried"] > 0]
    assert deepened and all(b["carried"] == a["total"]
                            for a, b in zip(replies, replies[1:], strict=False))
    shown = next(a for a in replies if a["total"] == total)
    assert shown["carried"] > 0 and "thinking" not in page.inner_text("#details")
    check_shown(page, shown)
    page.evaluate("""() => { window.seen = []; new MutationObserver(() => window.seen.push(
        [document.getElementById('status').dataset.state,
         document.getElementById('thinking').hidden])).observe(
        document.getElementById('status'), {attributes: true}); }""")

    # Analysis off (a): no heat map, no candidates, the bar empty and grey.
    page.keyboard.press("a")
    shown = shown_analysis(page)
    assert not shown["heat"] and not shown["rows"] and not shown["ranks"]
    assert shown["unknown"] and shown["bar"] == "0%" and shown["black"] == "-"

    # Keyboard: the cursor starts on H8; two arrows and Enter play G9; the engine answers.
    page.focus('.cell[data-coord="H8"]')
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowUp")
    reply = api_reply(page, "/api/move", lambda: page.keyboard.press("Enter"))
    settle(page)
    assert reply["moves"][0] == at(6, 6) and read_board(page) == {at(6, 6): 0,
                                                                 reply["engine_move"]: 1}
    assert ["thinking", False] in page.evaluate("window.seen"), "no thinking indicator"
    engine_move = coord(reply["engine_move"])
    assert page.inner_text("#engine").startswith(f"engine's last move {engine_move}")
    assert page.eval_on_selector_all("#movelist li", "e => e.map(x => x.textContent)") == [
        "1. G9", f"2. {coord(reply['engine_move'])}"]

    # Analysis back on: the side to move's (black's) position, matching the server.
    reply = api_reply(page, "/api/analyse", lambda: page.keyboard.press("a"))
    settle(page)
    assert reply["analysis"]["to_play"] == 0 and sorted(reply["moves"]) == sorted(read_board(page))
    check_shown(page, reply["analysis"])
    best = reply["analysis"]["best"]
    page.click("#hint")  # the analysis is there: no new search, the best move ringed
    assert page.eval_on_selector_all(".cell.hint", "e => e.map(x => Number(x.dataset.action))") == [
        best]
    assert f"Hint: {coord(best)}" in page.inner_text("#status")

    # A click, then undo and redo (buttons and keys) without asking the engine again.
    before = read_board(page)
    reply = api_reply(page, "/api/move", lambda: page.click(
        f'.cell[data-action="{choose(before, 0)}"]'))
    settle(page)
    four = read_board(page)
    assert len(four) == 4 and reply["engine_move"] in four
    page.click("#undo")
    settle(page)
    assert read_board(page) == before
    assert page.eval_on_selector_all("#movelist li.future", "e => e.length") == 2
    moves_before = sum("/api/move" in u for u in requests)
    page.keyboard.press("r")
    settle(page)
    assert read_board(page) == four and sum("/api/move" in u for u in requests) == moves_before
    page.keyboard.press("u")
    page.keyboard.press("ArrowRight")
    settle(page)
    assert read_board(page) == four
    page.keyboard.press("n")  # move numbers
    assert page.eval_on_selector_all(".stone", "e => e.map(x => x.textContent).sort()") == [
        "1", "2", "3", "4"]
    page.keyboard.press("h")  # the hint ring, in the screenshot too
    assert page.locator(".cell.hint .ring").count() == 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web_board_analysis.png"))

    # A .psq record to review: loaded at its end (black's five), stepped back and forth.
    record = [at(7, 7), at(8, 7), at(7, 8), at(8, 8), at(7, 6), at(8, 6), at(7, 9), at(8, 9),
              at(7, 5)]
    psq = tmp_path / "review.psq"
    records.write_psq(psq, record, SIZE, times_ms=[100 * (i + 1) for i in range(9)])
    page.set_input_files("#psqfile", str(psq))
    page.wait_for_selector('#status[data-state="over"]', timeout=60_000)
    assert page.input_value("#mode") == "analyse" and "Black wins" in page.inner_text("#status")
    assert len(read_board(page)) == 9 and "Loaded review.psq: 9 moves" in page.inner_text(
        "#status")
    assert sorted(page.eval_on_selector_all(".cell.win", "e => e.map(x => +x.dataset.action)")) == [
        at(7, y) for y in range(5, 10)]
    shown = shown_analysis(page)
    assert shown["black"] == "100%" and shown["bar"] == "100%"
    page.evaluate("document.activeElement.blur()")
    reply = api_reply(page, "/api/analyse", lambda: page.keyboard.press("ArrowLeft"))
    settle(page)
    assert reply["moves"] == record[:8] and read_board(page) == {
        a: i % 2 for i, a in enumerate(record[:8])}
    assert page.get_attribute("#status", "data-state") == "ready"
    check_shown(page, reply["analysis"])
    assert page.inner_text("#movelist li.current") == f"8. {coord(record[7])}"
    page.keyboard.press("Home")
    settle(page)
    assert read_board(page) == {} and page.locator("#movelist li.future").count() == 9
    page.click('#movelist li[data-ply="3"]')
    settle(page)
    assert read_board(page) == {a: i % 2 for i, a in enumerate(record[:3])}
    page.keyboard.press("End")
    page.wait_for_selector('#status[data-state="over"]')
    page.screenshot(path=str(ARTIFACTS / "web_board_review.png"))
    with page.expect_download() as download:
        page.click("#download")
    saved = tmp_path / "saved.psq"
    download.value.save_as(saved)
    assert records.read_psq(saved).moves == record

    # Play mode, analysis off: a whole game against the engine.
    page.select_option("#mode", "play")
    page.uncheck("#analysis")
    page.click("#new")
    settle(page)
    for _ in range(40):
        if page.get_attribute("#status", "data-state") == "over":
            break
        page.click(f'.cell[data-action="{choose(read_board(page), 0)}"]')
        settle(page)
    assert page.get_attribute("#status", "data-state") == "over", read_board(page)
    status = page.inner_text("#status")
    line = page.eval_on_selector_all(".cell.win", "e => e.map(c => Number(c.dataset.action))")
    board = read_board(page)
    assert len(line) >= 5 and len({board[a] for a in line}) == 1, line
    assert ("You win" in status) == (board[line[0]] == 0), status
    assert page.locator(".cell.hint").count() == 0
    with page.expect_download() as download:
        page.click("#download")
    download.value.save_as(saved)
    rec = records.read_psq(saved)
    assert sorted(rec.moves) == sorted(board) and all(board[a] == i % 2
                                                      for i, a in enumerate(rec.moves))
    final = records.to_states(rec)
    assert bool(final.done) and int(final.winner) == board[line[0]]

    # New game as white: the engine (black) opens.
    page.select_option("#colour", "1")
    settle(page)
    assert list(read_board(page).values()) == [0]
    assert not errors, errors
    assert all(u.startswith(server.rstrip("/")) or u.startswith("blob:") for u in requests), [
        u for u in requests if not u.startswith(server.rstrip("/"))]
    page.close()


@pytest.mark.parametrize("front", ["web", "brain"])
def test_a_thread_count_out_of_range_is_refused(capsys, monkeypatch, front):
    """One tree a board symmetry: 1 to 8 trees, said in one line before the
    model is loaded, by the web board and pbrain-agz alike."""
    from agz_jax.nets import models
    from agz_jax.play import brain

    monkeypatch.setattr(models, "load", lambda *a: pytest.fail("the model was loaded"))
    for threads in ("0", "9"):
        with pytest.raises(SystemExit) as e:
            (web if front == "web" else brain).main(["--threads", threads])
        assert e.value.code == 2
        err = capsys.readouterr().err.splitlines()[-1]
        assert f"--threads must be 1 to 8 (one tree a board symmetry), got {threads}" in err


def test_the_thread_bound_is_the_board_symmetries():
    from agz_jax.game import symmetry
    from agz_jax.play import flags

    assert flags.MAX_THREADS == symmetry.NUM_SYMMETRIES
