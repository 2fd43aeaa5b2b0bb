"""The ablation of AlphaGomoku's three claims: the sweep as data.

The paper claims, without an ablation, that Winning Value Decay helps, that
Double Networks help, and that its curriculum is a faster path to strength
than self-play from scratch. The sweep that measures them
(``python -m experiments.studies.ablation``, the runner) is described by a TOML file
(``experiments/studies/ablation.toml``), which ``load`` reads and validates
(ConfigError naming the field) before anything runs:

* ``title`` (optional): what the sweep measures, its report's title;
* ``preset``, ``common`` (dotted config overrides of every arm), ``seeds``;
* ``games_per_arm``: the budget, in self-play games, of every arm and seed.
  Self-play is lockstep (``selfplay.continuous = false``), so an iteration is
  exactly ``selfplay.num_games`` games and an arm runs
  ``games_per_arm / selfplay.num_games`` iterations;
* ``[[arms]]``: a name and config overrides; an arm with a ``curriculum``
  table first runs the curriculum (its stages and their overrides), and its
  ``curriculum_games``, the curriculum's cost in self-play-game equivalents
  fixed before the sweep (pre-registered; the TOML says how it was
  measured), come off its self-play budget;
* a top-level ``[curriculum]`` table and ``curriculum_games``: the
  curriculum of every arm that has no ``curriculum`` table of its own (a
  sweep whose arms all start from the curriculum);
* ``[[claims]]``: the pairs of arms to compare (the arm the paper says is the
  better one first);
* ``[evaluation]``: how strength is measured (below).

A run snapshots its best net every ``snapshot_every`` iterations, at its start
and at its end. Every match goes into one ledger in the rating ladder's
format (``experiments.play.ladder``); ``pairings`` lists them: the pool (random and
the mentor levels) among themselves, every snapshot against the ``target``
(``mentor:3``: the curves and the time to strength) and the ``anchors``
(cheap opponents that place a weak net on the Elo scale), every final net
against the whole pool and, within a seed, against the other arms' final
nets. ``agz_jax.studies.ablation_report.analyse`` fits one maximum-likelihood
Elo over the whole ledger (``agz_jax.base.rating``) and derives the report: per
arm the final nets' Elo across seeds (mean, std, the 95% t-interval of the
mean) and per seed; each
claim as the difference of two arms' mean Elo with a Welch 95% interval;
the CPU-hours until a run first scores ``target_score`` against the target
over ``target_games`` games. ``write_report`` writes ``summary.csv``,
``seeds.csv``, ``claims.csv``, ``summary.md``, ``curves.png`` and ``final.png``
(``agz_jax.studies.ablation_report``).

Pure Python (no JAX), as is the report: it can be redrawn from the committed
ledger and index alone.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from agz_jax.config import files
from agz_jax.config.presets import get_preset
from agz_jax.config.schema import Config, ConfigError
from agz_jax.studies import sweep

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]*$")  # an arm's name is a directory name
CURRICULUM_SECTIONS = ("basic", "imitate", "curriculum")
POOL_PLAYER = re.compile(r"^(random|mentor:[0-3])$")
TOP_KEYS = {"name", "preset", "seeds", "games_per_arm", "snapshot_every", "common", "arms",
            "claims", "evaluation", "notes", "title", "curriculum", "curriculum_games"}
TITLE = "Winning Value Decay, Double Networks, curriculum"
"""The report's title when the sweep file has no ``title``."""


def _err(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where} {msg}")


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str
    overrides: dict  # dotted config fields over the common base
    curriculum: dict  # dotted overrides of the curriculum run ({}: no curriculum)
    curriculum_games: int  # the curriculum's cost in self-play-game equivalents
    curriculum_reference: str | None = None  # the from-scratch arm whose CPU time a
    # self-play game converts the measured curriculum cost with (the report's check)


@dataclasses.dataclass(frozen=True)
class Claim:
    name: str
    better: str  # the arm the paper says is the better one
    worse: str


@dataclasses.dataclass(frozen=True)
class Evaluation:
    sims: int = 16  # a snapshot plays as mcts:SNAPSHOT:sims (its own search config)
    target: str = "mentor:3"
    target_games: int = 100
    target_score: float = 0.8
    anchors: tuple[str, ...] = ("random", "mentor:0")  # every snapshot plays these too
    anchor_games: int = 20
    pool: tuple[str, ...] = ("random", "mentor:0", "mentor:1", "mentor:2", "mentor:3")
    pool_games: int = 20  # pool pairs, and a final net against the pool
    peer_games: int = 20  # snapshots of one seed at equal game equivalents, arm against arm
    opening_plies: int = 2
    seed: int = 0  # the ladder seed: every match's seed derives from it and the names
    chunk: int = 8


@dataclasses.dataclass(frozen=True)
class Plan:
    name: str
    preset: str
    seeds: tuple[int, ...]
    games_per_arm: int
    snapshot_every: int
    common: dict
    arms: tuple[Arm, ...]
    claims: tuple[Claim, ...]
    evaluation: Evaluation
    source: dict  # the file as read

    @property
    def title(self) -> str:
        """What the sweep measures, the report's title."""
        return self.source.get("title", TITLE)

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise ConfigError(f"no arm named {name!r}; the arms are "
                          f"{', '.join(a.name for a in self.arms)}")

    def config(self, arm: Arm, seed: int) -> Config:
        """The main job's config of ``arm`` and ``seed`` (its whole self-play budget)."""
        base = get_preset(self.preset).replace(**self.common, **arm.overrides)
        return base.replace(seed=seed, iterations=self.iterations(arm, base))

    def curriculum_config(self, arm: Arm, seed: int) -> Config:
        return self.config(arm, seed).replace(**arm.curriculum)

    def games_per_iteration(self, arm: Arm) -> int:
        return get_preset(self.preset).replace(**self.common, **arm.overrides).selfplay.num_games

    def iterations(self, arm: Arm, base: Config | None = None) -> int:
        base = base or get_preset(self.preset).replace(**self.common, **arm.overrides)
        return (self.games_per_arm - arm.curriculum_games) // base.selfplay.num_games

    def snapshots(self, arm: Arm) -> list[int]:
        """The iterations whose best net is snapshotted: 0, the last, and those at
        every ``snapshot_every`` iterations' worth of games counted with the
        curriculum's equivalents, so that the arms' snapshots meet at equal
        game equivalents (a curriculum of 6 iterations' worth, every 12: 0, 6,
        18, 30, ...)."""
        n, gpi = self.iterations(arm), self.games_per_iteration(arm)
        step = self.snapshot_every * gpi
        its = {round((k * step - arm.curriculum_games) / gpi)
               for k in range(1, self.games_per_arm // step + 1)}
        return sorted({0, n} | {i for i in its if 1 <= i <= n})

    def without_seeds(self) -> dict:
        """The file minus its seeds: a sweep directory may gain seeds, nothing else."""
        return {k: v for k, v in self.source.items() if k != "seeds"}


def _dotted(table, where: str) -> dict:
    if not isinstance(table, dict):
        raise _err(where, f"must be a table of dotted config fields, got {table!r}")
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):  # TOML turns a.b = 1 into {a: {b: 1}}
            for sub, v in _dotted(value, where).items():
                out[f"{key}.{sub}"] = v
        else:
            out[key] = value
    return out


def _int(value, where: str, low: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise _err(where, f"must be an integer >= {low}, got {value!r}")
    return value


def parse(source: dict, where: str = "ablation") -> Plan:
    """A Plan from the TOML's dict; ConfigError naming the first bad field."""
    unknown = set(source) - TOP_KEYS
    if unknown:
        raise _err(f"{where}:", f"unknown key {sorted(unknown)[0]!r}; the keys are "
                   f"{', '.join(sorted(TOP_KEYS))}")
    for key in ("name", "preset", "seeds", "games_per_arm", "snapshot_every", "arms"):
        if key not in source:
            raise _err(f"{where}:", f"{key} is missing")
    name = source["name"]
    if not isinstance(name, str) or not NAME.match(name):
        raise _err(f"{where}: name", f"must be a simple name (letters, digits, _.=+-), "
                   f"got {name!r}")
    try:
        get_preset(source["preset"])  # ConfigError naming the presets
    except ConfigError as e:
        raise _err(f"{where}: preset:", str(e)) from None
    seeds = source["seeds"]
    if isinstance(seeds, str):
        try:
            seeds = sweep.parse_seeds(seeds)
        except ConfigError:
            seeds = None  # the message below names the file and the key
    if (not isinstance(seeds, list) or not seeds
            or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds)
            or len(set(seeds)) != len(seeds)):
        raise _err(f"{where}: seeds", f"must be distinct non-negative integers or a range "
                   f"like \"0-3\", got {source['seeds']!r}")
    if not isinstance(source.get("title", TITLE), str):
        raise _err(f"{where}: title", f"must be a string, got {source['title']!r}")
    games = _int(source["games_per_arm"], f"{where}: games_per_arm")
    every = _int(source["snapshot_every"], f"{where}: snapshot_every")
    common = _dotted(source.get("common", {}), f"{where}: common")
    for key in ("seed", "iterations"):
        if key in common:
            raise _err(f"{where}: common", f"must not set {key} (the sweep sets it)")
    try:
        base = files.check(get_preset(source["preset"]).replace(**common))
    except ConfigError as e:
        raise _err(f"{where}: common:", str(e)) from None
    if base.selfplay.continuous:
        raise _err(f"{where}: common", "must keep selfplay.continuous = false: a lockstep "
                   "iteration is exactly selfplay.num_games games, so every arm plays its "
                   "budget")

    arms_src = source["arms"]
    if not isinstance(arms_src, list) or not arms_src:
        raise _err(f"{where}: arms", "must be a non-empty list of [[arms]] tables")
    arms = []
    for i, a in enumerate(arms_src):
        at = f"{where}: arms[{i}]"
        if not isinstance(a, dict):
            raise _err(at, "must be a table")
        bad = set(a) - {"name", "set", "curriculum", "curriculum_games", "curriculum_reference"}
        if bad:
            raise _err(at, f"has an unknown key {sorted(bad)[0]!r} (name, set, curriculum, "
                       "curriculum_games, curriculum_reference)")
        arm_name = a.get("name")
        if not isinstance(arm_name, str) or not NAME.match(arm_name):
            raise _err(f"{at}.name", f"must be a simple name (letters, digits, _.=+-), got "
                       f"{arm_name!r}")
        if arm_name in {x.name for x in arms}:
            raise _err(f"{at}.name", f"{arm_name!r} is given twice")
        overrides = _dotted(a.get("set", {}), f"{at}.set")
        for key in ("seed", "iterations"):
            if key in overrides:
                raise _err(f"{at}.set", f"must not set {key} (the sweep sets it)")
        shared = "curriculum" not in a and "curriculum" in source
        curriculum = (_dotted(source["curriculum"], f"{where}: curriculum") if shared
                      else _dotted(a.get("curriculum", {}), f"{at}.curriculum"))
        for key in curriculum:
            if key.split(".")[0] not in CURRICULUM_SECTIONS:
                raise _err(f"{at}.curriculum", f"sets {key!r}; it may set only "
                           f"{', '.join(s + '.*' for s in CURRICULUM_SECTIONS)} (the rest of "
                           "the config is the arm's)")
        cgames = a.get("curriculum_games", source.get("curriculum_games", 0) if shared else 0)
        if curriculum:
            cgames = _int(cgames, f"{at}.curriculum_games", low=0)
        elif cgames:
            raise _err(f"{at}.curriculum_games", "needs a curriculum table")
        reference = a.get("curriculum_reference")
        if reference is not None and not curriculum:
            raise _err(f"{at}.curriculum_reference", "needs a curriculum table")
        arm = Arm(arm_name, overrides, curriculum, cgames, reference)
        try:
            arm_base = files.check(base.replace(**overrides))
        except ConfigError as e:
            raise _err(f"{at}.set:", str(e)) from None
        gpi = arm_base.selfplay.num_games
        if arm_base.selfplay.continuous:
            raise _err(f"{at}.set", "must keep selfplay.continuous = false (lockstep)")
        if not curriculum and games % gpi:
            raise _err(f"{where}: games_per_arm", f"({games}) must be a multiple of "
                       f"selfplay.num_games ({gpi}) of arm {arm_name!r}")
        if (games - cgames) // gpi < 1:
            raise _err(f"{at}.curriculum_games", f"({cgames}) leaves less than one self-play "
                       f"iteration ({gpi} games) of the {games} games")
        if curriculum:
            try:
                stages = arm_base.replace(**curriculum).curriculum.stages if (
                    "curriculum.stages" in curriculum) else None
            except ConfigError as e:
                raise _err(f"{at}.curriculum (arm {arm_name!r}):", str(e)) from None
            if stages is None:
                raise _err(f"{at}.curriculum", "must name its stages (curriculum.stages = "
                           "\"basic,imitate\")")
            if "selfplay" in stages:
                raise _err(f"{at}.curriculum", "curriculum.stages must not include selfplay "
                           "(the arm's self-play is its main-job run)")
            try:
                arm_base.replace(**curriculum)
            except ConfigError as e:
                raise _err(f"{at}.curriculum:", str(e)) from None
        arms.append(arm)

    claims = []
    names = {a.name for a in arms}
    for i, c in enumerate(source.get("claims", [])):
        at = f"{where}: claims[{i}]"
        if not isinstance(c, dict) or set(c) != {"name", "better", "worse"}:
            raise _err(at, "must be a table with exactly name, better and worse")
        for k in ("better", "worse"):
            if c[k] not in names:
                raise _err(f"{at}.{k}", f"names no arm: {c[k]!r} (arms: {', '.join(names)})")
        if c["better"] == c["worse"]:
            raise _err(at, "compares an arm with itself")
        claims.append(Claim(str(c["name"]), c["better"], c["worse"]))
    for i, a in enumerate(arms):
        ref = a.curriculum_reference
        if ref is not None and (ref not in names or plan_arm(arms, ref).curriculum):
            raise _err(f"{where}: arms[{i}].curriculum_reference", f"must name an arm without "
                       f"a curriculum, got {ref!r}")

    ev_src = source.get("evaluation", {})
    if not isinstance(ev_src, dict):
        raise _err(f"{where}: evaluation", "must be a table")
    fields = {f.name: f for f in dataclasses.fields(Evaluation)}
    bad = set(ev_src) - set(fields)
    if bad:
        raise _err(f"{where}: evaluation", f"has an unknown key {sorted(bad)[0]!r}")
    ev = dataclasses.replace(Evaluation(), **{
        k: tuple(v) if isinstance(v, list) else v for k, v in ev_src.items()})
    for k in ("sims", "target_games", "anchor_games", "pool_games", "peer_games"):
        _int(getattr(ev, k), f"{where}: evaluation.{k}", low=2 if k != "sims" else 1)
        if k != "sims" and getattr(ev, k) % 2:
            raise _err(f"{where}: evaluation.{k}", f"must be even (colours alternate), got "
                       f"{getattr(ev, k)}")
    for k in ("opening_plies", "seed", "chunk"):
        _int(getattr(ev, k), f"{where}: evaluation.{k}", low=0)
    if not (isinstance(ev.target_score, (int, float)) and 0 < ev.target_score <= 1):
        raise _err(f"{where}: evaluation.target_score", f"must be in (0, 1], got "
                   f"{ev.target_score!r}")
    for k in ("anchors", "pool"):
        if not isinstance(getattr(ev, k), tuple):
            raise _err(f"{where}: evaluation.{k}", "must be a list of players")
    for p in (ev.target, *ev.anchors, *ev.pool):
        if not isinstance(p, str) or not POOL_PLAYER.match(p):
            raise _err(f"{where}: evaluation", f"names player {p!r}; the fixed players are "
                       "random and mentor:0..3")
    if ev.target not in ev.pool:
        raise _err(f"{where}: evaluation.target", f"{ev.target!r} must be in the pool")
    if base.game.rule != "freestyle":
        raise _err(f"{where}: common", "game.rule must be freestyle (the mentor's)")
    return Plan(name, source["preset"], tuple(seeds), games, every, common, tuple(arms),
                tuple(claims), ev, source)


def plan_arm(arms, name: str) -> Arm:
    return next(a for a in arms if a.name == name)


def load(path: str | Path) -> Plan:
    path = Path(path)
    try:
        source = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such sweep file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None
    return parse(source, str(path))


# ------------------------------------------------------------------ players and matches


def player_name(arm: str, seed: int, games: int) -> str:
    """A snapshot's name in the ledger: ``ARM/sSEED@gGAMES`` (GAMES: the self-play
    game equivalents spent so far, the curriculum's included), which the
    ladder's plot reads as one series per run."""
    return f"{arm}/s{seed}@g{games}"


def pairings(plan: Plan, index: dict) -> list[tuple[str, str, int]]:
    """Every match the index's snapshots call for, as (a, b, games), in play
    order, each unordered pair once: the pool's pairs; every snapshot against
    the target and the anchors; every final net against the whole pool; and,
    within a seed, the snapshots of different arms at equal game equivalents
    and with self-play games (a start of several arms is not their difference)
    against each other, net against net, as soon as both exist."""
    ev = plan.evaluation
    out: list[tuple[str, str, int]] = []
    seen: set[frozenset] = set()

    def add(a: str, b: str, games: int):
        key = frozenset((a, b))
        if a != b and key not in seen:
            seen.add(key)
            out.append((a, b, games))

    pool = list(dict.fromkeys(ev.pool))
    for i, a in enumerate(pool):
        for b in pool[i + 1:]:
            add(a, b, ev.pool_games)
    level: dict[tuple[int, int], list[str]] = {}  # (seed, games) -> the arms' snapshots
    for r in index["runs"]:
        for s in r["snapshots"]:
            add(s["player"], ev.target, ev.target_games)
            for anchor in ev.anchors:
                add(s["player"], anchor, ev.anchor_games)
            if s["final"]:
                for p in pool:
                    add(s["player"], p, ev.pool_games)
            if s["selfplay_games"]:  # arms that share a start differ only after it
                level.setdefault((r["seed"], s["games"]), []).append(s["player"])
    for names in level.values():
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                add(a, b, ev.peer_games)
    return out


# ------------------------------------------------------------------ statistics
