#!/usr/bin/env bash
# A throwaway single-node Slurm cluster, run as the current user (root or not) in a fresh temp dir:
# its own munged (key, socket, pid, log and seed files in the dir), slurmctld and slurmd on free
# ports, with a generated slurm.conf that SLURM_CONF points the client commands (sbatch, squeue,
# scontrol, sinfo) at. Nothing system-wide is used or touched: no /etc/slurm, /etc/munge, systemd
# or system munged/slurmctld, which may run alongside. No slurmdbd, so no sacct: wait with squeue.
#
# Sourced (as tests/slurm/slurm_test.sh does), it defines
#   slurm_cluster_start   start everything, wait until the node is idle (60 s at most); on failure
#                         print the daemons' logs, set SLURM_CLUSTER_FAILED=1 and return non-zero.
#                         Sets SLURM_CLUSTER_DIR and exports SLURM_CONF.
#   slurm_cluster_logs    print the daemons' logs
#   slurm_cluster_stop    cancel the cluster's jobs, stop the daemons (by their pid files) and
#                         remove the temp dir; safe to call twice or after a failed start
# and the caller sets its own trap to call slurm_cluster_stop.
#
# Run directly, it starts the cluster, prints the SLURM_CONF line to use from another shell (for
# trying scripts/slurm/sweep.sh by hand) and waits; Ctrl-C stops it and removes the dir.
#
# Needs the Debian packages slurm-wlm and munge (slurmctld, slurmd, slurm-client, munge).
# No cgroups: proctrack/linuxproc and task/none, so it also runs in containers.

# Daemons live in /usr/sbin, which a non-root PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac

# A TCP port nothing listens on (ss when present, else a bash /dev/tcp probe), not one of "$@".
_slurm_free_port() {
  local port taken
  for _ in $(seq 200); do
    port=$((20000 + RANDOM % 40000))
    case " $* " in *" $port "*) continue ;; esac
    if command -v ss >/dev/null; then
      taken=$(ss -Htan "( sport = :$port )" 2>/dev/null | head -1)
    else
      taken=$( (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && echo yes)
    fi
    [[ -z $taken ]] && { echo "$port"; return 0; }
  done
  echo "no free TCP port found" >&2
  return 1
}

slurm_cluster_logs() {
  local - f
  set +e
  [[ -n ${SLURM_CLUSTER_DIR:-} && -d $SLURM_CLUSTER_DIR/log ]] || return 0
  # *.out: a daemon's stdout and stderr, shown when it has no log file (it failed before opening it).
  for f in "$SLURM_CLUSTER_DIR"/log/*; do
    [[ -s $f ]] || continue
    [[ $f == *.out && -s ${f%.out}.log ]] && continue
    echo "----- $f (last 60 lines)"
    tail -n 60 "$f"
  done
  echo "----- end of cluster logs"
}

# Is the daemon of pid file $1 alive?
_slurm_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Start daemon $1 (command "${@:2}", in the foreground) as our child, in a session of its own: a
# Ctrl-C at the terminal reaches the caller only, whose trap can then cancel the jobs while the
# daemons still run. (Test runners kill a test's children by parent pid, so they get these too.)
# The pid goes to pids/$1.run, stdout and stderr to log/$1.out.
_slurm_daemon() {
  local name=$1
  shift
  if command -v setsid >/dev/null; then
    setsid "$@" >>"$SLURM_CLUSTER_DIR/log/$name.out" 2>&1 </dev/null &
  else
    "$@" >>"$SLURM_CLUSTER_DIR/log/$name.out" 2>&1 </dev/null &
  fi
  echo $! >"$SLURM_CLUSTER_DIR/pids/$name.run"
}

# Kill whatever still runs with this cluster's SLURM_CONF in its environment: job steps left
# behind when slurmctld or slurmd died before they could be cancelled (only our own processes).
_slurm_kill_leftovers() {
  local conf=$1 e p
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}
    p=${p%/environ}
    [[ $p == "$$" || $p == "$BASHPID" || ! -O $e ]] && continue
    { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qxF "SLURM_CONF=$conf" && kill -9 "$p" 2>/dev/null
  done
}

_slurm_fail() {
  # shellcheck disable=SC2034  # read by callers: the logs are shown, no need to show them again
  SLURM_CLUSTER_FAILED=1
  echo "slurm cluster: $*" >&2
  slurm_cluster_logs >&2
  return 1
}

slurm_cluster_start() {
  local - cmd
  set +e  # errors are handled here, whatever the caller's set -e

  for cmd in mungekey munged slurmctld slurmd sinfo sbatch squeue scontrol; do
    command -v "$cmd" >/dev/null ||
      { echo "slurm cluster: '$cmd' not found; install the Debian packages slurm-wlm and munge" >&2; return 1; }
  done

  local dir user host
  dir=$(mktemp -d "${TMPDIR:-/tmp}/htm-slurm.XXXXXX") || return 1
  SLURM_CLUSTER_DIR=$dir
  user=$(id -un)
  host=$(uname -n)
  host=${host%%.*}  # what slurmd and slurmctld take for this host's name
  # munged wants the socket's folder (and the folders above) searchable by all.
  chmod 711 "$dir" || return 1
  mkdir -p "$dir"/{munge,state,spool,log,pids} && chmod 711 "$dir/munge" || return 1
  local sock=$dir/munge/munge.sock
  ((${#sock} < 100)) || { _slurm_fail "socket path too long for a Unix socket: $sock (set TMPDIR shorter)"; return 1; }

  # munge: a fresh key (0400), our own socket. --force turns permission complaints about the
  # temp dir's parents into warnings.
  mungekey --create --keyfile="$dir/munge/munge.key" 2>>"$dir/log/munged.out" ||
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  _slurm_daemon munged munged -F --force --socket="$sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/pids/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  for _ in $(seq 50); do
    [[ -S $sock ]] && break
    _slurm_alive "$dir/pids/munged.run" || break
    sleep 0.2
  done
  munge -n --socket="$sock" 2>/dev/null | unmunge --socket="$sock" >/dev/null 2>&1 ||
    { _slurm_fail "munged did not start (socket $sock)"; return 1; }

  # slurm.conf: the node's hardware as slurmd itself sees it, free ports, everything in $dir.
  local hw ctld_port slurmd_port
  hw=$(slurmd -C 2>&1 | sed -n 's/^NodeName=[^ ]* *//p')
  [[ $hw == *CPUs=* ]] || { _slurm_fail "slurmd -C did not describe this node: $(slurmd -C 2>&1)"; return 1; }
  ctld_port=$(_slurm_free_port) && slurmd_port=$(_slurm_free_port "$ctld_port") || return 1
  cat >"$dir/slurm.conf" <<EOF
# Generated by tests/slurm/start_cluster.sh: a single-node test cluster in $dir
ClusterName=htmtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/pids/slurmctld.pid
SlurmdPidFile=$dir/pids/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf

  _slurm_daemon slurmctld slurmctld -D -f "$SLURM_CONF"
  _slurm_daemon slurmd slurmd -D -N "$host" -f "$SLURM_CONF"

  local state=""
  for _ in $(seq 120); do
    state=$(sinfo -h -N -n "$host" -o %t 2>/dev/null | head -1)
    [[ $state == idle ]] && return 0
    _slurm_alive "$dir/pids/slurmctld.run" || { _slurm_fail "slurmctld exited"; return 1; }
    _slurm_alive "$dir/pids/slurmd.run" || { _slurm_fail "slurmd exited"; return 1; }
    sleep 0.5
  done
  _slurm_fail "node $host not idle after 60 s (state: '${state:-none}'; $(scontrol show node "$host" 2>&1 | grep -o 'Reason=.*'))"
  return 1
}

slurm_cluster_stop() {
  local - dir=${SLURM_CLUSTER_DIR:-}
  set +e
  [[ -n $dir && -d $dir ]] || return 0
  # Jobs first, while slurmd can still kill their steps (only this cluster's: SLURM_CONF).
  if _slurm_alive "$dir/pids/slurmctld.run" && _slurm_alive "$dir/pids/slurmd.run"; then
    scancel --user="$(id -un)" 2>/dev/null
    for _ in $(seq 20); do
      [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.5
    done
  fi
  local f pids=()
  for f in slurmd.run slurmctld.run munged.run; do
    if _slurm_alive "$dir/pids/$f"; then
      pids+=("$(cat "$dir/pids/$f")")
      kill "${pids[-1]}" 2>/dev/null
    fi
  done
  local p
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.2
    done
    kill -9 "$p" 2>/dev/null
  done
  wait "${pids[@]}" 2>/dev/null
  _slurm_kill_leftovers "$dir/slurm.conf"
  rm -rf "$dir"
  SLURM_CLUSTER_DIR=
  return 0
}

# Run directly: start, print how to use it, wait for Ctrl-C.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  trap slurm_cluster_stop EXIT
  trap 'exit 130' INT TERM
  slurm_cluster_start || exit 1
  echo "slurm test cluster up in $SLURM_CLUSTER_DIR; from another shell:"
  echo "  export SLURM_CONF=$SLURM_CONF PATH=\$PATH:/usr/sbin"
  echo "Ctrl-C stops it and removes the dir."
  sleep infinity &
  trap 'kill $! 2>/dev/null; slurm_cluster_stop' EXIT
  wait $!
fi
