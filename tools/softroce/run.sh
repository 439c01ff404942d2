#!/usr/bin/env bash
# The real-RDMA test run: boots Debian's stock kernel under QEMU (TCG, no
# network card), loads soft-RoCE (rdma_rxe) on a dummy interface with an
# address from 192.0.2.0/24, and runs the verbs backend's device tests inside:
# the fabric conformance suite (fabric-verbs/tests/conformance.rs) and the
# multi-process cluster tests of `nessie node` (cli/tests/cluster.rs, built
# with nessie-cli's `verbs` feature). Exits non-zero on any
# failure, on a test count that does not match, or when the guest does not
# boot or finish in time (the reason is printed).
#
#   tools/softroce/run.sh            # build, assemble, boot, test
#
# Environment:
#   NESSIE_SOFTROCE_CACHE    downloads and the base image (default ~/.cache/nessie-softroce)
#   NESSIE_SOFTROCE_KERNEL   kernel package version, e.g. 6.1.0-56-amd64 (default: what
#                            linux-image-amd64 depends on)
#   NESSIE_SOFTROCE_TIMEOUT  seconds the guest may run (default 1500)
#   NESSIE_SOFTROCE_FILTER   only run tests whose name contains this (default: all)
#   NESSIE_SOFTROCE_LOG      where the serial console is written (default target/softroce/console.log)
#
# Needs: Debian with apt (installs qemu-system-x86, busybox-static, kmod,
# cpio, rdma-core's user space, iproute2 when missing), cargo; it boots
# Debian's stock kernel (Ubuntu splits the modules from the kernel image, and
# is refused with the reason). See
# docs/deploy.md, "The soft-RoCE test run".
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
HERE=$ROOT/tools/softroce
CACHE=${NESSIE_SOFTROCE_CACHE:-$HOME/.cache/nessie-softroce}
TIMEOUT=${NESSIE_SOFTROCE_TIMEOUT:-1500}
OUT=$ROOT/target/softroce
LOG=${NESSIE_SOFTROCE_LOG:-$OUT/console.log}
mkdir -p "$CACHE" "$OUT"

say() { echo "softroce: $*"; }
die() { echo "softroce: FAILED: $*" >&2; exit 1; }

# --- host packages -----------------------------------------------------------
need_pkgs="qemu-system-x86 busybox-static kmod cpio libibverbs1 librdmacm1 ibverbs-providers iproute2 libibverbs-dev librdmacm-dev libclang-dev pkg-config"
if ! dpkg -s $need_pkgs >/dev/null 2>&1; then
  say "installing $need_pkgs"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq || die "apt-get update failed"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need_pkgs >/dev/null \
    || die "apt-get install $need_pkgs failed"
fi
for tool in qemu-system-x86_64 busybox modprobe depmod cpio rdma ip; do
  command -v $tool >/dev/null 2>&1 || [ -x /usr/sbin/$tool ] || die "$tool not found after installing packages"
done
export PATH=$PATH:/usr/sbin:/sbin

# --- the guest kernel (downloaded once, cached) ------------------------------
KVER=${NESSIE_SOFTROCE_KERNEL:-}
if [ -z "$KVER" ]; then
  KVER=$(apt-cache depends linux-image-amd64 2>/dev/null | grep -o 'linux-image-[0-9][0-9.]*-[0-9]*-amd64' | head -1 | sed 's/^linux-image-//')
  if [ -z "$KVER" ]; then
    # The package lists may be missing on a fresh machine.
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq || true
    KVER=$(apt-cache depends linux-image-amd64 2>/dev/null | grep -o 'linux-image-[0-9][0-9.]*-[0-9]*-amd64' | head -1 | sed 's/^linux-image-//')
  fi
  if [ -z "$KVER" ]; then
    # Offline: the newest kernel already in the cache.
    KVER=$(ls -d "$CACHE"/kernel-*/ 2>/dev/null | sed 's#.*/kernel-##; s#/$##' | sort -V | tail -1)
  fi
fi
if [ -z "$KVER" ] && grep -qi '^ID=ubuntu' /etc/os-release 2>/dev/null; then
  # Ubuntu ships the modules apart from the kernel image (linux-modules-*,
  # linux-modules-extra-* for rdma_rxe): the image alone would boot without
  # soft-RoCE. Only Debian's stock kernel is assembled (and tested) here.
  die "Ubuntu's kernel packages split the modules from the image; this script assembles Debian's (linux-image-amd64) only. Run it on Debian, or in a Debian container or VM"
fi
[ -n "$KVER" ] || die "cannot tell which kernel to use (apt-cache knows no linux-image-amd64; set NESSIE_SOFTROCE_KERNEL)"
KROOT=$CACHE/kernel-$KVER
if [ ! -f "$KROOT/.complete" ]; then
  say "downloading linux-image-$KVER"
  rm -rf "$KROOT" "$CACHE"/dl && mkdir -p "$CACHE/dl" "$KROOT"
  (cd "$CACHE/dl" && apt-get download "linux-image-$KVER" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  deb=$(ls "$CACHE"/dl/linux-image-"$KVER"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || die "apt-get download linux-image-$KVER produced no package"
  dpkg-deb -x "$deb" "$KROOT" || die "cannot unpack $deb"
  depmod -b "$KROOT" "$KVER" || die "depmod of $KVER failed"
  rm -rf "$CACHE/dl"
  touch "$KROOT/.complete"
fi
VMLINUZ=$KROOT/boot/vmlinuz-$KVER
[ -f "$VMLINUZ" ] || die "no $VMLINUZ in the kernel package"

# --- the test binaries ---------------------------------------------------------
say "building the verbs tests and the nessie binary (feature verbs)"
# The JSON goes to a variable, cargo's own messages to a file. With
# --message-format=json the compiler's errors are JSON on standard output,
# which the caller's variable would swallow: a failed build is built again
# in the human format (what did build is cached) so that it says why.
build_log=$OUT/build.log
build() {
  local what=$1; shift
  local json
  if ! json=$(cargo "$@" --no-run --message-format=json 2>"$build_log"); then
    cat "$build_log" >&2
    cargo "$@" --no-run 1>&2 || true
    die "cargo $* --no-run ($what) failed; the compiler's output is above"
  fi
  printf '%s\n' "$json"
}
tests_json=$(build "the fabric conformance suite and the lossy-link story" test -q -p nessie-fabric-verbs --test conformance --test lossy_link) || exit 1
cli_json=$(build "the cluster tests, feature verbs" test -q -p nessie-cli --features verbs --test cluster) || exit 1
test_bins=$(printf '%s\n%s\n' "$tests_json" "$cli_json" | grep '"kind":\["test"\]' | grep -o '"executable":"[^"]*"' | sed 's/"executable":"//; s/"$//')
NESSIE_BIN=$(printf '%s\n' "$cli_json" | grep '"kind":\["bin"\]' | grep -o '"executable":"[^"]*/nessie"' | sed 's/"executable":"//; s/"$//' | head -1)
[ -n "$NESSIE_BIN" ] && [ -x "$NESSIE_BIN" ] || die "the nessie binary (feature verbs) was not built"
# The application example (an application host joining the cluster):
# built as a program, not as a test harness.
if ! app_json=$(cargo build -q -p nessie-fabric-verbs --example application --message-format=json 2>"$build_log"); then
  cat "$build_log" >&2
  die "cargo build --example application failed"
fi
APP_BIN=$(printf '%s\n' "$app_json" | grep '"kind":\["example"\]' | grep -o '"executable":"[^"]*/application"' | sed 's/"executable":"//; s/"$//' | head -1)
[ -n "$APP_BIN" ] && [ -x "$APP_BIN" ] || die "the application example was not built"
for name in conformance lossy_link cluster; do
  printf '%s\n' "$test_bins" | grep -q "/$name-" || die "no $name test binary was built"
done

# --- the base image: busybox, kmod, modules, rdma-core (cached per kernel and host) ---
copy_with_libs() { # copy_with_libs DEST FILE...: files and the shared libraries they load
  local dest=$1; shift
  for f in "$@"; do
    mkdir -p "$dest$(dirname "$f")"
    cp -L "$f" "$dest$f"
    { ldd "$f" 2>/dev/null || true; } | { grep -o '/[^ ]*' || true; } | while read -r lib; do
      [ -e "$dest$lib" ] || { mkdir -p "$dest$(dirname "$lib")"; cp -L "$lib" "$dest$lib"; }
    done
  done
}
provider=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1)
[ -n "$provider" ] || die "the rxe provider (ibverbs-providers) is not installed"
# The modules the guest loads (veth and netem for the lossy link): part of the cache key.
GUEST_MODULES="configfs crc32_generic rdma_ucm rdma_rxe dummy veth sch_netem"
host_key=$( (dpkg-query -W -f '${Version}' ibverbs-providers librdmacm1 busybox-static kmod iproute2; echo "$GUEST_MODULES tc") | md5sum | cut -c1-12)
BASE=$CACHE/base-$KVER-$host_key.cpio.gz
if [ ! -f "$BASE" ]; then
  say "assembling the base image for $KVER"
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,lib64,usr/bin,usr/sbin}
  cp /bin/busybox "$stage/bin/busybox"
  for app in $(/bin/busybox --list); do
    [ -e "$stage/bin/$app" ] || ln -s busybox "$stage/bin/$app"
  done
  copy_with_libs "$stage" "$(command -v kmod || echo /usr/bin/kmod)" "$(command -v rdma)" "$(command -v ip || echo /usr/sbin/ip)" "$(command -v tc || echo /usr/sbin/tc)" "$provider"
  kmod_path=$(command -v kmod || echo /usr/bin/kmod)
  for app in modprobe insmod lsmod depmod; do ln -sf "$kmod_path" "$stage/sbin/$app"; done
  # Replace busybox's applets of the same names with the real tools.
  for app in modprobe insmod lsmod depmod; do rm -f "$stage/bin/$app"; done
  rm -f "$stage/bin/ip"
  mkdir -p "$stage/etc/libibverbs.d"
  cp /etc/libibverbs.d/rxe.driver "$stage/etc/libibverbs.d/"
  # rdma_rxe and what it needs, the dummy interface, and the lossy link's
  # veth pair and netem queue.
  mods=""
  for m in $GUEST_MODULES; do
    mods="$mods $(modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}')"
  done
  [ -n "$(echo $mods | tr ' ' '\n' | grep rdma_rxe)" ] || die "the kernel $KVER has no rdma_rxe module"
  for ko in $mods; do
    rel=${ko#"$KROOT"}
    mkdir -p "$stage$(dirname "$rel")"
    cp "$ko" "$stage$rel"
  done
  cp "$KROOT/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$stage/lib/modules/$KVER/" 2>/dev/null || true
  depmod -b "$stage" "$KVER" || die "depmod failed"
  (cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) > "$BASE.tmp"
  mv "$BASE.tmp" "$BASE"
  rm -rf "$stage"; trap - EXIT
fi

# --- the per-run image: the binaries, /init and the test script ---------------
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests" "$stage/bin"
copy_with_libs "$stage" "$NESSIE_BIN"
mv "$stage$NESSIE_BIN" "$stage/bin/nessie"
copy_with_libs "$stage" "$APP_BIN"
mv "$stage$APP_BIN" "$stage/bin/application"
for t in $test_bins; do
  case "$t" in */conformance-*|*/lossy_link-*|*/cluster-*) ;; *) continue ;; esac
  copy_with_libs "$stage" "$t"
  name=$(basename "$t" | sed 's/-[0-9a-f]*$//')
  mv "$stage$t" "$stage/tests/$name"
done
rm -rf "$stage$ROOT"
cp "$HERE/guest-init.sh" "$stage/init"
chmod +x "$stage/init"
printf '%s\n' "${NESSIE_SOFTROCE_FILTER:-}" > "$stage/tests/filter"
(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/tests.cpio.gz"
cat "$BASE" "$OUT/tests.cpio.gz" > "$OUT/initrd.img"

# --- boot ----------------------------------------------------------------------
say "booting $KVER under QEMU (TCG, -nic none), at most $TIMEOUT s; console in $LOG"
start=$(date +%s)
set +e
timeout --kill-after=20 "$TIMEOUT" qemu-system-x86_64 -machine accel=tcg -cpu max -m 2G -smp 2 \
  -nographic -nic none -no-reboot -monitor none -serial stdio \
  -kernel "$VMLINUZ" -initrd "$OUT/initrd.img" \
  -append "console=ttyS0 quiet panic=-1 loglevel=3" </dev/null > "$LOG" 2>&1 &
qpid=$!
# Stream the console while the guest runs.
tail -n +1 -F "$LOG" 2>/dev/null --pid=$qpid | sed -u 's/\r//g; /^[[:space:]]*$/d' &
tpid=$!
wait $qpid
qrc=$?
sleep 1; kill $tpid 2>/dev/null; wait $tpid 2>/dev/null
set -e
elapsed=$(( $(date +%s) - start ))
tr -d '\r' < "$LOG" > "$OUT/console.txt"
if [ $qrc = 124 ] || [ $qrc = 137 ]; then
  die "the guest did not finish within $TIMEOUT s (timeout; see $LOG)"
fi
if [ $qrc != 0 ]; then
  die "qemu exited with $qrc after $elapsed s (see $LOG)"
fi
result=$(grep -a '^NESSIE-SOFTROCE-RESULT' "$OUT/console.txt" | tail -1 || true)
[ -n "$result" ] || die "the guest stopped after $elapsed s without reporting a result (did it boot? see $LOG)"

# --- verdict -----------------------------------------------------------------
say "guest ran for $elapsed s"
grep -a '^NESSIE-SOFTROCE-' "$OUT/console.txt" | grep -av '^NESSIE-SOFTROCE-RESULT' || true
echo "$result"
# Exactly "ok": a failure's reason may quote a cargo line ("test result: ok. 0 passed").
if [ "$result" = "NESSIE-SOFTROCE-RESULT ok" ]; then
  say "all rxe tests passed"
else
  die "$result"
fi
