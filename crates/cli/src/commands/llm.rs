//! `throng http --llm`: the chat requests it sends. Without a body, one
//! short prompt; with `--prompts FILE`, one request per line (a text line
//! is the user's message, a JSON line a whole request), handed to the plan
//! as `--body-lines` bodies so that they are taken in `--targets-order`
//! and cycled as any others.

use crate::exit::UsageError;

/// The prompt of a run that gives none.
const DEFAULT_PROMPT: &str = "Say hello in five words.";

/// The chat request for `prompt`.
pub(super) fn request(prompt: &str, model: &str) -> String {
    serde_json::json!({
        "model": model,
        "stream": true,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string()
}

/// The body of a run with neither a body nor `--prompts`.
pub(super) fn default_body(model: &str) -> Vec<u8> {
    request(DEFAULT_PROMPT, model).into_bytes()
}

/// `--prompts FILE`'s `text` as body lines (one chat request a line);
/// `file` names it in errors.
pub(super) fn prompts(file: &str, text: &[u8], model: &str) -> Result<Vec<u8>, UsageError> {
    let text = std::str::from_utf8(text)
        .map_err(|e| UsageError(format!("--prompts {file}: not UTF-8 text ({e}); save it as UTF-8")))?;
    let mut out = Vec::with_capacity(text.len() + 64);
    let mut n = 0u64;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let body = if line.starts_with('{') {
            let mut v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                UsageError(format!(
                    "--prompts {file}:{}: not a JSON object ({e}); write one chat request a line, or the prompt as text",
                    i + 1
                ))
            })?;
            let Some(object) = v.as_object_mut() else {
                return Err(UsageError(format!("--prompts {file}:{}: not a JSON object", i + 1)));
            };
            object.insert("stream".into(), serde_json::Value::Bool(true));
            object.entry("model").or_insert_with(|| model.into());
            v.to_string()
        } else {
            request(line, model)
        };
        out.extend_from_slice(body.as_bytes());
        out.push(b'\n');
        n += 1;
    }
    if n == 0 {
        return Err(UsageError(format!(
            "--prompts {file}: no prompt in it (only blank lines); write one prompt a line"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_lines_become_streamed_chat_requests() {
        let text = b"hello there\n\n{\"model\":\"m2\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}\n";
        let out = String::from_utf8(prompts("p.txt", text, "m1").unwrap()).unwrap();
        let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["messages"][0]["content"], "hello there");
        assert_eq!((&lines[0]["model"], &lines[0]["stream"]), (&"m1".into(), &true.into()));
        assert_eq!((&lines[1]["model"], &lines[1]["stream"]), (&"m2".into(), &true.into()));
        let e = prompts("p.txt", b"ok\n{nope\n", "m").unwrap_err();
        assert!(e.0.starts_with("--prompts p.txt:2: not a JSON object"), "{}", e.0);
        assert!(prompts("p.txt", b"\n  \n", "m").unwrap_err().0.contains("no prompt"));
        assert!(prompts("p.txt", b"\xff", "m").unwrap_err().0.contains("UTF-8"));
    }
}
