//! One OpenFlow connection over TCP: framed reads and whole-message writes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use crate::error::SdnError;
use crate::of13::{frame_len, Message};

/// Reads whole messages off a stream.
pub struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Every read ends by this instant, and the error says this sentence.
    deadline: Option<(Instant, String)>,
}

impl Reader {
    /// Read from `stream`.
    pub fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buf: Vec::with_capacity(1 << 16),
            deadline: None,
        }
    }

    /// From now on every read, also each of the many within one message,
    /// waits only for the time left until `deadline` (the stream's read
    /// timeout); once it has passed, reading fails with `why`. A peer that
    /// trickles bytes cannot keep reads going past it.
    pub fn set_deadline(&mut self, deadline: Instant, why: impl Into<String>) {
        self.deadline = Some((deadline, why.into()));
    }

    /// No deadline any more; the stream's read timeout is left as it is.
    pub fn clear_deadline(&mut self) {
        self.deadline = None;
    }

    /// Before a read: the stream's timeout set to the time left, or the
    /// deadline's error once it is over.
    fn time_left(&self) -> Result<(), SdnError> {
        let Some((deadline, why)) = &self.deadline else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SdnError::Protocol(why.clone()));
        }
        self.stream
            .set_read_timeout(Some(left))
            .map_err(|e| SdnError::io("reading an OpenFlow connection", e))
    }

    /// The next message and its raw bytes; `None` at a clean end of stream.
    pub fn next_message(&mut self) -> Result<Option<(Message, Vec<u8>)>, SdnError> {
        let Some(raw) = self.next_raw()? else {
            return Ok(None);
        };
        let msg = Message::decode(&raw).map_err(|e| SdnError::Protocol(e.to_string()))?;
        Ok(Some((msg, raw)))
    }

    /// The next whole message's bytes, any OpenFlow version (the header is
    /// the same in all); `None` at a clean end of stream.
    pub fn next_raw(&mut self) -> Result<Option<Vec<u8>>, SdnError> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(len)) => {
                    return Ok(Some(self.buf.drain(..len).collect()));
                }
                Ok(None) => {}
                Err(e) => return Err(SdnError::Protocol(e.to_string())),
            }
            self.time_left()?;
            let mut chunk = [0u8; 65536];
            let n = match self.stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // The time left is up: the next turn says so.
                Err(e)
                    if self.deadline.is_some()
                        && matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                {
                    continue
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
                Err(e) => return Err(SdnError::io("reading an OpenFlow connection", e)),
            };
            if n == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next message, failing at the end of the stream.
    pub fn expect(&mut self, what: &str) -> Result<(Message, Vec<u8>), SdnError> {
        self.next_message()?.ok_or_else(|| {
            SdnError::Protocol(format!("the connection closed while waiting for {what}"))
        })
    }
}

/// Write one message.
pub fn send(stream: &mut TcpStream, msg: &Message) -> Result<(), SdnError> {
    send_raw(stream, &msg.encode())
}

/// Write raw bytes (one or more whole messages).
pub fn send_raw(stream: &mut TcpStream, bytes: &[u8]) -> Result<(), SdnError> {
    stream
        .write_all(bytes)
        .map_err(|e| SdnError::io("writing an OpenFlow connection", e))
}
