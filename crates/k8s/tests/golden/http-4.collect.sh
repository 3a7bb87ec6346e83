# the agents start together at 2026-01-01T00:01:00Z; wait for all of them (a failed segment fails the job)
kubectl -n default wait --for=condition=complete --timeout=24h job/throng
# each pod printed its result between marker lines in its log
mkdir -p throng-results
for pod in $(kubectl -n default get pods -l job-name=throng -o name); do kubectl -n default logs "$pod" | awk -v dir=throng-results '$1 == "throng-result-begin" { f = dir "/" $2; next } $1 == "throng-result-end" { close(f); f = ""; next } f != "" && $1 == "throng-result-line" { sub(/^throng-result-line /, ""); print > f }'; done
# exact merge: histograms add, so the merged p99 is the p99 of every sample
throng merge throng-results/segment-0.json throng-results/segment-1.json throng-results/segment-2.json throng-results/segment-3.json -o throng-merged.json
throng report throng-merged.json
# then remove the job and its pods
kubectl -n default delete job/throng configmap/throng secret/throng-keys
