#!/bin/sh
# /init of the soft-RoCE test guest (tools/softroce/run.sh): mounts, loads
# rdma_rxe, creates rxe0 on a dummy interface at 192.0.2.1, runs the device
# tests and prints one NESSIE-SOFTROCE-RESULT line, then powers off.
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t configfs configfs /sys/kernel/config 2>/dev/null
result() { echo "NESSIE-SOFTROCE-RESULT $*"; sync; poweroff -f; sleep 30; }
for m in configfs crc32_generic rdma_ucm rdma_rxe dummy veth sch_netem; do
  modprobe "$m" || result "failed: modprobe $m"
done
mount -t configfs configfs /sys/kernel/config 2>/dev/null
ip link set lo up
ip link add d0 type dummy || result "failed: no dummy interface"
ip addr add 192.0.2.1/24 dev d0
ip link set d0 mtu 4200 up
rdma link add rxe0 type rxe netdev d0 || result "failed: rdma link add rxe0"
i=0
while ! rdma link show rxe0/1 2>/dev/null | grep -q ACTIVE; do
  i=$((i + 1)); [ $i -gt 50 ] && result "failed: rxe0 port did not become ACTIVE"
  sleep 0.2
done
echo "NESSIE-SOFTROCE-DEVICE $(rdma link show rxe0/1)"
# The lossy link (fabric-verbs/src/lossy_link.rs): rxe1 and rxe2 on the two
# ends of a veth pair, in this one namespace (rxe in this kernel has no
# namespace support), with policy routing so that traffic between
# 198.51.100.1 and .2 leaves through the veth pair, where the tests shape it
# with tc netem, instead of the loopback interface. iproute2's ip and tc by
# full path: busybox's shell prefers its own applets of the same names.
IP=/usr/sbin/ip
$IP link add veth0 type veth peer name veth1 || result "failed: no veth pair"
for v in veth0 veth1; do $IP link set $v mtu 4200; done
$IP addr add 198.51.100.1/24 dev veth0
$IP addr add 198.51.100.2/24 dev veth1
for k in all default veth0 veth1; do
  sysctl -qw net.ipv4.conf.$k.accept_local=1
  sysctl -qw net.ipv4.conf.$k.rp_filter=0
done
$IP link set veth0 up
$IP link set veth1 up
$IP rule add pref 100 lookup local && $IP rule del pref 0 || result "failed: policy rules"
$IP rule add pref 10 to 198.51.100.2 iif lo lookup 102
$IP route add 198.51.100.2 dev veth0 src 198.51.100.1 table 102
$IP rule add pref 11 to 198.51.100.1 iif lo lookup 101
$IP route add 198.51.100.1 dev veth1 src 198.51.100.2 table 101
$IP neigh replace 198.51.100.2 lladdr "$(cat /sys/class/net/veth1/address)" dev veth0 nud permanent
$IP neigh replace 198.51.100.1 lladdr "$(cat /sys/class/net/veth0/address)" dev veth1 nud permanent
rdma link add rxe1 type rxe netdev veth0 || result "failed: rdma link add rxe1"
rdma link add rxe2 type rxe netdev veth1 || result "failed: rdma link add rxe2"
i=0
while ! { rdma link show rxe1/1 | grep -q ACTIVE && rdma link show rxe2/1 | grep -q ACTIVE; } 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 50 ] && result "failed: rxe1/rxe2 ports did not become ACTIVE"
  sleep 0.2
done
echo "NESSIE-SOFTROCE-LINK $($IP route get 198.51.100.2 from 198.51.100.1 | head -1)"
export NESSIE_VERBS_LINK="rxe1,198.51.100.1,veth0 rxe2,198.51.100.2,veth1"
ulimit -l unlimited
# Huge pages for the cluster tests' regions (huge_pages = true in their file).
echo 64 > /proc/sys/vm/nr_hugepages
export NESSIE_VERBS_DEVICE=rxe0 NESSIE_VERBS_ADDR=192.0.2.1 NESSIE_BIN=/bin/nessie NESSIE_APP_BIN=/bin/application
# The conformance suite's port-event test may take d0 down and up.
export NESSIE_VERBS_FLAP_LINK=d0
export RUST_BACKTRACE=1
filter=$(cat /tests/filter 2>/dev/null)
# The panics a test binary's output ($1) shows (with --nocapture libtest
# prints them inline), without their backtraces' frames.
panics() {
  grep -a -A6 'panicked at' "$1" | grep -av '^ *[0-9]*: \|^ *at \|^stack backtrace:\|^--$'
}
status=ok
for t in conformance lossy_link cluster; do
  out=/tmp/$t.out
  # --ignored: the device tests are #[ignore] outside this guest.
  /tests/$t --ignored --test-threads=1 --nocapture $filter 2>&1 | tee $out
  line=$(grep 'test result:' $out | tail -1)
  passed=$(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')
  failed=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
  listed=$(/tests/$t --ignored --list $filter 2>/dev/null | grep -c ': test$')
  # A cluster story that failed without a safety verdict (no "NOT
  # linearizable", no checker without teeth: a bound on progress missed
  # under emulation, a process that did not start in time) runs once more,
  # alone; the first failure is printed (NESSIE-SOFTROCE-RETRY) either way.
  # A safety failure is never run again.
  if [ "$t" = cluster ] && [ -n "$line" ] && [ "${failed:-0}" != 0 ] \
     && ! grep -q 'NOT linearizable\|NOT checkable\|must reject' $out; then
    names=$(sed -n '/^failures:$/,/^test result:/p' $out | sed -n 's/^    \([a-z0-9_]*\)$/\1/p' | sort -u)
    panics $out | head -40 | sed 's/^/NESSIE-SOFTROCE-RETRY first run: /'
    again=0
    for n in $names; do
      echo "NESSIE-SOFTROCE-RETRY $n: failed without a safety verdict, run once more"
      /tests/$t --ignored --test-threads=1 --nocapture --exact "$n" 2>&1 | tee /tmp/retry-$n.out
      if grep -q 'test result: ok. 1 passed' /tmp/retry-$n.out; then
        echo "NESSIE-SOFTROCE-RETRY $n: passed the second time"
        again=$((again + 1))
      fi
    done
    if [ -n "$names" ] && [ "$again" = "$(echo "$names" | wc -w)" ] && [ "$((passed + again))" = "$listed" ]; then
      cp $out /tmp/$t.first-run
      cat /tmp/retry-*.out >> $out
      line="retried: $again passed the second time"
      failed=0
      passed=$listed
    fi
  fi
  echo "NESSIE-SOFTROCE-COUNT $t: ${passed:-0} passed, ${failed:-?} failed, $listed listed"
  if [ -z "$line" ] || [ "${failed:-1}" != 0 ] || [ "${passed:-0}" != "$listed" ] || [ "$listed" = 0 ]; then
    status="failed: $t (${line:-no test result line})"
  fi
done
grep -h '^LINEARIZABILITY' /tmp/*.out | sed 's/^/NESSIE-SOFTROCE-/'
grep -h '^NIC ' /tmp/*.out | sed 's/^/NESSIE-SOFTROCE-/'
grep -h -E '^(CLOCK|WATCHDOG|LOSSY|METRICS) ' /tmp/*.out | sed 's/^/NESSIE-SOFTROCE-/'
# Last, so that a log cut to its tail still shows why: for each suite that
# failed, its panics (with --nocapture libtest prints them inline; a suite
# may also catch panics on purpose) and the names libtest lists as failed.
for t in conformance lossy_link cluster; do
  grep -a 'test result:' /tmp/$t.out 2>/dev/null | tail -1 | grep -q FAILED || continue
  { panics /tmp/$t.out
    sed -n '/^failures:$/,/^test result:/p' /tmp/$t.out; } \
    | head -80 | sed "s/^/NESSIE-SOFTROCE-FAILURE $t: /"
done
result "$status"
