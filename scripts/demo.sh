#!/usr/bin/env bash
# Install everything (pip only when the checkout changed), bring the dev cluster up and start JupyterLab with
# Betty in a demo project (wiki, experiment notebooks) under demo/ (or $BETTY_DEMO_DIR). Once JupyterLab
# answers, a banner gives the link that opens the tour notebook with Betty's panel beside it.
# Arguments go to `jupyter lab` (--port=N, say). Ctrl+C stops JupyterLab; the dev cluster keeps running (it says
# so, and how to stop it).
# No extras; an explicit "" keeps this script's own arguments (for jupyter lab) from reaching install.sh.
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" ""

repo="$PWD"
demo="${BETTY_DEMO_DIR:-$repo/demo}"
.venv/bin/betty init "$demo" >/dev/null
# The tour and its neighbours, without the outputs stored for the tests (an old port, old dates).
.venv/bin/python scripts/demo_notebooks.py "$demo/notebooks" notebooks/0[1-9]-*.ipynb

# The demo's JupyterLab asks no "news" question over Betty's prompt on its first load (JupyterLab's own setting,
# for this checkout's .venv only), and Betty's chat answers with its offline demo model unless a real model is
# configured (scripts/demo-config is read before the person's own Jupyter config; docs/llm.md).
mkdir -p .venv/share/jupyter/lab/settings/overrides.d
cp scripts/demo-config/lab-overrides.json .venv/share/jupyter/lab/settings/overrides.d/betty-demo.json
export JUPYTER_CONFIG_PATH="$repo/scripts/demo-config${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"

root_flag=()
[ "$(id -u)" -eq 0 ] && root_flag=(--allow-root)
cd "$demo"
"$repo/.venv/bin/jupyter-lab" "${root_flag[@]}" --no-browser --ip=127.0.0.1 --ServerApp.root_dir="$demo" "$@" &
server=$!
# JupyterLab is asked to stop, and ends by itself within seconds. A demo must give the terminal back all the
# same when something outside Betty holds it (a kernel that does not answer, a disk that does not): one whose
# shutdown has not ended after 20 s is stopped for good, with its kernels.
stop_server() {
  kill -TERM "$server" 2>/dev/null || true
  local waited=0
  while kill -0 "$server" 2>/dev/null && ((waited < 40)); do
    sleep 0.5
    waited=$((waited + 1))
  done
  if kill -0 "$server" 2>/dev/null; then
    echo "betty: JupyterLab did not finish stopping in 20 s; stopping it and its kernels now" >&2
    pkill -KILL -P "$server" 2>/dev/null || true
    kill -KILL "$server" 2>/dev/null || true
  fi
  wait "$server" 2>/dev/null || true
}
dev_cluster_note() {
  echo "betty: the dev cluster keeps running for the next start; \`.venv/bin/betty dev-cluster down\` stops it" >&2
}
trap 'stop_server; dev_cluster_note; exit 130' INT TERM
if ! "$repo/.venv/bin/python" "$repo/scripts/demo_link.py" "$server" notebooks/01-tour.ipynb; then
  stop_server
  exit 1
fi
wait "$server"
