#!/usr/bin/env bash
# install-deps.sh - install the Debian packages nvcache builds, tests and
# benchmarks with. Idempotent; quiet when everything is there already.
#
#   tools/install-deps.sh           what the build and the tests need (CI)
#   tools/install-deps.sh --bench   also what only tests/bench/ runs against
set -euo pipefail
bench=0
case "${1:-}" in
  --bench) bench=1 ;;
  "") ;;
  *) echo "usage: install-deps.sh [--bench]" >&2; exit 2 ;;
esac
pkgs=(meson ninja-build pkg-config gcc clang libclang-rt-14-dev
      libfuse3-dev fuse3 libpmem2-dev liburing-dev
      protobuf-c-compiler libprotobuf-c-dev libcmocka-dev libssl-dev
      libnbd-dev libnbd-bin nbdkit nbd-client fio
      mpich libmpich-dev attr util-linux procps python3 python3-matplotlib zlib1g-dev
      valgrind e2fsprogs python3-libnbd python3-prometheus-client qemu-system-x86
      inotify-tools)
# (qemu-system-x86 boots the guest of tests/vm/, whose kernel has the nbd
# driver; the guest's kernel and busybox-static are downloaded and unpacked
# by tests/vm/guest.bash, not installed)
# (nbdfuse is in libnbd-bin on Debian 12; naming it made dpkg-query
# report it missing and every run call apt-get update)
# (the file systems tests/bench/fs_cluster.sh compares nvcachefs with;
# the tests never start them, so CI does not install them)
[ "$bench" = 1 ] && pkgs+=(glusterfs-server glusterfs-client moosefs-master
                           moosefs-chunkserver moosefs-client)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
