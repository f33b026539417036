#!/usr/bin/env bash
# Compiles and runs the Java example of README.md exactly as written (the first ```java
# block), with only mooncake-store.jar on the classpath and no java.library.path, so the
# native code is extracted from the jar. Checks the output the README shows. Run under
# scripts/with-cluster.sh (CTest: java_readme_example).
#
#   run-readme-example.sh README.md mooncake-store.jar WORK_DIR JAVAC JAVA
set -euo pipefail
readme=$1 jar=$2 dir=$3 javac=$4 java=$5

rm -rf "$dir"
mkdir -p "$dir/src" "$dir/classes"
awk '/^```java$/ { inside = 1; next } /^```$/ { if (inside) exit } inside' "$readme" > "$dir/src/Hello.java"
grep -q "public class Hello" "$dir/src/Hello.java" || { echo "no Hello example in $readme" >&2; exit 1; }

"$javac" -Xlint:all -Werror -cp "$jar" -d "$dir/classes" "$dir/src/Hello.java"
out=$("$java" -Xcheck:jni -Djava.library.path=/nonexistent -cp "$jar:$dir/classes" Hello)
printf '%s\n' "$out"
expected=$(printf 'hello\n5 bytes, %s, exists=true' "$MOONCAKE_HOSTNAME")
if [ "$out" != "$expected" ]; then
  printf 'run-readme-example: expected\n%s\n' "$expected" >&2
  exit 1
fi
echo "run-readme-example: OK"
