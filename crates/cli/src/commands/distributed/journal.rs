//! The coordinator's run journal: what `throng coordinate --resume` needs
//! to pick up a run whose coordinator died while its agents went on.
//!
//! ```text
//!  drive: agents greeted ─► Journal::new (run id, agents, command, start)
//!         ─► written before the agents get their orders, then once a
//!            second (each agent's last live sequence seen, the time)
//!  --resume FILE ─► Journal::read (bounded, checked) ─► the same agents,
//!         the same run id ─► follow ─► merged ─► marked finished
//! ```
//!
//! Written whole to a file beside it, then renamed over it: a coordinator
//! killed mid-write leaves the previous journal, never half of one. The
//! token is not in it (a resume reads --token-file again); the file is the
//! owner's only (0600), as the command may hold a header's value.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::exit::UsageError;

/// The journal's format; a journal of another is refused.
const FORMAT: u32 = 1;
/// Largest journal read or written: a thousand agents' addresses and a
/// long command fit many times over.
pub const MAX_JOURNAL: u64 = 1 << 20;
/// Longest run id (a coordinator's are 64 hex digits).
const MAX_RUN_ID: usize = 128;

/// One coordinated run, as far as its coordinator followed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    pub format: u32,
    /// The name the agents know the run by.
    pub run_id: String,
    /// The agents, in segment order (agent i runs segment i of N).
    pub agents: Vec<String>,
    /// The command after `--`, as shipped.
    pub command: Vec<String>,
    /// When the agents started (ms since the Unix epoch).
    pub start_at_unix_ms: u64,
    /// When this journal was last written: the coordinator was alive then.
    pub written_unix_ms: u64,
    /// Per agent, the sequence of the last live figures merged (0: none).
    pub seqs: Vec<u64>,
    /// Per agent, its requests in those figures: [ended, ok] (none yet:
    /// null; a journal of an older throng: empty).
    #[serde(default)]
    pub figures: Vec<Option<[u64; 2]>>,
    /// Where the merged result goes, unless the resume says otherwise.
    pub json: Option<PathBuf>,
    pub html: Option<PathBuf>,
    /// The run was merged: nothing left to resume.
    #[serde(default)]
    pub finished: bool,
    /// What the run was started with that a resume judges it by again
    /// (never the token, the TLS files or a push's headers).
    #[serde(default)]
    pub started_with: StartedWith,
}

/// The coordinator's flags of the first run that decide how it ends: a
/// resumed coordinator aborts and accepts a missing segment as the first
/// one would, without the user typing them again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartedWith {
    /// `--abort-on-fail` (given to the coordinator or in the command).
    #[serde(default)]
    pub abort_on_fail: bool,
    /// `--allow-missing`.
    #[serde(default)]
    pub allow_missing: bool,
}

impl Journal {
    pub fn new(run_id: &str, agents: &[String], command: &[String], start_at_unix_ms: u64) -> Journal {
        Journal {
            format: FORMAT,
            run_id: run_id.to_string(),
            agents: agents.to_vec(),
            command: command.to_vec(),
            start_at_unix_ms,
            written_unix_ms: super::now_ms(),
            seqs: vec![0; agents.len()],
            figures: vec![None; agents.len()],
            json: None,
            html: None,
            finished: false,
            started_with: StartedWith::default(),
        }
    }

    /// Writes the journal to `path` atomically (a file beside it, renamed
    /// over it), stamped now; refuses one over [`MAX_JOURNAL`].
    pub fn write(&mut self, path: &Path) -> Result<(), String> {
        self.written_unix_ms = super::now_ms();
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        if bytes.len() as u64 > MAX_JOURNAL {
            return Err(format!(
                "the journal would be {} bytes, over its limit of {MAX_JOURNAL} (a very long command?)",
                bytes.len()
            ));
        }
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".tmp");
        let tmp = path.with_file_name(name);
        let written = (|| {
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            // Not synced: a killed coordinator's writes survive it (the
            // kernel has them), and a sync a second would hold up the live
            // view on a busy disk.
            f.write_all(&bytes)?;
            std::fs::rename(&tmp, path)
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write it: {e}")
        })
    }

    /// Reads and checks the journal of `--resume FILE`: bounded, every
    /// field within reason, or an error saying what is wrong with it.
    pub fn read(path: &Path) -> Result<Journal, UsageError> {
        let flag = format!("--resume {}", path.display());
        let bytes = throng_plan::input::read_limited(path, MAX_JOURNAL).map_err(|e| {
            UsageError(format!(
                "{flag}: {e}; give the journal `throng coordinate --journal` (or --json) wrote"
            ))
        })?;
        let j: Journal = serde_json::from_slice(&bytes).map_err(|e| {
            UsageError(format!(
                "{flag}: not a throng coordinate journal ({e}); give the journal `throng coordinate --journal` \
                 (or --json) wrote"
            ))
        })?;
        j.check().map_err(|why| UsageError(format!("{flag}: {why}")))?;
        Ok(j)
    }

    /// What the journal knows of agent `i`'s part: for a segment the
    /// resumed coordinator cannot reach.
    pub fn known_of(&self, i: usize) -> String {
        let written = throng_result::rfc3339(self.written_unix_ms);
        match (
            self.figures.get(i).copied().flatten(),
            self.seqs.get(i).copied().unwrap_or(0),
        ) {
            (Some([ended, ok]), _) => {
                format!("its last live figures in the journal (of {written}): {ended} requests ({ok} ok)")
            }
            (None, 0) => format!("the journal (of {written}) has none of its live figures"),
            (None, seq) => format!("the journal (of {written}) has its live figures #{seq} but not their counts"),
        }
    }

    /// What `read` checks past the syntax.
    fn check(&self) -> Result<(), String> {
        let hint = "the file was changed, or is not a journal of this throng version; start a new run";
        if self.format != FORMAT {
            return Err(format!(
                "journal format {}, this throng reads {FORMAT}; {hint}",
                self.format
            ));
        }
        if self.run_id.is_empty()
            || self.run_id.len() > MAX_RUN_ID
            || !self.run_id.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(format!("its run id is not one a coordinator gives; {hint}"));
        }
        if self.agents.is_empty() || self.agents.len() > super::MAX_AGENTS {
            return Err(format!("{} agents; {hint}", self.agents.len()));
        }
        if self.seqs.len() != self.agents.len() {
            return Err(format!(
                "{} agents but {} sequence numbers; {hint}",
                self.agents.len(),
                self.seqs.len()
            ));
        }
        if !self.figures.is_empty() && self.figures.len() != self.agents.len() {
            return Err(format!(
                "{} agents but {} agents' figures; {hint}",
                self.agents.len(),
                self.figures.len()
            ));
        }
        if self.command.is_empty() {
            return Err(format!("no command; {hint}"));
        }
        if self.finished {
            return Err(format!(
                "this run was already merged{}; nothing to resume",
                self.json
                    .as_ref()
                    .map_or_else(String::new, |p| format!(" into '{}'", p.display()))
            ));
        }
        // Beyond what a clock can say: a run that starts or was written
        // more than a day from now.
        let far = super::now_ms().saturating_add(DAY_MS);
        if self.start_at_unix_ms > far || self.written_unix_ms > far {
            return Err(format!("its times are in the future; {hint}"));
        }
        Ok(())
    }
}

const DAY_MS: u64 = 24 * 3600 * 1000;

/// Where the journal of a run goes: `--journal`, or `--json` with
/// `.journal` appended; none without either.
pub fn path_for(journal: Option<&Path>, json: Option<&Path>) -> Option<PathBuf> {
    journal.map(Path::to_path_buf).or_else(|| {
        json.map(|j| {
            let mut name = j.as_os_str().to_os_string();
            name.push(".journal");
            PathBuf::from(name)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Journal {
        let mut j = Journal::new(
            "0123abcd",
            &["127.0.0.1:7001".into(), "127.0.0.1:7002".into()],
            &["http".into(), "http://x/".into()],
            super::super::now_ms(),
        );
        j.seqs = vec![4, 5];
        j
    }

    #[test]
    fn a_journal_is_written_whole_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.journal");
        let mut j = sample();
        j.write(&path).unwrap();
        assert_eq!(Journal::read(&path).unwrap(), j);
        assert!(!dir.path().join("run.journal.tmp").exists());
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        // What the run was started with comes back; a journal written
        // before it was kept reads as started without those flags.
        j.started_with.abort_on_fail = true;
        j.write(&path).unwrap();
        assert!(Journal::read(&path).unwrap().started_with.abort_on_fail);
        let mut old: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        old.as_object_mut().unwrap().remove("started_with");
        std::fs::write(&path, old.to_string()).unwrap();
        assert_eq!(Journal::read(&path).unwrap().started_with, StartedWith::default());
        j.finished = true;
        j.write(&path).unwrap();
        assert!(Journal::read(&path).unwrap_err().0.contains("already merged"));
    }

    #[test]
    fn hostile_journals_are_refused_clearly() {
        let e = Journal::read(Path::new("/dev/zero")).unwrap_err().0;
        assert!(
            e.starts_with("--resume /dev/zero: ") && e.contains("larger than the limit"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let text = serde_json::to_string(&sample()).unwrap();
        let cases = [
            (
                text.replace("\"seqs\":[4,5]", "\"seqs\":[1e308,5]"),
                "not a throng coordinate journal",
            ),
            (
                text.replace("\"seqs\":[4,5]", "\"seqs\":[4]"),
                "2 agents but 1 sequence numbers",
            ),
            (text.replace("0123abcd", "../../x"), "run id"),
            (
                text.replace("\"figures\":[null,null]", "\"figures\":[null]"),
                "2 agents but 1 agents' figures",
            ),
            ("garbage".to_string(), "not a throng coordinate journal"),
            (
                text.replace("\"finished\":false", "\"finished\":false,\"token\":\"t\""),
                "unknown field",
            ),
        ];
        for (text, want) in cases {
            std::fs::write(&path, &text).unwrap();
            let e = Journal::read(&path).unwrap_err().0;
            assert!(e.contains(want), "{want}: {e}");
        }
        let mut j = sample();
        j.start_at_unix_ms = u64::MAX;
        std::fs::write(&path, serde_json::to_string(&j).unwrap()).unwrap();
        assert!(Journal::read(&path).unwrap_err().0.contains("in the future"));
    }

    #[test]
    fn the_journal_goes_beside_json_unless_given() {
        assert_eq!(
            path_for(None, Some(Path::new("out/all.json"))),
            Some(PathBuf::from("out/all.json.journal"))
        );
        assert_eq!(
            path_for(Some(Path::new("j")), Some(Path::new("all.json"))),
            Some(PathBuf::from("j"))
        );
        assert_eq!(path_for(None, None), None);
    }
}
