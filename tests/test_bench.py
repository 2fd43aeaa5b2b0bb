"""The benchmark's report, and the NumPy baseline it compares against.

The baseline (``agz_jax.search.baseline``) must be the same search as ``agz_jax.search.searcher``,
not merely a slow one: it finds a one-move win, plays legal moves, and its root
visit counts equal mctx's exactly on random positions (ties broken away by
random policy biases, since mctx breaks exact ties with noise and the baseline
by lowest index).
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.config.schema import SearchConfig
from agz_jax.game.gomoku import Rules, State, played_at_from_last
from agz_jax.nets.networks import Networks, PolicyValueNet
from agz_jax.search import baseline
from agz_jax.search.searcher import Searcher
from experiments import bench

ROOT = Path(__file__).resolve().parents[1]
SIZE = 7
GAMMA = 0.95

SEARCH_KEYS = ("selfplay_compile_s", "selfplay_s", "sims_per_s", "moves_per_s", "forward_ms",
               "forward_evals_per_s", "search_overhead", "net_gflops", "net_vs_matmul")
# What each section of the bench reports (written out here, not imported, so that
# a key the bench drops fails this test).
SECTION_KEYS = {
    "search": (*(f"{mode}.{k}" for mode in ("single", "double") for k in SEARCH_KEYS),
               "matmul.gflops"),
    "train": tuple(f"{mode}.{k}" for mode in ("single", "double")
                   for k in ("train_compile_s", "train_step_s", "train_steps_per_s")),
    "baseline": tuple(f"{mode}.{k}" for mode in ("single", "double")
                      for k in ("baseline_sims_per_s", "baseline_simulations",
                                "speedup_vs_baseline")),
    "forced": ("forced_moves.sims_per_s", "forced_moves.cost", "forced_moves.search_moves_ms",
               "answer_threats.sims_per_s", "answer_threats.cost",
               "answer_threats.search_moves_ms",
               "answer_four_threes.sims_per_s", "answer_four_threes.cost",
               "answer_four_threes.search_moves_ms",
               "threat_values.sims_per_s", "threat_values.cost"),
    "selfplay": ("selfplay.lockstep_useful_sims_per_s", "selfplay.continuous_useful_sims_per_s",
                 "selfplay.lockstep_positions_per_s", "selfplay.continuous_positions_per_s",
                 "selfplay.speedup"),
    "bf16": ("bf16.float32_evals_per_s", "bf16.bfloat16_evals_per_s", "bf16.evals_speedup",
             "bf16.float32_sims_per_s", "bf16.bfloat16_sims_per_s", "bf16.sims_speedup",
             "bf16.top1_agreement", "bf16.policy_tv_mean", "bf16.value_diff_max",
             "bf16.value_diff_mean"),
    "mentor": ("mentor.0.games_per_s", "mentor.0.moves_per_s", "mentor.1.games_per_s",
               "mentor.1.chunked_games_per_s"),
    "position": ("position.plain_sims_per_s", "position.trees_2_sims_per_s",
                 "position.opening_plain_sims_per_s", "position.opening_trees_2_sims_per_s"),
    "renju": ("renju.renju_mask_ms", "renju.renju_tactics_ms", "renju.renju_sims_per_s",
              "renju.freestyle_position_sims_per_s", "renju.renju_position_sims_per_s",
              "renju.position_cost"),
}
RESULT_KEYS = tuple(k for keys in SECTION_KEYS.values() for k in keys)
# The top-level "results" entries each section writes.
SECTION_ENTRIES = {
    "search": {"single", "double", "matmul"}, "train": {"single", "double"},
    "baseline": {"single", "double"},
    "forced": {"forced_moves", "answer_threats", "answer_four_threes", "threat_values"},
    "selfplay": {"selfplay"}, "bf16": {"bf16"}, "mentor": {"mentor"},
}


def quick_bench(*flags: str) -> tuple[dict, str]:
    """(report, stderr) of ``python -m experiments.bench --quick --json *flags``."""
    # The report's shape, not its speed (at conftest's XLA optimisation level,
    # inherited with the environment).
    proc = subprocess.run([sys.executable, "-m", "experiments.bench", "--quick", "--json",
                           *flags], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["backend"] and report["jax_version"] == jax.__version__
    assert report["device_count"] >= 1
    assert report["config"]["size"] == 9 and report["config"]["games"] == 8
    return report, proc.stderr


def check_keys(report: dict, keys) -> None:
    for key in keys:
        value = report["results"]
        for part in key.split("."):
            value = value[part]
        assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, key


@pytest.mark.long
def test_bench_quick_json():
    report, stderr = quick_bench()
    assert report["command"] == "python -m experiments.bench --quick --json"
    assert report["sections"] == list(bench.SECTIONS)
    check_keys(report, RESULT_KEYS)
    # bfloat16's nets stay close to float32's (untrained nets here).
    bf16 = report["results"]["bf16"]
    assert bf16["top1_agreement"] >= 0.9 and bf16["value_diff_max"] < 0.05
    # Each section was logged as it finished, in order (devices: skipped by --quick).
    done = [line.split("] section ")[1].split()[0] for line in stderr.splitlines()
            if "] section " in line]
    assert done == list(bench.SECTIONS)
    assert "devices" not in report["results"]


@pytest.mark.long
def test_bench_sections_run_only_those_named():
    # The cheapest section (the selfplay section's keys are checked by
    # test_bench_quick_json's run of every section).
    report, stderr = quick_bench("--sections", "baseline")
    assert report["sections"] == ["baseline"]
    assert set(report["results"]) == SECTION_ENTRIES["baseline"]
    check_keys(report, [k for k in SECTION_KEYS["baseline"] if "speedup" not in k])
    assert not any("speedup_vs_baseline" in r for r in report["results"].values())
    assert "NumPy baseline simulations/s" in stderr  # logged when done


@pytest.mark.long
def test_bench_stopped_by_sigterm_reports_the_sections_it_finished():
    """A `timeout` that ends the bench (as in experiments/gpu_window.sh) keeps
    what it measured: the finished sections' report, the section it stopped in
    named, exit 143; no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "experiments.bench", "--quick", "--json",
                             "--sections", "baseline,mentor", "--mentor-games", "64"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    stderr = []
    for line in proc.stderr:  # wait until the first section is done, then stop it
        stderr.append(line)
        if "] section baseline done" in line:
            proc.send_signal(signal.SIGTERM)
            break
    out, rest = proc.communicate(timeout=300)
    stderr = "".join(stderr) + rest
    assert proc.returncode == 143, stderr[-3000:]
    report = json.loads(out)
    assert report["sections"] == ["baseline"]
    assert report["stopped"] == {"section": "mentor", "signal": "SIGTERM"}
    assert set(report["results"]) == SECTION_ENTRIES["baseline"]
    check_keys(report, [k for k in SECTION_KEYS["baseline"] if "speedup" not in k])
    assert "stopped by SIGTERM in section mentor" in stderr
    assert "Traceback" not in stderr


def test_bench_sections_are_checked_and_ordered():
    assert bench.parse(["--sections", "bf16, search"]).sections == ["search", "bf16"]
    assert bench.parse([]).sections == list(bench.SECTIONS)
    for bad in ("nope", "search,nope", ","):
        with pytest.raises(SystemExit):
            bench.parse(["--sections", bad])
    assert set(bench.RESULT_KEYS) >= set(RESULT_KEYS)
    assert set(bench.result_keys(["selfplay"])) == set(SECTION_KEYS["selfplay"])
    assert set(bench.result_keys(["search", "baseline"])) == set(
        SECTION_KEYS["search"] + SECTION_KEYS["baseline"])
    assert not any("speedup_vs_baseline" in k for k in bench.result_keys(["baseline"]))


@pytest.mark.parametrize("size", ["3", "20"])
def test_bench_size_is_an_argparse_error(capsys, size):
    with pytest.raises(SystemExit) as e:
        bench.parse(["--quick", "--size", size])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].endswith(f"error: --size must be in 5..19, got {size}"), err
    assert "Traceback" not in err


def test_bench_help_keeps_the_section_names_whole(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps the help to this width
    with pytest.raises(SystemExit):
        bench.parse(["--help"])
    words = capsys.readouterr().out.split("--sections SECTIONS", 1)[1].replace(",", " ").split()
    assert set(bench.SECTIONS) <= set(words), words


@pytest.fixture(scope="module")
def nets():
    return Networks(PolicyValueNet(SIZE, filters=8, blocks=1, value_hidden=8), num_nets=2)


@pytest.fixture(scope="module")
def variables(nets):
    """Random nets whose policy biases are spread out, so that no two moves have
    exactly the same prior (a random tiny net often outputs constant logits)."""
    v = jax.jit(nets.init)(jax.random.PRNGKey(3))
    params = dict(v["params"])
    bias = params["Dense_0"]["bias"]  # the policy head's [num_nets, A]
    params["Dense_0"] = {**params["Dense_0"],
                         "bias": bias + jax.random.normal(jax.random.PRNGKey(9), bias.shape)}
    return {**v, "params": params}


def one_move_win() -> baseline.Position:
    """Black to move; X X X X at (3,1)..(3,4), blocked at (3,0): only (3,5) wins."""
    pos = baseline.Position.initial(SIZE)
    for black, white in (((3, 1), (3, 0)), ((3, 2), (0, 0)), ((3, 3), (6, 6)),
                         ((3, 4), (0, 6))):
        pos = pos.play(black[0] * SIZE + black[1]).play(white[0] * SIZE + white[1])
    return pos


def random_positions(n: int, seed: int) -> list[baseline.Position]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        pos = baseline.Position.initial(SIZE)
        for _ in range(rng.integers(0, 24)):
            nxt = pos.play(int(rng.choice(np.flatnonzero(pos.legal()))))
            if nxt.done:
                break
            pos = nxt
        out.append(pos)
    return out


def test_rules_agree_with_jax():
    rules = Rules(SIZE)
    observe, legal_mask = jax.jit(rules.observe), jax.jit(rules.legal_mask)
    step = jax.jit(rules.step)
    for pos in [one_move_win(), *random_positions(6, 1)]:
        state = State(jnp.asarray(pos.board), jnp.int32(pos.to_play),
                      jnp.int32(pos.last_action), jnp.int32(pos.num_moves),
                      jnp.int32(pos.winner), jnp.bool_(pos.done), jnp.bool_(False),
                      played_at_from_last(SIZE * SIZE, pos.last_action, pos.num_moves),
                      jnp.int32(0))
        np.testing.assert_array_equal(np.asarray(observe(state)), pos.observe())
        np.testing.assert_array_equal(np.asarray(legal_mask(state)), pos.legal())
        for a in np.flatnonzero(pos.legal())[:10]:
            ref, got = pos.play(int(a)), step(state, jnp.int32(a))
            assert (ref.winner, ref.done) == (int(got.winner), bool(got.done))
    won = one_move_win().play(3 * SIZE + 5)
    assert won.done and won.winner == 0 and won.final_value() == -1.0


@pytest.mark.parametrize("num_nets", [1, 2])
def test_baseline_finds_one_move_win(nets, variables, num_nets):
    pos = one_move_win()
    if num_nets == 1:
        nets = Networks(nets.module, num_nets=1)
        variables = jax.tree.map(lambda v: v[:1], variables)
    net_fn = baseline.make_net_fn(nets, variables)
    visits = baseline.search(pos, net_fn, num_simulations=128, num_nets=num_nets)
    assert visits.sum() == 128
    assert np.all(visits[~pos.legal()] == 0)
    assert int(np.argmax(visits)) == 3 * SIZE + 5
    rng = np.random.default_rng(0)
    for tau in (0.0, 1.0):
        move = baseline.select_move(visits, tau, rng)
        assert pos.legal()[move]
    out = baseline.play([pos], net_fn, num_moves=1, num_simulations=128, num_nets=num_nets)
    assert out["positions"][0].done and out["positions"][0].winner == 0
    assert out["simulations"] == 128 and out["moves"] == 1


def test_baseline_visit_counts_equal_mctx(nets, variables):
    """Same root visit counts as ``search.run_search`` (PUCT, raw Q, Winning Value
    Decay, no root noise), Double Networks, 48 simulations, on the one-move win
    and random positions of either colour to move."""
    positions = [one_move_win(), *random_positions(7, 2)]
    assert {p.to_play for p in positions} == {0, 1}
    states = State(
        board=jnp.asarray(np.stack([p.board for p in positions])),
        to_play=jnp.asarray([p.to_play for p in positions], jnp.int32),
        last_action=jnp.asarray([p.last_action for p in positions], jnp.int32),
        num_moves=jnp.asarray([p.num_moves for p in positions], jnp.int32),
        winner=jnp.asarray([p.winner for p in positions], jnp.int32),
        done=jnp.asarray([p.done for p in positions]),
        illegal=jnp.zeros(len(positions), bool),
        played_at=jnp.stack([played_at_from_last(SIZE * SIZE, p.last_action, p.num_moves)
                             for p in positions]),
        rank=jnp.zeros(len(positions), jnp.int32),
    )
    cfg = SearchConfig(num_simulations=48, c_puct=5.0, qtransform="raw")
    search = jax.jit(Searcher(rules=Rules(SIZE), nets=nets, settings=cfg, gamma=GAMMA).run)
    out = search(variables, jax.random.PRNGKey(0), states)
    jax_visits = np.asarray(out.search_tree.summary().visit_counts)
    net_fn = baseline.make_net_fn(nets, variables)
    for i, pos in enumerate(positions):
        visits = baseline.search(pos, net_fn, num_simulations=48, c_puct=5.0, gamma=GAMMA,
                                 num_nets=2)
        np.testing.assert_array_equal(visits, jax_visits[i], err_msg=f"position {i}")


def test_each_program_is_compiled_once_per_settings_and_shapes():
    from agz_jax.studies.bench_inputs import compiled_once

    traced = []

    def double(x):
        traced.append(x.shape)
        return 2 * x

    first = compiled_once(("double", 1), double, jnp.ones(3))
    assert compiled_once(("double", 1), double, jnp.zeros(3)) is first  # values don't matter
    assert traced == [(3,)] and first[1] > 0  # the one compilation's seconds
    other_shape = compiled_once(("double", 1), double, jnp.ones(4))
    # Other settings: a program built anew (jax's own cache knows `double` at (3,)).
    compiled_once(("double", 2), lambda x: double(x), jnp.ones(3))
    assert traced == [(3,), (4,), (3,)]
    assert other_shape[0](jnp.ones(4)).tolist() == [2.0] * 4
