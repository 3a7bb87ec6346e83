//! TypeScript: a `.ts` file's types stripped at load (swc's strip-only
//! mode, as Node runs TypeScript): each annotation becomes spaces, so the
//! JavaScript QuickJS runs keeps every line and column of the file, and
//! errors point into it. What strip-only cannot erase — `enum`,
//! `namespace`, parameter properties, `<T>x` casts — is refused at its
//! line with what to write instead.

use std::sync::{Arc, Mutex};

use swc_common::errors::{DiagnosticBuilder, Emitter, Handler};
use swc_common::sync::Lrc;
use swc_common::{BytePos, GLOBALS, Globals, SourceMap};
use swc_ts_fast_strip::{Mode, Options, operate};

use crate::error::ScriptError;

/// True for a file throng reads as TypeScript.
pub(crate) fn is_typescript(name: &str) -> bool {
    name.ends_with(".ts") || name.ends_with(".mts")
}

/// Deepest nesting of brackets read: the parser recurses per level.
const MAX_NESTING: usize = 256;

/// The stack the stripper runs on: room for [`MAX_NESTING`] levels of the
/// parser's recursion, whatever thread asked.
const STACK: usize = 64 << 20;

/// `text` (the file `name`) as JavaScript, line for line.
pub(crate) fn strip(name: &str, text: &str) -> Result<String, ScriptError> {
    if let Some((line, column)) = too_deep(text) {
        return Err(ScriptError::at(
            name,
            line,
            column,
            &format!("brackets nest more than {MAX_NESTING} deep here; flatten the code"),
        ));
    }
    let (name, text) = (name.to_string(), text.to_string());
    let run = std::thread::Builder::new()
        .name("typescript".into())
        .stack_size(STACK)
        .spawn(move || strip_here(&name, text));
    match run.map(std::thread::JoinHandle::join) {
        Ok(Ok(out)) => out,
        _ => Err(ScriptError::at("", 0, 0, "TypeScript: the type stripper could not run")),
    }
}

/// The line and column where brackets first nest past [`MAX_NESTING`]
/// (counted everywhere, strings and comments too: an over-count only
/// refuses a file no one writes).
fn too_deep(text: &str) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut column) = (0usize, 1, 0);
    for c in text.chars() {
        column += 1;
        match c {
            '\n' => (line, column) = (line + 1, 0),
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some((line, column));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

fn strip_here(name: &str, text: String) -> Result<String, ScriptError> {
    let cm: Lrc<SourceMap> = Lrc::default();
    let said = Said::default();
    let handler = Handler::with_emitter(true, false, Box::new(said.clone()));
    let options = Options {
        filename: Some(name.to_string()),
        module: Some(true),
        mode: Mode::StripOnly,
        ..Options::default()
    };
    let input = text;
    // The parser is fuzzed upstream; should it panic all the same, the
    // file is refused, not the run.
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        GLOBALS.set(&Globals::new(), || operate(&cm, &handler, input, options))
    }));
    let first = said.0.lock().ok().and_then(|d| d.first().cloned());
    let (line, column, message) = match (out, first) {
        (Ok(Ok(js)), None) => return Ok(js.code),
        (_, Some((message, Some(at)))) => {
            let loc = cm.lookup_char_pos(at);
            (loc.line, loc.col.0 + 1, message)
        }
        (_, Some((message, None))) => (0, 0, message),
        (Ok(Err(e)), None) => (0, 0, e.message),
        (Err(_), None) => (0, 0, "the TypeScript reader failed on this file".to_string()),
    };
    Err(ScriptError::at(name, line, column, &advice(&message)))
}

/// swc's message, with what to write instead where strip-only mode is the
/// limit.
fn advice(message: &str) -> String {
    let instead = if message.contains("enum") {
        "; write a const object instead (const Color = { Red: 0, Green: 1 } as const)"
    } else if message.contains("namespace") || message.contains("module declaration") {
        "; write an ES module instead (export the names from a file of their own)"
    } else if message.contains("parameter propert") {
        "; declare the field in the class body and assign it in the constructor"
    } else if message.contains("strip") || message.contains("Unsupported") {
        "; throng erases types only: rewrite this as JavaScript with type annotations"
    } else {
        ""
    };
    format!("TypeScript: {message}{instead}")
}

/// One diagnostic: its message, and where it begins.
type Diagnostic = (String, Option<BytePos>);

/// The diagnostics the stripper emitted.
#[derive(Clone, Default)]
struct Said(Arc<Mutex<Vec<Diagnostic>>>);

impl Emitter for Said {
    fn emit(&mut self, db: &mut DiagnosticBuilder<'_>) {
        let at = db.span.primary_span().map(|s| s.lo);
        if let Ok(mut d) = self.0.lock() {
            d.push((db.message(), at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_become_spaces_and_lines_stay() {
        let ts = "import http from 'k6/http';\n\
                  interface P { x: number; y?: string }\n\
                  type Id = string | number;\n\
                  export const options: { vus: number } = { vus: 2 };\n\
                  export default function (): void {\n\
                  \x20 const p: P = { x: 1 };\n\
                  \x20 const id = 'a' as Id;\n\
                  \x20 http.get('http://127.0.0.1/' + (p.x as number) + id);\n\
                  }\n";
        let js = strip("t.ts", ts).unwrap();
        assert_eq!(js.lines().count(), ts.lines().count());
        assert!(
            !js.contains("interface") && !js.contains(": number") && !js.contains(" as "),
            "{js}"
        );
        assert!(js.contains("export const options") && js.contains("http.get("), "{js}");
        for (a, b) in ts.lines().zip(js.lines()) {
            assert_eq!(a.len(), b.len(), "columns kept: {a:?} / {b:?}");
        }
    }

    #[test]
    fn what_cannot_be_erased_is_refused_at_its_line() {
        let e = strip("t.ts", "const a = 1;\nenum Color { Red }\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1), "{e}");
        assert!(e.message.contains("enum") && e.message.contains("const object"), "{e}");
        let e = strip("t.ts", "let x: = 1;\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 8), "{e}");
        let e = strip("t.ts", "namespace A { export const x = 1 }\n").unwrap_err();
        assert!(e.message.contains("ES module"), "{e}");
    }

    #[test]
    fn hostile_input_is_refused_not_fatal() {
        for text in [
            "\0\0\0",
            "<<<<<<<<",
            &"(".repeat(MAX_NESTING),
            &"[".repeat(MAX_NESTING),
            "/*",
            "`${",
            "class A<",
        ] {
            let _ = strip("t.ts", text);
        }
        let deep = format!("const a = 1;\nconst b = {}1{};\n", "(".repeat(300), ")".repeat(300));
        let e = strip("t.ts", &deep).unwrap_err();
        assert_eq!((e.line, e.column), (2, 11 + MAX_NESTING), "{e}");
        assert!(is_typescript("a.ts") && is_typescript("a.mts") && !is_typescript("a.js"));
    }
}
