#!/usr/bin/env bash
# slurm_cluster.sh - throw-away ONE-NODE Slurm cluster on loopback, for tests.
#
# Brings up munged, slurmctld and slurmd from Debian's packages (slurm-wlm
# 22.05 + munge) with every file (munge key/socket/pid/log/seed, slurm.conf,
# state and spool dirs, logs) under a private directory, and tears it down
# again. Nothing under /etc/munge, /etc/slurm, /run/munge, /var/... is used or
# modified; no system service is needed. Nothing is installed by this script.
#
# Usage:
#   slurm_cluster.sh up DIR     start the cluster in DIR (empty or new dir, keep
#                               it short: unix socket paths are limited); on
#                               success prints ONE line to stdout:
#                                   export SLURM_CONF=DIR/slurm.conf
#   slurm_cluster.sh down DIR   stop the daemons started by 'up' for DIR (found
#                               by their pid files / command lines, so no other
#                               process is touched). Idempotent, safe after a
#                               half-way failed 'up'. DIR itself is left alone.
#   slurm_cluster.sh selftest   up in a temp dir, run a 3-task job array plus an
#                               afterany-dependent job, check, tear down.
#
# Typical caller:
#   dir=$(mktemp -d /tmp/slurm.XXXXXX)
#   trap 'tests/cluster/slurm_cluster.sh down "$dir"' EXIT
#   eval "$(tests/cluster/slurm_cluster.sh up "$dir")"
#   sbatch ...
#
# Only SLURM_CONF is needed by clients: the munge socket is passed to every
# Slurm command through AuthInfo=socket=... in slurm.conf.
#
# NOTE: there is no slurmdbd (AccountingStorageType=accounting_storage/none),
# so `sacct` does NOT work. Wait on jobs with `squeue` (finished jobs drop out
# of its default output) and read their final state/exit code with
# `scontrol show job ID` (kept for MinJobAge=600 s after the end).
#
# Exit status: 0 ok, 1 failure, 2 usage, 77 slurm-wlm/munge not installed.
set -euo pipefail

PROG=slurm_cluster.sh
SELFTEST_UP=0
SELF=$(readlink -f -- "${BASH_SOURCE[0]}")
# The daemons live in /usr/sbin, which is not on a normal user's PATH.
PATH=$PATH:/usr/sbin:/sbin
export PATH

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SELF" >&2
    exit 2
}

check_installed() {
    local t
    for t in slurmctld slurmd munged sbatch squeue sinfo scontrol scancel munge; do
        if ! command -v "$t" >/dev/null 2>&1; then
            echo "$PROG: slurm-wlm and munge are not installed (apt-get install slurm-wlm munge)" >&2
            exit 77
        fi
    done
}

# --- ports -------------------------------------------------------------------

port_in_use() {
    local p=$1
    if command -v ss >/dev/null 2>&1; then
        # any socket (listening or not) bound to this local port
        [[ -n "$(ss -Htan "sport = :$p" 2>/dev/null)" ]]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
    fi
}

# Prints "CTLD_PORT SLURMD_PORT": two consecutive free ports in 20000-39999.
pick_ports() {
    local i p
    for ((i = 0; i < 100; i++)); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 19998))
        if ! port_in_use "$p" && ! port_in_use "$((p + 1))"; then
            echo "$p $((p + 1))"
            return 0
        fi
    done
    die "no free port pair found in 20000-39999"
}

# --- processes ---------------------------------------------------------------

# proc_matches PID NAME PATTERN: process PID runs program NAME and its command
# line contains PATTERN (a path under our DIR) - guards against killing a
# process that merely reused a stale pid.
proc_matches() {
    local pid=$1 name=$2 pat=$3 comm args=()
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    # builtins only (no fork per /proc entry): this runs in loops over /proc
    { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || return 1
    [[ $comm == "$name"* ]] || return 1
    { mapfile -d '' args <"/proc/$pid/cmdline"; } 2>/dev/null || return 1
    [[ " ${args[*]-} " == *"$pat"* ]]
}

# find_pids NAME PATTERN: pids of NAME processes whose cmdline contains PATTERN.
find_pids() {
    local name=$1 pat=$2 d
    for d in /proc/[0-9]*; do
        if proc_matches "${d#/proc/}" "$name" "$pat"; then
            echo "${d#/proc/}"
        fi
    done
}

# slurmstepd rewrites its argv, but inherits slurmd's environment, which holds
# SLURM_CONF=<our slurm.conf>.
find_stepds() {
    local conf=$1 d comm env=()
    for d in /proc/[0-9]*; do
        { read -r comm <"$d/comm"; } 2>/dev/null || continue
        [[ $comm == slurmstepd ]] || continue
        { mapfile -d '' env <"$d/environ"; } 2>/dev/null || continue
        if printf '%s\n' "${env[@]-}" | grep -qxF "SLURM_CONF=$conf"; then
            echo "${d#/proc/}"
        fi
    done
}

# wait_reaped PID...: once exited, give init up to 3 s in all to reap the
# zombies (so that a following `pgrep` shows nothing); only waits.
wait_reaped() {
    local p i st
    for ((i = 0; i < 30; i++)); do
        st=
        for p in "$@"; do
            { read -r _ _ st _ <"/proc/$p/stat"; } 2>/dev/null || continue
            [[ $st == Z ]] && break
        done
        [[ $st == Z ]] || return 0
        sleep 0.1
    done
}

STOPPED_PIDS=()

# wait_gone TENTHS: waits up to TENTHS x 0.1 s until none of stop_daemon's pids (its locals
# pids, name, pat) is alive; records them as stopped and returns 0, else returns 1.
wait_gone() {
    local i p alive
    for ((i = 0; i < $1; i++)); do
        alive=0
        for p in "${pids[@]}"; do
            proc_matches "$p" "$name" "$pat" && alive=1
        done
        if ((!alive)); then STOPPED_PIDS+=("${pids[@]}"); return 0; fi
        sleep 0.1
    done
    return 1
}

# stop_daemon NAME PIDFILE PATTERN: SIGTERM, wait, SIGKILL if needed.
stop_daemon() {
    local name=$1 pidfile=$2 pat=$3 pids=() p
    if [[ -s $pidfile ]]; then
        p=$(tr -dc '0-9' <"$pidfile" || true)
        if [[ -n $p ]] && proc_matches "$p" "$name" "$pat"; then
            pids+=("$p")
        fi
    fi
    # Also any process of ours without (or with a stale) pid file, e.g. when
    # 'up' failed before the pid file was written.
    for p in $(find_pids "$name" "$pat"); do
        [[ " ${pids[*]-} " == *" $p "* ]] || pids+=("$p")
    done
    ((${#pids[@]})) || return 0
    log "stopping $name (pid ${pids[*]})"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait_gone 150 && return 0
    log "$name did not exit on SIGTERM, sending SIGKILL"
    for p in "${pids[@]}"; do
        if proc_matches "$p" "$name" "$pat"; then kill -KILL "$p" 2>/dev/null || true; fi
    done
    wait_gone 50 && return 0
    log "warning: $name (pid ${pids[*]}) still alive"
}

dump_logs() {
    local dir=$1 f
    for f in "$dir"/log/*; do
        [[ -f $f ]] || continue
        printf '===== %s =====\n' "$f" >&2
        tail -n 60 "$f" >&2 || true
    done
}

# --- config ------------------------------------------------------------------

write_conf() {
    local dir=$1 ctld_port=$2 slurmd_port=$3 user=$4 cpus mem_kb mem_mb
    cpus=$(nproc)
    mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    mem_mb=$((mem_kb / 1024))
    # a bit below the machine's, at least 1 MB
    mem_mb=$((mem_mb > 1024 ? mem_mb - 512 : (mem_mb * 9 / 10 > 0 ? mem_mb * 9 / 10 : 1)))
    cat >"$dir/slurm.conf" <<EOF
# Generated by $PROG for a throw-away one-node test cluster.
ClusterName=bench-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
# munge: private munged; every daemon and client reads this.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
MpiDefault=none
# No cgroups anywhere (works in containers without a cgroup setup).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
PropagateResourceLimits=NONE
# No slurmdbd: sacct does not work; use squeue / scontrol show job.
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MailProg=/bin/true
# Files
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$dir/tmp
# Short timeouts: fast startup/teardown.
MessageTimeout=5
TCPTimeout=2
SlurmctldTimeout=10
SlurmdTimeout=30
BatchStartTimeout=10
InactiveLimit=0
KillWait=2
Waittime=0
MinJobAge=600
# Trust the configured CPUs/RealMemory (nproc may be less than the hardware).
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

# --- up / down ---------------------------------------------------------------

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
    local secs=$1 what=$2 i
    shift 2
    for ((i = 0; i < secs * 5; i++)); do
        if "$@"; then return 0; fi
        sleep 0.2
    done
    log "timeout after ${secs}s waiting for $what"
    return 1
}

munge_ok() { munge -n --socket="$1/munge/munge.socket" 2>/dev/null | unmunge --socket="$1/munge/munge.socket" >/dev/null 2>&1; }
node_idle() { [[ $(sinfo -h -n localhost -o %t 2>/dev/null) == idle ]]; }
alive_by_pidfile() { # alive_by_pidfile NAME PIDFILE PATTERN
    local p
    [[ -s $2 ]] || return 1
    p=$(tr -dc '0-9' <"$2" || true)
    proc_matches "$p" "$1" "$3"
}

up_failed() {
    local dir=$1
    log "cluster in $dir did not come up; logs follow"
    dump_logs "$dir"
    cmd_down "$dir" || true
    exit 1
}

cmd_up() {
    local dir=$1 user ports ctld_port slurmd_port
    check_installed
    mkdir -p -- "$dir"
    dir=$(cd -- "$dir" && pwd -P)
    [[ -e $dir/slurm.conf ]] && die "$dir already holds a cluster (run 'down' and use a fresh dir)"
    # sun_path is 108 bytes; slurmd puts <node>_<job>.<step> sockets in spool/.
    ((${#dir} <= 70)) || die "DIR path too long for unix sockets (${#dir} > 70 chars): $dir"
    user=$(id -un)
    # munged refuses group/world-writable dirs on the way to its files, and
    # wants the socket dir searchable by all (--force below downgrades that
    # to a warning when a parent of DIR is private: our clients all run as
    # this same user anyway); the key stays private.
    chmod go-w,a+x "$dir"
    mkdir -p "$dir"/{munge,munge-key,state,spool,log,run,tmp}
    chmod 755 "$dir/munge"
    chmod 700 "$dir/munge-key"

    # munge
    dd if=/dev/urandom of="$dir/munge-key/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge-key/munge.key"
    munged --socket="$dir/munge/munge.socket" \
        --key-file="$dir/munge-key/munge.key" \
        --pid-file="$dir/munge/munged.pid" \
        --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge-key/munged.seed" \
        --num-threads=2 --force \
        </dev/null >>"$dir/log/munged.out" 2>&1 || up_failed "$dir"
    wait_for 15 munged munge_ok "$dir" || up_failed "$dir"

    # slurm
    ports=$(pick_ports) || up_failed "$dir"
    read -r ctld_port slurmd_port <<<"$ports"
    write_conf "$dir" "$ctld_port" "$slurmd_port" "$user"
    export SLURM_CONF=$dir/slurm.conf
    # -f puts the conf path on the command line, which 'down' uses to make
    # sure it only ever signals our daemons.
    slurmctld -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmctld.out" 2>&1 || up_failed "$dir"
    wait_for 20 slurmctld alive_by_pidfile slurmctld "$dir/run/slurmctld.pid" "$SLURM_CONF" ||
        up_failed "$dir"
    slurmd -f "$SLURM_CONF" -N localhost </dev/null >>"$dir/log/slurmd.out" 2>&1 || up_failed "$dir"
    wait_for 20 slurmd alive_by_pidfile slurmd "$dir/run/slurmd.pid" "$SLURM_CONF" ||
        up_failed "$dir"
    if ! wait_for 60 "node localhost to be idle" node_idle; then
        sinfo -N -l >&2 || true
        scontrol show node localhost >&2 || true
        up_failed "$dir"
    fi
    log "cluster up in $dir (slurmctld port $ctld_port, slurmd port $slurmd_port)"
    printf 'export SLURM_CONF=%s\n' "$SLURM_CONF"
}

cmd_down() {
    local dir=$1 conf ids p
    [[ -d $dir ]] || return 0
    dir=$(cd -- "$dir" && pwd -P)
    conf=$dir/slurm.conf
    if [[ -f $conf ]]; then
        # Cancel jobs still queued/running in this cluster (best effort; only
        # works while slurmctld and munged are still alive).
        if alive_by_pidfile slurmctld "$dir/run/slurmctld.pid" "$conf"; then
            ids=$(SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null || true)
            if [[ -n $ids ]]; then
                log "cancelling leftover jobs: $(echo "$ids" | tr '\n' ' ')"
                # shellcheck disable=SC2086
                SLURM_CONF=$conf timeout 10 scancel $ids 2>/dev/null || true
                for ((p = 0; p < 50; p++)); do
                    [[ -z $(find_stepds "$conf") ]] && break
                    sleep 0.2
                done
            fi
        fi
        stop_daemon slurmd "$dir/run/slurmd.pid" "$conf"
        for p in $(find_stepds "$conf"); do
            log "killing leftover slurmstepd $p"
            kill -KILL "$p" 2>/dev/null || true
        done
        stop_daemon slurmctld "$dir/run/slurmctld.pid" "$conf"
    fi
    stop_daemon munged "$dir/munge/munged.pid" "$dir/munge/munge.socket"
    ((${#STOPPED_PIDS[@]} == 0)) || wait_reaped "${STOPPED_PIDS[@]}"
    return 0
}

# --- selftest ----------------------------------------------------------------

selftest_cleanup() {
    local tmp=$1 rc=$2
    if ((rc != 0 && SELFTEST_UP)); then
        log "selftest failed (exit $rc); daemon logs follow"
        dump_logs "$tmp/c"
        if [[ -d $tmp/out ]]; then
            log "job output dir:"
            ls -l "$tmp/out" >&2 || true
            tail -n 20 "$tmp"/out/*.out >&2 2>/dev/null || true
        fi
    fi
    "$SELF" down "$tmp/c" || true
    rm -rf -- "$tmp"
}

cmd_selftest() {
    local tmp start arr dep i left st out
    check_installed
    start=$SECONDS
    tmp=$(mktemp -d /tmp/slurmtest.XXXXXX)
    chmod 755 "$tmp"
    # shellcheck disable=SC2064
    trap "rc=\$?; selftest_cleanup '$tmp' \$rc; exit \$rc" EXIT
    unset SLURM_CONF
    out=$("$SELF" up "$tmp/c") || exit $?
    eval "$out"
    SELFTEST_UP=1 # from now on, failures print the daemon logs (up does before)
    [[ -n ${SLURM_CONF-} ]] || die "'up' printed no SLURM_CONF"
    mkdir "$tmp/out"
    cat >"$tmp/task.sh" <<EOF
#!/bin/bash
echo "\$SLURM_ARRAY_TASK_ID" >"$tmp/out/task_\$SLURM_ARRAY_TASK_ID"
sleep 1
EOF
    chmod +x "$tmp/task.sh"
    arr=$(sbatch --parsable --array=0-2 --job-name=selftest-array -n 1 \
        --chdir="$tmp" --output="$tmp/out/array_%A_%a.out" "$tmp/task.sh")
    arr=${arr%%;*}
    dep=$(sbatch --parsable --dependency="afterany:$arr" --job-name=selftest-dep -n 1 \
        --chdir="$tmp" --output="$tmp/out/dep_%j.out" --wrap="touch '$tmp/out/done'")
    dep=${dep%%;*}
    log "submitted array job $arr and dependent job $dep"
    # squeue's default output lists only pending/running/completing jobs.
    for ((i = 0; ; i++)); do
        left=$(squeue -h -j "$arr,$dep" -o '%i %T' 2>&1) || die "squeue failed: $left"
        [[ -z $left ]] && break
        ((i < 600)) || die "jobs not finished after 120 s: $(echo "$left" | tr '\n' ' ')"
        sleep 0.2
    done
    for i in 0 1 2; do
        [[ $(cat "$tmp/out/task_$i" 2>/dev/null) == "$i" ]] || die "array task $i produced no output"
        [[ $tmp/out/done -nt $tmp/out/task_$i ]] || die "dependent job ran before array task $i finished"
    done
    [[ -f $tmp/out/done ]] || die "dependent job produced no 'done' file"
    st=$(scontrol show job "$dep" | grep -o 'JobState=[A-Z_]*' || true)
    [[ $st == JobState=COMPLETED ]] || die "dependent job state: ${st:-unknown}"
    echo "selftest: ok ($((SECONDS - start)) s)"
}

main() {
    (($# >= 1)) || usage
    case $1 in
    up) (($# == 2)) || usage; cmd_up "$2" ;;
    down) (($# == 2)) || usage; cmd_down "$2" ;;
    selftest) (($# == 1)) || usage; cmd_selftest ;;
    -h | --help | help) usage ;;
    *) usage ;;
    esac
}

main "$@"
