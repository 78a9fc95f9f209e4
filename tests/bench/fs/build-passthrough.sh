#!/usr/bin/env bash
# build-passthrough.sh OUTDIR - build libfuse's passthrough_ll example into
# OUTDIR/passthrough_ll and print its path. It is the harness-validation
# target of the fsx system tests and the anchor of the fs_* benchmarks.
# Built with the HAVE_* switches libfuse's own meson build sets on Linux, so
# fallocate and copy_file_range pass through as in a packaged build.
# Rebuilds only when the example source is newer than the binary.
set -euo pipefail
out=${1:?usage: build-passthrough.sh OUTDIR}
src=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
[ -r "$src" ] || { echo "build-passthrough: $src missing (install libfuse3-dev)" >&2; exit 1; }
mkdir -p "$out"
bin=$out/passthrough_ll
if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
  # passthrough_helpers.h sits next to the example source.
  gcc -O2 -DHAVE_FALLOCATE -DHAVE_POSIX_FALLOCATE -DHAVE_COPY_FILE_RANGE \
      -I"$(dirname "$src")" -o "$bin.tmp.$$" "$src" \
      $(pkg-config --cflags --libs fuse3) -lpthread
  mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
