"""Import strong human Go games: the TYGEM 9-dan set and plain SGF files.

The TYGEM set (github.com/yenw/computer-go-dataset, ``TYGEM/``; docs/go_data.md)
is 134 monthly zips ``Kifu/YYYY-MM.zip``, each one text file of one game a line,
``id<TAB>;B[qd];W[dp];...`` (SGF points, moves only), and yearly index zips
``index/KifuYYYY.zip`` with one line a game: id, date, the players, the result
("B+Resign", "W+3.5", "B+Time", ...) and the number of moves. Komi 6.5, no
handicap and both players 9 dan are the set's defaults (the index does not
repeat them).

``import_games(sources, out)`` streams every zip (members are read, never
unpacked to disk) and every SGF file, keeps the games that ``go.records``
accepts (19x19, even, decided, at least ``min_moves`` moves long, legal under
our rules; the mirror lacks the 2012-2014 index zips, so those years' games
have no result) and that are new (``duplicate``: the same moves as a game kept
earlier), and counts every other game under its reason (``corrupt_zip``,
``go.records``' reasons), with the details (which illegality, which
malformation). Bad input is counted, never raised. The store is ``go.games``'s:
one shard per zip (or per ``SGF_BATCH`` SGF files) written atomically, so an
interrupted import continues unit by unit; ``games.json`` is written last.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import time
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from agz_jax.go import games as store
from agz_jax.go.records import REASON_NAMES, Dropped, Meta, sgf_game, tygem_game

SGF_BATCH = 2000
KIFU_NAME = re.compile(r"(\d{4})-(\d{2})\.zip")
INDEX_NAME = re.compile(r"Kifu(\d{4})\.zip")


class SourceError(ValueError):
    """Sources that cannot be imported at all (a missing path, nothing to read,
    an output directory holding another import): the message says which."""


# ----------------------------------------------------------------------------- sources


def read_index(data: bytes) -> dict[str, Meta]:
    """{id: Meta} of an index zip's bytes (zipfile.BadZipFile and the like when
    corrupt; lines with fewer than 9 fields are skipped)."""
    out = {}
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            with z.open(info) as f:
                for line in f:
                    fields = line.rstrip(b"\r\n").split(b"\t")
                    if len(fields) < 9:
                        continue
                    date = fields[1].decode("utf-8", "replace").lstrip("C")
                    out[fields[0].decode("ascii", "replace").strip()] = Meta(
                        fields[8].decode("utf-8", "replace").strip(), date)
    return out


class Unit(NamedTuple):
    """One shard's worth of input: a kifu zip (``kind`` "tygem") with the index
    zip of its year (or None), or a batch of SGF files (``kind`` "sgf")."""

    name: str
    kind: str
    paths: tuple[Path, ...]
    index: Path | None = None


def find_units(sources: Sequence[str | Path], limit_zips: int | None = None) -> list[Unit]:
    """The units of ``sources``: clones of the dataset repository (``TYGEM/Kifu``
    inside), its ``TYGEM`` folder, folders of zips (``YYYY-MM.zip``; index zips
    ``KifuYYYY.zip`` beside them or in ``index/``), kifu zips, SGF files and
    folders of them (searched recursively). SourceError for a missing path or
    one that holds nothing to import."""
    kifu: dict[str, Path] = {}
    index: dict[str, Path] = {}
    sgfs: list[Path] = []
    for source in sources:
        source = Path(source)
        if not source.exists():
            raise SourceError(f"{source}: no such file or directory")
        found = _scan(source, kifu, index, sgfs)
        if not found:
            raise SourceError(f"{source}: no TYGEM kifu zips (YYYY-MM.zip) or .sgf files")
    names = sorted(kifu)
    if limit_zips is not None:
        names = names[:limit_zips]
    units = [Unit(f"tygem-{Path(n).stem}", "tygem", (kifu[n],), index.get(n[:4]))
             for n in names]
    sgfs = sorted(set(sgfs))
    for k in range(0, len(sgfs), SGF_BATCH):
        units.append(Unit(f"sgf-{k // SGF_BATCH:05d}", "sgf", tuple(sgfs[k:k + SGF_BATCH])))
    return units


def _scan(source: Path, kifu: dict, index: dict, sgfs: list) -> int:
    """Add what ``source`` holds; the number of things found."""
    if source.is_file():
        if KIFU_NAME.fullmatch(source.name):
            kifu[source.name] = source
            _indexes((source.parent, source.parent.parent / "index"), index)
            return 1
        if INDEX_NAME.fullmatch(source.name):
            index[INDEX_NAME.fullmatch(source.name).group(1)] = source
            return 1
        if source.suffix.lower() == ".sgf":
            sgfs.append(source)
            return 1
        raise SourceError(f"{source}: not a kifu zip (YYYY-MM.zip) or an .sgf file")
    found = 0
    for folder in (source, source / "TYGEM", source / "Kifu", source / "TYGEM" / "Kifu"):
        for p in sorted(folder.glob("*.zip")) if folder.is_dir() else ():
            if KIFU_NAME.fullmatch(p.name):
                kifu.setdefault(p.name, p)
                found += 1
    _indexes((source, source / "index", source / "TYGEM" / "index", source.parent / "index"),
             index)
    if found:  # a clone of the dataset: its other sections' SGF files are not TYGEM's
        return found
    more = [p for p in source.rglob("*") if p.suffix.lower() == ".sgf" and p.is_file()]
    sgfs.extend(more)
    return len(more)


def _indexes(folders, index: dict) -> None:
    """Add the index zips (``KifuYYYY.zip``) of ``folders`` (the first found of a year)."""
    for folder in folders:
        for p in sorted(folder.glob("Kifu*.zip")) if folder.is_dir() else ():
            m = INDEX_NAME.fullmatch(p.name)
            if m:
                index.setdefault(m.group(1), p)


def _kifu_lines(path: Path) -> Iterator[bytes]:
    """The lines of every member of a kifu zip, streamed (zipfile.BadZipFile,
    zlib.error, OSError or EOFError when corrupt)."""
    with zipfile.ZipFile(path) as z:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            with z.open(info) as f:
                yield from f


CORRUPT = (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError,
           RuntimeError)


# ----------------------------------------------------------------------------- the driver


class _Unit:
    """The state of one unit being imported."""

    def __init__(self):
        self.writer = store.ShardWriter()
        self.read = 0
        self.dropped: Counter = Counter()
        self.details: Counter = Counter()

    def drop(self, reason: str, detail: str, n: int = 1) -> None:
        self.dropped[reason] += n
        self.details[f"{reason}: {detail}"] += n


def _import_unit(unit: Unit, meta, keys: set, seed: int, fractions, min_moves: int) -> _Unit:
    u = _Unit()

    def take(make):
        u.read += 1
        try:
            kept = make()
        except Dropped as d:
            u.drop(d.reason, d.detail)
            return
        key = store.game_key(kept.moves)
        if key in keys:
            u.drop("duplicate", "the moves of a game kept earlier")
            return
        keys.add(key)
        u.writer.add(kept.moves, winner=kept.winner, key=key,
                     split=store.split_of(kept.moves, seed, fractions), komi=kept.komi,
                     black_rank=kept.black_rank, white_rank=kept.white_rank,
                     game_id=kept.game_id, date=kept.date, result=kept.result)

    if unit.kind == "sgf":
        for path in unit.paths:
            take(lambda path=path: sgf_game(path, min_moves))
        return u
    added = []
    try:
        for line in _kifu_lines(unit.paths[0]):
            if line.strip():
                before = len(u.writer)
                take(lambda line=line: tygem_game(line, meta, min_moves))
                if len(u.writer) > before:
                    added.append(u.writer.moves[-1])
    except CORRUPT as e:
        # a zip that breaks part way: none of its games is trusted
        for moves in added:
            keys.discard(store.game_key(moves))
        u = _Unit()
        u.drop("corrupt_zip", f"{type(e).__name__}: {str(e)[:80]}")
    return u


def _spec(units: list[Unit], seed: int, fractions, min_moves: int) -> dict:
    h = hashlib.sha256()
    for unit in units:
        h.update(unit.name.encode() + b"\0")
        for p in unit.paths:
            h.update(str(p.name).encode() + b"\0")
    return {"version": store.VERSION, "seed": seed, "fractions": list(fractions),
            "min_moves": min_moves, "units": [u.name for u in units],
            "inputs": h.hexdigest()[:16]}


def import_games(sources: Sequence[str | Path], out: str | Path, seed: int = 0,
                 valid: float = 0.02, test: float = 0.02, min_moves: int = 50,
                 limit_zips: int | None = None,
                 say: Callable[[str], None] = print) -> dict:
    """Import (or continue importing) ``sources`` (see ``find_units``) into the
    store ``out`` (``go.games``); returns ``games.json``'s content. ``valid`` and
    ``test``: the fractions of games in those splits (by a hash of the moves and
    ``seed``). SourceError when the sources hold nothing, or ``out`` holds an
    import of other sources or settings."""
    if not (0 <= valid and 0 <= test and valid + test < 1):
        raise SourceError(f"valid and test must be fractions summing below 1, got "
                           f"{valid} and {test}")
    fractions = (1 - valid - test, valid, test)
    units = find_units(sources, limit_zips)
    out = Path(out)
    spec = _spec(units, seed, fractions, min_moves)
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / store.SPEC
    if spec_path.exists():
        old = json.loads(spec_path.read_text())
        if old != spec:
            key = next((k for k in spec if old.get(k) != spec[k]), "version")
            raise SourceError(f"{out} holds an import of other sources or settings ({key}"
                               f" differs); choose another --out")
    else:
        (out / store.SUMMARY).unlink(missing_ok=True)
        spec_path.write_text(json.dumps(spec, indent=2))
    keys: set = set()
    done = [u for u in units if (out / f"shard-{u.name}.npz").exists()]
    for unit in done:
        keys.update(int(k) for k in store.shard_keys(out / f"shard-{unit.name}.npz"))
    if done:
        say(f"{len(done)} of {len(units)} units already imported ({len(keys)} games)")
    index_cache: dict = {}
    t0 = time.perf_counter()
    fresh = 0
    for n, unit in enumerate(units):
        path = out / f"shard-{unit.name}.npz"
        if path.exists():
            continue
        start = time.perf_counter()
        meta = _index(unit.index, index_cache, say) if unit.kind == "tygem" else None
        u = _import_unit(unit, meta, keys, seed, fractions, min_moves)
        seconds = time.perf_counter() - start
        report = {"unit": unit.name, "read": u.read, "kept": len(u.writer),
                  "dropped": dict(u.dropped), "details": dict(u.details),
                  "seconds": round(seconds, 2)}
        u.writer.save(path, report)
        fresh += u.read
        rate = fresh / max(time.perf_counter() - t0, 1e-9)
        say(f"{unit.name} ({n + 1}/{len(units)}): {len(u.writer)} of {u.read} games kept, "
            f"{seconds:.0f} s; {rate:.0f} games/s")
    return _summarise(out, units, spec, time.perf_counter() - t0, say)


def _index(path: Path | None, cache: dict, say) -> dict | None:
    """The index of a kifu zip's year (one year kept in memory at a time)."""
    if path is None:
        return None
    if path not in cache:
        cache.clear()
        try:
            cache[path] = read_index(path.read_bytes())
        except CORRUPT as e:
            say(f"{path}: unreadable index ({type(e).__name__}: {e}): its games have "
                "no result")
            cache[path] = None
    return cache[path]


def _summarise(out: Path, units: list[Unit], spec: dict, seconds: float, say) -> dict:
    meta = {**spec, "shards": [f"shard-{u.name}.npz" for u in units], "read": 0, "kept": 0,
            "dropped": {r: 0 for r in REASON_NAMES}, "details": {},
            "splits": {s: {"games": 0, "moves": 0} for s in store.SPLITS},
            "winner": {"black": 0, "white": 0, "draw": 0}, "seconds_importing": 0.0,
            "units_this_run_seconds": round(seconds, 1)}
    details: Counter = Counter()
    for name in meta["shards"]:
        path = out / name
        report = store.shard_report(path)
        meta["read"] += report["read"]
        meta["kept"] += report["kept"]
        meta["seconds_importing"] += report["seconds"]
        for r, n in report["dropped"].items():
            meta["dropped"][r] = meta["dropped"].get(r, 0) + n
        details.update(report["details"])
        with np.load(path) as f:
            split, winner, off = f["split"], f["winner"], f["offsets"]
        lengths = np.diff(off)
        for k, s in enumerate(store.SPLITS):
            meta["splits"][s]["games"] += int((split == k).sum())
            meta["splits"][s]["moves"] += int(lengths[split == k].sum())
        for w, s in ((0, "black"), (1, "white"), (-1, "draw")):
            meta["winner"][s] += int((winner == w).sum())
    meta["details"] = dict(sorted(details.items()))
    meta["seconds_importing"] = round(meta["seconds_importing"], 1)
    tmp = out / (store.SUMMARY + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2))
    tmp.replace(out / store.SUMMARY)
    dropped = ", ".join(f"{n} {r}" for r, n in meta["dropped"].items() if n)
    splits = ", ".join(f"{v['games']} {k}" for k, v in meta["splits"].items())
    say(f"{out}: {meta['kept']} of {meta['read']} games kept "
        f"({splits}); "
        f"dropped: {dropped or 'none'}")
    return meta
