"""A plain-Python Go referee: slow, obviously correct, no JAX, no numpy.

It is the oracle ``agz_jax.go.rules`` is tested against, written the dumbest way
that is still fast enough for tens of thousands of positions:

* the board is a list of ``size * size`` ints (0 empty, +1 black, -1 white);
* a move is tried on a copy: place the stone, remove every enemy group next to
  it that has no liberty left, then the move is suicide if its own group has
  none; groups are found by flood fill each time;
* ko: every board of the game is remembered. Positional superko forbids a move
  that recreates any of them; simple ko forbids one that recreates the board
  from before the opponent's last move (which is what a ko recapture does);
* area scoring: each empty region (flood fill) belongs to a colour when every
  stone next to it is of that colour; score = black area - white area - komi.

Actions are ``row * size + col``; ``size * size`` is the pass.
"""

from __future__ import annotations


def neighbours(size, p):
    r, c = divmod(p, size)
    out = []
    if r > 0:
        out.append(p - size)
    if r < size - 1:
        out.append(p + size)
    if c > 0:
        out.append(p - 1)
    if c < size - 1:
        out.append(p + 1)
    return out


def group(board, size, p):
    """(stones, liberties): the sets of points of ``p``'s group and its liberties."""
    colour = board[p]
    stones, libs, todo = {p}, set(), [p]
    while todo:
        q = todo.pop()
        for n in neighbours(size, q):
            if board[n] == 0:
                libs.add(n)
            elif board[n] == colour and n not in stones:
                stones.add(n)
                todo.append(n)
    return stones, libs


def try_move(board, size, p, colour):
    """(new board, captured count) after stone ``colour`` (+1/-1) on empty ``p``,
    or None when the move is suicide."""
    new = list(board)
    new[p] = colour
    captured = 0
    for n in neighbours(size, p):
        if new[n] == -colour:
            stones, libs = group(new, size, n)
            if not libs:
                for s in stones:
                    new[s] = 0
                captured += len(stones)
    if not group(new, size, p)[1]:
        return None
    return new, captured


class Game:
    """One game from the empty board (or ``board``), black to move."""

    def __init__(self, size, komi=7.5, superko=True, max_moves=None, board=None, to_play=1):
        self.size, self.komi, self.superko = size, komi, superko
        self.max_moves = 2 * size * size if max_moves is None else max_moves
        self.board = [0] * (size * size) if board is None else list(board)
        self.to_play = to_play  # +1 black, -1 white
        self.history = [tuple(self.board)]  # the board after each ply
        self.passes = 0
        self.num_moves = 0
        self.done = False

    @property
    def pass_action(self):
        return self.size * self.size

    def result_of(self, p):
        """The board after the side to move plays ``p``, or None if illegal."""
        if self.done or not 0 <= p <= self.pass_action:
            return None
        if p == self.pass_action:
            return list(self.board)
        if self.board[p] != 0:
            return None
        tried = try_move(self.board, self.size, p, self.to_play)
        if tried is None:
            return None
        new = tuple(tried[0])
        if self.superko:
            if new in set(self.history):
                return None
        elif len(self.history) >= 2 and new == self.history[-2]:
            return None
        return list(new)

    def legal(self):
        """bool list [A + 1]."""
        return [self.result_of(p) is not None for p in range(self.pass_action + 1)]

    def play(self, p):
        """Play ``p``; return False (and change nothing) when it is illegal."""
        new = self.result_of(p)
        if new is None:
            return False
        self.passes = self.passes + 1 if p == self.pass_action else 0
        self.board = new
        self.history.append(tuple(new))
        self.to_play = -self.to_play
        self.num_moves += 1
        self.done = self.passes >= 2 or self.num_moves >= self.max_moves
        return True

    def liberties(self):
        """int list [A]: liberties of the group on each point (0 when empty)."""
        return [len(group(self.board, self.size, p)[1]) if self.board[p] else 0
                for p in range(self.pass_action)]

    def areas(self):
        """(black area, white area)."""
        area = {1: 0, -1: 0}
        seen = set()
        for p, v in enumerate(self.board):
            if v:
                area[v] += 1
            elif p not in seen:
                region, border, todo = {p}, set(), [p]
                while todo:
                    q = todo.pop()
                    for n in neighbours(self.size, q):
                        if self.board[n] == 0 and n not in region:
                            region.add(n)
                            todo.append(n)
                        elif self.board[n]:
                            border.add(self.board[n])
                seen |= region
                if len(border) == 1:
                    area[border.pop()] += len(region)
        return area[1], area[-1]

    def score(self):
        b, w = self.areas()
        return b - w - self.komi
