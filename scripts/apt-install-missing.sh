#!/usr/bin/env bash
# Installs the Debian packages given after the label that are not installed yet (one
# apt-get run, as root or through sudo); nothing when all are there. Idempotent; the
# install-*-deps.sh scripts call it with their package lists.
#   apt-install-missing.sh <label> <package>...
set -euo pipefail
label=$1
shift
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "$label: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
