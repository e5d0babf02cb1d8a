#!/usr/bin/env bash
# Boots a Linux guest with SMT siblings under QEMU software emulation and runs a shell
# script in it; the script's output comes back over the serial console.
#
# Why: the development and CI machines show no SMT, so 1c2t, SMT off/on and CPU hotplug
# can only be exercised on a kernel that has siblings. Timings inside the guest mean
# nothing (every instruction is emulated); use it to check behaviour only.
#
# Usage:
#   scripts/smt-vm.sh [--kernel NAME] [--topo NAME] [--bin SMTLAB] [--timeout SECS] [--add FILE] [--nfsd] SCRIPT
#   scripts/smt-vm.sh [--kernel NAME] --fetch-kernel   # build (or download) the kernel only
#   scripts/smt-vm.sh [--kernel NAME] --check-kernel   # exit 0 when it is in the cache
#
#   --kernel   sched-core (default): built here from Debian's kernel source
#              (scripts/kernel-source.sh) with scripts/guest-kernel.config, which has
#              CONFIG_SCHED_CORE and schedstats for the core scheduling tests;
#              up: the same without CONFIG_SMP (scripts/guest-kernel-up.config on top),
#              a uniprocessor kernel, which uses one CPU whatever --topo offers
#              (give it --topo 1s1c1t);
#              debian: Debian's cloud kernel image, downloaded (no CONFIG_SCHED_CORE)
#   --topo     1s2c2t (default: 1 socket, 2 cores, 2 threads each = 4 CPUs),
#              2s2c2t (2 sockets x 2 cores x 2 threads = 8 CPUs, one NUMA node per socket),
#              1s1c4t (1 core with 4 threads), 1s1c1t (one CPU)
#   --bin      the smtlab binary to put in the guest as /bin/smtlab (default
#              target/debug/smtlab); its shared libraries come along (ldd)
#   --add      another file to put in the guest's /bin (repeatable)
#   --timeout  hard limit for the whole boot-run-poweroff cycle (default 240 s)
#   --nfsd     also give the guest the kernel NFS server: the kernel's nfsd module and
#              its dependencies in /lib/modules (not loaded: `modprobe nfsd`), and
#              rpcbind, rpcinfo, rpc.mountd, rpc.nfsd and exportfs from this machine
#              (apt-get install nfs-kernel-server) in /usr/sbin with what they read
#   SCRIPT     a sh script run as root in the guest (busybox sh and applets)
#
# Exit status: the script's own, 124 when the guest did not finish in time, 125 when
# the guest could not be started (no QEMU, no kernel: the reason is printed).
#
# Needs qemu-system-x86, busybox-static and cpio. The built kernels need a C toolchain,
# make, flex, bison, bc, libelf-dev and libssl-dev, and are kept in the cache directory
# ($SMTVM_CACHE, default target/smt-vm in the repository) under built/NAME-KEY, KEY a
# hash of the config files and the source version, so a second run reuses them. The
# first build of the sched-core kernel (6.12.117) took 2349 s of wall time at nice -n
# 19, make -j2, on two CPUs kept busy by other builds, and the up kernel 2108 s beside
# it; a build optimised for size took 12 minutes of CPU time (10m16s user, 1m55s
# system), so on two idle CPUs some 6 to 8 minutes (an estimate, not measured).
# SMTVM_BUILD_JOBS sets -j. Debian's kernel is downloaded
# with `apt-get download` with the modules `--nfsd` needs (in modules/ there, their
# modules.dep made by busybox depmod).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SMTVM_CACHE:-$repo/target/smt-vm}"
topo=1s2c2t
bin="$repo/target/debug/smtlab"
timeout_s=240
adds=()
script=
fetch_only=0
check_only=0
nfsd=0
kernel=sched-core

die() { echo "smt-vm: $*" >&2; exit 125; }

while [ $# -gt 0 ]; do
  case "$1" in
    --topo) topo="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --add) adds+=("$2"); shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --fetch-kernel) fetch_only=1; shift ;;
    --check-kernel) check_only=1; shift ;;
    --kernel) kernel="$2"; shift 2 ;;
    --nfsd) nfsd=1; shift ;;
    -h|--help) sed -n '2,47p' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) script="$1"; shift ;;
  esac
done
case "$kernel" in
  sched-core|up|debian) ;;
  *) die "unknown kernel $kernel (expected sched-core, up or debian)" ;;
esac

# --- the kernel ------------------------------------------------------------------
# The modules the kernel NFS server needs: nfsd and what it depends on, followed
# through each module's own `depends=` (its .modinfo section; no kmod needed).
NFSD_MODULES="nfsd"
modinfo_depends() {
  objcopy -O binary --only-section=.modinfo "$1" /dev/stdout 2>/dev/null \
    | tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' '
}
# $1: the unpacked package, $2: the kernel release, $3: where the subset goes.
copy_modules() {
  local base="$3" release="$2"
  local from="$1/lib/modules/$2" to="$3/lib/modules/$2" todo="$NFSD_MODULES" done=" " m path rel
  mkdir -p "$to"
  while [ -n "${todo// /}" ]; do
    # shellcheck disable=SC2086
    set -- $todo
    m="$1"; shift; todo="$*"
    case "$done" in *" $m "*) continue ;; esac
    done="$done$m "
    path="$(find "$from/kernel" -name "$m.ko*" -print -quit)"
    [ -n "$path" ] || { echo "smt-vm: module $m not in the kernel package" >&2; return 1; }
    rel="${path#"$from"/}"
    mkdir -p "$to/$(dirname "$rel")"
    cp "$path" "$to/$rel"
    todo="$todo $(modinfo_depends "$path")"
  done
  cp "$from"/modules.order "$from"/modules.builtin "$to"/ 2>/dev/null || true
  /bin/busybox depmod -b "$base" "$release"
}

# Debian's cloud kernel (`--kernel debian`): no CONFIG_SCHED_CORE.
fetch_debian_kernel() {
  [ -s "$cache/vmlinuz" ] && [ -s "$cache/kernel-package" ] \
    && [ -n "$(find "$cache/modules/lib/modules" -name modules.dep 2>/dev/null)" ] && return 0
  command -v apt-get >/dev/null || die "no kernel in $cache and no apt-get to download one"
  [ -x /bin/busybox ] || die "/bin/busybox not found (install busybox-static)"
  mkdir -p "$cache"
  local dl
  dl="$(mktemp -d "$cache/dl.XXXXXX")"
  # The metapackage names the versioned image it depends on.
  (cd "$dl" && apt-get download linux-image-cloud-amd64 >/dev/null 2>&1) \
    || { rm -rf "$dl"; die "apt-get download linux-image-cloud-amd64 failed (no network or no Debian archive?)"; }
  local image
  image="$(dpkg-deb -f "$dl"/linux-image-cloud-amd64_*.deb Depends \
    | tr ',' '\n' | sed -n 's/^ *\(linux-image-[^ ]*-cloud-amd64\).*/\1/p' | head -n1)"
  [ -n "$image" ] || { rm -rf "$dl"; die "cannot tell which kernel image linux-image-cloud-amd64 depends on"; }
  (cd "$dl" && apt-get download "$image" >/dev/null 2>&1) \
    || { rm -rf "$dl"; die "apt-get download $image failed"; }
  dpkg-deb -x "$dl"/"$image"_*.deb "$dl/x"
  local release
  release="$(ls "$dl/x/lib/modules" | head -n1)"
  copy_modules "$dl/x" "$release" "$dl/modules" \
    || { rm -rf "$dl"; die "cannot gather the nfsd modules of $image"; }
  cp "$dl"/x/boot/vmlinuz-* "$cache/vmlinuz.tmp"
  rm -rf "$cache/modules"
  mv "$dl/modules" "$cache/modules"
  echo "$image" >"$cache/kernel-package"
  mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"
  rm -rf "$dl"
}


# A kernel built from Debian's kernel source (scripts/kernel-source.sh) with
# scripts/guest-kernel.config, and for `up` scripts/guest-kernel-up.config on top. Kept
# in $cache/built/NAME-KEY, KEY a hash of the config files, the source version and
# this recipe, so a changed fragment or a newer source builds a new one.
kernel_fragments() {
  case "$1" in
    sched-core) echo "$repo/scripts/guest-kernel.config" ;;
    up) echo "$repo/scripts/guest-kernel.config $repo/scripts/guest-kernel-up.config" ;;
  esac
}
# $1: the kernel's name; prints its cache directory (empty when the source is not fetched).
built_kernel_dir() {
  local tarball version key
  tarball="$("$repo/scripts/kernel-source.sh" --cached 2>/dev/null)" || return 0
  version="$(cat "${tarball%.tar.xz}.version")"
  # shellcheck disable=SC2046
  key="$( { echo "recipe 1: tinyconfig, merge_config.sh, olddefconfig; $(basename "$tarball") $version"
            cat $(kernel_fragments "$1"); } | sha256sum | cut -c1-16)"
  echo "$cache/built/$1-$key"
}
# The symbols the fragments ask for, the later file winning, that .config ($1) lacks.
config_missing() {
  # shellcheck disable=SC2046
  sed -n 's/^\(CONFIG_[A-Z0-9_]*=.*\)$/\1/p; s/^# \(CONFIG_[A-Z0-9_]*\) is not set$/\1=n/p' \
    $(kernel_fragments "$2") | awk -F= '{ want[$1] = $0 } END { for (k in want) print want[k] }' \
    | while IFS= read -r line; do
        sym="${line%%=*}"
        case "$line" in
          *=n) grep -qE "^$sym=[ym]" "$1" && echo "$sym is set" ;;
          *) grep -qxF "$line" "$1" || echo "$line" ;;
        esac
      done
}
build_kernel() {
  local name="$1" dir tarball b release started
  dir="$(built_kernel_dir "$name")"
  [ -n "$dir" ] && [ -s "$dir/vmlinuz" ] && return 0
  tarball="$("$repo/scripts/kernel-source.sh")" || die "cannot fetch the kernel source (scripts/kernel-source.sh)"
  dir="$(built_kernel_dir "$name")"
  for t in make gcc flex bison bc; do
    command -v "$t" >/dev/null || die "building the $name kernel needs $t (apt-get install build-essential flex bison bc libelf-dev libssl-dev)"
  done
  mkdir -p "$cache/built"
  b="$(mktemp -d "$cache/build.XXXXXX")"
  # A build stopped half way leaves nothing: the next run starts afresh.
  trap 'rm -rf "$b"' EXIT
  trap 'exit 130' INT TERM
  started=$SECONDS
  echo "smt-vm: building the $name guest kernel from $(basename "$tarball") into $dir" >&2
  mkdir -p "$b/src" "$b/obj"
  nice -n 19 tar -xJf "$tarball" -C "$b/src" --strip-components=1
  # Low priority throughout: the build machine is shared.
  local mk=(nice -n 19 make -s -C "$b/src" O="$b/obj")
  # shellcheck disable=SC2046
  if ! { "${mk[@]}" tinyconfig \
         && "$b/src/scripts/kconfig/merge_config.sh" -m -O "$b/obj" "$b/obj/.config" $(kernel_fragments "$name") \
         && "${mk[@]}" olddefconfig; } >"$b/config.log" 2>&1; then
    tail -n 20 "$b/config.log" >&2; die "configuring the $name kernel failed"
  fi
  local missing
  missing="$(config_missing "$b/obj/.config" "$name")"
  # shellcheck disable=SC2086
  [ -z "$missing" ] || die "the $name kernel's .config lacks what its fragments ask: $(echo $missing)"
  if ! "${mk[@]}" -j"${SMTVM_BUILD_JOBS:-2}" bzImage modules >"$b/build.log" 2>&1 \
     || ! "${mk[@]}" INSTALL_MOD_PATH="$b/mods" INSTALL_MOD_STRIP=1 DEPMOD=true \
          modules_install >>"$b/build.log" 2>&1; then
    tail -n 30 "$b/build.log" >&2; die "building the $name kernel failed"
  fi
  release="$(cat "$b/obj/include/config/kernel.release")"
  mkdir -p "$b/out"
  if grep -qx 'CONFIG_NFSD=m' "$b/obj/.config"; then
    copy_modules "$b/mods" "$release" "$b/out/modules" || die "cannot gather the $name kernel's nfsd modules"
  fi
  cp "$b/obj/arch/x86/boot/bzImage" "$b/out/vmlinuz"
  cp "$b/obj/.config" "$b/out/config"
  echo "$release" >"$b/out/release"
  rm -rf "$dir"
  mv "$b/out" "$dir"
  rm -rf "$b"
  trap - EXIT
  echo "smt-vm: built the $name kernel $release in $((SECONDS - started)) s" >&2
}

# Sets kernel_image and kernel_modules for $kernel, fetching or building it first.
prepare_kernel() {
  case "$kernel" in
    debian) fetch_debian_kernel; kernel_image="$cache/vmlinuz"; kernel_modules="$cache/modules" ;;
    sched-core|up)
      build_kernel "$kernel"
      kernel_image="$(built_kernel_dir "$kernel")/vmlinuz"; kernel_modules="${kernel_image%/vmlinuz}/modules" ;;
  esac
}

if [ "$check_only" = 1 ]; then
  case "$kernel" in
    debian) img="$cache/vmlinuz" ;;
    *) d="$(built_kernel_dir "$kernel")"; img="${d:-$cache/built/$kernel-?}/vmlinuz" ;;
  esac
  [ -s "$img" ] && { echo "$img"; exit 0; }
  echo "smt-vm: no $kernel kernel in $cache (scripts/smt-vm.sh --kernel $kernel --fetch-kernel)" >&2
  exit 1
fi
prepare_kernel
if [ "$fetch_only" = 1 ]; then
  echo "kernel: $kernel_image ($kernel)"
  exit 0
fi

[ -n "$script" ] || die "no guest script given (see --help)"
[ -r "$script" ] || die "cannot read the guest script $script"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (install qemu-system-x86)"
[ -x /bin/busybox ] || die "/bin/busybox not found (install busybox-static)"
command -v cpio >/dev/null || die "cpio not found (install cpio)"
[ -x "$bin" ] || die "smtlab binary $bin not found or not executable (cargo build -p smtlab)"
nfs_programs=()
if [ "$nfsd" = 1 ]; then
  for p in rpcbind rpcinfo rpc.mountd rpc.nfsd exportfs; do
    f="$(PATH="/usr/sbin:/sbin:$PATH" command -v "$p" || true)"
    [ -n "$f" ] || die "--nfsd: $p not found (apt-get install nfs-kernel-server)"
    nfs_programs+=("$f")
  done
fi

case "$topo" in
  1s2c2t) smp=(-smp 4,sockets=1,cores=2,threads=2) ; numa=() ;;
  2s2c2t) smp=(-smp 8,sockets=2,cores=2,threads=2)
          numa=(-object memory-backend-ram,id=m0,size=256M -object memory-backend-ram,id=m1,size=256M
                -numa node,nodeid=0,memdev=m0 -numa node,nodeid=1,memdev=m1
                -numa cpu,node-id=0,socket-id=0 -numa cpu,node-id=1,socket-id=1) ;;
  1s1c4t) smp=(-smp 4,sockets=1,cores=1,threads=4) ; numa=() ;;
  1s1c1t) smp=(-smp 1) ; numa=() ;;
  *) die "unknown topology $topo (expected 1s2c2t, 2s2c2t, 1s1c4t or 1s1c1t)" ;;
esac

# --- the initramfs ---------------------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/smt-vm.XXXXXX")"
qemu_pid=
cleanup() {
  [ -n "$qemu_pid" ] && kill "$qemu_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root="$work/root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,root,etc,run,var/lib/nfs,usr/sbin}
cp /bin/busybox "$root/bin/busybox"
# A stripped copy: the debug binary is mostly debug information.
objcopy --strip-debug "$bin" "$root/bin/smtlab" 2>/dev/null || cp "$bin" "$root/bin/smtlab"
for f in "${adds[@]}"; do cp "$f" "$root/bin/"; done
if [ "$nfsd" = 1 ]; then
  for f in "${nfs_programs[@]}"; do cp "$f" "$root/usr/sbin/"; done
  mkdir -p "$root/lib/modules"
  [ -d "$kernel_modules/lib/modules" ] || die "--nfsd: the $kernel kernel has no nfsd module"
  cp -r "$kernel_modules"/lib/modules/. "$root/lib/modules/"
  # libtirpc reads its transports from netconfig and the port of "sunrpc" from
  # services; rpcbind runs as _rpc.
  cp /etc/netconfig "$root/etc/netconfig"
  printf 'root:x:0:0:root:/root:/bin/sh\n_rpc:x:100:65534::/run/rpcbind:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
  for f in services protocols rpc; do cp "/etc/$f" "$root/etc/$f"; done
  : >"$root/etc/exports"
fi
# The glibc libraries and loader the binaries need, at the paths they were linked for.
for b in "$bin" "${adds[@]}" "${nfs_programs[@]}"; do
  ldd "$b" 2>/dev/null | grep -o '/[^ ]*' || true
done | sort -u | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp "$script" "$root/test.sh"

cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
# Loopback up: the built-in servers and the load generator talk over it.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
echo "SMTVM-BEGIN"
cd /tmp && sh /test.sh
echo "SMTVM-END status=$?"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

# --- boot --------------------------------------------------------------------------
# Intel model: under TCG the AMD models show no SMT siblings.
timeout --kill-after=5 "$timeout_s" qemu-system-x86_64 \
  -accel tcg -cpu Skylake-Server -m 512 "${smp[@]}" "${numa[@]}" \
  -kernel "$kernel_image" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off" \
  -display none -monitor none -serial "file:$work/console" -no-reboot \
  </dev/null >"$work/qemu.log" 2>&1 &
qemu_pid=$!
set +e
wait "$qemu_pid"
qrc=$?
set -e
qemu_pid=

tr -d '\r' <"$work/console" >"$work/out" || true
if ! grep -q '^SMTVM-END status=' "$work/out"; then
  if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    echo "smt-vm: the guest did not finish within ${timeout_s}s; console tail:" >&2
  else
    echo "smt-vm: the guest stopped without an end marker (qemu exit $qrc); console tail:" >&2
  fi
  tail -n 30 "$work/out" >&2 || true
  tail -n 5 "$work/qemu.log" >&2 || true
  case "$qrc" in 124|137) exit 124 ;; *) exit 125 ;; esac
fi
sed -n '/^SMTVM-BEGIN$/,/^SMTVM-END status=/p' "$work/out" | sed '1d;$d'
status="$(sed -n 's/^SMTVM-END status=\([0-9]*\).*/\1/p' "$work/out" | tail -n1)"
exit "${status:-125}"
