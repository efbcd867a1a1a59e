//! Links: bounded rings of packets between two apps (Snabb's `core/link`).
//!
//! Transmitting into a full link drops the packet and counts it; it never
//! blocks, because a blocked data plane accumulates latency that the
//! measurement would then blame on the function under test ("better to drop
//! them, otherwise we accumulate latency", ixy).

use std::collections::VecDeque;

use serde::Serialize;

use crate::packet::Packet;

/// Counters of one link since it was made.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct LinkCounters {
    /// Packets accepted.
    pub tx_packets: u64,
    /// Bytes accepted.
    pub tx_bytes: u64,
    /// Packets dropped because the ring was full.
    pub tx_drops: u64,
    /// Packets taken out.
    pub rx_packets: u64,
}

/// A bounded ring between two apps.
#[derive(Debug)]
pub struct Link {
    ring: VecDeque<Packet>,
    capacity: usize,
    /// What went through.
    pub counters: LinkCounters,
}

impl Link {
    /// A link that holds at most `capacity` packets (at least 1). The ring is
    /// allocated here, once.
    pub fn new(capacity: usize) -> Link {
        let capacity = capacity.max(1);
        Link {
            ring: VecDeque::with_capacity(capacity),
            capacity,
            counters: LinkCounters::default(),
        }
    }

    /// Put a packet in, or drop (back to the pool) and count it when full.
    #[inline]
    pub fn transmit(&mut self, p: Packet) -> bool {
        if self.ring.len() >= self.capacity {
            self.counters.tx_drops += 1;
            return false;
        }
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += p.len() as u64;
        self.ring.push_back(p);
        true
    }

    /// Take the oldest packet out.
    #[inline]
    pub fn receive(&mut self) -> Option<Packet> {
        let p = self.ring.pop_front();
        self.counters.rx_packets += p.is_some() as u64;
        p
    }

    /// The oldest packet, left in place.
    #[inline]
    pub fn front(&self) -> Option<&Packet> {
        self.ring.front()
    }

    /// Packets waiting.
    #[inline]
    pub fn nreadable(&self) -> usize {
        self.ring.len()
    }

    /// Free slots.
    #[inline]
    pub fn room(&self) -> usize {
        self.capacity - self.ring.len()
    }

    /// No packet waiting.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// No room left.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.ring.len() >= self.capacity
    }

    /// Maximum number of packets.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_link_drops_and_counts() {
        let mut l = Link::new(2);
        assert!(l.transmit(Packet::from_slice(&[1; 60])));
        assert!(l.transmit(Packet::from_slice(&[2; 60])));
        assert!(l.is_full());
        assert!(!l.transmit(Packet::from_slice(&[3; 60])));
        assert_eq!((l.counters.tx_packets, l.counters.tx_drops), (2, 1));
        assert_eq!(l.counters.tx_bytes, 120);
        assert_eq!(l.receive().unwrap().data()[0], 1);
        assert_eq!(l.room(), 1);
        assert_eq!(l.counters.rx_packets, 1);
    }
}
