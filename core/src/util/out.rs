//! Output buffers the answers are written into without allocating (a growable `Vec` or a
//! fixed array), JSON string escaping and UTC times, shared by the page, the ticket's wire
//! form and the events' instants.

use super::time::utc_parts;

/// Where an answer body is written: a `Vec<u8>` in tests, the request's pool in nginx.
/// Rendering never allocates on its own: it only appends to this.
pub trait Out {
    fn put(&mut self, bytes: &[u8]);

    fn put_u64(&mut self, n: u64) {
        let mut b = itoa::Buffer::new();
        self.put(b.format(n).as_bytes());
    }

    /// Two digits, zero-padded (times of day).
    fn put_2(&mut self, n: u64) {
        let n = n % 100;
        self.put(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]);
    }
}

/// `HH:MM:SS`, the UTC time of day of a unix time.
pub fn put_utc_time(out: &mut impl Out, unix_secs: u64) {
    let (_, _, _, h, mi, s) = utc_parts(unix_secs);
    out.put_2(h);
    out.put(b":");
    out.put_2(mi);
    out.put(b":");
    out.put_2(s);
}

/// `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC) of a unix time.
pub fn put_utc_iso(out: &mut impl Out, unix_secs: u64) {
    let (y, mo, d, _, _, _) = utc_parts(unix_secs);
    out.put_2(y / 100);
    out.put_2(y);
    out.put(b"-");
    out.put_2(mo);
    out.put(b"-");
    out.put_2(d);
    out.put(b"T");
    put_utc_time(out, unix_secs);
    out.put(b"Z");
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A fixed-size buffer on the stack: writes beyond its size are cut and remembered.
pub struct FixedBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    overflow: bool,
}

impl<const N: usize> Default for FixedBuf<N> {
    fn default() -> Self {
        FixedBuf {
            buf: [0; N],
            len: 0,
            overflow: false,
        }
    }
}

impl<const N: usize> FixedBuf<N> {
    /// What was written, or None when it did not fit.
    pub fn bytes(&self) -> Option<&[u8]> {
        if self.overflow {
            return None;
        }
        self.buf.get(..self.len)
    }

    /// The written bytes as mutable (to work on them in place).
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        if self.overflow {
            return None;
        }
        self.buf.get_mut(..self.len)
    }

    /// The unused rest, and how far it starts (for writers that fill it themselves).
    pub fn spare(&mut self) -> &mut [u8] {
        self.buf.get_mut(self.len..).unwrap_or_default()
    }

    /// Marks `n` more bytes of [`FixedBuf::spare`] as written.
    pub fn advance(&mut self, n: usize) {
        if n > N - self.len {
            self.overflow = true;
        } else {
            self.len += n;
        }
    }
}

impl<const N: usize> Out for FixedBuf<N> {
    fn put(&mut self, bytes: &[u8]) {
        let spare = self.buf.get_mut(self.len..).unwrap_or_default();
        match spare.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len += bytes.len();
            }
            None => self.overflow = true,
        }
    }
}

/// Writes a JSON string (quotes included) with the escapes JSON needs.
pub fn put_json_str(out: &mut impl Out, s: &str) {
    out.put(b"\"");
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            c if c < 0x20 => {
                out.put(b.get(start..i).unwrap_or_default());
                let hex = |n: u8| if n < 10 { b'0' + n } else { b'a' + n - 10 };
                out.put(b"\\u00");
                out.put(&[hex(c >> 4), hex(c & 15)]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.put(b.get(start..i).unwrap_or_default());
        out.put(esc);
        start = i + 1;
    }
    out.put(b.get(start..).unwrap_or_default());
    out.put(b"\"");
}
