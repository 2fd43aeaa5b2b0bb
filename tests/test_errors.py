"""Every mistake a user can make on the training command lines ends in one line
that names the problem and the way out, and ``--help`` documents
every flag of the command, and only those. In-process calls of ``main``/``parse``:
nothing here compiles more than a smoke run's initial state."""

from __future__ import annotations

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import _SECTIONS, Config, ConfigError
from agz_jax.curriculum import command as curriculum_cli
from agz_jax.curriculum.basic_rules import BasicRulesConfig
from agz_jax.nets import checkpoint, models
from agz_jax.studies.movepred import MovePredConfig
from agz_jax.training import cli, run
from experiments import selfplay as selfplay_cli


def one_line_error(text: str) -> str:
    assert text.startswith("error: ") and text.count("\n") == 1, text
    for noise in ("Traceback", "TensorStore", "Event loop", "WARNING"):
        assert noise not in text, text
    return text


# ------------------------------------------------------------------------- checkpoints


def _tiny_run(tmp_path, steps=(1, 2)):
    state = {"iteration": np.zeros((), np.int32), "a": np.arange(6, dtype=np.float32).reshape(2, 3),
             "b": np.ones(4, np.int32)}
    for s in steps:
        checkpoint.save(tmp_path, s, {**state, "iteration": np.full((), s, np.int32)},
                        {"iteration": s})
    return state


def _damage(run_dir, step):
    """Truncate the checkpoint's manifest (reading it fails with DATA_LOSS)."""
    path = run_dir / "checkpoints" / str(step) / "state" / "manifest.ocdbt"
    path.write_bytes(path.read_bytes()[:20])


def test_a_damaged_checkpoint_names_the_previous_intact_one(tmp_path):
    like = _tiny_run(tmp_path)
    _damage(tmp_path, 2)
    with pytest.raises(checkpoint.DamagedCheckpoint) as info:
        checkpoint.restore(tmp_path, like)
    e = info.value
    assert (e.step, e.intact) == (2, 1)
    assert str(e) == (f"checkpoint {tmp_path}/checkpoints/2 is damaged (DATA_LOSS: its files "
                      "cannot be read); the previous checkpoint, 1, is intact")
    state, meta, step = checkpoint.restore(tmp_path, like, step=1)
    assert step == 1 and meta == {"iteration": 1} and int(state["iteration"]) == 1
    with pytest.raises(checkpoint.CheckpointError, match=r"no checkpoint 7 \(it holds 1, 2\)"):
        checkpoint.restore(tmp_path, like, step=7)
    # Arrays of other shapes (a config.json edited by hand) are not "damaged".
    other = {**like, "a": np.zeros((3, 3), np.float32)}
    with pytest.raises(checkpoint.CheckpointError, match="does not fit the config in .*: its a "
                       r"has shape \(2, 3\), the config needs \(3, 3\)") as info:
        checkpoint.restore(tmp_path, other, step=1)
    assert not isinstance(info.value, checkpoint.DamagedCheckpoint)
    assert checkpoint.set_aside(tmp_path, 1) == [tmp_path / "damaged" / "2"]
    assert checkpoint.all_steps(tmp_path) == [1]


def test_models_read_only_the_best_nets_of_a_run_directory(tmp_path):
    config = get_preset("smoke")
    nets = run.make_networks(config.net, board_size=config.game.size, features=config.features)
    variables = jax.jit(nets.init)(jax.random.PRNGKey(3))
    checkpoint.write_config(tmp_path, config)
    for step in (4, 5):
        checkpoint.save(tmp_path, step, {"best": variables, "replay": jnp.zeros(7)}, {})
    model = models.load(tmp_path)
    assert model.step == 5
    for a, b in zip(jax.tree.leaves(model.variables), jax.tree.leaves(variables), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))
    _damage(tmp_path, 5)
    with pytest.raises(models.ModelError, match="checkpoints/5 is damaged .* 4, is intact"):
        models.load(tmp_path)


@pytest.fixture()
def resumable(tmp_path, monkeypatch):
    """A smoke run directory with checkpoints 1 and 2 of a run of 1 iteration (its
    state as initialised: restoring and the bookkeeping are what is tested)."""
    monkeypatch.setenv("AGZ_JAX_NO_CACHE", "1")  # keep the test session's cache
    config = get_preset("smoke").replace(iterations=1)
    state = run.init_state(run.build(config))
    checkpoint.write_config(tmp_path, config)
    for step in (1, 2):
        checkpoint.save(tmp_path, step, state._replace(iteration=jnp.int32(step)),
                        {"iteration": step, "config": config.to_dict()})
    return tmp_path


def test_resume_of_a_damaged_run_says_how_to_resume_from_the_intact_checkpoint(resumable,
                                                                               capfd):
    _damage(resumable, 2)
    assert selfplay_cli.main(["--out", str(resumable), "--resume"]) == 2
    err = one_line_error(capfd.readouterr().err)
    assert f"checkpoint {resumable}/checkpoints/2 is damaged" in err
    assert f"continue from it with --out {resumable} --resume-from 1" in err
    assert checkpoint.all_steps(resumable) == [1, 2]  # nothing changed
    assert selfplay_cli.main(["--out", str(resumable), "--resume-from", "1", "--quiet"]) == 0
    out, err = capfd.readouterr()
    assert f"set aside {resumable}/damaged/2" in out and "complete" in out
    assert "WARNING" not in err and "Traceback" not in err, err
    assert checkpoint.all_steps(resumable) == [1]


def test_curriculum_says_how_to_get_past_a_damaged_stage_checkpoint(tmp_path, capfd,
                                                                     monkeypatch):
    from agz_jax.curriculum import stages

    monkeypatch.setenv("AGZ_JAX_NO_CACHE", "1")
    stage_run = tmp_path / "selfplay"

    def damaged(*args, **kwargs):
        raise checkpoint.DamagedCheckpoint(
            f"checkpoint {stage_run}/checkpoints/3 is damaged (DATA_LOSS: its files cannot be "
            "read); the previous checkpoint, 2, is intact", stage_run, 3, 2)

    monkeypatch.setattr(stages, "run_curriculum", damaged)
    assert curriculum_cli.main(["--preset", "smoke", "--out", str(tmp_path)]) == 2
    err = one_line_error(capfd.readouterr().err)
    assert err.endswith(f"move {stage_run}/checkpoints/3 out of the way and run --resume again, "
                        "which continues from there\n")


# ------------------------------------------------------------------------ command lines


@pytest.mark.parametrize("argv, says", [
    (["--resume"], "--resume needs --out RUN_DIR"),
    (["--out", "{tmp}/missing", "--resume"], "holds no run to resume; start it without --resume"),
    (["--out", "{tmp}/empty", "--resume"], "holds no run to resume"),
    (["--out", "{tmp}/afile"], "--out {tmp}/afile is a file; give a directory for the run"),
    (["--out", "{tmp}/afile", "--resume"], "is a file"),
    (["--search.num-sims", "5"], "unknown flag --search.num-sims (did you mean "
                                 "--search.num-simulations?)"),
    (["--basic.steps", "5"], "unknown flag --basic.steps"),  # curriculum only
    (["--search.num-simulations", "many"],
     "argument --search.num-simulations: wants an integer, got 'many'"),
    (["--search.num-simulations", "0"], "search.num_simulations must be a positive integer, "
                                        "got 0"),
    (["--search.reuse"], "search.reuse applies to search.algorithm=puct only"),
    (["--preset", "huge"], "unknown preset 'huge'"),
    (["stray"], "unexpected argument 'stray'"),
    (["--out", "{tmp}/run", "--openings.path", "nope"],
     "openings.path: no shipped opening set 'nope'"),
    (["--out", "{tmp}/run", "--openings.path", "{tmp}/afile"], "openings.path:"),
])
def test_selfplay_mistakes_are_one_line(tmp_path, capsys, argv, says):
    (tmp_path / "afile").write_text("")
    (tmp_path / "empty").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert selfplay_cli.main(argv) == 2
    assert says.replace("{tmp}", str(tmp_path)) in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "run").exists()  # refused before anything is made


def test_resume_refuses_other_settings_and_accepts_its_own(tmp_path):
    config = get_preset("smoke")
    checkpoint.write_config(tmp_path, config)
    out = ["--out", str(tmp_path), "--resume"]
    args, again = selfplay_cli.parse([*out, "--iterations", "9", "--parallel.devices", "1",
                                      "--checkpoint.asynchronous"])
    assert args.resume and again == config.replace(
        iterations=9, **{"parallel.devices": 1, "checkpoint.asynchronous": True})
    with pytest.raises(ConfigError, match="search.num_simulations differs from the config saved "
                       "in .*; only --iterations, --parallel.\\* and --checkpoint.\\* may "
                       "change on --resume"):
        selfplay_cli.parse([*out, "--search.num-simulations", "3"])
    with pytest.raises(ConfigError, match="--preset cpu differs"):
        selfplay_cli.parse([*out, "--preset", "cpu"])
    with pytest.raises(ConfigError, match="curriculum.stages differs"):
        curriculum_cli.parse([*out, "--stages", "basic"])


def test_flags_spelled_either_way_and_bool_pairs():
    _, c = selfplay_cli.parse(["--preset", "smoke", "--search.num_simulations=5",
                               "--net.no_double", "--selfplay.continuous", "--seed", "4"])
    assert (c.search.num_simulations, c.net.double, c.selfplay.continuous, c.seed) == (
        5, False, True, 4)
    _, c = curriculum_cli.parse(["--preset", "smoke", "--curriculum.stages", "imitate", "basic",
                                 "--imitate.level", "1"])
    assert c.curriculum.stages == ("imitate", "basic") and c.imitate.level == 1


def _help(main, argv, capsys) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_help_documents_every_flag_once_and_only_the_commands_sections(capsys):
    text = _help(selfplay_cli.main, ["--preset", "smoke"], capsys)
    assert text.count("usage:") == 1
    flags = re.findall(r"^  (--[\w.-]+)", text, re.M)
    assert "--search.num-simulations" in flags and "--resume-from" in flags
    dotted = [f for f in flags if "." in f]
    assert len(dotted) == sum(len(dataclasses.fields(getattr(Config(), s)))
                              for s in cli.RUN_SECTIONS)
    assert {"--seed", "--iterations"} <= set(flags) and len(set(flags)) == len(flags)
    for section in ("basic", "imitate", "curriculum"):
        assert f"--{section}." not in text
    # each flag's description follows it, with the smoke preset's default
    blocks = re.split(r"^  (?=--)", text, flags=re.M)[1:]
    for block in blocks:
        name, _, rest = block.partition("\n")
        assert len(rest.split()) >= 3, block
        if "." in name.split()[0]:
            assert "(default:" in rest, block
    assert re.search(r"--search.num-simulations N\n\s+Simulations per searched move.*"
                     r"\(default: 8\)", text)
    text = _help(curriculum_cli.main, [], capsys)
    assert text.count("usage:") == 1 and "--imitate.level" in text and "--resume-from" not in text


@pytest.mark.parametrize("cls", [*_SECTIONS.values(), Config, BasicRulesConfig, MovePredConfig])
def test_every_config_field_has_a_docstring(cls):
    docs = cli.field_docs(cls)
    missing = [f.name for f in dataclasses.fields(cls)
               if f.name not in _SECTIONS and len(docs.get(f.name, "")) < 10]
    assert not missing, f"{cls.__name__}: {missing}"


def test_declared_checks_keep_the_message_shape():
    for override, message in [
        ({"game.size": 3}, "game.size must be an integer in 5..19, got 3"),
        ({"decay.gamma": 0}, "decay.gamma must be in (0, 1], got 0"),
        ({"train.momentum": 1.0}, "train.momentum must be in [0, 1), got 1.0"),
        ({"gating.num_games": 3}, "gating.num_games must be an even integer >= 2, got 3"),
        ({"search.algorithm": "mcts"},
         "search.algorithm must be one of ('puct', 'gumbel'), got 'mcts'"),
        ({"net.double": 1}, "net.double must be true or false, got 1"),
        ({"openings.empty_fraction": 2}, "openings.empty_fraction must be in [0, 1], got 2"),
        ({"openings.shift": -1}, "openings.shift must be an integer >= 0, got -1"),
    ]:
        with pytest.raises(ConfigError) as info:
            get_preset("smoke").replace(**override)
        assert str(info.value) == message
    # model and run configs written before still load and round-trip
    for path in sorted(__import__("pathlib").Path(cli.__file__).parents[2].glob(
            "models/*/config.json")):
        d = json.loads(path.read_text())
        assert Config.from_dict(d).to_dict() == Config.from_dict(
            Config.from_dict(d).to_dict()).to_dict()
