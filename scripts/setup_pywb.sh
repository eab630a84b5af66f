#!/usr/bin/env bash
# Sets up pywb for `crawler replay` and the replay tests, idempotently:
#   .venv-pywb   pywb's own Python 3.11 virtualenv, pinned by scripts/pywb-constraints.txt.
# pywb pins packages the main .venv cannot share (gevent, redis 2.x, brotlipy), so it lives
# apart and is run as a subprocess (app/replay.py). Only called where replay is needed:
# scripts/test.sh and scripts/demo.sh. Re-running is cheap: skipped when the pins are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PYWB_VERSION=2.10.0
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' || {
  echo "setup_pywb: Python 3.11 is required (found $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 2
}
stamp=.venv-pywb/.recrawl-stamp
want=$(cat scripts/pywb-constraints.txt | sha1sum | cut -c1-16)-$PYWB_VERSION
if [ ! -x .venv-pywb/bin/wayback ] || [ "$(cat $stamp 2>/dev/null)" != "$want" ]; then
  echo "setup_pywb: installing pywb==$PYWB_VERSION into .venv-pywb"
  [ -x .venv-pywb/bin/python ] || "$PY" -m venv .venv-pywb
  .venv-pywb/bin/python -m pip install -q --upgrade pip setuptools wheel
  .venv-pywb/bin/python -m pip install -q -c scripts/pywb-constraints.txt "pywb==$PYWB_VERSION"
  echo "$want" > $stamp
fi
