#!/bin/bash
# Nothing the build, `make test` or `make demo` runs needs a tool that a fresh Debian 12
# machine lacks once scripts/install-deps.sh has run (README, "The two commands"):
#  - ccache, which install-deps.sh does not install, is used only where it was found: every
#    script and CMake file that names it also asks `command -v ccache` (or find_program);
#  - no shell script and no Makefile recipe runs one of the commands of $absent, which
#    neither Debian 12's required packages nor install-deps.sh's (with what they depend on)
#    provide. A script that needs one gets its package added to install-deps.sh, with a
#    comment saying who uses it, and the command taken off this list.
# Usage: fresh_machine_test.sh SOURCE_DIR
set -u
src=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src" || fail "no source tree at $src"

# Every file of the tree that the build or a test runs, but not build trees or git's.
files() {
  find . \( -path ./.git -o -path './build*' -o -name target \) -prune -o -type f \
    \( -name '*.sh' -o -name Makefile -o -name CMakeLists.txt -o -name '*.cmake' \
       -o -name setup.py -o -name build.rs \) -print | sort
}

# The lines that are not comments (# starts one in shell, CMake and Python alike).
code() { sed -e 's/^[[:space:]]*#.*//' -e 's/[[:space:]]#[^"'"'"']*$//' "$1"; }

for f in $(files); do
  code "$f" | grep -q ccache || continue
  code "$f" | grep -Eq 'command -v ccache|find_program\([A-Za-z_]+ +ccache' ||
    fail "$f uses ccache without looking for it first (install-deps.sh does not install it)"
done

# Found absent by the audit of issue 30 (a debootstrap --variant=minbase bookworm root
# with install-deps.sh run in it).
absent=(ccache curl wget jq nc netcat ncat socat strace ltrace gdb ss netstat ip ifconfig
        lsof fuser killall xxd hexdump bc file etcdctl sudo git python python2
        docker)
alternation=$(IFS='|'; echo "${absent[*]}")
# A command position: the start of a line or of a pipeline element, after a keyword that
# runs a command, or inside $( ... ) or backquotes.
pattern="(^|[;&|({\`]|\\\$\\(|\\b(then|do|else|exec|env|time|timeout [0-9.]+[smh]?|xargs|sudo))[[:space:]]*(${alternation})([[:space:];)|&]|\$)"
for f in $(files); do
  case "$f" in
    ./tests/unit/fresh_machine_test.sh) continue ;;  # its list, not commands
    *.sh | */Makefile | ./Makefile) ;;
    *) continue ;;
  esac
  hits=$(code "$f" | grep -nE "$pattern")
  [ -z "$hits" ] || fail "$f runs a command a fresh machine lacks: $hits"
done
echo PASS
