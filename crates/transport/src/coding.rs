//! Block erasure coding: messages become equal-length shards, Reed-Solomon (GF(2^16),
//! `reed-solomon-simd`) makes recovery shards, and any `k` of the `k + r` shards give the
//! block back.
//!
//! A shard is the message record `deadline_ns (u64) | app_send_ns (u64) | len (u16) |
//! payload`, zero-padded to the block's shard length (the longest record, rounded up to
//! even because the code works on 16-bit symbols). The record carries what a recovered
//! message needs besides its bytes: its deadline and its m1.

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

/// Bytes a record adds to the payload.
pub const RECORD_OVERHEAD: usize = 18;

/// A message as the receiver gets it back from a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Deadline, receiver clock.
    pub deadline_ns: u64,
    /// Application send time (m1), sender clock.
    pub app_send_ns: u64,
    /// The message.
    pub payload: Vec<u8>,
}

/// Write the record of a message.
pub fn encode_record(deadline_ns: u64, app_send_ns: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_OVERHEAD + payload.len());
    out.extend_from_slice(&deadline_ns.to_be_bytes());
    out.extend_from_slice(&app_send_ns.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Read a record from a (padded) shard; `None` when the length field overruns it.
pub fn decode_record(shard: &[u8]) -> Option<Record> {
    if shard.len() < RECORD_OVERHEAD {
        return None;
    }
    let deadline_ns = u64::from_be_bytes(shard[0..8].try_into().ok()?);
    let app_send_ns = u64::from_be_bytes(shard[8..16].try_into().ok()?);
    let len = usize::from(u16::from_be_bytes([shard[16], shard[17]]));
    let payload = shard.get(RECORD_OVERHEAD..RECORD_OVERHEAD + len)?.to_vec();
    Some(Record {
        deadline_ns,
        app_send_ns,
        payload,
    })
}

/// The shard length for records of at most `longest_record` bytes.
pub fn shard_len(longest_record: usize) -> usize {
    (longest_record + 1) & !1
}

fn padded(record: &[u8], len: usize) -> Vec<u8> {
    let mut shard = record.to_vec();
    shard.resize(len, 0);
    shard
}

/// Why a block could not be coded. Only a bug or a hostile peer gets here; the caller
/// counts it and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("erasure coding failed: {0}")]
pub struct CodingError(String);

impl From<reed_solomon_simd::Error> for CodingError {
    fn from(e: reed_solomon_simd::Error) -> Self {
        CodingError(e.to_string())
    }
}

/// Make `r` recovery shards of `shard_len` bytes from the records of one block.
pub fn encode_block(
    records: &[Vec<u8>],
    r: usize,
    shard_len: usize,
) -> Result<Vec<Vec<u8>>, CodingError> {
    let mut encoder = ReedSolomonEncoder::new(records.len(), r, shard_len)?;
    for record in records {
        if record.len() > shard_len {
            return Err(CodingError("record longer than the shard".into()));
        }
        encoder.add_original_shard(padded(record, shard_len))?;
    }
    let result = encoder.encode()?;
    Ok(result.recovery_iter().map(<[u8]>::to_vec).collect())
}

/// Restore the missing records of a block of `k` messages coded with `r` recovery shards
/// of `shard_len` bytes, from the records and recovery shards at hand (by index). Returns
/// the restored records by index; needs at least `k` shards in all.
pub fn decode_block<'a>(
    k: usize,
    r: usize,
    shard_len: usize,
    originals: impl Iterator<Item = (usize, &'a [u8])>,
    recovery: impl Iterator<Item = (usize, &'a [u8])>,
) -> Result<Vec<(usize, Vec<u8>)>, CodingError> {
    let mut decoder = ReedSolomonDecoder::new(k, r, shard_len)?;
    for (index, record) in originals {
        if record.len() > shard_len {
            return Err(CodingError("record longer than the shard".into()));
        }
        decoder.add_original_shard(index, padded(record, shard_len))?;
    }
    for (index, shard) in recovery {
        decoder.add_recovery_shard(index, shard)?;
    }
    let result = decoder.decode()?;
    Ok(result
        .restored_original_iter()
        .map(|(i, s)| (i, s.to_vec()))
        .collect())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn any_k_of_k_plus_r_shards_restore_the_block() {
        let records: Vec<Vec<u8>> = (0..6u8)
            .map(|i| encode_record(1000 + u64::from(i), 7, &vec![i; 10 + usize::from(i)]))
            .collect();
        let len = shard_len(records.iter().map(Vec::len).max().unwrap_or(0));
        assert_eq!(len % 2, 0);
        let parity = encode_block(&records, 3, len).expect("encode");
        assert_eq!(parity.len(), 3);
        // Lose messages 0, 2 and 5; keep recovery shards 0, 1 and 2.
        let kept = [1usize, 3, 4];
        let restored = decode_block(
            6,
            3,
            len,
            kept.iter().map(|&i| (i, records[i].as_slice())),
            parity.iter().enumerate().map(|(i, s)| (i, s.as_slice())),
        )
        .expect("decode");
        let mut got: Vec<usize> = restored.iter().map(|(i, _)| *i).collect();
        got.sort_unstable();
        assert_eq!(got, vec![0, 2, 5]);
        for (i, shard) in restored {
            let rec = decode_record(&shard).expect("record");
            assert_eq!(rec.deadline_ns, 1000 + i as u64);
            assert_eq!(rec.app_send_ns, 7);
            assert_eq!(rec.payload, vec![i as u8; 10 + i]);
        }
    }

    #[test]
    fn too_few_shards_is_an_error_not_a_panic() {
        let records = vec![encode_record(1, 2, b"ab"), encode_record(3, 4, b"cd")];
        let len = shard_len(records[0].len());
        let parity = encode_block(&records, 1, len).expect("encode");
        let r = decode_block(
            2,
            1,
            len,
            std::iter::empty(),
            parity.iter().enumerate().map(|(i, s)| (i, s.as_slice())),
        );
        assert!(r.is_err());
    }

    #[test]
    fn a_short_record_is_refused() {
        assert_eq!(decode_record(&[0u8; 17]), None);
        let mut rec = encode_record(1, 2, b"abc");
        rec[17] = 200; // claims 200 payload bytes
        assert_eq!(decode_record(&rec), None);
    }
}
