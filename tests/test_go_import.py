"""The importer of the TYGEM set and SGF files (``go.tygem``, each game read and
checked by ``go.records``) and the compact store (``go.games``), on small
fixtures written here."""

from __future__ import annotations

import json
import random
import zipfile

import numpy as np
import pytest

from agz_jax.go import games, records, sgf, tygem
from experiments.go import import_records as go_import


def legal_game(seed: int, n: int, size: int = 19) -> list[int]:
    """A legal game of ``n`` moves (no passes), black first."""
    rng = random.Random(seed)
    moves: list[int] = []
    while len(moves) < n:
        a = rng.randrange(size * size)
        if records.first_illegal(moves + [a], size) is None:
            moves.append(a)
    return moves


def line(gid: str, moves: list[int], colours: str | None = None) -> bytes:
    out = []
    for i, a in enumerate(moves):
        c = colours[i] if colours else "BW"[i % 2]
        r, col = divmod(a, 19)
        out.append(f";{c}[{chr(97 + col)}{chr(97 + r)}]" if a < 361 else f";{c}[]")
    return f"{gid}\t{''.join(out)}\r\n".encode()


def zip_of(path, name: str, data: bytes):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)


def index_line(gid: str, result: str) -> bytes:
    return (f"{gid}\tC2005.11.02 10:48\t\ubc31\twhite\t0\t\ud751\tblack\t0\t{result}\t200\t"
            "30/3 5m\r\n").encode()


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("tygem")
    kifu, index = root / "TYGEM" / "Kifu", root / "TYGEM" / "index"
    kifu.mkdir(parents=True)
    index.mkdir()
    g = [legal_game(k, 60 + k) for k in range(6)]
    illegal = g[0][:55] + [g[0][3]] + g[0][55:]          # move 56 on an occupied point
    lines = [line("1", g[0]), line("2", g[1]), line("3", g[2] + [361, 361]),
             b"garbage without a tab\r\n", line("4", g[3][:10]),            # short
             line("5", g[3], "BB" + "WB" * 40),                              # out of turn
             b"6\t;B[qd];W[zz]\r\n", line("7", illegal), line("8", g[4]),   # 8: no result
             line("9", g[5]), b"\r\n"]
    zip_of(kifu / "2005-11.zip", "2005-11", b"".join(lines))
    # the next month: a duplicate of game 1 under another id, and one new game
    zip_of(kifu / "2006-01.zip", "2006-01",
           line("10", g[0]) + line("11", legal_game(99, 70)))
    (kifu / "2005-12.zip").write_bytes(b"PK\x03\x04 this is not a zip")
    results = {"1": "B+Resign", "2": "W+3.5", "3": "B+Time", "4": "W+Resign",
               "5": "B+Resign", "6": "B+1.5", "7": "W+Resign", "8": "?", "9": "W+Offline"}
    zip_of(index / "Kifu2005.zip", "Kifu2005.index",
           b"".join(index_line(k, v) for k, v in results.items()))
    zip_of(index / "Kifu2006.zip", "Kifu2006.index",
           index_line("10", "B+Resign") + index_line("11", "W+Resign"))
    # SGF files
    folder = root / "sgf"
    (folder / "sub").mkdir(parents=True)
    moves = tuple((i % 2, a) for i, a in enumerate(legal_game(7, 80)))
    sgf.write(sgf.Record(size=19, komi=7.5, moves=moves, result="W+R", black_rank="3d"),
              folder / "good.sgf")
    sgf.write(sgf.Record(size=19, komi=0.5, handicap=2, black_setup=(72, 288),
                         moves=moves[:60], result="B+R"), folder / "sub" / "handicap.sgf")
    nine = tuple((i % 2, a) for i, a in enumerate(legal_game(8, 50, size=9)))
    sgf.write(sgf.Record(size=9, moves=nine, result="B+R"), folder / "nine.sgf")
    sgf.write(sgf.Record(size=19, moves=moves, result=""), folder / "noresult.sgf")
    (folder / "broken.sgf").write_text("(;GM[1]SZ[19]KM[abc];B[dd]")
    sgf.write(sgf.Record(size=19, moves=moves, result="B+R"), folder / "sub" / "dup.sgf")
    return root


EXPECTED = {"corrupt_zip": 1, "malformed": 4, "not_19x19": 1, "handicap": 1, "no_result": 2,
            "too_short": 1, "illegal_move": 1, "duplicate": 2}


@pytest.fixture(scope="module")
def imported(fixtures, tmp_path_factory):
    out = tmp_path_factory.mktemp("store") / "go19"
    meta = tygem.import_games([fixtures, fixtures / "sgf"], out, seed=0, valid=0.3, test=0.3,
                              say=lambda s: None)
    return out, meta


def test_counts_by_reason(imported):
    out, meta = imported
    assert meta["dropped"] == EXPECTED
    assert meta["kept"] == 6  # games 1, 2, 3, 9, 11 and good.sgf
    assert meta["read"] == meta["kept"] + sum(EXPECTED.values()) - EXPECTED["corrupt_zip"]
    assert meta["details"]["illegal_move: the point is occupied"] == 1
    assert meta["details"]["malformed: moves out of turn"] == 1
    assert meta["details"]["no_result: result '?'"] == 1
    assert json.loads((out / "games.json").read_text()) == meta


def test_load_games(imported, fixtures):
    out, meta = imported
    every = games.load_games(out)
    parts = [games.load_games(out, s) for s in games.SPLITS]
    assert sum(len(p) for p in parts) == len(every) == 6
    assert sorted(int(k) for p in parts for k in p.key) == sorted(int(k) for k in every.key)
    assert every.moves.dtype == np.int16 and every.offsets.dtype == np.int64
    assert every.winner.dtype == np.int8 and every.offsets[-1] == len(every.moves)
    by_id = {gid: g for g, gid in enumerate(every.game_id)}
    assert every.game(by_id["1"]).tolist() == legal_game(0, 60)
    assert every.game(by_id["3"]).tolist()[-2:] == [361, 361]
    assert every.winner[by_id["1"]] == 0 and every.winner[by_id["2"]] == 1
    assert every.result[by_id["9"]] == "W+Offline" and every.komi[by_id["1"]] == 6.5
    assert every.black_rank[by_id["1"]] == 8 and every.date[by_id["1"]] == "2005.11.02 10:48"
    record = every.record(by_id["1"])
    assert record.winner() == 0 and record.rank(0) == 8 and record.komi == 6.5
    assert [a for _, a in record.moves] == legal_game(0, 60)
    good = by_id["good"]
    assert every.komi[good] == 7.5 and every.black_rank[good] == 2
    assert every.white_rank[good] == -1
    for k, s in enumerate(games.SPLITS):
        assert meta["splits"][s]["games"] == int((every.split == k).sum())
    with pytest.raises(games.GamesError, match="split"):
        games.load_games(out, "training")


def test_zip_broken_part_way(tmp_path):
    """A zip whose member fails its CRC after some games were read: none of its
    games is kept, nor remembered as seen (a later copy of one is kept)."""
    game = legal_game(1, 60)
    folder = tmp_path / "zips"
    folder.mkdir()
    with zipfile.ZipFile(folder / "2005-11.zip", "w", zipfile.ZIP_STORED) as z:
        z.writestr("2005-11", line("1", game) + b"tail line\r\n")
    data = (folder / "2005-11.zip").read_bytes()
    (folder / "2005-11.zip").write_bytes(data.replace(b"tail line", b"tail linE"))
    zip_of(folder / "2005-12.zip", "2005-12", line("2", game))
    zip_of(folder / "Kifu2005.zip", "Kifu2005.index",
           index_line("1", "B+Resign") + index_line("2", "B+Resign"))
    meta = tygem.import_games([folder], tmp_path / "out", say=lambda s: None)
    assert meta["dropped"]["corrupt_zip"] == 1 and meta["kept"] == 1
    assert "BadZipFile" in next(iter(meta["details"]))
    assert games.load_games(tmp_path / "out").game_id.tolist() == ["2"]


def test_split_depends_on_moves_and_seed_only():
    g = [np.asarray(legal_game(k, 55), "<i2").tobytes() for k in range(40)]
    first = [games.split_of(m, 3, (0.5, 0.25, 0.25)) for m in g]
    assert first == [games.split_of(m, 3, (0.5, 0.25, 0.25)) for m in reversed(g)][::-1]
    assert set(first) == {0, 1, 2}
    assert first != [games.split_of(m, 4, (0.5, 0.25, 0.25)) for m in g]


def test_resume_and_other_settings(imported, fixtures, tmp_path):
    out, meta = imported
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in out.iterdir():
        copy.joinpath(p.name).write_bytes(p.read_bytes())
    (copy / "games.json").unlink()
    (copy / "shard-tygem-2006-01.npz").unlink()
    said = []
    again = tygem.import_games([fixtures, fixtures / "sgf"], copy, seed=0, valid=0.3,
                               test=0.3, say=said.append)
    assert said[0].startswith("3 of 4 units already imported")
    assert {k: again[k] for k in ("kept", "dropped", "splits")} == \
        {k: meta[k] for k in ("kept", "dropped", "splits")}
    with pytest.raises(games.GamesError, match="unfinished"):
        (copy / "games.json").unlink()
        games.load_games(copy)
    with pytest.raises(tygem.SourceError, match="seed"):
        tygem.import_games([fixtures, fixtures / "sgf"], copy, seed=1, say=said.append)


def test_first_illegal_agrees_with_rules():
    """Random games on a 5x5 board (captures, kos, repeated boards and the move
    cap are frequent there) replayed by ``first_illegal`` and by ``go.rules``."""
    size = 5
    rules = sgf.replay_rules(size)
    rng = random.Random(0)
    reasons = set()
    for _ in range(150):
        moves: list[int] = []
        length = rng.choice([rng.randrange(20, rules.max_moves), rules.max_moves + 1])
        while len(moves) < length:
            a = size * size if rng.random() < 0.1 else rng.randrange(size * size)
            bad = records.first_illegal(moves + [a], size)
            if bad is None:
                moves.append(a)
            elif rng.random() < {1: 0.003, 2: 0.3, 3: 0.03}.get(bad[1], 1.0):
                moves.append(a)  # end on an illegal move, rarely an occupied point
                break
        ours = records.first_illegal(moves, size)
        out = sgf.replay(rules, np.zeros(size * size, np.int8),
                         [(i % 2, a) for i, a in enumerate(moves[:rules.max_moves])])
        why = np.asarray(out.why)
        theirs = (int(np.flatnonzero(why)[0]), int(why[why > 0][0])) if why.any() else None
        if len(moves) > rules.max_moves and theirs is None:
            theirs = (rules.max_moves, 5)
        assert ours == theirs, moves
        reasons.add(None if ours is None else ours[1])
    assert {None, 1, 2, 3, 4, 5} <= reasons, reasons


def test_tokens_and_lines():
    with pytest.raises(ValueError, match="0..361"):
        records.first_illegal([3, -1])
    gid, moves = records.parse_line(b"42\t;B[aa];W[sa];B[as];W[tt];B[]\r\n")
    assert gid == "42"
    assert np.frombuffer(moves, "<i2").tolist() == [0, 18, 342, 361, 361]
    for bad in (b"42", b"\t;B[aa]", b"42\tB[aa]", b"42\t;B[aa];B[bb]", b"42\t;B[aa];W[ab"):
        with pytest.raises(records.Dropped) as e:
            records.parse_line(bad)
        assert e.value.reason == "malformed"


def test_cli(fixtures, tmp_path, capsys):
    out = tmp_path / "cli"
    assert go_import.main(["--source", str(fixtures), "--out", str(out), "--limit-zips",
                           "1", "--seed", "5"]) == 0
    meta = games.summary(out)
    assert meta["units"] == ["tygem-2005-11"] and meta["kept"] == 4
    assert "4 of" in capsys.readouterr().out
    for argv, words in (
            (["--source", str(tmp_path / "nope"), "--out", str(out)], "no such file"),
            (["--source", str(fixtures / "TYGEM" / "index"), "--out", str(tmp_path / "o")],
             "no TYGEM kifu zips"),
            (["--source", str(fixtures), "--out", str(fixtures / "sgf" / "good.sgf")],
             "a file"),
            (["--source", str(fixtures), "--out", str(out), "--valid", "0.7", "--test",
              "0.5"], "--valid"),
    ):
        with pytest.raises(SystemExit) as e:
            go_import.main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "error:" in err and words in err, err
    # the same out with other settings: one line, exit 2
    assert go_import.main(["--source", str(fixtures), "--out", str(out), "--seed", "6"]) == 2
    assert "error:" in capsys.readouterr().err
