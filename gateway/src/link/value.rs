//! The byte encoding of the values a frame is made of (aweft's
//! `spec/format.md`, section 6): CBOR's layout with one spelling for every
//! value. Null, booleans, integers within ±2^53, finite float64s that are
//! not whole numbers in that range, byte strings, UTF-8 text and arrays;
//! no maps, no tags, no indefinite lengths, every head as short as it can
//! be, nesting at most eight levels deep.
//!
//! Decoding refuses anything an encoder would not have written, and names
//! why with the format's own vocabulary (section 7): two implementations
//! must agree on the reason as well as on the refusal.

/// 2^53: the largest magnitude a double holds every integer up to.
pub const LARGEST_EXACT: u64 = 1 << 53;

/// How deep arrays may nest before a decoder refuses (section 6.1).
pub const DEEPEST: usize = 8;

/// One value of the format.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// Within ±2^53.
    Int(i64),
    /// Finite, and not a whole number within ±2^53.
    Float(f64),
    Bytes(Vec<u8>),
    Text(String),
    Array(Vec<Value>),
}

/// Why bytes are not one value of the format: each variant is a reason of
/// the format's section 7, and `reason()` is its name there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Undecodable {
    #[error("a head uses reserved additional information (28 to 30)")]
    MalformedHead,
    #[error("a length is indefinite instead of stated")]
    IndefiniteLength,
    #[error("a head is wider than its value needs")]
    NonCanonicalInteger,
    #[error("the bytes end before the value they promise")]
    Truncated,
    #[error("bytes follow the one value")]
    TrailingBytes,
    #[error("arrays nest past eight levels")]
    NestingTooDeep,
    #[error("an integer is outside plus or minus 2^53")]
    IntegerOutOfRange,
    #[error("a float carries a value the integer encoding must carry")]
    NonCanonicalFloat,
    #[error("a float is an infinity or not a number")]
    NonFiniteFloat,
    #[error("text is not well formed UTF-8")]
    InvalidUtf8,
    #[error("a major type outside the format (a map or a tag)")]
    UnsupportedMajor,
    #[error("a simple value other than false, true or null, or a float narrower than 64 bits")]
    UnsupportedSimple,
}

impl Undecodable {
    /// The reason's name in aweft's vocabulary.
    pub fn reason(self) -> &'static str {
        match self {
            Undecodable::MalformedHead => "malformed-head",
            Undecodable::IndefiniteLength => "indefinite-length",
            Undecodable::NonCanonicalInteger => "non-canonical-integer",
            Undecodable::Truncated => "truncated",
            Undecodable::TrailingBytes => "trailing-bytes",
            Undecodable::NestingTooDeep => "nesting-too-deep",
            Undecodable::IntegerOutOfRange => "integer-out-of-range",
            Undecodable::NonCanonicalFloat => "non-canonical-float",
            Undecodable::NonFiniteFloat => "non-finite-float",
            Undecodable::InvalidUtf8 => "invalid-utf8",
            Undecodable::UnsupportedMajor => "unsupported-major",
            Undecodable::UnsupportedSimple => "unsupported-simple",
        }
    }
}

const UNSIGNED: u8 = 0;
const NEGATIVE: u8 = 1;
const BYTES: u8 = 2;
const TEXT: u8 = 3;
const ARRAY: u8 = 4;
const SIMPLE: u8 = 7;

const FALSE: u8 = 0xf4;
const TRUE: u8 = 0xf5;
const NULL: u8 = 0xf6;
const FLOAT64: u8 = 0xfb;

impl Value {
    /// A number as the format writes it: an integer when it is whole and
    /// within ±2^53 (negative zero is zero), a float otherwise. `None` for
    /// NaN and the infinities, which have no encoding.
    pub fn number(n: f64) -> Option<Value> {
        if !n.is_finite() {
            return None;
        }
        if is_exact_whole(n) {
            return Some(Value::Int(n as i64));
        }
        Some(Value::Float(n))
    }

    /// The value's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.push(NULL),
            Value::Bool(false) => out.push(FALSE),
            Value::Bool(true) => out.push(TRUE),
            Value::Int(n) if *n >= 0 => head(out, UNSIGNED, *n as u64),
            Value::Int(n) => head(out, NEGATIVE, (-1 - *n) as u64),
            Value::Float(f) => match Value::number(*f) {
                Some(Value::Int(n)) => Value::Int(n).write(out),
                _ => {
                    out.push(FLOAT64);
                    out.extend_from_slice(&f.to_be_bytes());
                }
            },
            Value::Bytes(b) => {
                head(out, BYTES, b.len() as u64);
                out.extend_from_slice(b);
            }
            Value::Text(t) => {
                head(out, TEXT, t.len() as u64);
                out.extend_from_slice(t.as_bytes());
            }
            Value::Array(items) => {
                head(out, ARRAY, items.len() as u64);
                for item in items {
                    item.write(out);
                }
            }
        }
    }

    /// Reads exactly one value from `bytes`, refusing anything an encoder
    /// would not have written.
    pub fn decode(bytes: &[u8]) -> Result<Value, Undecodable> {
        let mut reader = Reader { bytes, at: 0 };
        let value = reader.value(1)?;
        if reader.at != bytes.len() {
            return Err(Undecodable::TrailingBytes);
        }
        Ok(value)
    }
}

/// Whether `n` is a whole number the integer form must carry.
fn is_exact_whole(n: f64) -> bool {
    n.fract() == 0.0 && n.abs() <= LARGEST_EXACT as f64
}

/// Writes a head in the shortest form that holds `argument`.
fn head(out: &mut Vec<u8>, major: u8, argument: u64) {
    let major = major << 5;
    if argument < 24 {
        out.push(major | argument as u8);
    } else if argument <= u8::MAX as u64 {
        out.extend_from_slice(&[major | 24, argument as u8]);
    } else if argument <= u16::MAX as u64 {
        out.push(major | 25);
        out.extend_from_slice(&(argument as u16).to_be_bytes());
    } else if argument <= u32::MAX as u64 {
        out.push(major | 26);
        out.extend_from_slice(&(argument as u32).to_be_bytes());
    } else {
        out.push(major | 27);
        out.extend_from_slice(&argument.to_be_bytes());
    }
}

struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Undecodable> {
        let end = self.at.checked_add(n).ok_or(Undecodable::Truncated)?;
        let taken = self.bytes.get(self.at..end).ok_or(Undecodable::Truncated)?;
        self.at = end;
        Ok(taken)
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn value(&mut self, depth: usize) -> Result<Value, Undecodable> {
        let initial = self.take(1)?[0];
        let (major, info) = (initial >> 5, initial & 0x1f);
        match major {
            5 | 6 => return Err(Undecodable::UnsupportedMajor),
            SIMPLE => return self.simple(initial),
            _ => {}
        }
        let argument = self.argument(info)?;
        match major {
            UNSIGNED if argument > LARGEST_EXACT => Err(Undecodable::IntegerOutOfRange),
            UNSIGNED => Ok(Value::Int(argument as i64)),
            // -1 - argument stays within -2^53 only for arguments below 2^53;
            // judged before any arithmetic, so a large one cannot wrap.
            NEGATIVE if argument >= LARGEST_EXACT => Err(Undecodable::IntegerOutOfRange),
            NEGATIVE => Ok(Value::Int(-1 - argument as i64)),
            BYTES => Ok(Value::Bytes(self.stated(argument)?.to_vec())),
            TEXT => {
                let raw = self.stated(argument)?.to_vec();
                String::from_utf8(raw)
                    .map(Value::Text)
                    .map_err(|_| Undecodable::InvalidUtf8)
            }
            _ => self.array(argument, depth),
        }
    }

    /// The bytes a string's head says it holds.
    fn stated(&mut self, length: u64) -> Result<&[u8], Undecodable> {
        let length = usize::try_from(length).map_err(|_| Undecodable::Truncated)?;
        self.take(length)
    }

    fn array(&mut self, length: u64, depth: usize) -> Result<Value, Undecodable> {
        if depth > DEEPEST {
            return Err(Undecodable::NestingTooDeep);
        }
        // Every item takes a byte at least: a length past what is left is
        // refused before anything is allocated for it.
        if length > self.left() as u64 {
            return Err(Undecodable::Truncated);
        }
        let mut items = Vec::with_capacity(length as usize);
        for _ in 0..length {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn simple(&mut self, initial: u8) -> Result<Value, Undecodable> {
        match initial {
            FALSE => Ok(Value::Bool(false)),
            TRUE => Ok(Value::Bool(true)),
            NULL => Ok(Value::Null),
            FLOAT64 => {
                let raw: [u8; 8] = self.take(8)?.try_into().expect("eight bytes taken");
                let f = f64::from_be_bytes(raw);
                if !f.is_finite() {
                    Err(Undecodable::NonFiniteFloat)
                } else if is_exact_whole(f) {
                    Err(Undecodable::NonCanonicalFloat)
                } else {
                    Ok(Value::Float(f))
                }
            }
            0xfc..=0xfe => Err(Undecodable::MalformedHead),
            0xff => Err(Undecodable::IndefiniteLength),
            _ => Err(Undecodable::UnsupportedSimple),
        }
    }

    /// The argument of a head of major 0 to 4, refusing a reserved, an
    /// indefinite or a wider than needed one.
    fn argument(&mut self, info: u8) -> Result<u64, Undecodable> {
        let (argument, narrowest) = match info {
            0..=23 => return Ok(info as u64),
            24 => (self.take(1)?[0] as u64, 24),
            25 => (u16::from_be_bytes(self.fixed()?) as u64, 0x100),
            26 => (u32::from_be_bytes(self.fixed()?) as u64, 0x1_0000),
            27 => (u64::from_be_bytes(self.fixed()?), 0x1_0000_0000),
            28..=30 => return Err(Undecodable::MalformedHead),
            _ => return Err(Undecodable::IndefiniteLength),
        };
        if argument < narrowest {
            return Err(Undecodable::NonCanonicalInteger);
        }
        Ok(argument)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], Undecodable> {
        Ok(self.take(N)?.try_into().expect("N bytes taken"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn every_head_is_written_in_its_shortest_form() {
        let cases: [(i64, &str); 8] = [
            (0, "00"),
            (23, "17"),
            (24, "1818"),
            (255, "18ff"),
            (256, "190100"),
            (65_536, "1a00010000"),
            (-1, "20"),
            (1 << 53, "1b0020000000000000"),
        ];
        for (n, bytes) in cases {
            assert_eq!(hex(&Value::Int(n).encode()), bytes, "{n}");
            assert_eq!(Value::decode(&unhex(bytes)), Ok(Value::Int(n)));
        }
    }

    #[test]
    fn both_ends_of_the_integer_range_are_integers_and_one_past_is_refused() {
        assert_eq!(
            Value::decode(&unhex("3b001fffffffffffff")),
            Ok(Value::Int(-(1 << 53)))
        );
        assert_eq!(
            Value::decode(&unhex("1b0020000000000001")),
            Err(Undecodable::IntegerOutOfRange)
        );
        assert_eq!(
            Value::decode(&unhex("3b0020000000000000")),
            Err(Undecodable::IntegerOutOfRange)
        );
        assert_eq!(
            Value::decode(&unhex("3bffffffffffffffff")),
            Err(Undecodable::IntegerOutOfRange)
        );
    }

    #[test]
    fn a_whole_number_is_an_integer_and_negative_zero_is_zero() {
        assert_eq!(Value::number(2.0), Some(Value::Int(2)));
        assert_eq!(Value::number(-0.0), Some(Value::Int(0)));
        assert_eq!(Value::number(f64::NAN), None);
        assert_eq!(hex(&Value::Float(0.5).encode()), "fb3fe0000000000000");
        assert_eq!(
            Value::decode(&unhex("fb4000000000000000")),
            Err(Undecodable::NonCanonicalFloat)
        );
        assert_eq!(
            Value::decode(&unhex("fb7ff0000000000000")),
            Err(Undecodable::NonFiniteFloat)
        );
    }

    #[test]
    fn each_decoding_rule_is_refused_by_its_reason() {
        let cases = [
            ("1817", Undecodable::NonCanonicalInteger),
            ("9f01ff", Undecodable::IndefiniteLength),
            ("a0", Undecodable::UnsupportedMajor),
            ("c100", Undecodable::UnsupportedMajor),
            ("f7", Undecodable::UnsupportedSimple),
            ("f93c00", Undecodable::UnsupportedSimple),
            ("1c", Undecodable::MalformedHead),
            ("62c328", Undecodable::InvalidUtf8),
            ("0000", Undecodable::TrailingBytes),
            ("8301", Undecodable::Truncated),
            ("9bffffffffffffffff", Undecodable::Truncated),
            ("818181818181818181818100", Undecodable::NestingTooDeep),
        ];
        for (bytes, reason) in cases {
            assert_eq!(Value::decode(&unhex(bytes)), Err(reason), "{bytes}");
        }
    }

    #[test]
    fn eight_levels_of_arrays_decode() {
        let eight = unhex("818181818181818100");
        assert!(Value::decode(&eight).is_ok());
        assert_eq!(Value::decode(&eight).unwrap().encode(), eight);
    }
}
