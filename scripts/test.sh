#!/usr/bin/env bash
# Install Betty with its test dependencies, bring the dev cluster up and run the whole suite.
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" test

exec .venv/bin/python -m pytest "$@"
