"""A plain-Python gomoku referee: slow, obviously correct, no JAX, no numpy.

It is the oracle the JAX rules (``agz_jax.game.gomoku``) are tested against, so it is
written the dumbest way that is still fast enough for thousands of games:

* the board is a list of lists, ``board[row][col]`` in {0 empty, +1 black, -1 white};
* after every move the WHOLE board is scanned for runs (not only the lines through
  the last move);
* 'freestyle': a run of five or more wins; 'standard': a run of exactly five wins,
  six or more does not;
* the game is a draw when the board is full without a win; a finished game
  ignores further moves.

The observable fields mirror ``agz_jax.game.gomoku.State`` so the two can be compared
field by field (colours are 0 black / 1 white, actions are ``row * size + col``).
"""

from __future__ import annotations

import functools

BLACK, WHITE = 0, 1
# Row/column steps of the four line directions.
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


def stone_of(colour):
    """+1 for black (0), -1 for white (1)."""
    return 1 if colour == BLACK else -1


@functools.cache
def lines(size):
    """Every full line of the board, as lists of (row, col): all rows, columns,
    diagonals and anti-diagonals (including the short ones near the corners)."""
    out = []
    for dr, dc in DIRECTIONS:
        for r in range(size):
            for c in range(size):
                if 0 <= r - dr < size and 0 <= c - dc < size:
                    continue  # not the first point of its line
                line = []
                rr, cc = r, c
                while 0 <= rr < size and 0 <= cc < size:
                    line.append((rr, cc))
                    rr, cc = rr + dr, cc + dc
                out.append(line)
    return out


def runs(board):
    """Every maximal run of equal stones on the board, along every line.

    Returns a list of ``(stone, length)``; a lone stone is a run of length 1 in
    each of the 4 directions.
    """
    found = []
    for line in lines(len(board)):
        prev, length = 0, 0
        for r, c in line:
            v = board[r][c]
            if v == prev:
                length += 1
            else:
                if prev != 0:
                    found.append((prev, length))
                prev, length = v, 1
        if prev != 0:
            found.append((prev, length))
    return found


def winning_stones(board, rule):
    """The set of stones (+1/-1) that have a winning run somewhere on the board."""
    if rule == "freestyle":
        return {s for s, length in runs(board) if length >= 5}
    if rule == "standard":
        return {s for s, length in runs(board) if length == 5}
    raise ValueError(f"unknown rule {rule!r}")


def longest_run(board, stone):
    return max([length for s, length in runs(board) if s == stone], default=0)


class Game:
    """One game of gomoku, mutated in place by ``play``."""

    def __init__(self, size, rule="freestyle"):
        self.size = size
        self.rule = rule
        self.board = [[0] * size for _ in range(size)]
        self.to_play = BLACK
        self.last_action = -1
        self.num_moves = 0
        self.winner = -1
        self.done = False
        self.illegal = False

    @property
    def num_actions(self):
        return self.size * self.size

    def copy(self):
        g = Game(self.size, self.rule)
        g.board = [row[:] for row in self.board]
        g.to_play = self.to_play
        g.last_action = self.last_action
        g.num_moves = self.num_moves
        g.winner = self.winner
        g.done = self.done
        g.illegal = self.illegal
        return g

    def is_empty(self, action):
        r, c = divmod(action, self.size)
        return self.board[r][c] == 0

    def legal_mask(self):
        """A list of bools over actions: empty points, all False once the game is over."""
        return [(not self.done) and v == 0 for v in self.flat_board()]

    def play(self, action):
        """Play ``action`` for the side to move.

        A finished game ignores the move. An occupied or off-board action leaves
        the game as it is and sets the (sticky) ``illegal`` flag.
        """
        if self.done:
            return
        if not (0 <= action < self.num_actions) or not self.is_empty(action):
            self.illegal = True
            return
        r, c = divmod(action, self.size)
        mover = self.to_play
        self.board[r][c] = stone_of(mover)
        self.num_moves += 1
        self.last_action = action
        self.to_play = 1 - mover
        winners = winning_stones(self.board, self.rule)
        # Only the mover's stones changed, so only the mover can have a new
        # winning run; any other winning run would have ended the game earlier.
        assert winners <= {stone_of(mover)}, winners
        if winners:
            self.winner = mover
            self.done = True
        elif all(v != 0 for row in self.board for v in row):
            self.done = True

    def flat_board(self):
        return [v for row in self.board for v in row]

    def observe_planes(self):
        """The three planes of ``observe`` as flat lists over actions: (X, Y, L)."""
        me = stone_of(self.to_play)
        flat = self.flat_board()
        x = [float(v == me) for v in flat]
        y = [float(v == -me) for v in flat]
        last = [float(a == self.last_action) for a in range(self.num_actions)]
        return x, y, last

    def observe(self):
        """[H][W][3] floats: [X own stones, Y opponent stones, L last move].

        "Own" is the side to move; L is one-hot on the previous move (by the
        opponent), all zeros before the first move.
        """
        x, y, last = self.observe_planes()
        n = self.size
        return [[[x[a], y[a], last[a]] for a in range(r * n, r * n + n)] for r in range(n)]

    def fields(self):
        """The scalar fields, in the order of ``agz_jax.game.gomoku.State`` (board aside)."""
        return {
            "to_play": self.to_play,
            "last_action": self.last_action,
            "num_moves": self.num_moves,
            "winner": self.winner,
            "done": self.done,
            "illegal": self.illegal,
        }


def play_all(size, rule, actions):
    """The game after playing ``actions`` from the empty board."""
    g = Game(size, rule)
    for a in actions:
        g.play(a)
    return g
