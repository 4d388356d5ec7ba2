#!/bin/bash
# Run BY HAND on a host with an NVIDIA GPU: the core.trace sampler beside a short GPU load,
# its gpu block printed beside nvidia-smi's own readings (every 500 ms), to check the
# sampler's parsing and arithmetic on real hardware. Not run by the test suite.
#   bench/gpu_trace.sh [SECONDS (30)] [INTERVAL (1)]
set -euo pipefail
seconds=${1:-30}
interval=${2:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
command -v nvidia-smi >/dev/null || { echo "no nvidia-smi on PATH" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/veglia-gpu-trace.XXXXXX")
cd "$work"
fields=index,uuid,name,memory.total,driver_version,utilization.gpu,utilization.memory,memory.used
nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits -lms 500 >nvidia-smi.log &
logger=$!
# A load: a CUDA sample when one is there, else nvidia-smi itself (little GPU use, but the
# parsing is still checked).
load=
for candidate in "${CUDA_SAMPLE:-}" /usr/local/cuda/extras/demo_suite/bandwidthTest \
    /usr/local/cuda/samples/bin/x86_64/linux/release/bandwidthTest; do
    [[ -n $candidate && -x $candidate ]] && load=$candidate && break
done
cat >job.sh <<JOB
#!/bin/bash
source "$here/plugins/trace/start.sh"
veglia_trace_sampler="$here/plugins/trace/sampler.sh"
veglia_trace_start $interval
end=\$((SECONDS + $seconds))
while ((SECONDS < end)); do
    if [[ -n "$load" ]]; then {veglia_trace_fd}>&- "$load" >/dev/null; else {veglia_trace_fd}>&- nvidia-smi -q >/dev/null; fi
done
veglia_trace_stop
JOB
bash job.sh
kill "$logger"
wait "$logger" 2>/dev/null || true
echo "== our gpu block ($work/_veglia_trace.json)"
python3 - <<'PY'
import json
from statistics import mean

trace = json.load(open("_veglia_trace.json"))
print(json.dumps(trace.get("gpu"), indent=2))
rows = {}
for line in open("nvidia-smi.log"):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 8 and parts[0].isdigit():
        rows.setdefault(parts[0], []).append(parts)


def numbers(rows, i):
    return [int(r[i]) for r in rows if r[i].isdigit()]


print("== nvidia-smi -lms 500, per GPU: mean / peak")
for index, got in rows.items():
    for label, i in (("util %", 5), ("mem bw %", 6), ("mem used MiB", 7)):
        values = numbers(got, i)
        if values:
            print(f"GPU {index} {label:13} {mean(values):9.1f} / {max(values)}")
        else:
            print(f"GPU {index} {label:13} unknown ({got[0][i]})")
PY
echo "(the sampler weighs its samples by time, the log is even: expect close, not equal)"
