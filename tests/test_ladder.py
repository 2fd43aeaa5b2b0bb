"""The rating ladder: the Elo fit against hand computations and a brute-force
maximum, the ledger (resume, bad lines), and the CLI end to end on 7x7."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from agz_jax.base import rating
from agz_jax.base.rating import ELO_PER_NAT, Match
from agz_jax.config.schema import ConfigError
from agz_jax.nets import models
from agz_jax.play import players
from agz_jax.studies import ladder, ladder_report
from agz_jax.studies import ledger as ladder_ledger
from experiments.play import ladder as ladder_cli

Z = 1.959963984540054


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("AGZ_JAX_NO_CACHE", "1")


def by_name(fit):
    return {r.player: r for r in fit.ratings}


def test_two_players_match_the_closed_form():
    """One match: the Elo difference is 400 log10(p / (1 - p)) for x's score p
    (draws half), and se = (400 / ln 10) / sqrt(n p (1 - p)), the inverse square
    root of the Fisher information n p (1 - p) on the natural scale."""
    # random's view: 5 wins, 4 draws, 11 losses; x scores (11 + 2) / 20 = 0.65
    fit = rating.fit([Match("random", "x", 5, 4, 11)])
    assert fit.anchor == "random"
    r = by_name(fit)
    p, n = 0.65, 20
    assert r["x"].elo == pytest.approx(400 * math.log10(p / (1 - p)), abs=1e-6)
    se = 400 / math.log(10) / math.sqrt(n * p * (1 - p))
    assert r["x"].se == pytest.approx(se, rel=1e-6)
    assert (r["x"].low, r["x"].high) == pytest.approx((r["x"].elo - Z * se, r["x"].elo + Z * se))
    assert (r["random"].elo, r["random"].se) == (0.0, 0.0)
    assert (r["x"].games, r["x"].score, r["random"].score) == (20, pytest.approx(0.65),
                                                                pytest.approx(0.35))
    assert not r["x"].prior and [q.player for q in fit.ratings] == ["x", "random"]


def test_chain_of_three_by_hand_and_the_first_player_anchors():
    """a-b and b-c only: each difference is its own match's closed form. Without
    random, the ledger's first player is the anchor."""
    fit = rating.fit([Match("a", "b", 3, 2, 5), Match("c", "b", 7, 0, 1)])
    assert fit.anchor == "a"
    r = by_name(fit)
    b = 400 * math.log10(6 / 4)  # b scored 6 of 10 against a
    assert r["b"].elo == pytest.approx(b, abs=1e-6)
    assert r["c"].elo == pytest.approx(b + 400 * math.log10(7 / 1), abs=1e-6)
    # c's variance adds the two matches' (independent) variances
    var = (ELO_PER_NAT ** 2) * (1 / (10 * 0.4 * 0.6) + 1 / (8 * (7 / 8) * (1 / 8)))
    assert r["c"].se == pytest.approx(math.sqrt(var), rel=1e-6)


def brute_force_elo(matches, players, span=700.0):
    """The likelihood maximised over a grid (players[0] fixed at 0), refined
    twice around the best point: an independent check of Newton's method."""
    def ll(r):  # r: {player: elo array}, per game, draws half a win
        total = 0.0
        for m in matches:
            p = 1 / (1 + 10 ** ((r[m.b] - r[m.a]) / 400))
            total = total + (m.wins + m.draws / 2) * np.log(p) + (
                m.losses + m.draws / 2) * np.log(1 - p)
        return total

    centre, step = np.zeros(2), 5.0
    for half_width in (span, 10.0, 0.2):
        axis = np.arange(-half_width, half_width + step / 2, step)
        g1, g2 = np.meshgrid(centre[0] + axis, centre[1] + axis, indexing="ij")
        values = ll({players[0]: 0.0, players[1]: g1, players[2]: g2})
        i, j = np.unravel_index(np.argmax(values), values.shape)
        centre, step = np.array([g1[i, j], g2[i, j]]), step / 50
    return dict(zip(players[1:], centre, strict=True))


def test_three_players_in_a_cycle_match_a_brute_force_maximum():
    matches = [Match("random", "b", 2, 1, 7), Match("b", "c", 4, 3, 3),
               Match("c", "random", 6, 2, 2), Match("random", "b", 1, 0, 3)]
    fit = rating.fit(matches)
    want = brute_force_elo(matches, ["random", "b", "c"])
    r = by_name(fit)
    for p in ("b", "c"):
        assert r[p].elo == pytest.approx(want[p], abs=0.05)
    assert not any(x.prior for x in fit.ratings)


def test_one_sided_matches_between_groups_get_one_virtual_draw():
    """x won every game: no finite maximum; one virtual draw makes it 10.5 of 11,
    so 400 log10(21). In a chain random < m0 < m1 where only the 20-0 match of
    m0 against random is one-sided, that match alone gets the draw: m0 is
    400 log10(41) and m1 is m0 plus its own match's closed form (a draw per
    *player* against random would pull m1, and through it m0, down)."""
    r = by_name(rating.fit([Match("x", "random", 10, 0, 0)]))
    assert r["x"].prior and not r["random"].prior
    assert r["x"].elo == pytest.approx(400 * math.log10(21), abs=1e-6)
    r = by_name(rating.fit([Match("m0", "random", 20, 0, 0), Match("m1", "m0", 6, 2, 2)]))
    assert r["m0"].elo == pytest.approx(400 * math.log10(41), abs=1e-6)
    assert r["m1"].elo - r["m0"].elo == pytest.approx(400 * math.log10(7 / 3), abs=1e-6)
    assert r["m0"].prior and r["m1"].prior
    # a group that only ever beat random (y, z) is flagged; w, who lost a game
    # to random, is not; u and v never met random's side: a draw against random
    fit = rating.fit([Match("y", "random", 6, 0, 0), Match("z", "random", 6, 0, 0),
                      Match("y", "z", 5, 2, 3), Match("w", "random", 3, 2, 1),
                      Match("u", "v", 2, 0, 2)])
    r = by_name(fit)
    assert {p for p, x in r.items() if x.prior} == {"y", "z", "u", "v"}
    assert r["y"].elo > r["z"].elo > r["w"].elo > 0
    assert r["u"].elo == pytest.approx(r["v"].elo) and abs(r["u"].elo) < 1e-6
    assert all(math.isfinite(x.high) for x in fit.ratings)


def test_the_pairing_plan_and_its_seeds():
    s = ladder_ledger.pairing_seed
    assert s(0, "a", "b") == s(0, "b", "a") != s(1, "a", "b")
    assert s(0, "a", "b") != s(0, "a", "c") and 0 <= s(0, "a", "b") < 2 ** 31
    pool, cands = ["random", "mentor:0"], ["x", "y"]
    default = ladder_ledger.plan(cands, pool, False, 7, 10, set())
    assert [(p.a, p.b) for p in default] == [("x", "random"), ("x", "mentor:0"),
                                            ("y", "random"), ("y", "mentor:0")]
    assert all(p.seed == s(7, p.a, p.b) for p in default)
    every = ladder_ledger.plan(cands, pool, True, 7, 10, set())
    assert len(every) == 6 and ("random", "mentor:0") in [(p.a, p.b) for p in every]
    done = {ladder_ledger.done_key("random", "x", 10, s(7, "x", "random"))}  # either order
    assert [(p.a, p.b) for p in ladder_ledger.plan(cands, pool, False, 7, 10, done)][0] == (
        "x", "mentor:0")
    # the same pairing with other games or another seed is not done
    assert len(ladder_ledger.plan(cands, pool, False, 7, 12, done)) == 4
    assert len(ladder_ledger.plan(cands, pool, False, 8, 10, done)) == 4


def test_appending_to_a_ledger_whose_last_line_is_open(tmp_path):
    path = tmp_path / "games.jsonl"
    ladder_ledger.append_line(path, '{"n": 1}')
    path.write_text(path.read_text().rstrip("\n"))  # a hand edit dropped the newline
    ladder_ledger.append_line(path, '{"n": 2}')
    assert path.read_text() == '{"n": 1}\n{"n": 2}\n'


def ladder_args(tmp_path, *extra):
    return ["--no-default-pool", "--pool", "random", "--candidate", "mentor:0",
            "--size", "7", "--games", "4", "--ledger", str(tmp_path / "games.jsonl"), *extra]


@pytest.mark.long
def test_cli_end_to_end_and_resume(tmp_path, capsys, monkeypatch):
    """7x7, mentor:0 against random: the ledger line, the table (the fit of the
    ledger), the PNG; a second run plays nothing; --table-only redraws."""
    assert ladder_cli.main(ladder_args(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "1 matches played" in out
    [line] = ladder_ledger.read_ledger(tmp_path / "games.jsonl")
    assert (line["a"], line["b"], line["games"], line["size"]) == ("mentor:0", "random", 4, 7)
    assert line["seed"] == ladder_ledger.pairing_seed(0, "mentor:0", "random")
    assert line["wins"] + line["draws"] + line["losses"] == 4 and line["wins"] >= 3
    assert line["sims"] == [None, None] and line["seconds"] > 0 and line["date"]
    fit = rating.fit([Match("mentor:0", "random", line["wins"], line["draws"], line["losses"])])
    table = (tmp_path / "ladder.md").read_text()
    top = fit.ratings[0]
    assert f"| 1 | `{top.player}` | {top.elo:.0f}" in table
    assert f"{top.low:.0f} .. {top.high:.0f} | 4 |" in table and "anchored at `random` = 0" in table
    png = (tmp_path / "ladder.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000

    def no_match(*args, **kwargs):
        raise AssertionError("a finished pairing was played again")

    monkeypatch.setattr(players, "play", no_match)
    assert ladder_cli.main(ladder_args(tmp_path)) == 0
    assert "0 matches played" in capsys.readouterr().out
    assert len(ladder_ledger.read_ledger(tmp_path / "games.jsonl")) == 1
    (tmp_path / "ladder.md").unlink()
    (tmp_path / "ladder.png").unlink()
    assert ladder_cli.main(["--table-only", "--ledger", str(tmp_path / "games.jsonl")]) == 0
    assert (tmp_path / "ladder.md").read_text() == table
    assert (tmp_path / "ladder.png").exists()


def test_a_run_directory_is_named_by_its_checkpoint(tmp_path, monkeypatch):
    """A self-play run directory's net is its latest checkpoint's, named SPEC@itN,
    with the run's self-play games and hours through iteration N."""
    from test_arena_cli import tiny_run

    run_dir = tiny_run(tmp_path / "run")
    assert models.load(run_dir).step == 0
    rows = [{"iteration": 0, "time/eval_s": 36.0},
            {"iteration": 1, "selfplay/games": 8.0, "time/selfplay_s": 3600.0,
             "time/train_s": 720.0},
            {"iteration": 2, "selfplay/games": 8.0, "time/selfplay_s": 9000.0}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert ladder_ledger.selfplay_progress(run_dir, 1) == {
        "run": str(run_dir), "iteration": 1, "games": 8.0, "hours": pytest.approx(1.21)}
    # Lines that time the whole iteration count it, checkpoint included, not the phases.
    rows[1].update({"time/iteration_s": 5400.0, "time/previous_checkpoint_s": 360.0})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert ladder_ledger.selfplay_progress(run_dir, 1)["hours"] == pytest.approx(1.61)
    # Under the working directory the ledger keeps the path relative to it.
    with monkeypatch.context() as m:
        m.chdir(tmp_path)
        assert ladder_ledger.selfplay_progress(run_dir, 1)["run"] == "run"
        assert ladder_ledger.shown(tmp_path.parent) == str(tmp_path.parent)
    spec = players.load_spec(players.parse_spec(f"policy:{run_dir}", "--candidate"),
                             "--candidate")
    from agz_jax.game.gomoku import Rules

    found, names = ladder.load_players([("--candidate", spec)], Rules(5, "freestyle"))
    assert names == [f"policy:{run_dir}@it0"]
    assert found[names[0]].progress == {"run": str(run_dir), "iteration": 0, "games": 0,
                                          "hours": pytest.approx(0.01)}


def test_the_plot_draws_checkpoints_against_progress(tmp_path):
    """Checkpoints with self-play progress in the ledger form a series per run;
    the rest are reference lines; --table-only writes both files."""
    def line(a, b, w, d, lost, **extra):
        return {"a": a, "b": b, "wins": w, "draws": d, "losses": lost, "games": w + d + lost,
                "seed": 1, "size": 7, "rule": "freestyle", **extra}

    prog = {"mcts:r:8@it1": {"run": "r", "iteration": 1, "games": 100, "hours": 0.5},
            "mcts:r:8@it2": {"run": "r", "iteration": 2, "games": 200, "hours": 1.5},
            "mcts:c:8@g835": {"run": "c", "iteration": 9, "games": 835, "hours": 0.7}}
    lines = [line("mcts:r:8@it1", "random", 7, 1, 2, selfplay={"mcts:r:8@it1":
                                                               prog["mcts:r:8@it1"]}),
             line("mcts:r:8@it2", "mentor:0", 5, 0, 5, selfplay={"mcts:r:8@it2":
                                                                 prog["mcts:r:8@it2"]}),
             line("mcts:c:8@g835", "mentor:0", 6, 0, 4, selfplay={"mcts:c:8@g835":
                                                                  prog["mcts:c:8@g835"]}),
             line("mentor:0", "random", 8, 1, 1)]
    ledger_path = tmp_path / "games.jsonl"
    ledger_path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    fit = rating.fit(Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"]) for x in lines)
    series, refs = ladder_report.plot_series(fit, lines)
    assert sorted(series) == ["mcts:c:8", "mcts:r:8"]  # a campaign model's series too
    assert sorted((r.player, p["games"]) for r, p in series["mcts:r:8"]) == [
        ("mcts:r:8@it1", 100), ("mcts:r:8@it2", 200)]
    assert sorted(r.player for r in refs) == ["mentor:0", "random"]
    assert ladder_cli.main(["--table-only", "--ledger", str(ledger_path)]) == 0
    assert (tmp_path / "ladder.png").exists() and "`mcts:r:8@it2`" in (
        tmp_path / "ladder.md").read_text()


def one_line_error(capsys, argv, problem):
    assert ladder_cli.main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert problem in err, (argv, err)


def test_bad_input_is_one_line(tmp_path, capsys):
    ledger_path = tmp_path / "games.jsonl"
    rnd = ["--no-default-pool", "--pool", "random", "--size", "7", "--ledger", str(ledger_path)]
    one_line_error(capsys, [*rnd, "--candidate", "alphabeta"], "unknown player kind")
    one_line_error(capsys, [*rnd, "--candidate", f"policy:{tmp_path / 'nope'}"], "not found")
    one_line_error(capsys, [*rnd, "--candidate", str(tmp_path)],
                   f"say how it plays, mcts:{tmp_path}:400 or policy:{tmp_path}")
    one_line_error(capsys, rnd, "nothing to play")
    one_line_error(capsys, ["--no-default-pool", "--candidate", "random"], "pool is empty")
    one_line_error(capsys, [*rnd, "--candidate", "mentor:0", "--games", "3"], "must be even")
    one_line_error(capsys, ["--table-only", "--ledger", str(ledger_path)], "not found")
    # a directory for the ledger, read or written
    for argv in (["--table-only"], ["--no-default-pool", "--pool", "random",
                                    "--candidate", "mentor:0"]):
        one_line_error(capsys, [*argv, "--ledger", str(tmp_path)],
                       f"{tmp_path} is a directory, not a ledger file; name the ledger file, "
                       f"e.g. {tmp_path / 'games.jsonl'}")
    # the ledger under a file: refused before anything is played
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    one_line_error(capsys, [*rnd[:-1], str(a_file / "games.jsonl"), "--candidate", "mentor:0",
                            "--games", "2"], "cannot make its directory")
    # one player alone: nothing to play, and said so (not "drop --table-only")
    for argv in ([*rnd, "--candidate", "random"], [*rnd, "--pairs", "all"],
                 [*rnd, "--candidate", "random", "--pool", "random"]):
        one_line_error(capsys, argv, "nothing to play: random is the only player")
    assert not ledger_path.exists()
    good = {"a": "mentor:0", "b": "random", "wins": 1, "draws": 0, "losses": 1, "games": 2,
            "seed": 3, "size": 7, "rule": "freestyle"}
    for bad, problem in (("{not json", "line 2 is not JSON"),
                         (json.dumps([1]), "line 2 is not a JSON object"),
                         (json.dumps({**good, "wins": "1"}), "line 2: field 'wins'"),
                         (json.dumps({k: v for k, v in good.items() if k != "seed"}),
                          "line 2: field 'seed'"),
                         (json.dumps({**good, "games": 3}), "line 2: wins + draws + losses"),
                         (json.dumps({**good, "b": "mentor:0"}), "line 2: a and b")):
        ledger_path.write_text(json.dumps(good) + "\n" + bad + "\n")
        one_line_error(capsys, ["--table-only", "--ledger", str(ledger_path)], problem)
    # a ledger of another board is refused before anything is played
    ledger_path.write_text(json.dumps({**good, "size": 9}) + "\n")
    one_line_error(capsys, [*rnd, "--candidate", "mentor:0"],
                   "is 9x9 freestyle, not 7x7 freestyle")


def test_the_protocol_comes_from_the_ledger_and_another_is_refused(tmp_path, capsys):
    """Left out, --seed, --openings and --opening-plies are the ledger's (a
    ladder run with the arena's defaults once added 14 matches of another
    protocol to the shipped ledger); given otherwise, refused before playing."""
    path = tmp_path / "games.jsonl"
    line = {"a": "mentor:0", "b": "random", "wins": 2, "draws": 0, "losses": 0, "games": 2,
            "seed": 3, "size": 7, "rule": "freestyle", "ladder_seed": 1,
            "openings": "balanced15", "opening_plies": 0}
    lines = [line, {**line, "a": "mentor:1"}]

    def resolved(*flags, ledger=lines):
        args = ladder_cli.parse(["--candidate", "random", *flags])
        ladder_ledger.resolve_protocol(args, ledger, path)
        return args.seed, args.openings, args.opening_plies

    assert resolved() == (1, "balanced15", 0)
    assert resolved("--games", "40") == (1, "balanced15", 0)  # more games: same protocol
    assert resolved("--seed", "1", "--opening-plies", "0") == (1, "balanced15", 0)
    assert resolved(ledger=[]) == (0, None, 2)  # a new ledger: the arena's defaults
    assert resolved("--openings", "balanced15", ledger=[]) == (0, "balanced15", 2)
    for flags, asked in ((["--seed", "0"], "--seed 0 --openings balanced15 --opening-plies 0"),
                         (["--opening-plies", "2"], "--seed 1 --openings balanced15 "
                                                    "--opening-plies 2")):
        with pytest.raises(ConfigError) as e:
            resolved(*flags)
        assert (f"its 2 matches were played with --seed 1 --openings balanced15 "
                f"--opening-plies 0; this ladder asks for {asked}:") in str(e.value)
    # A ledger that already mixes two: either is accepted, given in full.
    mixed = [line, {**line, "ladder_seed": 0, "openings": None, "opening_plies": 2}]
    assert resolved("--seed", "0", ledger=mixed) == (0, None, 2)
    assert resolved("--seed", "1", "--openings", "balanced15", "--opening-plies", "0",
                    ledger=mixed) == (1, "balanced15", 0)
    with pytest.raises(ConfigError, match="played with --seed 1 --openings balanced15 "
                                          "--opening-plies 0 or --seed 0 --opening-plies 2"):
        resolved("--seed", "5", ledger=mixed)
    # From the command line: one line, before anything is played or loaded.
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    one_line_error(capsys, ladder_args(tmp_path, "--seed", "0"),
                   "leave those flags out (or give the ledger's)")


def test_a_campaign_model_is_named_by_its_games(tmp_path):
    """models/campaign is rewritten as the campaign goes on: SPEC@gN, N its games."""
    from test_arena_cli import tiny_run

    from agz_jax.game.gomoku import Rules

    model_dir = tmp_path / "campaign"
    model = models.load(tiny_run(tmp_path / "run"))
    models.save(model_dir, model.config, model.variables)
    (model_dir / "campaign.json").write_text(json.dumps(
        {"runs": [], "totals": {"games": 1832, "iterations": 21, "cpu_hours": 1.2,
                                "gpu_minutes": 30.0},
         "nets": {"sha256": "0" * 64, "games": 835, "hours": 1.0}}))
    spec = players.load_spec(players.parse_spec(f"mcts:{model_dir}:4", "--candidate"),
                             "--candidate")
    found, names = ladder.load_players([("--candidate", spec)], Rules(5, "freestyle"))
    assert names == [f"mcts:{model_dir}:4@g835"]
    # Named by the games its nets were made with, not by the campaign's totals.
    assert found[names[0]].progress == {"run": str(model_dir), "iteration": 21,
                                          "games": 835, "hours": pytest.approx(1.0)}
