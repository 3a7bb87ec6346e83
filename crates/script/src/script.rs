//! A loaded script: its sources, what its VUs need, its options. A leaf:
//! the VU, the loader and the options probe read it.

use crate::modules::Sources;
use crate::options::Options;

/// Which intrinsics a VU's context gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Intrinsics {
    /// What k6 scripts mostly use: JSON.
    Small,
    /// And regular expressions (the script writes a regular expression
    /// literal or names `RegExp`).
    Regex,
    /// Date, Map, Set, typed arrays, Proxy, BigInt… (the script names one).
    Full,
}

/// A VU's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The coroutine's stack.
    pub stack: usize,
    /// The runtime's heap.
    pub memory: usize,
    /// Time an iteration may run JavaScript (its waits not counted).
    pub cpu: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            stack: 256 * 1024,
            memory: 64 * 1024 * 1024,
            cpu: std::time::Duration::from_secs(1),
        }
    }
}

/// A loaded script: its sources, what its VUs need, its options.
#[derive(Debug)]
pub struct Script {
    /// The main module's name (the file's name, as given).
    pub(crate) main: String,
    pub(crate) sources: Sources,
    pub(crate) intrinsics: Intrinsics,
    /// The `__ENV` names the script reads (None: it reads `__ENV` by
    /// computed names, so it gets the whole environment).
    pub(crate) env_names: Option<Vec<String>>,
    pub(crate) limits: Limits,
    /// What `export const options` said.
    pub options: Options,
    /// It imports `k6/crypto`: its VUs get the hash functions (the others
    /// do without them, 0.4 KB each).
    pub(crate) crypto: bool,
    /// `open()`'s files and the SharedArrays, shared by every VU.
    pub(crate) data: std::sync::Arc<crate::data::Shared>,
}
