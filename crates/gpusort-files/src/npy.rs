//! NumPy's .npy format: the header parser every command's input goes through (fuzzed) and the
//! header writer of every .npy output.

use gpusort_core::KeyType;

pub(crate) const NPY_MAGIC: &[u8] = b"\x93NUMPY";
/// Deepest bracket nesting accepted in an .npy header (a dict holding a tuple is 2; a structured
/// dtype's list of tuples is 3).
const MAX_NPY_NESTING: i32 = 3;
/// A sane upper bound for an .npy header; real ones are under 4 KiB.
pub(crate) const MAX_NPY_HEADER: usize = 1 << 20;

fn npy_dtype(descr: &str) -> Option<KeyType> {
    Some(match descr {
        "<u4" => KeyType::U32,
        "<i4" => KeyType::I32,
        "<f4" => KeyType::F32,
        "<u8" => KeyType::U64,
        "<i8" => KeyType::I64,
        "<f8" => KeyType::F64,
        _ => return None,
    })
}

fn npy_descr(t: KeyType) -> &'static str {
    match t {
        KeyType::U32 => "<u4",
        KeyType::I32 => "<i4",
        KeyType::F32 => "<f4",
        KeyType::U64 => "<u8",
        KeyType::I64 => "<i8",
        KeyType::F64 => "<f8",
    }
}

/// What an .npy header says, checked against the bytes that follow it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyLayout {
    pub dtype: KeyType,
    pub shape: Vec<usize>,
    /// Elements (the product of the shape).
    pub len: usize,
    /// Where the elements start.
    pub offset: usize,
}

/// A parser's message as one line: its first line and its verdict (`= expected value`), without
/// the echoed source and caret lines between them.
fn one_line(msg: &str) -> String {
    let mut lines = msg.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines
        .next()
        .unwrap_or("unreadable header")
        .trim_end_matches(':');
    let verdict: Vec<&str> = lines.filter_map(|l| l.strip_prefix("= ")).collect();
    match verdict.is_empty() {
        true => first.to_string(),
        false => format!("{first}: {}", verdict.join("; ")),
    }
}

/// Parse and check a whole .npy file's bytes: magic, version, header length, the header itself
/// (through npyz), dtype (one gpusort handles, matching `dtype` if given), C order, at least one
/// dimension, and a data size that matches the shape. Errors read as the end of a sentence
/// about the file ("is not a valid .npy file: ..."). Never panics, whatever the bytes (fuzzed:
/// fuzz/fuzz_targets/npy_header.rs).
pub fn parse_npy(bytes: &[u8], dtype: Option<KeyType>) -> Result<NpyLayout, String> {
    let layout = parse_npy_header(bytes, dtype)?;
    let data = bytes.len() - layout.offset;
    if Some(data) != layout.len.checked_mul(layout.dtype.size()) {
        return Err(format!(
            "is not a valid .npy file: the header says {} elements ({} bytes) but {data} bytes follow",
            layout.len,
            layout.len.saturating_mul(layout.dtype.size())
        ));
    }
    Ok(layout)
}

/// The bytes a whole .npy file whose first bytes are `head` holds (header and data), where
/// `head` holds a header that parses: a stream need not be read past them.
pub fn npy_file_len(head: &[u8]) -> Option<u64> {
    let l = parse_npy_header(head, None).ok()?;
    (l.len as u64)
        .checked_mul(l.dtype.size() as u64)?
        .checked_add(l.offset as u64)
}

/// The bytes a .npy header says follow it and the header's own length, from the first
/// `8 + 2..4` bytes of a file (None: not a .npy file, or too few bytes).
pub fn npy_header_end(head: &[u8]) -> Option<usize> {
    if !head.starts_with(NPY_MAGIC) {
        return None;
    }
    header_length(head).map(|(len_bytes, header_len)| 8 + len_bytes + header_len)
}

/// The header length field's size (2 bytes in format version 1, 4 in 2 and 3) and its value,
/// from a file's first bytes (None: too few of them, or another version).
fn header_length(head: &[u8]) -> Option<(usize, usize)> {
    match *head.get(6)? {
        1 if head.len() >= 10 => Some((2, u16::from_le_bytes([head[8], head[9]]) as usize)),
        2 | 3 if head.len() >= 12 => Some((
            4,
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
        )),
        _ => None,
    }
}

/// [`parse_npy`]'s checks of the header alone: `bytes` need only reach the header's end.
fn parse_npy_header(bytes: &[u8], dtype: Option<KeyType>) -> Result<NpyLayout, String> {
    let bad = |why: String| format!("is not a valid .npy file: {why}");
    if !bytes.starts_with(NPY_MAGIC) {
        return Err(bad("missing the \\x93NUMPY magic".into()));
    }
    if bytes.len() < 10 {
        return Err(bad("truncated header".into()));
    }
    let Some((len_bytes, header_len)) = header_length(bytes) else {
        return Err(bad(format!("unsupported format version {}", bytes[6])));
    };
    let offset = 8 + len_bytes + header_len;
    if header_len > MAX_NPY_HEADER || offset > bytes.len() {
        return Err(bad(format!(
            "header length {header_len} does not fit the file"
        )));
    }
    // npyz's header parser backtracks exponentially on deeply nested brackets (found by fuzzing:
    // a 100-byte file held it for hours). NumPy writes a flat dict holding one shape tuple
    // (structured dtypes, which gpusort refuses anyway, nest a little deeper), so refuse deeper
    // nesting before parsing.
    let depth = bytes[8 + len_bytes..offset]
        .iter()
        .scan(0i32, |d, &b| {
            match b {
                b'(' | b'[' | b'{' => *d += 1,
                b')' | b']' | b'}' => *d -= 1,
                _ => {}
            }
            Some(*d)
        })
        .max()
        .unwrap_or(0);
    if depth > MAX_NPY_NESTING {
        return Err(bad(format!(
            "its header nests brackets {depth} deep; NumPy headers are a flat dict"
        )));
    }
    let mut reader: &[u8] = &bytes[..offset];
    let header =
        npyz::NpyHeader::from_reader(&mut reader).map_err(|e| bad(one_line(&e.to_string())))?;
    let npy = npyz::NpyFile::with_header(header, std::io::empty());
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => {
            return Err(bad(format!(
                "structured dtype {} is not supported",
                other.descr()
            )))
        }
    };
    let file_dtype = npy_dtype(&descr).ok_or_else(|| {
        format!(
            "holds dtype '{descr}'; gpusort handles little-endian u32, i32, f32, u64, i64 and f64"
        )
    })?;
    if let Some(asked) = dtype {
        if asked != file_dtype {
            return Err(format!("holds {file_dtype} but --dtype {asked} was given"));
        }
    }
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&n| usize::try_from(n).map_err(|_| bad(format!("axis of {n} elements"))))
        .collect::<Result<_, _>>()?;
    if shape.is_empty() {
        return Err("is 0-D (a single value), not an array to work on".into());
    }
    if npy.order() == npyz::Order::Fortran {
        return Err("is in Fortran order; save it in C order".into());
    }
    let len = shape
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .ok_or_else(|| bad(format!("the shape {shape:?} is too large")))?;
    Ok(NpyLayout {
        dtype: file_dtype,
        shape,
        len,
        offset,
    })
}

/// The .npy (version 1) header of an array of `shape` and `dtype`, padded with spaces before its
/// closing newline to `min_len` bytes where shorter (the format only asks that the data start
/// at a multiple of 64, so a header may be longer than it needs; NumPy reads it).
pub(crate) fn npy_header(dtype: KeyType, shape: &[u64], min_len: usize) -> Vec<u8> {
    use npyz::WriterBuilder;
    let dt = npyz::DType::Plain(npy_descr(dtype).parse().expect("valid type string"));
    let mut h = Vec::new();
    npyz::WriteOptions::new_header_only()
        .dtype(dt)
        .shape(shape)
        .writer(&mut h)
        .write_header_only()
        .expect("writing to memory");
    if h.len() < min_len && h.len() >= 10 && h[6] == 1 {
        let extra = min_len - h.len();
        let newline = h.len() - 1;
        h.splice(newline..newline, std::iter::repeat_n(b' ', extra));
        let dict_len = u16::from_le_bytes([h[8], h[9]]) as usize + extra;
        h[8..10].copy_from_slice(&(dict_len as u16).to_le_bytes());
    }
    h
}
