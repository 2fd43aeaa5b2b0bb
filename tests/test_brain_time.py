"""pbrain-agz uses its time: in-process, a real ``Engine`` on a 9x9 random net
and a fake clock (``SimClock``) that moves by a fixed cost for each simulation
the engine's trees run and a small tick each time it is read, so that a move's
budget is a known number of simulations whatever the machine's speed.

Under a time limit the search runs past the model's simulation count until the
budget is spent (or its tree is full); without one it runs the model's own
search of its own count, as before."""

import argparse
import contextlib
import os
import threading

import numpy as np
import pytest
from tiny_models import random_model

from agz_jax.nets import models
from agz_jax.play import engine, programs, trees
from agz_jax.play.brain import build_parser, play_settings
from agz_jax.play.brain_commands import Brain

SIZE = 9
CHUNK = 8
CAPACITY = 512
MODEL_SIMS = 12  # the model's search.num_simulations (Gumbel)
TICK = 0.0001  # seconds the fake clock moves at each reading
COST = 0.0001  # and for each simulation a tree runs


class TickClock:
    """A clock that moves ``tick`` seconds each time it is read."""

    def __init__(self, tick: float = TICK):
        self.now, self.tick = 100.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


class SimClock(TickClock):
    """A ``TickClock`` that also moves ``cost`` seconds for each simulation the
    engine's trees run (``charging``): time follows the search's work, as a
    real clock's does, one tree after another (as if on one core). ``chunks``
    counts the jitted chunks run."""

    def __init__(self, tick: float = TICK, cost: float = COST):
        super().__init__(tick)
        self.cost, self.chunks = cost, 0
        self._lock = threading.Lock()

    def charge(self, simulations: int) -> None:
        with self._lock:
            self.now += simulations * self.cost
            self.chunks += 1


@contextlib.contextmanager
def charging(clock: SimClock):
    """Engines built inside charge ``clock`` for each simulation: every
    ``programs.build`` in the block returns programs whose chunk does."""
    build = programs.build

    def charged(*args, **kwargs):
        fns = build(*args, **kwargs)
        chunk = fns.chunk

        def run(variables, key, tree, until):
            before = int(np.asarray(tree.node_visits)[0, 0])  # read before it is donated
            out = chunk(variables, key, tree, until)
            clock.charge(int(np.asarray(out.node_visits)[0, 0]) - before)
            return out

        fns.chunk = run
        return fns

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(programs, "build", charged)
        yield clock


def flags(*argv: str) -> argparse.Namespace:
    """pbrain-agz's flags as ``play_settings`` reads them."""
    return build_parser().parse_args(argv)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A random 9x9 net (one net: half the compilation) searching as the shipped
    model does: Gumbel, forced moves, a small simulation count."""
    m = models.load(random_model(tmp_path_factory.mktemp("time") / "m", SIZE, seed=4,
                                 double=False))
    return m._replace(config=m.config.replace(**{
        "search.algorithm": "gumbel", "search.num_simulations": MODEL_SIMS,
        "search.max_considered_actions": 4, "search.forced_moves": True,
        "search.answer_threats": True}))


@pytest.fixture(scope="module")
def engines(model):
    """(clock, timed engine, untimed engine) as pbrain-agz builds them, on one
    fake clock, one tree (the clock's arithmetic below is one thread's); the
    timed one is compiled."""
    plan = play_settings(model, flags("--max-sims", str(CAPACITY), "--threads", "1"))
    with charging(SimClock()) as clock:
        timed = engine.Engine(model, chunk=CHUNK, clock=clock, **plan["timed"])
        untimed = engine.Engine(model, chunk=CHUNK, clock=clock, **plan["untimed"])
        timed.warmup()
        untimed.warmup()
    return clock, timed, untimed


def opening(rules):
    board = np.zeros(SIZE * SIZE, np.int8)
    board[[40, 41, 31]] = [1, -1, 1]
    return engine.make_state(rules, board, 1, last_action=31)


def test_play_settings(model):
    """Under a time limit: PUCT with reuse and the play-time c_puct in a tree of
    PLAY_CAPACITY; without one: the model's own search of its own count. Flags
    set both."""
    own = model.config.search
    plan = play_settings(model, flags())
    assert plan["timed"] == dict(max_simulations=engine.PLAY_CAPACITY, algorithm="puct",
                                 reuse=True, c_puct=engine.PLAY_C_PUCT, leaves=0,
                                 threads=min(2, os.cpu_count() or 1), fpu=None, vcf=True,
                                 vct=False, threat_values=None)
    assert plan["untimed"] == dict(max_simulations=MODEL_SIMS, algorithm="gumbel",
                                   reuse=False, c_puct=None, leaves=0, threads=1, fpu=None,
                                   vcf=True, vct=False, threat_values=None)
    assert plan["simulations"] == own.num_simulations == MODEL_SIMS
    # One PUCT search for every move, c_puct given: one engine, the untimed count
    # run in the big tree; with the play-time c_puct against the model's, two.
    plan = play_settings(model, flags("--algorithm", "puct", "--reuse", "--sims", "100",
                                      "--c-puct", "3"))
    assert plan["untimed"] is None and plan["simulations"] == 100
    plan = play_settings(model, flags("--algorithm", "puct", "--reuse", "--sims", "100"))
    assert plan["timed"]["c_puct"] == engine.PLAY_C_PUCT != own.c_puct
    assert plan["untimed"]["c_puct"] is None  # the model's own
    assert plan["timed"]["reuse"] and plan["timed"]["max_simulations"] == engine.PLAY_CAPACITY
    many = engine.PLAY_CAPACITY + 1000  # a move's simulations above the capacity: its room
    plan = play_settings(model, flags("--sims", str(many), "--no-reuse", "--c-puct", "2.5",
                                      "--leaves", "8", "--fpu", "0.2", "--threads", "2"))
    assert plan["timed"] == dict(max_simulations=many, algorithm="puct", reuse=False,
                                 c_puct=2.5, leaves=8, threads=2, fpu=0.2, vcf=True,
                                 vct=False, threat_values=None)
    plan = play_settings(model, flags("--no-vcf", "--threat-values", "--vct"))
    assert plan["timed"]["vcf"] is False and plan["timed"]["threat_values"] is True
    assert plan["timed"]["vct"] is True and plan["untimed"]["vct"] is True
    e = engine.Engine(model, max_simulations=8, **{k: v for k, v in plan["timed"].items()
                                                   if k != "max_simulations"})
    assert e.search_cfg.threat_values and not e.vcf and e.vct
    assert plan["untimed"]["algorithm"] == "gumbel" and not plan["untimed"]["reuse"]
    assert plan["untimed"]["fpu"] is None  # first-play urgency is PUCT's
    assert plan["untimed"]["leaves"] == 0  # Gumbel: one leaf at a time
    assert plan["untimed"]["threads"] == 1  # and one tree
    assert play_settings(model, flags("--max-sims", "300"))["timed"]["max_simulations"] == 300
    # PUCT without a time limit keeps the model's reuse (here none): two engines.
    plan = play_settings(model, flags("--algorithm", "puct"))
    assert plan["timed"]["reuse"] and not plan["untimed"]["reuse"]


@pytest.mark.long
def test_the_search_runs_until_its_deadline(engines):
    """Past the model's count: chunks sized to the time left until even the
    smallest would end after the deadline; with a far deadline, until the tree
    is full."""
    clock, timed, _ = engines
    rules = timed.rules()
    timed.forget()
    start, chunks = clock.now, clock.chunks
    deadline = start + 0.04  # 400 simulations' time, the clock's readings aside
    a = timed.analyse(rules, opening(rules), deadline=deadline)
    assert a.reason == "search" and a.carried == 0
    # The budget is used and kept: the search ends within the time of the smallest
    # chunk (with its margin, and the clock's readings) before the deadline, never
    # after it; most of the time went to simulations.
    assert deadline - 2 * CHUNK * COST - 10 * TICK <= clock.now <= deadline + 2 * TICK
    assert 300 <= a.simulations <= 400, a.simulations
    assert int(a.visits.sum()) == a.simulations
    # Each chunk takes a quarter of the time left: a few chunks, not one of CHUNK
    # simulations a reading of the clock.
    assert clock.chunks - chunks <= 20 < a.simulations // CHUNK
    # A longer budget: the clock would allow more than the tree holds.
    timed.forget()
    a = timed.analyse(rules, opening(rules), deadline=clock.now + 100.0)
    assert a.simulations == CAPACITY
    # No deadline: the count asked for, as before.
    timed.forget()
    assert timed.analyse(rules, opening(rules), simulations=40).simulations == 40


@pytest.mark.long
def test_two_trees_each_search_until_the_deadline(model):
    """With two trees, each grows chunk after chunk on its own thread until the
    next chunk would end after the deadline, or until it is full."""
    plan = play_settings(model, flags("--max-sims", str(CAPACITY), "--threads", "2"))
    assert plan["timed"]["threads"] == 2
    with charging(SimClock()) as clock:
        timed = engine.Engine(model, chunk=CHUNK, clock=clock, **plan["timed"])
        rules = timed.rules()
        timed.warmup(rules)
    deadline = clock.now + 0.06  # the two trees' work on one clock: 600 simulations
    a = timed.analyse(rules, opening(rules), deadline=deadline)
    assert a.reason == "search" and 300 <= a.simulations < 2 * CAPACITY, a.simulations
    assert int(a.visits.sum()) == a.simulations
    # Both trees charge the one clock, so each tree's measured rate holds the other's
    # work only when its charge lands inside the chunk: this clock can run past the
    # deadline by a chunk of the other tree's (on two cores each tree's rate is its
    # own, measured on the real clock; one tree's precision is the test above).
    assert clock.now <= deadline + 0.5 * 0.06
    timed.forget()
    a = timed.analyse(rules, opening(rules), deadline=clock.now + 100.0)
    assert a.simulations == 2 * CAPACITY  # both trees full


def test_brain_thinks_for_its_budget_and_counts_without_one(engines):
    """A Brain on the same clock: under ``timeout_turn`` the move's search runs
    many times the model's count; with no time limit, the untimed engine (the
    model's Gumbel) runs exactly the model's count. DEBUG says which."""
    clock, timed, untimed = engines
    timed.forget()
    brain = Brain(lambda: timed, untimed_factory=lambda: untimed, simulations=MODEL_SIMS,
                  debug=True, clock=clock)
    assert brain.handle(f"START {SIZE}") == ["OK"]
    about = brain.handle("ABOUT")[0]
    assert "puct search" in about and "without one, gumbel search" in about, about
    assert brain.handle("INFO timeout_turn 100") == []
    debug, move = brain.handle("BEGIN")
    # 100 ms less the 40 ms reserve: 60 ms, about 600 simulations on this clock: the
    # tree (CAPACITY) fills first.
    sims = int(debug.split(": ")[1].split(" ")[0])
    assert sims >= 0.8 * CAPACITY > MODEL_SIMS, debug
    assert "budget 60 ms" in debug and "puct search" in debug and "reuse" in debug, debug
    assert move.count(",") == 1
    # The next move has a budget of its own.
    reply = "4,4" if move != "4,4" else "4,5"
    debug, _ = brain.handle(f"TURN {reply}")
    assert "simulations" in debug and "budget 60 ms" in debug, debug

    untimed_brain = Brain(lambda: timed, untimed_factory=lambda: untimed,
                          simulations=MODEL_SIMS, debug=True, clock=clock)
    assert untimed_brain.handle(f"START {SIZE}") == ["OK"]
    debug, move = untimed_brain.handle("BEGIN")
    assert debug.startswith(f"DEBUG search: {MODEL_SIMS} simulations in "), debug
    assert "no time limit" in debug and "gumbel search" in debug, debug


def test_fpu_out_of_range_is_a_usage_error(capsys):
    from agz_jax.play import brain

    with pytest.raises(SystemExit) as e:
        brain.main(["--fpu", "5"])
    assert e.value.code == 2 and "--fpu must be in 0..2, got 5.0" in capsys.readouterr().err


def test_chunk_size_takes_a_share_of_the_time_left():
    """The engine's chunk without a deadline or a measured rate; under a deadline
    the simulations of a quarter of the time left (at most LONGEST_S) at the last
    chunk's rate, at least the engine's chunk, never more than the budget has
    left."""
    assert trees.chunk_size(16, 1000, None, 5000.0) == 16  # no deadline: fixed chunks
    assert trees.chunk_size(16, 1000, 0.9, None) == 16  # the first chunk: no rate yet
    assert trees.chunk_size(16, 10_000, 0.2, 4000.0) == int(4000 * 0.2 * trees.SHARE) == 200
    assert trees.chunk_size(16, 10_000, 0.9, 4000.0) == int(4000 * trees.LONGEST_S) == 400
    assert trees.chunk_size(16, 10_000, 0.001, 4000.0) == 16  # at least the engine's chunk
    assert trees.chunk_size(16, 100, 0.9, 4000.0) == 100  # at most the budget's rest
    assert trees.chunk_size(16, 5, None, None) == 5
