#!/usr/bin/env bash
# Make sure PostgreSQL's server binaries (initdb, postgres) are installed; the test fixture
# starts its own throwaway cluster from them. Installs Debian's package when missing and
# fails (never skips) when it cannot.
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL server binaries are missing: install Debian's 'postgresql' package (or set PG_BIN)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
