//! `throng run script.ts`: a k6 script in TypeScript runs as its
//! JavaScript would (types erased at load, lines kept), nginx counting its
//! requests; what type stripping cannot erase is refused at its line.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{assert_books_balance, output, throng};

const SCRIPT: &str = r#"import http from 'k6/http';
import { check } from 'k6';
import { named, type Params } from './lib/params.ts';

interface Item { id: number; name?: string }
type Status = 200 | 404;

export const options: { vus: number; iterations: number } = { vus: 2, iterations: 6 };

export default function (): void {
  const item: Item = { id: __ITER };
  const want: Status = 200;
  const p: Params = named('item');
  const r = http.get(`BASE/items/${item.id as number}`, p);
  check(r, { 'is 200': (res): boolean => res.status === want });
}
"#;

const LIB: &str = r#"export interface Params { tags: { name: string } }
export function named(name: string): Params {
  return { tags: { name } };
}
"#;

/// Writes `script` as `script.ts` (with `lib/params.ts`) and runs it.
fn run(script: &str) -> (i32, String, Option<throng_result::RunResult>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("script.ts");
    std::fs::write(&file, script).unwrap();
    std::fs::create_dir_all(dir.path().join("lib")).unwrap();
    std::fs::write(dir.path().join("lib/params.ts"), LIB).unwrap();
    let json = dir.path().join("out.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json).arg("--quiet"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text, common::read_result(&json))
}

#[test]
fn a_typescript_script_runs_as_its_javascript_would() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format s '$request_method $uri $status';",
        &format!("access_log {} s;\nlocation / {{ return 200 'ok'; }}", log.display()),
    );
    let (code, out, r) = run(&SCRIPT.replace("BASE", &nginx.url("")));
    assert_eq!(code, 0, "{out}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.iterations, 6);
    assert_eq!(s.tags["step:item"].requests, 6);
    assert_eq!((s.checks["is 200"].passes, s.checks["is 200"].fails), (6, 0));
    let lines = common::access_log(&log);
    assert_eq!(lines.len(), 6, "{lines:?}");
    // Each VU's iterations count from 0 (how the 6 are shared varies).
    let numbered = |l: &String| {
        l.strip_prefix("GET /items/")
            .and_then(|r| r.strip_suffix(" 200"))
            .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n < 6))
    };
    assert!(lines.iter().all(numbered), "{lines:?}");
    assert!(lines.iter().any(|l| l == "GET /items/0 200"), "{lines:?}");
}

#[test]
fn what_types_cannot_erase_is_refused_at_its_line() {
    let nginx = common::Nginx::start("location / { return 200; }");
    let base = nginx.url("");
    for (script, want) in [
        (
            format!(
                "import http from 'k6/http';\nenum Kind {{ A }}\nexport default function () {{ http.get('{base}/'); }}\n"
            ),
            "script.ts:2:1: TypeScript: ",
        ),
        (
            format!(
                "import http from 'k6/http';\nexport default function () {{\n  const x: = 1;\n  http.get('{base}/');\n}}\n"
            ),
            "script.ts:3:12: TypeScript: ",
        ),
        (
            // A runtime error's line is the TypeScript file's own.
            format!(
                "import http from 'k6/http';\n\ntype T = number;\nexport default function () {{\n  http.get('{base}/');\n  (null as any).x;\n}}\n"
            ),
            "script.ts:6",
        ),
    ] {
        let (code, out, _) = run(&script);
        assert!(out.contains(want), "{script}\n{out}");
        if !want.ends_with(":6") {
            assert_eq!(code, 2, "{out}");
        }
    }
}
