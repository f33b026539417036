#!/bin/bash
# One man page, for man/CMakeLists.txt: help2man on PROGRAM with the material of INCLUDE
# (NAME's line, SYNOPSIS, and the sections --help has no room for), written to OUTPUT.
# With --subcommands, a COMMANDS section is added with each command's own help, the
# commands read from the "Commands:" (or "Subcommands:") list of PROGRAM --help.
# A program whose --version prints no version yet gets "<name> VERSION" from here, so that
# a page is made from whatever --help says today. The page is written only once complete.
# Usage: make_page.sh PROGRAM INCLUDE VERSION OUTPUT [--subcommands]
set -euo pipefail
program=$1 include=$2 version=$3 output=$4 subcommands=${5:-}
name=$(basename "$program")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-man-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A sanitizer build's leak report at exit would change --help's exit status.
export ASAN_OPTIONS=detect_leaks=0

version_args=()
if ! "$program" --version 2> /dev/null | grep -q "^$name [0-9]"; then
  version_args=("--version-string=$name $version")
fi

cp "$include" "$tmp/include.h2m"
if [ "$subcommands" = --subcommands ]; then
  commands=$("$program" --help | awk '/^(Sub)?[Cc]ommands:$/ { on = 1; next }
                                      on && /^$/ { on = 0 }
                                      on && /^ +[a-z]/ { print $1 }')
  [ -n "$commands" ] || { echo "make_page.sh: $name --help lists no commands" >&2; exit 1; }
  {
    echo "[COMMANDS]"
    for command in $commands; do
      echo ".SS $command"
      echo ".nf"
      # roff: a backslash is \e, a dash \- (so that it copies as one), and a line may not
      # begin with a control character.
      "$program" "$command" --help |
        sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
      echo ".fi"
    done
  } >> "$tmp/include.h2m"
fi

help2man --no-info --section=1 --source="Mooncake Store $version" --manual="Mooncake Store" \
  --include="$tmp/include.h2m" "${version_args[@]}" --output="$tmp/page.1" "$program"
mkdir -p "$(dirname "$output")"
mv "$tmp/page.1" "$output"
