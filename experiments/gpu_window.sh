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
# first measures the bench rows of issue 22 (lockstep against continuous
# self-play, and the search: at most 300 s; 274 s on an H100 in session 36,
# which leaves a 540 s window about 125 s of training), with BF16=1 bf16
# against float32 (at most 150 s; 113 s on the H100), and with ROUTING=1 the
# routing section (at most 120 s; 69 s on an H200). Two of them in one 540 s
# window leave too little to train, and the script says so: run the others in
# a second call on the warm machine. All are off by default: the rows were
# measured in sessions 34 (H200) and 36 (H100; docs/campaign.md), so a window
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
set -u
WINDOW=${1:-540}
RESERVE=${RESERVE:-100}
: "${OUT:?OUT must name the folder whose files come back (the device tool sets it)}"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "error: installing .whl/ failed"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD/src:$PWD
else
  export PYTHONPATH=$PWD/src:$PWD
fi
python3 -c "import jax, mctx, tyro, tensorboardX; print(jax.devices())" > "$OUT/gpu.log" 2>&1 \
  || { cat "$OUT/gpu.log"; echo "error: the packages do not import: run 'make gpu-wheels' here and carry .whl"; exit 1; }
cat "$OUT/gpu.log"

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

RUN=/tmp/gpu-$(date +%Y%m%d-%H%M)
# What is left of the window ($SECONDS: this shell's age). `timeout` sends SIGTERM
# when it is spent: the run lets a checkpoint write under way commit and stops
# (exit 143); a run still busy 60 s later (a long device step) is killed, and
# keeps its last committed checkpoint.
TRAIN=$((WINDOW - SECONDS - RESERVE))
if [ "$TRAIN" -lt 60 ]; then
  echo "error: $TRAIN s of the $WINDOW s window left for training (RESERVE $RESERVE s):" \
    "give a larger window, or run BENCH, BF16 or ROUTING in a call of their own" | tee -a "$OUT/gpu.log"
  exit 1
fi
echo "training for $TRAIN s" >> "$OUT/gpu.log"
# PRESET and EXTRA (more flags of experiments.selfplay) are for trying the script
# on a small CPU run, or for a window's experiment (EXTRA="--openings.empty-fraction
# 0.5": half the games from the empty board, docs/campaign.md).
timeout -k 60 "$TRAIN" python3 -m experiments.selfplay --preset "${PRESET:-gpu}" \
  --init-from models/campaign --out "$RUN" ${EXTRA:-} >> "$OUT/gpu.log" 2>&1
echo "selfplay exit $? (124: stopped by the window's timeout, as planned)" >> "$OUT/gpu.log"
# The run is cut before its summary: self-play's share of the iterations' wall
# time (checkpoints included, agz_jax.run.selfplay_share) from its metrics.
python3 -c "import json, sys; from agz_jax import run
lines = [json.loads(ln) for ln in open(sys.argv[1]) if ln.strip()]
share = run.selfplay_share(lines)
print('self-play share:', 'no iteration finished' if share is None else f'{share:.1%}')" \
  "$RUN/metrics.jsonl" >> "$OUT/gpu.log" 2>&1
python3 -m experiments.campaign export "$RUN" --device gpu >> "$OUT/gpu.log" 2>&1 \
  && cp "$RUN/metrics.jsonl" models/campaign/variables.msgpack models/campaign/campaign.json \
        "$OUT/" && cp models/campaign/config.json "$OUT/gpu_config.json"
