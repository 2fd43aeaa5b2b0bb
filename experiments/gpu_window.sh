#!/usr/bin/env bash
# One GPU window of the self-play campaign (docs/campaign.md), in one call of the
# device tool. Here, once: `make gpu-wheels` (the pure-Python packages the device
# image lacks, into .whl/). Then the device tool's `run`, with carry [".whl"] and
# timeout_s 600:
#
#     bash experiments/gpu_window.sh 540          # BENCH=1 to measure the bench rows first
#
# WINDOW (default 540) is the whole call's wall time in seconds, bench and export
# included: keep it under the device tool's 600 s a command. With BENCH=1 it
# first measures the GPU bench rows (lockstep against continuous
# self-play, and the search: at most 300 s; 274 s on an H100 on 2026-11-27,
# which leaves a 540 s window about 125 s of training), with BF16=1 bf16
# against float32 (at most 150 s; 113 s on the H100), and with ROUTING=1 the
# routing section (at most 120 s; 69 s on an H200). Two of them in one 540 s
# window leave too little to train, and the script says so: run the others in
# a second call on the warm machine. All are off by default: the rows were
# measured in the first (H200) and second (H100) GPU windows (docs/campaign.md), so a window
# trains. It trains the `gpu` preset from models/campaign for what is left of
# WINDOW less RESERVE (default 100 s: a stopped run's last write, then the
# export), exports the run's best nets into models/campaign there, and leaves in
# $OUT: bench.json, bench_bf16.json, bench_routing.json, gpu.log, metrics.jsonl, gpu_config.json
# (the GPU run's config, for the record), variables.msgpack, campaign.json. Back
# here: copy the last two into models/campaign (its config.json stays: the
# play-time search the chain is measured with) and the rest into
# docs/gpu/sessionN-DEVICE/ (docs/gpu/README.md), commit. A window that dies loses
# only that window: models/campaign is untouched here until the files are copied
# back.
#
# MODEL=models/renju (any model of the preset's board and net) continues that
# model instead of models/campaign, under its own rule (read from its config):
# `MODEL=models/renju bash experiments/gpu_window.sh 300` is a renju window
# (docs/renju.md); back here, its variables.msgpack and campaign.json go into
# models/renju.
#
# NET=6x64 (a net preset, docs/nets.md) trains that larger net instead. If
# models/campaign-NET holds nets (brought back from an earlier window and
# committed), the window continues them; else it first distils models/campaign
# into a NET student for at most DISTILL_S s (default 150; experiments.training.distill
# with DISTILL_FLAGS, default the GPU settings of docs/nets.md) and brings the
# student back at once. Then the `gpu` preset's self-play with --net-preset NET
# from those nets for the rest of the window less RESERVE, exported into
# models/campaign-NET there. It leaves in $OUT: gpu.log (the run's config at its
# end), distill.json (the distillation's record and epochs), variables.msgpack
# (split into variables.msgpack.part00, part01, ... when over 15 MiB, as
# 10x128's 24 MiB: `cat variables.msgpack.part* > variables.msgpack` here),
# config.json (models/campaign's, with the preset's sizes: the chain's
# play-time search), campaign.json (the ledger of models/campaign-NET) and
# metrics.jsonl. Back here: copy variables.msgpack, config.json and
# campaign.json into models/campaign-NET, the rest into docs/gpu/. BENCH, BF16
# and ROUTING are refused with NET (a call of their own). CAPACITY=1, in either
# mode, keeps CAPACITY_S (default 150) s of the window for experiments.studies.capacity
# on the run's replay (fresh CAPACITY_NETS, default 32x2,64x6 as
# FILTERSxBLOCKS, CAPACITY_STEPS SGD steps each, default 2000) into
# capacity.json. TEACHER and MODEL (default models/campaign and
# models/campaign-NET) are for rehearsing the script on a small CPU run.
set -u
WINDOW=${1:-540}
RESERVE=${RESERVE:-100}
. experiments/gpu_env.sh
NET=${NET:-}
CAPACITY_S=$([ "${CAPACITY:-0}" = 1 ] && echo "${CAPACITY_S:-150}" || echo 0)
if [ -n "$NET" ]; then
  for flag in BENCH BF16 ROUTING; do
    if [ "${!flag:-0}" = 1 ]; then
      echo "error: NET=$NET trains the larger net for the whole window: run $flag in a call" \
        "of its own" | tee -a "$OUT/gpu.log"
      exit 1
    fi
  done
fi

# experiments.studies.capacity on a run's replay (CAPACITY=1): fresh nets of CAPACITY_NETS
# sizes fitted to its self-play, their held-out losses into capacity.json.
run_capacity() {
  [ "$CAPACITY_S" -gt 0 ] || return 0
  timeout -k 10 "$CAPACITY_S" python3 -m experiments.studies.capacity "$1" \
    --nets "${CAPACITY_NETS:-32x2,64x6}" --steps "${CAPACITY_STEPS:-2000}" \
    --eval-every "${CAPACITY_EVERY:-500}" --held-out "${CAPACITY_HELD_OUT:-10000}" --json \
    > "$OUT/capacity.json" \
    2>> "$OUT/gpu.log"
  echo "capacity exit $?" >> "$OUT/gpu.log"
}

# Self-play's share of a run's iterations' wall time (checkpoints included,
# agz_jax.training.run.selfplay_share) from its metrics: the run is cut before its summary.
selfplay_share() {
  python3 -c "import json, sys; from agz_jax.training import run
lines = [json.loads(ln) for ln in open(sys.argv[1]) if ln.strip()]
share = run.selfplay_share(lines)
print('self-play share:', 'no iteration finished' if share is None else f'{share:.1%}')" \
    "$1/metrics.jsonl" >> "$OUT/gpu.log" 2>&1
}

if [ "${BENCH:-0}" = 1 ]; then
  # Lockstep against continuous self-play, and the search, at the preset's batch:
  # the paper's net and Double Networks, 4,096 games.
  timeout 300 python3 -m experiments.bench --sections search,selfplay --games 4096 \
    --sims 64 --selfplay-games 4096 --selfplay-sims 64 --json > "$OUT/bench.json" \
    2>> "$OUT/gpu.log"
  echo "bench exit $?" >> "$OUT/gpu.log"
fi
if [ "${BF16:-0}" = 1 ]; then
  # bf16 against float32 inference: speed, and policy and value agreement.
  timeout 150 python3 -m experiments.bench --sections bf16 --games 4096 --sims 64 \
    --selfplay-games 4096 --selfplay-sims 64 --json > "$OUT/bench_bf16.json" \
    2>> "$OUT/gpu.log"
  echo "bf16 bench exit $?" >> "$OUT/gpu.log"
fi
if [ "${ROUTING:-0}" = 1 ]; then
  # Double Networks routed by colour against both nets on every position, in
  # continuous self-play at the preset's batch.
  timeout 120 python3 -m experiments.bench --sections routing --selfplay-games 4096 \
    --selfplay-sims 64 --json > "$OUT/bench_routing.json" 2>> "$OUT/gpu.log"
  echo "routing bench exit $?" >> "$OUT/gpu.log"
fi

if [ -n "$NET" ]; then
  TEACHER=${TEACHER:-models/campaign}
  MODEL=${MODEL:-models/campaign-$NET}
  DISTILL_S=${DISTILL_S:-150}
  STAMP=$(date +%Y%m%d-%H%M)
  RUN=/tmp/gpu-$NET-$STAMP

  # A model directory's nets and records into $OUT, at once: a window that dies
  # later still brings them back. Files over 15 MiB go in parts ($OUT takes 16 MiB
  # a file).
  bring_back() {
    if [ "$(stat -c %s "$1/variables.msgpack")" -gt 15728640 ]; then
      split -b 15M -d "$1/variables.msgpack" "$OUT/variables.msgpack.part"
    else
      cp "$1/variables.msgpack" "$OUT/"
    fi
    cp "$1/config.json" "$OUT/"
    for f in distill.json campaign.json; do
      if [ -f "$1/$f" ]; then cp "$1/$f" "$OUT/"; fi
    done
  }

  if [ -f "$MODEL/variables.msgpack" ]; then
    START=$MODEL
    echo "continuing the $NET nets of $MODEL" | tee -a "$OUT/gpu.log"
  else
    START=/tmp/distill-$NET-$STAMP
    echo "distilling $TEACHER into $NET nets for at most $DISTILL_S s" | tee -a "$OUT/gpu.log"
    # --seconds stops the training in time (the held-out measure and the nets
    # follow); the timeout is for a distillation that hangs.
    timeout -k 30 $((DISTILL_S + 120)) python3 -m experiments.training.distill --teacher "$TEACHER" \
      --net-preset "$NET" --out "$START" --seconds "$DISTILL_S" \
      ${DISTILL_FLAGS:---games 16384 --held-out-games 1024 --games-per-batch 4096 --epochs 8 --batch-size 1024} \
      >> "$OUT/gpu.log" 2>&1
    echo "distill exit $?" >> "$OUT/gpu.log"
    if [ ! -f "$START/variables.msgpack" ]; then
      echo "error: the distillation wrote no trained nets (gpu.log says why)" | tee -a "$OUT/gpu.log"
      exit 1
    fi
    bring_back "$START"
  fi

  TRAIN=$((WINDOW - SECONDS - RESERVE - CAPACITY_S))
  if [ "$TRAIN" -lt 60 ]; then
    echo "$TRAIN s of the $WINDOW s window left for self-play (RESERVE $RESERVE s," \
      "CAPACITY_S $CAPACITY_S s): none played; the distilled nets came back" | tee -a "$OUT/gpu.log"
    exit 0
  fi
  echo "training $NET for $TRAIN s" >> "$OUT/gpu.log"
  timeout -k 60 "$TRAIN" python3 -m experiments.selfplay --preset "${PRESET:-gpu}" \
    --net-preset "$NET" --init-from "$START" --out "$RUN" ${EXTRA:-} >> "$OUT/gpu.log" 2>&1
  echo "selfplay exit $? (124: stopped by the window's timeout, as planned)" >> "$OUT/gpu.log"
  selfplay_share "$RUN"
  # The model's config.json is the teacher's (the chain's play-time search) with
  # the preset's sizes; the run's own config goes into gpu.log.
  if python3 -m experiments.training.campaign export "$RUN" --to "$MODEL" --device gpu >> "$OUT/gpu.log" 2>&1 \
      && python3 -c "import sys; from pathlib import Path
from agz_jax.config import presets
from agz_jax.nets import checkpoint, models
config = models.read_config(Path(sys.argv[1])).replace(**presets.net_preset(sys.argv[2]))
checkpoint.write_config(Path(sys.argv[3]), config)" "$TEACHER" "$NET" "$MODEL" >> "$OUT/gpu.log" 2>&1
  then
    bring_back "$MODEL"
    cp "$RUN/metrics.jsonl" "$OUT/"
    { echo "the run's config ($RUN/config.json):"; cat "$RUN/config.json"; echo; } >> "$OUT/gpu.log"
  else
    echo "export failed: the distilled nets (if any) are what came back" >> "$OUT/gpu.log"
  fi
  run_capacity "$RUN"
  exit 0
fi

RUN=/tmp/gpu-$(date +%Y%m%d-%H%M)
# What is left of the window ($SECONDS: this shell's age). `timeout` sends SIGTERM
# when it is spent: the run lets a checkpoint write under way commit and stops
# (exit 143); a run still busy 60 s later (a long device step) is killed, and
# keeps its last committed checkpoint.
TRAIN=$((WINDOW - SECONDS - RESERVE - CAPACITY_S))
if [ "$TRAIN" -lt 60 ]; then
  echo "error: $TRAIN s of the $WINDOW s window left for training (RESERVE $RESERVE s," \
    "CAPACITY_S $CAPACITY_S s): give a larger window, or run BENCH, BF16, ROUTING or" \
    "CAPACITY in a call of their own" | tee -a "$OUT/gpu.log"
  exit 1
fi
# PRESET and EXTRA (more flags of experiments.selfplay) are for trying the script
# on a small CPU run, or for a window's experiment (EXTRA="--openings.empty-fraction
# 0.5": half the games from the empty board, docs/campaign.md).
# MODEL (default models/campaign) is the model the window continues and exports
# into; its rule is the run's (MODEL=models/renju: a renju window, docs/renju.md).
MODEL=${MODEL:-models/campaign}
RULE=$(python3 -c "import sys; from pathlib import Path
from agz_jax.nets import models
print(models.read_config(Path(sys.argv[1])).game.rule)" "$MODEL" 2>> "$OUT/gpu.log")
if [ -z "$RULE" ]; then
  echo "error: $MODEL holds no model config (gpu.log says why)" | tee -a "$OUT/gpu.log"
  exit 1
fi
echo "training $MODEL ($RULE) for $TRAIN s" >> "$OUT/gpu.log"
timeout -k 60 "$TRAIN" python3 -m experiments.selfplay --preset "${PRESET:-gpu}" \
  --init-from "$MODEL" --game.rule "$RULE" --out "$RUN" ${EXTRA:-} >> "$OUT/gpu.log" 2>&1
echo "selfplay exit $? (124: stopped by the window's timeout, as planned)" >> "$OUT/gpu.log"
selfplay_share "$RUN"
python3 -m experiments.training.campaign export "$RUN" --to "$MODEL" --device gpu \
    >> "$OUT/gpu.log" 2>&1 \
  && cp "$RUN/metrics.jsonl" "$MODEL/variables.msgpack" "$MODEL/campaign.json" "$OUT/" \
  && cp "$MODEL/config.json" "$OUT/gpu_config.json" \
  || echo "export failed: nothing came back but the log" >> "$OUT/gpu.log"
run_capacity "$RUN"
