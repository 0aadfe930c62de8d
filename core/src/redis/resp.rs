//! RESP2 replies: a fallible, bounded parser for what Redis sends back. (Commands are encoded
//! by the `redis` crate: `redis::cmd(..).get_packed_command()`.)
//!
//! Why this parser is written here rather than taken from the `redis` crate: the crate's
//! `Parser` reads from a `std::io::Read` into a buffer of its own and has no size limits. A
//! broken or hostile server that announces `$100000000000` or `*100000000000` makes it wait
//! for (and buffer) that much, inside an nginx worker, with nothing the caller can bound;
//! its nesting limit is fixed and deep. Here the caller owns the buffer (the connection's input,
//! capped), and a line longer than [`MAX_LINE`], a bulk string larger than [`MAX_BULK`], an
//! array longer than [`MAX_ARRAY`] or nested deeper than [`MAX_DEPTH`] is an error at once.
//!
//! It runs in nginx workers on bytes from the network, so nothing here may panic: any byte
//! sequence gives a value, "need more bytes", or an error. It is fuzzed (`fuzz/`).

use core::fmt;

/// A reply as Redis sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `$-1` or `*-1`.
    Nil,
    /// `:123`
    Int(i64),
    /// `+OK`
    Status(Vec<u8>),
    /// `-ERR message`
    Error(Vec<u8>),
    /// `$3\r\nabc`
    Bulk(Vec<u8>),
    /// `*2\r\n...`
    Array(Vec<Value>),
}

impl Value {
    /// The error message of an error reply.
    pub fn error_text(&self) -> Option<String> {
        match self {
            Value::Error(e) => Some(String::from_utf8_lossy(e).into_owned()),
            _ => None,
        }
    }

    /// A short description for log lines (never the whole reply).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Int(_) => "integer",
            Value::Status(_) => "status",
            Value::Error(_) => "error",
            Value::Bulk(_) => "bulk string",
            Value::Array(_) => "array",
        }
    }
}

/// Why bytes are not a RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The first byte of a reply is not one of `+ - : $ *`.
    BadType(u8),
    /// A length or integer is not a decimal number, or a line is not ended by CRLF.
    BadLine,
    /// A bulk string's data is not followed by CRLF.
    BadBulk,
    /// Larger than [`MAX_LINE`], [`MAX_BULK`] or [`MAX_ARRAY`].
    TooLarge,
    /// Arrays nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::BadType(b) => write!(f, "unexpected reply type byte 0x{b:02x}"),
            ParseError::BadLine => f.write_str("malformed reply line"),
            ParseError::BadBulk => f.write_str("bulk string not terminated by CRLF"),
            ParseError::TooLarge => f.write_str("reply too large"),
            ParseError::TooDeep => f.write_str("reply nested too deep"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Longest simple line (status, error, integer, length) accepted.
pub const MAX_LINE: usize = 64 * 1024;
/// Largest bulk string accepted. The module's replies are a few dozen bytes.
pub const MAX_BULK: usize = 1 << 20;
/// Most elements in one array.
pub const MAX_ARRAY: usize = 1024;
/// Deepest nesting of arrays.
pub const MAX_DEPTH: usize = 4;

/// Parses one reply from the start of `buf`. `Ok(None)`: the reply is not complete yet (read
/// more and call again with the longer buffer). `Ok(Some((value, used)))`: `used` bytes made
/// the reply.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ParseError> {
    let mut pos = 0;
    match parse_at(buf, &mut pos, 0)? {
        Some(v) => Ok(Some((v, pos))),
        None => Ok(None),
    }
}

fn parse_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Option<Value>, ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError::TooDeep);
    }
    let Some(&kind) = buf.get(*pos) else {
        return Ok(None);
    };
    let Some(line) = line_at(buf, *pos + 1)? else {
        return Ok(None);
    };
    let after_line = *pos + 1 + line.len() + 2;
    match kind {
        b'+' => {
            *pos = after_line;
            Ok(Some(Value::Status(line.to_vec())))
        }
        b'-' => {
            *pos = after_line;
            Ok(Some(Value::Error(line.to_vec())))
        }
        b':' => {
            let n = int(line)?;
            *pos = after_line;
            Ok(Some(Value::Int(n)))
        }
        b'$' => {
            let n = int(line)?;
            if n == -1 {
                *pos = after_line;
                return Ok(Some(Value::Nil));
            }
            let n = usize::try_from(n).map_err(|_| ParseError::BadLine)?;
            if n > MAX_BULK {
                return Err(ParseError::TooLarge);
            }
            let end = after_line.checked_add(n).ok_or(ParseError::TooLarge)?;
            let Some(rest) = buf.get(end..end.saturating_add(2).min(buf.len())) else {
                return Ok(None);
            };
            match rest {
                b"\r\n" => {}
                [] | [b'\r'] => return Ok(None),
                _ => return Err(ParseError::BadBulk),
            }
            let data = buf.get(after_line..end).ok_or(ParseError::BadBulk)?;
            *pos = end + 2;
            Ok(Some(Value::Bulk(data.to_vec())))
        }
        b'*' => {
            let n = int(line)?;
            if n == -1 {
                *pos = after_line;
                return Ok(Some(Value::Nil));
            }
            let n = usize::try_from(n).map_err(|_| ParseError::BadLine)?;
            if n > MAX_ARRAY {
                return Err(ParseError::TooLarge);
            }
            let mut p = after_line;
            let mut items = Vec::with_capacity(n.min(16));
            for _ in 0..n {
                match parse_at(buf, &mut p, depth + 1)? {
                    Some(v) => items.push(v),
                    None => return Ok(None),
                }
            }
            *pos = p;
            Ok(Some(Value::Array(items)))
        }
        other => Err(ParseError::BadType(other)),
    }
}

/// The line starting at `start`, without its CRLF; None when the CRLF has not arrived yet.
fn line_at(buf: &[u8], start: usize) -> Result<Option<&[u8]>, ParseError> {
    let rest = buf.get(start..).unwrap_or(&[]);
    match rest.iter().position(|&b| b == b'\n') {
        Some(i) => {
            if i > MAX_LINE {
                return Err(ParseError::TooLarge);
            }
            if i == 0 || rest[i - 1] != b'\r' {
                return Err(ParseError::BadLine);
            }
            let line = &rest[..i - 1];
            if line.contains(&b'\r') {
                return Err(ParseError::BadLine);
            }
            Ok(Some(line))
        }
        None if rest.len() > MAX_LINE => Err(ParseError::TooLarge),
        None => Ok(None),
    }
}

fn int(line: &[u8]) -> Result<i64, ParseError> {
    let (neg, digits) = match line.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadLine);
    }
    let mut n: i64 = 0;
    for &d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(i64::from(d - b'0')))
            .ok_or(ParseError::BadLine)?;
    }
    Ok(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &[u8]) -> Result<Option<(Value, usize)>, ParseError> {
        parse(s)
    }

    #[test]
    fn simple_types() {
        assert_eq!(
            one(b"+OK\r\n"),
            Ok(Some((Value::Status(b"OK".to_vec()), 5)))
        );
        assert_eq!(
            one(b"-NOSCRIPT No matching script\r\n").unwrap().unwrap().0,
            Value::Error(b"NOSCRIPT No matching script".to_vec())
        );
        assert_eq!(one(b":-42\r\n"), Ok(Some((Value::Int(-42), 6))));
        assert_eq!(
            one(b"$3\r\nabc\r\n"),
            Ok(Some((Value::Bulk(b"abc".to_vec()), 9)))
        );
        assert_eq!(one(b"$0\r\n\r\n"), Ok(Some((Value::Bulk(vec![]), 6))));
        assert_eq!(one(b"$-1\r\n"), Ok(Some((Value::Nil, 5))));
        assert_eq!(one(b"*-1\r\n"), Ok(Some((Value::Nil, 5))));
        assert_eq!(one(b"*0\r\n"), Ok(Some((Value::Array(vec![]), 4))));
    }

    #[test]
    fn nested_arrays_and_pipelined_replies() {
        let buf = b"*3\r\n:1\r\n$2\r\nhi\r\n*1\r\n:7\r\n+NEXT\r\n";
        let (v, used) = parse(buf).unwrap().unwrap();
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Int(1),
                Value::Bulk(b"hi".to_vec()),
                Value::Array(vec![Value::Int(7)])
            ])
        );
        let (v2, _) = parse(&buf[used..]).unwrap().unwrap();
        assert_eq!(v2, Value::Status(b"NEXT".to_vec()));
    }

    #[test]
    fn every_truncation_is_incomplete_not_an_error() {
        let full = b"*4\r\n:1\r\n$5\r\nhello\r\n$-1\r\n*2\r\n+a\r\n-b c\r\n";
        for cut in 0..full.len() {
            assert_eq!(parse(&full[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(parse(full).unwrap().is_some());
    }

    #[test]
    fn garbage_is_an_error() {
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\n"),
            Err(ParseError::BadType(b'H'))
        );
        assert_eq!(parse(b":12a\r\n"), Err(ParseError::BadLine));
        assert_eq!(parse(b":\r\n"), Err(ParseError::BadLine));
        assert_eq!(
            parse(b":99999999999999999999\r\n"),
            Err(ParseError::BadLine)
        );
        assert_eq!(parse(b"+OK\n"), Err(ParseError::BadLine));
        assert_eq!(parse(b"$3\r\nabcd\r\n"), Err(ParseError::BadBulk));
        assert_eq!(parse(b"$-2\r\n"), Err(ParseError::BadLine));
        assert_eq!(parse(b"*-5\r\n"), Err(ParseError::BadLine));
        assert_eq!(parse(b"$99999999\r\n"), Err(ParseError::TooLarge));
        assert_eq!(parse(b"*100000\r\n"), Err(ParseError::TooLarge));
        assert_eq!(
            parse(b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"),
            Err(ParseError::TooDeep)
        );
        let long = vec![b'+'; MAX_LINE + 10];
        assert_eq!(parse(&long), Err(ParseError::TooLarge));
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small xorshift generator: deterministic, no dependency.
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let alphabet = b"+-:$*\r\n0123456789-abc";
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 40) as usize;
            let mut buf = Vec::with_capacity(len);
            let mut y = x;
            for _ in 0..len {
                y = y
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                buf.push(alphabet[(y >> 59) as usize % alphabet.len()]);
            }
            if let Ok(Some((_, used))) = parse(&buf) {
                assert!(used <= buf.len());
            }
        }
    }
}
