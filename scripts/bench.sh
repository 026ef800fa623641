#!/usr/bin/env bash
# Prints the studio's figures as one table: each with its target and the
# command that measures it. Benchmarks, not timed tests: the machines are
# shared, so read the figures as orders of magnitude and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

# The PostgreSQL rows need a server: one of their own, durable as SQLite's
# store is (fsync on, commits not waiting for the disk).
if [ -z "${STUDIO_TEST_POSTGRES:-}" ]; then
  STUDIO_PG_FSYNC=on exec ./scripts/with-postgres.sh "$0" "$@"
fi

declare -A ran # a benchmark's output, so that several rows read one run

row() { # figure, target, package, benchmark, metric, benchtime
  local figure=$1 target=$2 pkg=$3 bench=$4 metric=$5 time=${6:-5x}
  local cmd="go test -run '^\$' -bench '^${bench}\$' -benchtime ${time} ${pkg}"
  local key="$pkg $bench $time" out value
  if [[ -z "${ran[$key]+set}" ]]; then
    ran[$key]=$(go test -run '^$' -bench "^${bench}\$" -benchtime "$time" -timeout 30m "$pkg" 2>&1) || ran[$key]="FAILED
${ran[$key]}"
  fi
  out=${ran[$key]}
  if [[ $out == FAILED* ]]; then echo "| $figure | FAILED | $target | \`$cmd\` |"; echo "$out" >&2; return; fi
  value=$(echo "$out" | awk -v m="$metric" '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($i == m) v = $(i-1) } END { print v }')
  echo "| $figure | $value $metric | $target | \`$cmd\` |"
}

echo "Delegation Studio figures — $(date -u +%Y-%m-%d), $(nproc) cores, $(go version | cut -d' ' -f3)"
echo
echo "| figure | measured | target | command |"
echo "|---|---|---|---|"
row "engine time per model call (200 + 50 steps, scripted, tokens counted)" "≤ 20 µs" ./internal/session/ BenchmarkEngine200Plus50 ns/model-call 30x
row "the same, every event stored and broadcast to a viewer" "—" ./internal/server/ BenchmarkEnginePersistedBroadcast ns/model-call 5x
row "ingest through the recorder vs a plain batched INSERT" "≥ 0.5" ./internal/db/ BenchmarkIngest ours/plain 10x
row "ingest rate through the recorder" "—" ./internal/db/ BenchmarkIngest events/s 10x
row "store bytes ÷ the messages' bytes as the trace exports them, 2,000 messages" "≤ 1.4" ./internal/db/ BenchmarkStorage db/raw-2k 1x
row "store bytes ÷ the messages' bytes as the trace exports them, 100,000 messages" "≤ 1.4" ./internal/db/ BenchmarkStorage db/raw-100k 1x
row "sessions list: 40 sessions of 1 MB scenarios ÷ 40 of small ones, time" "≈ 1" ./internal/db/ BenchmarkSessionsList big/small 20x
row "sessions list: the same, bytes allocated" "≈ 1" ./internal/db/ BenchmarkSessionsList alloc-big/small 20x
row "ingest into PostgreSQL ÷ into SQLite, one session" "—" ./internal/db/ BenchmarkIngestPostgres postgres/sqlite-1 3x
row "ingest into PostgreSQL ÷ into SQLite, eight sessions at once" "—" ./internal/db/ BenchmarkIngestPostgres postgres/sqlite-8 3x
row "ingest rate into PostgreSQL, eight sessions at once" "—" ./internal/db/ BenchmarkIngestPostgres postgres-events/s-8 3x
row "ingest rate into SQLite, eight sessions at once" "—" ./internal/db/ BenchmarkIngestPostgres sqlite-events/s-8 3x
row "event to viewer p99, 100 websocket viewers on loopback" "≤ 10 ms" ./internal/live/ BenchmarkEventToViewer100 p99-ms 3x
row "event to viewer p99 on another replica (PostgreSQL NOTIFY, then the table)" "—" ./internal/server/ BenchmarkReplicaLatency p99-ms-other-replica 1x
row "the same ÷ on the replica running the session" "≤ 2" ./internal/server/ BenchmarkReplicaLatency other/running 1x
row "the same ÷ on one studio on SQLite" "—" ./internal/server/ BenchmarkReplicaLatency other/sqlite 1x
row "server render of a 10,000-message session page" "≤ 300 ms" ./internal/server/ BenchmarkSessionPage10k ms/page 5x
row "live page: server CPU per model call, one viewer, 4,000-step ÷ 500-step session" "≤ 1.3" ./internal/server/ BenchmarkLiveCPU x4000/500 1x
row "live page: server CPU per model call at 4,000 steps, one viewer ÷ none" "≤ 2" ./internal/server/ BenchmarkLiveCPU watched/unwatched 1x
row "live page: bytes a viewer receives, 2,000-turn ÷ 250-turn session" "≤ 10" ./internal/server/ BenchmarkViewerBytes x2000/250 1x
row "live page: the largest message a viewer receives (2,000 turns)" "—" ./internal/server/ BenchmarkViewerBytes largest-message 1x
row "session page, 100,000 ÷ 1,000 messages, server time to the last byte" "≤ 3" ./internal/server/ BenchmarkSessionPages x100k/1k 1x
row "session page of 100,000 messages: HTML" "≤ 1.5 MB" ./internal/server/ BenchmarkSessionPages html-bytes-100k 1x
row "a message fragment at 100,000 messages" "≤ 5 ms" ./internal/server/ BenchmarkSessionPages ms-fragment-100k 1x
row "a scrubber step at 100,000 messages" "≤ 5 ms" ./internal/server/ BenchmarkSessionPages ms-scrub-100k 1x
row "a reconnect at 100,000 messages (after=last−1, to the first message)" "—" ./internal/server/ BenchmarkSessionPages ms-reconnect-100k 1x
row "big delegation: session page of a 50-child fan-out after 5,000 parent steps ÷ a 5-child one" "≤ 2" ./internal/server/ BenchmarkBigDelegation page-x50/5 1x
row "big delegation: tree layout cost per box, 50 children ÷ 5 (linear in the boxes)" "≤ 2" ./internal/server/ BenchmarkBigDelegation layout-per-box-x50/5 1x
row "big delegation: tree layout, 50 children ÷ 5 (51 boxes ÷ 6)" "—" ./internal/server/ BenchmarkBigDelegation layout-x50/5 1x
row "big delegation: the tree's SVG of 50 children" "≤ 200 KB" ./internal/server/ BenchmarkBigDelegation tree-KB-50 1x
row "big delegation: session page of 50 children after 5,000 steps, server time" "—" ./internal/server/ BenchmarkBigDelegation ms-page-50 1x
row "event → browser p99, 100 viewers in another process (engine → SQLite → patch → websocket)" "≤ 10 ms" ./internal/server/ BenchmarkEventToBrowser p99-ms-100 1x
row "event → browser p99, 500 viewers in another process" "≤ 50 ms" ./internal/server/ BenchmarkEventToBrowser p99-ms-500 1x
row "event → browser: bytes a viewer receives over the 150-turn session (100 viewers)" "—" ./internal/server/ BenchmarkEventToBrowser bytes-per-viewer-100 1x
row "event → browser: the server's CPU for that session, 100 viewers (ms)" "—" ./internal/server/ BenchmarkEventToBrowser server-cpu-ms-100 1x
row "event → browser: the server's CPU for that session, 500 viewers (ms)" "—" ./internal/server/ BenchmarkEventToBrowser server-cpu-ms-500 1x
row "peak RSS of studio run on the 200 + 50 scenario, stored" "—" ./cmd/studio/ BenchmarkPeakRSS peak-RSS-MB 3x
row "studio run of the example / studio --version, wall time (median)" "≤ 1.5×" ./cmd/studio/ BenchmarkStartup run/version-time 20x
row "studio run of the example, wall time (median)" "≤ 25 ms" ./cmd/studio/ BenchmarkStartup run-ms 20x
row "studio run of the example / studio --version, peak RSS" "≤ 3×" ./cmd/studio/ BenchmarkStartup run/version-RSS 20x
row "studio run of the example, peak RSS" "≤ 25 MB" ./cmd/studio/ BenchmarkStartup run-peak-RSS-MB 20x
row "studio run --json, peak RSS at about 25,000 model calls ÷ at 3,125 (x8)" "≤ 1.3" ./cmd/studio/ BenchmarkRunJSON peak-x8/x1 1x
row "studio run --json at about 25,000 model calls: peak RSS ÷ the output's bytes" "—" ./cmd/studio/ BenchmarkRunJSON peak/output 1x
row "studio run's tree, 4,000 messages: CPU folding the log as it comes ÷ through the trace's JSON (view.FromTrace)" "< 1" ./cmd/studio/ BenchmarkTreeFold now/before 5x
row "a tokenizer's first count in a process (open + one sentence)" "—" ./internal/tokens/ BenchmarkFirstCount ns/op 2000x
row "received OTLP: cost per received message at 400 calls vs 50 (x8)" "≤ 1.3" ./internal/ingest/ BenchmarkReceiveLongAgent x8/x1 3x
row "received OTLP: mapping time per received message" "—" ./internal/ingest/ BenchmarkReceiveLongAgent ns/received-message 3x
row "OTLP receiver: spans per CPU second, HTTP request to stored session (the recorded deepagents run, one request per trace)" "≥ 23,000 (10× the 2,300 of #30)" ./internal/server/ BenchmarkReceiveOTLP spans/cpu-s 3x
row "OTLP receiver: its CPU ÷ only decoding the same requests" "—" ./internal/server/ BenchmarkReceiveOTLP ours/decode 3x
row "recording endpoint: cost per received message at 400 calls vs 50 (x8)" "≤ 1.3" ./internal/proxy/ BenchmarkProxyLongAgent x8/x1 5x
row "recording endpoint: time per received message (read, placed, new ones stored)" "—" ./internal/proxy/ BenchmarkProxyLongAgent ns/received-message 5x
row "recording endpoint: database bytes per raw message byte, one agent's 400 calls (each request the whole conversation)" "≤ 2" ./internal/server/ BenchmarkProxyStorage db/raw 1x
row "the same: database bytes per byte received" "—" ./internal/server/ BenchmarkProxyStorage db/received 1x
row "recording endpoint: time to the client's first streamed piece, 4,000-piece ÷ 500-piece answer" "≤ 1.3" ./internal/proxy/ BenchmarkProxyStream first-piece-x8/x1 20x
row "recording endpoint: relaying and recording a 4,000-piece stream ÷ a bare reverse proxy's relay" "—" ./internal/proxy/ BenchmarkProxyStream ours/bare-relay 20x
row "recording endpoint: time added per streamed piece over the bare relay" "—" ./internal/proxy/ BenchmarkProxyStream ns-added/piece 20x
row "token count of a 120-character sentence (o200k, warm)" "—" ./internal/tokens/ 'BenchmarkCount/o200k_base/sentence120' ns/op 200000x
row "token count of text without a space: cost when it grows x8 (512 KiB to 4 MiB of letters, CPU time)" "≤ x10.4" ./internal/tokens/ BenchmarkRunWithoutSpaces size-x8 3x
row "the same: CPU time per byte of the 4 MiB" "—" ./internal/tokens/ BenchmarkRunWithoutSpaces cpu-ns/byte-4MiB 3x
row "schema check of a 2 MiB scenario of unknown keys" "< 1 s" ./schema/ BenchmarkUnknownKeyBomb ms-2MiB 3x
row "the same: cost when the document grows x8 (256 KiB to 2 MiB)" "≈ x8" ./schema/ BenchmarkUnknownKeyBomb size-x8 3x
row "glob: cost when the path grows x8 (512 B to 4 KiB)" "≈ x8" ./internal/delegation/ BenchmarkGlob path-x8 3x
row "glob: cost when the pattern grows x8 (32 to 256 characters)" "< x8" ./internal/delegation/ BenchmarkGlob pattern-x8 3x
row "glob automaton vs the regexp it replaced (4 KiB path, 256-character pattern)" "< 1" ./internal/delegation/ BenchmarkGlob ours/regexp 3x
row "OTLP export, 2,000 ÷ 1,000 messages: bytes" "≤ 2.2" ./cmd/studio/ BenchmarkOTLPScaling bytes-ratio 2x
row "OTLP export, 2,000 ÷ 1,000 messages: the exporting process's peak RSS" "≤ 2.2" ./cmd/studio/ BenchmarkOTLPScaling rss-ratio 2x
row "OTLP export of 2,000 messages ÷ its trace, bytes" "—" ./cmd/studio/ BenchmarkOTLPScaling otlp/trace 2x
row "trace export of 100,000 messages ÷ a plain SELECT of its rows, CPU time" "≤ 5" ./internal/db/ BenchmarkExport100k trace/read 1x
row "OTLP export of 100,000 messages ÷ a plain SELECT of its rows, CPU time" "≤ 5" ./internal/db/ BenchmarkExport100k otlp/read 1x
row "server RSS above idle streaming the trace of 100,000 messages" "≤ 64 MB" ./cmd/studio/ BenchmarkTraceExport100k trace-RSS-MB-above-idle 1x
row "server RSS above idle streaming the OTLP of 100,000 messages" "—" ./cmd/studio/ BenchmarkTraceExport100k otlp-RSS-MB-above-idle 1x
row "server RSS above idle refusing a 30 MB message without a space, ÷ the body" "≤ 8" ./cmd/studio/ BenchmarkThirtyMegabyteMessage peak-RSS/body 2x

# The wide sweeps of the property tests that make test checks at a few
# chosen points (batch sizes of the live-equals-reload property, 1 to 16).
echo
if STUDIO_SWEEP=1 go test -count=1 -run '^TestLivePageEqualsReload$' -timeout 60m ./internal/present/ >/dev/null 2>&1; then
  echo "Sweep: live page equals a reload at every batch size 1–16 (\`STUDIO_SWEEP=1 go test -run TestLivePageEqualsReload ./internal/present/\`): held"
else
  echo "Sweep: live page equals a reload at every batch size 1–16 (\`STUDIO_SWEEP=1 go test -run TestLivePageEqualsReload ./internal/present/\`): FAILED"
fi
