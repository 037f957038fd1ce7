#!/usr/bin/env bash
# Install everything, bring the dev cluster up and open JupyterLab with Betty on the demo notebook.
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"

root_flag=()
[ "$(id -u)" -eq 0 ] && root_flag=(--allow-root)
exec .venv/bin/jupyter lab "${root_flag[@]}" --no-browser --ip=127.0.0.1 \
  --ServerApp.root_dir="$PWD" notebooks/00-welcome.ipynb "$@"
