//! A read-only window of a file mapped into memory, for passes that read
//! large record files once (the analysis of TRex-fork files).
//!
//! Why: `pread` copies every byte from the page cache into a buffer — for
//! a 1.6 GB file about a quarter of the whole pass's CPU time, all of it in
//! the kernel. A mapping of the page cache's own pages costs a page-table
//! entry per page instead. Windows (not the whole file) keep the process's
//! resident set small: each is unmapped when dropped.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Bytes `offset..offset + len` of a file, mapped read-only.
pub struct FileWindow {
    ptr: *const u8,
    /// Length of the whole mapping (from the page boundary at or before `offset`).
    map_len: usize,
    /// Where the asked-for bytes start inside the mapping.
    skip: usize,
    len: usize,
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
    /// while the window lives shows the change, and one truncated below the
    /// window ends the process with SIGBUS, as for any mapped file. Use it
    /// for files that are complete (recorded, then analysed).
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
            });
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
        Ok(FileWindow {
            ptr: ptr as *const u8,
            map_len,
            skip,
            len,
        })
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
}
