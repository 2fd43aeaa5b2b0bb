"""Import strong human Go games: the TYGEM 9-dan set and plain SGF files.

The TYGEM set (github.com/yenw/computer-go-dataset, ``TYGEM/``; docs/go_data.md)
is 134 monthly zips ``Kifu/YYYY-MM.zip``, each one text file of one game a line,
``id<TAB>;B[qd];W[dp];...`` (SGF points, moves only), and yearly index zips
``index/KifuYYYY.zip`` with one line a game: id, date, the players, the result
("B+Resign", "W+3.5", "B+Time", ...) and the number of moves. Komi 6.5, no
handicap and both players 9 dan are the set's defaults (the index does not
repeat them).

``import_games(sources, out)`` streams every zip (members are read, never
unpacked to disk) and every SGF file, keeps the games that are
  * 19x19 (``not_19x19``), even: no handicap, no set-up stones (``handicap``),
  * decided: a known winner (``no_result``; the mirror lacks the 2012-2014
    index zips, so those years' games have none),
  * at least ``min_moves`` moves long (``too_short``),
  * legal under our rules (``illegal_move``): ``go.sgf.replay_rules``, i.e.
    suicide illegal, positional superko, at most 4 * 361 plies; the replay here
    is plain Python (``first_illegal``), tested against ``go.rules``,
  * new (``duplicate``: the same moves as a game kept earlier),
and counts every other game under its reason (``malformed`` lines or SGF,
``corrupt_zip``, the above), with the details (which illegality, which
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
from agz_jax.go import sgf
from agz_jax.go.sgf import REASONS

SIZE = store.SIZE
PASS = store.PASS
MAX_PLIES = 4 * SIZE * SIZE  # sgf.replay_rules(19).max_moves
TYGEM_KOMI = 6.5
TYGEM_RANK = 8  # 9 dan, as sgf.Record.rank
SGF_BATCH = 2000
REASON_NAMES = ("corrupt_zip", "malformed", "not_19x19", "handicap", "no_result",
                "too_short", "illegal_move", "duplicate")
KIFU_NAME = re.compile(r"(\d{4})-(\d{2})\.zip")
INDEX_NAME = re.compile(r"Kifu(\d{4})\.zip")


class SourceError(ValueError):
    """Sources that cannot be imported at all (a missing path, nothing to read,
    an output directory holding another import): the message says which."""


# ----------------------------------------------------------------------------- the replay


def _padded_tables(size: int):
    w = size + 2
    to_pad = [(a // size + 1) * w + a % size + 1 for a in range(size * size)]
    board = bytearray([3]) * (w * w)
    for p in to_pad:
        board[p] = 0
    rng = np.random.default_rng(0x7E6E + size)
    zob = rng.integers(1, 2**63, (3, w * w), dtype=np.int64).tolist()
    return w, to_pad, bytes(board), zob


_TABLES = {}


def _dead(board, start: int, colour: int, w: int):
    """The stones of ``start``'s chain when it has no liberty, else None."""
    stack = [start]
    stones = {start}
    while stack:
        q = stack.pop()
        for n in (q - w, q + w, q - 1, q + 1):
            v = board[n]
            if v == 0:
                return None
            if v == colour and n not in stones:
                stones.add(n)
                stack.append(n)
    return stones


def first_illegal(actions: Sequence[int], size: int = SIZE,
                  max_plies: int | None = None) -> tuple[int, int] | None:
    """(ply, reason) of the first illegal move of a game played from the empty
    board, black first and the colours alternating (``actions``: ``row * size +
    col``, ``size * size`` the pass), or None when every move is legal. ``reason``
    indexes ``sgf.REASONS`` and is what ``sgf.replay``'s ``why`` says of that
    move: occupied, a simple-ko retake, suicide, a repeated board (positional
    superko; a pass never repeats), or past the move cap (``max_plies``, default
    ``4 * size**2`` as ``sgf.replay_rules``). Plain Python: chains found by flood
    fill, boards remembered by 64-bit Zobrist hashes."""
    if size not in _TABLES:
        _TABLES[size] = _padded_tables(size)
    w, to_pad, empty, zob = _TABLES[size]
    cap = 4 * size * size if max_plies is None else max_plies
    npass = size * size
    if len(actions) and not 0 <= min(actions) <= max(actions) <= npass:
        raise ValueError(f"actions must be in 0..{npass}, got {min(actions)}..{max(actions)}")
    board = bytearray(empty)
    h = 0
    seen = {0}
    ko = -1
    me, opp = 1, 2
    for i, a in enumerate(actions):
        if i >= cap:
            return i, 5
        if a == npass:
            ko = -1
            me, opp = opp, me
            continue
        p = to_pad[a]
        if board[p]:
            return i, 1
        if p == ko:
            return i, 2
        board[p] = me
        h ^= zob[me][p]
        captured = []
        for n in (p - w, p + w, p - 1, p + 1):
            if board[n] == opp:
                dead = _dead(board, n, opp, w)
                if dead:
                    zo = zob[opp]
                    for q in dead:
                        board[q] = 0
                        h ^= zo[q]
                    captured.extend(dead)
        if not captured and _dead(board, p, me, w) is not None:
            return i, 3
        if h in seen:
            return i, 4
        seen.add(h)
        ko = -1
        if len(captured) == 1:
            # a lone stone that took one and has one liberty: the ko (go.board.place)
            nbrs = [board[n] for n in (p - w, p + w, p - 1, p + 1)]
            if me not in nbrs and nbrs.count(0) == 1:
                ko = captured[0]
        me, opp = opp, me
    return None


# ----------------------------------------------------------------------------- parsing


def _tokens() -> tuple[dict, dict]:
    """{b"B[qd]": action} for black and for white, passes ("[]", "[tt]") included."""
    out = ({}, {})
    for colour, letter in enumerate("BW"):
        for a in range(SIZE * SIZE):
            r, c = divmod(a, SIZE)
            out[colour][f"{letter}[{chr(97 + c)}{chr(97 + r)}]".encode()] = a
        out[colour][f"{letter}[]".encode()] = PASS
        out[colour][f"{letter}[tt]".encode()] = PASS
    return out


TOKENS = _tokens()


class Dropped(Exception):
    """A game not kept: ``reason`` (one of ``REASON_NAMES``) and ``detail``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def parse_line(line: bytes) -> tuple[str, bytes]:
    """(id, moves as int16 bytes) of one line of a TYGEM kifu file
    (``Dropped("malformed")`` when it is not ``id<TAB>;B[..];W[..]...``)."""
    gid, tab, body = line.strip(b"\r\n").partition(b"\t")
    gid = gid.strip()
    if not tab or not gid:
        raise Dropped("malformed", "no id and tab")
    if not body.startswith(b";"):
        raise Dropped("malformed", "no moves")
    parts = body.rstrip().split(b";")[1:]
    actions = []
    for i, t in enumerate(parts):
        a = TOKENS[i % 2].get(t)
        if a is None:
            if t in TOKENS[1 - i % 2]:
                raise Dropped("malformed", "moves out of turn")
            raise Dropped("malformed", "not a move of a 19x19 board")
        actions.append(a)
    try:
        text = gid.decode("ascii")
    except UnicodeDecodeError:
        raise Dropped("malformed", "id is not text") from None
    return text, np.asarray(actions, "<i2").tobytes()


class Meta(NamedTuple):
    result: str
    date: str


def winner_of(result: str) -> int | None:
    """0 black, 1 white, -1 a draw, None unknown (as ``sgf.Record.winner``)."""
    return sgf.Record(size=SIZE, result=result).winner()


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


# ----------------------------------------------------------------------------- sources


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


# ----------------------------------------------------------------------------- filters


class Kept(NamedTuple):
    moves: bytes
    winner: int
    komi: float
    black_rank: int
    white_rank: int
    game_id: str
    date: str
    result: str


def check_game(moves: bytes, min_moves: int) -> None:
    """``Dropped`` when a game is too short or breaks the rules."""
    n = len(moves) // 2
    if n < min_moves:
        raise Dropped("too_short", f"fewer than {min_moves} moves")
    bad = first_illegal(np.frombuffer(moves, "<i2").tolist())
    if bad is not None:
        raise Dropped("illegal_move", REASONS[bad[1]])


def tygem_game(line: bytes, meta: dict[str, Meta] | None, min_moves: int) -> Kept:
    """A kifu line checked (``Dropped`` with the reason otherwise)."""
    gid, moves = parse_line(line)
    if meta is None:
        raise Dropped("no_result", "no index for the year")
    m = meta.get(gid)
    if m is None:
        raise Dropped("no_result", "not in the index")
    winner = winner_of(m.result)
    if winner is None:
        raise Dropped("no_result", f"result {m.result[:20]!r}")
    check_game(moves, min_moves)
    return Kept(moves, winner, TYGEM_KOMI, TYGEM_RANK, TYGEM_RANK, gid, m.date, m.result)


def sgf_game(path: Path, min_moves: int) -> Kept:
    """An SGF file checked (``Dropped`` with the reason otherwise)."""
    try:
        record = sgf.read(path)
    except sgf.SgfError as e:
        text = str(e)
        if ": SZ:" in text:
            raise Dropped("not_19x19", "SZ outside 2..19") from None
        raise Dropped("malformed", text.split(": ", 2)[1] if text.count(": ") >= 2
                      else "unreadable") from None
    except Exception as e:  # noqa: BLE001  (sgfmill on input it was not written for)
        raise Dropped("malformed", f"the SGF parser failed ({type(e).__name__})") from None
    if record.size != SIZE:
        raise Dropped("not_19x19", f"{record.size}x{record.size}")
    if record.handicap or record.black_setup or record.white_setup:
        raise Dropped("handicap", "HA or set-up stones")
    winner = record.winner()
    if winner is None:
        raise Dropped("no_result", f"RE {record.result[:20]!r}")
    colours = [c for c, _ in record.moves]
    if colours != [i % 2 for i in range(len(colours))]:
        raise Dropped("malformed", "moves out of turn")
    moves = np.asarray([a for _, a in record.moves], "<i2").tobytes()
    check_game(moves, min_moves)
    return Kept(moves, winner, float(record.komi), record.rank(0), record.rank(1),
                path.stem, "", record.result)


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
