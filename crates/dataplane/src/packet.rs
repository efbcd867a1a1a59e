//! Packets and the per-thread packet pool.
//!
//! A [`Packet`] owns a buffer of [`PACKET_CAPACITY`] bytes taken from a
//! free list of the current thread (Snabb's `packet.allocate()`); dropping
//! it puts the buffer back (ixy.rs' `impl Drop for Packet`). A worker fills
//! the pool once before it starts ([`preallocate`]), so a steady forwarding
//! loop does not touch the heap: [`pool_allocations`] counts the buffers that
//! had to be made fresh, and a figure that keeps growing during a run means
//! packets are leaking or the pool was sized too small.

use std::cell::{Cell, RefCell};

/// Bytes one packet can hold: a 1518-byte frame plus room for the 802.1Q tag
/// and the largest 0x54BB header (130 bytes) that `extern-dispatch` pushes.
pub const PACKET_CAPACITY: usize = 2048;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static FRESH: Cell<u64> = const { Cell::new(0) };
}

/// One frame, from the destination MAC on, without FCS.
#[derive(Debug)]
pub struct Packet {
    data: Vec<u8>,
    /// When the worker received it (`CLOCK_MONOTONIC` ns); 0 if made locally.
    pub rx_ns: u64,
}

/// Take a packet of length 0 from this thread's pool.
#[inline]
pub fn allocate() -> Packet {
    let data = POOL.with(|p| p.borrow_mut().pop()).unwrap_or_else(|| {
        FRESH.with(|f| f.set(f.get() + 1));
        Vec::with_capacity(PACKET_CAPACITY)
    });
    Packet { data, rx_ns: 0 }
}

/// Fill this thread's pool up to `n` free buffers.
pub fn preallocate(n: usize) {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let missing = n.saturating_sub(p.len());
        p.reserve(missing);
        while p.len() < n {
            p.push(Vec::with_capacity(PACKET_CAPACITY));
        }
    });
}

/// Buffers this thread had to allocate because its pool was empty.
pub fn pool_allocations() -> u64 {
    FRESH.with(|f| f.get())
}

/// Free buffers in this thread's pool.
pub fn pool_free() -> usize {
    POOL.with(|p| p.borrow().len())
}

impl Packet {
    /// A packet holding a copy of `frame` (truncated to [`PACKET_CAPACITY`]).
    #[inline]
    pub fn from_slice(frame: &[u8]) -> Packet {
        let mut p = allocate();
        let n = frame.len().min(PACKET_CAPACITY);
        p.data.extend_from_slice(&frame[..n]);
        p
    }

    /// The frame bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The frame bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Frame length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True for a zero-length packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Set the length: shorter truncates, longer appends zeros (at most
    /// [`PACKET_CAPACITY`]; returns false and leaves the packet alone beyond).
    #[inline]
    pub fn set_len(&mut self, len: usize) -> bool {
        if len > PACKET_CAPACITY {
            return false;
        }
        self.data.resize(len, 0);
        true
    }

    /// Insert `bytes` at offset `at`, moving the rest back (802.1Q push).
    /// Returns false, changing nothing, when the result would not fit.
    #[inline]
    pub fn insert(&mut self, at: usize, bytes: &[u8]) -> bool {
        let old = self.data.len();
        if at > old || old + bytes.len() > PACKET_CAPACITY {
            return false;
        }
        self.data.resize(old + bytes.len(), 0);
        self.data.copy_within(at..old, at + bytes.len());
        self.data[at..at + bytes.len()].copy_from_slice(bytes);
        true
    }

    /// Remove `n` bytes at offset `at`, moving the rest forward (802.1Q pop).
    /// Returns false, changing nothing, when the range is not inside the packet.
    #[inline]
    pub fn remove(&mut self, at: usize, n: usize) -> bool {
        let old = self.data.len();
        if at.checked_add(n).is_none_or(|end| end > old) {
            return false;
        }
        self.data.copy_within(at + n..old, at);
        self.data.truncate(old - n);
        true
    }
}

impl Drop for Packet {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.data);
        if buf.capacity() >= PACKET_CAPACITY {
            buf.clear();
            // During thread teardown the pool may be gone: then the buffer is simply freed.
            let _ = POOL.try_with(|p| p.borrow_mut().push(buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_to_the_pool_and_are_reused() {
        preallocate(4);
        let before = pool_allocations();
        for _ in 0..1000 {
            let a = Packet::from_slice(&[1, 2, 3]);
            let b = allocate();
            drop((a, b));
        }
        assert_eq!(pool_allocations(), before);
        assert!(pool_free() >= 4);
    }

    #[test]
    fn insert_and_remove_are_inverse() {
        let frame: Vec<u8> = (0..60).collect();
        let mut p = Packet::from_slice(&frame);
        assert!(p.insert(12, &[0x81, 0x00, 0x00, 0x16]));
        assert_eq!(p.len(), 64);
        assert_eq!(&p.data()[12..16], &[0x81, 0x00, 0x00, 0x16]);
        assert_eq!(p.data()[16], 12);
        assert!(p.remove(12, 4));
        assert_eq!(p.data(), &frame[..]);
        assert!(!p.remove(58, 4));
        assert!(!p.insert(61, &[0]));
        assert!(!p.insert(0, &[0u8; PACKET_CAPACITY]));
        assert_eq!(p.data(), &frame[..]);
    }
}
