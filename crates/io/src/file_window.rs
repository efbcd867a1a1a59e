//! A read-only window of a file mapped into memory, for passes that read
//! large record files once (the analysis of TRex-fork files).
//!
//! Why: `pread` copies every byte from the page cache into a buffer — for
//! a 1.6 GB file about a quarter of the whole pass's CPU time, all of it in
//! the kernel. A mapping of the page cache's own pages costs a page-table
//! entry per page instead. Windows (not the whole file) keep the process's
//! resident set small: each is unmapped when dropped.
//!
//! A file truncated while a window of it is mapped would end the process
//! with SIGBUS at the first read past its new end (in Python too, which
//! loads this code). So a SIGBUS handler, installed with the first window,
//! puts a page of zeros where a window's page vanished and marks the window;
//! [`FileWindow::intact`] then says its bytes are not the file's, and the
//! reader reports the file as changed. A SIGBUS anywhere else goes to the
//! handler that was there before (or the default: the process ends, as it
//! would have).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Windows alive at once that the SIGBUS handler knows; a window beyond
/// them is not mapped (the caller reads the bytes instead).
const SLOTS: usize = 256;

/// One live window, as the handler sees it: `start..end` of memory, and
/// whether a page of it was replaced.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    hit: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    hit: AtomicBool::new(false),
};
static WINDOWS: [Slot; SLOTS] = [FREE; SLOTS];
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS action before ours; Err when ours could not be installed.
static PREVIOUS: OnceLock<Result<libc::sigaction, ()>> = OnceLock::new();

/// Install [`on_sigbus`] once; false when the kernel refused it.
fn install_handler() -> bool {
    PREVIOUS
        .get_or_init(|| {
            PAGE.store(crate::sys::page_size(), Ordering::Relaxed);
            // SAFETY: a zeroed sigaction is a valid "no handler, empty mask";
            // sigaction reads `act` and writes `old`, both live locals.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_sigbus as *const () as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, &act, &mut old) == 0 {
                    Ok(old)
                } else {
                    Err(())
                }
            }
        })
        .is_ok()
}

/// SIGBUS: inside a live window, a page of zeros replaces the vanished one
/// (the read goes on) and the window is marked; anywhere else, the action
/// that was there before.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for w in &WINDOWS {
        let start = w.start.load(Ordering::Acquire);
        if start != 0 && addr >= start && addr < w.end.load(Ordering::Acquire) {
            // SAFETY: the page lies inside a mapping this module made and
            // still owns (the slot is cleared only after munmap); MAP_FIXED
            // replaces just that page, with zeros. mmap is a plain syscall,
            // safe in a signal handler.
            let p = unsafe {
                libc::mmap(
                    (addr & !(page - 1)) as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                w.hit.store(true, Ordering::Release);
                return;
            }
        }
    }
    match PREVIOUS.get() {
        Some(Ok(prev))
            if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN =>
        {
            // SAFETY: the previous handler was installed for this signal with
            // these flags; it is called as the kernel would have called it.
            unsafe {
                if prev.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(prev.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(prev.sa_sigaction);
                    f(sig);
                }
            }
        }
        _ => {
            // SAFETY: signal and raise are async-signal-safe; the default
            // action then ends the process as it would have without us.
            unsafe {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
                libc::raise(libc::SIGBUS);
            }
        }
    }
}

/// Claim a slot for `start..end`; its index.
fn register(start: usize, end: usize) -> Option<usize> {
    WINDOWS.iter().position(|w| {
        w.start
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            && {
                w.hit.store(false, Ordering::Relaxed);
                w.end.store(end, Ordering::Release);
                w.start.store(start, Ordering::Release);
                true
            }
    })
}

/// Bytes `offset..offset + len` of a file, mapped read-only.
pub struct FileWindow {
    ptr: *const u8,
    /// Length of the whole mapping (from the page boundary at or before `offset`).
    map_len: usize,
    /// Where the asked-for bytes start inside the mapping.
    skip: usize,
    len: usize,
    /// Its slot in [`WINDOWS`] (None for an empty window).
    slot: Option<usize>,
}

// SAFETY: the mapping is read-only memory owned by this value; sharing or
// moving it across threads only shares reads.
unsafe impl Send for FileWindow {}
// SAFETY: as above: every access is a read.
unsafe impl Sync for FileWindow {}

impl FileWindow {
    /// Map bytes `offset..offset + len` of `file` (which must hold them).
    ///
    /// The bytes are read as they are in the page cache: a file changed
    /// while the window lives shows the change, and where one is truncated
    /// below the window the bytes read as zeros and [`FileWindow::intact`]
    /// turns false (no SIGBUS). Fails when the handler cannot be installed or
    /// too many windows live: read the bytes instead then.
    pub fn map(file: &File, offset: u64, len: usize) -> io::Result<FileWindow> {
        let end = offset
            .checked_add(len as u64)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "window beyond 2^64"))?;
        if end > file.metadata()?.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the window ends at byte {end}, beyond the end of the file"),
            ));
        }
        if len == 0 {
            return Ok(FileWindow {
                ptr: std::ptr::null(),
                map_len: 0,
                skip: 0,
                len: 0,
                slot: None,
            });
        }
        if !install_handler() {
            return Err(io::Error::other(
                "no SIGBUS handler: a truncated file would end the process",
            ));
        }
        let page = crate::sys::page_size() as u64;
        let start = offset - offset % page;
        let skip = (offset - start) as usize;
        let map_len = skip + len;
        // SAFETY: asks the kernel for a new private read-only mapping of the
        // file; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                start as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let Some(slot) = register(ptr as usize, ptr as usize + map_len) else {
            // SAFETY: exactly what mmap just returned, not yet shared.
            unsafe {
                libc::munmap(ptr, map_len);
            }
            return Err(io::Error::other("too many mapped windows at once"));
        };
        Ok(FileWindow {
            ptr: ptr as *const u8,
            map_len,
            skip,
            len,
            slot: Some(slot),
        })
    }

    /// False when the file shrank under the window while it lived: some of
    /// its bytes read as zeros, not as the file's.
    pub fn intact(&self) -> bool {
        self.slot
            .is_none_or(|i| !WINDOWS[i].hit.load(Ordering::Acquire))
    }

    /// The window's bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr + skip .. + len` lies inside the live read-only mapping
        // of `map_len` bytes, which outlives the borrow of `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.add(self.skip), self.len) }
    }
}

impl Drop for FileWindow {
    fn drop(&mut self) {
        if self.map_len == 0 {
            return;
        }
        // SAFETY: `ptr`/`map_len` are exactly what mmap returned, and no slice
        // of the mapping outlives `self` (`bytes` borrows it).
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.map_len);
        }
        // Only now: until the unmap, the handler may still need the slot.
        if let Some(i) = self.slot {
            WINDOWS[i].end.store(0, Ordering::Release);
            WINDOWS[i].start.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_equal_the_files_bytes_at_any_offset() {
        let dir = std::env::temp_dir().join(format!("nflab-io-window-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bytes");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = File::open(&path).unwrap();
        for (off, len) in [
            (0, 20_000),
            (1, 5),
            (4095, 2),
            (4096, 8192),
            (12_345, 7_655),
            (7, 0),
        ] {
            let w = FileWindow::map(&f, off as u64, len).unwrap();
            assert_eq!(w.bytes(), &data[off..off + len], "{off}+{len}");
        }
        let e = FileWindow::map(&f, 19_999, 2).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        std::fs::remove_dir_all(dir).ok();
    }

    /// Set in the child process of the truncation test.
    const CHILD: &str = "NFLAB_IO_WINDOW_TRUNCATE_CHILD";

    #[test]
    fn a_file_truncated_under_a_window_reads_as_changed_not_sigbus() {
        if let Some(path) = std::env::var_os(CHILD) {
            // The child: map, truncate, read every byte.
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let w = FileWindow::map(&f, 4096, 3 * 4096).unwrap();
            assert!(w.intact());
            f.set_len(4096 + 10).unwrap();
            let sum: u64 = w.bytes().iter().map(|b| *b as u64).sum();
            // The first 10 bytes are still the file's; the rest read as zeros.
            assert_eq!(sum, 10 * 7);
            assert!(!w.intact(), "a vanished page went unnoticed");
            // Another window of the same file, made after: intact.
            let again = FileWindow::map(&f, 0, 4096).unwrap();
            assert!(again.intact());
            drop(w);
            println!("child: read to the end");
            return;
        }
        let dir = std::env::temp_dir().join(format!("nflab-io-trunc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bytes");
        std::fs::write(&path, vec![7u8; 4 * 4096]).unwrap();
        // In a child process: without the handler, SIGBUS ends the process.
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "file_window::tests::a_file_truncated_under_a_window_reads_as_changed_not_sigbus",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &path)
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).ok();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            None,
            "the child was killed by a signal: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).contains("child: read to the end"),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
