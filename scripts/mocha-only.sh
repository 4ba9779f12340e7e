#!/usr/bin/env bash
# Runs only the given compiled test files: `scripts/mocha-only.sh build/test/x.test.js`.
exec npx mocha --no-config --require build/test/global.js --timeout 240000 --slow 5000 --exit "$@"
