#!/usr/bin/env bash
# Run a study on a Slurm cluster: one array job whose N tasks each train a share of the study's
# runs (htm run FILE --shard K/N, K = 0..N-1) into its own SQLite file, then one job that starts
# after all of them (afterany: failed shards too) and merges the shard files into one database.
#
#   scripts/slurm/sweep.sh FILE.toml [--shards N] [--nproc P] [--db MERGED.sqlite] [--htm PATH]
#                          [--shard-dir DIR] [-- extra sbatch options...]
#
#   --shards N     array tasks (default 2; more than the study's variants × seeds leaves some idle)
#   --nproc P      each task trains with P processes (htm run --nproc P): --ntasks=1
#                  --cpus-per-task=P, htm starts the workers itself
#   --db PATH      database the shards are merged into (default results/htm.sqlite)
#   --htm PATH     the htm binary (default: htm on PATH, else <repo>/build/htm)
#   --shard-dir D  folder of the shard databases, task scripts and logs (default
#                  results/shards/<FILE's name>-<date>-<time>); it must be on a filesystem every
#                  node sees. Each task writes only its own SQLite file there (never share one
#                  SQLite file over NFS); the merge job copies them into --db.
#   -- ...         passed to both sbatch calls, e.g. -- --partition=gpu --time=2:00:00
#                  (not --array or --output: this script sets those)
#
# The jobs run in the current directory with the current environment (sbatch's defaults), so
# relative paths in FILE (runtime.artifacts: results/runs) resolve as they would locally. Prints
# the two job ids and how to watch them. htm skips the runs its database has finished, so to resume
# a sweep whose tasks died, submit it again with the same --shards and the old --shard-dir.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "sweep.sh: $*" >&2; exit 2; }

file="" shards=2 nproc="" db=results/htm.sqlite htm="" shard_dir="" extra=()
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --shards | --nproc | --db | --htm | --shard-dir)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --shards) shards=$2 ;; --nproc) nproc=$2 ;; --db) db=$2 ;; --htm) htm=$2 ;; --shard-dir) shard_dir=$2 ;;
      esac
      shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -*) die "unknown option $1 (sbatch options go after --; see --help)" ;;
    *) [[ -z $file ]] || die "one experiment file only (got $file and $1)"; file=$1; shift ;;
  esac
done

[[ -n $file ]] || { usage >&2; exit 2; }
[[ -f $file ]] || die "no such experiment file: $file"
[[ $shards =~ ^0*[1-9][0-9]*$ ]] || die "--shards must be a whole number >= 1, not '$shards'"
[[ -z $nproc || $nproc =~ ^0*[1-9][0-9]*$ ]] || die "--nproc must be a whole number >= 1, not '$nproc'"
shards=$((10#$shards)) nproc=${nproc:+$((10#$nproc))}
command -v sbatch >/dev/null || die "sbatch not found: run this on a Slurm login node (or set PATH)"
if [[ -z $htm ]]; then
  htm=$(command -v htm || echo "$(cd "$(dirname "$0")/../.." && pwd)/build/htm")
fi
[[ -x $htm && ! -d $htm ]] || die "htm binary not found or not executable: $htm (use --htm PATH)"

# Absolute paths: the jobs may start elsewhere, and the task scripts must not depend on it.
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
file=$(abs "$file") db=$(abs "$db") htm=$(abs "$htm")
name=$(basename "$file" .toml)
new_dir=""
if [[ -z $shard_dir ]]; then
  new_dir=$(abs "results/shards/$name-$(date +%Y%m%d-%H%M%S)")
  [[ ! -e $new_dir ]] || new_dir+="-$$"
fi
shard_dir=$(abs "${shard_dir:-$new_dir}")
mkdir -p "$shard_dir" "$(dirname "$db")"

# The batch scripts, kept in the shard folder as a record of what ran. (%q quotes for bash.)
cat >"$shard_dir/task.sh" <<EOF
#!/bin/bash
# Array task K of $shards: htm run --shard K/$shards, into its own database.
exec $(printf %q "$htm") run $(printf %q "$file") --shard "\$SLURM_ARRAY_TASK_ID/$shards" \\
  --db $(printf %q "$shard_dir")/shard-"\$SLURM_ARRAY_TASK_ID".sqlite${nproc:+ --nproc $nproc}
EOF
cat >"$shard_dir/merge.sh" <<EOF
#!/bin/bash
# After every array task: the shard databases into one.
exec $(printf %q "$htm") merge $(printf %q "$shard_dir")/shard-*.sqlite --db $(printf %q "$db")
EOF

per_task=(--ntasks=1)
[[ -z $nproc ]] || per_task+=(--cpus-per-task="$nproc")
array=$(sbatch --parsable --job-name="htm-$name" --array="0-$((shards - 1))" "${per_task[@]}" \
  --output="$shard_dir/task-%a.log" "${extra[@]}" "$shard_dir/task.sh") ||
  { [[ -z $new_dir ]] || rm -r "$new_dir"; die "sbatch refused the array job (its message is above)"; }
array=${array%%;*}  # --parsable prints "id;cluster" on multi-cluster setups
merge=$(sbatch --parsable --job-name="htm-merge-$name" --dependency="afterany:$array" --ntasks=1 \
  --output="$shard_dir/merge.log" "${extra[@]}" "$shard_dir/merge.sh") ||
  { scancel "$array" 2>/dev/null; die "submitting the merge job failed; cancelled array job $array"; }
merge=${merge%%;*}

echo "submitted array job $array ($shards tasks) and merge job $merge"
echo "  shards: $shard_dir/shard-K.sqlite, logs: $shard_dir/task-K.log, merge.log"
echo "  merged into: $db"
echo "watch: squeue -j $array,$merge    (then: $htm runs --db $db)"
