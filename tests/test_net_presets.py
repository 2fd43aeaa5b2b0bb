"""Net presets (``--net-preset``): the sizes they set, their parameter counts, and
the one-line refusal of nets of other sizes (``--init-from``, ``--resume``),
which names the field and the distillation that would start such a net. In-process
calls of ``parse``/``main``: nothing here compiles."""

from __future__ import annotations

import pytest

from agz_jax.config import presets
from agz_jax.config.presets import NET_PRESETS, get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.nets import checkpoint
from agz_jax.training import distill
from experiments import selfplay as selfplay_cli
from experiments.training import distill as distill_cli


def one_line_error(text: str) -> str:
    assert text.startswith("error: ") and text.count("\n") == 1, text
    assert "Traceback" not in text, text
    return text


@pytest.mark.parametrize("name, blocks, filters, value_hidden, parameters", [
    ("paper", 2, 32, 32, 146_890), ("6x64", 6, 64, 64, 561_962),
    ("10x128", 10, 128, 128, 3_088_874),
])
def test_a_net_preset_sets_the_three_sizes_and_nothing_else(tmp_path, name, blocks, filters,
                                                            value_hidden, parameters):
    args, config = selfplay_cli.parse(["--preset", "campaign", "--net-preset", name,
                                       "--out", str(tmp_path / "r")])
    net = config.net
    assert (net.blocks, net.filters, net.value_hidden) == (blocks, filters, value_hidden)
    campaign = get_preset("campaign")
    assert config == campaign.replace(**presets.net_preset(name))
    assert net.double and config.search == campaign.search
    assert presets.net_preset_name(net) == name
    # The parameters of one net on the campaign's 15x15 board (docs/nets.md).
    assert distill.parameters(config) == parameters


def test_the_paper_preset_is_the_shipped_nets_size():
    for preset in ("campaign", "gpu", "curriculum", "paper", "cpu"):
        assert presets.net_preset_name(get_preset(preset).net) == "paper"
    assert list(NET_PRESETS) == ["paper", "6x64", "10x128"]


def test_preset_table_lists_every_preset_with_its_parameters(capsys):
    assert distill_cli.main(["--net-presets"]) == 0
    out = capsys.readouterr().out
    for name, count in (("paper", "146,890"), ("6x64", "561,962"), ("10x128", "3,088,874")):
        assert any(line.split()[0] == name and count in line for line in out.splitlines())


@pytest.mark.parametrize("argv, says", [
    (["--net-preset", "7x7"], "--net-preset: unknown net preset '7x7'; choose one of paper, "
                              "6x64, 10x128"),
    (["--net-preset", "6x64", "--net.filters", "48"],
     "--net.filters and --net-preset 6x64 both set net.filters: give one of them"),
])
def test_net_preset_mistakes_are_one_line(tmp_path, capsys, argv, says):
    assert selfplay_cli.main(["--preset", "campaign", "--out", str(tmp_path / "r"),
                              *argv]) == 2
    assert says in one_line_error(capsys.readouterr().err)


def test_init_from_a_model_of_other_sizes_names_the_field_and_the_distillation(tmp_path,
                                                                              capsys):
    out = str(tmp_path / "r")
    assert selfplay_cli.main(["--preset", "campaign", "--net-preset", "6x64", "--init-from",
                              "default", "--out", out]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert err == ("error: --init-from default has net.filters = 32, this run needs 64 "
                   "(--net-preset 6x64): give --net-preset paper to start from its nets as "
                   "they are, or distil a 6x64 net from them first (python -m "
                   "experiments.training.distill --teacher default --net-preset 6x64 --out DIR) "
                   "and give --init-from DIR\n")
    assert not (tmp_path / "r").exists()
    # Sizes that are no preset's are named by their flags.
    assert selfplay_cli.main(["--preset", "campaign", "--net.blocks", "4", "--init-from",
                              "default", "--out", out]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert "default has net.blocks = 2, this run needs 4 (--net.blocks 4 --net.filters 32 " \
           "--net.value-hidden 32): give --net-preset paper" in err
    assert "distil a 4x32 net from them first (python -m experiments.training.distill --teacher " \
           "default --net.blocks 4 --net.filters 32 --net.value-hidden 32 --out DIR)" in err


def test_a_smaller_run_from_larger_nets_and_other_fields_keep_their_ways_out():
    campaign = get_preset("campaign")
    big = campaign.replace(**presets.net_preset("10x128"))
    with pytest.raises(ConfigError, match=r"^m has net.filters = 128, this run needs 32 "
                       r"\(--net-preset paper\): give --net-preset 10x128 to start from its "
                       r"nets as they are, or distil a 2x32 net"):
        presets.check_nets_fit(campaign, big, "m")
    # A difference beyond the sizes: the flags that fit them all, as before.
    other = big.replace(**{"net.double": False})
    with pytest.raises(ConfigError, match=r"^m has net.filters = 128, this run needs 32: give "
                       r"--net.filters 128 --net.blocks 10 --net.value-hidden 128 "
                       r"--net.no-double or another model$"):
        presets.check_nets_fit(campaign, other, "m")
    presets.check_nets_fit(campaign, campaign.replace(**{"search.num_simulations": 3}), "m")


def test_resume_with_another_net_preset_is_refused_naming_the_field(tmp_path):
    checkpoint.write_config(tmp_path, get_preset("campaign").replace(
        **presets.net_preset("6x64")))
    out = ["--out", str(tmp_path), "--resume"]
    _, config = selfplay_cli.parse([*out, "--net-preset", "6x64"])  # its own sizes: fine
    assert config.net.filters == 64
    with pytest.raises(ConfigError, match=r"^net.blocks differs from the config saved in "
                       r".*config.json; only --iterations, --parallel.\* and --checkpoint.\* "
                       "may change on --resume$"):
        selfplay_cli.parse([*out, "--net-preset", "paper"])


def test_help_documents_the_net_preset_flag(capsys):
    assert selfplay_cli.main(["--preset", "smoke", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--net-preset NAME" in text and "6x64, 10x128" in text
