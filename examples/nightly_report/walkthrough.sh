#!/usr/bin/env bash
# The nightly report from a shell: the 02:00 schedule, tonight's run without waiting for 02:00,
# 40 exports and the merge that waits for them. Needs a bucket: on this machine,
#   pail server --bucket reports        # and, in this shell, the two lines it prints
#   examples/nightly_report/walkthrough.sh reports
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bucket="${1:-${PAIL_BUCKET:-reports}}"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"   # nightly.py, the handler module
field() { python3 -c "import json, sys; print(json.load(sys.stdin)[sys.argv[1]], end='')" "$1"; }

# 1. At 02:00 each night the reaper's pass (`pail reap --every 60`, or the construct's
#    reaper) enqueues one plan job, {"step": "plan"}.
pail schedule add "$bucket" nightly-report '{"step": "plan"}' --cron "0 2 * * *"
pail schedule list "$bucket"

# 2. Tonight's run now: enqueue what the 02:00 tick enqueues.
plan=$(pail enqueue "$bucket" '{"step": "plan"}')

# 3. The plan fans out 40 exports and a merge that waits for all of them.
pail work-once "$bucket" --handler nightly:run --max-jobs 1
merge=$(pail result "$bucket" "$plan" | field merge)
pail status "$bucket" "$merge"                  # waiting: on 40 exports
pail jobs "$bucket" --state waiting --no-details

# 4. Workers run the 40 exports; the last one to succeed makes the merge pending, and the
#    merge reads the 40 results.
pail work-once "$bucket" --handler nightly:run --max-jobs 41
pail result "$bucket" "$merge" | field text
