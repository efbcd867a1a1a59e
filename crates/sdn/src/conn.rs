//! One OpenFlow connection over TCP: framed reads and whole-message writes.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::error::SdnError;
use crate::of13::{frame_len, Message};

/// Reads whole messages off a stream.
pub struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    /// Read from `stream`.
    pub fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buf: Vec::with_capacity(1 << 16),
        }
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
            let mut chunk = [0u8; 65536];
            let n = match self.stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
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
