//! Experimental design: randomised complete blocks. Treatments (the relay's
//! delay distributions, the monitor's modes) take turns in blocks that hold each
//! treatment once, in an order shuffled per block, so no treatment is tied to a
//! phase of the arrival pattern or of a drifting host, and every block gives one
//! paired comparison of all of them.

use rand::seq::SliceRandom;
use rand::Rng;

/// The treatment of each unit, block by block.
#[derive(Debug, Clone)]
pub struct BlockOrder {
    block: Vec<usize>,
    next: usize,
}

impl BlockOrder {
    /// Blocks of `treatments` units (at least one).
    pub fn new(treatments: usize) -> Self {
        let treatments = treatments.max(1);
        BlockOrder {
            block: (0..treatments).collect(),
            next: treatments,
        }
    }

    /// The next unit's treatment, in `0..treatments`.
    pub fn next(&mut self, rng: &mut impl Rng) -> usize {
        if self.next == self.block.len() {
            // A one-treatment block draws nothing: a single distribution's delays
            // are the same as before arms existed.
            self.block.shuffle(rng);
            self.next = 0;
        }
        self.next += 1;
        self.block[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn every_block_takes_each_treatment_once_in_a_shuffled_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut order = BlockOrder::new(5);
        let picks: Vec<usize> = (0..5_000).map(|_| order.next(&mut rng)).collect();
        for block in picks.chunks(5) {
            let mut b = block.to_vec();
            b.sort_unstable();
            assert_eq!(b, vec![0, 1, 2, 3, 4], "{block:?}");
        }
        // Shuffled: treatment 0 is not always first (by chance 1 in 5 of the blocks).
        let first0 = picks.chunks(5).filter(|b| b[0] == 0).count();
        assert!((100..=300).contains(&first0), "{first0}");
        // One treatment: no draws, every unit treatment 0.
        let mut one = BlockOrder::new(1);
        let before = rng.clone();
        assert!((0..10).all(|_| one.next(&mut rng) == 0));
        assert_eq!(rng, before);
    }
}
