//! Data a script's VUs share without a copy each: files `open()` reads
//! (read once at load, by their literal path) and `k6/data`'s
//! `SharedArray`s (built once, by the first VU that asks, and kept as one
//! JSON text per element: a VU parses only the elements it reads).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rquickjs::{Ctx, Function, Object};

/// Most SharedArrays a script may build.
const MAX_ARRAYS: usize = 256;

/// The shared data of one script run.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// `open()`'s files, by the path as written.
    pub(crate) opened: HashMap<String, Arc<str>>,
    /// SharedArrays by name: each element's JSON.
    arrays: Mutex<HashMap<String, Arc<Vec<Box<str>>>>>,
}

impl Shared {
    /// The files `open()` reads, by the path as written; no arrays yet.
    pub(crate) fn new(opened: HashMap<String, Arc<str>>) -> Shared {
        Shared {
            opened,
            arrays: Mutex::default(),
        }
    }

    fn array(&self, name: &str) -> Option<Arc<Vec<Box<str>>>> {
        // A poisoned lock only means a VU panicked mid-insert: the map is
        // still a map.
        let arrays = self.arrays.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        arrays.get(name).cloned()
    }
}

/// The global `open`, and `sharedLength`, `sharedSet` and `sharedGet` on
/// `o` (`globalThis.__throng`); `init` says whether the VU is still in its
/// init context, where k6 allows `open()`.
pub(crate) fn install<'js>(
    ctx: &Ctx<'js>,
    o: &Object<'js>,
    data: &Arc<Shared>,
    init: impl Fn() -> bool + 'static,
) -> rquickjs::Result<()> {
    let d = Arc::clone(data);
    // k6's `open` is a global of the init context.
    ctx.globals().set(
        "open",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, path: String| -> rquickjs::Result<String> {
                if !init() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "open() can only be called in the init context (the script's top level), as in k6",
                    ));
                }
                match d.opened.get(&path) {
                    Some(text) => Ok(text.to_string()),
                    None => Err(rquickjs::Exception::throw_message(
                        &ctx,
                        &format!("open('{path}'): not read before the run (open() takes a path written as a literal)"),
                    )),
                }
            },
        )?,
    )?;
    let d = Arc::clone(data);
    o.set(
        "sharedLength",
        Function::new(ctx.clone(), move |name: String| -> Option<usize> {
            d.array(&name).map(|a| a.len())
        })?,
    )?;
    let d = Arc::clone(data);
    o.set(
        "sharedSet",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: String, json: String| -> rquickjs::Result<usize> {
                let bad = |m: &str| rquickjs::Exception::throw_type(&ctx, &format!("SharedArray '{name}': {m}"));
                let serde_json::Value::Array(items) = serde_json::from_str(&json).map_err(|e| bad(&e.to_string()))?
                else {
                    return Err(bad("its function must return an array"));
                };
                let items: Vec<Box<str>> = items.iter().map(|v| v.to_string().into_boxed_str()).collect();
                let mut arrays = d.arrays.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if !arrays.contains_key(&name) && arrays.len() >= MAX_ARRAYS {
                    return Err(bad(&format!("a script builds at most {MAX_ARRAYS} SharedArrays")));
                }
                // The first VU's wins; another built at the same time is dropped.
                Ok(arrays.entry(name.clone()).or_insert_with(|| Arc::new(items)).len())
            },
        )?,
    )?;
    let d = Arc::clone(data);
    o.set(
        "sharedGet",
        Function::new(ctx.clone(), move |name: String, i: usize| -> Option<String> {
            d.array(&name).and_then(|a| a.get(i).map(|s| s.to_string()))
        })?,
    )
}
