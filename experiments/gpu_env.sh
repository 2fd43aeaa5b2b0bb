# Sourced by the GPU window scripts: the carried wheels (.whl/, `make gpu-wheels`)
# installed into /tmp/site, PYTHONPATH set, and the packages checked, with the
# devices written to $OUT/gpu.log. Exits with one line when they do not import.
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
