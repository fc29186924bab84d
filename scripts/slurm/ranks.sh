#!/usr/bin/env bash
# One data-parallel rank per Slurm task: translates srun's variables into torchrun's (RANK,
# WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), which `htm run` reads,
# then runs the command. Use it inside an allocation, one task per rank:
#
#   srun --ntasks=4 --cpus-per-task=8 scripts/slurm/ranks.sh htm run FILE.toml
#
# Rank 0 runs on the allocation's first node and serves the rendezvous there on MASTER_PORT
# (default: 20000 + the job id mod 20000; set MASTER_PORT to choose). Every rank must see the
# same FILE and options; rank 0 alone writes the results database and the run's files.
set -euo pipefail
(($#)) || { echo "usage: srun ... $0 htm run FILE [options]" >&2; exit 2; }
for v in SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_JOB_NODELIST SLURM_JOB_ID; do
  [[ -n ${!v:-} ]] || { echo "ranks.sh: $v is not set: run this under srun" >&2; exit 2; }
done
export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID
export LOCAL_WORLD_SIZE=${SLURM_NTASKS_PER_NODE:-${SLURM_STEP_TASKS_PER_NODE%%(*}}
LOCAL_WORLD_SIZE=${LOCAL_WORLD_SIZE%%(*}
export MASTER_ADDR=${MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)}
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
exec "$@"
