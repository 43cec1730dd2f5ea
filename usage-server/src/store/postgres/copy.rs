//! The binary `COPY` format (PostgreSQL's `COPY ... FROM STDIN (FORMAT binary)`), written
//! by hand: the writes of records encode their rows on the thread that parses them, and
//! the connection only forwards the bytes.

/// The signature, flags and header extension that start every binary `COPY` stream.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// A binary `COPY` stream being written: the header, then rows of fields, then the
/// trailer ([`CopyRows::finish`]).
#[derive(Debug)]
pub struct CopyRows {
    buf: Vec<u8>,
}

impl Default for CopyRows {
    fn default() -> Self {
        Self::new()
    }
}

impl CopyRows {
    /// An empty stream (its header written).
    pub fn new() -> Self {
        Self {
            buf: HEADER.to_vec(),
        }
    }

    /// Starts a row of `fields` fields; exactly that many field writes follow.
    pub fn row(&mut self, fields: usize) {
        let n = i16::try_from(fields).expect("a row has at most 32,767 fields");
        self.buf.extend_from_slice(&n.to_be_bytes());
    }

    fn field(&mut self, bytes: Option<&[u8]>) {
        match bytes {
            Some(b) => {
                let n = i32::try_from(b.len()).expect("a field holds less than 2 GiB");
                self.buf.extend_from_slice(&n.to_be_bytes());
                self.buf.extend_from_slice(b);
            }
            None => self.buf.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }

    /// A `TEXT` field (its UTF-8) or NULL.
    pub fn text(&mut self, v: Option<&str>) {
        self.field(v.map(str::as_bytes));
    }

    /// A `BYTEA` field or NULL.
    pub fn bytes(&mut self, v: Option<&[u8]>) {
        self.field(v);
    }

    /// A `BIGINT` field or NULL.
    pub fn int(&mut self, v: Option<i64>) {
        self.field(v.map(i64::to_be_bytes).as_ref().map(|b| &b[..]));
    }

    /// A `BOOLEAN` field or NULL.
    pub fn boolean(&mut self, v: Option<bool>) {
        self.field(v.map(|b| [u8::from(b)]).as_ref().map(|b| &b[..]));
    }

    /// The whole stream, its trailer written.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_header_rows_and_trailer() {
        let mut c = CopyRows::new();
        c.row(4);
        c.text(Some("é"));
        c.int(Some(-2));
        c.boolean(Some(true));
        c.bytes(None);
        let mut want = b"PGCOPY\n\xff\r\n\0".to_vec();
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[0, 4]);
        want.extend_from_slice(&[0, 0, 0, 2, 0xc3, 0xa9]);
        want.extend_from_slice(&[0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
        want.extend_from_slice(&[0, 0, 0, 1, 1]);
        want.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        want.extend_from_slice(&[0xff, 0xff]);
        assert_eq!(c.finish(), want);
    }

    #[test]
    fn an_empty_stream_is_header_and_trailer() {
        assert_eq!(
            CopyRows::new().finish(),
            b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0\xff\xff".to_vec()
        );
    }
}
