//! HPACK header compression (RFC 7541), as a client needs it.
//!
//! - [`Decoder`]: static table, dynamic table (size updates, eviction,
//!   the SETTINGS_HEADER_TABLE_SIZE limit), integers, raw and Huffman
//!   strings. Fields go to a callback as byte slices borrowed from the
//!   block, the tables or one reused scratch buffer: no allocation per field
//!   except an entry added to the dynamic table.
//! - Encoding ([`encode_field`], [`encode_request`]): static-table indexing
//!   where a name or a whole field matches, otherwise literals without
//!   indexing; strings raw (no Huffman). It never touches a dynamic table,
//!   so it needs no state, and a request's block can be encoded once and
//!   sent on every stream of every connection.

pub mod huffman;

use std::collections::VecDeque;

use crate::error::HpackError;

/// The static table (RFC 7541 Appendix A), index 1 first.
#[rustfmt::skip]
pub const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
    (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"), (":status", "200"),
    (":status", "204"), (":status", "206"), (":status", "304"), (":status", "400"),
    (":status", "404"), (":status", "500"), ("accept-charset", ""), ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""), ("accept-ranges", ""), ("accept", ""), ("access-control-allow-origin", ""),
    ("age", ""), ("allow", ""), ("authorization", ""), ("cache-control", ""),
    ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""),
    ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""),
    ("from", ""), ("host", ""), ("if-match", ""), ("if-modified-since", ""),
    ("if-none-match", ""), ("if-range", ""), ("if-unmodified-since", ""), ("last-modified", ""),
    ("link", ""), ("location", ""), ("max-forwards", ""), ("proxy-authenticate", ""),
    ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""),
    ("retry-after", ""), ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""),
    ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""),
    ("www-authenticate", ""),
];

/// The per-entry overhead RFC 7541 §4.1 adds to name and value lengths.
pub const ENTRY_OVERHEAD: usize = 32;

/// SETTINGS_HEADER_TABLE_SIZE's initial value.
pub const DEFAULT_TABLE_SIZE: u32 = 4096;

/// One dynamic table entry: name and value in one allocation.
#[derive(Debug)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// The decoder's dynamic table: newest entry first.
#[derive(Debug, Default)]
struct DynamicTable {
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(e) = self.entries.pop_back() else { break };
            self.size -= e.size();
        }
    }

    fn insert(&mut self, entry: Entry) {
        let size = entry.size();
        if size > self.max_size {
            // RFC 7541 §4.4: an entry larger than the table empties it.
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - size);
        self.size += size;
        self.entries.push_front(entry);
    }
}

/// Where a decoded string lives until the field is complete.
#[derive(Clone, Copy)]
enum Str {
    /// Raw, inside the header block.
    Block(usize, usize),
    /// Huffman-decoded into the scratch buffer.
    Scratch(usize, usize),
    /// A table entry's name (index, 1-based).
    Indexed(usize),
}

/// HPACK decoder state of one connection.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The largest table size the peer may choose: our SETTINGS_HEADER_TABLE_SIZE.
    limit: u32,
    scratch: Vec<u8>,
}

/// A Huffman-coded string and its decoding. Servers send the same values
/// on every response (nginx its `server`, `date` and `content-type`, as
/// literals each time), and a copy is cheaper than decoding them again.
/// A thread keeps the last few it decoded, for all its connections: what a
/// string decodes to does not depend on the connection, and a connection
/// then carries no copy of its own.
#[derive(Debug)]
struct Recent {
    /// The coded string, then its decoding, in one allocation.
    bytes: Box<[u8]>,
    coded_len: usize,
}

impl Recent {
    fn coded(&self) -> &[u8] {
        &self.bytes[..self.coded_len]
    }
    fn plain(&self) -> &[u8] {
        &self.bytes[self.coded_len..]
    }
}

/// How many decoded strings a thread keeps, and the longest it keeps.
const RECENT: usize = 8;
const RECENT_LEN: usize = 48;

/// A thread's recently decoded strings, and the one the next replaces.
#[derive(Default)]
struct RecentStrings {
    kept: Vec<Recent>,
    next: usize,
}

thread_local! {
    static RECENT_STRINGS: std::cell::RefCell<RecentStrings> = std::cell::RefCell::default();
}

/// Appends the decoding of the Huffman-coded `coded` to `out`: a copy of a
/// string the thread decoded lately, or decoded (and kept when short).
fn decode_huffman(coded: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    RECENT_STRINGS.with(|r| {
        let mut r = r.borrow_mut();
        if let Some(k) = r.kept.iter().find(|k| k.coded() == coded) {
            out.extend_from_slice(k.plain());
            return Ok(());
        }
        let from = out.len();
        huffman::decode(coded, out)?;
        if coded.len() <= RECENT_LEN {
            let k = Recent {
                bytes: [coded, &out[from..]].concat().into(),
                coded_len: coded.len(),
            };
            if r.kept.len() < RECENT {
                r.kept.push(k);
            } else {
                let i = r.next;
                r.kept[i] = k;
                r.next = (i + 1) % RECENT;
            }
        }
        Ok(())
    })
}

impl Decoder {
    /// A decoder whose table may grow to `limit` bytes (the
    /// SETTINGS_HEADER_TABLE_SIZE in force; 4096 until ours is acknowledged).
    pub fn new(limit: u32) -> Decoder {
        Decoder {
            table: DynamicTable {
                max_size: limit as usize,
                ..DynamicTable::default()
            },
            limit,
            scratch: Vec::new(),
        }
    }

    /// Applies a new SETTINGS_HEADER_TABLE_SIZE once the peer acknowledged
    /// it. A smaller limit takes effect at once: entries beyond it are
    /// evicted. RFC 7541 §4.2 asks the peer's encoder to open its next block
    /// with a size update, but encoders that never index (nginx's) omit it,
    /// so its absence is not an error; a reference to an evicted entry is.
    pub fn set_limit(&mut self, limit: u32) {
        if (limit as usize) < self.table.max_size {
            self.table.max_size = limit as usize;
            self.table.evict_to(limit as usize);
        }
        self.limit = limit;
    }

    /// The dynamic table's current size in bytes (RFC 7541 §4.1 counting).
    pub fn table_size(&self) -> usize {
        self.table.size
    }

    /// Entries in the dynamic table.
    pub fn table_len(&self) -> usize {
        self.table.entries.len()
    }

    /// Releases the scratch buffer (an idle connection keeps none).
    pub fn shrink(&mut self) {
        self.scratch = Vec::new();
    }

    /// Decodes one complete header block, calling `emit(name, value)` for
    /// each field in order. A header list larger than `max_list_size`
    /// (RFC 7541 §4.1 sizes) stops with an error before more is decoded.
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list_size: u32,
        emit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        self.scratch.clear();
        let mut pos = 0;
        let mut list_size: usize = 0;
        let mut first = true;
        while pos < block.len() {
            let b = block[pos];
            if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only at the block's start.
                if !first {
                    return Err(HpackError::LateSizeUpdate);
                }
                let size = decode_int(block, &mut pos, 5)?;
                if size > self.limit {
                    return Err(HpackError::TableSizeTooLarge { size, max: self.limit });
                }
                self.table.max_size = size as usize;
                self.table.evict_to(size as usize);
                continue;
            }
            first = false;
            self.scratch.clear();
            let (name, value, index) = if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let i = decode_int(block, &mut pos, 7)?;
                if i == 0 {
                    return Err(HpackError::BadIndex(0));
                }
                (Str::Indexed(i as usize), None, false)
            } else {
                // Literal (§6.2): with incremental indexing (01), without (0000),
                // never indexed (0001).
                let (prefix, index) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
                let i = decode_int(block, &mut pos, prefix)?;
                let name = if i == 0 {
                    self.read_string(block, &mut pos)?
                } else {
                    Str::Indexed(i as usize)
                };
                let value = self.read_string(block, &mut pos)?;
                (name, Some(value), index)
            };
            let (n, v) = self.resolve(block, name, value)?;
            list_size += n.len() + v.len() + ENTRY_OVERHEAD;
            if list_size > max_list_size as usize {
                return Err(HpackError::HeaderListTooLarge { max: max_list_size });
            }
            if index {
                let mut bytes = Vec::with_capacity(n.len() + v.len());
                bytes.extend_from_slice(n);
                bytes.extend_from_slice(v);
                let entry = Entry {
                    bytes: bytes.into_boxed_slice(),
                    name_len: n.len(),
                };
                emit(entry.name(), entry.value());
                self.table.insert(entry);
            } else {
                emit(n, v);
            }
        }
        Ok(())
    }

    /// Name and value of a field as slices; `value` `None` means the value
    /// of the indexed entry.
    fn resolve<'a>(
        &'a self,
        block: &'a [u8],
        name: Str,
        value: Option<Str>,
    ) -> Result<(&'a [u8], &'a [u8]), HpackError> {
        let (n, indexed_value) = match name {
            Str::Indexed(i) => {
                let (n, v) = self.entry(i)?;
                (n, Some(v))
            }
            other => (self.slice(block, other), None),
        };
        let v = match value {
            Some(s) => self.slice(block, s),
            None => indexed_value.unwrap_or(&[]),
        };
        Ok((n, v))
    }

    fn slice<'a>(&'a self, block: &'a [u8], s: Str) -> &'a [u8] {
        match s {
            Str::Block(a, b) => &block[a..b],
            Str::Scratch(a, b) => &self.scratch[a..b],
            Str::Indexed(_) => &[],
        }
    }

    /// Field `i` (1-based) of the static table followed by the dynamic one.
    fn entry(&self, i: usize) -> Result<(&[u8], &[u8]), HpackError> {
        if let Some((n, v)) = i.checked_sub(1).and_then(|i| STATIC_TABLE.get(i)) {
            return Ok((n.as_bytes(), v.as_bytes()));
        }
        match i
            .checked_sub(STATIC_TABLE.len() + 1)
            .and_then(|d| self.table.entries.get(d))
        {
            Some(e) => Ok((e.name(), e.value())),
            None => Err(HpackError::BadIndex(i as u32)),
        }
    }

    fn read_string(&mut self, block: &[u8], pos: &mut usize) -> Result<Str, HpackError> {
        let huffman = *block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
        let len = decode_int(block, pos, 7)? as usize;
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= block.len())
            .ok_or(HpackError::Truncated)?;
        let start = *pos;
        *pos = end;
        if !huffman {
            return Ok(Str::Block(start, end));
        }
        let from = self.scratch.len();
        let coded = &block[start..end];
        decode_huffman(coded, &mut self.scratch)?;
        Ok(Str::Scratch(from, self.scratch.len()))
    }
}

/// Decodes an integer with an `n`-bit prefix (RFC 7541 §5.1) starting at
/// `block[*pos]`. Values past `u32::MAX`, and encodings with more
/// continuation bytes than any such value needs, are errors.
pub fn decode_int(block: &[u8], pos: &mut usize, n: u8) -> Result<u32, HpackError> {
    let mask = (1u32 << n) - 1;
    let first = *block.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let mut value = (first as u32) & mask;
    if value < mask {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let b = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
        let add = ((b & 0x7f) as u64) << shift;
        let total = value as u64 + add;
        value = u32::try_from(total).map_err(|_| HpackError::IntegerOverflow)?;
        if b & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
    }
}

/// Appends `value` with an `n`-bit prefix; `first` holds the bits above
/// the prefix in the first byte.
pub fn encode_int(out: &mut Vec<u8>, first: u8, n: u8, value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(first | value as u8);
        return;
    }
    out.push(first | mask as u8);
    let mut rest = value - mask;
    while rest >= 128 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

fn encode_raw_string(out: &mut Vec<u8>, s: &[u8]) {
    encode_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Fields whose values are secrets: encoded "never indexed" (RFC 7541
/// §7.1.3) so that no intermediary puts them in a table.
fn is_sensitive(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"authorization")
        || name.eq_ignore_ascii_case(b"proxy-authorization")
        || name.eq_ignore_ascii_case(b"cookie")
}

/// Appends one field: an indexed field when the static table holds it
/// whole, else a literal without indexing (never indexed for secrets) with
/// an indexed name when the static table holds the name. Names are sent
/// in lower case, as HTTP/2 requires.
pub fn encode_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let mut name_index = 0;
    for (i, (n, v)) in STATIC_TABLE.iter().enumerate() {
        if n.as_bytes().eq_ignore_ascii_case(name) {
            if v.as_bytes() == value && !v.is_empty() {
                encode_int(out, 0x80, 7, i + 1);
                return;
            }
            if name_index == 0 {
                name_index = i + 1;
            }
        }
    }
    let first = if is_sensitive(name) { 0x10 } else { 0x00 };
    encode_int(out, first, 4, name_index);
    if name_index == 0 {
        encode_int(out, 0, 7, name.len());
        out.extend(name.iter().map(u8::to_ascii_lowercase));
    }
    encode_raw_string(out, value);
}

/// Appends a request's header block: the four pseudo-header fields, then
/// `fields`. Encode it once and reuse the bytes for every request that
/// shares them.
pub fn encode_request(
    out: &mut Vec<u8>,
    method: &[u8],
    scheme: &[u8],
    authority: &[u8],
    path: &[u8],
    fields: &[(&[u8], &[u8])],
) {
    encode_field(out, b":method", method);
    encode_field(out, b":scheme", scheme);
    encode_field(out, b":authority", authority);
    encode_field(out, b":path", path);
    for (n, v) in fields {
        encode_field(out, n, v);
    }
}

#[cfg(test)]
mod tests;
