// The board page: the game lives here (a list of actions, row * size + col);
// the server validates it and answers with the engine's move on every request.
"use strict";

const $ = (id) => document.getElementById(id);
const game = {
  info: null, moves: [], times: [], human: 0, analysis: null,
  result: { done: false, winner: -1, line: [] }, busy: false, since: 0,
};

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  if (!response.ok) {
    let reason = response.statusText;
    try { reason = (await response.json()).error || reason; } catch (e) { /* not JSON */ }
    throw new Error(reason);
  }
  return response;
}

function toPlay() { return game.moves.length % 2; }  // 0 black, 1 white
function colourName(c) { return c === 0 ? "black" : "white"; }
function showError(text) { $("error").textContent = text || ""; }

function buildBoard() {
  const size = game.info.size;
  const board = $("board");
  board.style.gridTemplateColumns = `repeat(${size}, var(--cell))`;
  board.replaceChildren();
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const cell = document.createElement("button");
      cell.className = "cell";
      if (x === 0) cell.classList.add("left");
      if (x === size - 1) cell.classList.add("right");
      if (y === 0) cell.classList.add("top");
      if (y === size - 1) cell.classList.add("bottom");
      cell.dataset.x = x;
      cell.dataset.y = y;
      cell.dataset.action = y * size + x;
      cell.setAttribute("aria-label", `${x},${y}`);
      cell.addEventListener("click", () => humanMove(y * size + x));
      board.appendChild(cell);
    }
  }
}

function render() {
  const stones = new Map(game.moves.map((a, i) => [a, i % 2]));
  const last = game.moves.length ? game.moves[game.moves.length - 1] : -1;
  const line = new Set(game.result.line);
  const heatOn = $("heat").checked && game.analysis !== null;
  const policy = heatOn ? game.analysis.policy : null;
  const peak = policy ? Math.max(...policy, 1e-9) : 1;
  for (const cell of $("board").children) {
    const a = Number(cell.dataset.action);
    cell.replaceChildren();
    cell.classList.toggle("last", a === last);
    cell.classList.toggle("win", line.has(a));
    cell.disabled = game.busy || game.result.done || stones.has(a) || toPlay() !== game.human;
    cell.removeAttribute("data-p");
    cell.title = "";
    if (policy && policy[a] > 0) {
      const heat = document.createElement("div");
      heat.className = "heat";
      heat.style.opacity = (0.08 + 0.72 * policy[a] / peak).toFixed(3);
      cell.appendChild(heat);
      cell.dataset.p = policy[a];
      cell.title = `engine: ${(100 * policy[a]).toFixed(1)}%`;
    }
    if (stones.has(a)) {
      const stone = document.createElement("div");
      stone.className = `stone ${colourName(stones.get(a))}`;
      cell.appendChild(stone);
    }
  }
  renderStatus();
}

function renderStatus() {
  const r = game.result;
  let text;
  if (r.done && r.winner < 0) text = "Draw: the board is full.";
  else if (r.done) text = r.winner === game.human ? `You win (${colourName(r.winner)})!`
                                                  : `The engine wins (${colourName(r.winner)}).`;
  else if (game.busy) text = "The engine is thinking...";
  else text = `Your move (${colourName(game.human)}).`;
  $("status").textContent = text;
  $("status").dataset.state = r.done ? "over" : (game.busy ? "thinking" : "your-move");
  let p = game.analysis ? game.analysis.win_prob : null;
  if (r.done) p = r.winner < 0 ? 0.5 : (r.winner === game.human ? 0 : 1);
  $("winprob").textContent = p === null ? "-" : `${(100 * p).toFixed(0)}%`;
  $("winbar").style.width = `${p === null ? 50 : 100 * p}%`;
  const a = game.analysis;
  $("details").textContent = a === null ? "" :
    `last engine move: ${a.simulations} simulations in ${a.elapsed_ms.toFixed(0)} ms` +
    (a.reason === "search" ? "" : ` (${a.reason})`) + `; ${game.moves.length} stones`;
}

async function request(sims) {
  const body = { moves: game.moves, sims, rule: $("rule").value };
  return (await api("/api/move", body)).json();
}

// Sends the game so far; the server checks it and, unless it is over, moves.
async function advance() {
  const sims = Number($("sims").value);
  if (!Number.isInteger(sims) || sims < 1 || sims > game.info.max_sims) {
    throw new Error(`strength must be a whole number of simulations in 1..${game.info.max_sims}`);
  }
  game.busy = true;
  render();
  const started = performance.now();
  try {
    const reply = await request(sims);
    if (reply.engine_move !== null) {
      game.moves = reply.moves;
      game.times.push(Math.round(performance.now() - started));
      game.analysis = reply.analysis;
    }
    game.result = { done: reply.done, winner: reply.winner, line: reply.line };
  } finally {
    game.busy = false;
    game.since = performance.now();
    render();
  }
}

async function humanMove(action) {
  if (game.busy || game.result.done || toPlay() !== game.human || game.moves.includes(action)) return;
  showError("");
  game.moves.push(action);
  game.times.push(Math.round(performance.now() - game.since));
  try {
    await advance();
  } catch (e) {
    game.moves.pop();
    game.times.pop();
    showError(e.message);
    render();
  }
}

async function newGame() {
  if (game.busy) return;
  showError("");
  game.human = Number($("colour").value);
  game.moves = []; game.times = []; game.analysis = null;
  game.result = { done: false, winner: -1, line: [] };
  game.since = performance.now();
  render();
  if (game.human !== 0) {
    try { await advance(); } catch (e) { showError(e.message); }
  }
}

async function undo() {
  if (game.busy || game.moves.length === 0) return;
  showError("");
  do { game.moves.pop(); game.times.pop(); } while (game.moves.length && toPlay() !== game.human);
  game.analysis = null;
  game.result = { done: false, winner: -1, line: [] };
  game.since = performance.now();
  render();
  if (toPlay() !== game.human) {  // the engine moved first: let it move again
    try { await advance(); } catch (e) { showError(e.message); }
  }
}

async function download() {
  showError("");
  const engineName = `agz_jax ${game.info.model}`.slice(0, 40).replace(/[^\w .:()-]/g, "_");
  const names = game.human === 0 ? { black: "human", white: engineName }
                                 : { black: engineName, white: "human" };
  try {
    const response = await api("/api/psq", {
      moves: game.moves, times: game.times, rule: $("rule").value, ...names,
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
  $("download").addEventListener("click", download);
  $("colour").addEventListener("change", newGame);
  $("rule").addEventListener("change", newGame);
  $("heat").addEventListener("change", render);
  await newGame();
}

start();
