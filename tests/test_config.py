"""Config comparisons used on --resume and --init-from (no compilation)."""

from __future__ import annotations

import pytest

from agz_jax.config import ConfigError, get_preset

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
        BASE.check_nets_fit(other, "m")


def test_nets_fit_whatever_the_training_settings():
    BASE.check_nets_fit(BASE.replace(**{"search.num_simulations": 3, "train.learning_rate": 0.5,
                                        "seed": 9, "iterations": 1}), "m")
