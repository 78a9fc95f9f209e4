#!/bin/sh
# init.sh - /init of the test guest (busybox sh; tests/vm/guest.bash builds
# the initramfs). The guest's only way out is a virtio-serial port whose
# host side is an NBD server: nvt-relay carries nbd-client's socket over
# it, and the kernel's own nbd driver swaps to that server, as on a user's
# node:
#   nbd-client -unix SOCK /dev/nbd0 -N EXPORT -b 4096 -t 30 -swap
#   mkswap /dev/nbd0 && swapon --discard=pages /dev/nbd0
#   ... a workload larger than the guest's RAM ...
#   swapoff /dev/nbd0 && nbd-client -d /dev/nbd0
# Every step prints an "NVT ..." line on the serial console for the host:
#   NVT STEP name rc=N [seconds=S] [detail]   one step's outcome
#   NVT RESULT PASS|FAIL key=value ...        the verdict, then power-off
# Kernel command line: nvt.export=NAME nvt.mib=MIB (workload size)
# nvt.orders=seq,rand  nvt.mode=swap|restart (restart: the host kills the
# server while the workload is swapped out; see nbd_client_guest.sh)
# nvt.timeout=S (nbd-client -t, default 30: without a timeout, requests in
# flight when the server dies are never failed, and the guest hangs).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
# busybox sh runs its own applets ahead of PATH: util-linux's tools and
# nbd-client by their paths
nbd_client=/usr/sbin/nbd-client mkswap=/usr/sbin/mkswap
swapon=/usr/sbin/swapon swapoff=/usr/sbin/swapoff
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
mkdir -p /run /tmp

arg() { sed -n "s/.* nvt\.$1=\([^ ]*\).*/\1/p" /proc/cmdline | tr -d '\n'; }
export_name=$(arg export); mib=$(arg mib); orders=$(arg orders); mode=$(arg mode)
timeout=$(arg timeout)
: "${export_name:=swap}" "${mib:=256}" "${orders:=seq,rand}" "${mode:=swap}" "${timeout:=30}"
sock=/run/nbd.sock
fails=0
now() { cut -d' ' -f1 /proc/uptime; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
step() {  # step NAME CMD...: run, report, count a failure
	name=$1; shift
	st0=$(now)
	out=$("$@" 2>&1); rc=$?
	echo "NVT STEP $name rc=$rc seconds=$(secs "$st0") $(echo "$out" | tr '\n' ' ' | cut -c1-300)"
	[ $rc -eq 0 ] || fails=$((fails + 1))
	return $rc
}
finish() {
	echo "NVT RESULT $1 mode=$mode mib=$mib fails=$fails pswpout=$(vmstat pswpout) pswpin=$(vmstat pswpin) $2"
	sync
	reboot -f
}

# The reserve that the relay (real-time, IO_FLUSHER) allocates from while
# the guest has no free memory: without it, swap-out through a user-space
# relay deadlocks.
echo 16384 >/proc/sys/vm/min_free_kbytes
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev \
	 virtio_pci virtio_console nbd; do
	insmod /modules/$m.ko || { echo "NVT STEP insmod-$m rc=1"; finish FAIL; }
done
i=0
while [ ! -e /dev/vport0p1 ] || [ ! -e /dev/nbd0 ]; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "NVT STEP devices rc=1 no /dev/vport0p1 or /dev/nbd0"; finish FAIL; }
	sleep 0.1
done
nvt-relay $sock /dev/vport0p1 &
i=0
while [ ! -S $sock ]; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "NVT STEP relay rc=1 not listening"; finish FAIL; }
	sleep 0.1
done
echo "NVT STEP boot rc=0 seconds=$(now) mem_kib=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)"

# attach DEV: nbd-client, mkswap, swapon, as a user does.
attach() {
	step nbd-client $nbd_client -unix $sock "$1" -N "$export_name" -b 4096 -t "$timeout" -swap &&
	step mkswap $mkswap "$1" &&
	step swapon $swapon --discard=pages "$1"
}
# workload: fill and check every page of MIB in each order; "ok" or why not.
workload() {
	for o in $(echo "$orders" | tr ',' ' '); do
		step "touch-$o" sh -c "${cg:+echo \$\$ >$cg/cgroup.procs && }exec nvt-memtouch $mib $o 11" || return $?
	done
}

attach /dev/nbd0 || finish FAIL "attach=failed"
size=$(cat /sys/block/nbd0/size)
echo "NVT STEP device rc=0 sectors=$size logical=$(cat /sys/block/nbd0/queue/logical_block_size) max_sectors_kb=$(cat /sys/block/nbd0/queue/max_sectors_kb) nr_requests=$(cat /sys/block/nbd0/queue/nr_requests) discard_max=$(cat /sys/block/nbd0/queue/discard_max_bytes)"

if [ "$mode" = restart ]; then
	# The host kills the server while this runs; it must not pass, and
	# no page may come back wrong (nvt-memtouch exits 1 on a wrong word:
	# that is the silent failure this run looks for). The workload runs
	# in a 32 MiB memory cgroup, so that only its pages go out: a page of
	# init's own that is out when the server dies kills init at its next
	# touch, and the kernel panics.
	mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup &&
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control &&
	mkdir /sys/fs/cgroup/work && echo 32M >/sys/fs/cgroup/work/memory.max ||
		finish FAIL "cgroup=failed"
	cg=/sys/fs/cgroup/work
	echo "NVT PHASE workload"
	orders=rand workload
	rc=$?
	case $rc in
	0) echo "NVT LOST none: the workload passed"; bad=1 ;;
	1) echo "NVT LOST silent: a page came back wrong"; bad=1 ;;
	*) echo "NVT LOST loud: workload ended with rc=$rc"; bad=0 ;;
	esac
	dmesg | grep -E 'nbd|swap|I/O error|Killed|oom|SIGBUS' | tail -12 | sed 's/^/NVT DMESG /'
	echo "NVT STEP nbd0-state rc=0 $(grep -c . /proc/swaps) swaps; pid=$(cat /sys/block/nbd0/pid 2>/dev/null || echo none)"
	step swapoff-dead $swapoff /dev/nbd0
	step nbd-client-d-dead $nbd_client -d /dev/nbd0
	# what these two did is reported, not judged: the verdict is bad's
	fails=$bad
	# The server is back (empty): a fresh device works again.
	attach /dev/nbd1 || finish FAIL "reattach=failed"
	# (64 MiB in the 32 MiB cgroup: enough to swap, and quick)
	mib=64 orders=seq workload || finish FAIL "reattached-workload=failed"
	step swapoff $swapoff /dev/nbd1 && step nbd-client-d $nbd_client -d /dev/nbd1
	[ $fails -eq 0 ] && finish PASS || finish FAIL
fi

t0=$(now)
workload
echo "NVT STEP workload rc=$? seconds=$(secs "$t0")"
step swapoff $swapoff /dev/nbd0
step nbd-client-d $nbd_client -d /dev/nbd0
[ $fails -eq 0 ] && finish PASS || finish FAIL
