"""experiments.play.openings: the candidates are one per symmetry class, a made set
keeps what its judge scored near balance and records how it was made, and
``--check`` measures an existing set."""

import re

import numpy as np
import pytest
from tiny_models import random_model

from agz_jax.game import openings, symmetry
from agz_jax.nets import checkpoint
from experiments.play import openings as make


def test_candidates_are_one_per_symmetry_class():
    size, box = 9, 3
    moves = make.candidates(size, box)
    centre = (size // 2) * size + size // 2
    maps = symmetry.permutations(size)
    keys = {min((int(m[a]), int(m[b]), int(m[c])) for m in maps) for a, b, c in moves}
    assert len(keys) == len(moves)  # no two candidates are the same under a symmetry
    assert np.all(moves[:, 0] == centre)
    # Every ordered pair of distinct points of the box but the centre is some
    # candidate's class: 8 points, 56 pairs.
    box_points = [r * size + c for r in range(3, 6) for c in range(3, 6) if r * size + c != centre]
    for w in box_points:
        for b in box_points:
            if w != b:
                assert min((int(m[centre]), int(m[w]), int(m[b])) for m in maps) in keys


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    # Under the standard rule (exactly five), which the set's header names.
    path = random_model(tmp_path_factory.mktemp("judge") / "m", size=9, seed=2)
    checkpoint.write_config(path, checkpoint.read_config(path).replace(
        **{"game.rule": "standard"}))
    return str(path)


@pytest.mark.long
def test_make_then_check_a_set(judge, tmp_path, capsys):
    out = tmp_path / "set9.txt"
    out.write_text("an earlier set\n")
    flags = ["--model", judge, "--games", "2", "--sims", "2", "--box", "3"]
    # 4 kept: the check's 8 games are a batch size the maker's 16 already compiled.
    made = [*flags, "--max-deviation", "0.5", "--count", "4", "--out", str(out)]
    assert make.main(made) == 2  # an existing file is kept without --force
    assert "--force" in capsys.readouterr().err and out.read_text() == "an earlier set\n"
    assert make.main([*made, "--force"]) == 0
    text = out.read_text()
    assert f"Made by: python -m experiments.play.openings {' '.join(flags)}" in text
    assert text.startswith("# Balanced 3-stone openings for 9x9 standard (black, white, black;")
    kept = openings.load(str(out), 9)
    assert len(kept) == 4 and kept.shape[1] == 3
    scores = [float(v) for v in re.search(r"Scores, in file order: (.*)", text).group(1).split()]
    deviations = np.abs(np.array(scores) - 0.5)
    assert len(scores) == 4 and np.all(np.diff(deviations) >= 0)  # closest to 0.5 first
    # Two games each (a draw counts a half; standard-rule games on 9x9 can be drawn).
    assert np.all(np.isin(np.array(scores) * 4, [0, 1, 2, 3, 4]))
    capsys.readouterr()

    assert make.main([*flags, "--check", str(out), "--seed", "1"]) == 0
    line = capsys.readouterr().out
    m = re.match(r".*: black scores ([\d.]+) \(95% CI ([\d.]+)-([\d.]+)\) over 8 self-play "
                 r"games .* 2 from each of its 4 openings", line)
    assert m, line
    s, low, high = (float(v) for v in m.groups())
    assert low <= s <= high and s * 16 == pytest.approx(round(s * 16))  # draws: halves
    label = re.search(r"black's mean decayed value label after the openings \(gamma ([\d.]+);"
                      r".*\): ([+-][\d.]+) \(standard error ([\d.]+)\)", line)
    assert label, line
    assert float(label.group(1)) == 0.95 and abs(float(label.group(2))) <= 1


def test_bad_flags_are_one_line(judge, tmp_path, capsys):
    assert make.main(["--model", judge]) == 2
    assert "give --out FILE to make a set, or --check SET" in capsys.readouterr().err
    assert make.main(["--model", judge, "--check", str(tmp_path / "none.txt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --check: opening set") and err.count("\n") == 1
    assert make.main(["--model", judge, "--out", str(tmp_path / "x"), "--games", "3"]) == 2
    assert "--games must be even" in capsys.readouterr().err


def test_bad_make_flags_are_refused_before_the_search(judge, tmp_path, capsys, monkeypatch):
    def no_search(*args, **kwargs):
        raise AssertionError("searched")

    monkeypatch.setattr(make, "selfplay_scores", no_search)
    monkeypatch.setattr(make, "values", no_search)
    taken, folder = tmp_path / "taken.txt", tmp_path / "folder"
    taken.write_text("keep me\n")
    folder.mkdir()
    for flags, words in (
            (["--out", str(taken)], "exists; give another file, or --force"),
            (["--out", str(folder)], "is a directory"),
            (["--out", str(folder), "--force"], "is a directory"),
            (["--out", str(taken / "set.txt"), "--force"], "is a file, not a directory"),
            (["--out", str(tmp_path / "new.txt"), "--max-deviation", "-1"],
             "--max-deviation must be >= 0"),
            # A box that is odd but larger than the 9x9 board.
            (["--out", str(tmp_path / "new.txt"), "--box", "99"], "give an odd --box from 3 to 9"),
            (["--out", str(tmp_path / "new.txt"), "--box", "11"], "does not fit the 9x9 board")):
        assert make.main(["--model", judge, *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
    assert taken.read_text() == "keep me\n" and not (tmp_path / "new.txt").exists()
    # The largest box that fits a board: all of an odd board, one less on an even one.
    assert make.candidates(9, 9).max() < 81
    assert make.candidates(8, 7).max() < 64


def test_black_labels_are_the_decayed_training_targets_from_blacks_side():
    # After one opening stone (white to move): black's win in 5 plies is 3 plies
    # after that position, so its label is gamma^3; white's win in 6 plies, -gamma^4.
    labels = make.black_labels([0, 1, -1, 0], [5, 6, 9, 3], 1, 0.5)
    np.testing.assert_allclose(labels, [0.125, -0.0625, 0.0, 0.5])
    # After two stones black is to move: the same sign convention, one ply nearer.
    np.testing.assert_allclose(make.black_labels([0, 1], [5, 6], 2, 0.5), [0.25, -0.125])


FAKE = str(__import__("pathlib").Path(__file__).resolve().parent / "fake_piskvork.py")


def outside_flags(*more):
    import sys

    return ["--judge", "outside", "--outside", f"{sys.executable} {FAKE}", "--nodes", "50",
            *more]


def test_an_outside_judge_keeps_the_openings_its_evaluation_calls_even(tmp_path, capsys):
    out = tmp_path / "even.txt"
    assert make.main(outside_flags("--box", "3", "--max-deviation", "10",
                                   "--out", str(out))) == 0
    text = out.read_text()
    evals = [int(v) for v in re.search(r"Evals, in file order: (.*)", text)[1].split()]
    kept = openings.load(str(out), 15)
    assert len(kept) == len(evals) >= 1 and all(abs(v) <= 10 for v in evals)
    assert evals == sorted(evals, key=abs)  # closest to even first
    assert all(v % 10 == 0 for v in evals)  # the stand-in's, read from its MESSAGE lines
    assert "Judged by the outside engine's evaluation" in text and "--judge outside" in text
    # --check plays the engine against itself from each opening: one line.
    assert make.main(outside_flags("--check", str(out))) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.search(rf"black scores [01]\.\d+ \(95% CI .*\) in {len(kept)} games of the "
                     "outside engine against itself at 50 nodes", line)


def test_a_missing_outside_judge_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AGZ_JAX_OUTSIDE", raising=False)
    assert make.main(["--judge", "outside", "--out", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--outside PATH" in err
    assert make.main(["--judge", "outside", "--outside", str(tmp_path / "nope"),
                      "--out", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not exist" in err
    assert not (tmp_path / "x.txt").exists()
