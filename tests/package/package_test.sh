#!/usr/bin/env bash
# package_test: the Debian package, installed, used, upgraded, removed and purged in a throwaway
# root, never on this machine.
#
#   package_test.sh DEB BUILD_DIR WORK_DIR
#
#   DEB        hone_<version>_amd64.deb (make deb)
#   BUILD_DIR  a build with the emulated device (lib/emu/libcuda.so.1) and the test applications
#              (tests/apps/hone-testapp-serve): what the package's honed and shim run on here
#   WORK_DIR   scratch space, emptied first (HONE_TEST_KEEP=1 keeps it afterwards)
#
# HONE_PACKAGE_TEST_ROOT=chroot uses the chroot even where systemd-nspawn boots.
#
# The throwaway root is an overlay of / (the machine's own files, read-only underneath; every
# write goes to a tmpfs that is thrown away). systemd boots in it with systemd-nspawn, so the
# maintainer scripts run as on a real host: the postinst creates the hone user, enables and starts
# hone.service; the prerm stops it. Where nspawn cannot boot, the same root is used as a plain
# chroot: services are not started there (as debhelper does without systemd running), and honed
# is started by hand as hone, as the unit would. docs/install.md says why.
#
# Checked: lintian (no error or warning that is not overridden); the package holds what it should
# and nothing of the emulated device; files, owners and modes; the hone user and group; the state
# directory; `systemd-analyze verify` of the installed unit; honed running as hone with the
# installed configuration; an application of a user in group hone attached to it, its kernel in
# `honectl kernels`; bash completion of honectl; an upgrade from the previous version keeps the
# store and a changed conffile; remove keeps /etc/hone and /var/lib/hone; purge deletes them.
#
# Needs root (mounts, dpkg in the root). Exit 77 (skipped) without root, without overlayfs, or
# without lintian/dpkg-deb, saying why.
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 DEB BUILD_DIR WORK_DIR" >&2
  exit 2
fi
deb=$(realpath -m "$1")
build=$(realpath -m "$2")
work=$3

skip() {
  echo "SKIP: $*"
  exit 77
}
step() { echo "== $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (it mounts an overlay and runs dpkg in it)"
for tool in dpkg-deb lintian mount chroot nsenter runuser; do
  command -v "$tool" >/dev/null || skip "$tool not found (make deps installs what is needed)"
done
[ -f "$1" ] || skip "no package at $1: build it first (make deb)"
emu_driver=$build/lib/emu/libcuda.so.1
app=$build/tests/apps/hone-testapp-serve
for f in "$emu_driver" "$app"; do
  [ -e "$f" ] || { echo "FAIL: $f not found: build $build first (make build)"; exit 1; }
done
if dpkg-query -W -f='${Status}' hone 2>/dev/null | grep -q 'ok installed'; then
  echo "FAIL: hone is installed on this machine; the throwaway root starts as a copy of it and must not have it"
  exit 1
fi

rm -rf "$work"
mkdir -p "$work"
work=$(realpath "$work")
root=$work/root   # the throwaway root: an overlay of /
scratch=$work/t   # a tmpfs holding the overlay's upper and work directories
mode=""           # nspawn or chroot, once the root is up
nspawn_pid=""
leader=""         # the root's PID 1 (systemd) under nspawn
honed_pid=""      # honed started by hand (chroot mode)
nspawn_run_mounted=""

version=$(dpkg-deb -f "$deb" Version)
old_version="${version}~previous"
pkgdir=/var/cache/hone-package-test # in the root: the .deb files

# --- cleanup, even on failure ----------------------------------------------------------------

diagnose() {
  [ -n "$mode" ] || return 0
  echo "--- diagnostics"
  if [ "$mode" = nspawn ]; then
    in_root systemctl status --no-pager hone 2>&1 | tail -20 || true
    in_root journalctl --no-pager -u hone 2>&1 | tail -40 || true
  elif [ -f "$work/honed.log" ]; then
    tail -40 "$work/honed.log"
  fi
  [ -f "$work/app.log" ] && { echo "--- app.log"; tail -20 "$work/app.log"; }
  return 0
}

fail() {
  echo "FAIL: $*"
  diagnose
  exit 1
}

cleanup() {
  local rc=$?
  set +e
  if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
    # SIGTERM halts the container cleanly (systemd powers off); SIGKILL after a deadline.
    kill -TERM "$nspawn_pid"
    for _ in $(seq 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$nspawn_pid" 2>/dev/null
    wait "$nspawn_pid" 2>/dev/null
  fi
  if [ -n "$honed_pid" ]; then kill -TERM "$honed_pid" 2>/dev/null; fi
  for m in "$root/dev/pts" "$root/dev" "$root/sys" "$root/proc" "$root" "$scratch"; do
    if mountpoint -q "$m" 2>/dev/null; then umount "$m" 2>/dev/null || umount -l "$m"; fi
  done
  if [ -n "$nspawn_run_mounted" ]; then umount /run/systemd/nspawn 2>/dev/null || umount -l /run/systemd/nspawn; fi
  if [ "${HONE_TEST_KEEP:-0}" = 1 ]; then
    echo "kept: $work"
  elif [ $rc = 0 ]; then
    rm -rf "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# in_root CMD...: run CMD in the throwaway root, with a clean environment.
in_root() {
  local env=(env -i -C / PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root)
  if [ "$mode" = nspawn ]; then
    nsenter --target "$leader" --mount --uts --ipc --net --pid --root -- "${env[@]}" "$@"
  else
    chroot "$root" "${env[@]}" "$@"
  fi
}

# wait_for WHAT SECONDS CMD...: run CMD until it succeeds; fail after SECONDS.
wait_for() {
  local what=$1 secs=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || fail "waited ${secs}s for $what"
    sleep 0.2
  done
}

# --- the package itself ----------------------------------------------------------------------

step "lintian $(basename "$deb")"
lintian_rc=0
lintian --fail-on error,warning --display-info "$deb" >"$work/lintian.log" 2>&1 || lintian_rc=$?
grep -v 'running with root privileges' "$work/lintian.log" || true
[ $lintian_rc = 0 ] || fail "lintian reports errors or warnings (above), or did not run (exit $lintian_rc)"

step "contents: what the package ships, and nothing of the emulated device"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|; s|/$||' | sort >"$work/contents"
expected_files="
/etc/hone/hone.toml
/lib/systemd/system/hone.service
/usr/bin/hone-ptx
/usr/bin/honectl
/usr/bin/honed
/usr/lib/hone/libhone.so
/usr/lib/sysusers.d/hone.conf
/usr/lib/tmpfiles.d/hone.conf
/usr/share/bash-completion/completions/hone-ptx
/usr/share/bash-completion/completions/honectl
/usr/share/doc/hone/changelog.gz
/usr/share/doc/hone/copyright
/usr/share/lintian/overrides/hone
/usr/share/man/man1/hone-ptx.1.gz
/usr/share/man/man1/honectl.1.gz
/usr/share/man/man5/hone.toml.5.gz
/usr/share/man/man8/honed.8.gz"
# Files only (directories are implied by them).
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./|/|' | sort >"$work/files"
diff <(echo "$expected_files" | sed '/^$/d' | sort) "$work/files" ||
  fail "the package's files differ from the list above (< expected, > in the package)"
if grep -Ei 'libcuda|libcudart|/emu|emulat' "$work/contents"; then
  fail "the emulated device is in the package"
fi
[ "$(dpkg-deb -f "$deb" Package)" = hone ] || fail "package name is not hone"
dpkg-deb -f "$deb" Depends | grep -q 'libc6' || fail "Depends has no shared-library dependencies (\${shlibs:Depends})"

step "the previous version, $old_version: the same package with a lower version"
dpkg-deb -R "$deb" "$work/old"
sed -i "s/^Version: .*/Version: $old_version/" "$work/old/DEBIAN/control"
dpkg-deb --root-owner-group -b "$work/old" "$work/hone_${old_version}_amd64.deb" >/dev/null
rm -rf "$work/old"

# --- the throwaway root ----------------------------------------------------------------------

step "throwaway root: overlay of / on a tmpfs"
mkdir -p "$root" "$scratch"
mount -t tmpfs -o mode=0755 tmpfs "$scratch" || skip "cannot mount a tmpfs here"
mkdir -p "$scratch/upper" "$scratch/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$scratch/upper,workdir=$scratch/work" "$root" ||
  skip "cannot mount an overlay of / here (overlayfs missing, or not allowed in this container)"
# The machine's policy-rc.d, if any, must not decide for the throwaway root: under systemd the
# postinst starts the service as on a real host; in a chroot the one written below forbids it.
rm -f "$root/usr/sbin/policy-rc.d"
mkdir -p "$root$pkgdir"
cp "$deb" "$work/hone_${old_version}_amd64.deb" "$root$pkgdir/"
new_deb=$pkgdir/$(basename "$deb")
old_deb=$pkgdir/hone_${old_version}_amd64.deb
# The emulated device and the test application, copied into the root: the build directory may lie
# where the root does not show it (on another file system than /, which the overlay leaves out,
# or under /tmp, which a booted root mounts afresh).
testdir=/opt/hone-package-test
mkdir -p "$root$testdir"
cp -a "$build/lib/emu" "$root$testdir/emu"
cp "$app" "$root$testdir/"
emu_dir=$testdir/emu
emu_driver=$emu_dir/libcuda.so.1
app=$testdir/$(basename "$app")
# honed's workers run on the emulated device here (the unit and the configuration are the
# installed ones; a drop-in points worker.driver at the build's libcuda.so.1).
mkdir -p "$root/etc/systemd/system/hone.service.d"
cat >"$root/etc/systemd/system/hone.service.d/emulated-device.conf" <<EOF
[Service]
Environment=HONE_WORKER_DRIVER=$emu_driver
EOF

# boot_nspawn: systemd as PID 1 of the root. Returns 1 where it does not come up.
boot_nspawn() {
  command -v systemd-nspawn >/dev/null || { echo "(systemd-nspawn not found: package systemd-container)"; return 1; }
  # nspawn refuses to clean up its propagation directory unless it is on a tmpfs, which /run
  # normally is; where it is not (some containers), a tmpfs is mounted there for the test.
  mkdir -p /run/systemd/nspawn
  if [ "$(findmnt -n -o FSTYPE --target /run/systemd/nspawn)" != tmpfs ]; then
    mount -t tmpfs -o mode=0755 tmpfs /run/systemd/nspawn && nspawn_run_mounted=1
  fi
  # --register=no --keep-unit: no systemd-machined or D-Bus needed on this machine.
  # --private-network: services in the root listen on its own loopback only.
  # basic.target: no service of this machine starts in the root, only what the test starts.
  systemd-nspawn --quiet --directory="$root" --machine="hone-package-test-$$" --boot \
    --register=no --keep-unit --private-network --link-journal=no --console=pipe \
    systemd.unit=basic.target >"$work/nspawn.log" 2>&1 </dev/null &
  nspawn_pid=$!
  local end=$((SECONDS + 60)) p
  while [ -z "$leader" ]; do
    kill -0 "$nspawn_pid" 2>/dev/null || { echo "(systemd-nspawn exited: $(tail -3 "$work/nspawn.log"))"; nspawn_pid=""; return 1; }
    [ $SECONDS -lt $end ] || { echo "(no PID 1 in the root after 60s)"; return 1; }
    # The root's PID 1: a process of ours whose pid in its own namespace is 1.
    for p in $(pgrep -P "$nspawn_pid") $(for c in $(pgrep -P "$nspawn_pid"); do pgrep -P "$c"; done); do
      if awk '/^NSpid:/ { exit !(NF == 3 && $3 == 1) }' "/proc/$p/status" 2>/dev/null; then leader=$p; fi
    done
    sleep 0.2
  done
  mode=nspawn
  local state=""
  while :; do
    state=$(in_root systemctl is-system-running 2>/dev/null) || true
    case $state in running | degraded) break ;; esac
    [ $SECONDS -lt $end ] || { echo "(the root's systemd is '$state' after 60s)"; return 1; }
    sleep 0.2
  done
  return 0
}

# chroot_root: the same root as a chroot, with /proc, /sys and /dev, and a policy-rc.d that
# forbids starting services (there is no service manager to start them).
chroot_root() {
  if [ -n "$nspawn_pid" ]; then
    kill -TERM "$nspawn_pid" 2>/dev/null
    wait "$nspawn_pid" 2>/dev/null || true
    nspawn_pid=""
    leader=""
  fi
  mount --bind /proc "$root/proc"
  mount --bind /sys "$root/sys"
  mount --bind /dev "$root/dev"
  mountpoint -q /dev/pts && mount --bind /dev/pts "$root/dev/pts"
  printf '#!/bin/sh\n# package_test: no services start in this chroot.\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
  mode=chroot
}

# HONE_PACKAGE_TEST_ROOT=chroot skips systemd-nspawn (to test the chroot way where nspawn boots).
if [ "${HONE_PACKAGE_TEST_ROOT:-}" != chroot ] && boot_nspawn; then
  step "booted systemd in the root with systemd-nspawn (services start as on a real host)"
else
  step "systemd-nspawn cannot boot here: the root is a chroot (services do not start; honed is started by hand)"
  chroot_root
fi
in_root dpkg-query -W -f='${Status}\n' hone 2>/dev/null | grep -q 'ok installed' &&
  fail "hone is installed in the throwaway root before the test installs it"

# --- honed and an application ----------------------------------------------------------------

# start_honed / stop_honed: under systemd, the postinst starts it and the test checks that; in a
# chroot, honed is started as hone with the installed configuration, as hone.service would
# (with the directories that RuntimeDirectory= and StateDirectory= would make).
start_honed() {
  if [ "$mode" = nspawn ]; then
    wait_for "hone.service to be active" 30 in_root systemctl is-active --quiet hone
  else
    in_root install -d -o hone -g hone -m 0755 /run/hone
    in_root install -d -o hone -g hone -m 0700 /var/lib/hone
    # exec all the way down (chroot, env, setpriv), so that $! is honed itself.
    (exec chroot "$root" env -i -C / PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/var/lib/hone \
      HONE_WORKER_DRIVER="$emu_driver" setpriv --reuid=hone --regid=hone --init-groups -- \
      /usr/bin/honed --config /etc/hone/hone.toml) >>"$work/honed.log" 2>&1 &
    honed_pid=$!
  fi
  wait_for "honectl status to answer" 30 in_root honectl status
}
stop_honed() {
  if [ "$mode" = nspawn ]; then
    in_root systemctl stop hone
  elif [ -n "$honed_pid" ]; then
    kill -TERM "$honed_pid"
    wait "$honed_pid" || true
    honed_pid=""
  fi
}
# reload_honed: what `systemctl reload hone` does (ExecReload=: SIGHUP).
reload_honed() {
  if [ "$mode" = nspawn ]; then
    in_root systemctl reload hone
  else
    kill -HUP "$honed_pid"
  fi
}
restart_honed() {
  if [ "$mode" = nspawn ]; then
    in_root systemctl restart hone
    wait_for "honectl status to answer" 30 in_root honectl status
  else
    stop_honed
    start_honed
  fi
}

app_user=hone-app
app_pid=""
# start_app: hone-testapp-serve as a user in group hone, under the installed shim, on the
# emulated device, until the stop file exists.
start_app() {
  # In the root's own /tmp (a tmpfs of its own under nspawn), so through in_root.
  in_root rm -f /tmp/hone-app.stop
  in_root runuser -u "$app_user" -- env LD_PRELOAD=/usr/lib/hone/libhone.so \
    LD_LIBRARY_PATH="$emu_dir" "$app" --n 4096 --seconds 300 --stop-file /tmp/hone-app.stop \
    >"$work/app.log" 2>&1 &
  app_pid=$!
}
stop_app() {
  in_root touch /tmp/hone-app.stop
  wait "$app_pid" || fail "the application failed under the shim (app.log)"
  app_pid=""
  grep -q 'mismatches 0' "$work/app.log" || fail "the application computed wrong results under the shim"
}
# app_attached: honectl status lists the application, run by the app user, and its kernel.
app_attached() {
  local uid
  uid=$(in_root id -u "$app_user")
  in_root honectl status >"$work/status.txt" 2>&1 || return 1
  awk -v uid="$uid" '$2 == uid && /hone-testapp-serve/ { found = 1 } END { exit !found }' "$work/status.txt" || return 1
  in_root honectl kernels | grep -qw accumulate
}
# variant_ids: the ids of the variants in the store, sorted.
variant_ids() {
  in_root honectl variants | awk '$1 ~ /^[0-9a-f]+$/ && length($1) >= 8 { print $1 }' | sort
}
has_variants() { [ -n "$(variant_ids)" ]; }

# --- install the previous version, use it, fill the store ------------------------------------

step "install $old_version"
in_root dpkg -i "$old_deb" >"$work/dpkg-install-old.log" 2>&1 || { cat "$work/dpkg-install-old.log"; fail "dpkg -i $old_version"; }
start_honed

step "a user in group hone (honed accepts the socket's group, nothing to configure); a change to the conffile; reload"
in_root useradd --create-home --shell /bin/sh --groups hone "$app_user"
in_root id -nG "$app_user" | grep -qw hone || fail "$app_user is not in group hone"
# An operator's change to the conffile, which the upgrade below must keep.
sed -i "s/^#hot_min_launches = 100$/hot_min_launches = 50/" "$root/etc/hone/hone.toml"
grep -q "^hot_min_launches = 50$" "$root/etc/hone/hone.toml" || fail "could not set hot_min_launches in /etc/hone/hone.toml"
reload_honed
wait_for "honed to read hot_min_launches from /etc/hone/hone.toml (honectl config)" 30 \
  in_root sh -c "honectl config | grep -q '^hot_min_launches = 50 .*# from /etc/hone/hone.toml'"

step "the application attached; the store fills"
start_app
wait_for "the application and its kernel in honectl status/kernels" 60 app_attached
sed -n '1,12p' "$work/status.txt"
wait_for "a variant in the store (the optimizer's verdicts on accumulate)" 180 has_variants
stop_app
before=$(variant_ids)
echo "variants in the store: $(echo $before)"

# --- upgrade ---------------------------------------------------------------------------------

step "upgrade $old_version -> $version"
pid_before=$(in_root systemctl show -p MainPID --value hone 2>/dev/null || echo "")
in_root dpkg -i "$new_deb" >"$work/dpkg-upgrade.log" 2>&1 || { cat "$work/dpkg-upgrade.log"; fail "dpkg -i $version over $old_version"; }
[ "$(in_root dpkg-query -W -f='${Version}' hone)" = "$version" ] || fail "after the upgrade hone is not at $version"
if [ "$mode" = nspawn ]; then
  wait_for "hone.service to be active after the upgrade" 30 in_root systemctl is-active --quiet hone
  pid_after=$(in_root systemctl show -p MainPID --value hone)
  [ "$pid_after" != "$pid_before" ] || fail "the upgrade did not restart honed (MainPID $pid_before)"
else
  restart_honed
fi
wait_for "honectl status to answer after the upgrade" 30 in_root honectl status
grep -q "^hot_min_launches = 50$" "$root/etc/hone/hone.toml" || fail "the upgrade lost the change to /etc/hone/hone.toml"
after=$(variant_ids)
[ -n "$after" ] || fail "the store is empty after the upgrade"
missing=$(comm -23 <(echo "$before") <(echo "$after"))
[ -z "$missing" ] || fail "variants lost in the upgrade: $missing"
echo "store kept: $(echo "$after" | wc -l) variant(s)"

# --- the installed package, checked ----------------------------------------------------------

step "files, owners and modes"
in_root dpkg -L hone >"$work/dpkg-L"
for f in $expected_files; do grep -qx "$f" "$work/dpkg-L" || fail "dpkg -L hone does not list $f"; done
# check_stat PATH MODE OWNER GROUP
check_stat() {
  local got
  got=$(in_root stat -c '%a %U %G' "$1") || fail "$1 is missing"
  [ "$got" = "$2 $3 $4" ] || fail "$1 is $got, expected $2 $3 $4"
}
check_stat /usr/bin/honed 755 root root
check_stat /usr/bin/honectl 755 root root
check_stat /usr/bin/hone-ptx 755 root root
check_stat /usr/lib/hone 755 root root
check_stat /usr/lib/hone/libhone.so 644 root root
check_stat /lib/systemd/system/hone.service 644 root root
check_stat /usr/lib/sysusers.d/hone.conf 644 root root
check_stat /usr/lib/tmpfiles.d/hone.conf 644 root root
check_stat /etc/hone 755 root root
check_stat /etc/hone/hone.toml 644 root root
check_stat /usr/share/bash-completion/completions/honectl 644 root root
check_stat /var/lib/hone 700 hone hone
# The state directory as the unit makes it and as the tmpfiles entry makes it: the same.
unit_mode=$(in_root sed -n 's/^StateDirectoryMode=//p' /lib/systemd/system/hone.service)
in_root grep -q "^d /var/lib/hone $unit_mode hone hone " /usr/lib/tmpfiles.d/hone.conf ||
  fail "the tmpfiles entry for /var/lib/hone disagrees with the unit's StateDirectoryMode=$unit_mode"
in_root dpkg-query -W -f='${Conffiles}\n' hone | grep -q '^ /etc/hone/hone.toml ' || fail "/etc/hone/hone.toml is not a conffile"
in_root ldd /usr/bin/honed | grep -q 'not found' && fail "honed misses a library: $(in_root ldd /usr/bin/honed | grep 'not found')"
in_root ldd /usr/lib/hone/libhone.so | grep -q 'not found' && fail "libhone.so misses a library"

step "the hone user and group (sysusers)"
in_root getent passwd hone | awk -F: '{ exit !($3 < 1000 && $6 == "/var/lib/hone" && $7 ~ /nologin$/) }' ||
  fail "hone is not a system user with home /var/lib/hone and no login shell: $(in_root getent passwd hone)"
in_root getent group hone >/dev/null || fail "no group hone"
in_root id -nG hone | grep -qw video || fail "hone is not in group video"

step "the unit: systemd-analyze verify, enabled"
if in_root sh -c 'command -v man' >/dev/null; then man_opt=--man=yes; else man_opt=--man=no; fi
in_root systemd-analyze verify "$man_opt" /lib/systemd/system/hone.service >"$work/verify.log" 2>&1 ||
  { cat "$work/verify.log"; fail "systemd-analyze verify exited non-zero"; }
cat "$work/verify.log"
# verify exits 0 on unknown keys and bad values, warning only: any line about the unit fails.
grep -q 'hone.service' "$work/verify.log" && fail "systemd-analyze verify warned about hone.service"
[ "$(in_root systemctl is-enabled hone 2>/dev/null)" = enabled ] || fail "hone.service is not enabled"
in_root grep -qx 'ExecStart=/usr/bin/honed --config /etc/hone/hone.toml' /lib/systemd/system/hone.service ||
  fail "the unit does not start /usr/bin/honed with /etc/hone/hone.toml"

step "honed runs as hone with the installed configuration"
if [ "$mode" = nspawn ]; then
  main_pid=$(in_root systemctl show -p MainPID --value hone)
else
  main_pid=$honed_pid
fi
[ -n "$main_pid" ] && [ "$main_pid" != 0 ] || fail "no honed process"
in_root ps -o user=,args= -p "$main_pid" | tee "$work/honed.ps"
grep -q '^hone  *honed --config /etc/hone/hone.toml$\|^hone  */usr/bin/honed --config /etc/hone/hone.toml$' "$work/honed.ps" ||
  fail "honed does not run as hone with /etc/hone/hone.toml: $(cat "$work/honed.ps")"
check_stat /run/hone/hone.sock 660 hone hone

step "an application of $app_user (group hone) attached to the installed honed"
start_app
wait_for "the application and its kernel in honectl status/kernels" 60 app_attached
in_root honectl kernels
stop_app

step "bash completion of honectl"
"$(dirname "$0")/completion_test.sh" "$root/usr/share/bash-completion/completions/honectl" ||
  fail "bash completion"

# --- remove and purge ------------------------------------------------------------------------

step "remove: the service stops; /etc/hone and /var/lib/hone stay"
in_root dpkg -r hone >"$work/dpkg-remove.log" 2>&1 || { cat "$work/dpkg-remove.log"; fail "dpkg -r hone"; }
if [ "$mode" = nspawn ]; then
  in_root systemctl is-active --quiet hone && fail "hone.service still runs after dpkg -r"
  wait_for "honed to be gone" 30 bash -c "! nsenter --target $leader --pid --mount -- pgrep -x honed"
else
  stop_honed
fi
[ -e "$root/usr/bin/honed" ] && fail "/usr/bin/honed is still there after dpkg -r"
[ -e "$root/lib/systemd/system/hone.service" ] && fail "the unit is still there after dpkg -r"
[ -f "$root/etc/hone/hone.toml" ] || fail "dpkg -r removed the conffile /etc/hone/hone.toml"
[ -d "$root/var/lib/hone" ] || fail "dpkg -r removed /var/lib/hone"
[ -n "$(ls -A "$root/var/lib/hone")" ] || fail "dpkg -r emptied /var/lib/hone"
in_root getent passwd hone >/dev/null || fail "dpkg -r removed the hone user"

step "purge: /etc/hone and /var/lib/hone go"
in_root dpkg -P hone >"$work/dpkg-purge.log" 2>&1 || { cat "$work/dpkg-purge.log"; fail "dpkg -P hone"; }
[ -e "$root/etc/hone/hone.toml" ] && fail "dpkg -P left /etc/hone/hone.toml"
[ -e "$root/etc/hone" ] && fail "dpkg -P left /etc/hone: $(ls -A "$root/etc/hone")"
[ -e "$root/var/lib/hone" ] && fail "dpkg -P left /var/lib/hone"
[ -e "$root/etc/systemd/system/multi-user.target.wants/hone.service" ] && fail "dpkg -P left the unit enabled"
in_root dpkg-query -W -f='${Status}' hone 2>/dev/null | grep -q 'installed' && fail "dpkg still knows hone after the purge"

echo "PASS ($mode)"
