"""The ablation sweep of AlphaGomoku's claims (issue 26): Winning Value Decay,
Double Networks, and the curriculum against self-play from scratch.

    python -m experiments.ablation run --config experiments/ablation.toml --out runs/ablation9
    python -m experiments.ablation status --out runs/ablation9
    python -m experiments.ablation report --out runs/ablation9 --docs docs/ablation
    python -m experiments.ablation report --docs docs/ablation   # from the committed data alone
    python -m experiments.ablation save --out runs/ablation9 --state experiments/ablation_state
    python -m experiments.ablation run --config experiments/ablation.toml --out runs/ablation9 \
        --state experiments/ablation_state    # in a fresh clone: continue from the state

``run`` trains every arm x seed of the sweep file (``agz_jax.ablation`` says
what it holds) and rates them, one run after the other in this process, seed
by seed (all arms of seed 0 first, so partial results cover every arm):

* a curriculum arm first runs ``experiments.curriculum`` (its stages, no
  self-play) in ``RUN/curriculum``, its process CPU time measured;
* the main job (``experiments.selfplay``, lockstep self-play) runs in
  ``RUN/selfplay`` from scratch, or ``--init-from`` the curriculum, in
  segments of ``snapshot_every`` iterations (``--resume --iterations N``);
  every iteration also logs its process CPU seconds (``time/cpu_seconds``);
* after each segment the best net is saved as a model directory
  ``RUN/snapshots/it<N>`` and listed in ``OUT/index.json`` with its self-play
  games (and the curriculum's pre-registered game equivalents) and CPU
  seconds so far;
* every match the snapshots call for (``agz_jax.ablation.pairings``) is
  played and appended to ``OUT/games.jsonl`` (the rating ladder's ledger
  format, one JSON line a match, its seed derived from the evaluation seed
  and the two names), then the report is redrawn in ``OUT/report``.

Running the same command again skips what is done: finished segments,
snapshots and matches; a killed segment resumes from its last checkpoint, a
killed curriculum after its last stage or round, a killed match is played
again. A second runner on the same OUT is refused (a lock). Changing the
sweep file under an existing OUT is refused too, except for adding seeds.

``save --out OUT --state DIR`` keeps in DIR, a directory committed to git
(OUT is not), what the sweep needs to continue in a fresh clone: the sweep
file, the index of the finished runs, their matches, metrics and records, and
the snapshot nets that matches still to come will play (those of the seed in
progress). It may run while a runner works in OUT. An unfinished run is not
kept: ``run --state DIR`` on an OUT that holds no sweep yet restores DIR into
it, and that run starts again from its beginning (its matches played again).
A state of another sweep file (more seeds aside) is refused, and so is a
save that would replace a directory that is no state, or a state with
finished runs OUT lacks. DIR has OUT's layout: ``status`` and ``report`` take
it as ``--out``.

``report --out OUT --docs DIR`` copies the data (``ablation.json``, the sweep
file as run; ``index.json``; ``games.jsonl``) into DIR and draws the report
there: summary.csv, seeds.csv, claims.csv, summary.md, curves.png,
final.png and pool.md (every player's rating, ``experiments.ladder``'s table).
Without ``--out`` it redraws DIR from DIR's own data.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import io
import json
import re
import shlex
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from agz_jax.config import ConfigError
from agz_jax.presets import get_preset

DATA_FILES = ("ablation.json", "index.json", "games.jsonl")
CPU_KEY = "time/cpu_seconds"  # not *_s: the ladder's hours sum time/*_s (wall) only


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.ablation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train and rate every arm x seed (resumable)")
    r.add_argument("--config", type=Path, default=Path("experiments/ablation.toml"),
                   help="the sweep file (default experiments/ablation.toml)")
    r.add_argument("--out", type=Path, required=True, help="the sweep directory")
    r.add_argument("--state", type=Path, default=None,
                   help="a state directory written by save (committed): an --out that holds "
                        "no sweep yet starts from it")
    r.add_argument("--verbose", action="store_true", help="show every run's own output")
    v = sub.add_parser("save", help="keep what the sweep needs to continue in a directory "
                                    "(committed to git)")
    v.add_argument("--out", type=Path, required=True, help="the sweep directory")
    v.add_argument("--state", type=Path, required=True,
                   help="the state directory (replaced whole; e.g. experiments/ablation_state)")
    s = sub.add_parser("status", help="what is done and what is left")
    s.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("report", help="draw the report (into --docs)")
    d.add_argument("--out", type=Path, default=None,
                   help="the sweep directory to take the data from (default: --docs's own)")
    d.add_argument("--docs", type=Path, required=True, help="where the report goes")
    return p.parse_args(argv)


# ------------------------------------------------------------------ bookkeeping


def run_dir(out: Path, arm: str, seed: int) -> Path:
    return out / "runs" / arm / f"seed_{seed}"


def write_json(path: Path, data) -> None:
    """Atomically (a kill leaves the old file or the new one)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


def index_run(index: dict, arm: str, seed: int) -> dict:
    for r in index["runs"]:
        if (r["arm"], r["seed"]) == (arm, seed):
            return r
    r = {"arm": arm, "seed": seed, "snapshots": [], "curriculum": None, "done": False,
         "wall_s": 0.0}
    index["runs"].append(r)
    return r


@contextlib.contextmanager
def lock(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another ablation runner is working in {out}") from None
        yield


@contextlib.contextmanager
def cpu_counted():
    """While active, every main-job iteration (``agz_jax.run.run_iteration``,
    which ``experiments.selfplay`` calls through the module) logs its process
    CPU seconds (user + system, all threads) as ``time/cpu_seconds``. Logged per
    iteration, they follow the checkpoints: a killed run's lost iterations
    leave the log with them (``run.MetricsLog``), so nothing is counted twice."""
    from agz_jax import run

    original = run.run_iteration

    def counted(comps, state):
        c0 = time.process_time()
        state, metrics = original(comps, state)
        metrics[CPU_KEY] = time.process_time() - c0
        return state, metrics

    run.run_iteration = counted
    try:
        yield
    finally:
        run.run_iteration = original


def call(main, argv: list[str], verbose: bool) -> str:
    """Run an experiment's main() in this process; its output (RuntimeError with
    its tail if it fails)."""
    from experiments.sweep import Tee

    tee = Tee(sys.stdout, quiet=not verbose)
    with contextlib.redirect_stdout(tee):
        rc = main(argv)
    text = "".join(tee.parts)
    if rc != 0:
        raise RuntimeError(f"{main.__module__} {shlex.join(argv)} failed (exit {rc}):\n"
                           f"{text[-3000:]}")
    return text


def main_job_flags(plan, arm, seed: int, sdir: Path, iterations: int) -> list[str]:
    from agz_jax import sweep

    config = plan.config(arm, seed).replace(iterations=iterations)
    return ["--preset", plan.preset, "--out", str(sdir), "--quiet",
            *sweep.to_flags(sweep.config_overrides(get_preset(plan.preset), config))]


def curriculum_flags(plan, arm, seed: int, cdir: Path) -> list[str]:
    from agz_jax import sweep

    config = plan.curriculum_config(arm, seed)
    overrides = sweep.config_overrides(get_preset(plan.preset), config)
    stages = overrides.pop("curriculum.stages", None) or config.curriculum.stages
    return ["--preset", plan.preset, "--out", str(cdir), "--stages", ",".join(stages),
            *sweep.to_flags(overrides)]


def check(plan, out: Path) -> None:
    """Before anything runs: the players parse, the main job and the curriculum
    build exactly each run's config from their flags, and OUT holds no other sweep."""
    from experiments import arena as arena_cli
    from experiments import curriculum, selfplay

    ev = plan.evaluation
    for p in (ev.target, *ev.anchors, *ev.pool):
        arena_cli.parse_spec(p, "evaluation")
    for arm in plan.arms:
        for seed in plan.seeds:
            want = plan.config(arm, seed)
            got = selfplay.parse(main_job_flags(plan, arm, seed, Path("x"), want.iterations))[1]
            if got != want:
                raise ConfigError(f"arm {arm.name}: the main job's flags give another "
                                  f"{want.first_difference(got)}")
            if arm.curriculum:
                want = plan.curriculum_config(arm, seed)
                got = curriculum.parse(curriculum_flags(plan, arm, seed, Path("x")))[1]
                if got != want:
                    raise ConfigError(f"arm {arm.name}: the curriculum's flags give another "
                                      f"{want.first_difference(got)}")
    same_sweep(plan, out / "ablation.json", f"{out} holds", "choose another --out")


def same_sweep(plan, saved: Path, holds: str, way_out: str) -> None:
    """ConfigError (one line) when the sweep file ``saved`` (if it exists) is
    another sweep than ``plan``: any difference but the seeds."""
    if not saved.exists():
        return
    try:
        before = json.loads(saved.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{saved} is not valid JSON: {e}") from None
    before = {k: v for k, v in before.items() if k != "seeds"}
    now = json.loads(json.dumps(plan.without_seeds()))
    if before != now:
        key = next(k for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k))
        raise ConfigError(f"{holds} a sweep with another {key!r} ({saved}); only seeds may be "
                          f"added: {way_out}")


# ------------------------------------------------------------------ training


def run_curriculum(plan, arm, seed: int, cdir: Path, verbose: bool, say) -> dict:
    """Run (or resume) the arm's curriculum; its cost so far: process CPU and
    wall seconds of every call, ``interrupted`` calls (killed: their time is
    missing, the cost a lower bound)."""
    from agz_jax.curriculum import stages
    from experiments import curriculum

    cost_path = cdir / "cost.json"
    cost = json.loads(cost_path.read_text()) if cost_path.exists() else {
        "cpu_s": 0.0, "wall_s": 0.0, "calls": 0, "interrupted": 0, "open": False}
    config = plan.curriculum_config(arm, seed)
    if stages.read_progress(cdir)["done"] == list(config.curriculum.stages):
        return {**cost, "complete": True}
    if cost["open"]:
        cost["interrupted"] += 1
    cost["calls"] += 1
    cost["open"] = True
    cdir.mkdir(parents=True, exist_ok=True)
    write_json(cost_path, cost)
    argv = (["--out", str(cdir), "--resume"] if (cdir / "config.json").exists()
            else curriculum_flags(plan, arm, seed, cdir))
    say(f"  curriculum ({','.join(config.curriculum.stages)}) in {cdir}")
    c0, w0 = time.process_time(), time.perf_counter()
    call(curriculum.main, argv, verbose)
    cost["cpu_s"] += time.process_time() - c0
    cost["wall_s"] += time.perf_counter() - w0
    cost["open"] = False
    write_json(cost_path, cost)
    say(f"  curriculum done: {cost['cpu_s']:.0f} CPU-s, {cost['wall_s']:.0f} s")
    return {**cost, "complete": True}


def train_to(sdir: Path, target: int, first: list[str], verbose: bool) -> str | None:
    """The main job in ``sdir`` up to iteration ``target`` (started with ``first``'s
    flags, resumed after); the params hash it printed (None: nothing to do)."""
    from agz_jax import checkpoint
    from experiments import selfplay

    step = checkpoint.latest_step(sdir)
    if step is not None and step >= target:
        return None
    argv = (first + ["--iterations", str(target)] if step is None else
            ["--out", str(sdir), "--resume", "--quiet", "--iterations", str(target)])
    with cpu_counted():
        text = call(selfplay.main, argv, verbose)
    found = re.search(r"params sha256 ([0-9a-f]{64})", text)
    return found.group(1) if found else None


def progress_at(sdir: Path, iteration: int) -> tuple[int, float, float]:
    """(self-play games, CPU seconds, phase wall seconds) of a run through ``iteration``."""
    from agz_jax import run

    rows = [r for r in run.MetricsLog(sdir, keep_through=iteration, write=False).read()
            if 1 <= r["iteration"] <= iteration]
    if len(rows) != iteration:
        raise RuntimeError(f"{sdir / 'metrics.jsonl'} has {len(rows)} rows for iterations "
                           f"1..{iteration}")
    missing = [r["iteration"] for r in rows if CPU_KEY not in r]
    if missing:
        raise RuntimeError(f"{sdir}: iterations {missing[:5]} logged no {CPU_KEY} (run outside "
                           "the ablation runner, or the main job no longer calls "
                           "agz_jax.run.run_iteration through the module)")
    games = int(sum(r["selfplay/games"] for r in rows))
    cpu = sum(r[CPU_KEY] for r in rows)
    wall = sum(v for r in rows for k, v in r.items() if k.startswith("time/") and k.endswith("_s"))
    return games, cpu, wall


def save_snapshot(plan, arm, seed: int, rdir: Path, iteration: int) -> Path:
    """The best net at ``iteration`` as a model directory ``RUN/snapshots/it<N>``."""
    import jax

    from agz_jax import models, run

    snap = rdir / "snapshots" / f"it{iteration}"
    if (snap / models.VARIABLES_FILE).exists():
        return snap
    config = plan.config(arm, seed)
    if iteration == 0 and arm.curriculum:
        variables = models.load(rdir / "curriculum").variables
    elif iteration == 0:
        variables = jax.device_get(run.init_state(run.build(config)).best)
    else:
        model = models.load(rdir / "selfplay")
        if model.step != iteration:
            raise RuntimeError(f"{rdir / 'selfplay'} is at iteration {model.step}, not "
                               f"{iteration}: its snapshot it{iteration} cannot be made")
        variables = model.variables
    tmp = snap.with_name(snap.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    models.save(tmp, config, variables)
    tmp.replace(snap)
    return snap


def train_run(plan, arm, seed: int, out: Path, index: dict, state: dict, verbose: bool,
              say) -> None:
    """One arm x seed: curriculum, segments, snapshots; the matches after each snapshot."""
    from agz_jax import ablation, sweep
    from experiments import selfplay

    entry = index_run(index, arm.name, seed)
    if entry["done"]:
        return
    rdir = run_dir(out, arm.name, seed)
    sdir = rdir / "selfplay"
    t0 = time.perf_counter()
    say(f"[{arm.name} seed {seed}] {plan.iterations(arm)} iterations, snapshots at "
        f"{plan.snapshots(arm)}")
    cpu0 = wall0 = 0.0
    first = main_job_flags(plan, arm, seed, sdir, plan.iterations(arm))
    if arm.curriculum:
        entry["curriculum"] = run_curriculum(plan, arm, seed, rdir / "curriculum", verbose, say)
        cpu0, wall0 = entry["curriculum"]["cpu_s"], entry["curriculum"]["wall_s"]
        first += ["--init-from", str(rdir / "curriculum")]
    first = strip_flag(first, "--iterations")  # set per segment (train_to)
    last = plan.snapshots(arm)[-1]
    params_hash = None
    for it in plan.snapshots(arm):
        if any(s["iteration"] == it for s in entry["snapshots"]):
            continue
        if it:
            params_hash = train_to(sdir, it, first, verbose)
            games, cpu, wall = progress_at(sdir, it)
        else:
            games, cpu, wall = 0, 0.0, 0.0
        snap = save_snapshot(plan, arm, seed, rdir, it)
        equivalents = arm.curriculum_games + games
        entry["snapshots"].append({
            "iteration": it, "selfplay_games": games, "games": equivalents,
            "cpu_s": cpu0 + cpu, "wall_s": wall0 + wall, "final": it == last,
            "model": str(snap.relative_to(out)),
            "player": ablation.player_name(arm.name, seed, equivalents)})
        entry["wall_s"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        write_json(out / "index.json", index)
        state["dirty"] = True
        say(f"  snapshot it{it}: {games} self-play games, {(cpu0 + cpu) / 3600:.3f} CPU-h")
        play_missing(plan, out, index, state, verbose, say)
    if params_hash is None:  # the last segment ran in an earlier session: ask the run
        text = call(selfplay.main, ["--out", str(sdir), "--resume", "--quiet"], verbose=False)
        params_hash = re.search(r"params sha256 ([0-9a-f]{64})", text).group(1)
    config = plan.config(arm, seed)
    setting = (("arm", arm.name), *arm.overrides.items())
    sweep.write_record(sweep.Run(setting, seed, config), sdir, params_hash, entry["wall_s"],
                       {"arm": arm.name, "cpu_s": entry["snapshots"][-1]["cpu_s"],
                        "curriculum": entry["curriculum"]})
    entry["done"] = True
    entry["wall_s"] += time.perf_counter() - t0
    write_json(out / "index.json", index)
    say(f"[{arm.name} seed {seed}] done: {entry['snapshots'][-1]['cpu_s'] / 3600:.2f} CPU-h, "
        f"{entry['wall_s'] / 3600:.2f} h wall with its matches")


def strip_flag(flags: list[str], name: str) -> list[str]:
    """``flags`` without ``name`` and its value."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
            continue
        if f == name:
            skip = True
            continue
        out.append(f)
    return out


# ------------------------------------------------------------------ matches


def spec_of(name: str, index: dict, out: Path, sims: int) -> str:
    for r in index["runs"]:
        for s in r["snapshots"]:
            if s["player"] == name:
                return f"mcts:{out / s['model']}:{sims}"
    return name  # a pool player's name is its spec


def progress_of(name: str, index: dict, out: Path) -> dict | None:
    for r in index["runs"]:
        for s in r["snapshots"]:
            if s["player"] == name:
                return {"run": str(out / s["model"]), "iteration": s["iteration"],
                        "games": s["games"], "hours": s["cpu_s"] / 3600}
    return None


class Matches:
    """Plays matches, reusing compiled programs: two snapshots whose configs differ
    only in seed and iterations play through the same compiled chunks
    (``arena.play_match_compact`` keeps its compilations per ``players``
    function), so the matches of an arm against one opponent compile once, not
    once per snapshot. At most ``keep`` pairs of player kinds are kept compiled
    (a long ladder that kept every match's ran out of memory maps); then all
    are dropped, as the ladder drops each match's."""

    def __init__(self, rules, keep: int = 12):
        self.rules, self.keep = rules, keep
        self.players: dict[tuple, object] = {}
        self.scans: dict[tuple, object] = {}

    def kind(self, spec: str) -> str:
        """What a player's compiled program depends on: a pool player's spec, or a
        snapshot's config (less seed and iterations) and simulations."""
        if not spec.startswith("mcts:"):
            return spec
        from agz_jax import models

        config = models.read_config(Path(spec.split(":")[1])).to_dict()
        config.pop("seed"), config.pop("iterations")
        return json.dumps([config, spec.rsplit(":", 1)[1]], sort_keys=True)

    def play(self, specs: list[str], seed: int, games: int, opening_plies: int, chunk: int):
        """(arena.MatchResult, wall seconds) of specs[0] against specs[1]."""
        import jax

        from agz_jax import arena
        from experiments import arena as arena_cli

        loaded = [arena_cli.make_player(arena_cli.load_spec(arena_cli.parse_spec(s, s), s),
                                        self.rules) for s in specs]
        pair = tuple(self.kind(s) for s in specs)
        if pair not in self.players:
            if len(self.players) >= self.keep:
                self.clear()
            a, b = loaded
            self.players[pair] = lambda v: (a.make(v[0]), b.make(v[1]))
        players = self.players[pair]
        variables = (loaded[0].variables, loaded[1].variables)
        t0 = time.perf_counter()
        key = jax.random.PRNGKey(seed)
        if chunk:
            result = arena.play_match_compact(self.rules, players, variables, key, games,
                                              opening_plies, chunk=chunk)
        else:
            result = jax.device_get(self.scan(pair, games, opening_plies)(key, variables))
        return result, time.perf_counter() - t0

    def scan(self, pair: tuple, games: int, opening_plies: int):
        """``chunk = 0``: the whole match in one jitted scan, compiled once per shape."""
        import jax

        from agz_jax import arena

        key = (pair, games, opening_plies)
        if key not in self.scans:
            players = self.players[pair]
            self.scans[key] = jax.jit(lambda k, v: arena.play_match(
                self.rules, *players(v), k, games, opening_plies))
        return self.scans[key]

    def clear(self) -> None:
        import jax

        from agz_jax import arena

        self.players.clear()
        self.scans.clear()
        arena._chunk_fn.cache_clear()
        jax.clear_caches()


def play_missing(plan, out: Path, index: dict, state: dict, verbose: bool, say) -> int:
    """Play every pairing the index calls for that the ledger lacks; the number played."""
    from agz_jax import ablation, arena
    from agz_jax.gomoku import Rules
    from experiments import ladder

    ev = plan.evaluation
    lines: list[dict] = state["lines"]
    done = {ladder.done_key(x["a"], x["b"], x["games"], x["seed"]) for x in lines}
    todo = []
    for a, b, games in ablation.pairings(plan, index):
        seed = ladder.pairing_seed(ev.seed, a, b)
        if ladder.done_key(a, b, games, seed) not in done:
            todo.append((a, b, games, seed))
    if not todo:
        return 0
    base = get_preset(plan.preset).replace(**plan.common)
    size, rule = base.game.size, base.game.rule
    if "matches" not in state:
        state["matches"] = Matches(Rules(size, rule))
    matches: Matches = state["matches"]
    ledger = out / "games.jsonl"
    todo = [(a, b, games, seed, [spec_of(n, index, out, ev.sims) for n in (a, b)])
            for a, b, games, seed in todo]
    # those of one pair of kinds together (they share compiled programs), in the
    # order the kinds first come
    kinds = [tuple(matches.kind(x) for x in t[4]) for t in todo]
    first = {k: i for i, k in reversed(list(enumerate(kinds)))}
    todo = [t for _, t in sorted(zip(kinds, todo, strict=True), key=lambda kt: first[kt[0]])]
    for i, (a, b, games, seed, specs) in enumerate(todo, 1):
        with contextlib.redirect_stderr(sys.stderr if verbose else io.StringIO()):
            result, wall = matches.play(specs, seed, games, ev.opening_plies, ev.chunk)
        s = arena.score(result)
        line = {"a": a, "b": b, "wins": s.wins, "draws": s.draws, "losses": s.losses,
                "games": s.games, "seed": seed, "ladder_seed": ev.seed, "size": size,
                "rule": rule, "openings": None, "opening_plies": ev.opening_plies,
                "specs": specs, "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "seconds": round(wall, 1)}
        progress = {n: p for n in (a, b) if (p := progress_of(n, index, out))}
        if progress:
            line["selfplay"] = progress
        ladder.append_line(ledger, json.dumps(line))
        lines.append(line)
        state["dirty"] = True
        say(f"    match {i}/{len(todo)}: {a} vs {b}: {s.wins}-{s.draws}-{s.losses} "
            f"({s.score:.2f}), {wall:.0f} s")
    return len(todo)


# ------------------------------------------------------------------ the state in git
#
# OUT is git-ignored and a session starts from a fresh clone, so ``save`` keeps
# in a committed directory just what the sweep needs to continue there:
# the sweep file as run, the index of the finished runs, the matches among
# pool players and finished runs' snapshots, each finished run's metrics and
# record, and the snapshot nets that matches still to come will play. It has
# OUT's layout, so ``status`` and ``report`` read it as they read OUT.
# ``run --state`` fills an empty OUT from it. An unfinished run is not kept:
# it restarts from its beginning, its snapshots' matches played again.

STATE_FILE = "STATE.json"  # the manifest: what the state holds, every file's sha256
STATE_FORMAT = 1
RUN_FILES = ("selfplay/metrics.jsonl", "selfplay/record.json", "curriculum/cost.json")
NET_FILES = ("config.json", "variables.msgpack")  # a model directory (agz_jax.models)


def complete_ledger(path: Path) -> list[dict]:
    """The ledger's complete lines: a runner appending while ``save`` reads may
    leave the last one half written."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = []
    for n, text in enumerate(data[:data.rfind(b"\n") + 1].decode().splitlines(), 1):
        if text.strip():
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path} line {n} is not JSON ({e}): fix or delete that "
                                  "line") from None
    return lines


def to_keep(plan, index: dict, lines: list[dict]) -> tuple[dict, list[dict], list[str]]:
    """What a state keeps of a sweep: the index of its finished runs, the matches
    between pool players and those runs' snapshots, and the snapshots later
    matches will play (model paths relative to OUT): those of a pairing not yet
    played, and, in a seed with runs to come, those at game equivalents where
    a run to come will snapshot (its peer matches)."""
    from agz_jax import ablation
    from experiments import ladder

    done = [r for r in index["runs"] if r["done"]]
    players = {s["player"]: s for r in done for s in r["snapshots"]}
    kept = [x for x in lines
            if all(n in players or ablation.POOL_PLAYER.match(n) for n in (x["a"], x["b"]))]
    kept_index = {**index, "runs": done}
    played = {ladder.done_key(x["a"], x["b"], x["games"], x["seed"]) for x in kept}
    ev = plan.evaluation
    need = {n for a, b, games in ablation.pairings(plan, kept_index)
            if ladder.done_key(a, b, games, ladder.pairing_seed(ev.seed, a, b)) not in played
            for n in (a, b)}
    finished = {(r["arm"], r["seed"]) for r in done}
    for r in done:
        to_come = [a for a in plan.arms if (a.name, r["seed"]) not in finished]
        at = {a.curriculum_games + it * plan.games_per_iteration(a)
              for a in to_come for it in plan.snapshots(a)}
        need |= {s["player"] for s in r["snapshots"] if s["games"] and s["games"] in at}
    nets = sorted(players[n]["model"] for n in need if n in players)
    return kept_index, kept, nets


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def finished_runs(index: dict) -> set[tuple[str, int]]:
    return {(r["arm"], r["seed"]) for r in index["runs"] if r["done"]}


def read_state(state: Path) -> dict:
    """The state's manifest; ConfigError (one line) if ``state`` holds none."""
    path = state / STATE_FILE
    if not path.exists():
        raise ConfigError(f"{state} holds no ablation state (no {STATE_FILE}); make one with "
                          f"python -m experiments.ablation save --out OUT --state {state}")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not valid JSON: {e}") from None
    if manifest.get("format") != STATE_FORMAT:
        raise ConfigError(f"{path} is format {manifest.get('format')!r}; this code reads "
                          f"format {STATE_FORMAT}")
    return manifest


def save_state(out: Path, state: Path) -> dict:
    """Write the state of the sweep in OUT into ``state`` (replacing it whole:
    a file it no longer needs goes); its manifest. Safe while a runner works
    in OUT: the index is read before the ledger, and both are written whole
    or appended by complete lines."""
    from agz_jax import ablation, ablation_report

    if not (out / "ablation.json").exists():
        raise ConfigError(f"{out} holds no ablation sweep (no ablation.json)")
    if out.resolve() == state.resolve():
        raise ConfigError(f"--state {state} is --out itself: give the committed state "
                          "directory")
    plan = ablation.parse(json.loads((out / "ablation.json").read_text()),
                          str(out / "ablation.json"))
    index = ablation_report.read_json(out / "index.json", {"name": plan.name, "runs": []})
    lines = complete_ledger(out / "games.jsonl")  # after the index: see to_keep
    if state.exists() and any(state.iterdir()):
        read_state(state)  # never replace a directory that is no state
        same_sweep(plan, state / "ablation.json", f"{state} holds",
                   "give another --state")
        lost = finished_runs(ablation_report.read_json(state / "index.json", {"runs": []}))
        lost -= finished_runs(index)
        if lost:
            arm, seed = sorted(lost)[0]
            raise ConfigError(
                f"{state} holds {len(lost)} finished run(s) that {out} lacks ({arm} seed "
                f"{seed}); saving would lose them: continue with run --state {state} first")
    kept_index, kept, nets = to_keep(plan, index, lines)
    files: dict[str, bytes | Path] = {
        "ablation.json": (out / "ablation.json").read_bytes(),
        "index.json": json.dumps(kept_index, indent=1, sort_keys=True).encode(),
        "games.jsonl": "".join(json.dumps(x) + "\n" for x in kept).encode()}
    for r in kept_index["runs"]:
        rdir = run_dir(Path(), r["arm"], r["seed"])
        for name in RUN_FILES:
            if (out / rdir / name).exists():
                files[str(rdir / name)] = out / rdir / name
    for model in nets:
        for name in NET_FILES:
            if not (out / model / name).exists():
                raise ConfigError(f"{out / model / name} is missing: a match still to play "
                                  "needs that net")
            files[f"{model}/{name}"] = out / model / name
    tmp = state.with_name(f".{state.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    digests = {}
    for rel, src in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, Path):
            shutil.copyfile(src, tmp / rel)
        else:
            (tmp / rel).write_bytes(src)
        digests[rel] = sha256(tmp / rel)
    unfinished = [r for r in index["runs"] if not r["done"]]
    manifest = {
        "format": STATE_FORMAT, "sweep": plan.name, "code": index.get("code", []),
        "saved": datetime.now(UTC).isoformat(timespec="seconds"),
        "finished": [f"{r['arm']} seed {r['seed']}" for r in kept_index["runs"]],
        "not_kept": [f"{r['arm']} seed {r['seed']} ({len(r['snapshots'])} snapshots; "
                     "restarts from its beginning)" for r in unfinished],
        "matches": len(kept), "matches_not_kept": len(lines) - len(kept), "nets": nets,
        "bytes": sum((tmp / rel).stat().st_size for rel in files), "files": digests}
    (tmp / STATE_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    old = state.with_name(f".{state.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if state.exists():
        state.replace(old)
    tmp.replace(state)
    shutil.rmtree(old, ignore_errors=True)
    return manifest


def check_state(plan, state: Path) -> dict:
    """The manifest of ``state``, a state of ``plan``'s sweep (seeds aside)."""
    manifest = read_state(state)
    same_sweep(plan, state / "ablation.json", f"--state {state} holds", "give the sweep "
               "file it was saved from, or another --state")
    return manifest


def restore_state(plan, state: Path, out: Path, say) -> None:
    """Fill OUT from ``state`` when OUT holds no sweep yet (ConfigError, one line,
    for a state of another sweep, a damaged one, or an OUT behind it)."""
    from agz_jax import ablation_report

    manifest = check_state(plan, state)
    theirs = finished_runs(ablation_report.read_json(state / "index.json", {"runs": []}))
    if (out / "index.json").exists():
        behind = theirs - finished_runs(ablation_report.read_json(out / "index.json", {"runs": []}))
        if behind:
            arm, seed = sorted(behind)[0]
            raise ConfigError(f"{out} already holds this sweep, without {len(behind)} "
                              f"finished run(s) of {state} ({arm} seed {seed}): delete {out} "
                              "to restore the state, or leave out --state")
        say(f"{out} already holds this sweep with every finished run of {state}: not "
            "restored")
        return
    for rel, digest in manifest["files"].items():
        if not (state / rel).exists() or sha256(state / rel) != digest:
            raise ConfigError(f"{state / rel} is missing or not the file the state saved "
                              f"(sha256 differs): check it out again (git checkout -- {state})")
    for rel in manifest["files"]:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(state / rel, out / rel)
    say(f"restored from {state} (saved {manifest['saved']}): {len(theirs)} finished runs, "
        f"{manifest['matches']} matches, {len(manifest['nets'])} nets")


# ------------------------------------------------------------------ reports


def regenerate_command(docs: Path) -> str:
    return f"python -m experiments.ablation report --docs {docs}"


def render(data: Path, target: Path, regenerate: str) -> dict:
    """The report of the data in ``data`` (ablation.json, index.json,
    games.jsonl), written into ``target``."""
    from agz_jax import ablation, ablation_report, rating
    from experiments import ladder

    missing = [f for f in DATA_FILES[:2] if not (data / f).exists()]
    if missing:
        raise ConfigError(f"{data} holds no ablation data ({', '.join(missing)} missing): "
                          "give --out SWEEP_DIR, or run the sweep first")
    plan = ablation.parse(json.loads((data / "ablation.json").read_text()),
                          str(data / "ablation.json"))
    index = json.loads((data / "index.json").read_text())
    ledger = data / "games.jsonl"
    lines = ladder.read_ledger(ledger)
    result = ablation_report.write_report(plan, index, lines, target, regenerate)
    if lines:
        fit = rating.fit(rating.Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"])
                         for x in lines)
        (target / "pool.md").write_text(ladder.table(fit, lines, ledger))
    return result


def redraw(plan, out: Path, index: dict, state: dict) -> None:
    """The report in OUT/report (the runner's view of the sweep so far), when
    anything was trained or played since it was last drawn."""
    if not state.pop("dirty", False) and (out / "report" / "summary.md").exists():
        return
    render(out, out / "report", f"python -m experiments.ablation report --out {out} "
                                "--docs DIR")


def code_version() -> str:
    """The commit this code is (a ``COMMIT`` file beside ``experiments/``, as a
    ``git archive`` copy run in the background has, else ``git rev-parse``),
    ``+dirty`` when src/ or experiments/ differ from it, ``unknown`` without git."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if (root / "COMMIT").exists():
        return (root / "COMMIT").read_text().strip()
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src",
                                "experiments"], check=True, capture_output=True,
                               text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def cmd_run(args) -> int:
    from agz_jax import ablation, ablation_report
    from agz_jax.cache import enable_compilation_cache
    from experiments import ladder

    plan = ablation.load(args.config)
    check(plan, args.out)
    if args.state is not None:
        check_state(plan, args.state)

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)

    with lock(args.out):
        if args.state is not None:
            restore_state(plan, args.state, args.out, say)
        write_json(args.out / "ablation.json", plan.source)
        index = ablation_report.read_json(args.out / "index.json", {"name": plan.name, "runs": []})
        version = code_version()
        if version not in index.setdefault("code", []):
            index["code"].append(version)
        lines = ladder.read_ledger(args.out / "games.jsonl")
        base = get_preset(plan.preset).replace(**plan.common)
        ladder.check_board(lines, args.out / "games.jsonl", base.game.size, base.game.rule)
        state = {"lines": lines}
        enable_compilation_cache()
        t0 = time.perf_counter()
        say(f"ablation {plan.name} in {args.out}: {len(plan.arms)} arms x "
            f"{len(plan.seeds)} seeds, {plan.games_per_arm} self-play games each")
        write_json(args.out / "index.json", index)
        play_missing(plan, args.out, index, state, args.verbose, say)
        for seed in plan.seeds:
            for arm in plan.arms:
                train_run(plan, arm, seed, args.out, index, state, args.verbose, say)
            play_missing(plan, args.out, index, state, args.verbose, say)
            redraw(plan, args.out, index, state)
        redraw(plan, args.out, index, state)
        say(f"all done ({time.perf_counter() - t0:.0f} s this session); report in "
            f"{args.out / 'report'}")
    return 0


def cmd_status(args) -> int:
    from agz_jax import ablation, ablation_report, sweep
    from experiments import ladder

    if not (args.out / "ablation.json").exists():
        raise ConfigError(f"{args.out} holds no ablation sweep (no ablation.json)")
    plan = ablation.parse(json.loads((args.out / "ablation.json").read_text()))
    index = ablation_report.read_json(args.out / "index.json", {"runs": []})
    lines = ladder.read_ledger(args.out / "games.jsonl")
    runs = {(r["arm"], r["seed"]): r for r in index["runs"]}
    done_walls = []
    print(f"{plan.name}: {len(plan.arms)} arms x {len(plan.seeds)} seeds in {args.out}")
    for seed in plan.seeds:
        for arm in plan.arms:
            r = runs.get((arm.name, seed))
            step = len(sweep.read_history(run_dir(args.out, arm.name, seed) / "selfplay"))
            snaps = len(r["snapshots"]) if r else 0
            state = "done" if r and r["done"] else ("running" if r else "waiting")
            if r and r["done"]:
                done_walls.append(r["wall_s"])
            print(f"  {arm.name:>14} seed {seed}: {state}, iteration {step}/"
                  f"{plan.iterations(arm)}, snapshots {snaps}/{len(plan.snapshots(arm))}"
                  + (f", {r['wall_s'] / 3600:.2f} h" if r else ""))
    wanted = ablation.pairings(plan, index)
    have = {frozenset((x["a"], x["b"])) for x in lines}
    print(f"matches: {len(lines)} played ({sum(x['games'] for x in lines)} games), "
          f"{sum(frozenset((a, b)) not in have for a, b, _ in wanted)} of those called for so "
          "far still to play")
    left = len(plan.arms) * len(plan.seeds) - len(done_walls)
    if done_walls and left:
        mean = sum(done_walls) / len(done_walls)
        print(f"{len(done_walls)} runs done at {mean / 3600:.2f} h each (wall, with their "
              f"matches): about {left * mean / 3600:.1f} h left for {left} runs")
    return 0


def cmd_save(args) -> int:
    manifest = save_state(args.out, args.state)
    print(f"saved {args.out} into {args.state}: {len(manifest['finished'])} finished runs, "
          f"{manifest['matches']} matches, {len(manifest['nets'])} nets, "
          f"{manifest['bytes'] / 1e6:.2f} MB"
          + (f"; not kept: {', '.join(manifest['not_kept'])}, with "
             f"{manifest['matches_not_kept']} matches" if manifest["not_kept"] else ""))
    return 0


def cmd_report(args) -> int:
    args.docs.mkdir(parents=True, exist_ok=True)
    if args.out is not None:
        if not (args.out / "ablation.json").exists():
            raise ConfigError(f"{args.out} holds no ablation sweep (no ablation.json)")
        for name in DATA_FILES:
            if (args.out / name).exists():
                shutil.copyfile(args.out / name, args.docs / name)
    result = render(args.docs, args.docs, regenerate_command(args.docs))
    print((args.docs / "summary.md").read_text())
    print(f"report in {args.docs}" + (" (PARTIAL)" if result["partial"] else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        return {"run": cmd_run, "status": cmd_status, "save": cmd_save,
                "report": cmd_report}[args.command](args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: usage error (already printed) or --help
        return int(e.code or 0)


if __name__ == "__main__":
    sys.exit(main())
