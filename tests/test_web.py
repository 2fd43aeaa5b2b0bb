"""The web board: ``python -m agz_jax.web`` as a subprocess, its JSON API's
validation, and a whole game played by clicking in headless Debian chromium
(driven by playwright with the system browser; ``make test`` installs it)."""

import json
import os
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from tiny_models import compile_lock, random_model, xla_cache_dir

from agz_jax import records

SIZE = 15
CHROMIUM = os.environ.get("AGZ_JAX_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    model = random_model(tmp_path_factory.mktemp("web_model") / "m", SIZE, seed=5)
    cache = xla_cache_dir(tmp_path_factory)  # test_brain's engine has the same shapes
    env = {**os.environ, "AGZ_JAX_CACHE_DIR": str(cache), "JAX_PLATFORMS": "cpu"}
    env.pop("AGZ_JAX_NO_CACHE", None)
    lines: queue.Queue = queue.Queue()
    with compile_lock(cache):
        proc = subprocess.Popen(
            [sys.executable, "-m", "agz_jax.web", "--model", str(model), "--port", "0",
             "--sims", "8", "--max-sims", "4096"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        threading.Thread(target=lambda: [lines.put(x.decode()) for x in proc.stdout],
                         daemon=True).start()
        try:
            banner = lines.get(timeout=600)
        except queue.Empty:
            proc.kill()
            raise AssertionError("the web server printed no URL within 600 s") from None
    assert "http://127.0.0.1:" in banner, banner
    url = banner.split()[3]
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
        ({"moves": [], "rule": "renju"}, "'rule'"),
        ({"moves": list(range(226))}, "at most 225"),
        ({"moves": [at(0, 0), at(0, 5), at(1, 0), at(1, 5), at(2, 0), at(2, 5), at(3, 0),
                    at(3, 5), at(4, 0), at(9, 9)]}, "follows the end of the game"),
    ]
    for payload, reason in bad:
        status, body = post(server, "/api/move", payload)
        assert status == 400 and reason in json.loads(body)["error"], (payload, body)
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


def test_api_game_over_and_psq_round_trip(server):
    five = [at(0, 0), at(0, 5), at(1, 0), at(1, 5), at(2, 0), at(2, 5), at(3, 0), at(3, 5),
            at(4, 0)]
    status, body = post(server, "/api/move", {"moves": five, "sims": 4})
    reply = json.loads(body)
    assert status == 200 and reply["done"] and reply["winner"] == 0
    assert reply["engine_move"] is None and reply["line"] == [at(x, 0) for x in range(5)]
    # One engine move: legal, with a heat map that is a distribution.
    status, body = post(server, "/api/move", {"moves": five[:4], "sims": 16})
    reply = json.loads(body)
    assert status == 200 and reply["engine_move"] not in five[:4]
    assert reply["moves"] == five[:4] + [reply["engine_move"]]
    assert sum(reply["analysis"]["policy"]) == pytest.approx(1.0, abs=1e-3)
    assert reply["analysis"]["simulations"] == 16 and not reply["done"]
    status, body = post(server, "/api/psq", {"moves": five, "times": [5] * 9,
                                             "black": "human", "white": "agz_jax"})
    assert status == 200
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"agz_web_{os.getpid()}.psq"
    path.write_bytes(body)
    try:
        rec = records.read_psq(path)
    finally:
        path.unlink()
    assert rec.size == SIZE and rec.moves == five and rec.times_ms == [5] * 9
    assert b"black: human" in body


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


def settle(page):
    page.wait_for_selector('#status[data-state="your-move"], #status[data-state="over"]',
                           timeout=60_000)


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


def test_play_a_game_in_chromium(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1000, "height": 720}, accept_downloads=True)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(server)
    settle(page)
    page.fill("#sims", "8")
    assert page.locator(".cell").count() == SIZE * SIZE

    # Two moves each, then undo takes back the engine's reply and our move.
    for expected in (2, 4):
        page.click(f'.cell[data-action="{choose(read_board(page), 0)}"]')
        settle(page)
        assert len(read_board(page)) == expected
    assert page.locator(".cell[data-p]").count() > 0, "no heat map after the engine's move"
    assert page.inner_text("#winprob").endswith("%")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web_board_heat_map.png"))
    page.click("#undo")
    settle(page)
    assert len(read_board(page)) == 2 and page.locator(".cell[data-p]").count() == 0

    for _ in range(40):
        if page.get_attribute("#status", "data-state") == "over":
            break
        board = read_board(page)
        page.click(f'.cell[data-action="{choose(board, 0)}"]')
        settle(page)
    assert page.get_attribute("#status", "data-state") == "over", read_board(page)
    status = page.inner_text("#status")
    line = page.eval_on_selector_all(".cell.win",
                                     "cells => cells.map(c => Number(c.dataset.action))")
    assert len(line) >= 5, line
    board = read_board(page)
    winner = board[line[0]]
    assert all(board[a] == winner for a in line)
    assert ("You win" in status) == (winner == 0), status
    shot = ARTIFACTS / "web_board.png"
    page.screenshot(path=str(shot))
    print(f"screenshots: {shot} ({status}), {ARTIFACTS / 'web_board_heat_map.png'}")

    with page.expect_download() as download:
        page.click("#download")
    saved = tmp_path / "game.psq"
    download.value.save_as(saved)
    rec = records.read_psq(saved)
    assert sorted(rec.moves) == sorted(board) and len(rec.moves) == len(board)
    assert all(board[a] == i % 2 for i, a in enumerate(rec.moves))  # black first, alternating
    final = records.to_states(rec)
    assert bool(final.done) and int(final.winner) == winner

    # New game as white: the engine (black) opens.
    page.select_option("#colour", "1")
    settle(page)
    assert list(read_board(page).values()) == [0]
    assert not errors, errors
    assert all(u.startswith(server.rstrip("/")) or u.startswith("blob:") for u in requests), [
        u for u in requests if not u.startswith(server.rstrip("/"))]
    page.close()
