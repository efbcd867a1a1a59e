# Sourced by the README's scripts: run as root, re-running through sudo when
# not root and sudo exists (containers and CI are root without sudo).
# Usage: become_root "$0" "$@"
become_root() {
  local script="$1"
  shift
  [ "$(id -u)" -eq 0 ] && return 0
  if command -v sudo >/dev/null 2>&1; then
    # Keep the caller's toolchain (rustup lives in the user's home).
    exec sudo env "PATH=$HOME/.cargo/bin:$PATH" \
      "CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}" "RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}" \
      "CI=${CI:-}" "NFLAB_ALLOW_SKIP=${NFLAB_ALLOW_SKIP:-}" bash "$script" "$@"
  fi
  echo "error: $(basename "$script") needs root (network namespaces, raw sockets, apt): run it as root" >&2
  exit 1
}

# A Rust toolchain on PATH, or one clear sentence.
need_cargo() {
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$HOME/.cargo/bin:$PATH"
  if ! command -v cargo >/dev/null 2>&1; then
    echo "error: no Rust toolchain: install one with rustup (https://rustup.rs), Rust 1.85 or newer" >&2
    exit 1
  fi
}
