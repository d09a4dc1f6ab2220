//! The protobuf wire format: varints, tags and length-delimited fields, read
//! with bounds checks so that no input can panic or allocate more than it
//! holds.

use super::ProtobufError;

/// A protobuf wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireType {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

impl WireType {
    fn from_bits(bits: u64) -> Option<Self> {
        match bits {
            0 => Some(Self::Varint),
            1 => Some(Self::Fixed64),
            2 => Some(Self::Len),
            5 => Some(Self::Fixed32),
            _ => None,
        }
    }

    fn bits(self) -> u64 {
        match self {
            Self::Varint => 0,
            Self::Fixed64 => 1,
            Self::Len => 2,
            Self::Fixed32 => 5,
        }
    }
}

/// A field's payload as it was read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    /// Kubernetes has no 32-bit fixed fields; such a field is skipped.
    Fixed32,
}

/// Reads fields from one message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or(ProtobufError::Truncated)?;
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(ProtobufError::VarintOverflow);
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::VarintOverflow)
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(crate) fn fixed64(&mut self) -> Result<u64, ProtobufError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or(ProtobufError::Truncated)?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next field, or `None` at the end of the message.
    pub(crate) fn field(&mut self) -> Result<Option<(u32, Payload<'a>)>, ProtobufError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n != 0)
            .ok_or(ProtobufError::BadFieldNumber(key >> 3))?;
        let wire = WireType::from_bits(key & 7).ok_or(ProtobufError::BadWireType {
            field: number,
            wire_type: key & 7,
        })?;
        let payload = match wire {
            WireType::Varint => Payload::Varint(self.varint()?),
            WireType::Fixed64 => Payload::Fixed64(self.fixed64()?),
            WireType::Fixed32 => {
                self.take(4)?;
                Payload::Fixed32
            }
            WireType::Len => {
                let len = self.varint()?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|l| *l <= self.buf.len() - self.pos)
                    .ok_or(ProtobufError::LengthTooLarge {
                        field: number,
                        length: len,
                    })?;
                Payload::Len(self.take(len)?)
            }
        };
        Ok(Some((number, payload)))
    }
}

/// Append a varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Append a field key.
pub(crate) fn put_key(out: &mut Vec<u8>, number: u32, wire: WireType) {
    put_varint(out, (u64::from(number) << 3) | wire.bits());
}

/// Append a length-delimited field.
pub(crate) fn put_len(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, WireType::Len);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Append a varint field.
pub(crate) fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_key(out, number, WireType::Varint);
    put_varint(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(Reader::new(&out).varint().unwrap(), v);
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            Reader::new(&[0x80]).varint(),
            Err(ProtobufError::Truncated)
        ));
        assert!(matches!(
            Reader::new(&[0xff; 11]).varint(),
            Err(ProtobufError::VarintOverflow)
        ));
        // Field 1, length-delimited, claiming 2^40 bytes.
        let mut huge = vec![0x0a];
        put_varint(&mut huge, 1 << 40);
        assert!(matches!(
            Reader::new(&huge).field(),
            Err(ProtobufError::LengthTooLarge { field: 1, .. })
        ));
        // Wire type 3 (groups) is not used by Kubernetes.
        assert!(matches!(
            Reader::new(&[0x0b]).field(),
            Err(ProtobufError::BadWireType { field: 1, .. })
        ));
        assert!(matches!(
            Reader::new(&[0x00]).field(),
            Err(ProtobufError::BadFieldNumber(0))
        ));
    }
}
