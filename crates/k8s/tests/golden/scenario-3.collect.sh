# the agents start together at 2026-01-01T00:01:00Z; wait for all of them (a failed segment fails the job)
kubectl -n load wait --for=condition=complete --timeout=24h job/auth-ramp
# each pod printed its result between marker lines in its log
mkdir -p auth-ramp-results
for pod in $(kubectl -n load get pods -l job-name=auth-ramp -o name); do kubectl -n load logs "$pod" | awk -v dir=auth-ramp-results '$1 == "throng-result-begin" { f = dir "/" $2; next } $1 == "throng-result-end" { close(f); f = ""; next } f != "" && $1 == "throng-result-line" { sub(/^throng-result-line /, ""); print > f }'; done
# the same files are also kept on the claim throng-results, under /results
# exact merge: histograms add, so the merged p99 is the p99 of every sample
throng merge auth-ramp-results/segment-0.json auth-ramp-results/segment-1.json auth-ramp-results/segment-2.json -o auth-ramp-merged.json
throng report auth-ramp-merged.json
# then remove the job and its pods
kubectl -n load delete job/auth-ramp configmap/auth-ramp secret/auth-ramp-keys
