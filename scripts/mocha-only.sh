#!/usr/bin/env bash
# Runs only the given compiled test files (or one tier's folder), serially:
# `scripts/mocha-only.sh build/test/pure/x.test.js`, `scripts/mocha-only.sh build/test/emulator`.
exec npx mocha --no-config --require build/test/global.js --timeout 240000 --slow 5000 --exit "$@"
