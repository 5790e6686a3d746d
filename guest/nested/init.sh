#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# /init of the L1 guest of `make kvm-nested` (busybox sh): a TCG guest that is
# itself a KVM host. It
# 1. mounts what QEMU needs and prints the facts the rig's KVM probe judges
#    (analysis/qrwbench/run/kvm.py static_check, on L1's facts) as
#      @@L1 {"type":"facts",...}
#    and the kernel's own KVM lines as "@@L1-KVM <dmesg line>",
# 2. runs /l2/job.sh (written by the rig per boot: nested.py), whose
#    `l2 NAME SECONDS COMMAND...` lines run one L2 QEMU each, exactly the
#    command line the rig built, its console and QEMU's own messages on the
#    virtio-serial port named qrwb.NAME (a file on the host), and prints
#      @@L1 {"type":"l2-start","name":NAME,"uptime":S} ...
#      @@L1 {"type":"l2-exit","name":NAME,"rc":N,"uptime":S}   (S: L1's /proc/uptime)
# 3. prints @@L1 {"type":"l1-done"} and powers off (QEMU -no-reboot exits).
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp

b() { if [ "$@" ]; then echo 1; else echo 0; fi; }
echo "@@L1 {\"type\":\"facts\",\"machine\":\"$(uname -m)\",\"release\":\"$(uname -r)\"," \
	"\"dev_kvm\":$(b -e /dev/kvm),\"dev_kvm_rw\":$(b -r /dev/kvm -a -w /dev/kvm)," \
	"\"kvm_pvm\":$(b -d /sys/module/kvm_pvm),\"cpus\":$(ls -d /sys/devices/system/cpu/cpu[0-9]* | wc -l)}"
dmesg | grep -i -e kvm -e hyp -e 'CPU features' | while read -r line; do echo "@@L1-KVM $line"; done

# l2 NAME SECONDS COMMAND...: one L2 guest, its output on port qrwb.NAME
l2() {
	name=$1; secs=$2; shift 2
	port=
	for d in /sys/class/virtio-ports/*; do
		[ "$(cat "$d/name" 2>/dev/null)" = "qrwb.$name" ] && port=/dev/${d##*/}
	done
	read -r t0 _ < /proc/uptime
	echo "@@L1 {\"type\":\"l2-start\",\"name\":\"$name\",\"uptime\":$t0}"
	if [ -z "$port" ]; then
		echo "@@L1 {\"type\":\"l2-exit\",\"name\":\"$name\",\"rc\":-1,\"why\":\"no virtio-serial port qrwb.$name\"}"
		return
	fi
	timeout -s KILL "$secs" "$@" </dev/null >"$port" 2>&1
	rc=$?
	read -r t1 _ < /proc/uptime
	echo "@@L1 {\"type\":\"l2-exit\",\"name\":\"$name\",\"rc\":$rc,\"uptime\":$t1}"
}

if [ -f /l2/job.sh ]; then
	. /l2/job.sh
else
	echo "@@L1 {\"type\":\"error\",\"why\":\"no /l2/job.sh in the initramfs\"}"
fi
sync
echo "@@L1 {\"type\":\"l1-done\"}"
poweroff -f
