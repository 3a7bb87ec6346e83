//! The k6 modules a script imports, written in JavaScript over the VU's
//! host functions (`globalThis.__throng`, see `vu.rs`), and the resolver
//! and loader that hand QuickJS those and the script's own files (read
//! before the run, so loading reads no disk).

use std::collections::HashMap;
use std::sync::Arc;

use rquickjs::loader::{Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::{Ctx, Error, Module};

/// `k6`: check, group, sleep, fail.
const K6: &str = r#"
const h = globalThis.__throng;
export function check(val, sets, tags) {
  let all = true;
  for (const name of Object.keys(sets || {})) {
    const f = sets[name];
    const ok = typeof f === 'function' ? !!f(val) : !!f;
    h.check(name, ok);
    if (!ok) all = false;
  }
  return all;
}
export function sleep(s) { h.sleep(Number(s)); }
export function group(name, fn) {
  h.groupStart(String(name));
  try { return fn(); } finally { h.groupEnd(); }
}
export function fail(msg) { throw new Error('fail: ' + (msg === undefined ? '' : msg)); }
export default { check, sleep, group, fail };
"#;

/// `k6/http`: the request functions and `Response`.
const K6_HTTP: &str = r#"
const h = globalThis.__throng;
function form(o) {
  return Object.keys(o).map(k => encodeURIComponent(k) + '=' + encodeURIComponent(String(o[k]))).join('&');
}
function duration(t) {
  if (t === undefined || t === null) return -1;
  if (typeof t === 'number') return t;
  const s = String(t).trim();
  const units = [['ms', 1], ['s', 1000], ['m', 60000], ['h', 3600000]];
  for (const [u, f] of units) {
    if (s.endsWith(u) && !(u === 's' && s.endsWith('ms'))) {
      const n = Number(s.slice(0, s.length - u.length));
      if (s.length > u.length && n >= 0) return n * f;
    }
  }
  const n = Number(s);
  if (s.length === 0 || !(n >= 0)) throw new TypeError('params.timeout: ' + t + ' is not a duration (e.g. "10s", "500ms" or a number of milliseconds)');
  return n;
}
const KNOWN = { headers: 1, tags: 1, timeout: 1, responseCallback: 1 };
let defaultCallback = null;
// k6's expectedStatuses: codes and { min, max } ranges, kept as text.
export function expectedStatuses(...codes) {
  const parts = codes.map((c) => {
    if (typeof c === 'number' && Number.isInteger(c)) return String(c);
    if (c && typeof c === 'object' && Number.isInteger(c.min) && Number.isInteger(c.max)) return c.min + '-' + c.max;
    throw new TypeError('http.expectedStatuses: give status codes or { min, max } ranges');
  });
  return { __throngExpect: parts.join(',') };
}
// null, as in k6: no status counts as failed.
export function setResponseCallback(cb) { defaultCallback = cb === null ? '100-599' : callback(cb); }
function callback(cb) {
  if (cb === null || cb === undefined) return null;
  if (typeof cb === 'object' && typeof cb.__throngExpect === 'string') return cb.__throngExpect;
  throw new TypeError('responseCallback: throng takes http.expectedStatuses(...) only, not a function of its own');
}
export class Response {
  constructor(r) { Object.assign(this, r); }
  json(selector) {
    const v = JSON.parse(this.body);
    if (selector === undefined) return v;
    return String(selector).split('.').reduce((o, k) => (o === null || o === undefined) ? undefined : o[k], v);
  }
}
export function request(method, url, body, params) {
  params = params || {};
  for (const k of Object.keys(params)) {
    if (!KNOWN[k]) throw new TypeError('http.request params.' + k + ' is not supported by throng (supported: headers, tags, timeout)');
  }
  const headers = [];
  let typed = false;
  for (const k of Object.keys(params.headers || {})) {
    if (k.toLowerCase() === 'content-type') typed = true;
    headers.push(String(k), String(params.headers[k]));
  }
  let b = null;
  if (body !== undefined && body !== null) {
    if (typeof body === 'object') {
      b = form(body);
      if (!typed) headers.push('Content-Type', 'application/x-www-form-urlencoded');
    } else {
      b = String(body);
    }
  }
  const tags = params.tags || {};
  const name = tags.name === undefined ? null : String(tags.name);
  const cb = 'responseCallback' in params ? callback(params.responseCallback) : defaultCallback;
  // null: the plan's statuses (200-399); k6's `responseCallback: null` counts none as failed.
  h.expect('responseCallback' in params && params.responseCallback === null ? '100-599' : cb);
  const r = h.request(String(method).toUpperCase(), String(url), b, headers, name, duration(params.timeout));
  r.url = String(url);
  r.request = { method: String(method).toUpperCase(), url: String(url) };
  return new Response(r);
}
export function get(url, params) { return request('GET', url, null, params); }
export function head(url, params) { return request('HEAD', url, null, params); }
export function options(url, body, params) { return request('OPTIONS', url, body, params); }
export function post(url, body, params) { return request('POST', url, body, params); }
export function put(url, body, params) { return request('PUT', url, body, params); }
export function patch(url, body, params) { return request('PATCH', url, body, params); }
export function del(url, body, params) { return request('DELETE', url, body, params); }
function one(r) {
  if (typeof r === 'string') return request('GET', r, null, undefined);
  if (Array.isArray(r)) return request(r[0], r[1], r[2], r[3]);
  if (r && typeof r === 'object') return request(r.method || 'GET', r.url, r.body, r.params);
  throw new TypeError('http.batch: each request is a URL, [method, url, body, params] or { method, url, body, params }');
}
// The VU's jar (the one its requests use, emptied per iteration).
class CookieJar {
  set(url, name, value, opts) {
    opts = opts || {};
    let c = String(name) + '=' + String(value);
    if (opts.domain) c += '; Domain=' + String(opts.domain);
    c += '; Path=' + (opts.path ? String(opts.path) : '/');
    if (opts.secure) c += '; Secure';
    if (opts.max_age !== undefined) c += '; Max-Age=' + Number(opts.max_age);
    h.cookieSet(String(url), c);
  }
  cookiesForURL(url) {
    const out = {};
    for (const part of h.cookiesFor(String(url)).split('; ')) {
      const i = part.indexOf('=');
      if (i <= 0) continue;
      const k = part.slice(0, i);
      (out[k] = out[k] || []).push(part.slice(i + 1));
    }
    return out;
  }
  clear() { throw new TypeError('jar.clear is not supported by throng (the jar is emptied at each iteration)'); }
  delete() { throw new TypeError('jar.delete is not supported by throng (the jar is emptied at each iteration)'); }
}
const jar = new CookieJar();
export function cookieJar() { return jar; }
// One after another on the VU's connection (k6 sends up to 6 at once).
export function batch(reqs) {
  if (Array.isArray(reqs)) return reqs.map(one);
  const out = {};
  for (const k of Object.keys(reqs || {})) out[k] = one(reqs[k]);
  return out;
}
export default { request, get, head, options, post, put, patch, del, batch, cookieJar, expectedStatuses, setResponseCallback, Response };
"#;

/// `k6/encoding`: base64.
const K6_ENCODING: &str = r#"
const h = globalThis.__throng;
export function b64encode(s, enc) { return h.b64encode(String(s), String(enc || 'std')); }
export function b64decode(s, enc, format) {
  const out = h.b64decode(String(s), String(enc || 'std'));
  if (out === null) throw new TypeError('b64decode: not valid base64');
  return out;
}
export default { b64encode, b64decode };
"#;

/// `k6/crypto`: hashes and HMACs as text (hex or base64), and their
/// streaming forms.
const K6_CRYPTO: &str = r#"
const h = globalThis.__throng;
// As k6: without an encoding, a digest is an ArrayBuffer.
function enc(e) { return e === undefined ? 'binary' : String(e); }
function hasher(alg) {
  const parts = [];
  return { update(s) { parts.push(String(s)); return this; }, digest(e) { return h.hash(alg, parts.join(''), enc(e)); } };
}
export function md5(s, e) { return h.hash('md5', String(s), enc(e)); }
export function sha1(s, e) { return h.hash('sha1', String(s), enc(e)); }
export function sha256(s, e) { return h.hash('sha256', String(s), enc(e)); }
export function sha384(s, e) { return h.hash('sha384', String(s), enc(e)); }
export function sha512(s, e) { return h.hash('sha512', String(s), enc(e)); }
export function sha512_256(s, e) { return h.hash('sha512_256', String(s), enc(e)); }
export function hmac(alg, secret, data, e) { return h.hmac(String(alg), String(secret), String(data), enc(e)); }
export function createHash(alg) { h.hash(String(alg), '', 'hex'); return hasher(String(alg)); }
export function randomBytes(n) { return h.randomBytes(Number(n)); }
export function createHMAC(alg, secret) {
  const parts = [];
  return { update(s) { parts.push(String(s)); return this; }, digest(e) { return h.hmac(String(alg), String(secret), parts.join(''), enc(e)); } };
}
export default { md5, sha1, sha256, sha384, sha512, sha512_256, hmac, createHash, createHMAC, randomBytes };
"#;

/// `k6/data`: SharedArray — built once per run by the first VU that asks,
/// read by every VU through a Proxy that parses only the element read.
const K6_DATA: &str = r#"
const h = globalThis.__throng;
export class SharedArray {
  constructor(name, fn) {
    name = String(name);
    if (typeof fn !== 'function') throw new TypeError('SharedArray: give a name and a function that returns an array');
    let n = h.sharedLength(name);
    if (n === null || n === undefined) n = h.sharedSet(name, JSON.stringify(fn()));
    const at = (i) => JSON.parse(h.sharedGet(name, i));
    const all = () => { const a = []; for (let i = 0; i < n; i++) a.push(at(i)); return a; };
    return new Proxy([], {
      get(_, p) {
        if (p === 'length') return n;
        if (p === Symbol.iterator) return function* () { for (let i = 0; i < n; i++) yield at(i); };
        if (typeof p === 'string') {
          const i = Number(p);
          if (Number.isInteger(i) && i >= 0 && String(i) === p) return i < n ? at(i) : undefined;
        }
        const f = Array.prototype[p];
        return typeof f === 'function' ? (...args) => f.apply(all(), args) : undefined;
      },
      has(_, p) { const i = Number(p); return p === 'length' || (Number.isInteger(i) && i >= 0 && i < n); },
      set() { throw new TypeError('SharedArray is read-only'); },
      deleteProperty() { throw new TypeError('SharedArray is read-only'); },
    });
  }
}
export default { SharedArray };
"#;

/// `k6/metrics`: Counter, Gauge, Rate, Trend — declared in the init
/// context (the scenario's custom metrics), added to in iterations.
const K6_METRICS: &str = r#"
const h = globalThis.__throng;
class Metric {
  constructor(name, kind) { this.name = String(name); this.kind = kind; h.metric(this.name, kind); }
  add(value, tags) {
    const v = this.kind === 'rate' ? (value ? 1 : 0) : Number(value);
    const t = [];
    for (const k of Object.keys(tags || {})) t.push(String(k), String(tags[k]));
    h.add(this.name, this.kind, v, t);
    return true;
  }
}
export class Counter extends Metric { constructor(name) { super(name, 'counter'); } }
export class Gauge extends Metric { constructor(name) { super(name, 'gauge'); } }
export class Rate extends Metric { constructor(name) { super(name, 'rate'); } }
export class Trend extends Metric { constructor(name, isTime) { super(name, 'trend'); } }
export default { Counter, Gauge, Rate, Trend };
"#;

/// The k6 modules throng provides, by import name.
pub(crate) const BUILTIN: [(&str, &str); 6] = [
    ("k6", K6),
    ("k6/http", K6_HTTP),
    ("k6/encoding", K6_ENCODING),
    ("k6/metrics", K6_METRICS),
    ("k6/crypto", K6_CRYPTO),
    ("k6/data", K6_DATA),
];

/// What `import` may name: the built-in modules, and the script's files
/// by their path relative to the script's folder (`./lib.js`).
#[derive(Clone, Debug)]
pub(crate) struct Sources {
    pub(crate) files: Arc<HashMap<String, Arc<str>>>,
    /// Every module compiled once at load, without its functions' source
    /// text (which QuickJS otherwise keeps per function, per VU): what each
    /// VU loads instead of parsing. Empty until compiled.
    pub(crate) bytecode: Arc<HashMap<String, Vec<u8>>>,
}

impl Sources {
    /// Every module the script may load (the built-in ones and its files),
    /// compiled in `ctx` and written without source text; line numbers
    /// stay, for the script's errors (found by skipping the built-in
    /// modules' frames).
    pub(crate) fn compile(&self, ctx: &Ctx<'_>) -> rquickjs::Result<HashMap<String, Vec<u8>>> {
        let builtin = BUILTIN.iter().map(|(n, src)| (*n, src.as_bytes()));
        let files = self.files.iter().map(|(n, src)| (n.as_str(), src.as_bytes()));
        let options = || rquickjs::module::WriteOptions {
            strip_source: true,
            ..Default::default()
        };
        builtin
            .chain(files)
            .map(|(name, src)| {
                Ok((
                    name.to_string(),
                    Module::declare(ctx.clone(), name, src)?.write(options())?,
                ))
            })
            .collect()
    }

    /// Module `name`: from its bytecode when compiled, else its source.
    pub(crate) fn module<'js>(&self, ctx: &Ctx<'js>, name: &str) -> rquickjs::Result<Module<'js, Declared>> {
        if let Some(bytes) = self.bytecode.get(name) {
            // SAFETY: bytes this process wrote with Module::write from the
            // same QuickJS build (Sources::compile), never read from outside.
            return unsafe { Module::load(ctx.clone(), bytes) };
        }
        if let Some((_, src)) = BUILTIN.iter().find(|(n, _)| *n == name) {
            return Module::declare(ctx.clone(), name, *src);
        }
        match self.files.get(name) {
            Some(src) => Module::declare(ctx.clone(), name, src.as_bytes()),
            None => Err(Error::new_loading(name)),
        }
    }
}

impl Resolver for Sources {
    fn resolve<'js>(&mut self, _ctx: &Ctx<'js>, base: &str, name: &str) -> rquickjs::Result<String> {
        if BUILTIN.iter().any(|(n, _)| *n == name) {
            return Ok(name.to_string());
        }
        let joined = join(base, name);
        if self.files.contains_key(&joined) {
            Ok(joined)
        } else {
            Err(Error::new_resolving(base, name))
        }
    }
}

impl Loader for Sources {
    fn load<'js>(&mut self, ctx: &Ctx<'js>, name: &str) -> rquickjs::Result<Module<'js, Declared>> {
        self.module(ctx, name)
    }
}

/// `name` relative to the module `base` (both relative to the script's
/// folder): `./x.js` from `lib/a.js` is `lib/x.js`.
pub(crate) fn join(base: &str, name: &str) -> String {
    if !(name.starts_with("./") || name.starts_with("../")) {
        return name.to_string();
    }
    let mut parts: Vec<&str> = base.split('/').collect();
    parts.pop();
    for p in name.split('/') {
        match p {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_names_join_their_base() {
        assert_eq!(join("main.js", "./lib.js"), "lib.js");
        assert_eq!(join("lib/a.js", "./x.js"), "lib/x.js");
        assert_eq!(join("lib/a.js", "../x.js"), "x.js");
        assert_eq!(join("main.js", "k6/http"), "k6/http");
    }
}
