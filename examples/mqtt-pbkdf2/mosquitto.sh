#!/usr/bin/env bash
# Starts, stops or restarts the mosquitto of the PBKDF2 experiment.
#   mosquitto.sh start ITERATIONS [PORT]   a user 'throng' with password 'secret',
#                                          hashed with PBKDF2-SHA512 at ITERATIONS
#                                          (mosquitto_passwd's default is 101)
#   mosquitto.sh stop
#   mosquitto.sh restart [GAP_S]           stop, wait GAP_S (default 1), start the same config
# State lives in ${THRONG_MOSQUITTO_DIR:-/tmp/throng-mqtt-pbkdf2}.
set -euo pipefail
dir=${THRONG_MOSQUITTO_DIR:-/tmp/throng-mqtt-pbkdf2}
mkdir -p "$dir"
conf=$dir/mosquitto.conf pid=$dir/mosquitto.pid

wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "mosquitto.sh: mosquitto did not listen on $1 within 10 s" >&2
  return 1
}

start() {
  mosquitto -c "$conf" >"$dir/mosquitto.log" 2>&1 &
  echo $! >"$pid"
  wait_port "$(cat "$dir/port")"
}

stop() {
  [ -f "$pid" ] || return 0
  kill "$(cat "$pid")" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$(cat "$pid")" 2>/dev/null || break; sleep 0.05; done
  rm -f "$pid"
}

case "${1:-}" in
  start)
    iterations=${2:?iterations}; port=${3:-11883}
    command -v mosquitto >/dev/null || { echo "mosquitto.sh: install mosquitto (apt-get install mosquitto)" >&2; exit 1; }
    case "$iterations" in ''|*[!0-9]*) echo "mosquitto.sh: ITERATIONS is a whole number, e.g. 101" >&2; exit 2 ;; esac
    stop
    echo "$port" >"$dir/port"
    # mosquitto's own format ($7$ = PBKDF2-HMAC-SHA512, 12-byte salt, 64-byte
    # hash), written here because mosquitto_passwd fixes the iterations at 101.
    python3 - "$iterations" >"$dir/passwords" <<'PY'
import base64, hashlib, os, sys
n = int(sys.argv[1])
salt = os.urandom(12)
digest = hashlib.pbkdf2_hmac("sha512", b"secret", salt, n, 64)
print(f"throng:$7${n}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}")
PY
    chmod 600 "$dir/passwords"
    # user: mosquitto started as root would become the user mosquitto, who
    # cannot read this directory's password file.
    cat >"$conf" <<CONF
user $(id -un)
listener $port 127.0.0.1
allow_anonymous false
password_file $dir/passwords
max_connections -1
persistence false
log_dest stderr
log_type error
log_type warning
CONF
    start ;;
  stop) stop ;;
  restart) stop; sleep "${2:-1}"; start ;;
  *) echo "usage: mosquitto.sh start ITERATIONS [PORT] | stop | restart [GAP_S]" >&2; exit 2 ;;
esac
