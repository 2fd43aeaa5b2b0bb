"""The web board's game API (``agz_jax.play.web.server`` serves it over HTTP): a
request body, parsed strictly as JSON (bounded nesting depth and integer
length, no duplicate keys, no NaN), becomes an answer of the engine behind the
page (``Game``): move, analyse, status, load a ``.psq`` record, write one.
Every malformed request raises ``BadRequest`` naming the problem.

An analysis deepens (``"keep": true``): each such request goes on growing the
engine's tree of the position for ``DEEPEN_SECONDS`` (``Engine.analyse``'s
``keep``) and answers with the tree so far, so that the page can show the
candidates' visits growing until the tree is full or the position changes.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import threading
from pathlib import Path

from agz_jax.game.gomoku import RULES

MAX_DEPTH = 8          # the API's bodies nest 2 deep (an object holding lists)


MAX_INT_DIGITS = 15    # larger integers are never meaningful here


NAME_CHARS = 40


TOP_MOVES = 10         # candidates listed by /api/analyse


DEEPEN_SECONDS = 0.4   # how long one request of a deepening analysis searches


MAX_TIME_MS = 10**9    # a loaded record's per-move times are clamped to 0..this


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


_BRACKETS = re.compile(r"[\[\]{}]")


_LONG_NUMBER = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1},}}")


class BadRequest(Exception):
    """A request that cannot be served; the message goes back to the page."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _nesting(text: str) -> int:
    """How deep ``text``'s arrays and objects nest (strings skipped); stops counting
    past ``MAX_DEPTH``. Checked before parsing, so that no input reaches the parser's
    recursion limit."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(_JSON_STRING.sub('""', text)):
        depth += 1 if m.group() in "[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
    return deepest


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise BadRequest(f"an integer with {len(digits.lstrip('-'))} digits; at most "
                         f"{MAX_INT_DIGITS}")
    return int(digits)


def _parse_constant(name: str):
    raise BadRequest(f"{name} is not a JSON value")


def _unique_keys(pairs: list) -> dict:
    body = {}
    for key, value in pairs:
        if key in body:
            raise BadRequest(f"the key {key[:40]!r} appears twice in one object")
        body[key] = value
    return body


def parse_json(raw: bytes) -> dict:
    """A request body -> a JSON object, or ``BadRequest`` saying why not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"the body is not valid JSON: not UTF-8 ({e.reason} at byte "
                         f"{e.start})") from e
    if _nesting(text) > MAX_DEPTH:
        raise BadRequest(f"the body nests JSON arrays or objects more than {MAX_DEPTH} deep")
    try:
        body = json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant,
                          object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise BadRequest(f"the body is not valid JSON: {e}") from e
    except RecursionError as e:  # unreachable after _nesting; kept as a second guard
        raise BadRequest("the body nests JSON too deep") from e
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


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


def _only(body: dict, keys: tuple[str, ...]) -> None:
    for key in body:
        if key not in keys:
            raise BadRequest(f"unknown field {key[:40]!r} (expected {', '.join(keys)})")


def _rounded(values, digits: int = 4) -> list:
    return [None if math.isnan(v) else round(float(v), digits) for v in values]


def describe(analysis, board, to_play: int) -> dict:
    """An ``engine.Analysis`` of the position ``board`` (int[A]), ``to_play`` to move,
    as JSON: per-point arrays and the top candidates."""
    import numpy as np

    policy = np.asarray(analysis.policy, np.float64)
    prior = np.asarray(analysis.prior, np.float64)
    q = np.asarray(analysis.q, np.float64)
    visits = np.rint(np.asarray(analysis.visits)).astype(np.int64)
    empty = np.asarray(board).reshape(-1) == 0
    # Most visits first, then the larger share of the policy, then the prior.
    order = np.lexsort((-prior, -policy, -visits))
    shown = [int(a) for a in order if empty[a] and (visits[a] > 0 or policy[a] > 0)]
    candidates = [{"move": a, "visits": int(visits[a]), "policy": round(float(policy[a]), 4),
                   "q": None if math.isnan(q[a]) else round(float(q[a]), 4),
                   "prior": round(float(prior[a]), 4)} for a in shown[:TOP_MOVES]]
    known = analysis.reason != "prior"  # no simulation ran: the value is unknown
    return {
        "best": int(analysis.action), "to_play": int(to_play),
        "value": round(float(analysis.value), 4) if known else None,
        "win_prob": round(float(analysis.win_prob), 4) if known else None,
        "simulations": int(analysis.simulations), "carried": int(analysis.carried),
        "total": int(visits.sum()), "reason": analysis.reason,
        "elapsed_ms": round(analysis.elapsed * 1000.0, 1),
        "candidates": candidates, "visits": [int(v) for v in visits],
        "policy": _rounded(policy), "prior": _rounded(prior), "q": _rounded(q)}


class Game:
    """The engine behind the page, shared by the request threads (one search at a
    time). ``max_seconds`` bounds a search; ``step_seconds`` is one request's
    share of a deepening analysis."""

    def __init__(self, engine, *, default_sims: int, max_seconds: float,
                 step_seconds: float = DEEPEN_SECONDS):
        from agz_jax.game import records
        from agz_jax.play import engine as engine_mod

        self.engine = engine
        self.default_sims = min(default_sims, engine.max_simulations)
        self.max_seconds = max_seconds
        self.step_seconds = min(step_seconds, max_seconds)
        self.size = engine.size
        self.num_actions = engine.num_actions
        self._lock = threading.Lock()
        self._steps = {}
        self._engine_mod = engine_mod
        self._records = records

    def info(self) -> dict:
        model = self.engine.model
        return {"model": model.name, "size": self.size, "rule": model.rules.rule,
                "rules": list(RULES), "default_sims": self.default_sims,
                "max_sims": self.engine.max_simulations, "top_moves": TOP_MOVES,
                "step_ms": round(self.step_seconds * 1000.0), "search": self.engine.describe()}

    def _replay(self, moves: list[int], rule):
        if rule not in RULES:
            raise BadRequest(f"'rule' must be one of {', '.join(RULES)}, got {rule[:40]!r}")
        for i, a in enumerate(moves):
            if not 0 <= a < self.num_actions:
                raise BadRequest(f"moves[{i}] = {a} is off the {self.size}x{self.size} board "
                                 f"(0..{self.num_actions - 1})")
        record = self._records.Record(self.size, moves, [0] * len(moves))
        try:
            state = self._records.to_states(record, rule)
        except self._records.RecordError as e:
            raise BadRequest(str(e).removeprefix("record: ")) from e
        return self.engine.rules(rule), state

    def _position(self, body: dict):
        moves = _int_list(body, "moves", self.num_actions, required=True)
        rule = _field(body, "rule", str, default=self.engine.model.rules.rule)
        return (moves, *self._replay(moves, rule))

    def _sims(self, body: dict, default: int | None = None) -> int:
        sims = _field(body, "sims", int, default=default or self.default_sims)
        if not 1 <= sims <= self.engine.max_simulations:
            raise BadRequest(f"'sims' must be in 1..{self.engine.max_simulations}, got {sims}")
        return sims

    def _status(self, rules, state) -> dict:
        winner = int(state.winner)
        line = []
        if winner >= 0:
            line = self._engine_mod.winning_line(rules, state.board, int(state.last_action))
        return {"done": bool(state.done), "winner": winner, "line": line,
                "to_play": int(state.to_play), "forbidden": self._forbidden(rules, state)}

    def _forbidden(self, rules, state) -> dict[str, str]:
        """Under renju with black to move: black's forbidden points, each with
        its reason ({point: 'double three' | 'double four' | 'overline'})."""
        if rules.rule != "renju" or bool(state.done) or int(state.to_play) != 0:
            return {}
        import numpy as np

        from agz_jax.game import renju

        board = np.asarray(state.board)
        out = {}
        for p in np.flatnonzero(self.engine.forbidden(rules, board)):
            code = renju.foul_code(board, int(p))  # the deeper reading names the reason
            if code:
                out[str(int(p))] = renju.FOULS[code]
        return out

    def _search(self, rules, state, sims: int, keep: bool = False):
        trained = self.engine.model.rules.rule
        if "renju" in (rules.rule, trained) and rules.rule != trained:
            from agz_jax.nets import models

            raise BadRequest(f"the model {self.engine.model.name!r} was trained on {trained} "
                             f"and does not play {rules.rule}: choose {trained}, or start the "
                             f"board with a {rules.rule} model "
                             f"(--model models/{models.shipped_for(rules.rule)})")
        with self._lock:
            seconds = self.step_seconds if keep else self.max_seconds
            return self.engine.analyse(rules, state, simulations=sims, keep=keep,
                                       deadline=self.engine.clock() + seconds)

    def move(self, body: dict) -> dict:
        _only(body, ("moves", "sims", "rule"))
        sims = self._sims(body)
        moves, rules, state = self._position(body)
        reply = {"moves": moves, "engine_move": None, "analysis": None}
        if not bool(state.done):
            analysis = self._search(rules, state, sims)
            reply["analysis"] = describe(analysis, state.board, state.to_play)
            if rules not in self._steps:
                import jax

                self._steps[rules] = jax.jit(rules.step)
            state = self._steps[rules](state, analysis.action)
            reply["moves"] = moves + [analysis.action]
            reply["engine_move"] = analysis.action
        reply.update(self._status(rules, state))
        return reply

    def analyse(self, body: dict) -> dict:
        """The analysis of the position to play; with ``keep``, one more step of
        its deepening, up to ``sims`` visits in all (default: the tree's capacity)."""
        _only(body, ("moves", "sims", "rule", "keep"))
        keep = _field(body, "keep", bool, default=False)
        sims = self._sims(body, self.engine.max_simulations if keep else None)
        moves, rules, state = self._position(body)
        reply = {"moves": moves, "analysis": None}
        if not bool(state.done):
            reply["analysis"] = describe(self._search(rules, state, sims, keep), state.board,
                                           state.to_play)
        reply.update(self._status(rules, state))
        return reply

    def status(self, body: dict) -> dict:
        _only(body, ("moves", "rule"))
        moves, rules, state = self._position(body)
        return {"moves": moves, **self._status(rules, state)}

    def load(self, body: dict) -> dict:
        _only(body, ("psq", "rule"))
        text = _field(body, "psq", str, required=True)
        rule = _field(body, "rule", str, default=None)
        for lineno, line in enumerate(text.splitlines(), start=1):
            long = _LONG_NUMBER.search(line)
            if long:
                raise BadRequest(f"not a .psq record: line {lineno}: a number with "
                                 f"{len(long.group())} digits")
        fd, path = tempfile.mkstemp(suffix=".psq")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8", "replace"))
            record = self._records.read_psq(path)
        except ValueError as e:  # RecordError names the file and line
            raise BadRequest("not a .psq record: " + str(e).replace(f"{path}:", "line ")) from e
        finally:
            os.unlink(path)
        if record.size != self.size:
            raise BadRequest(f"the record is for a {record.size}x{record.size} board; the "
                             f"model plays {self.size}x{self.size}")
        rule = rule or record.rule or self.engine.model.rules.rule
        rules, state = self._replay(record.moves, rule)
        times = [min(max(int(t), 0), MAX_TIME_MS) for t in record.times_ms]
        return {"moves": record.moves, "times": times, "rule": rule,
                **self._status(rules, state)}

    def psq(self, body: dict) -> str:
        _only(body, ("moves", "times", "rule", "black", "white"))
        moves, _, _ = self._position(body)
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
            self._records.write_psq(path, moves, self.size, times_ms=times, trailer=trailer,
                                    rule=_field(body, "rule", str,
                                                default=self.engine.model.rules.rule))
            return Path(path).read_text(encoding="utf-8")
        finally:
            os.unlink(path)
