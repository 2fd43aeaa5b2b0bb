"""The ablation sweep's output directory, and its state kept in git.

``run_dir`` is where a run lives in OUT; ``same_sweep`` refuses a directory of
another sweep. The runner's OUT is git-ignored and a session starts from a
fresh clone, so ``save_state`` keeps in a committed directory what the sweep
needs to continue there, and ``restore_state`` fills an empty OUT from it
(``python -m experiments.studies.ablation save`` and ``run --state``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from agz_jax.config.schema import ConfigError


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


def run_dir(out: Path, arm: str, seed: int) -> Path:
    return out / "runs" / arm / f"seed_{seed}"


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
NET_FILES = ("config.json", "variables.msgpack")  # a model directory (agz_jax.nets.models)


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
    from agz_jax.studies import ablation
    from agz_jax.studies.ledger import done_key, pairing_seed

    done = [r for r in index["runs"] if r["done"]]
    players = {s["player"]: s for r in done for s in r["snapshots"]}
    kept = [x for x in lines
            if all(n in players or ablation.POOL_PLAYER.match(n) for n in (x["a"], x["b"]))]
    kept_index = {**index, "runs": done}
    played = {done_key(x["a"], x["b"], x["games"], x["seed"]) for x in kept}
    ev = plan.evaluation
    need = {n for a, b, games in ablation.pairings(plan, kept_index)
            if done_key(a, b, games, pairing_seed(ev.seed, a, b)) not in played
            for n in (a, b)}
    finished = {(r["arm"], r["seed"]) for r in done}
    for r in done:
        to_come = [a for a in plan.arms if (a.name, r["seed"]) not in finished]
        at = {a.curriculum_games + it * plan.games_per_iteration(a)
              for a in to_come for it in plan.snapshots(a)}
        need |= {s["player"] for s in r["snapshots"]
                 if s["selfplay_games"] and s["games"] in at}  # as ablation.pairings
    nets = sorted(players[n]["model"] for n in need if n in players)
    return kept_index, kept, nets


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def finished_runs(index: dict) -> set[tuple[str, int]]:
    return {(r["arm"], r["seed"]) for r in index["runs"] if r["done"]}


def read_state(state: Path) -> dict:
    """The state's manifest; ConfigError (one line) if ``state`` holds none."""
    path = state / STATE_FILE
    if not path.exists():
        raise ConfigError(f"{state} holds no ablation state (no {STATE_FILE}); make one with "
                          f"python -m experiments.studies.ablation save --out OUT --state {state}")
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
    from agz_jax.studies import ablation, ablation_report

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
    from agz_jax.studies import ablation_report

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

