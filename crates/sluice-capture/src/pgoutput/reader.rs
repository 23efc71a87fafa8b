//! A cursor over one pgoutput message: big-endian integers, NUL-terminated strings, and a
//! named error for a message cut short.

use super::DecodeError;

/// Reads one message front to back.
#[derive(Debug)]
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(super) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < n {
            return Err(DecodeError::Truncated { what });
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub(super) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    pub(super) fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        let mut b = [0; 2];
        b.copy_from_slice(self.take(2, what)?);
        Ok(i16::from_be_bytes(b))
    }

    pub(super) fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4, what)?);
        Ok(i32::from_be_bytes(b))
    }

    pub(super) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_be_bytes(b))
    }

    pub(super) fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(b))
    }

    pub(super) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_be_bytes(b))
    }

    /// A NUL-terminated UTF-8 string (the server encoding is UTF-8: checked at connect).
    pub(super) fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let end = self
            .bytes
            .iter()
            .position(|&b| b == 0)
            .ok_or(DecodeError::Truncated { what })?;
        let text = self.take(end, what)?;
        self.bytes = &self.bytes[1..];
        String::from_utf8(text.to_vec()).map_err(|_| DecodeError::NotUtf8 { what })
    }

    /// A length-prefixed byte string (`Int32 n` then `n` bytes).
    pub(super) fn counted(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.i32(what)?;
        let n = usize::try_from(n).map_err(|_| DecodeError::Truncated { what })?;
        self.take(n, what)
    }
}
