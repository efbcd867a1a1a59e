//! The internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! A checksum is the one's complement of the one's complement sum of the data taken as
//! big-endian 16-bit words, an odd trailing byte padded with a zero byte. Sums are
//! accumulated in a `u64` and folded once at the end; no 16-bit carry handling per word.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Add the big-endian 16-bit words of `data` to `acc` without folding. An odd trailing
/// byte counts as the high byte of a word whose low byte is zero (RFC 1071 §4.1).
#[inline]
pub fn accumulate(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Fold a wide sum into 16 bits with end-around carry. Returns 0 only for a zero sum.
#[inline]
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The folded one's complement sum of `data`, not complemented.
#[inline]
pub fn data_sum(data: &[u8]) -> u16 {
    fold(accumulate(0, data))
}

/// The internet checksum of `data` (RFC 1071): the complement of [`data_sum`].
///
/// Over a buffer whose checksum field is already filled in, the result is 0 when the
/// checksum is right.
#[inline]
pub fn internet_checksum(data: &[u8]) -> u16 {
    !data_sum(data)
}

/// Folded sum of the IPv4 pseudo-header (RFC 768): addresses, zero, protocol, length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let mut acc = accumulate(0, &src.octets());
    acc = accumulate(acc, &dst.octets());
    acc += u64::from(protocol);
    acc += u64::from(length);
    fold(acc)
}

/// Folded sum of the IPv6 pseudo-header (RFC 8200 §8.1): addresses, upper-layer length
/// (32 bits), three zero bytes, next header.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let mut acc = accumulate(0, &src.octets());
    acc = accumulate(acc, &dst.octets());
    acc = accumulate(acc, &length.to_be_bytes());
    acc += u64::from(next_header);
    fold(acc)
}

/// Folded pseudo-header sum for either family. Addresses of different families have no
/// pseudo-header; the result is then meaningless but the call does not panic.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, protocol: u8, length: u32) -> u16 {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => pseudo_header_v4(s, d, protocol, length as u16),
        (IpAddr::V6(s), IpAddr::V6(d)) => pseudo_header_v6(s, d, protocol, length),
        (s, d) => {
            let mut acc = u64::from(protocol) + u64::from(length);
            acc = accumulate(acc, &to_v6(s).octets());
            acc = accumulate(acc, &to_v6(d).octets());
            fold(acc)
        }
    }
}

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Update checksum `old_csum` after one 16-bit word of the covered data changed from
/// `old_word` to `new_word`: `HC' = ~(~HC + ~m + m')`, RFC 1624 eqn. 3.
///
/// Eqn. 3 (not eqn. 2 of RFC 1141) is used because it gives the same result as a full
/// recomputation, including never producing 0xFFFF for non-zero data.
#[inline]
pub fn incremental_update(old_csum: u16, old_word: u16, new_word: u16) -> u16 {
    !fold(u64::from(!old_csum) + u64::from(!old_word) + u64::from(new_word))
}

/// [`incremental_update`] for a run of bytes that changed from `old` to `new`.
///
/// The run must start at an even offset of the checksummed data, so that its bytes pair
/// into the same 16-bit words as in the full sum.
///
/// # Panics
///
/// If `old` and `new` have different lengths.
#[inline]
pub fn incremental_update_bytes(old_csum: u16, old: &[u8], new: &[u8]) -> u16 {
    assert_eq!(
        old.len(),
        new.len(),
        "incremental_update_bytes: length mismatch"
    );
    // ~m summed over words equals 0xFFFF * n - sum(m); adding the sums separately keeps
    // everything in u64 without negative intermediates.
    let n_words = old.len().div_ceil(2) as u64;
    let old_sum = accumulate(0, old);
    let new_sum = accumulate(0, new);
    let acc = u64::from(!old_csum) + 0xffff * n_words - old_sum + new_sum;
    !fold(acc)
}

#[cfg(test)]
mod test {
    use super::*;

    // RFC 1071 §3 worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data_sum(&data), 0xddf2);
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_low_byte() {
        assert_eq!(data_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn fold_end_around_carry() {
        assert_eq!(fold(0x1_fffe), 0xffff);
        assert_eq!(fold(0xffff + 0x0001), 0x0001);
        assert_eq!(fold(0), 0);
    }

    #[test]
    fn incremental_matches_recompute() {
        let mut data = [0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11];
        let before = internet_checksum(&data);
        let old = [data[8], data[9]];
        data[8] = 0x3f; // TTL decrement, as a router does
        let after = internet_checksum(&data);
        let w = |b: [u8; 2]| u16::from_be_bytes(b);
        assert_eq!(
            incremental_update(before, w(old), w([data[8], data[9]])),
            after
        );
        assert_eq!(
            incremental_update_bytes(before, &old, &[data[8], data[9]]),
            after
        );
    }
}
