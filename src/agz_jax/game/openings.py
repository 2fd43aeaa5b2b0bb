"""Opening positions: games that start from a few stones already on the board.

Freestyle gomoku on 15x15 is a first-player win, and a net that plays itself
from the empty board soon learns mostly that black wins. Tournaments (Gomocup's
freestyle rule among them) therefore start every game from a position of a few
stones chosen to be roughly balanced, and play each opening twice with the
colours swapped. Self-play, gating and evaluation do the same here when
``openings.path`` names a set.

A set is a text file, one opening per line: the moves in order, black first,
as ``row,col`` pairs (0-based) separated by spaces; ``#`` starts a comment.
Every opening of a set has the same number of stones, so that in a match all
games have the same colour to move at every ply (``arena.play_match`` relies
on it). A bare name (no ``/``, no ``.txt``) is one of the sets shipped in
``agz_jax/data/`` (``available()``); their files say how they were made.

In JAX an opening set is ``int32[K, M]``: K openings of M moves.
``start_states`` sets up a batch of them inside a jitted function.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game.gomoku import Rules, State

DATA = Path(__file__).resolve().parents[1] / "data"


class OpeningsError(ValueError):
    """An opening set cannot be read or does not fit the board."""


def available() -> list[str]:
    """Names of the shipped opening sets."""
    return sorted(p.stem for p in DATA.glob("*.txt"))


def resolve(name_or_path: str) -> Path:
    """The file of a shipped set's name, or the path itself."""
    if "/" not in name_or_path and not name_or_path.endswith(".txt"):
        path = DATA / f"{name_or_path}.txt"
        if not path.exists():
            raise OpeningsError(f"no shipped opening set {name_or_path!r}; the shipped sets "
                                f"are {available()}, or give a file path")
        return path
    path = Path(name_or_path)
    if not path.is_file():
        raise OpeningsError(f"opening set {str(path)!r} is not a file")
    return path


def parse(text: str, size: int, source: str = "openings") -> np.ndarray:
    """int32[K, M] from an opening file's text; raises OpeningsError naming the line."""
    rows: list[list[int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        moves = []
        for field in line.split():
            try:
                r, c = (int(v) for v in field.split(","))
            except ValueError:
                raise OpeningsError(f"{source} line {number}: {field!r} is not row,col") from None
            if not (0 <= r < size and 0 <= c < size):
                raise OpeningsError(f"{source} line {number}: {r},{c} is off the "
                                    f"{size}x{size} board")
            moves.append(r * size + c)
        if len(set(moves)) != len(moves):
            raise OpeningsError(f"{source} line {number}: a point is played twice")
        if rows and len(moves) != len(rows[0]):
            raise OpeningsError(f"{source} line {number}: {len(moves)} stones, the set's first "
                                f"opening has {len(rows[0])}; all openings of a set must have "
                                "the same number of stones")
        rows.append(moves)
    if not rows:
        raise OpeningsError(f"{source} holds no opening")
    return np.asarray(rows, np.int32)


def load(name_or_path: str, size: int) -> np.ndarray:
    """The opening set ``name_or_path`` (``resolve``) for a ``size`` board."""
    path = resolve(name_or_path)
    return parse(path.read_text(), size, str(path))


def format_set(moves: np.ndarray, size: int, header: str = "") -> str:
    """The text of an opening file (``parse``'s inverse)."""
    lines = [f"# {h}" if h else "#" for h in header.splitlines()]
    for row in np.asarray(moves):
        lines.append(" ".join(f"{a // size},{a % size}" for a in row))
    return "\n".join(lines) + "\n"


def renju_canonical(size: int = 15) -> np.ndarray:
    """int32[26, 3]: the 26 canonical renju openings (the RIF's opening rule):
    black on the centre, white next to it, orthogonally (13 *direct* openings)
    or diagonally (13 *indirect*), and black's second stone anywhere else in
    the central 5x5 square, one opening per class under the reflection that
    keeps the first two stones in place. Direct first, each group in row-major
    order of the third stone."""
    c = size // 2
    out = []
    for white, mirror in (((c - 1, c), lambda dr, dc: (dr, -dc)),  # direct: white above
                          ((c - 1, c + 1), lambda dr, dc: (-dc, -dr))):  # indirect
        seen = set()
        for dr in range(-2, 3):
            for dc in range(-2, 3):
                point = (c + dr, c + dc)
                if point in ((c, c), white):
                    continue
                mr, mc = mirror(dr, dc)
                key = min(point, (c + mr, c + mc))
                if key in seen:
                    continue
                seen.add(key)
                out.append([c * size + c, white[0] * size + white[1], key[0] * size + key[1]])
    return np.asarray(out, np.int32)


def translated(moves: np.ndarray, size: int, shift: int) -> np.ndarray:
    """int32[K', M]: each opening of ``moves`` int32[K, M] moved by every (rows,
    columns) offset in [-shift, shift]^2 that keeps all its stones on the board,
    the unmoved opening first and then the offsets in row-major order; drawing
    uniformly from it draws an opening (weighted by how many offsets fit it, all
    of them where the set lies ``shift`` points clear of the edges) and an offset."""
    moves = np.asarray(moves, np.int32)
    rows, cols = moves // size, moves % size
    offsets = [(0, 0)] + [(dr, dc) for dr in range(-shift, shift + 1)
                          for dc in range(-shift, shift + 1) if (dr, dc) != (0, 0)]
    out = []
    for r, c in zip(rows, cols, strict=True):
        for dr, dc in offsets:
            if (0 <= r.min() + dr and r.max() + dr < size
                    and 0 <= c.min() + dc and c.max() + dc < size):
                out.append((r + dr) * size + c + dc)
    return np.asarray(out, np.int32).reshape(-1, moves.shape[1])


EMPTY = -1  # the index of "no opening": the empty board


def start_states(rules: Rules, openings: np.ndarray | None, index: jax.Array) -> State:
    """States [B] after the openings ``index`` int32[B] of the set ``openings``
    int32[K, M]; the empty board where ``index`` is ``EMPTY`` or ``openings`` is
    None. Jittable."""
    index = jnp.asarray(index)
    if openings is None or openings.shape[1] == 0:
        return jax.vmap(lambda _: rules.init())(index)
    table = jnp.asarray(openings, jnp.int32)

    def one(i):
        def put(t, s):
            stepped = rules.step(s, table[jnp.maximum(i, 0), t])
            return jax.tree.map(lambda a, b: jnp.where(i == EMPTY, b, a), stepped, s)

        return jax.lax.fori_loop(0, table.shape[1], put, rules.init())

    return jax.vmap(one)(index)


def sample_index(openings: np.ndarray | None, key: jax.Array, num: int,
                 empty_fraction: float = 0.0) -> jax.Array:
    """int32[num]: openings drawn uniformly (with replacement) by ``key``, each
    ``EMPTY`` instead with probability ``empty_fraction`` (always without a set)."""
    if openings is None:
        return jnp.full(num, EMPTY, jnp.int32)
    k_pick, k_empty = jax.random.split(key)
    index = jax.random.randint(k_pick, (num,), 0, openings.shape[0])
    if empty_fraction > 0:
        index = jnp.where(jax.random.uniform(k_empty, (num,)) < empty_fraction, EMPTY, index)
    return index.astype(jnp.int32)


def sample_states(rules: Rules, openings: np.ndarray | None, key: jax.Array,
                  num: int, empty_fraction: float = 0.0) -> State:
    """``num`` states of openings drawn by ``sample_index``."""
    return start_states(rules, openings, sample_index(openings, key, num, empty_fraction))


def paired_states(rules: Rules, openings: np.ndarray | None, key: jax.Array,
                  num_games: int) -> tuple[State, jax.Array]:
    """States [num_games] for a match whose first half has A as black and second half
    A as white (``arena.play_match``), and each game's opening int32[num_games]:
    both halves get the same openings, so every opening is played once with each
    colour."""
    half = num_games // 2
    count = 1 if openings is None else openings.shape[0]
    # Without replacement while the set lasts: distinct openings, each twice.
    index = jax.random.permutation(key, count)[jnp.arange(half) % count]
    index = jnp.concatenate([index, index])
    return start_states(rules, openings, index), index
