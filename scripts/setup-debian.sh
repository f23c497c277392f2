#!/usr/bin/env bash
# Installs the Debian packages torch-tile builds against, if any is missing. Idempotent:
# a machine that has them all runs no apt command at all.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ git python3-dev
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22 liblld-22-dev
  libgtest-dev libamdhip64-dev rocm-device-libs
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
