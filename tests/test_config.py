"""Config comparisons used on --resume and --init-from (no compilation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agz_jax.config import presets
from agz_jax.config.presets import get_preset
from agz_jax.config.schema import Config, ConfigError, SearchConfig

ROOT = Path(__file__).resolve().parents[1]

BASE = get_preset("smoke")


def test_first_difference_names_the_first_differing_field():
    assert BASE.first_difference(BASE) is None
    other = BASE.replace(**{"search.num_simulations": 7, "train.learning_rate": 0.5})
    assert BASE.first_difference(other) == "search.num_simulations"
    assert BASE.first_difference(other, allow=("search",)) == "train.learning_rate"
    assert BASE.first_difference(other, allow=("search.num_simulations",)) == "train.learning_rate"
    assert BASE.first_difference(BASE.replace(iterations=99)) == "iterations"
    assert BASE.first_difference(BASE.replace(iterations=99), allow=("iterations",)) is None


@pytest.mark.parametrize("field, value", [
    ("game.size", 9), ("game.rule", "standard"), ("net.filters", 16), ("net.double", False),
    ("net.symmetric", True), ("net.position_bias", True), ("features.history", 2),
    ("features.colour", True), ("features.ranks", 4),
])
def test_nets_of_another_architecture_or_features_do_not_fit(field, value):
    other = BASE.replace(**{field: value})
    with pytest.raises(ConfigError, match=f"m has {field} = {value!r}, this run needs"):
        presets.check_nets_fit(BASE, other, "m")


def test_nets_fit_whatever_the_training_settings():
    presets.check_nets_fit(BASE, BASE.replace(**{"search.num_simulations": 3,
                                                 "train.learning_rate": 0.5,
                                                 "seed": 9, "iterations": 1}), "m")


def test_search_dtype_is_validated_and_old_model_configs_load():
    assert SearchConfig().dtype == "float32"
    assert BASE.replace(**{"search.dtype": "bfloat16"}).search.dtype == "bfloat16"
    for bad in ("float16", "bf16", "", None, 16):
        with pytest.raises(ConfigError, match="search.dtype must be one of"):
            BASE.replace(**{"search.dtype": bad})
    # Model configs written before the field existed load with the default.
    paths = sorted((ROOT / "models").glob("*/config.json"))
    assert paths
    for path in paths:
        d = json.loads(path.read_text())
        assert Config.from_dict(d).search.dtype == d["search"].get("dtype", "float32")
        d["search"].pop("dtype", None)
        assert Config.from_dict(d).search.dtype == "float32"
