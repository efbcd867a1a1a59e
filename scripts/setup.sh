#!/usr/bin/env bash
# Installs what nflab needs on a Debian/Ubuntu host and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "error: run this as root (network namespaces and raw sockets need it): sudo $0" >&2
  exit 1
fi
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v sysctl >/dev/null || need+=(procps)
command -v cc >/dev/null || need+=(build-essential)
command -v git >/dev/null || need+=(git)
# The report's PNG figures are drawn with this font; without it only SVGs are written.
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
if ! command -v cargo >/dev/null; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "error: no Rust toolchain: install one with rustup (https://rustup.rs), Rust 1.85 or newer" >&2
    exit 1
  fi
fi
cargo build --release --locked -p nflab 2>&1 | grep -v "^\s*Compiling" || true
test -x target/release/nflab
