#!/usr/bin/env bash
# #43: A/B of per-epoch code generation at 10k/s, alternated: Spark's default factory mode (FALLBACK: each
# epoch's projections and predicates are generated as Java source, then looked up in the compiled-class
# cache) against NO_CODEGEN (interpreted projections: nothing generated per epoch). Both with the fork-free manager.
cd /work/main
for i in 1 2 3; do
  for arm in codegen interp; do
    extra=()
    [[ $arm == interp ]] && extra=(--conf spark.sql.codegen.factoryMode=NO_CODEGEN)
    echo "=== $(date -u +%H:%M:%S) $arm $i"
    .venv/bin/python -m bench.profile_continuous --mode continuousStreamq --rate ${RATE:-10000} --warmup 40 --window 20 \
      --no-jfr --no-tcpdump --no-pyspy --reader-trace --label "reader-trace-${RATE_LABEL:-10k}-factory-$arm-ab$i" \
      --conf spark.sql.streaming.checkpointFileManagerClass=io.streamq.checkpoint.LocalCheckpointFileManager "${extra[@]}" 2>&1 | tail -25
    ps aux --sort=-%cpu | head -4 | cut -c1-150
  done
done
echo "=== done $(date -u +%H:%M:%S)"
