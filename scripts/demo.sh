#!/usr/bin/env bash
# Install everything, bring the dev cluster up and open JupyterLab with Betty on the tour notebook,
# in a demo project (wiki, experiment notebooks) under demo/ (or $BETTY_DEMO_DIR).
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"

repo="$PWD"
demo="${BETTY_DEMO_DIR:-$repo/demo}"
.venv/bin/betty init "$demo" >/dev/null
cp -n notebooks/0[1-9]-*.ipynb "$demo/notebooks/" 2>/dev/null || true

root_flag=()
[ "$(id -u)" -eq 0 ] && root_flag=(--allow-root)
cd "$demo"
exec "$repo/.venv/bin/jupyter" lab "${root_flag[@]}" --no-browser --ip=127.0.0.1 \
  --ServerApp.root_dir="$demo" notebooks/01-tour.ipynb "$@"
