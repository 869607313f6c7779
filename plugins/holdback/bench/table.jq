# plugins/holdback/bench/table.jq: the table of run.sh. Input: the BENCH_RAW
# lines of several scripts/bench.sh runs, each tagged with its run (. + {run: N}).
# "vs no guard" is the median over rounds of (target − tollgate) within the
# same run and round.
def median: map(select(. != null)) | sort |
	if length == 0 then null elif length % 2 == 1 then .[(length - 1) / 2]
	else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def ms: if . == null then "–" else (. / 10 | round / 100 | tostring) end;
def signed: if . == null then "–" elif . >= 0 then "+" + ms else ms end;
def name: {"direct": "direct (mock)", "tollgate": "no guard", "tollgate-holdback": "holdback", "tollgate-buffer": "buffer"}[.];
def rank: {"direct": 0, "tollgate": 1, "tollgate-holdback": 2, "tollgate-buffer": 3}[.];
map(select(.mode == "stream"))
| (map(select(.target == "tollgate")) | map({key: "\(.run)/\(.level)/\(.round)", value: .ttft_us}) | from_entries) as $base
| group_by([.level, (.target | rank)])
| map({level: .[0].level, target: .[0].target, rounds: length,
	t50: (map(.ttft_us.p50) | median), t99: (map(.ttft_us.p99) | median),
	d50: (if .[0].target == "tollgate" or .[0].target == "direct" then null else map(.ttft_us.p50 - $base["\(.run)/\(.level)/\(.round)"].p50) | median end),
	d99: (if .[0].target == "tollgate" or .[0].target == "direct" then null else map(.ttft_us.p99 - $base["\(.run)/\(.level)/\(.round)"].p99) | median end),
	tot50: (map(.total_us.p50) | median), failed: (map(.failures) | add), count: (map(.count) | add)})
| .[]
| "| \(.level) | \(.target | name) | \(.t50 | ms) | \(.t99 | ms) | \(.d50 | signed) | \(.d99 | signed) | \(.tot50 | ms) | \(.rounds) | \(.failed)/\(.count) |"
