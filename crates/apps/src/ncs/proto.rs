//! The NCSbench messages (seed 000, Sec. 6.2): *sensor* (plant →
//! controller) and *actuation* (controller → plant: the voltage plus the
//! predicted backups), both with a sequence number and timestamps; *stop*
//! ends a run. Big-endian, one message per UDP datagram:
//!
//! ```text
//! sensor:    "NC" 1 | seq u32 | t_read_ns u64 | t_send_ns u64 | gyro_rate, gyro_angle, motor_angle, motor_speed f64
//! actuation: "NC" 2 | seq u32 | t_sensor_send_ns u64 | t_recv_ns u64 | t_send_ns u64 | voltage f64 | n u8 | n × backup f64
//! stop:      "NC" 3 | seq u32
//! ping:      "NC" 4 | seq u32      (plant → controller, before the first period)
//! pong:      "NC" 5 | seq u32      (the controller's answer)
//! ```
//!
//! The plant pings until a pong comes back before it starts its periods, so
//! the first periods do not measure a path that is still being set up.
//!
//! Timestamps are `CLOCK_MONOTONIC` ns: plant and controller share the
//! host's clock, whatever namespaces they run in. The actuation echoes the
//! sensor message's send time so the plant has every timestamp of a period.

use super::plant::Reading;

const MAGIC: [u8; 2] = *b"NC";

/// A message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Plant → controller.
    Sensor {
        /// Period number.
        seq: u32,
        /// When the sensors were read.
        t_read_ns: u64,
        /// When the message was handed to the socket.
        t_send_ns: u64,
        /// The readings.
        reading: Reading,
    },
    /// Controller → plant.
    Actuation {
        /// Period number of the sensor message it answers.
        seq: u32,
        /// That sensor message's `t_send_ns`.
        t_sensor_send_ns: u64,
        /// When the controller received it.
        t_recv_ns: u64,
        /// When the controller sent this.
        t_send_ns: u64,
        /// Voltage for this period.
        voltage: f64,
        /// Voltages for the next periods, should actuations not come.
        backups: Vec<f64>,
    },
    /// The run is over.
    Stop {
        /// Periods run.
        seq: u32,
    },
    /// Is the controller reachable? (before the first period)
    Ping {
        /// Attempt number.
        seq: u32,
    },
    /// Yes: the answer to the ping of `seq`.
    Pong {
        /// The ping's attempt number.
        seq: u32,
    },
}

/// Longest backup list a message carries.
pub const MAX_BACKUPS: usize = 100;

impl Message {
    /// The datagram.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&MAGIC);
        match self {
            Message::Sensor {
                seq,
                t_read_ns,
                t_send_ns,
                reading,
            } => {
                b.push(1);
                b.extend_from_slice(&seq.to_be_bytes());
                b.extend_from_slice(&t_read_ns.to_be_bytes());
                b.extend_from_slice(&t_send_ns.to_be_bytes());
                for v in [
                    reading.gyro_rate,
                    reading.gyro_angle,
                    reading.motor_angle,
                    reading.motor_speed,
                ] {
                    b.extend_from_slice(&v.to_be_bytes());
                }
            }
            Message::Actuation {
                seq,
                t_sensor_send_ns,
                t_recv_ns,
                t_send_ns,
                voltage,
                backups,
            } => {
                b.push(2);
                b.extend_from_slice(&seq.to_be_bytes());
                for t in [t_sensor_send_ns, t_recv_ns, t_send_ns] {
                    b.extend_from_slice(&t.to_be_bytes());
                }
                b.extend_from_slice(&voltage.to_be_bytes());
                let n = backups.len().min(MAX_BACKUPS);
                b.push(n as u8);
                for v in &backups[..n] {
                    b.extend_from_slice(&v.to_be_bytes());
                }
            }
            Message::Stop { seq } => {
                b.push(3);
                b.extend_from_slice(&seq.to_be_bytes());
            }
            Message::Ping { seq } => {
                b.push(4);
                b.extend_from_slice(&seq.to_be_bytes());
            }
            Message::Pong { seq } => {
                b.push(5);
                b.extend_from_slice(&seq.to_be_bytes());
            }
        }
        b
    }

    /// Parse a datagram; `None` for anything that is not one of ours.
    pub fn decode(d: &[u8]) -> Option<Message> {
        let mut r = Reader { d, at: 0 };
        if r.take(2)? != MAGIC {
            return None;
        }
        let kind = r.take(1)?[0];
        let seq = r.u32()?;
        let m = match kind {
            1 => Message::Sensor {
                seq,
                t_read_ns: r.u64()?,
                t_send_ns: r.u64()?,
                reading: Reading {
                    gyro_rate: r.f64()?,
                    gyro_angle: r.f64()?,
                    motor_angle: r.f64()?,
                    motor_speed: r.f64()?,
                },
            },
            2 => {
                let (t_sensor_send_ns, t_recv_ns, t_send_ns) = (r.u64()?, r.u64()?, r.u64()?);
                let voltage = r.f64()?;
                let n = r.take(1)?[0] as usize;
                let backups = (0..n).map(|_| r.f64()).collect::<Option<Vec<_>>>()?;
                Message::Actuation {
                    seq,
                    t_sensor_send_ns,
                    t_recv_ns,
                    t_send_ns,
                    voltage,
                    backups,
                }
            }
            3 => Message::Stop { seq },
            4 => Message::Ping { seq },
            5 => Message::Pong { seq },
            _ => return None,
        };
        (r.at == d.len()).then_some(m)
    }
}

struct Reader<'a> {
    d: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.d.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        let msgs = [
            Message::Sensor {
                seq: 7,
                t_read_ns: 1,
                t_send_ns: 2,
                reading: Reading {
                    gyro_rate: 0.5,
                    gyro_angle: -0.01,
                    motor_angle: 3.0,
                    motor_speed: -1.5,
                },
            },
            Message::Actuation {
                seq: 7,
                t_sensor_send_ns: 2,
                t_recv_ns: 3,
                t_send_ns: 4,
                voltage: -7.9,
                backups: vec![1.0; 10],
            },
            Message::Stop { seq: 1400 },
            Message::Ping { seq: 3 },
            Message::Pong { seq: 3 },
        ];
        for m in msgs {
            let d = m.encode();
            assert_eq!(Message::decode(&d), Some(m.clone()));
            assert_eq!(Message::decode(&d[..d.len() - 1]), None, "truncated");
            let mut longer = d.clone();
            longer.push(0);
            assert_eq!(Message::decode(&longer), None, "trailing bytes");
        }
        // Sensor: 3 + 4 + 2·8 + 4·8 bytes; actuation with 10 backups: 3 + 4 + 3·8 + 8 + 1 + 80.
        assert_eq!(msgs_len(0), 55);
        assert_eq!(msgs_len(1), 120);
        assert_eq!(Message::decode(b"XX\x01"), None);
    }

    fn msgs_len(i: usize) -> usize {
        let m = if i == 0 {
            Message::Sensor {
                seq: 0,
                t_read_ns: 0,
                t_send_ns: 0,
                reading: Reading::default(),
            }
        } else {
            Message::Actuation {
                seq: 0,
                t_sensor_send_ns: 0,
                t_recv_ns: 0,
                t_send_ns: 0,
                voltage: 0.0,
                backups: vec![0.0; 10],
            }
        };
        m.encode().len()
    }
}
