#!/usr/bin/env bash
# One GPU window of 19x19 move prediction (docs/go.md, "In a GPU window"): the
# paper's net (12 layers of 128 filters) trained on the TYGEM 9-dan games, in
# one call of the device tool. Here, once: `make gpu-wheels`, and the carried
# share of the games store (29.9 MiB; every held-out game, 15% of the training
# games):
#
#     python -m experiments.go.subset --games data/go19 --out .go19_gpu/games --train-fraction 0.15
#
# (data/go19: the whole store, imported as docs/go_data.md says.)
#
# Then the device tool's `run`, carry [".whl", ".go19_gpu"], timeout_s 600:
#
#     bash experiments/go/gpu_window.sh 540
#
# WINDOW (default 540) is the call's wall time in seconds. It trains for WINDOW
# less RESERVE (default 90: starting, the last evaluation and the copies) with
# experiments.go.train19 --seconds, from .go19_gpu/run when that holds a
# checkpoint (a window's, brought back: it continues it, same settings) and from
# fresh nets otherwise, and leaves in $OUT: gpu.log, train.log, history.json,
# settings.json, record.json, net.json, params.msgpack (the model: `gtp-agz
# --model`), and checkpoint.msgpack (parameters and Adam state, split into
# checkpoint.msgpack.part00, 01, ... over 15 MiB: `cat` them together here).
# Back here: put history.json, settings.json and checkpoint.msgpack into
# .go19_gpu/run for the next window, and the record into docs/. A window that
# dies loses only what it trained since its last evaluation (EVAL_EVERY steps).
# LAYERS, FILTERS, BATCH, PER_GAME, EVAL_EVERY, LR set the run (defaults 12,
# 128, 256, 16, 1000, 1e-3); DATA and CARRIED the folders (for rehearsing on a
# CPU with a small store).
set -u
START=$(date +%s)
WINDOW=${1:-540}
RESERVE=${RESERVE:-90}
. experiments/gpu_env.sh
DATA=${DATA:-.go19_gpu/games}
CARRIED=${CARRIED:-.go19_gpu/run}
RUN=/tmp/go19-gpu-run
[ -f "$DATA/games.json" ] || { echo "error: $DATA holds no games store: make it with" \
  "experiments.go.subset and carry it" | tee -a "$OUT/gpu.log"; exit 1; }
rm -rf "$RUN"
mkdir -p "$RUN"
RESUME=""
if [ -f "$CARRIED/checkpoint.msgpack" ]; then
  cp "$CARRIED"/checkpoint.msgpack "$CARRIED"/history.json "$CARRIED"/settings.json "$RUN/"
  RESUME=--resume
fi
SECONDS_LEFT=$((WINDOW - RESERVE - ($(date +%s) - START)))
python3 -m experiments.go.train19 --games "$DATA" --out "$RUN" \
  --layers "${LAYERS:-12}" --filters "${FILTERS:-128}" --batch-size "${BATCH:-256}" \
  --per-game "${PER_GAME:-16}" --learning-rate "${LR:-1e-3}" --steps 100000000 \
  --eval-every "${EVAL_EVERY:-1000}" --eval-positions 2000 --seconds "$SECONDS_LEFT" \
  $RESUME 2>&1 | tee "$OUT/train.log"
echo "train19 exit ${PIPESTATUS[0]}" | tee -a "$OUT/gpu.log"
for f in history.json settings.json record.json net.json params.msgpack; do
  [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/"
done
if [ -f "$RUN/checkpoint.msgpack" ]; then
  if [ "$(stat -c %s "$RUN/checkpoint.msgpack")" -gt 15728640 ]; then
    split -b 15M -d "$RUN/checkpoint.msgpack" "$OUT/checkpoint.msgpack.part"
  else
    cp "$RUN/checkpoint.msgpack" "$OUT/"
  fi
fi
ls -l "$OUT" >> "$OUT/gpu.log"
