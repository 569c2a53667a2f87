#!/usr/bin/env bash
# Builds the Android client with Debian's kotlinc and, with `test`, runs its JUnit 5 suite.
#   ./build.sh          build/redeem-android.jar (the library: add it and org.json's API to an app)
#   ./build.sh test     the jar, then the tests against the stack named by REDEEM_GATEWAY_URL &c.
#                       (Tests/IntegrationTests/AndroidClientTests.swift starts one and sets them)
# Test reports go to build/test-reports/. Needs `kotlin`, `junit5` and `libandroid-json-org-java`
# (scripts/setup installs them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
java_dir=/usr/share/java
json="$java_dir/json-android.jar"
stdlib="$java_dir/kotlin-stdlib.jar"
for jar in "$json" "$stdlib"; do
  [[ -f $jar ]] || { echo "build.sh: $jar is missing (run scripts/setup)" >&2; exit 1; }
done
command -v kotlinc >/dev/null || { echo "build.sh: kotlinc is missing (run scripts/setup)" >&2; exit 1; }

# -jvm-target 1.8: the bytecode Android's D8 takes.
rm -rf build/main build/test build/test-reports
mkdir -p build/main build/test
kotlinc -nowarn -jvm-target 1.8 -cp "$json" -d build/main src/main/kotlin 2> >(grep -v 'Xverify' >&2)
(cd build/main && jar cf ../redeem-android.jar .)
[[ ${1:-} == test ]] || exit 0

junit="$java_dir/junit-jupiter-api.jar:$java_dir/junit-platform-commons.jar:$java_dir/opentest4j.jar:$java_dir/apiguardian-api.jar"
kotlinc -nowarn -jvm-target 1.8 -cp "build/redeem-android.jar:$json:$junit" -d build/test src/test/kotlin 2> >(grep -v 'Xverify' >&2)
java -jar "$java_dir/junit-platform-console-standalone.jar" \
  --class-path "build/test:build/redeem-android.jar:$json:$stdlib" \
  --scan-class-path build/test --reports-dir build/test-reports --details=tree --disable-banner
