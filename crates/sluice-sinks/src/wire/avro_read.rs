//! Avro's binary encoding, read from the front of a byte slice: zigzag varints, little-endian
//! floats, length-prefixed bytes and strings, fixed runs. Each reader advances the slice past
//! what it read, or says what is missing.

use super::error::Fault;

/// The longest varint of a 64-bit value: ten bytes of seven bits.
const MAX_VARINT_BYTES: usize = 10;

/// A zigzag varint `long` (an `int` is read the same way, then narrowed).
pub(super) fn long(input: &mut &[u8]) -> Result<i64, Fault> {
    let mut value: u64 = 0;
    for i in 0..MAX_VARINT_BYTES {
        let (&byte, rest) = input
            .split_first()
            .ok_or_else(|| Fault::new("the bytes end inside a varint"))?;
        *input = rest;
        // The tenth byte brings bits 63.., of which only bit 63 fits: higher ones are lost,
        // as in the reference decoders; the shift is at most 63.
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let magnitude = i64::from_ne_bytes((value >> 1).to_ne_bytes());
            return Ok(if value & 1 == 0 {
                magnitude
            } else {
                !magnitude
            });
        }
    }
    Err(Fault::new("a varint longer than ten bytes"))
}

/// A zigzag varint `int` (32 bits).
pub(super) fn int(input: &mut &[u8]) -> Result<i32, Fault> {
    let value = long(input)?;
    i32::try_from(value).map_err(|_| Fault::new(format!("int {value} is beyond 32 bits")))
}

/// A length (a `long` that must be 0 or more).
pub(super) fn length(input: &mut &[u8]) -> Result<usize, Fault> {
    let value = long(input)?;
    usize::try_from(value).map_err(|_| Fault::new(format!("a negative length {value}")))
}

/// `n` bytes.
pub(super) fn take<'b>(input: &mut &'b [u8], n: usize) -> Result<&'b [u8], Fault> {
    if n > input.len() {
        return Err(Fault::new(format!(
            "{n} bytes wanted, {} left",
            input.len()
        )));
    }
    let (taken, rest) = input.split_at(n);
    *input = rest;
    Ok(taken)
}

/// `N` bytes as an array.
pub(super) fn array<const N: usize>(input: &mut &[u8]) -> Result<[u8; N], Fault> {
    let (taken, rest) = input
        .split_first_chunk::<N>()
        .ok_or_else(|| Fault::new(format!("{N} bytes wanted, {} left", input.len())))?;
    *input = rest;
    Ok(*taken)
}

/// Length-prefixed bytes.
pub(super) fn bytes<'b>(input: &mut &'b [u8]) -> Result<&'b [u8], Fault> {
    let n = length(input)?;
    take(input, n)
}

/// A length-prefixed UTF-8 string.
pub(super) fn string<'b>(input: &mut &'b [u8]) -> Result<&'b str, Fault> {
    let raw = bytes(input)?;
    simdutf8::basic::from_utf8(raw).map_err(|_| Fault::new("a string that is not UTF-8"))
}

/// A little-endian `float`.
pub(super) fn float(input: &mut &[u8]) -> Result<f32, Fault> {
    Ok(f32::from_le_bytes(array::<4>(input)?))
}

/// A little-endian `double`.
pub(super) fn double(input: &mut &[u8]) -> Result<f64, Fault> {
    Ok(f64::from_le_bytes(array::<8>(input)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_varints() {
        let cases: [(&[u8], i64); 6] = [
            (&[0x00], 0),
            (&[0x01], -1),
            (&[0x02], 1),
            (&[0x7f], -64),
            (&[0x80, 0x01], 64),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                i64::MIN,
            ),
        ];
        for (bytes, expected) in cases {
            let mut input = bytes;
            assert_eq!(long(&mut input).ok(), Some(expected), "{bytes:?}");
            assert!(input.is_empty());
        }
        assert!(long(&mut [0x80u8].as_slice()).is_err());
        assert!(long(&mut [0xffu8; 11].as_slice()).is_err());
        assert!(int(&mut [0x80u8, 0x80, 0x80, 0x80, 0x10].as_slice()).is_err());
        assert!(length(&mut [0x01u8].as_slice()).is_err());
    }
}
