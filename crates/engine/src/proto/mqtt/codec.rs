//! MQTT 3.1.1 and 5 packets, free of I/O: the client's CONNECT, SUBSCRIBE,
//! PUBLISH (QoS 0, 1, 2; retain, dup), its acknowledgements (PUBACK,
//! PUBREC, PUBREL, PUBCOMP), PINGREQ and DISCONNECT encoded; what a broker
//! sends split into packets ([`Reader`]: one packet up to [`MAX_PACKET`]
//! held, a larger one skipped as it streams) and read ([`Packet::parse`],
//! a delivered PUBLISH whole by [`delivery`], MQTT 5 properties skipped
//! within the packet's bounds).

/// Packet types (the fixed header's high nibble).
pub(crate) const CONNECT: u8 = 1;
pub(crate) const CONNACK: u8 = 2;
pub(crate) const PUBLISH: u8 = 3;
pub(crate) const PUBACK: u8 = 4;
pub(crate) const PUBREC: u8 = 5;
pub(crate) const PUBREL: u8 = 6;
pub(crate) const PUBCOMP: u8 = 7;
pub(crate) const SUBSCRIBE: u8 = 8;
pub(crate) const SUBACK: u8 = 9;
pub(crate) const PINGREQ: u8 = 12;
pub(crate) const PINGRESP: u8 = 13;
pub(crate) const DISCONNECT: u8 = 14;

/// The most a remaining length may say (four bytes of 7 bits).
const MAX_REMAINING: usize = 268_435_455;

/// The largest packet a storm accepts from a broker (MQTT 5's CONNECT
/// tells the broker so: Maximum Packet Size). A larger one fails a
/// connection while it connects (`mqtt.packet_too_large`), and is skipped
/// unread while it is held.
pub(crate) const MAX_PACKET: usize = 256 * 1024;

/// The bytes a broker sent are not MQTT: a remaining length longer than
/// four bytes, or a packet body that does not hold what its type says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Malformed;

/// The protocol version spoken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    V311,
    V5,
}

impl Version {
    fn level(self) -> u8 {
        match self {
            Version::V311 => 4,
            Version::V5 => 5,
        }
    }
}

/// What a CONNECT says.
#[derive(Debug)]
pub(crate) struct Connect<'a> {
    pub version: Version,
    pub client_id: &'a str,
    pub clean_start: bool,
    pub keepalive_secs: u16,
    /// MQTT 5's Session Expiry Interval, in seconds.
    pub session_expiry: Option<u32>,
    pub user: Option<&'a str>,
    pub password: Option<&'a [u8]>,
}

/// Appends a remaining length (the variable byte integer).
fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let mut b = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            b |= 0x80;
        }
        out.push(b);
        if n == 0 {
            return;
        }
    }
}

/// Appends a UTF-8 string or binary data: a two-byte length, then the
/// bytes (the plan kept them under 64 KiB).
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let len = b.len().min(usize::from(u16::MAX));
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&b[..len]);
}

/// A packet of `kind` with `flags`, around `body`.
fn packet(out: &mut Vec<u8>, kind: u8, flags: u8, body: &[u8]) {
    out.push(kind << 4 | flags);
    put_varint(out, body.len());
    out.extend_from_slice(body);
}

/// Appends CONNECT.
pub(crate) fn connect(out: &mut Vec<u8>, c: &Connect<'_>) {
    let mut body = Vec::with_capacity(32 + c.client_id.len());
    put_bytes(&mut body, b"MQTT");
    body.push(c.version.level());
    let mut flags = 0u8;
    if c.user.is_some() {
        flags |= 0x80;
    }
    if c.password.is_some() {
        flags |= 0x40;
    }
    if c.clean_start {
        flags |= 0x02;
    }
    body.push(flags);
    body.extend_from_slice(&c.keepalive_secs.to_be_bytes());
    if c.version == Version::V5 {
        let mut props = Vec::new();
        if let Some(e) = c.session_expiry {
            props.push(0x11);
            props.extend_from_slice(&e.to_be_bytes());
        }
        // Maximum Packet Size: the broker sends nothing larger.
        props.push(0x27);
        props.extend_from_slice(&(MAX_PACKET as u32).to_be_bytes());
        put_varint(&mut body, props.len());
        body.extend_from_slice(&props);
    }
    put_bytes(&mut body, c.client_id.as_bytes());
    if let Some(u) = c.user {
        put_bytes(&mut body, u.as_bytes());
    }
    if let Some(p) = c.password {
        put_bytes(&mut body, p);
    }
    packet(out, CONNECT, 0, &body);
}

/// Appends SUBSCRIBE of one topic filter.
pub(crate) fn subscribe(out: &mut Vec<u8>, version: Version, id: u16, filter: &str, qos: u8) {
    let mut body = Vec::with_capacity(8 + filter.len());
    body.extend_from_slice(&id.to_be_bytes());
    if version == Version::V5 {
        body.push(0);
    }
    put_bytes(&mut body, filter.as_bytes());
    body.push(qos & 0x03);
    packet(out, SUBSCRIBE, 0x02, &body);
}

/// PINGREQ.
pub(crate) const PINGREQ_BYTES: [u8; 2] = [PINGREQ << 4, 0];

/// DISCONNECT (normal disconnection in both versions).
pub(crate) const DISCONNECT_BYTES: [u8; 2] = [DISCONNECT << 4, 0];

/// PUBACK of a QoS 1 PUBLISH (success in both versions).
pub(crate) fn puback(id: u16) -> [u8; 4] {
    let [a, b] = id.to_be_bytes();
    [PUBACK << 4, 2, a, b]
}

/// An acknowledgement of a QoS 1 or 2 PUBLISH (PUBACK, PUBREC, PUBREL or
/// PUBCOMP) with a success code: four bytes in both versions. PUBREL
/// carries the flags the spec requires (0b0010).
pub(crate) fn ack(kind: u8, id: u16) -> [u8; 4] {
    let [a, b] = id.to_be_bytes();
    let flags = if kind == PUBREL { 0x02 } else { 0 };
    [kind << 4 | flags, 2, a, b]
}

/// What a PUBLISH says, to send.
#[derive(Debug)]
pub(crate) struct Publish<'a> {
    pub version: Version,
    pub topic: &'a str,
    pub qos: u8,
    /// The packet identifier (ignored at QoS 0).
    pub id: u16,
    pub retain: bool,
    pub dup: bool,
    pub payload: &'a [u8],
}

/// Appends PUBLISH, written straight into `out` (no body built apart).
pub(crate) fn publish(out: &mut Vec<u8>, p: &Publish<'_>) {
    let qos = p.qos & 0x03;
    let topic = p.topic.len().min(usize::from(u16::MAX));
    let id = if qos > 0 { 2 } else { 0 };
    let props = usize::from(p.version == Version::V5);
    let len = 2 + topic + id + props + p.payload.len();
    let flags = u8::from(p.dup) << 3 | qos << 1 | u8::from(p.retain);
    out.reserve(5 + len);
    out.push(PUBLISH << 4 | flags);
    put_varint(out, len);
    put_bytes(out, &p.topic.as_bytes()[..topic]);
    if qos > 0 {
        out.extend_from_slice(&p.id.to_be_bytes());
    }
    if props == 1 {
        out.push(0);
    }
    out.extend_from_slice(p.payload);
}

/// A PUBLISH a broker delivered, read whole: borrowed from its body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Delivery<'a> {
    pub topic: &'a [u8],
    pub qos: u8,
    pub id: Option<u16>,
    pub retain: bool,
    pub dup: bool,
    pub payload: &'a [u8],
}

/// Reads a PUBLISH body (its header `h`): the topic, identifier and
/// payload, MQTT 5 properties skipped (they must fit the packet).
pub(crate) fn delivery(h: Header, body: &[u8], version: Version) -> Result<Delivery<'_>, Malformed> {
    if h.kind != PUBLISH {
        return Err(Malformed);
    }
    let qos = (h.flags >> 1) & 0x03;
    if qos == 3 {
        return Err(Malformed);
    }
    let topic_len = usize::from(u16_at(body, 0)?);
    let topic = body.get(2..2 + topic_len).ok_or(Malformed)?;
    let mut at = 2 + topic_len;
    let id = if qos > 0 {
        let id = u16_at(body, at)?;
        at += 2;
        Some(id)
    } else {
        None
    };
    if version == Version::V5 {
        at = skip_properties(body, at)?;
    }
    let payload = body.get(at..).ok_or(Malformed)?;
    Ok(Delivery {
        topic,
        qos,
        id,
        retain: h.flags & 1 == 1,
        dup: h.flags & 0x08 != 0,
        payload,
    })
}

/// A packet's fixed header, once whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: u8,
    pub flags: u8,
    /// The remaining length.
    pub len: usize,
    /// Bytes the fixed header took.
    pub size: usize,
}

/// Reads a fixed header off the front of `buf`: None when more bytes are
/// needed.
pub(crate) fn header(buf: &[u8]) -> Result<Option<Header>, Malformed> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let mut len = 0usize;
    for i in 0..4 {
        let Some(&b) = buf.get(1 + i) else {
            return Ok(None);
        };
        len |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            debug_assert!(len <= MAX_REMAINING);
            return Ok(Some(Header {
                kind: first >> 4,
                flags: first & 0x0f,
                len,
                size: 2 + i,
            }));
        }
    }
    Err(Malformed)
}

/// Bytes the fixed header still needs after `have` of it (1 while it is
/// incomplete; 0 once whole).
pub(crate) fn header_needs(have: &[u8]) -> usize {
    match header(have) {
        Ok(None) => 1,
        _ => 0,
    }
}

/// A packet a broker sent, read as far as a storm needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Packet {
    /// CONNACK: session present, the return (3.1.1) or reason (5) code,
    /// and the QoS 1 and 2 messages the broker takes unacknowledged at
    /// once (MQTT 5's Receive Maximum; none: no limit said).
    Connack {
        session_present: bool,
        code: u8,
        receive_max: Option<u16>,
    },
    /// SUBACK: the packet identifier and the first topic's code.
    Suback { id: u16, code: u8 },
    /// PINGRESP.
    Pingresp,
    /// PUBLISH: its QoS and, when above 0, its packet identifier.
    Publish { qos: u8, id: Option<u16> },
    /// PUBACK, PUBREC, PUBREL or PUBCOMP: its kind, packet identifier and
    /// reason code (0, success, when MQTT 5 leaves it out or in 3.1.1).
    Ack { kind: u8, id: u16, code: u8 },
    /// DISCONNECT (MQTT 5 only): its reason code (0 when none is given).
    Disconnect { code: u8 },
    /// Any other packet type, by kind (not read further).
    Other { kind: u8 },
}

/// Reads a two-byte integer at `at`.
fn u16_at(body: &[u8], at: usize) -> Result<u16, Malformed> {
    match body.get(at..at + 2) {
        Some(&[a, b]) => Ok(u16::from_be_bytes([a, b])),
        _ => Err(Malformed),
    }
}

/// Reads a variable byte integer at `at`: its value and the bytes it took.
fn varint_at(body: &[u8], at: usize) -> Result<(usize, usize), Malformed> {
    let mut n = 0usize;
    for i in 0..4 {
        let b = *body.get(at + i).ok_or(Malformed)?;
        n |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((n, i + 1));
        }
    }
    Err(Malformed)
}

/// MQTT 5's Receive Maximum (property 0x21) among `props`, each property
/// walked by its type; 0, or a property of unknown type, is malformed.
fn receive_maximum(props: &[u8]) -> Result<Option<u16>, Malformed> {
    let (mut at, mut found) = (0, None);
    while at < props.len() {
        let (id, size) = varint_at(props, at)?;
        at += size;
        let len = match id {
            0x01 | 0x17 | 0x19 | 0x24 | 0x25 | 0x28 | 0x29 | 0x2a => 1,
            0x13 | 0x21 | 0x22 | 0x23 => 2,
            0x02 | 0x11 | 0x18 | 0x27 => 4,
            0x0b => varint_at(props, at)?.1,
            0x03 | 0x08 | 0x09 | 0x12 | 0x15 | 0x16 | 0x1a | 0x1c | 0x1f => 2 + usize::from(u16_at(props, at)?),
            0x26 => {
                let key = 2 + usize::from(u16_at(props, at)?);
                key + 2 + usize::from(u16_at(props, at + key)?)
            }
            _ => return Err(Malformed),
        };
        if id == 0x21 {
            match u16_at(props, at)? {
                0 => return Err(Malformed),
                n => found = Some(n),
            }
        }
        at = at.checked_add(len).filter(|&e| e <= props.len()).ok_or(Malformed)?;
    }
    Ok(found)
}

/// Skips MQTT 5 properties at `at`: where they end.
fn skip_properties(body: &[u8], at: usize) -> Result<usize, Malformed> {
    let (len, size) = varint_at(body, at)?;
    let end = at.checked_add(size).and_then(|e| e.checked_add(len)).ok_or(Malformed)?;
    if end > body.len() {
        return Err(Malformed);
    }
    Ok(end)
}

impl Packet {
    /// Reads a whole packet's body.
    pub(crate) fn parse(h: Header, body: &[u8], version: Version) -> Result<Packet, Malformed> {
        let v5 = version == Version::V5;
        match h.kind {
            CONNACK => {
                let (&[ack, code], rest) = body.split_first_chunk::<2>().ok_or(Malformed)?;
                if ack & 0xfe != 0 {
                    return Err(Malformed);
                }
                let mut receive_max = None;
                if v5 {
                    // Properties: Receive Maximum read, the others skipped,
                    // but they must fit the packet. A refusal may leave
                    // them out.
                    if !rest.is_empty() {
                        let end = skip_properties(body, 2)?;
                        let (_, size) = varint_at(body, 2)?;
                        receive_max = receive_maximum(body.get(2 + size..end).ok_or(Malformed)?)?;
                    }
                } else if !rest.is_empty() {
                    return Err(Malformed);
                }
                Ok(Packet::Connack {
                    session_present: ack & 1 == 1,
                    code,
                    receive_max,
                })
            }
            SUBACK => {
                let id = u16_at(body, 0)?;
                let at = if v5 { skip_properties(body, 2)? } else { 2 };
                let code = *body.get(at).ok_or(Malformed)?;
                Ok(Packet::Suback { id, code })
            }
            PINGRESP if body.is_empty() => Ok(Packet::Pingresp),
            PINGRESP => Err(Malformed),
            PUBLISH => {
                let qos = (h.flags >> 1) & 0x03;
                if qos == 3 {
                    return Err(Malformed);
                }
                let topic = usize::from(u16_at(body, 0)?);
                let id = if qos > 0 { Some(u16_at(body, 2 + topic)?) } else { None };
                Ok(Packet::Publish { qos, id })
            }
            PUBACK | PUBREC | PUBREL | PUBCOMP => {
                let want_flags = if h.kind == PUBREL { 0x02 } else { 0 };
                if h.flags != want_flags {
                    return Err(Malformed);
                }
                let id = u16_at(body, 0)?;
                let code = match (v5, body.len()) {
                    (_, 2) => 0,
                    (true, 3) => body[2],
                    (true, _) => {
                        skip_properties(body, 3)?;
                        body[2]
                    }
                    (false, _) => return Err(Malformed),
                };
                Ok(Packet::Ack { kind: h.kind, id, code })
            }
            DISCONNECT if v5 => Ok(Packet::Disconnect {
                code: body.first().copied().unwrap_or(0),
            }),
            // A 3.1.1 server never sends DISCONNECT.
            DISCONNECT => Err(Malformed),
            0 | 15 => Err(Malformed),
            kind => Ok(Packet::Other { kind }),
        }
    }
}

/// Splits what a held connection reads into packets, keeping at most one
/// packet (up to [`MAX_PACKET`]) buffered; a larger one is skipped as it
/// streams in, never buffered. Packets are taken off the front by moving
/// an offset (a read of many small packets is not moved once per packet);
/// the bytes taken go at the next push.
#[derive(Default)]
pub(crate) struct Reader {
    buf: Vec<u8>,
    /// Where the bytes not yet taken start in `buf`.
    start: usize,
    /// Bytes of an oversized packet still to skip.
    skip: usize,
}

/// What [`Reader::next`] found: a packet's body owned, or (from
/// [`Reader::next_ref`]) borrowed from the reader.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next<B = Vec<u8>> {
    /// A whole packet: its header and body.
    Packet(Header, B),
    /// An oversized packet, skipped (its kind).
    Skipped(u8),
}

impl Reader {
    /// Takes bytes read off the connection.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.skip > 0 {
            let n = self.skip.min(bytes.len());
            self.skip -= n;
            bytes = &bytes[n..];
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// True when no packet is partly read or being skipped (the reader
    /// can be dropped and a new one start at the next packet).
    pub(crate) fn idle(&self) -> bool {
        // Bytes already taken stay in `buf` until the next push.
        self.start == self.buf.len() && self.skip == 0
    }

    /// Bytes held now (never more than a packet's worth and a read's).
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next packet, if whole.
    pub(crate) fn next(&mut self) -> Result<Option<Next>, Malformed> {
        Ok(self.next_ref()?.map(|n| match n {
            Next::Packet(h, body) => Next::Packet(h, body.to_vec()),
            Next::Skipped(kind) => Next::Skipped(kind),
        }))
    }

    /// The next packet, if whole, its body borrowed (no copy).
    pub(crate) fn next_ref(&mut self) -> Result<Option<Next<&[u8]>>, Malformed> {
        let held = &self.buf[self.start..];
        let Some(h) = header(held)? else {
            return Ok(None);
        };
        let total = h.size + h.len;
        if total > MAX_PACKET + 5 {
            // Skip what is here and the rest as it comes.
            let here = held.len().min(total);
            self.start += here;
            self.skip = total - here;
            return Ok(Some(Next::Skipped(h.kind)));
        }
        if held.len() < total {
            return Ok(None);
        }
        let at = self.start;
        self.start += total;
        Ok(Some(Next::Packet(h, &self.buf[at + h.size..at + total])))
    }
}

/// A 3.1.1 CONNACK return code, by its class name (`connack.REASON`, the
/// class `mqtt.connack.REASON`).
pub(crate) fn connack_311(code: u8) -> &'static str {
    match code {
        1 => "connack.unacceptable_protocol_version",
        2 => "connack.identifier_rejected",
        3 => "connack.server_unavailable",
        4 => "connack.bad_username_or_password",
        5 => "connack.not_authorized",
        _ => "connack.unknown",
    }
}

/// MQTT 5's reason codes by name, and as the classes of a refused CONNACK
/// and SUBACK (static names: `ErrorClass` holds one `&'static str`).
macro_rules! reasons_5 {
    ($($code:literal => $name:literal,)*) => {
        /// An MQTT 5 reason code (CONNACK, SUBACK, DISCONNECT) by its name.
        #[cfg(test)]
        pub(crate) fn reason_5(code: u8) -> &'static str {
            match code {
                $($code => $name,)*
                _ => "unknown",
            }
        }

        /// A refused MQTT 5 CONNACK's class name (`connack.REASON`).
        pub(crate) fn connack_5(code: u8) -> &'static str {
            match code {
                $($code => concat!("connack.", $name),)*
                _ => "connack.unknown",
            }
        }

        /// A refused MQTT 5 SUBACK's class name (`suback.REASON`).
        pub(crate) fn suback_5(code: u8) -> &'static str {
            match code {
                $($code => concat!("suback.", $name),)*
                _ => "suback.unknown",
            }
        }
    };
}

reasons_5! {
    0x80 => "unspecified_error",
    0x81 => "malformed_packet",
    0x82 => "protocol_error",
    0x83 => "implementation_specific_error",
    0x84 => "unsupported_protocol_version",
    0x85 => "client_identifier_not_valid",
    0x86 => "bad_username_or_password",
    0x87 => "not_authorized",
    0x88 => "server_unavailable",
    0x89 => "server_busy",
    0x8a => "banned",
    0x8b => "server_shutting_down",
    0x8c => "bad_authentication_method",
    0x8d => "keep_alive_timeout",
    0x8e => "session_taken_over",
    0x8f => "topic_filter_invalid",
    0x90 => "topic_name_invalid",
    0x91 => "packet_identifier_in_use",
    0x95 => "packet_too_large",
    0x97 => "quota_exceeded",
    0x99 => "payload_format_invalid",
    0x9a => "retain_not_supported",
    0x9b => "qos_not_supported",
    0x9c => "use_another_server",
    0x9d => "server_moved",
    0x9e => "shared_subscriptions_not_supported",
    0x9f => "connection_rate_exceeded",
    0xa1 => "subscription_identifiers_not_supported",
    0xa2 => "wildcard_subscriptions_not_supported",
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(bytes: &[u8]) -> (Header, &[u8]) {
        let h = header(bytes).unwrap().expect("a whole header");
        assert_eq!(h.size + h.len, bytes.len());
        (h, &bytes[h.size..])
    }

    #[test]
    fn publish_round_trips_at_every_qos_in_both_versions() {
        for version in [Version::V311, Version::V5] {
            for qos in 0..=2u8 {
                let mut out = Vec::new();
                let p = Publish {
                    version,
                    topic: "bench/7",
                    qos,
                    id: 513,
                    retain: qos == 1,
                    dup: qos == 2,
                    payload: b"seq-and-time",
                };
                publish(&mut out, &p);
                let (h, body) = whole(&out);
                let d = delivery(h, body, version).unwrap();
                assert_eq!(d.topic, b"bench/7");
                assert_eq!(d.qos, qos);
                assert_eq!(d.id, (qos > 0).then_some(513));
                assert_eq!((d.retain, d.dup), (qos == 1, qos == 2));
                assert_eq!(d.payload, b"seq-and-time");
                let want = Packet::Publish { qos, id: d.id };
                assert_eq!(Packet::parse(h, body, version), Ok(want));
            }
        }
    }

    #[test]
    fn publish_as_the_spec_draws_it() {
        let mut out = Vec::new();
        let p = Publish {
            version: Version::V311,
            topic: "a/b",
            qos: 1,
            id: 10,
            retain: true,
            dup: false,
            payload: b"hi",
        };
        publish(&mut out, &p);
        assert_eq!(out, [0x33, 9, 0, 3, b'a', b'/', b'b', 0, 10, b'h', b'i']);
    }

    #[test]
    fn a_v5_delivery_skips_its_properties_and_refuses_ones_that_overrun() {
        // Topic alias 5 (0x23), then the payload "x".
        let bytes = [0x32, 10, 0, 1, b't', 0, 9, 3, 0x23, 0, 5, b'x'];
        let (h, body) = whole(&bytes);
        let d = delivery(h, body, Version::V5).unwrap();
        assert_eq!((d.id, d.payload), (Some(9), &b"x"[..]));
        // The property length says 9 bytes; the packet holds 4.
        let bad = [0x32, 10, 0, 1, b't', 0, 9, 9, 0x23, 0, 5, b'x'];
        let (h, body) = whole(&bad);
        assert_eq!(delivery(h, body, Version::V5), Err(Malformed));
        // QoS 3 and a topic longer than the packet are malformed.
        let (h, body) = whole(&[0x36, 4, 0, 1, b't', 0]);
        assert_eq!(delivery(h, body, Version::V311), Err(Malformed));
        let (h, body) = whole(&[0x30, 3, 0, 9, b't']);
        assert_eq!(delivery(h, body, Version::V311), Err(Malformed));
    }

    #[test]
    fn acknowledgements_round_trip_and_read_v5_reason_codes() {
        for kind in [PUBACK, PUBREC, PUBREL, PUBCOMP] {
            let bytes = ack(kind, 300);
            let (h, body) = whole(&bytes);
            for v in [Version::V311, Version::V5] {
                assert_eq!(Packet::parse(h, body, v), Ok(Packet::Ack { kind, id: 300, code: 0 }));
            }
        }
        assert_eq!(ack(PUBACK, 7), puback(7));
        assert_eq!(ack(PUBREL, 1)[0], 0x62);
        // MQTT 5: a reason code alone, and with (empty) properties.
        let (h, body) = whole(&[0x40, 3, 0, 7, 0x10]);
        assert_eq!(
            Packet::parse(h, body, Version::V5),
            Ok(Packet::Ack {
                kind: PUBACK,
                id: 7,
                code: 0x10
            })
        );
        let (h, body) = whole(&[0x70, 4, 0, 7, 0x92, 0]);
        assert_eq!(
            Packet::parse(h, body, Version::V5),
            Ok(Packet::Ack {
                kind: PUBCOMP,
                id: 7,
                code: 0x92
            })
        );
        // A reason code is not 3.1.1; PUBREL's flags are fixed; properties must fit.
        assert_eq!(Packet::parse(h, body, Version::V311), Err(Malformed));
        let (h, body) = whole(&[0x60, 2, 0, 7]);
        assert_eq!(Packet::parse(h, body, Version::V311), Err(Malformed));
        let (h, body) = whole(&[0x50, 4, 0, 7, 0, 5]);
        assert_eq!(Packet::parse(h, body, Version::V5), Err(Malformed));
        let (h, body) = whole(&[0x40, 1, 0]);
        assert_eq!(Packet::parse(h, body, Version::V5), Err(Malformed));
    }

    #[test]
    fn an_oversized_publish_is_skipped_never_buffered() {
        let mut big = Vec::new();
        let payload = vec![b'p'; MAX_PACKET + 10];
        let p = Publish {
            version: Version::V311,
            topic: "t",
            qos: 1,
            id: 1,
            retain: false,
            dup: false,
            payload: &payload,
        };
        publish(&mut big, &p);
        publish(&mut big, &Publish { payload: b"small", ..p });
        let mut r = Reader::default();
        let mut got = Vec::new();
        for chunk in big.chunks(16 * 1024) {
            r.push(chunk);
            assert!(r.buffered() <= MAX_PACKET + 5 + chunk.len());
            while let Some(n) = r.next().unwrap() {
                got.push(n);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], Next::Skipped(PUBLISH));
        let Next::Packet(h, body) = &got[1] else {
            panic!("the small PUBLISH whole: {:?}", got[1])
        };
        assert_eq!(delivery(*h, body, Version::V311).unwrap().payload, b"small");
    }

    fn parse(bytes: &[u8], v: Version) -> Result<Packet, Malformed> {
        let h = header(bytes)?.expect("a whole header");
        Packet::parse(h, &bytes[h.size..h.size + h.len], v)
    }

    #[test]
    fn connect_311_as_the_spec_draws_it() {
        let mut out = Vec::new();
        connect(
            &mut out,
            &Connect {
                version: Version::V311,
                client_id: "dev-7",
                clean_start: true,
                keepalive_secs: 30,
                session_expiry: None,
                user: Some("u"),
                password: Some(b"pw"),
            },
        );
        let mut want = vec![0x10, 0];
        want.extend_from_slice(&[0, 4, b'M', b'Q', b'T', b'T', 4, 0xc2, 0, 30]);
        want.extend_from_slice(&[0, 5, b'd', b'e', b'v', b'-', b'7', 0, 1, b'u', 0, 2, b'p', b'w']);
        want[1] = (want.len() - 2) as u8;
        assert_eq!(out, want);
    }

    #[test]
    fn connect_5_carries_session_expiry_and_packet_size() {
        let mut out = Vec::new();
        connect(
            &mut out,
            &Connect {
                version: Version::V5,
                client_id: "c",
                clean_start: false,
                keepalive_secs: 0,
                session_expiry: Some(3600),
                user: None,
                password: None,
            },
        );
        let h = header(&out).unwrap().unwrap();
        let body = &out[h.size..];
        assert_eq!(&body[..10], &[0, 4, b'M', b'Q', b'T', b'T', 5, 0, 0, 0]);
        // Properties: 10 bytes (0x11 + u32, 0x27 + u32).
        assert_eq!(body[10], 10);
        assert_eq!(&body[11..16], &[0x11, 0, 0, 0x0e, 0x10]);
        assert_eq!(body[16], 0x27);
        assert_eq!(&body[21..], &[0, 1, b'c']);
    }

    #[test]
    fn remaining_lengths_round_trip_and_a_fifth_byte_is_malformed() {
        for n in [0usize, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, MAX_REMAINING] {
            let mut out = vec![0x30];
            put_varint(&mut out, n);
            let h = header(&out).unwrap().unwrap();
            assert_eq!((h.len, h.size), (n, out.len()), "{n}");
        }
        assert_eq!(header(&[0x20, 0xff, 0xff, 0xff, 0xff, 0x01]), Err(Malformed));
        assert_eq!(header(&[0x20, 0xff, 0xff]), Ok(None));
        assert_eq!(header_needs(&[0x20, 0x80]), 1);
        assert_eq!(header_needs(&[0x20, 0x02]), 0);
    }

    #[test]
    fn connack_codes_and_v5_properties() {
        assert_eq!(
            parse(&[0x20, 2, 0, 5], Version::V311),
            Ok(Packet::Connack {
                session_present: false,
                code: 5,
                receive_max: None
            })
        );
        // v5: reason 0x86 and a property (assigned client id "ab").
        assert_eq!(
            parse(&[0x20, 8, 1, 0x86, 5, 0x12, 0, 2, b'a', b'b'], Version::V5),
            Ok(Packet::Connack {
                session_present: true,
                code: 0x86,
                receive_max: None
            })
        );
        // v5: Receive Maximum 20 after a user property and a 4-byte one.
        assert_eq!(
            parse(
                &[
                    0x20, 18, 0, 0, 15, 0x26, 0, 1, b'k', 0, 1, b'v', 0x27, 0, 1, 0, 0, 0x21, 0, 20
                ],
                Version::V5
            ),
            Ok(Packet::Connack {
                session_present: false,
                code: 0,
                receive_max: Some(20)
            })
        );
        // Receive Maximum 0, a property of no known type, one cut short.
        assert_eq!(parse(&[0x20, 6, 0, 0, 3, 0x21, 0, 0], Version::V5), Err(Malformed));
        assert_eq!(parse(&[0x20, 5, 0, 0, 2, 0x7f, 0], Version::V5), Err(Malformed));
        assert_eq!(parse(&[0x20, 5, 0, 0, 2, 0x21, 0], Version::V5), Err(Malformed));
        // Properties longer than the packet.
        assert_eq!(parse(&[0x20, 3, 0, 0, 9], Version::V5), Err(Malformed));
        assert_eq!(parse(&[0x20, 1, 0], Version::V311), Err(Malformed));
        assert_eq!(connack_311(4), "connack.bad_username_or_password");
        assert_eq!(reason_5(0x87), "not_authorized");
        assert_eq!(connack_5(0x86), "connack.bad_username_or_password");
        assert_eq!(suback_5(0x87), "suback.not_authorized");
        assert_eq!(connack_5(0x42), "connack.unknown");
    }

    #[test]
    fn subscribe_and_suback() {
        let mut out = Vec::new();
        subscribe(&mut out, Version::V5, 1, "t/1", 1);
        assert_eq!(out, vec![0x82, 9, 0, 1, 0, 0, 3, b't', b'/', b'1', 1]);
        assert_eq!(
            parse(&[0x90, 4, 0, 1, 0, 1], Version::V5),
            Ok(Packet::Suback { id: 1, code: 1 })
        );
        assert_eq!(
            parse(&[0x90, 3, 0, 1, 0x80], Version::V311),
            Ok(Packet::Suback { id: 1, code: 0x80 })
        );
        assert_eq!(parse(&[0x90, 2, 0, 1], Version::V311), Err(Malformed));
    }

    #[test]
    fn publish_disconnect_and_pings() {
        assert_eq!(
            parse(&[0x32, 5, 0, 1, b't', 0, 9], Version::V311),
            Ok(Packet::Publish { qos: 1, id: Some(9) })
        );
        assert_eq!(puback(9), [0x40, 2, 0, 9]);
        assert_eq!(
            parse(&[0xe0, 1, 0x8b], Version::V5),
            Ok(Packet::Disconnect { code: 0x8b })
        );
        assert_eq!(parse(&[0xe0, 0], Version::V311), Err(Malformed));
        assert_eq!(parse(&[0xd0, 0], Version::V311), Ok(Packet::Pingresp));
        assert_eq!(PINGREQ_BYTES, [0xc0, 0]);
    }

    #[test]
    fn the_reader_skips_oversized_packets_without_buffering_them() {
        let mut r = Reader::default();
        let mut big = vec![0x30];
        put_varint(&mut big, MAX_PACKET * 4);
        r.push(&big);
        r.push(&[0u8; 1000]);
        assert_eq!(r.next(), Ok(Some(Next::Skipped(PUBLISH))));
        for _ in 0..900 {
            r.push(&[0u8; 1024]);
            assert_eq!(r.next(), Ok(None));
            assert!(r.buffered() <= 1024);
        }
        // The rest of it, then a PINGRESP.
        let rest = MAX_PACKET * 4 - 1000 - 900 * 1024;
        r.push(&vec![0u8; rest]);
        r.push(&[0xd0, 0]);
        assert_eq!(
            r.next(),
            Ok(Some(Next::Packet(
                Header {
                    kind: PINGRESP,
                    flags: 0,
                    len: 0,
                    size: 2
                },
                Vec::new()
            )))
        );
    }
}
