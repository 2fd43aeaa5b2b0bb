"""The ablation sweep: the committed sweep file, the validation of a
sweep file, the statistics and plan of matches by hand, and the whole
pipeline end to end on a tiny sweep (2 arms x 2 seeds, 7x7): train, snapshot,
rate, report, resume without redoing anything, report the data where it lies."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from agz_jax.base import rating
from agz_jax.config.schema import ConfigError
from agz_jax.studies import ablation, ablation_report, sweep

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "experiments" / "studies"  # ablation.toml and ablation_state/

TINY = """
name = "tiny"
preset = "smoke"
seeds = "0-1"
games_per_arm = 8
snapshot_every = 2

[common]
"game.size" = 7
"net.filters" = 4
"net.value_hidden" = 4
"search.num_simulations" = 2
"selfplay.num_games" = 4
"train.batch_size" = 8
"train.min_replay" = 1
"train.steps_per_iteration" = 1
"gating.enabled" = false
"eval.every" = 0

[[arms]]
name = "scratch"
set = { "decay.gamma" = 0.95 }

[[arms]]
name = "curriculum"
set = { "decay.gamma" = 0.95 }
curriculum_games = 4
curriculum_reference = "scratch"

[arms.curriculum]
"curriculum.stages" = "basic"
"basic.num_positions" = 64
"basic.held_out" = 16
"basic.steps" = 2

[[claims]]
name = "the curriculum helps"
better = "curriculum"
worse = "scratch"

[evaluation]
sims = 2
target = "mentor:0"
target_games = 2
target_score = 0.5
anchors = []
pool = ["random", "mentor:0"]
pool_games = 2
peer_games = 2
chunk = 0
"""


def source(text: str = TINY) -> dict:
    import tomllib

    return tomllib.loads(text)


# ------------------------------------------------------------------ the sweep file


def test_committed_sweep_is_the_issue_s_design():
    """Five arms, >= 4 seeds, one budget of self-play games for all (the
    curriculum's pre-registered equivalents included, less than an iteration
    left over), and the three claims compared at the pre-registered gamma 0.95."""
    plan = ablation.load(STUDIES / "ablation.toml")
    assert len(plan.arms) == 5 and len(plan.seeds) >= 4
    for arm in plan.arms:
        config = plan.config(arm, plan.seeds[0])
        assert not config.selfplay.continuous and config.game.size in (9, 11)
        spent = plan.iterations(arm) * plan.games_per_iteration(arm) + arm.curriculum_games
        assert plan.games_per_arm - plan.games_per_iteration(arm) < spent <= plan.games_per_arm
        assert plan.snapshots(arm)[0] == 0 and plan.snapshots(arm)[-1] == plan.iterations(arm)
    gammas = {a.name: plan.config(a, 0).decay.gamma for a in plan.arms}
    double = {a.name: plan.config(a, 0).net.double for a in plan.arms}
    assert {gammas[a.name] for a in plan.arms if not a.curriculum and double[a.name]} == {
        1.0, 0.95, 0.9}
    claims = {(c.better, c.worse) for c in plan.claims}
    single = next(a.name for a in plan.arms if not double[a.name])
    curriculum = next(a for a in plan.arms if a.curriculum)
    best = next(n for n, g in gammas.items() if g == 0.95 and double[n] and n != curriculum.name)
    assert (best, single) in claims and (curriculum.name, best) in claims
    assert gammas[single] == gammas[curriculum.name] == 0.95
    assert curriculum.curriculum_reference == best
    assert "selfplay" not in plan.curriculum_config(curriculum, 0).curriculum.stages
    assert plan.evaluation.target == "mentor:3" and plan.evaluation.target_games == 100
    assert plan.evaluation.target_score == 0.8


def test_committed_recipe_sweep_is_its_pre_registered_design():
    """The recipe sweep: every arm starts from the same curriculum (the shared
    table), spends the same budget, and differs from ``base`` in one setting;
    each claim compares an arm with ``base``."""
    plan = ablation.load(STUDIES / "recipe.toml")
    assert plan.title.startswith("the self-play recipe") and len(plan.seeds) >= 3
    base = plan.arm("base")
    assert base.curriculum and base.curriculum_games == 384
    reference = plan.config(base, 0).to_dict()
    for arm in plan.arms:
        assert arm.curriculum == base.curriculum and arm.curriculum_games == 384
        assert plan.iterations(arm) == 42
        changed = {f"{section}.{k}" for section, values in plan.config(arm, 0).to_dict().items()
                   if isinstance(values, dict)
                   for k, v in values.items() if reference[section][k] != v}
        assert changed == set(arm.overrides), arm.name
    assert plan.config(plan.arm("lr=cosine"), 0).train.lr_decay_steps == 42 * 40
    assert all("base" in (c.better, c.worse) for c in plan.claims)
    assert {c.better for c in plan.claims} | {c.worse for c in plan.claims} == {
        a.name for a in plan.arms}


def test_a_shared_curriculum_table_is_every_arms_own_unless_it_has_one():
    s = source()
    shared = dict(s["arms"][1]["curriculum"])
    s["curriculum"], s["curriculum_games"] = shared, 4
    s["arms"][1]["curriculum"] = {**shared, "basic.steps": 3}
    del s["arms"][1]["curriculum_reference"]  # the reference arm has a curriculum now
    plan = ablation.parse(s, "tiny.toml")
    assert plan.arms[0].curriculum == shared and plan.arms[0].curriculum_games == 4
    assert plan.arms[1].curriculum["basic.steps"] == 3
    assert plan.title == ablation.TITLE


@pytest.mark.parametrize("sweep", ["ablation", "recipe"])
def test_committed_state_is_of_the_committed_sweep_and_intact(sweep):
    """experiments/studies/SWEEP_state (the sweep's state, continued on the next
    machine) is a state of experiments/studies/SWEEP.toml, every file as saved, and
    git tracks its runs/ (the repository ignores runs/ elsewhere)."""
    import subprocess

    from agz_jax.studies import ablation_store as store

    state = STUDIES / f"{sweep}_state"
    manifest = store.check_state(ablation.load(STUDIES / f"{sweep}.toml"), state)
    for rel, digest in manifest["files"].items():
        assert store.sha256(state / rel) == digest, rel
    finished = json.loads((state / "index.json").read_text())["runs"]
    assert len(manifest["finished"]) == len(finished) and all(r["done"] for r in finished)
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    probe = f"experiments/studies/{sweep}_state/runs/arm/seed_0/selfplay/metrics.jsonl"
    ignored = subprocess.run(["git", "check-ignore", "-q", probe], cwd=ROOT)
    assert ignored.returncode == 1, f"git ignores {probe}: the state would not be committed"


@pytest.mark.parametrize("edit, field", [
    (lambda s: s.update(colour="x"), "unknown key 'colour'"),
    (lambda s: s.update(games_per_arm=10), "games_per_arm (10) must be a multiple"),
    (lambda s: s["common"].update({"selfplay.continuous": True}), "selfplay.continuous"),
    (lambda s: s["common"].update({"decay.gamma": 2.0}), "decay.gamma"),
    (lambda s: s["arms"][0].update(name="a b"), "arms[0].name"),
    (lambda s: s["arms"][1].update(name="scratch"), "'scratch' is given twice"),
    (lambda s: s["arms"][1]["curriculum"].update({"curriculum.stages": "basic,selfplay"}),
     "must not include selfplay"),
    (lambda s: s["arms"][1]["curriculum"].update({"train.batch_size": 4}),
     "it may set only"),
    (lambda s: s["arms"][1].update(curriculum_games=8), "curriculum_games"),
    (lambda s: s["arms"][0].update(curriculum_games=4), "needs a curriculum table"),
    (lambda s: s["arms"][1].update(curriculum_reference="curriculum"), "curriculum_reference"),
    (lambda s: s["claims"][0].update(worse="nobody"), "claims[0].worse"),
    (lambda s: s["evaluation"].update(target_games=3), "evaluation.target_games"),
    (lambda s: s["evaluation"].update(target="mcts:x:2"), "names player 'mcts:x:2'"),
    (lambda s: s["evaluation"].update(target="mentor:1"), "must be in the pool"),
    (lambda s: s.update(seeds="3-1"), "tiny.toml: seeds must be"),
    (lambda s: s.update(preset="nope"), "tiny.toml: preset: unknown preset 'nope'"),
    (lambda s: s["arms"][1]["curriculum"].update({"imitate.level": 99}),
     "tiny.toml: arms[1].curriculum (arm 'curriculum'): imitate.level"),
])
def test_bad_sweep_files_fail_naming_the_field(edit, field):
    s = source()
    edit(s)
    with pytest.raises(ConfigError) as e:
        ablation.parse(s, "tiny.toml")
    assert field in str(e.value) and "\n" not in str(e.value)
    assert "tiny.toml" in str(e.value) and "--seeds" not in str(e.value)


def test_file_as_directory_and_failed_report_make_nothing(tmp_path, capsys):
    from experiments.studies import ablation as cli

    f = tmp_path / "file.txt"
    f.write_text("mine")
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    for argv in (["run", "--config", str(config), "--out", str(f)],
                 ["report", "--docs", str(f)], ["report", "--out", str(f), "--docs",
                                                 str(tmp_path / "d")]):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "is a file" in err
        assert f.read_text() == "mine" and not (tmp_path / "d").exists()
    assert cli.main(["report", "--docs", str(tmp_path / "missing")]) == 2
    assert "no ablation data" in capsys.readouterr().err
    assert cli.main(["report", "--out", str(tmp_path / "nosweep"), "--docs",
                     str(tmp_path / "m4")]) == 2
    assert "no ablation sweep" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists() and not (tmp_path / "m4").exists()


def test_budget_and_snapshots_of_the_tiny_sweep():
    plan = ablation.parse(source())
    scratch, cur = plan.arms
    assert (plan.iterations(scratch), plan.snapshots(scratch)) == (2, [0, 2])
    assert (plan.iterations(cur), plan.snapshots(cur)) == (1, [0, 1])  # 8 - 4 games left
    assert plan.curriculum_config(cur, 1).curriculum.stages == ("basic",)
    assert plan.config(cur, 1).seed == 1 and plan.config(cur, 1).basic.steps != 2


# ------------------------------------------------------------------ statistics by hand


def test_welch_interval_by_hand():
    a, b = [10.0, 20.0, 30.0, 40.0], [0.0, 5.0, 10.0]
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3  # 41.667, 8.333
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 2)  # 4.04 -> t(4) = 2.776
    w = ablation_report.welch(a, b)
    assert w["diff"] == pytest.approx(20.0) and w["df"] == pytest.approx(df)
    assert w["high"] - w["diff"] == pytest.approx(2.776 * math.sqrt(va + vb))
    assert ablation_report.verdict(w) == "held"
    assert ablation_report.verdict(ablation_report.welch(b, a)) == "reversed"
    assert ablation_report.verdict(ablation_report.welch([0.0, 10.0], [1.0, 9.0])) == "not resolved"
    assert ablation_report.welch([1.0], [1.0, 2.0]) is None
    assert ablation_report.verdict(None) == "too few seeds"


def snapshot(arm, seed, it, games, cpu, final):
    return {"iteration": it, "selfplay_games": games, "games": games, "cpu_s": cpu,
            "wall_s": cpu, "final": final, "model": f"m/{arm}/{seed}/{it}",
            "player": ablation.player_name(arm, seed, games)}


def hand_index(final_curriculum: bool) -> dict:
    runs = []
    for arm in ("scratch", "curriculum"):
        for seed in (0, 1):
            last = arm == "scratch" or final_curriculum
            runs.append({"arm": arm, "seed": seed, "done": last, "curriculum": None,
                         "snapshots": [snapshot(arm, seed, 0, 0, 0.0, False),
                                       snapshot(arm, seed, 2, 8, 3600.0 * (1 + seed), last)]})
    return {"runs": runs}


def test_pairings_each_pair_once_peers_at_equal_games():
    plan = ablation.parse(source())
    partial = ablation.pairings(plan, hand_index(final_curriculum=False))
    full = ablation.pairings(plan, hand_index(final_curriculum=True))
    assert len({frozenset(p[:2]) for p in full}) == len(full)
    assert full[0] == ("random", "mentor:0", 2)  # the pool first
    # 1 pool pair; 8 snapshots x target; 4 final nets x random (mentor:0 is the target);
    # per seed the two arms' snapshots at 8 games (not those at 0: untrained nets)
    assert len(full) == 1 + 8 + 4 + 2
    assert ("scratch/s0@g8", "curriculum/s0@g8", 2) in full
    assert not any("@g0" in a and "@g0" in b for a, b, _ in full)
    # curriculum nets not final: no match against the whole pool, peers all the same
    assert len(partial) == 1 + 8 + 2 + 2
    # a seed's peers only: seeds never meet
    assert not any("/s0@" in a and "/s1@" in b or "/s1@" in a and "/s0@" in b
                   for a, b, _ in full)


def test_analyse_elo_claims_and_time_to_strength():
    """Per-arm Elo is the one fit's rating of each final net; time to strength is
    the CPU time of the first snapshot scoring the target over enough games."""
    plan = ablation.parse(source())
    index = hand_index(final_curriculum=True)
    ratio = {"scratch/s0@g8": (2, 0), "scratch/s1@g8": (1, 1), "curriculum/s0@g8": (0, 2),
             "curriculum/s1@g8": (1, 1)}
    lines = [{"a": "random", "b": "mentor:0", "wins": 0, "draws": 1, "losses": 1, "games": 2}]
    for r in index["runs"]:
        first, last = (s["player"] for s in r["snapshots"])
        lines.append({"a": first, "b": "mentor:0", "wins": 0, "draws": 0, "losses": 2, "games": 2})
        w, lo = ratio[last]
        lines.append({"a": "mentor:0", "b": last, "wins": lo, "draws": 0, "losses": w,
                      "games": 2})
        lines.append({"a": last, "b": "random", "wins": 1, "draws": 1, "losses": 0, "games": 2})
    lines.append({"a": "scratch/s0@g8", "b": "curriculum/s0@g8", "wins": 2, "draws": 0,
                  "losses": 0, "games": 2})
    result = ablation_report.analyse(plan, index, lines)
    fit = {r.player: r for r in rating.fit(
        rating.Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"]) for x in lines).ratings}
    arms = {a["arm"]: a for a in result["arms"]}
    assert arms["scratch"]["elo"] == [fit["scratch/s0@g8"].elo, fit["scratch/s1@g8"].elo]
    assert arms["scratch"]["vs_target"] == [1.0, 0.5]
    # both scratch seeds reach 0.5 at their final snapshot; curriculum s0 scores 0
    assert arms["scratch"]["hours_to_target"] == [1.0, 2.0]
    assert arms["curriculum"]["hours_to_target"] == [2.0] and arms["curriculum"]["reached"] == 1
    claim = result["claims"][0]
    w = ablation_report.welch(arms["curriculum"]["elo"], arms["scratch"]["elo"])
    assert claim["welch"] == w and claim["verdict"] == ablation_report.verdict(w)
    assert not result["partial"] and result["games"] == 2 * len(lines)
    rows = {(r["arm"], r["metric"]): r for r in ablation_report.summary_rows(result)}
    assert rows[("scratch", "elo_final")]["mean"] == pytest.approx(
        np.mean(arms["scratch"]["elo"]))
    # a seed without its final snapshot makes the report partial
    index["runs"][3]["snapshots"][-1]["final"] = False
    assert ablation_report.analyse(plan, index, lines)["partial"]


# ------------------------------------------------------------------ end to end


@pytest.fixture
def cache_env(monkeypatch):
    """The runner's compilation cache is the test session's (conftest)."""
    import jax

    where = jax.config.jax_compilation_cache_dir
    if where:
        monkeypatch.setenv("AGZ_JAX_CACHE_DIR", where)
    else:
        monkeypatch.setenv("AGZ_JAX_NO_CACHE", "1")


@pytest.mark.long
def test_pipeline_end_to_end(tmp_path, cache_env, capsys, monkeypatch):
    """The sweep is interrupted in its last run, saved into a state, its
    directory deleted, restored from the state and continued; the same sweep
    continued in place (which kept everything) is the reference."""
    from agz_jax.nets import models
    from agz_jax.studies import ablation_store as store
    from agz_jax.studies import ablation_train as train
    from agz_jax.studies import ledger
    from experiments.studies import ablation as cli

    config, out, docs = tmp_path / "tiny.toml", tmp_path / "sweep", tmp_path / "docs"
    state, ref = tmp_path / "state", tmp_path / "reference"
    config.write_text(TINY)
    plan = ablation.load(config)

    # interrupted in the last run (curriculum, seed 1), after its curriculum, its
    # first snapshot and that snapshot's matches, before its self-play
    train_to = train.train_to

    def interrupted(sdir, *args):
        if "curriculum/seed_1" in str(sdir):
            raise KeyboardInterrupt
        return train_to(sdir, *args)

    monkeypatch.setattr(train, "train_to", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["run", "--config", str(config), "--out", str(out)])
    monkeypatch.setattr(train, "train_to", train_to)
    lost = [x for x in ledger.read_ledger(out / "games.jsonl")
            if "curriculum/s1@" in x["a"] + x["b"]]
    assert lost and all("curriculum/s1@g4" in x["a"] + x["b"] for x in lost)

    # the state: the 3 finished runs and their matches; of the nets, only those a
    # match still to come plays (scratch seed 1 at 8 games, the peer of the
    # unfinished run's last snapshot): seed 0 is complete, 0 games have no peers
    capsys.readouterr()
    assert cli.main(["save", "--out", str(out), "--state", str(state)]) == 0
    said = capsys.readouterr().out
    assert "3 finished runs" in said and "not kept: curriculum seed 1" in said
    manifest = json.loads((state / "STATE.json").read_text())
    assert manifest["nets"] == ["runs/scratch/seed_1/snapshots/it2"]
    kept = json.loads((state / "index.json").read_text())
    assert sorted((r["arm"], r["seed"]) for r in kept["runs"]) == [
        ("curriculum", 0), ("scratch", 0), ("scratch", 1)]
    assert len(ledger.read_ledger(state / "games.jsonl")) == (
        len(ledger.read_ledger(out / "games.jsonl")) - len(lost))
    assert (state / "runs/scratch/seed_0/selfplay/metrics.jsonl").exists()
    assert not (state / "runs/scratch/seed_0/snapshots").exists()
    assert sorted(manifest["files"]) == sorted(
        str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()
        and p.name != "STATE.json")
    # status reads the state as it reads a sweep directory
    assert cli.main(["status", "--out", str(state)]) == 0
    assert capsys.readouterr().out.count(": done, iteration") == 3

    # the reference continues in place; the sweep's directory is deleted and
    # restored from the state, its unfinished run done again from its beginning
    shutil.copytree(out, ref)
    shutil.rmtree(out)
    assert cli.main(["run", "--config", str(config), "--out", str(ref)]) == 0
    assert cli.main(["run", "--config", str(config), "--out", str(out), "--state",
                     str(state)]) == 0
    said = capsys.readouterr().out
    assert "restored from" in said and "curriculum (basic)" in said
    index, reference = (json.loads((d / "index.json").read_text()) for d in (out, ref))
    timing = ("cpu_s", "wall_s")
    for r, q in zip(index["runs"], reference["runs"], strict=True):
        assert [{k: v for k, v in s.items() if k not in timing} for s in r["snapshots"]] == [
            {k: v for k, v in s.items() if k not in timing} for s in q["snapshots"]]
        assert (r["arm"], r["seed"], r["done"]) == (q["arm"], q["seed"], q["done"])
    record = ("a", "b", "wins", "draws", "losses", "games", "seed", "size", "rule")
    assert [[x[k] for k in record] for x in ledger.read_ledger(out / "games.jsonl")] == [
        [x[k] for k in record] for x in ledger.read_ledger(ref / "games.jsonl")]
    redone, other = (models.load(d / index["runs"][-1]["snapshots"][-1]["model"]).variables
                     for d in (out, ref))
    assert all(np.array_equal(x, y) for x, y in zip(
        *(jax_leaves(v) for v in (redone, other)), strict=True))
    index = json.loads((out / "index.json").read_text())
    assert len(index["runs"]) == 4 and all(r["done"] for r in index["runs"])
    for r in index["runs"]:
        arm = plan.arm(r["arm"])
        snaps = r["snapshots"]
        assert [s["iteration"] for s in snaps] == plan.snapshots(arm)
        assert [s["selfplay_games"] for s in snaps] == [4 * s["iteration"] for s in snaps]
        assert [s["games"] for s in snaps] == [arm.curriculum_games + s["selfplay_games"]
                                                for s in snaps]
        assert snaps[-1]["games"] == plan.games_per_arm and snaps[-1]["final"]
        cpu = [s["cpu_s"] for s in snaps]
        assert cpu == sorted(cpu) and cpu[-1] > cpu[0] >= 0
        rdir = out / "runs" / r["arm"] / f"seed_{r['seed']}"
        rows = sweep.read_history(rdir / "selfplay")
        assert [h["iteration"] for h in rows] == list(range(1, plan.iterations(arm) + 1))
        assert all(h["time/cpu_seconds"] > 0 for h in rows)
        # the final snapshot is the run's best net; a curriculum run starts from its
        # nets (in the reference: the restored runs came without their nets)
        final = models.load(ref / snaps[-1]["model"]).variables
        best = models.load(ref / rdir.relative_to(out) / "selfplay").variables
        assert all(np.array_equal(x, y) for x, y in zip(
            *(jax_leaves(v) for v in (final, best)), strict=True))
        if arm.curriculum:
            assert r["curriculum"]["cpu_s"] > 0 and cpu[0] == r["curriculum"]["cpu_s"]
            start = models.load(ref / rdir.relative_to(out) / "curriculum").variables
            first = models.load(ref / snaps[0]["model"]).variables
            assert all(np.array_equal(x, y) for x, y in zip(
                *(jax_leaves(v) for v in (start, first)), strict=True))
        assert json.loads((rdir / "selfplay" / "record.json").read_text())["seed"] == r["seed"]

    lines = ledger.read_ledger(out / "games.jsonl")
    wanted = ablation.pairings(plan, index)
    assert sorted((x["a"], x["b"], x["games"]) for x in lines) == sorted(wanted)
    assert all(x["seed"] == ledger.pairing_seed(0, x["a"], x["b"]) for x in lines)
    assert len(wanted) == 1 + 8 + 4 + 2

    # the report: every seed's final Elo is the fit's, the arm's mean is theirs
    fit = {r.player: r for r in rating.fit(
        rating.Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"]) for x in lines).ratings}
    seeds = (out / "report" / "seeds.csv").read_text().splitlines()
    assert len(seeds) == 1 + 4
    summary = {(r["arm"], r["metric"]): r for r in csv_rows(out / "report" / "summary.csv")}
    for arm in ("scratch", "curriculum"):
        finals = [fit[ablation.player_name(arm, s, 8)].elo for s in (0, 1)]
        row = summary[(arm, "elo_final")]
        assert int(row["n"]) == 2 and float(row["mean"]) == pytest.approx(np.mean(finals))
    md = (out / "report" / "summary.md").read_text()
    assert "PARTIAL" not in md and "the curriculum helps" in md
    # the pre-registered curriculum cost, recomputed from the sweep's own CPU times
    runs = {(r["arm"], r["seed"]): r for r in index["runs"]}
    check = ablation_report.curriculum_check(plan.arm("curriculum"),
                                      ablation_report.analyse(plan, index, lines))
    cur = np.mean([runs[("curriculum", s)]["curriculum"]["cpu_s"] for s in (0, 1)])
    per_game = np.mean([runs[("scratch", s)]["snapshots"][-1]["cpu_s"] / 8 for s in (0, 1)])
    assert check["equivalents"] == pytest.approx(cur / per_game)
    assert f"{check['equivalents']:.0f} game equivalents against the pre-registered 4" in md
    assert (out / "report" / "curves.png").stat().st_size > 10_000

    # again (the state given too: not restored over a sweep that holds its runs):
    # nothing is trained or played twice
    ledger_before = (out / "games.jsonl").read_bytes()
    capsys.readouterr()
    assert cli.main(["run", "--config", str(config), "--out", str(out), "--state",
                     str(state)]) == 0
    said = capsys.readouterr().out
    assert "snapshot" not in said and "match" not in said and "curriculum (" not in said
    assert "not restored" in said
    assert (out / "games.jsonl").read_bytes() == ledger_before
    assert cli.main(["status", "--out", str(out)]) == 0
    assert capsys.readouterr().out.count(": done, iteration") == 4

    # the docs: the report of the sweep's data, which stays where it is (named
    # in the summary), redrawn the same; a directory holding data reads its own
    assert cli.main(["report", "--out", str(out), "--docs", str(docs)]) == 0
    first = (docs / "summary.md").read_text()
    assert cli.main(["report", "--out", str(out), "--docs", str(docs)]) == 0
    assert (docs / "summary.md").read_text() == first
    for name in ("summary.csv", "seeds.csv", "claims.csv", "curves.png", "final.png", "pool.md"):
        assert (docs / name).exists(), name
    for name in ("games.jsonl", "index.json", "ablation.json"):
        assert not (docs / name).exists(), name
    assert f"the data in [`{os.path.relpath(out, docs)}/`]" in first
    assert f"report --out {out} --docs {docs}`" in first
    own = tmp_path / "own"
    own.mkdir()
    for name in ("games.jsonl", "index.json", "ablation.json"):
        shutil.copyfile(out / name, own / name)
    assert cli.main(["report", "--docs", str(own)]) == 0
    mine = (own / "summary.md").read_text()
    assert "the data: `games.jsonl`" in mine and f"report --docs {own}`" in mine

    # the finished sweep's state keeps no net: no match is left to play
    assert cli.main(["save", "--out", str(out), "--state", str(state)]) == 0
    manifest = json.loads((state / "STATE.json").read_text())
    assert len(manifest["finished"]) == 4 and manifest["nets"] == [] and not manifest["not_kept"]
    # a state is restored under a sweep file with added seeds
    config.write_text(TINY.replace('seeds = "0-1"', 'seeds = "0-2"'))
    store.check_state(ablation.load(config), state)

    # refused, one line each, nothing run: another sweep file on the same
    # directory, or restoring a state of another sweep file; a damaged state; a
    # save over a directory that is no state, or over a state ahead of the sweep
    fresh = tmp_path / "fresh"
    config.write_text(TINY.replace("games_per_arm = 8", "games_per_arm = 12"))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    (tmp_path / "behind").mkdir()
    shutil.copyfile(out / "ablation.json", tmp_path / "behind" / "ablation.json")
    damaged = tmp_path / "damaged"
    shutil.copytree(state, damaged)
    with (damaged / "games.jsonl").open("a") as f:
        f.write("\n")
    for argv, words in [
            (["run", "--config", str(config), "--out", str(out)], "games_per_arm"),
            (["run", "--config", str(config), "--out", str(fresh), "--state", str(state)],
             "games_per_arm"),
            (["run", "--config", str(STUDIES / "ablation.toml"), "--out",
              str(fresh), "--state", str(tmp_path / "notes")], "no ablation state"),
            (["save", "--out", str(out), "--state", str(tmp_path / "notes")],
             "no ablation state"),
            (["save", "--out", str(tmp_path / "behind"), "--state", str(state)],
             "4 finished run(s)")]:
        capsys.readouterr()
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, (argv, err)
    assert not fresh.exists() and (tmp_path / "notes" / "keep.txt").read_text() == "mine"
    config.write_text(TINY)
    assert cli.main(["run", "--config", str(config), "--out", str(fresh), "--state",
                     str(damaged)]) == 2
    err = capsys.readouterr().err
    assert "games.jsonl is missing or not the file the state saved" in err
    assert err.count("\n") == 1 and not (fresh / "index.json").exists()


def jax_leaves(tree):
    import jax

    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def csv_rows(path: Path) -> list[dict]:
    import csv

    with path.open() as f:
        return list(csv.DictReader(f))
