#!/usr/bin/env bash
# Runs README commands on a fresh Debian 12: a minimal bookworm (debootstrap --variant=minbase:
# no compiler, no git, no python, no sudo) in a chroot, the repository's committed HEAD cloned
# into it, then each command given (default: the README's three) as root with a clean
# environment, in that order, stopping at the first that fails. Not part of the test suite:
# needs root, network access to a Debian mirror and a few GB of disk; takes tens of minutes.
#
#   scripts/fresh-debian.sh                                   main.sh, lm.sh, test.sh
#   scripts/fresh-debian.sh "scripts/main.sh" "cmake --preset release && cmake --build --preset release"
#   FRESH_ROOT=/var/tmp/bookworm scripts/fresh-debian.sh ...  (default: build/fresh-debian, reused)
#
# Each command's output goes to the terminal and to FRESH_ROOT/log/<n>.log, with its time.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${FRESH_ROOT:-$repo/build/fresh-debian}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "fresh-debian.sh: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
cmds=("$@")
[ ${#cmds[@]} -eq 0 ] && cmds=("scripts/main.sh" "scripts/lm.sh" "scripts/test.sh")

if ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
fi
if [ ! -x "$root/bin/bash" ]; then
  mkdir -p "$root"
  debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
rm -rf "$root/root/cannl"
git clone -q "$repo" "$root/root/cannl"
mkdir -p "$root/log"

cleanup() {
  umount -R "$root/dev" 2>/dev/null || true
  umount -R "$root/sys" 2>/dev/null || true
  umount "$root/proc" 2>/dev/null || true
}
trap cleanup EXIT
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"

n=0
for cmd in "${cmds[@]}"; do
  n=$((n + 1))
  echo "== fresh Debian $(cat "$root/etc/debian_version"): $cmd (log: $root/log/$n.log)"
  start=$SECONDS
  if ! chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TERM="${TERM:-dumb}" bash -c "cd /root/cannl && $cmd" 2>&1 | tee "$root/log/$n.log"; then
    echo "== FAILED after $((SECONDS - start)) s: $cmd" >&2
    exit 1
  fi
  echo "== ok in $((SECONDS - start)) s: $cmd"
done
