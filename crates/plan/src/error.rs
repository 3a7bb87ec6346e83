/// A plan that cannot run, with the flag (or field) at fault and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// One flag's value is wrong.
    #[error("{flag}: {message}")]
    Invalid {
        /// The flag or argument, as the user typed it (e.g. `--rate`, `URL`).
        flag: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
}

impl PlanError {
    pub(crate) fn invalid(flag: &'static str, message: impl Into<String>) -> Self {
        PlanError::Invalid {
            flag,
            message: one_line(&message.into()).into_owned(),
        }
    }

    /// What is wrong and what to do, without the flag.
    pub fn message(&self) -> &str {
        match self {
            PlanError::Invalid { message, .. } => message,
        }
    }
}

/// `text` with control characters escaped (`\n`, `\u{1b}`), so that an
/// error quoting what the user typed stays one line and cannot drive the
/// terminal. Scenario errors use it too.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_stay_on_one_line() {
        assert_eq!(one_line("1/4:1/2"), "1/4:1/2");
        assert_eq!(one_line("a\nb\r\t\u{1b}[0m µ"), "a\\nb\\r\\t\\u{1b}[0m µ");
        let e = PlanError::invalid("--segment", "'1\n2' is not a segment");
        assert_eq!(e.to_string(), "--segment: '1\\n2' is not a segment");
    }
}
