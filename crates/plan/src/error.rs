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
            message: message.into(),
        }
    }
}
