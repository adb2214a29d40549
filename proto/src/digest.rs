//! The fingerprint a replica reports of what it holds (protocol §8).
//!
//! FNV-1a, 64 bits, over lines sorted in byte order, each followed by `\n`.
//! A table's lines are its keys; a setting's are `key\tversion`; a wish's
//! are `key\tanswered\toutcome`, both empty while it is unanswered.

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// A fingerprint being computed: feed it lines in sorted order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint(OFFSET_BASIS)
    }
}

impl Fingerprint {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one line and the newline that ends it.
    pub fn add_line(&mut self, line: &str) {
        for byte in line.bytes().chain(std::iter::once(b'\n')) {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    pub fn value(self) -> u64 {
        self.0
    }
}

/// The fingerprint of these lines, sorted here in byte order first.
pub fn fingerprint<I, S>(lines: I) -> u64
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut sorted: Vec<S> = lines.into_iter().collect();
    sorted.sort_by(|a, b| a.as_ref().as_bytes().cmp(b.as_ref().as_bytes()));
    let mut f = Fingerprint::new();
    for line in &sorted {
        f.add_line(line.as_ref());
    }
    f.value()
}

/// A setting's line: its key, a tab, its version as text.
pub fn setting_line(key: &str, version: &str) -> String {
    format!("{key}\t{version}")
}

/// A wish's line: its key, the version it answered and the outcome, each
/// empty for a wish not answered.
pub fn wish_line(key: &str, answered: Option<(&str, &str)>) -> String {
    let (version, outcome) = answered.unwrap_or(("", ""));
    format!("{key}\t{version}\t{outcome}")
}

#[cfg(test)]
mod tests {
    use super::*;

    // The five vectors of protocol §8.

    #[test]
    fn no_keys() {
        assert_eq!(fingerprint(Vec::<&str>::new()), 0xcbf29ce484222325);
    }

    #[test]
    fn the_single_key_a() {
        assert_eq!(fingerprint(["a"]), 0x089bdc07b544e7b2);
    }

    #[test]
    fn the_setting_line_a_at_version_1() {
        assert_eq!(fingerprint([setting_line("a", "1")]), 0x6f375e81eb6a6700);
    }

    #[test]
    fn the_unanswered_wish_w() {
        assert_eq!(fingerprint([wish_line("w", None)]), 0xba0c6af6f14e26d2);
    }

    #[test]
    fn the_wish_w_applied_at_version_7() {
        assert_eq!(
            fingerprint([wish_line("w", Some(("7", "applied")))]),
            0x2e00e679fcb6ffe0
        );
    }

    #[test]
    fn keys_are_sorted_in_byte_order_before_hashing() {
        let mut by_hand = Fingerprint::new();
        for key in ["B", "a", "b"] {
            by_hand.add_line(key);
        }
        assert_eq!(fingerprint(["b", "a", "B"]), by_hand.value());
        assert_ne!(fingerprint(["a", "b"]), fingerprint(["ab"]));
    }
}
