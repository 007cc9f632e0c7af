#!/usr/bin/env bash
# systemd_test: the generated hone.service passes `systemd-analyze verify` without a warning, and
# hone.sysusers creates the hone user. Neither needs systemd as PID 1, so this runs in a container.
#
#   systemd_test.sh BUILT_UNIT SYSTEMD_SOURCE_DIR WORK_DIR
#
# The unit names the installed honed (/usr/bin/honed), which verify insists is executable; the
# copy verified here runs /bin/true instead: verify only checks that the program exists, and
# whether honed is built or installed says nothing about the unit. Exit 77 (skipped) without
# systemd-analyze (`make deps` installs the systemd package).
set -euo pipefail

unit=$1
src=$2
work=$3
config_toml="$src/../config/hone.toml"

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not found (Debian package systemd)"
  exit 77
fi

rm -rf "$work"
mkdir -p "$work/unit" "$work/canary"
fail() {
  echo "FAIL: $*"
  exit 1
}

# verify DIR: systemd-analyze verify on DIR/hone.service; prints its output, fails on a non-zero
# exit. --man=no: the unit cites no man pages, and man-db is not installed in CI. Generators are
# off by default for verify; nothing here depends on a running manager.
verify() {
  local rc=0
  systemd-analyze verify --man=no "$1/hone.service" >"$1/verify.log" 2>&1 || rc=$?
  cat "$1/verify.log"
  return $rc
}

sed -E 's|^ExecStart=[^ ]+|ExecStart=/bin/true|' "$unit" >"$work/unit/hone.service"
grep -q '^ExecStart=/bin/true --config ' "$work/unit/hone.service" || fail "no ExecStart=... --config in $unit"

echo "== systemd-analyze verify hone.service"
verify "$work/unit" || fail "systemd-analyze verify exited non-zero"
# verify exits 0 on unknown keys and unparsable values, warning only: any line about the unit fails.
if grep -q 'hone.service' "$work/unit/verify.log"; then
  fail "systemd-analyze verify warned about hone.service"
fi

# The check above can fail: a unit with a mistake in it is reported.
sed -e 's|^Type=notify$|Type=notifyy|' -e 's|^\[Service\]$|[Service]\nProtectSystemm=strict|' \
  "$work/unit/hone.service" >"$work/canary/hone.service"
verify "$work/canary" >/dev/null || true
grep -q 'hone.service:.*Type\|Failed to parse service type' "$work/canary/verify.log" ||
  fail "verify did not report a bad Type= (the check above proves nothing): $(cat "$work/canary/verify.log")"
grep -q "Unknown key 'ProtectSystemm'\|Unknown key name 'ProtectSystemm'" "$work/canary/verify.log" ||
  fail "verify did not report an unknown key: $(cat "$work/canary/verify.log")"

echo "== the unit agrees with the configuration's defaults"
grep -q '^#socket = "/run/hone/hone.sock"$' "$config_toml" || fail "server.socket's default is not in /run/hone"
grep -q '^RuntimeDirectory=hone$' "$unit" || fail "RuntimeDirectory=hone missing: nothing creates /run/hone"
grep -q '^#state_dir = "/var/lib/hone"$' "$config_toml" || fail "store.state_dir's default is not /var/lib/hone"
grep -q '^StateDirectory=hone$' "$unit" || fail "StateDirectory=hone missing: nothing creates /var/lib/hone"
grep -qE '^ExecStart=/[^ ]*/honed --config /[^ ]*/hone/hone.toml$' "$unit" || fail "ExecStart is not honed --config .../hone/hone.toml"
grep -q '^User=hone$' "$unit" && grep -q '^u hone ' "$src/hone.sysusers" || fail "User=hone without its sysusers.d entry"

echo "== systemd-analyze security (offline; reported, not asserted)"
if systemd-analyze security --offline=yes --no-pager "$work/unit/hone.service" >"$work/security.log" 2>&1; then
  grep -E '✗|Overall exposure' "$work/security.log" || true
else
  echo "(systemd-analyze security --offline is not available here)"
fi

echo "== systemd-sysusers on a scratch root"
if [ "$(id -u)" != 0 ]; then
  echo "(skipped: systemd-sysusers --root writes shadow files, which needs root)"
else
  mkdir -p "$work/root/etc"
  systemd-sysusers --root="$work/root" "$src/hone.sysusers"
  grep -E '^hone:x:[0-9]+:[0-9]+:hone GPU kernel optimizer:/var/lib/hone:' "$work/root/etc/passwd" ||
    fail "systemd-sysusers did not create the hone user: $(cat "$work/root/etc/passwd")"
  grep -E '^video:x:[0-9]+:(.*,)?hone(,|$)' "$work/root/etc/group" ||
    fail "hone is not a member of video: $(cat "$work/root/etc/group")"
fi

echo "PASS"
