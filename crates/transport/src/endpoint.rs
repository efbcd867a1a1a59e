//! One end of a two-way connection: a [`Sender`] for what this end sends and a
//! [`Receiver`] for what the peer sends, on one datagram path. Feedback goes to the
//! sender, everything else to the receiver.

use crate::config::{Config, ConfigError};
use crate::receiver::Receiver;
use crate::sender::Sender;
use crate::wire::{Kind, Packet};

/// Both halves of one end.
#[derive(Debug)]
pub struct Endpoint {
    /// What this end sends.
    pub sender: Sender,
    /// What the peer sends.
    pub receiver: Receiver,
}

impl Endpoint {
    /// An endpoint with the same parameters for both halves.
    pub fn new(config: Config, now_ns: u64) -> Result<Self, ConfigError> {
        Ok(Endpoint {
            sender: Sender::new(config.clone(), now_ns)?,
            receiver: Receiver::new(config, now_ns)?,
        })
    }

    /// Take a datagram from the peer.
    pub fn handle(&mut self, datagram: &[u8], now_ns: u64) {
        let kind = Packet::new_checked(datagram).ok().and_then(|p| p.kind());
        if kind == Some(Kind::Feedback) {
            self.sender.handle(datagram, now_ns);
        } else {
            self.receiver.handle(datagram, now_ns);
        }
    }

    /// The next datagram to send: feedback first (it is small and times the peer's RTT),
    /// then what the sender has.
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<usize> {
        self.receiver
            .poll_transmit(now_ns, buf)
            .or_else(|| self.sender.poll_transmit(now_ns, buf))
    }

    /// The earliest time either half has something to do (the receive window is the
    /// application's: ask [`Receiver::next_release`] for it).
    pub fn next_timeout(&mut self, now_ns: u64) -> Option<u64> {
        match (
            self.sender.next_timeout(now_ns),
            self.receiver.next_timeout(now_ns),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
