//! Process-wide settings a command-line tool needs.

/// Let SIGPIPE end the process quietly, as it does for C tools, so
/// `nflab … | head` stops without an error when `head` has read enough.
/// Rust programs ignore SIGPIPE by default and then panic on the next print.
pub fn restore_default_sigpipe() {
    // SAFETY: setting a signal disposition to SIG_DFL installs no handler
    // code and has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
