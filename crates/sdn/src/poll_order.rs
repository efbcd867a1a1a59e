//! The order in which ovs-vswitchd's main thread polls the ports of the
//! userspace datapath, and a FLOWer cycle laid out against it.
//!
//! Ports of type `system` (packet sockets) are not polled by a PMD thread but
//! by the main thread, which walks the datapath's port hash map once per
//! iteration and calls `recvmmsg` on every port in the map's order. A frame
//! sent out of one cable end is in its peer's socket at once, but is read
//! only when the walk reaches the peer; on this kind of host a poll costs
//! several µs, so a hop costs as many polls as there are ports between the
//! two in the walk. With cables in port-number order that count is whatever
//! the hash makes it, and latency is not linear in hops. [`cycle_against`]
//! orders the cycle so that every hop's receiving port sits a little
//! *before* the previous one in the walk: every hop then waits for almost
//! exactly one whole round.
//!
//! The order is a pure function of the datapath port numbers: OvS inserts
//! each port into an `hmap` keyed by `hash_int(port_no, 0)` (lib/hash.h,
//! the portable murmur3 path that distribution builds use) and iterates it
//! bucket by bucket. [`walk`] reproduces that; a test checks it against the
//! `recvmmsg` calls of a running ovs-vswitchd seen by strace.

/// OvS's `hash_int(x, basis)` = `hash_2words(x, basis)` on the murmur3 path.
pub fn hash_int(x: u32, basis: u32) -> u32 {
    mhash_finish(mhash_add(mhash_add(x, 0), basis) ^ 8)
}

fn mhash_add(hash: u32, data: u32) -> u32 {
    let mixed = if data == 0 {
        hash // murmur3 as OvS has it: a zero word leaves the hash alone
    } else {
        let d = data.wrapping_mul(0xcc9e_2d51).rotate_left(15);
        hash ^ d.wrapping_mul(0x1b87_3593)
    };
    mixed
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

fn mhash_finish(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// An `hmap`'s bucket mask for `n` nodes after it grows (lib/hmap.c).
fn grown_mask(n: usize) -> usize {
    let mut mask = n / 2;
    for shift in [1, 2, 4, 8, 16, 32] {
        mask |= mask >> shift;
    }
    mask | ((mask & 1) << 1) // at least four buckets once it has any
}

/// The order in which an `hmap` that had `port_nos` inserted in this order
/// iterates them: each insert goes to the head of its bucket, and the map
/// grows (rehashing old buckets in order, again to the heads) once it holds
/// more than two nodes per bucket.
pub fn walk(port_nos: &[u32]) -> Vec<u32> {
    let mut mask = 0usize;
    let mut buckets: Vec<Vec<(u32, u32)>> = vec![Vec::new()];
    for (n, &port) in port_nos.iter().enumerate() {
        let hash = hash_int(port, 0);
        buckets[hash as usize & mask].insert(0, (port, hash));
        let n = n + 1;
        if n / 2 > mask && grown_mask(n) > mask {
            mask = grown_mask(n);
            let mut grown = vec![Vec::new(); mask + 1];
            for (port, hash) in buckets.into_iter().flatten() {
                grown[hash as usize & mask].insert(0, (port, hash));
            }
            buckets = grown;
        }
    }
    buckets.into_iter().flatten().map(|(p, _)| p).collect()
}

/// Where `port` is in `walk` (0 for a port not in it).
fn place_in(walk: &[u32], port: u32) -> usize {
    walk.iter().position(|&q| q == port).unwrap_or(0)
}

/// One cable of the cycle: the frame leaves on `out` and is read back on
/// `back` (the other end of the same veth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leg {
    /// Index of the cable (`h<i>a`/`h<i>b`).
    pub cable: usize,
    /// Datapath port the frame leaves on.
    pub out: u32,
    /// Datapath port the frame comes back on.
    pub back: u32,
}

/// Lay `cables` (the datapath port numbers of each veth's two ends) out as a
/// cycle starting from the port `entry`, against the main thread's `walk`:
/// leg i's `back` port is `d_i` places before `entry` in the walk, with
/// `d_1 < d_2 < …` spread as evenly as the cables allow, so each hop costs
/// one round minus a few polls. Using the first k legs gives k hops.
///
/// Each cable offers two ends; the spread is improved by flipping one
/// cable's ends at a time while the squared distance of the sorted
/// distances from an even spacing shrinks (deterministic, a few passes).
pub fn cycle_against(walk: &[u32], entry: u32, cables: &[(u32, u32)]) -> Vec<Leg> {
    let n = walk.len();
    let place = |p: u32| place_in(walk, p);
    let before_entry = |p: u32| (place(entry) + n - place(p)) % n;
    let mut back_is_second: Vec<bool> = cables
        .iter()
        .map(|&(a, b)| before_entry(b) <= before_entry(a))
        .collect();
    let spread = |choice: &[bool]| -> f64 {
        let mut d: Vec<usize> = cables
            .iter()
            .zip(choice)
            .map(|(&(a, b), &second)| before_entry(if second { b } else { a }))
            .collect();
        d.sort_unstable();
        let step = n as f64 / (cables.len() + 1) as f64;
        d.iter()
            .enumerate()
            .map(|(i, &x)| (x as f64 - step * (i + 1) as f64).powi(2))
            .sum()
    };
    let mut best = spread(&back_is_second);
    let mut improved = true;
    while improved {
        improved = false;
        for i in 0..cables.len() {
            back_is_second[i] = !back_is_second[i];
            let s = spread(&back_is_second);
            if s < best {
                best = s;
                improved = true;
            } else {
                back_is_second[i] = !back_is_second[i];
            }
        }
    }
    let mut legs: Vec<Leg> = cables
        .iter()
        .zip(&back_is_second)
        .enumerate()
        .map(|(cable, (&(a, b), &second))| {
            let (out, back) = if second { (a, b) } else { (b, a) };
            Leg { cable, out, back }
        })
        .collect();
    legs.sort_by_key(|l| before_entry(l.back));
    legs
}

/// How many port polls each of the first k hops of `legs` waits, summed,
/// for k = 1…legs.len() (a hop from port p to port q waits for the polls
/// from p's place up to q's in the walk, a whole round if q is p).
pub fn polls_per_prefix(walk: &[u32], entry: u32, legs: &[Leg]) -> Vec<usize> {
    let n = walk.len();
    let place = |p: u32| place_in(walk, p);
    let mut at = place(entry);
    let mut total = 0;
    legs.iter()
        .map(|l| {
            let next = place(l.back);
            total += match (next + n - at) % n {
                0 => n,
                d => d,
            };
            at = next;
            total
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk of a 16-cable FLOWer bridge as strace showed ovs-vswitchd
    /// 3.1.0 polling it (datapath ports 0 = ovs-netdev and 1 = br0 are taps,
    /// read with read(2), so strace's recvmmsg list lacks them; the list
    /// starts where the trace began).
    #[test]
    fn the_walk_matches_a_traced_ovs_vswitchd() {
        let traced = [
            19, 3, 10, 8, 27, 25, 35, 18, 23, 24, 13, 9, 5, 12, 33, 34, 6, 21, 2, 29, 26, 14, 30,
            17, 28, 31, 11, 32, 16, 22, 15, 20, 4, 7,
        ];
        let ports: Vec<u32> = (0..36).collect();
        let w: Vec<u32> = walk(&ports).into_iter().filter(|&p| p > 1).collect();
        let start = w.iter().position(|&p| p == 19).unwrap();
        let rotated: Vec<u32> = w[start..].iter().chain(&w[..start]).copied().collect();
        assert_eq!(rotated, traced);
    }

    #[test]
    fn the_hash_mixes_like_murmur3_with_a_zero_word_skipped() {
        // By hand: hash_add(x, 0) only rotates and scales, so two zero
        // words on 0 give a fixed value before the finish.
        let h0 = 0u32
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64);
        let h1 = h0.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
        assert_eq!(hash_int(0, 0), mhash_finish(h1 ^ 8));
        assert_ne!(hash_int(1, 0), hash_int(2, 0));
    }

    #[test]
    fn the_cycle_against_the_walk_costs_nearly_a_round_per_hop() {
        let ports: Vec<u32> = (0..36).collect();
        let w = walk(&ports);
        let cables: Vec<(u32, u32)> = (0..16).map(|i| (4 + 2 * i, 5 + 2 * i)).collect();
        let legs = cycle_against(&w, 2, &cables);
        // Every cable once, each leg's ends one veth.
        let mut used: Vec<usize> = legs.iter().map(|l| l.cable).collect();
        used.sort_unstable();
        assert_eq!(used, (0..16).collect::<Vec<_>>());
        for l in &legs {
            let (a, b) = cables[l.cable];
            assert!((l.out, l.back) == (a, b) || (l.out, l.back) == (b, a));
        }
        let polls = polls_per_prefix(&w, 2, &legs);
        let per_hop: Vec<usize> = std::iter::once(polls[0])
            .chain(polls.windows(2).map(|p| p[1] - p[0]))
            .collect();
        // A round is 36 polls; going back one to four places each time.
        assert!(
            per_hop.iter().all(|&p| (32..=35).contains(&p)),
            "{per_hop:?}"
        );
        // Port-number order, for contrast, spreads from a few polls to a round.
        let naive: Vec<Leg> = cables
            .iter()
            .enumerate()
            .map(|(cable, &(a, b))| Leg {
                cable,
                out: a,
                back: b,
            })
            .collect();
        let p = polls_per_prefix(&w, 2, &naive);
        let first = p[0];
        let spread = p.windows(2).map(|w| w[1] - w[0]).chain([first]);
        let (lo, hi) = spread.fold((usize::MAX, 0), |(lo, hi), d| (lo.min(d), hi.max(d)));
        assert!(hi - lo > 20, "{lo}..{hi}");
    }
}
