// The analysis board. The game lives here: a line of actions (row * size + col)
// and a cursor (how many of them are on the board; the rest can be redone). The
// server keeps nothing: every request carries the moves, which it replays and
// validates, and answers with the position's status, the engine's move or its
// analysis of the position to play. While the position stands, the analysis
// deepens ("keep thinking"): request after request, the engine grows its tree
// of the position and the candidates' visits grow, until the tree is full.
"use strict";

const $ = (id) => document.getElementById(id);
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const SHOWN_RANKS = 5;  // candidates numbered on the board (the table lists more)

const game = {
  info: null, line: [], times: [], cursor: 0, human: 0,
  statuses: new Map(),   // position key -> {done, winner, line, to_play}
  analyses: new Map(),   // position key + sims -> the server's analysis
  engineLast: null,      // the analysis behind the engine's last move
  busy: null,            // null, "thinking" (engine move), "analysing", "checking"
  deepening: false,      // the analysis of the position is growing (not busy: moves go on)
  hint: null,            // {key, move}
  focus: 0, gen: 0, controller: null, since: 0, note: "",
};

// -- helpers -----------------------------------------------------------------------------

async function api(path, body, signal) {
  const init = body === undefined ? { signal } : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    signal,
  };
  const response = await fetch(path, init);
  if (!response.ok) {
    let reason = response.statusText;
    try { reason = (await response.json()).error || reason; } catch (e) { /* not JSON */ }
    throw new Error(reason);
  }
  return response;
}

const size = () => game.info.size;
const mode = () => $("mode").value;
const rule = () => $("rule").value;
const position = () => game.line.slice(0, game.cursor);
const toPlay = () => game.cursor % 2;  // 0 black, 1 white
const colourName = (c) => (c === 0 ? "black" : "white");
const key = () => `${rule()}|${position().join(",")}`;
const analysisKey = () => `${key()}|${$("sims").value}`;
const status = () => game.statuses.get(key()) || null;
const analysis = () => game.analyses.get(analysisKey()) || null;
const over = () => { const s = status(); return s !== null && s.done; };
const pct = (p) => `${(100 * p).toFixed(0)}%`;
const signed = (v) => (v >= 0 ? "+" : "") + v.toFixed(2);

function coord(a) {
  return `${LETTERS[a % size()]}${size() - Math.floor(a / size())}`;
}

function showError(text) { $("error").textContent = text || ""; }

function sims() {
  const n = Number($("sims").value);
  if (!Number.isInteger(n) || n < 1 || n > game.info.max_sims) {
    throw new Error(`simulations must be a whole number in 1..${game.info.max_sims}`);
  }
  return n;
}

// The analysis is shown for the position: analysis on, the game not over, and in
// play mode only on the player's turn.
function analysisWanted() {
  return $("analysis").checked && !over() && !(mode() === "play" && toPlay() !== game.human);
}

// The shown analysis can grow: a search's tree, not yet full.
function deepenWanted() {
  const an = analysis();
  return $("deepen").checked && analysisWanted() && an !== null && !an.complete &&
    (an.reason === "search" || an.reason === "block" || an.reason === "defend") && an.total < game.info.max_sims;
}

// Play mode: the engine moves when it is its turn at the end of the line.
function engineToMove() {
  return mode() === "play" && toPlay() !== game.human && game.cursor === game.line.length &&
    !over();
}

function canPlace() {
  return game.busy !== "thinking" && !over() &&
    (mode() === "analyse" || toPlay() === game.human);
}

function starPoints() {
  const n = size();
  const d = n >= 13 ? 3 : 2;
  const points = new Set();
  if (n >= 9) for (const y of [d, n - 1 - d]) for (const x of [d, n - 1 - d]) points.add(y * n + x);
  if (n % 2 === 1) points.add(((n - 1) / 2) * n + (n - 1) / 2);
  return points;
}

// -- the board -----------------------------------------------------------------------------

function buildBoard() {
  const n = size();
  const board = $("board");
  board.style.gridTemplateColumns = `var(--label) repeat(${n}, var(--cell))`;
  board.replaceChildren();
  const stars = starPoints();
  for (let y = 0; y < n; y++) {
    const label = document.createElement("div");
    label.className = "coord row";
    label.textContent = n - y;
    board.appendChild(label);
    for (let x = 0; x < n; x++) {
      const a = y * n + x;
      const cell = document.createElement("button");
      cell.className = "cell";
      if (x === 0) cell.classList.add("left");
      if (x === n - 1) cell.classList.add("right");
      if (y === 0) cell.classList.add("top");
      if (y === n - 1) cell.classList.add("bottom");
      if (stars.has(a)) cell.classList.add("star");
      cell.dataset.x = x;
      cell.dataset.y = y;
      cell.dataset.action = a;
      cell.dataset.coord = coord(a);
      cell.tabIndex = -1;
      cell.addEventListener("click", () => { game.focus = a; place(a); });
      cell.addEventListener("keydown", boardKey);
      board.appendChild(cell);
    }
  }
  board.appendChild(document.createElement("div"));
  for (let x = 0; x < n; x++) {
    const label = document.createElement("div");
    label.className = "coord col";
    label.textContent = LETTERS[x];
    board.appendChild(label);
  }
  game.focus = Math.floor(n / 2) * n + Math.floor(n / 2);
}

function cells() { return $("board").querySelectorAll(".cell"); }

function render() {
  const pos = position();
  const stones = new Map(pos.map((a, i) => [a, i]));
  const last = pos.length ? pos[pos.length - 1] : -1;
  const st = status();
  const won = new Set(st ? st.line : []);
  const an = $("analysis").checked ? analysis() : null;
  const policy = an ? an.policy : null;
  const peak = policy ? Math.max(...policy, 1e-9) : 1;
  const ranks = new Map(an ? an.candidates.slice(0, SHOWN_RANKS).map((c, i) => [c.move, i + 1]) : []);
  const hint = game.hint && game.hint.key === key() ? game.hint.move : -1;
  const numbers = $("numbers").checked;
  const placeable = canPlace();
  for (const cell of cells()) {
    const a = Number(cell.dataset.action);
    const parts = [];
    const children = [];
    cell.tabIndex = a === game.focus ? 0 : -1;
    cell.classList.toggle("last", a === last);
    cell.classList.toggle("win", won.has(a));
    cell.classList.toggle("hint", a === hint);
    const foul = st && st.forbidden ? st.forbidden[a] : undefined;
    cell.classList.toggle("forbidden", foul !== undefined);
    cell.setAttribute("aria-disabled", String(!placeable || stones.has(a)));
    for (const k of ["p", "rank", "move"]) delete cell.dataset[k];
    cell.title = cell.dataset.coord;
    parts.push(cell.dataset.coord);
    if (foul !== undefined) {
      const cross = document.createElement("div");
      cross.className = "foul";
      cross.textContent = "\u00d7";
      children.push(cross);
      cell.title += `: forbidden for black (${foul})`;
      parts.push(`forbidden for black, ${foul}`);
    }
    if (stones.has(a)) {
      const i = stones.get(a);
      const stone = document.createElement("div");
      stone.className = `stone ${colourName(i % 2)}`;
      if (numbers) stone.textContent = String(i + 1);
      children.push(stone);
      cell.dataset.move = i + 1;
      parts.push(`${colourName(i % 2)} stone, move ${i + 1}`);
    } else if (policy && policy[a] > 0) {
      const heat = document.createElement("div");
      heat.className = "heat";
      heat.style.opacity = (0.1 + 0.75 * policy[a] / peak).toFixed(3);
      children.push(heat);
      cell.dataset.p = policy[a];
      const q = an.q[a] === null ? "" : `, win ${pct((an.q[a] + 1) / 2)}`;
      cell.title += `: ${an.visits[a]} visits (${(100 * policy[a]).toFixed(1)}%)${q}`;
      parts.push(`${an.visits[a]} visits${q}`);
    }
    if (ranks.has(a)) {
      const rank = document.createElement("span");
      rank.className = "rank";
      rank.textContent = ranks.get(a);
      children.push(rank);
      cell.dataset.rank = ranks.get(a);
      parts.push(`candidate ${ranks.get(a)}`);
    }
    if (a === hint) {
      const ring = document.createElement("div");
      ring.className = "ring";
      children.push(ring);
      parts.push("hint");
    }
    cell.replaceChildren(...children);
    cell.setAttribute("aria-label", parts.join(", "));
  }
  renderStatus(st, an);
  renderAnalysis(an);
  renderMoves();
}

function renderStatus(st, an) {
  let text;
  let state;
  if (st && st.done) {
    state = "over";
    if (st.winner < 0) text = "Draw: the board is full.";
    else if (mode() === "play") {
      text = st.winner === game.human ? `You win (${colourName(st.winner)})!`
                                      : `The engine wins (${colourName(st.winner)}).`;
    } else text = `${colourName(st.winner) === "black" ? "Black" : "White"} wins.`;
  } else if (game.busy === "thinking") {
    state = "thinking"; text = "The engine is thinking...";
  } else if (game.busy === "analysing") {
    state = "analysing"; text = `Analysing (${colourName(toPlay())} to move)...`;
  } else if (game.busy === "checking") {
    state = "checking"; text = "Checking the position...";
  } else if (mode() === "play" && toPlay() !== game.human) {
    state = "waiting"; text = "The engine's turn: redo (→) or undo (←) to go on.";
  } else if (mode() === "play") {
    state = "your-move"; text = `Your move (${colourName(game.human)}).`;
  } else {
    state = "ready"; text = `${colourName(toPlay()) === "black" ? "Black" : "White"} to move.`;
  }
  if (game.note && !game.busy) text += ` ${game.note}`;
  $("status").textContent = text;
  $("status").dataset.state = state;
  $("thinking").hidden = !game.busy && !game.deepening;
  $("board").setAttribute("aria-busy", String(Boolean(game.busy)));

  // The bar: black's chance to win; empty and grey while nothing is known.
  let black = null;
  if (st && st.done) black = st.winner < 0 ? 0.5 : (st.winner === 0 ? 1 : 0);
  else if (an && an.win_prob !== null) black = an.to_play === 0 ? an.win_prob : 1 - an.win_prob;
  $("bar").classList.toggle("unknown", black === null);
  $("winbar").style.width = black === null ? "0%" : `${100 * black}%`;
  $("blackprob").textContent = black === null ? "-" : pct(black);
  $("whiteprob").textContent = black === null ? "-" : pct(1 - black);
  $("winprob").textContent = black === null ? "no estimate" : "";
}

function renderAnalysis(an) {
  const body = $("candidates").querySelector("tbody");
  body.replaceChildren();
  $("candidates").hidden = !an;
  $("details").dataset.deepening = String(game.deepening);
  $("details").dataset.total = an ? an.total : "";
  if (!an) {
    $("details").textContent = over() || !$("analysis").checked ? "" : "No analysis yet.";
  } else {
    const ms = `${an.elapsed_ms.toFixed(0)} ms`;
    $("details").textContent = `${colourName(an.to_play)} to move: ${an.total} ` +
      (an.carried > 0 ? `simulations (the last ${an.simulations} in ${ms})` : `simulations in ${ms}`) +
      (an.reason === "search" ? "" : ` (${an.reason})`) +
      (an.value === null ? "" : `, value ${signed(an.value)}`) +
      (game.deepening ? ", thinking..." : "");
    an.candidates.forEach((c, i) => {
      const row = document.createElement("tr");
      row.dataset.move = c.move;
      row.title = `play ${coord(c.move)}`;
      const cellsText = [i + 1, coord(c.move), c.visits,
        c.q === null ? "-" : pct((c.q + 1) / 2), c.q === null ? "-" : signed(c.q),
        `${(100 * c.prior).toFixed(1)}%`];
      for (const t of cellsText) {
        const td = document.createElement("td");
        td.textContent = t;
        row.appendChild(td);
      }
      row.addEventListener("click", () => place(c.move));
      body.appendChild(row);
    });
  }
  const e = game.engineLast;
  $("engine").textContent = e === null || mode() !== "play" ? "" :
    `engine's last move ${coord(e.best)}: ${e.simulations} simulations in ` +
    `${e.elapsed_ms.toFixed(0)} ms` + (e.value === null ? "" : `, value ${signed(e.value)}`) +
    (e.reason === "search" ? "" : ` (${e.reason})`);
}

function renderMoves() {
  const list = $("movelist");
  list.replaceChildren();
  game.line.forEach((a, i) => {
    const item = document.createElement("li");
    item.className = colourName(i % 2);
    if (i === game.cursor - 1) item.classList.add("current");
    if (i >= game.cursor) item.classList.add("future");
    item.dataset.ply = i + 1;
    item.textContent = `${i + 1}. ${coord(a)}`;
    item.title = `go to move ${i + 1}`;
    item.addEventListener("click", () => jump(i + 1));
    list.appendChild(item);
  });
  const current = list.querySelector(".current");
  if (current) current.scrollIntoView({ block: "nearest" });
}

// -- what the server is asked --------------------------------------------------------------

function remember(reply) {
  game.statuses.set(key(), { done: reply.done, winner: reply.winner, line: reply.line,
                             to_play: reply.to_play, forbidden: reply.forbidden || {} });
}

// Brings the page up to date with the position: the engine's move (play mode),
// the analysis (when shown), or at least the position's status. A newer call
// supersedes an older one, whose request is aborted.
async function update() {
  const gen = ++game.gen;
  if (game.controller) game.controller.abort();
  const controller = new AbortController();
  game.controller = controller;
  game.deepening = false;
  const current = () => gen === game.gen;
  render();
  try {
    for (;;) {
      if (engineToMove()) {
        game.busy = "thinking";
        render();
        const started = performance.now();
        const reply = await (await api("/api/move", { moves: position(), sims: sims(),
                                                      rule: rule() }, controller.signal)).json();
        if (!current()) return;
        if (reply.engine_move !== null) {
          game.line = reply.moves.slice();
          game.times = game.times.slice(0, game.cursor);
          game.times.push(Math.round(performance.now() - started));
          game.cursor = game.line.length;
          game.engineLast = reply.analysis;
          game.since = performance.now();
        }
        remember(reply);
        continue;
      }
      if (analysisWanted() && analysis() === null) {
        game.busy = "analysing";
        render();
        const k = analysisKey();
        const reply = await (await api("/api/analyse", { moves: position(), sims: sims(),
                                                         rule: rule() }, controller.signal)).json();
        if (!current()) return;
        remember(reply);
        if (reply.analysis) game.analyses.set(k, reply.analysis);
        break;
      }
      if (status() === null) {
        game.busy = "checking";
        render();
        const reply = await (await api("/api/status", { moves: position(), rule: rule() },
                                       controller.signal)).json();
        if (!current()) return;
        remember(reply);
        continue;
      }
      break;
    }
    // While the position stands, its analysis deepens: each request grows the
    // engine's tree of it a little more (the first analysis's tree, if the
    // engine still holds it) and the table shows the tree so far.
    while (deepenWanted()) {
      game.busy = null;
      game.deepening = true;
      render();
      const k = analysisKey();
      const reply = await (await api("/api/analyse", { moves: position(), rule: rule(), keep: true },
                                     controller.signal)).json();
      if (!current()) return;
      remember(reply);
      const an = reply.analysis;
      if (an === null) break;
      an.complete = an.simulations === 0;  // nothing grew: the tree is full
      // A tree the engine had to start afresh (it searched another position in
      // between) is shown once it has outgrown the one shown.
      const shown = game.analyses.get(k);
      if (shown === undefined || an.total >= shown.total) game.analyses.set(k, an);
    }
  } catch (e) {
    if (!current() || e.name === "AbortError") return;
    showError(e.message);
  } finally {
    if (current()) {
      game.busy = null;
      game.deepening = false;
      game.controller = null;
      render();
    }
  }
}

// -- what the player does ------------------------------------------------------------------

function place(a) {
  if (!canPlace() || position().includes(a)) return;
  const st = status();
  if (st && st.forbidden && st.forbidden[a]) {  // renju: black may not play there
    showError(`Black may not play ${coord(a)} under renju: ${st.forbidden[a]}.`);
    return;
  }
  showError("");
  game.note = "";
  game.line = position();
  game.times = game.times.slice(0, game.cursor);
  game.line.push(a);
  game.times.push(Math.round(performance.now() - game.since));
  game.cursor = game.line.length;
  game.since = performance.now();
  update();
}

function jump(cursor) {
  cursor = Math.max(0, Math.min(cursor, game.line.length));
  if (cursor === game.cursor) return;
  showError("");
  game.note = "";
  game.cursor = cursor;
  game.since = performance.now();
  update();
}

// In play mode undo and redo stop where it is the player's turn.
function undo() {
  let c = game.cursor - 1;
  if (mode() === "play") {
    while (c > 0 && c % 2 !== game.human) c--;
    if (c % 2 !== game.human) return;  // white, before the engine's first move: stay
  }
  if (c >= 0) jump(c);
}

function redo() {
  let c = game.cursor + 1;
  if (mode() === "play") while (c < game.line.length && c % 2 !== game.human) c++;
  if (c <= game.line.length) jump(c);
}

function newGame() {
  showError("");
  game.human = Number($("colour").value);
  game.line = []; game.times = []; game.cursor = 0;
  game.engineLast = null; game.hint = null; game.note = "";
  game.since = performance.now();
  update();
}

async function hint() {
  if (over() || game.busy === "thinking") return;
  if (mode() === "play" && toPlay() !== game.human) return;
  showError("");
  const k = key();
  try {
    let an = analysis();
    if (an === null) {
      if (game.controller) game.controller.abort();
      const gen = ++game.gen;
      game.busy = "analysing";
      render();
      const ak = analysisKey();
      try {
        const reply = await (await api("/api/analyse", { moves: position(), sims: sims(),
                                                         rule: rule() })).json();
        if (gen !== game.gen) return;
        remember(reply);
        if (reply.analysis) game.analyses.set(ak, reply.analysis);
      } finally {
        if (gen === game.gen) game.busy = null;
      }
      an = analysis();
    }
    if (an !== null && k === key()) {
      game.hint = { key: k, move: an.best };
      const c = an.candidates.find((x) => x.move === an.best);
      game.note = `Hint: ${coord(an.best)}` + (c && c.q !== null ?
        ` (${c.visits} visits, win ${pct((c.q + 1) / 2)})` : "") + ".";
    }
  } catch (e) {
    showError(e.message);
  }
  render();
}

async function loadPsq(event) {
  const file = event.target.files[0];
  event.target.value = "";  // the same file can be chosen again
  if (!file) return;
  showError("");
  try {
    if (file.size > 60000) throw new Error(`${file.name} is ${file.size} bytes; a .psq record of one game is a few kB`);
    const text = await file.text();
    const reply = await (await api("/api/load", { psq: text, rule: rule() })).json();
    if (game.controller) game.controller.abort();
    $("mode").value = "analyse";
    game.line = reply.moves.slice();
    game.times = reply.times.slice();
    game.cursor = game.line.length;
    game.engineLast = null; game.hint = null;
    remember(reply);
    game.note = `Loaded ${file.name}: ${reply.moves.length} moves (← → to step).`;
    syncControls();
    update();
  } catch (e) {
    showError(`${file.name}: ${e.message}`);
  }
}

async function download() {
  showError("");
  const names = {};
  if (mode() === "play") {
    const engineName = `agz_jax ${game.info.model}`.slice(0, 40).replace(/[^\w .:()-]/g, "_");
    Object.assign(names, game.human === 0 ? { black: "human", white: engineName }
                                          : { black: engineName, white: "human" });
  }
  try {
    const response = await api("/api/psq", {
      moves: position(), times: game.times.slice(0, game.cursor), rule: rule(), ...names,
    });
    const url = URL.createObjectURL(await response.blob());
    const link = document.createElement("a");
    link.href = url;
    link.download = `agz_jax-${new Date().toISOString().slice(0, 19).replace(/:/g, "")}.psq`;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  } catch (e) {
    showError(e.message);
  }
}

// -- keys ----------------------------------------------------------------------------------

function boardKey(event) {
  const n = size();
  const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
  if (!(event.key in moves) || event.ctrlKey || event.altKey || event.metaKey) return;
  event.preventDefault();
  event.stopPropagation();
  const [dx, dy] = moves[event.key];
  const x = Math.max(0, Math.min(n - 1, (game.focus % n) + dx));
  const y = Math.max(0, Math.min(n - 1, Math.floor(game.focus / n) + dy));
  game.focus = y * n + x;
  for (const cell of cells()) cell.tabIndex = Number(cell.dataset.action) === game.focus ? 0 : -1;
  $("board").querySelector(`.cell[data-action="${game.focus}"]`).focus();
}

function pageKey(event) {
  if (event.ctrlKey || event.altKey || event.metaKey || event.defaultPrevented) return;
  const target = event.target;
  if (target.closest && target.closest("input, select, textarea")) return;
  const actions = {
    u: undo, ArrowLeft: undo, r: redo, ArrowRight: redo,
    Home: () => jump(mode() === "play" && game.human === 1 ? 1 : 0),
    End: () => jump(game.line.length), h: hint,
    a: () => { $("analysis").checked = !$("analysis").checked; update(); },
    t: () => { $("deepen").checked = !$("deepen").checked; update(); },
    n: () => { $("numbers").checked = !$("numbers").checked; render(); },
  };
  const action = actions[event.key];
  if (!action) return;
  event.preventDefault();
  action();
}

function syncControls() {
  $("colour-label").hidden = mode() !== "play";
}

async function start() {
  try {
    game.info = await (await api("/api/info")).json();
  } catch (e) {
    $("status").textContent = "The server did not answer.";
    showError(e.message);
    return;
  }
  $("model").textContent = `model ${game.info.model}, ${game.info.size}x${game.info.size}`;
  $("sims").value = game.info.default_sims;
  $("sims").max = game.info.max_sims;
  $("rule").value = game.info.rule;
  buildBoard();
  $("new").addEventListener("click", newGame);
  $("undo").addEventListener("click", undo);
  $("redo").addEventListener("click", redo);
  $("hint").addEventListener("click", hint);
  $("download").addEventListener("click", download);
  $("psqfile").addEventListener("change", loadPsq);
  $("colour").addEventListener("change", newGame);
  $("mode").addEventListener("change", () => { syncControls(); update(); });
  for (const id of ["rule", "sims", "analysis", "deepen"]) $(id).addEventListener("change", update);
  $("numbers").addEventListener("change", render);
  document.addEventListener("keydown", pageKey);
  syncControls();
  newGame();
}

start();
