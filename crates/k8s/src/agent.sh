#!/bin/sh
# throng agent: runs one execution segment of the plan in this pod, then
# prints the result document between marker lines so that `kubectl logs`
# can collect it after the pod has ended (`kubectl cp` cannot reach a
# finished pod). Everything it needs is a file in /plan, written by
# `throng k8s job` (files, not arguments or environment variables, because a
# multi-line YAML block keeps any text exact, even for YAML 1.1 readers).
set -u
plan="${THRONG_PLAN_DIR:-/plan}"
# The throng command line, one argument per line: `http URL ...`,
# `storm ...` or `run /plan/scenario.yaml ...`.
set --
while IFS= read -r arg; do set -- "$@" "$arg"; done < "$plan/args"
sequence=$(cat "$plan/segment-sequence")
start_at=$(cat "$plan/start-at")
i="${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is unset: run this in an Indexed Job}"
segment=$(sed -n "$((i + 1))p" "$plan/segments")
if [ -z "$segment" ]; then
    echo "throng-agent: no segment for index $i in $plan/segments" >&2
    exit 2
fi
out="$THRONG_RESULTS_DIR/segment-$i.json"
# Kubernetes cannot set ulimits; the container runtime's hard limit is the
# ceiling, and throng raises its soft limit to it by itself. Said here so
# the log shows what the pod had.
echo "throng-agent: segment $segment of $sequence, start at $start_at," \
    "open files $(ulimit -Sn) soft / $(ulimit -Hn) hard" >&2
throng "$@" --segment "$segment" --segment-sequence "$sequence" \
    --start-at "$start_at" --json "$out"
# (No --quiet: stderr is not a terminal in a pod, so there is no progress
# display anyway, and a plan may say --quiet itself.)
code=$?
echo "throng-agent: throng exited with $code" >&2
if [ -s "$out" ]; then
    # Each line of the document marked: the log interleaves stdout and
    # stderr as the runtime reads them, so a line of stderr can land
    # between the markers (seen on a real cluster).
    echo "throng-result-begin segment-$i.json"
    sed 's/^/throng-result-line /' "$out"
    echo
    echo "throng-result-end"
    # A failed run (1) or failed thresholds (99) are judged on the merged
    # result; the segment's result is what counts here.
    exit 0
fi
exit "$code"
