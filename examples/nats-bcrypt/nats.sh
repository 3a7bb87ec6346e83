#!/usr/bin/env bash
# Starts, stops or restarts the nats-server of the bcrypt experiment.
#   nats.sh start COST [PORT]   a user 'throng' with password 'secret' hashed at
#                               bcrypt COST (0: the password in plain text)
#   nats.sh stop
#   nats.sh restart [GAP_S]     stop, wait GAP_S (default 1), start the same config
# State lives in ${THRONG_NATS_DIR:-/tmp/throng-nats-bcrypt}.
set -euo pipefail
dir=${THRONG_NATS_DIR:-/tmp/throng-nats-bcrypt}
mkdir -p "$dir"
conf=$dir/nats.conf pid=$dir/nats.pid

wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nats.sh: nats-server did not listen on $1 within 10 s" >&2
  return 1
}

start() {
  nats-server -c "$conf" >"$dir/nats.log" 2>&1 &
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
    cost=${2:?cost}; port=${3:-14222}
    command -v nats-server >/dev/null || { echo "nats.sh: install nats-server (apt-get install nats-server)" >&2; exit 1; }
    if [ "$cost" = 0 ]; then
      password=secret
    else
      command -v htpasswd >/dev/null || { echo "nats.sh: install htpasswd (apt-get install apache2-utils)" >&2; exit 1; }
      password=$(htpasswd -bnBC "$cost" "" secret | tr -d ':\n')
    fi
    stop
    echo "$port" >"$dir/port"
    cat >"$conf" <<CONF
listen: 127.0.0.1:$port
pid_file: "$pid"
authorization { users = [ { user: throng, password: "$password" } ] }
CONF
    start ;;
  stop) stop ;;
  restart) stop; sleep "${2:-1}"; start ;;
  *) echo "usage: nats.sh start COST [PORT] | stop | restart [GAP_S]" >&2; exit 2 ;;
esac
