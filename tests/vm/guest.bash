# guest.bash - a small qemu guest whose kernel has the nbd driver, for the
# tests that swap to nvswapd through nbd-client and the kernel's own driver
# (this machine's kernel has none). Sourced after tests/system/lib.sh.
#
#   vm_build                   kernel + initramfs, cached: sets VM_KERNEL, VM_INITRD
#   vm_boot LOG SOCK ARGS...   start the guest; its virtio-serial port is
#                              qemu's client connection to the Unix socket
#                              SOCK (an NBD server); ARGS go on the kernel
#                              command line (nvt.* of tests/vm/init.sh).
#                              Sets VM_PID.
#   vm_wait LOG SECONDS        wait for the guest's "NVT RESULT" line (and
#                              its power-off); 0 PASS, 1 FAIL or no result
#   vm_run LOG SOCK ARGS...    vm_boot + vm_wait (bound NBDG_BOUND, 300 s),
#                              again with TCG if KVM failed; the guest's
#                              NVT lines go to stderr
#
# The guest is built from Debian packages, unpacked, not installed: the
# kernel of linux-image-cloud-amd64 (nbd, virtio_console are modules),
# busybox-static, the host's nbd-client and util-linux swap tools with the
# libraries ldd names, and two static programs of ours: tests/vm/relay.c
# (nvt-relay) and tests/system/nbd_memtouch.c (nvt-memtouch). It is cached
# in $NVCACHE_VM_CACHE (default /var/cache/nvcache-vm) under a key of the
# package versions and the sources, so a second run boots at once.
#
# Acceleration: KVM where /dev/kvm is a real hypervisor, TCG otherwise
# (NVCACHE_VM_ACCEL=kvm|tcg overrides). /dev/kvm of kvm_pvm (a software
# hypervisor) stops Debian's kernel at boot with "KVM internal error", and
# qemu then pauses instead of exiting: vm_wait watches for that and kills
# qemu by its pid; vm_boot's next call uses TCG.

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_CACHE=${NVCACHE_VM_CACHE:-/var/cache/nvcache-vm}
VM_MEM=${VM_MEM:-160}
VM_KVM_BROKEN=

# _vm_candidate PKG: the version apt would fetch (empty if unknown).
_vm_candidate() { apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'; }

# _vm_kernel_pkg: the versioned package behind linux-image-cloud-amd64.
_vm_kernel_pkg() {
  apt-cache depends linux-image-cloud-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

# _vm_copy_bin ROOT FILE DEST: FILE into ROOT/DEST with the libraries ldd
# names, each at its own path.
_vm_copy_bin() {
  local root=$1 f=$2 dest=$3 lib
  install -D -m 755 "$f" "$root/$dest" || return 1
  for lib in $(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    [ -e "$root$lib" ] || install -D -m 755 "$lib" "$root$lib" || return 1
  done
}

# _vm_make DIR KPKG: build the guest into DIR (a fresh directory).
_vm_make() {
  local dir=$1 kpkg=$2 tmp root cc m f
  tmp=$dir/tmp root=$dir/tmp/root
  mkdir -p "$tmp/dl" "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,run,tmp,modules} || return 1
  chmod 777 "$tmp/dl"   # apt-get download runs as _apt where it can
  (cd "$tmp/dl" && apt-get download -q "$kpkg" busybox-static >/dev/null 2>"$tmp/apt.err") || {
    cat "$tmp/apt.err" >&2; return 1; }
  dpkg-deb -x "$tmp"/dl/linux-image-*.deb "$tmp/k" && dpkg-deb -x "$tmp"/dl/busybox-static_*.deb "$tmp/bb" || return 1
  cp "$tmp"/k/boot/vmlinuz-* "$dir/vmlinuz" || return 1
  for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_console nbd; do
    f=$(find "$tmp/k/lib/modules" -name "$m.ko*" | head -1)
    [ -n "$f" ] || { echo "vm: $kpkg has no $m module" >&2; return 1; }
    case $f in *.xz) xz -dc "$f" >"$root/modules/$m.ko" ;; *) cp "$f" "$root/modules/$m.ko" ;; esac || return 1
  done
  install -m 755 "$tmp/bb/bin/busybox" "$root/bin/busybox" || return 1
  for m in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$m" ] || ln -s busybox "$root/bin/$m"
  done
  # the real tools a user runs, ahead of busybox's in the guest's PATH
  for m in nbd-client swapon swapoff mkswap; do
    _vm_copy_bin "$root" "$(command -v $m)" "usr/sbin/$m" || return 1
  done
  cc=${CC:-cc}
  "$cc" -std=gnu11 -O2 -Wall -Wextra -Werror -static -o "$root/usr/bin/nvt-relay" "$VM_DIR/relay.c" &&
    "$cc" -std=gnu11 -O2 -Wall -Wextra -Werror -static -o "$root/usr/bin/nvt-memtouch" \
      "$VM_DIR/../system/nbd_memtouch.c" || return 1
  install -m 755 "$VM_DIR/init.sh" "$root/init" || return 1
  mknod "$root/dev/console" c 5 1 2>/dev/null || true
  (cd "$root" && find . | "$root/bin/busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$dir/initrd.gz" || return 1
  rm -rf "$tmp"
}

vm_build() {
  local kpkg kver bver nver key dir new
  t_require_cmd apt-get dpkg-deb ldd gzip "${CC:-cc}"
  kpkg=$(_vm_kernel_pkg)
  if [ -z "$kpkg" ]; then
    apt-get update -qq >/dev/null 2>&1
    kpkg=$(_vm_kernel_pkg)
  fi
  [ -n "$kpkg" ] || t_fail "apt knows no linux-image-cloud-amd64 (apt-get update?)"
  kver=$(_vm_candidate "$kpkg") bver=$(_vm_candidate busybox-static)
  nver=$(dpkg-query -W -f '${Version}' nbd-client util-linux 2>/dev/null)
  key=$( { echo "$kpkg $kver $bver $nver ${CC:-cc}"
           declare -f _vm_make _vm_copy_bin
           cat "$VM_DIR/relay.c" "$VM_DIR/init.sh" "$VM_DIR/../system/nbd_memtouch.c"
         } | sha256sum | cut -c1-16)
  dir=$VM_CACHE/$kpkg-$key
  if [ ! -f "$dir/initrd.gz" ]; then
    mkdir -p "$VM_CACHE" || t_fail "cannot create $VM_CACHE"
    new=$(mktemp -d "$VM_CACHE/.new.XXXXXX") || t_fail "cannot write $VM_CACHE"
    t_log "building the guest ($kpkg $kver, busybox-static $bver) into $dir"
    _vm_make "$new" "$kpkg" || { rm -rf "$new"; t_fail "building the guest failed"; }
    # another test may have built it meanwhile: either copy will do
    mv -T "$new" "$dir" 2>/dev/null || rm -rf "$new"
  fi
  # guests of other versions unused for a week go (each is ~25 MB)
  touch "$dir"
  find "$VM_CACHE" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' -mtime +7 \
    -exec rm -rf {} + 2>/dev/null
  VM_KERNEL=$dir/vmlinuz VM_INITRD=$dir/initrd.gz
}

vm_accel() {
  if [ -n "${NVCACHE_VM_ACCEL:-}" ]; then echo "$NVCACHE_VM_ACCEL"; return; fi
  if [ -z "$VM_KVM_BROKEN" ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then
    echo kvm
  else
    echo tcg
  fi
}

vm_boot() {
  local log=$1 sock=$2; shift 2
  VM_ACCEL=$(vm_accel)
  # reconnect=1: qemu connects again a second after the server closes
  # (nbd-client -d ends the NBD session; a restarted server)
  qemu-system-x86_64 -accel "$VM_ACCEL" -m "${VM_MEM}M" -smp 1 -nodefaults -nic none \
    -display none -monitor none -no-reboot -serial "file:$log" \
    -kernel "$VM_KERNEL" -initrd "$VM_INITRD" \
    -append "console=ttyS0 panic=-1 quiet $*" \
    -chardev "socket,id=nbd,path=$sock,reconnect=1" \
    -device virtio-serial-pci,id=vser -device virtserialport,bus=vser.0,chardev=nbd,name=nbd \
    </dev/null >"$log.qemu" 2>&1 &
  VM_PID=$!
  t_cleanup "kill -9 $VM_PID 2>/dev/null"
}

# vm_kill: end the guest (qemu by its pid).
vm_kill() { kill -9 "$VM_PID" 2>/dev/null; wait "$VM_PID" 2>/dev/null; }

vm_wait() {
  local log=$1 bound=$2 end=$((SECONDS + $2))
  while ! grep -q '^NVT RESULT' "$log" 2>/dev/null; do
    if grep -q 'KVM internal error' "$log.qemu" 2>/dev/null; then
      VM_KVM_BROKEN=1
      vm_kill
      t_log "KVM failed ($(grep -m1 'KVM internal error' "$log.qemu")); using TCG from now on"
      return 2
    fi
    if ! kill -0 "$VM_PID" 2>/dev/null; then
      t_log "qemu exited without a result: $(tail -3 "$log.qemu") / $(tail -5 "$log" 2>/dev/null)"
      return 1
    fi
    if [ $SECONDS -ge $end ]; then
      t_log "no result from the guest after ${bound}s; its console ends: $(tail -5 "$log" | tr '\n' '|')"
      vm_kill
      return 1
    fi
    sleep 0.5
  done
  # it powers off right after (reboot -f with -no-reboot)
  t_wait 20 sh -c "! kill -0 $VM_PID" || vm_kill
  wait "$VM_PID" 2>/dev/null
  grep -q '^NVT RESULT PASS' "$log"
}

vm_run() {
  local log=$1 rc
  for _ in 1 2; do
    vm_boot "$@"
    vm_wait "$log" "${NBDG_BOUND:-300}"
    rc=$?
    [ $rc -ne 2 ] && break
  done
  grep '^NVT' "$log" | sed "s/^/[$(basename "$log" .log)] /" >&2
  return $rc
}

# vm_step LOG NAME KEY: a value of the guest's "NVT STEP NAME" line.
vm_step() { sed -n "s/^NVT STEP $2 .* $3=\([^ ]*\).*/\1/p" "$1" | head -1; }

# vm_result LOG KEY: a value of the guest's "NVT RESULT" line.
vm_result() { sed -n "s/^NVT RESULT .* $2=\([^ ]*\).*/\1/p" "$1" | head -1; }
