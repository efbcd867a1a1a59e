# Sourced by the README's scripts: run as root, re-running through sudo when
# not root and sudo exists (containers and CI are root without sudo).
# Usage: become_root "$0" "$@"
become_root() {
  local script="$1"
  shift
  if [ "$(id -u)" -eq 0 ]; then
    give_back_on_exit
    return 0
  fi
  if command -v sudo >/dev/null 2>&1; then
    # Keep the caller's toolchain (rustup lives in the user's home), but not
    # the rest of the caller's PATH: root gets the cargo bin directory and the
    # system's directories only, so a tool planted in a directory the caller
    # can write is never run as root.
    local cargo_home="${CARGO_HOME:-$HOME/.cargo}"
    exec sudo env "PATH=$cargo_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      "CARGO_HOME=$cargo_home" "RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}" \
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

# Run through sudo, the build and the results are made as root in the caller's
# places: hand back, when the script ends, what root made in the repository's
# target/ and results/ (when the repository is the caller's) and in the
# caller's cargo and rustup homes. nflab itself hands its result trees back
# (SUDO_UID, SUDO_GID); this covers the build.
give_back_on_exit() {
  [ -n "${SUDO_UID:-}" ] && [ -n "${SUDO_GID:-}" ] && [ "$SUDO_UID" != 0 ] || return 0
  trap give_back EXIT
}

give_back() {
  local repo home d
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  home="$(getent passwd "$SUDO_UID" | cut -d: -f6)"
  local dirs=()
  [ "$(stat -c %u "$repo")" = "$SUDO_UID" ] && dirs+=("$repo/target" "$repo/results")
  for d in "${CARGO_HOME:-}" "${RUSTUP_HOME:-}"; do
    # Only inside the caller's home: never root's own or the system's.
    [ -n "$home" ] && [ "$home" != / ] && case "$d" in "$home"/*) dirs+=("$d") ;; esac
  done
  for d in "${dirs[@]}"; do
    [ -e "$d" ] && find "$d" -xdev -user 0 -exec chown -h "$SUDO_UID:$SUDO_GID" {} + 2>/dev/null || true
  done
  return 0
}
