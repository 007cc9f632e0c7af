#!/usr/bin/env bash
# completion_test: the bash completion of honectl completes what honectl accepts.
#
#   completion_test.sh COMPLETION_FILE
#
# COMPLETION_FILE is the generated script (build/packaging/completion/honectl, or the installed
# /usr/share/bash-completion/completions/honectl). It is sourced in this shell and its function
# is called as bash would call it on TAB, with COMP_WORDS and COMP_CWORD set; the candidates it
# leaves in COMPREPLY are compared with what `honectl --help` says today (subcommands and options
# listed here are ones the daemon's tests also use, so a rename shows up in both).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 COMPLETION_FILE" >&2
  exit 2
fi
# shellcheck source=/dev/null
source "$1" || { echo "FAIL: cannot source $1"; exit 1; }
complete -p honectl >/dev/null 2>&1 || { echo "FAIL: $1 registers no completion for honectl"; exit 1; }
func=$(complete -p honectl | sed -n 's/.*-F \([^ ]*\) .*/\1/p')

failures=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/dir"
touch "$scratch/export.json" "$scratch/dir/kernel.cu"

# candidates LINE: what TAB offers after LINE (the last word, maybe empty, is completed).
candidates() {
  local line=$1
  read -r -a COMP_WORDS <<<"$line"
  [[ $line == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE=$line
  COMP_POINT=${#line}
  COMPREPLY=()
  "$func" honectl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]:-}"
  printf '%s\n' "${COMPREPLY[@]}" | sort
}

# expect LINE WORD...: every WORD is among the candidates.
expect() {
  local line=$1 got w
  shift
  got=$(candidates "$line")
  for w in "$@"; do
    if ! grep -qxF -- "$w" <<<"$got"; then
      echo "FAIL: 'honectl${line#honectl}<TAB>' does not offer '$w'; it offers: $(echo $got)"
      failures=$((failures + 1))
    fi
  done
}
# expect_none LINE WORD...: no WORD is among the candidates.
expect_none() {
  local line=$1 got w
  shift
  got=$(candidates "$line")
  for w in "$@"; do
    if grep -qxF -- "$w" <<<"$got"; then
      echo "FAIL: 'honectl${line#honectl}<TAB>' offers '$w', which does not belong there"
      failures=$((failures + 1))
    fi
  done
}

expect "honectl " status kernels variants show disable enable evict retry export import submit jobs metrics doctor
expect "honectl st" status
expect_none "honectl st" kernels
expect "honectl --" --help --socket --version
expect "honectl status --" --json --top --processes --socket
expect_none "honectl status --" --fleet --force
expect "honectl disable --" --fleet --json
expect "honectl export --" --arch --force
# Option values: paths for path options, nothing invented for others.
expect "honectl --socket $scratch/ex" "$scratch/export.json"
expect "honectl doctor --config $scratch/d" "$scratch/dir"
expect "honectl status --top " # a number: nothing offered, and nothing fails
expect_none "honectl status --top " status
# Arguments: FILE is a path; the subcommand is found past options and their values.
expect "honectl import $scratch/ex" "$scratch/export.json"
expect "honectl --socket /run/hone/hone.sock export --arch sm_90 $scratch/ex" "$scratch/export.json"
expect_none "honectl --socket /run/hone/hone.sock st" "$scratch/export.json"
expect "honectl --socket /run/hone/hone.sock st" status
expect "honectl submit mykernel $scratch/dir/k" "$scratch/dir/kernel.cu"
# After the subcommand, no other subcommand is offered.
expect_none "honectl status " kernels

if [ $failures -gt 0 ]; then
  echo "FAIL: $failures completion check(s)"
  exit 1
fi
echo "PASS: bash completion ($1)"
