//! A fixed-size byte ring that keeps the last N bytes of a stream (used for guest stderr).

use std::collections::VecDeque;

/// Keeps the most recent `capacity` bytes pushed into it and counts what it evicted.
#[derive(Debug)]
pub struct TailRing {
    capacity: usize,
    bytes: VecDeque<u8>,
    evicted: u64,
}

impl TailRing {
    /// A ring holding at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            bytes: VecDeque::with_capacity(capacity.min(64 * 1024)),
            evicted: 0,
        }
    }

    /// Appends `chunk`, evicting the oldest bytes beyond the capacity.
    pub fn push(&mut self, chunk: &[u8]) {
        let keep_from_chunk = chunk.len().min(self.capacity);
        let skipped = chunk.len() - keep_from_chunk;
        let overflow = (self.bytes.len() + keep_from_chunk).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(&chunk[skipped..]);
        self.evicted += (skipped + overflow) as u64;
    }

    /// The kept tail, oldest byte first.
    pub fn contents(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }

    /// How many bytes were pushed out of the ring.
    pub fn evicted_bytes(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::TailRing;

    #[test]
    fn keeps_the_last_bytes_and_counts_evictions() {
        let mut ring = TailRing::new(5);
        ring.push(b"abc");
        ring.push(b"defg");
        assert_eq!(ring.contents(), b"cdefg");
        assert_eq!(ring.evicted_bytes(), 2);
        ring.push(b"0123456789");
        assert_eq!(ring.contents(), b"56789");
        assert_eq!(ring.evicted_bytes(), 12);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut ring = TailRing::new(0);
        ring.push(b"abc");
        assert!(ring.contents().is_empty());
        assert_eq!(ring.evicted_bytes(), 3);
    }
}
