#!/usr/bin/env bash
# Compiles the web client (Debian's node-typescript) into dist/, and copies the client module to
# the gateway's assets, where the /redeem page imports it from (/redeem/client.js). The copy is
# checked in; WebClientTests fails when it differs from what this script makes.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tsc -p "$here"
cp "$here/dist/src/index.js" "$here/../../Services/gateway/GatewayService/Assets/redeem/redeem-client.js"
